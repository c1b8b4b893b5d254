"""KTable.suppress: API and validation (bounded buffers refused), describe() (Kafka's
SuppressTopologyTest), the TopologyTestDriver (Kafka's SuppressScenarioTest final-results
scenarios for time, session and sliding windows and its until_time_limit scenarios, read after
each pipe, checked against `streamsdsl.semantics.suppress`) and streaming queries restarted from
their checkpoint (until_time_limit refused there)."""

from __future__ import annotations

import contextlib
from datetime import timedelta
from typing import Any, Iterator

import pytest

from streamsdsl import (
    BufferConfig,
    Consumed,
    InvalidArgumentError,
    InvalidTypeError,
    Materialized,
    OperationNotDefinedError,
    Serdes,
    SessionWindows,
    SlidingWindows,
    StreamsBuilder,
    Suppressed,
    EmitStrategy,
    TimeWindows,
)
from streamsdsl import ir
from streamsdsl.semantics.suppress import Suppression, suppress_reference_run
from streamsdsl.semantics.tables import Change

STR = Consumed.with_serdes(Serdes.String(), Serdes.String())
FINAL = Suppressed.until_window_closes(Suppressed.BufferConfig.unbounded())


def _counts(windows: Any = None, **count: Any) -> tuple[StreamsBuilder, Any]:
    b = StreamsBuilder()
    grouped = b.stream("input", STR).group_by_key()
    return b, grouped.windowed_by(windows or TimeWindows.of_size_and_grace(2, 1)).count(**count)


class TestSuppressedApi:
    def test_construction(self) -> None:
        """Suppressed is immutable and validated when written; BufferConfig is also nested."""
        assert Suppressed.BufferConfig is BufferConfig
        assert FINAL == Suppressed("until_window_closes", BufferConfig.unbounded())
        named = FINAL.with_name("final")
        assert (named.name, FINAL.name) == ("final", None)
        limit = Suppressed.until_time_limit(timedelta(seconds=2), BufferConfig.unbounded())
        assert limit.time_limit == 2000

    def test_invalid_values(self) -> None:
        """Each invalid value fails when written, with a message that says what to write."""
        with pytest.raises(InvalidTypeError) as e:
            Suppressed.until_window_closes()
        assert str(e.value) == ("until_window_closes() needs buffer_config: until_window_closes(buffer_config), "
                                "e.g. until_window_closes(Suppressed.BufferConfig.unbounded()).")
        with pytest.raises(InvalidTypeError, match="'buffer_config' must be a BufferConfig"):
            Suppressed.until_window_closes("unbounded")  # type: ignore[arg-type]
        with pytest.raises(InvalidArgumentError) as e:
            Suppressed.until_time_limit(-5, BufferConfig.unbounded())
        assert str(e.value) == ("'time_to_wait_for_more_events' must be >= 0 ms (got -5). Use 0 to forward each "
                                "update on the next record.")
        with pytest.raises(InvalidArgumentError, match="Only an unbounded suppression buffer is implemented"):
            BufferConfig("max_records")
        with pytest.raises(InvalidArgumentError, match="takes no time limit"):
            Suppressed("until_window_closes", BufferConfig.unbounded(), 5)
        with pytest.raises(InvalidArgumentError, match="Kafka-legal|name"):
            FINAL.with_name("bad name!")
        with pytest.raises(InvalidArgumentError, match="'mode' must be"):
            ir.SuppressNode("s", ("p",), mode="final", store="st")

    def test_bounded_buffers(self) -> None:
        """Bounded buffers are validated (argument, unit, fix), then refused: Kafka's bound spans
        all keys of the suppress node, which keyed operators cannot enforce; shut_down_when_full /
        emit_early_when_full of an unbounded buffer (never full) are the buffer itself."""
        with pytest.raises(InvalidArgumentError) as e:
            BufferConfig.max_records(0)
        assert str(e.value) == ("'record_limit' must be an int >= 1 (records; got 0). Use e.g. "
                                "BufferConfig.max_records(1000), or BufferConfig.unbounded().")
        with pytest.raises(InvalidArgumentError, match="'byte_limit' must be an int >= 1 \\(bytes; got -1\\)"):
            BufferConfig.max_bytes(-1)
        with pytest.raises(OperationNotDefinedError, match="max_records\\(1\\) is not implemented: Kafka bounds .* "
                                                           "Use BufferConfig.unbounded\\(\\)."):
            BufferConfig.max_records(1)
        with pytest.raises(OperationNotDefinedError, match="max_bytes\\(200\\) is not implemented"):
            BufferConfig.unbounded().with_max_bytes(200)
        unbounded = BufferConfig.unbounded()
        assert unbounded.shut_down_when_full() == unbounded.emit_early_when_full() == unbounded

    def test_table_kinds(self) -> None:
        """suppress(until_window_closes) needs a windowed aggregation's table (time, session or
        sliding windows) that emits on update; anything else fails when written, naming the fix."""
        with pytest.raises(InvalidTypeError, match="needs a windowed KTable"):
            StreamsBuilder().table("t").suppress(FINAL)
        for windows in (SessionWindows.of_inactivity_gap_and_grace(5, 0), SlidingWindows.of_time_difference_and_grace(5, 0)):
            assert _counts(windows)[1].suppress(FINAL).windows == windows
        with pytest.raises(OperationNotDefinedError, match="must directly follow the windowed"):
            _counts()[1].filter(lambda k, v: True).suppress(FINAL)
        b = StreamsBuilder()
        closing = b.stream("input").group_by_key().windowed_by(TimeWindows.of_size_with_no_grace(2)).emit_strategy(
            EmitStrategy.on_window_close()).count()
        with pytest.raises(OperationNotDefinedError, match="already emits on window close"):
            closing.suppress(FINAL)
        with pytest.raises(InvalidTypeError, match="'suppressed' must be a Suppressed"):
            _counts()[1].suppress("final")


