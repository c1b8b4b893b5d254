"""Metrics of a streaming query: drops of records that sit at the same partition and offset of
two different topics are both counted; a drop point is counted inside Spark's generated code by
the jar's counter (``io.streamsdsl.jvm.DropCounter``), per micro-batch and logged as an
observation would be, and observed with ``observe()`` where the plan holds the point twice."""

from __future__ import annotations

from typing import Any

import pytest

import logging

from streamsdsl import Consumed, Serdes, SessionWindows, StreamsBuilder
from streamsdsl.compiler.columns import observation_name
from streamsdsl.runtime.metrics import QueryMetrics, dropped_in
from streamsdsl.runtime.streaming import start_streaming
from streamsdsl.testing.files import FileTopic
from tests._support import Collect

pytestmark = pytest.mark.spark

STRINGS = Consumed.with_serdes(Serdes.String(), Serdes.String())


def _merged(b: StreamsBuilder) -> Any:
    return b.stream("a", STRINGS).merge(b.stream("b", STRINGS))


def _run(spark: Any, tmp_path: Any, topology: Any, batches: list[tuple[str, list[tuple[Any, Any, int]]]]) -> Any:
    topic = FileTopic(str(tmp_path / "in"))
    for name, records in batches:
        topic.append(name, records, Serdes.String(), Serdes.String())
    out = Collect()
    query, _, metrics = start_streaming(topology, lambda n: topic.read_stream(spark, n.topics), out,
                                        checkpoint_location=str(tmp_path / "checkpoint"))
    try:
        query.processAllAvailable()
    finally:
        query.stop()
    return out, metrics.snapshot()


class TestDropsAtTheSamePositionOfTwoTopics:
    @pytest.mark.usefixtures("operator")
    def test_session_operator_counts_both_late_records(self, spark: Any, tmp_path: Any) -> None:
        """a-0 offset 1 and b-0 offset 1 are both too late for their session: two drops."""
        b = StreamsBuilder()
        _merged(b).group_by_key().windowed_by(SessionWindows.with_gap(10)).count().to_stream().to("out")
        out, metrics = _run(spark, tmp_path, b.build(), [
            ("a", [("k", "x", 100)]), ("b", [("k", "x", 100)]),
            ("a", [("k", "late", 0)]), ("b", [("k", "late", 0)]),
        ])
        assert metrics["dropped-records-total"] == 2.0
        assert [v for _, _, v, _ in out.records][-1] == 2

    def test_native_count_counts_both_null_keys(self, spark: Any, tmp_path: Any) -> None:
        """A null key at offset 1 of each topic: the native count drops and counts both."""
        b = StreamsBuilder()
        _merged(b).group_by_key().count().to_stream().to("out")
        out, metrics = _run(spark, tmp_path, b.build(), [
            ("a", [("k", "x", 100), (None, "x", 101)]), ("b", [("k", "x", 100), (None, "x", 101)]),
        ])
        assert metrics["dropped-records-total"] == 2.0
        assert metrics["input-records-total"] == 4.0
        assert [(k, v) for _, k, v, _ in out.records] == [("k", 1), ("k", 2)]


def _locate(node: str, position: int) -> tuple[str, int, int]:
    return "in", position >> 40, position & ((1 << 40) - 1)


