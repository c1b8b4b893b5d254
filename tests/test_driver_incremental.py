"""The TopologyTestDriver processes incrementally: each read runs only the records piped since
the previous read, on the state that read left, so user functions run once per record."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from streamsdsl import Consumed, EmitStrategy, Serdes, SessionWindow, SessionWindows, StreamsBuilder, Windowed
from streamsdsl.runtime.driver import TopologyTestDriver

pytestmark = pytest.mark.spark

STRINGS = Consumed.with_serdes(Serdes.String(), Serdes.String())


def _appender(path: Path) -> Any:
    """A function that appends its argument to ``path`` (user functions run in Spark's Python
    workers: a side effect is observed through a file, not through a list in the test)."""
    def append(text: str) -> None:
        with open(path, "a", encoding="utf-8") as f:
            f.write(text + "\n")

    return append


class TestIncrementalDriver:
    def test_peek_runs_once_per_record_with_a_read_after_each_pipe(self, spark: Any, tmp_path: Path) -> None:
        """Three records, a read after each pipe: peek ran exactly once per record, in order."""
        log = tmp_path / "peek.log"
        note = _appender(log)
        b = StreamsBuilder()
        b.stream("in", STRINGS).peek(lambda k, v: note(v)).to("out")
        with TopologyTestDriver(b.build(), spark=spark) as d:
            i, o = d.create_input_topic("in"), d.create_output_topic("out")
            for n in range(3):
                i.pipe_input("k", f"v{n}", n + 1)
                assert o.read_values_to_list() == [f"v{n}"]
        assert log.read_text().split() == ["v0", "v1", "v2"]

    def test_aggregator_runs_once_per_record_and_state_carries_over(self, spark: Any, tmp_path: Path) -> None:
        """An aggregator with a side effect runs once per record across reads, and the aggregate
        continues from the previous read's state."""
        log = tmp_path / "agg.log"
        note = _appender(log)

        def add(key: str, value: str, agg: str) -> str:
            note(value)
            return agg + value

        b = StreamsBuilder()
        b.stream("in", STRINGS).group_by_key().aggregate(lambda: "", add).to_stream().to("out")
        with TopologyTestDriver(b.build(), spark=spark) as d:
            i, o = d.create_input_topic("in"), d.create_output_topic("out")
            i.pipe_input("k", "a", 1)
            assert o.read_key_values_to_list() == [("k", "a")]
            i.pipe_input("k", "b", 2)
            i.pipe_input("j", "x", 3)
            assert o.read_key_values_to_list() == [("k", "ab"), ("j", "x")]
            i.pipe_input("k", "c", 4)
            assert o.read_key_values_to_list() == [("k", "abc")]
        # once per record (keys are processed in parallel Spark tasks: the order across keys varies)
        assert sorted(log.read_text().split()) == ["a", "b", "c", "x"]

    @pytest.mark.parametrize("fan_out", [False, True], ids=["one-path", "two-sinks"])
    def test_carried_state_by_observation_or_cache_runs_the_aggregator_once(
            self, spark: Any, tmp_path: Path, fan_out: bool) -> None:
        """The carried state comes back with the run's own job (one path to the output) or from a
        cached result (the aggregate reaches two sinks): either way the aggregator runs once per
        record and the next read continues from the state."""
        from streamsdsl.compiler.carry import ObservedCarry

        log = tmp_path / "agg.log"
        note = _appender(log)

        def add(key: str, value: str, agg: str) -> str:
            note(value)
            return agg + value

        b = StreamsBuilder()
        table = b.stream("in", STRINGS).group_by_key().aggregate(lambda: "", add)
        table.to_stream().to("out")
        if fan_out:
            table.to_stream().map_values(str.upper).to("upper")
        with TopologyTestDriver(b.build(), engine="spark", spark=spark) as d:
            i, o = d.create_input_topic("in"), d.create_output_topic("out")
            i.pipe_input("k", "a", 1)
            assert o.read_key_values_to_list() == [("k", "a")]
            carried = d._engine._compiled.replay.carried_states  # type: ignore[union-attr]
            i.pipe_input("k", "b", 2)
            assert o.read_key_values_to_list() == [("k", "ab")]
            if fan_out:
                assert d.create_output_topic("upper").read_values_to_list() == ["A", "AB"]
        assert [isinstance(c, ObservedCarry) for c in carried.values()] == [not fan_out]
        assert sorted(log.read_text().split()) == ["a", "b"]

    def test_count_continues_across_reads(self, spark: Any) -> None:
        """A native count continues from the earlier reads' counts, with ts = max record ts."""
        b = StreamsBuilder()
        b.stream("in", STRINGS).group_by_key().count().to_stream().to("out")
        with TopologyTestDriver(b.build(), spark=spark) as d:
            i, o = d.create_input_topic("in"), d.create_output_topic("out", value_serde=Serdes.Long())
            i.pipe_input("k", "a", 5)
            assert [(r.key, r.value, r.timestamp) for r in o.read_records_to_list()] == [("k", 1, 5)]
            i.pipe_input("k", "b", 3)
            assert [(r.key, r.value, r.timestamp) for r in o.read_records_to_list()] == [("k", 2, 5)]

    @pytest.mark.usefixtures("operator")
    def test_on_close_session_closed_by_a_later_read_is_emitted_once(self, spark: Any) -> None:
        """A session still open at one read is emitted at the read whose record closes it, once;
        stream time carries over between reads."""
        b = StreamsBuilder()
        (b.stream("in", STRINGS).group_by_key().windowed_by(SessionWindows.with_gap(5))
         .emit_strategy(EmitStrategy.on_window_close()).count().to_stream().to("out"))
        with TopologyTestDriver(b.build(), spark=spark) as d:
            i, o = d.create_input_topic("in"), d.create_output_topic("out")
            i.pipe_input("a", "x", 0)
            i.pipe_input("a", "x", 3)
            assert o.read_records_to_list() == []
            i.pipe_input("b", "x", 9)  # stream time 9 = 3 + 5 + 1: a's session [0, 3] closes
            assert [(r.key, r.value, r.timestamp) for r in o.read_records_to_list()] == [
                (Windowed("a", SessionWindow(0, 3)), 2, 3)]
            i.pipe_input("b", "x", 10)
            assert o.read_records_to_list() == []
            assert d.metrics()["emit-final-records-total"] == 1.0