class TestSuppressDescribe:
    def test_anonymous(self) -> None:
        """SuppressTopologyTest's ANONYMOUS_INTERMEDIATE_TOPOLOGY numbering: KTABLE-SUPPRESS,
        then its store KTABLE-SUPPRESS-STATE-STORE."""
        b, counts = _counts()
        counts.suppress(FINAL).to_stream().to("output")
        assert b.build().describe() == (
            "Topologies:\n"
            "   Sub-topology: 0\n"
            "    Source: KSTREAM-SOURCE-0000000000 (topics: [input])\n"
            "      --> KSTREAM-AGGREGATE-0000000002\n"
            "    Processor: KSTREAM-AGGREGATE-0000000002 (stores: [KSTREAM-AGGREGATE-STATE-STORE-0000000001])\n"
            "      --> KTABLE-SUPPRESS-0000000003\n"
            "      <-- KSTREAM-SOURCE-0000000000\n"
            "    Processor: KTABLE-SUPPRESS-0000000003 (stores: [KTABLE-SUPPRESS-STATE-STORE-0000000004])\n"
            "      --> KTABLE-TOSTREAM-0000000005\n"
            "      <-- KSTREAM-AGGREGATE-0000000002\n"
            "    Processor: KTABLE-TOSTREAM-0000000005 (stores: [])\n"
            "      --> KSTREAM-SINK-0000000006\n"
            "      <-- KTABLE-SUPPRESS-0000000003\n"
            "    Sink: KSTREAM-SINK-0000000006 (topic: output)\n"
            "      <-- KTABLE-TOSTREAM-0000000005\n"
            "\n"
        )

    def test_named(self) -> None:
        """SuppressTopologyTest's NAMED topology: a named suppression takes no index; its store
        is <name>-store."""
        b, counts = _counts(materialized=Materialized.as_("counts"))
        counts.suppress(FINAL.with_name("asdf")).to_stream().to("output")
        text = b.build().describe()
        assert ("    Processor: asdf (stores: [asdf-store])\n"
                "      --> KTABLE-TOSTREAM-0000000002\n"
                "      <-- KSTREAM-AGGREGATE-0000000001\n") in text
        assert "    Sink: KSTREAM-SINK-0000000003 (topic: output)\n" in text


    def test_time_limit_of_a_source_table(self) -> None:
        """until_time_limit on a table of plain keys: KTABLE-SUPPRESS after KTABLE-SOURCE, with
        its buffer store (a named one is <name>-store)."""
        b = StreamsBuilder()
        b.table("t").suppress(Suppressed.until_time_limit(10, BufferConfig.unbounded())).to_stream().to("out")
        assert b.build().describe() == (
            "Topologies:\n"
            "   Sub-topology: 0\n"
            "    Source: KSTREAM-SOURCE-0000000001 (topics: [t])\n"
            "      --> KTABLE-SOURCE-0000000002\n"
            "    Processor: KTABLE-SOURCE-0000000002 (stores: [])\n"
            "      --> KTABLE-SUPPRESS-0000000003\n"
            "      <-- KSTREAM-SOURCE-0000000001\n"
            "    Processor: KTABLE-SUPPRESS-0000000003 (stores: [KTABLE-SUPPRESS-STATE-STORE-0000000004])\n"
            "      --> KTABLE-TOSTREAM-0000000005\n"
            "      <-- KTABLE-SOURCE-0000000002\n"
            "    Processor: KTABLE-TOSTREAM-0000000005 (stores: [])\n"
            "      --> KSTREAM-SINK-0000000006\n"
            "      <-- KTABLE-SUPPRESS-0000000003\n"
            "    Sink: KSTREAM-SINK-0000000006 (topic: out)\n"
            "      <-- KTABLE-TOSTREAM-0000000005\n"
            "\n"
        )

    def test_session_windows_named(self) -> None:
        """A suppressed session-windowed count: KTABLE-SUPPRESS after KSTREAM-AGGREGATE, as
        for time windows."""
        b, counts = _counts(SessionWindows.of_inactivity_gap_and_grace(5, 0))
        counts.suppress(FINAL.with_name("final")).to_stream().to("output")
        text = b.build().describe()
        assert ("    Processor: KSTREAM-AGGREGATE-0000000002 (stores: [KSTREAM-AGGREGATE-STATE-STORE-0000000001])\n"
                "      --> final\n") in text
        assert "    Processor: final (stores: [final-store])\n      --> KTABLE-TOSTREAM-0000000003\n" in text