class TestDropCounters:
    """The jar's counters in place of ``observe()`` (the session loads the jar)."""

    @pytest.mark.parametrize("counted", [True, False], ids=["counter", "observe"])
    def test_null_keys_counted_per_batch_in_generated_code_and_logged(self, spark: Any, tmp_path: Any,
                                                                       caplog: Any, monkeypatch: Any,
                                                                       counted: bool) -> None:
        """The same counts, progress and log lines from the jar's counter and from ``observe()``
        (``counts_drops`` off: as in a session without the jar)."""
        from streamsdsl.compiler.modes import StreamingLowering

        monkeypatch.setattr(StreamingLowering, "counts_drops", counted)
        b = StreamsBuilder()
        b.stream("a", STRINGS).group_by_key().count().to_stream().to("out")
        topology = b.build()
        count = next(n.name for n in topology.nodes if "AGGREGATE" in n.name)
        topic = FileTopic(str(tmp_path / "in"))
        topic.append("a", [("k", "x", 100), (None, "x", 101), (None, "y", 102)], Serdes.String(), Serdes.String())
        out = Collect()
        batches: list[tuple[int, int]] = []  # (input rows, dropped) of each batch, as its progress line counts
        metrics = QueryMetrics(on_progress=lambda progress, observed: batches.append(
            (int(progress.numInputRows), dropped_in(observed))), locate=_locate)
        query, compiled, _ = start_streaming(topology, lambda n: topic.read_stream(spark, n.topics), out,
                                             checkpoint_location=str(tmp_path / "checkpoint"), metrics=metrics)
        caplog.set_level(logging.WARNING, logger="streamsdsl")
        try:
            query.processAllAvailable()
            metrics.refresh()
            first = metrics.snapshot()["dropped-records-total"]
            topic.append("a", [(None, "z", 103), ("k", "w", 104)], Serdes.String(), Serdes.String())
            query.processAllAvailable()
        finally:
            query.stop()
        point = observation_name(count, "input")
        plan = compiled.output._jdf.queryExecution().analyzed().toString()
        if counted:
            assert set(compiled.counters) == {point}
            assert point not in plan and "streamsdsl_dropped_" in plan  # no observation: the counter
        else:
            assert compiled.counters == {}
            assert point in plan and "streamsdsl_dropped_" not in plan
        assert first == 2.0
        assert metrics.snapshot()["dropped-records-total"] == 3.0
        assert [(k, v) for _, k, v, _ in out.records] == [("k", 1), ("k", 2)]
        assert [b for b in batches if b[0]] == [(3, 2), (2, 1)]
        offsets = [r.getMessage().split("offset=[")[1].split("]")[0] for r in caplog.records
                   if "Skipping record due to null key or value" in r.getMessage()]
        assert offsets == ["1", "2", "3"]

    def test_a_point_the_plan_holds_twice_is_observed(self, spark: Any, tmp_path: Any, monkeypatch: Any) -> None:
        """A source read by two sinks: its deserialization drop point is in both branches of the
        plan, where a counter would count each bad record twice; Kafka Streams counts it once."""
        from streamsdsl.compiler import plan

        compiles: list[frozenset[str]] = []
        original = plan._compile

        def spy(topology: Any, raw_source: Any, options: Any) -> Any:
            compiles.append(options.observed_points)
            return original(topology, raw_source, options)

        monkeypatch.setattr(plan, "_compile", spy)
        b = StreamsBuilder()
        numbers = b.stream("a", Consumed.with_serdes(Serdes.String(), Serdes.Long()))
        numbers.to("x")
        numbers.map_values(lambda v: v + 1).to("y")
        topology = b.build()
        topic = FileTopic(str(tmp_path / "in"))
        topic.append("a", [("k", (1).to_bytes(8, "big"), 100), ("k", b"bad", 101)], Serdes.String(), Serdes.Bytes())
        out = Collect()
        query, compiled, metrics = start_streaming(
            topology, lambda n: topic.read_stream(spark, n.topics), out,
            checkpoint_location=str(tmp_path / "checkpoint"), deserialization_handler="log_and_continue")
        try:
            query.processAllAvailable()
        finally:
            query.stop()
        source = topology.nodes[0].name
        assert compiles == [frozenset(), {observation_name(source, "deserialize")}]  # counted, then observed
        assert compiled.counters == {}
        assert metrics.snapshot()["dropped-records-total"] == 1.0
        assert sorted((t, v) for t, rs in out.by_topic.items() for _, _, v, _ in rs) == [("x", 1), ("y", 2)]