def _final_topology(windows: Any) -> Any:
    b = StreamsBuilder()
    counts = b.stream("input", STR).group_by_key().windowed_by(windows).count()
    counts.suppress(FINAL).to_stream().to("output-suppressed")
    counts.to_stream().to("output-raw")
    return b.build()


def _read(topic: Any) -> list[tuple[Any, int, int, Any, int]]:
    return [(r.key.key, r.key.window.start, r.key.window.end, r.value, r.timestamp)
            for r in topic.read_records_to_list()]


def _reference(raw: list[tuple[Any, int, int, Any, int]], grace: int,
               session_gap: int | None = None) -> list[tuple[Any, int, int, Any, int]]:
    """What Kafka's suppress node (`suppress_reference_run`) forwards for the raw updates."""
    run = suppress_reference_run([(k, (s, e), Change(v), ts) for k, s, e, v, ts in raw],
                                 Suppression.until_window_closes(grace, session_gap=session_gap))
    return [(o.key, o.window[0], o.window[1], o.change.new, o.timestamp) for o in run]  # type: ignore[index]


@pytest.mark.spark
class TestSuppressDriver:
    @pytest.mark.streaming_host
    def test_final_results_for_time_windows(self, spark: Any) -> None:
        """SuppressScenarioTest.shouldSupportFinalResultsForTimeWindows (size 2, grace 1): one
        result per window once stream time reaches end + grace, with the window's latest count
        and timestamp; the late record (ts 0 after stream time 5) is dropped."""
        from streamsdsl.runtime.driver import TopologyTestDriver

        with TopologyTestDriver(_final_topology(TimeWindows.of_size_and_grace(2, 1)), spark=spark) as d:
            inp = d.create_input_topic("input", Serdes.String(), Serdes.String())
            raw, final = d.create_output_topic("output-raw"), d.create_output_topic("output-suppressed")
            seen: list[tuple[Any, ...]] = []
            for ts in (0, 1, 2):
                inp.pipe_input("k1", "v1", ts)
            seen += _read(raw)
            assert _read(final) == []
            inp.pipe_input("k1", "v1", 1)
            inp.pipe_input("k1", "v1", 0)
            seen += _read(raw)
            assert _read(final) == []  # stream time 2 < 2 + 1
            inp.pipe_input("k1", "v1", 5)
            seen += _read(raw)
            assert _read(final) == [("k1", 0, 2, 4, 1), ("k1", 2, 4, 1, 2)]
            inp.pipe_input("k1", "v1", 0)  # out of the grace period: dropped
            seen += _read(raw)
            assert _read(final) == []
            assert seen == [("k1", 0, 2, 1, 0), ("k1", 0, 2, 2, 1), ("k1", 2, 4, 1, 2), ("k1", 0, 2, 3, 1),
                            ("k1", 0, 2, 4, 1), ("k1", 4, 6, 1, 5)]
            assert _reference(seen, 1) == [("k1", 0, 2, 4, 1), ("k1", 2, 4, 1, 2)]
            assert d.metrics()["dropped-records-total"] == 2.0  # each of the two outputs drops the record

    def test_large_jump_and_several_keys(self, spark: Any) -> None:
        """shouldSupportFinalResultsForTimeWindowsWithLargeJump (grace 2), plus a second key:
        windows released by one record come out in (window end, key) order, as the suppress
        core orders them."""
        from streamsdsl.runtime.driver import TopologyTestDriver

        with TopologyTestDriver(_final_topology(TimeWindows.of_size_and_grace(2, 2)), spark=spark) as d:
            inp = d.create_input_topic("input", Serdes.String(), Serdes.String())
            raw, final = d.create_output_topic("output-raw"), d.create_output_topic("output-suppressed")
            for k, ts in (("k1", 0), ("k1", 1), ("k1", 2), ("k1", 0), ("k1", 3), ("k1", 0)):
                inp.pipe_input(k, "v1", ts)
            assert _read(final) == []
            inp.pipe_input("k1", "v1", 4)
            assert _read(final) == [("k1", 0, 2, 4, 1)]
            inp.pipe_input("k1", "v1", 0)  # the window closed: dropped
            inp.pipe_input("k0", "v1", 5)
            inp.pipe_input("k1", "v1", 30)
            got = _read(final)
            assert got == [("k1", 2, 4, 2, 3), ("k0", 4, 6, 1, 5), ("k1", 4, 6, 1, 4)]
            assert _reference(_read(raw), 2) == [("k1", 0, 2, 4, 1), *got]

    def test_only_the_suppressed_table_is_read(self, spark: Any) -> None:
        """When nothing else reads the aggregation, the suppress node runs it in its place; the
        aggregation's store still reads as the aggregation's (closed windows have left it), and
        a second run of the driver continues from the first one's state."""
        from streamsdsl.runtime.driver import TopologyTestDriver

        b, counts = _counts(materialized=Materialized.as_("counts"))
        counts.suppress(FINAL).to_stream().to("output")
        with TopologyTestDriver(b.build(), spark=spark) as d:
            inp = d.create_input_topic("input", Serdes.String(), Serdes.String())
            out = d.create_output_topic("output")
            for k, ts in (("k1", 0), ("k2", 1), ("k1", 2)):
                inp.pipe_input(k, "v", ts)
            assert _read(out) == []
            store = d.get_window_store("counts")
            assert [(kv.key.key, kv.key.window.start, kv.value) for kv in store.all()] == [
                ("k1", 0, 1), ("k1", 2, 1), ("k2", 0, 1)]
            inp.pipe_input("k2", "v", 3)
            assert _read(out) == [("k1", 0, 2, 1, 0), ("k2", 0, 2, 1, 1)]
            assert [(kv.key.key, kv.key.window.start, kv.value) for kv in store.all()] == [("k1", 2, 1), ("k2", 2, 1)]
            assert d.metrics()["emit-final-records-total"] == 2.0


@pytest.mark.spark
class TestSuppressSessionAndSlidingDriver:
    def test_final_results_for_session_windows(self, spark: Any) -> None:
        """SuppressScenarioTest.shouldSupportFinalResultsForSessionWindows (gap 5, no grace):
        [k1@0/5] is released at stream time 10 (k2@11), [k2@11/11] at 16 (k1@30); the late
        k1@5 is dropped. Kafka's test disables the store's cache, so its raw output also has
        the tombstone [k1@0/5] null before [k1@0/5] 3 (k1@1 re-writes the same session); our
        update output is the cached store's (the tombstone and update of one window collapse)."""
        from streamsdsl.runtime.driver import TopologyTestDriver

        with TopologyTestDriver(_final_topology(SessionWindows.of_inactivity_gap_with_no_grace(5)), spark=spark) as d:
            inp = d.create_input_topic("input", Serdes.String(), Serdes.String())
            raw, final = d.create_output_topic("output-raw"), d.create_output_topic("output-suppressed")
            for k, ts in (("k1", 0), ("k1", 5), ("k1", 1), ("k2", 11), ("k1", 5), ("k1", 30)):
                inp.pipe_input(k, "v1", ts)
            seen = _read(raw)
            assert seen == [("k1", 0, 0, 1, 0), ("k1", 0, 0, None, 0), ("k1", 0, 5, 2, 5), ("k1", 0, 5, 3, 5),
                            ("k2", 11, 11, 1, 11), ("k1", 30, 30, 1, 30)]
            assert _read(final) == [("k1", 0, 5, 3, 5), ("k2", 11, 11, 1, 11)]
            assert _reference(seen, 0, session_gap=5) == [("k1", 0, 5, 3, 5), ("k2", 11, 11, 1, 11)]

    def test_final_results_for_sliding_windows(self, spark: Any) -> None:
        """SuppressScenarioTest.shouldSupportFinalResultsForSlidingWindows (difference 5, grace
        15): every window is released by k1@90, in (end, key) order; k1@5 and k1@7 still update
        [5,10], [6,11] and [8,13] (stream time 24, close time 9). Kafka's test sorts the raw
        output by key and timestamp; here it is compared in the order it came out."""
        from streamsdsl.runtime.driver import TopologyTestDriver

        windows = SlidingWindows.of_time_difference_and_grace(5, 15)
        with TopologyTestDriver(_final_topology(windows), spark=spark) as d:
            inp = d.create_input_topic("input", Serdes.String(), Serdes.String())
            raw, final = d.create_output_topic("output-raw"), d.create_output_topic("output-suppressed")
            for ts in (10, 11, 10, 13, 10, 24):
                inp.pipe_input("k1", "v1", ts)
            assert _read(final) == []
            for ts in (5, 7, 90):
                inp.pipe_input("k1", "v1", ts)
            seen = _read(raw)
            assert sorted(seen, key=lambda r: (f"[{r[0]}@{r[1]}/{r[2]}]", r[4])) == [
                ("k1", 11, 16, 1, 11), ("k1", 11, 16, 2, 13), ("k1", 12, 17, 1, 13), ("k1", 19, 24, 1, 24),
                ("k1", 5, 10, 1, 10), ("k1", 5, 10, 2, 10), ("k1", 5, 10, 3, 10), ("k1", 5, 10, 4, 10),
                ("k1", 5, 10, 5, 10), ("k1", 6, 11, 2, 11), ("k1", 6, 11, 3, 11), ("k1", 6, 11, 4, 11),
                ("k1", 6, 11, 5, 11), ("k1", 8, 13, 4, 13), ("k1", 8, 13, 5, 13), ("k1", 85, 90, 1, 90)]
            expected = [("k1", 5, 10, 5, 10), ("k1", 6, 11, 5, 11), ("k1", 8, 13, 5, 13), ("k1", 11, 16, 2, 13),
                        ("k1", 12, 17, 1, 13), ("k1", 19, 24, 1, 24)]
            assert _read(final) == expected
            assert _reference(seen, 15) == expected


    def test_sliding_window_released_then_written_again(self, spark: Any) -> None:
        """Difference 5, no grace: a@16's first write ([12,17]) takes stream time to 16, which
        releases [11,16] with its count 2; a@16 then writes [11,16] again and the suppress node
        releases it at once with count 3 (Kafka forwards both, in this order). b@30 releases the
        rest in (end, key) order. The same as the reference suppress node on the changelog."""
        from streamsdsl.runtime.driver import TopologyTestDriver

        with TopologyTestDriver(_final_topology(SlidingWindows.of_time_difference_with_no_grace(5)), spark=spark) as d:
            inp = d.create_input_topic("input", Serdes.String(), Serdes.String())
            for k, ts in (("a", 10), ("a", 11), ("a", 12), ("a", 16), ("b", 30)):
                inp.pipe_input(k, "v", ts)
            expected = [("a", 5, 10, 1, 10), ("a", 6, 11, 2, 11), ("a", 7, 12, 3, 12), ("a", 11, 16, 2, 12),
                        ("a", 11, 16, 3, 16), ("a", 12, 17, 2, 16), ("a", 13, 18, 1, 16), ("b", 25, 30, 1, 30)]
            assert _read(d.create_output_topic("output-suppressed")) == expected
            assert _reference(_read(d.create_output_topic("output-raw")), 0) == expected

    @pytest.mark.parametrize("engine", ["direct", "spark"])
    def test_one_input_records_writes_of_a_window_released_once(self, spark: Any, engine: str) -> None:
        """Oracle cases 67bb539ac621 and e5a630e8b794 (difference 5, no grace, the record cache
        on): a@26 writes [21,26] twice (a@20's right window and its own left window); 'x,y,z'
        at 45 reaches the count as three records, each writing [40,45]. Kafka's record cache
        forwards each window once per input record, with its last value, and the suppress
        node releases it once."""
        from streamsdsl.runtime.driver import TopologyTestDriver

        b = StreamsBuilder()
        (b.stream("input", STR).flat_map_values(lambda v: v.split(",")).group_by_key()
         .windowed_by(SlidingWindows.of_time_difference_with_no_grace(5)).count()
         .suppress(FINAL).to_stream().to("output-suppressed"))
        with TopologyTestDriver(b.build(), engine=engine, spark=spark if engine == "spark" else None) as d:
            inp = d.create_input_topic("input", Serdes.String(), Serdes.String())
            for v, ts in (("v", 19), ("v", 20), ("v", 26), ("x,y,z", 45)):
                inp.pipe_input("a", v, ts)
            assert _read(d.create_output_topic("output-suppressed")) == [
                ("a", 14, 19, 1, 19), ("a", 15, 20, 2, 20), ("a", 20, 25, 1, 20), ("a", 21, 26, 1, 26),
                ("a", 40, 45, 3, 45)]

    def test_released_windows_written_again(self, spark: Any) -> None:
        """Gap 5, no grace: b@5 takes stream time to 5 and releases [a@0/0]; a@5 still merges it
        (0 is not < close time 0) into [a@0/5], released at stream time 10 with [b@5/5] (end,
        then key). Kafka's suppress drops the tombstone of [a@0/0]: no retraction."""
        from streamsdsl.runtime.driver import TopologyTestDriver

        with TopologyTestDriver(_final_topology(SessionWindows.of_inactivity_gap_with_no_grace(5)), spark=spark) as d:
            inp = d.create_input_topic("input", Serdes.String(), Serdes.String())
            final = d.create_output_topic("output-suppressed")
            for k, ts in (("a", 0), ("b", 5)):
                inp.pipe_input(k, "v", ts)
            assert _read(final) == [("a", 0, 0, 1, 0)]
            for k, ts in (("a", 5), ("c", 10)):
                inp.pipe_input(k, "v", ts)
            assert _read(final) == [("a", 0, 5, 2, 5), ("b", 5, 5, 1, 5)]
            raw = _read(d.create_output_topic("output-raw"))
            assert _reference(raw, 0, session_gap=5) == [("a", 0, 0, 1, 0), ("a", 0, 5, 2, 5), ("b", 5, 5, 1, 5)]


def _grouped_counts(suppressed: Any) -> Any:
    """SuppressScenarioTest's table -> groupBy((k, v) -> (v, k)) -> count(), suppressed to
    output-suppressed and unsuppressed to output-raw."""
    b = StreamsBuilder()
    counts = b.table("input", STR).group_by(lambda k, v: (v, k)).count()
    counts.suppress(suppressed).to_stream().to("output-suppressed")
    counts.to_stream().to("output-raw")
    return b.build()


@contextlib.contextmanager
def _scenario_driver(spark: Any, limit: int) -> Iterator[tuple[Any, Any, Any]]:
    """A driver on `_grouped_counts` with until_time_limit(``limit``), after SuppressScenarioTest's
    first three records (k1=v1@0, k1=v2@1, k2=v1@2): its input, output-raw, output-suppressed."""
    from streamsdsl.runtime.driver import TopologyTestDriver

    with TopologyTestDriver(_grouped_counts(Suppressed.until_time_limit(limit, BufferConfig.unbounded())),
                            spark=spark) as d:
        inp = d.create_input_topic("input", Serdes.String(), Serdes.String())
        for k, v, ts in (("k1", "v1", 0), ("k1", "v2", 1), ("k2", "v1", 2)):
            inp.pipe_input(k, v, ts)
        yield inp, d.create_output_topic("output-raw"), d.create_output_topic("output-suppressed")


def _plain(topic: Any) -> list[tuple[Any, Any, int]]:
    return [(r.key, r.value, r.timestamp) for r in topic.read_records_to_list()]


@pytest.mark.spark
class TestSuppressTimeLimitDriver:
    def test_intermediate_events_with_time_limit(self, spark: Any) -> None:
        """SuppressScenarioTest.shouldSuppressIntermediateEventsWithTimeLimit (untilTimeLimit(2)):
        v1 is buffered at 0 and released at stream time 2 with its latest count and timestamp
        (its buffer time stays 0); v2 (buffered at 1) at 3; tick, first buffered at 3, is still
        held at 4 although it was updated at 4."""
        with _scenario_driver(spark, 2) as (inp, raw, final):
            assert _plain(raw) == [("v1", 1, 0), ("v1", 0, 1), ("v2", 1, 1), ("v1", 1, 2)]
            assert _plain(final) == [("v1", 1, 2)]
            inp.pipe_input("tick", "tick", 3)
            assert _plain(raw) == [("tick", 1, 3)]
            assert _plain(final) == [("v2", 1, 1)]
            inp.pipe_input("tick", "tock", 4)
            assert _plain(raw) == [("tick", 0, 4), ("tock", 1, 4)]
            assert _plain(final) == []

    def test_zero_time_limit_emits_immediately(self, spark: Any) -> None:
        """SuppressScenarioTest.shouldImmediatelyEmitEventsWithZeroEmitAfter (untilTimeLimit(0)):
        every update is forwarded with the record that made it, in order, the update to 0 of a
        group included."""
        with _scenario_driver(spark, 0) as (inp, raw, final):
            expected = [("v1", 1, 0), ("v1", 0, 1), ("v2", 1, 1), ("v1", 1, 2)]
            assert _plain(raw) == expected
            assert _plain(final) == expected
            inp.pipe_input("x", "x", 3)
            assert _plain(final) == [("x", 1, 3)]
            inp.pipe_input("x", "y", 4)
            assert _plain(final) == [("x", 0, 4), ("y", 1, 4)]

    def test_before_join_and_tombstones(self, spark: Any) -> None:
        """SuppressScenarioTest.shouldWorkBeforeJoinRight's suppressed side (untilTimeLimit(10)
        on a source table): B@0 and A@0 are released by the tick at 10 in (buffer time, key)
        order; A's update at 11 and its tombstone at 15 keep buffer time 11, and the tombstone
        is forwarded at stream time 21 (until_time_limit forwards tombstones), after tick (buffer time
        10), which carries its latest value and timestamp."""
        from streamsdsl.runtime.driver import TopologyTestDriver

        b = StreamsBuilder()
        b.table("right", STR).suppress(Suppressed.until_time_limit(10, BufferConfig.unbounded())).to_stream().to("out")
        with TopologyTestDriver(b.build(), spark=spark) as d:
            inp = d.create_input_topic("right", Serdes.String(), Serdes.String())
            out = d.create_output_topic("out")
            inp.pipe_input("B", "1", 0)
            inp.pipe_input("A", "1", 0)
            assert _plain(out) == []
            inp.pipe_input("tick", "tick", 10)
            assert _plain(out) == [("A", "1", 0), ("B", "1", 0)]
            inp.pipe_input("A", "2", 11)
            inp.pipe_input("A", None, 15)
            assert _plain(out) == []
            inp.pipe_input("tick", "tick1", 21)
            assert _plain(out) == [("tick", "tick1", 21), ("A", None, 15)]

    def test_refused_on_a_windowed_table(self) -> None:
        """A windowed table's until_time_limit is refused when written, naming the fix."""
        with pytest.raises(OperationNotDefinedError, match="of a windowed table is not implemented yet"):
            _counts()[1].suppress(Suppressed.until_time_limit(10, BufferConfig.unbounded()))


@pytest.mark.spark
class TestSuppressStreaming:
    def test_time_limit_across_micro_batches_and_restart(self, spark: Any, tmp_path: Any) -> None:
        """suppress(until_time_limit(10)) of a source table on a streaming query, the input of
        `test_before_join_and_tombstones` one file per micro-batch, stopped and restarted from the
        checkpoint in the middle: B and A (buffered at 0) come out once the watermark reaches 10,
        on their timers; after the restart tick's update at 21 releases it at once (its buffer
        time, 10, is 11 ms behind), and A's tombstone (buffer time 11) on its timer at
        watermark 21. The same records as the driver's."""
        from streamsdsl.runtime.driver import TopologyTestDriver
        from streamsdsl.runtime.streaming import await_event_time_timers, start_streaming
        from streamsdsl.testing.files import FileTopic
        from tests._support import Collect

        b = StreamsBuilder()
        b.table("right", STR).suppress(Suppressed.until_time_limit(10, BufferConfig.unbounded())).to_stream().to("out")
        topology = b.build()
        files = [[("B", "1", 0), ("A", "1", 0)], [("tick", "tick", 10)], [("A", "2", 11), ("A", None, 15)],
                 [("tick", "tick1", 21)]]
        with TopologyTestDriver(topology) as d:
            inp = d.create_input_topic("right", Serdes.String(), Serdes.String())
            for records in files:
                for k, v, ts in records:
                    inp.pipe_input(k, v, ts)
            expected = _plain(d.create_output_topic("out"))
        assert expected == [("A", "1", 0), ("B", "1", 0), ("tick", "tick1", 21), ("A", None, 15)]
        topic, cp = FileTopic(str(tmp_path / "in")), str(tmp_path / "cp")
        runs = []
        for part in (files[:2], files[2:]):
            for records in part:
                topic.append("right", records, Serdes.String(), Serdes.String())
            out = Collect()
            q, _, _ = start_streaming(topology, lambda n: topic.read_stream(spark, n.topics), out, checkpoint_location=cp)
            q.processAllAvailable()
            await_event_time_timers(q, topology)
            q.stop()
            runs.append(sorted(((k, v, ts) for _, k, v, ts in out.records), key=repr))
        assert runs == [sorted(expected[:2], key=repr), sorted(expected[2:], key=repr)]

    def test_micro_batches_and_restart(self, spark: Any, tmp_path: Any) -> None:
        """On a streaming query each window's final count comes out once, after the watermark
        passes end + grace (on an event-time timer); the pending windows survive a restart."""
        from streamsdsl.runtime.streaming import start_streaming
        from streamsdsl.testing.files import FileTopic
        from tests._support import Collect

        b = StreamsBuilder()
        b.stream("input", STR).group_by_key().windowed_by(TimeWindows.of_size_and_grace(10, 5)).count().suppress(
            FINAL).to_stream().to("out")
        topology = b.build()
        topic = FileTopic(str(tmp_path / "in"))
        cp = str(tmp_path / "checkpoint")
        s = Serdes.String()
        topic.append("input", [("a", "v", 1), ("a", "v", 7), ("b", "v", 3)], s, s)
        topic.append("input", [("a", "v", 12)], s, s)
        out = Collect()
        q, _, _ = start_streaming(topology, lambda n: topic.read_stream(spark, n.topics), out, checkpoint_location=cp)
        q.processAllAvailable()
        q.stop()
        assert [(k.key, k.window.start, v, ts) for _, k, v, ts in out.records] == []  # 12 < 10 + 5

        topic.append("input", [("a", "v", 4), ("b", "v", 15)], s, s)
        topic.append("input", [("c", "v", 40)], s, s)
        out2 = Collect()
        q, _, _ = start_streaming(topology, lambda n: topic.read_stream(spark, n.topics), out2, checkpoint_location=cp)
        q.processAllAvailable()
        q.stop()
        assert sorted((k.key, k.window.start, v, ts) for _, k, v, ts in out2.records) == [
            ("a", 0, 3, 7), ("a", 10, 1, 12), ("b", 0, 1, 3), ("b", 10, 1, 15)]

    def test_session_windows_streaming(self, spark: Any, tmp_path: Any) -> None:
        """Streaming, sessions (gap 5, grace 2): a session's final count comes out once the
        watermark reaches end + gap + grace (an event-time timer), the pending sessions survive
        a restart, and explain() names the Python operator (also for count())."""
        from streamsdsl.runtime.explain import explain
        from streamsdsl.runtime.streaming import start_streaming
        from streamsdsl.testing.files import FileTopic
        from tests._support import Collect

        b = StreamsBuilder()
        b.stream("input", STR).group_by_key().windowed_by(SessionWindows.of_inactivity_gap_and_grace(5, 2)).count(
        ).suppress(FINAL).to_stream().to("out")
        topology = b.build()
        text = explain(topology, spark, mode="simple", operator="jvm")
        assert ("KTABLE-SUPPRESS-0000000003: Python operator (session windows: suppress(until_window_closes) folded "
                "in: the JVM operator does not implement its release rule)") in text
        topic = FileTopic(str(tmp_path / "in"))
        cp = str(tmp_path / "checkpoint")
        s = Serdes.String()
        topic.append("input", [("a", "v", 1), ("a", "v", 4), ("b", "v", 3)], s, s)
        out = Collect()
        q, _, _ = start_streaming(topology, lambda n: topic.read_stream(spark, n.topics), out, checkpoint_location=cp)
        q.processAllAvailable()
        q.stop()
        assert out.records == []
        topic.append("input", [("a", "v", 6)], s, s)
        topic.append("input", [("c", "v", 20)], s, s)
        out2 = Collect()
        q, _, _ = start_streaming(topology, lambda n: topic.read_stream(spark, n.topics), out2, checkpoint_location=cp)
        q.processAllAvailable()
        q.stop()
        assert sorted((k.key, k.window.start, k.window.end, v, ts) for _, k, v, ts in out2.records) == [
            ("a", 1, 6, 3, 6), ("b", 3, 3, 1, 3)]
