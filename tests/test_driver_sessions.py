"""Session windows (KIP-94) and emit strategies (KIP-825) through the TopologyTestDriver.

Every expectation is Kafka Streams' output for the same input (KAFKA_STREAMS_SEMANTICS.md §1):
windowed key, window start/end (both inclusive), value (None = tombstone) and timestamp
(= window end).
"""

from __future__ import annotations

from typing import Any

import pytest

from streamsdsl import (
    Consumed,
    EmitStrategy,
    Materialized,
    Serdes,
    SessionWindow,
    SessionWindows,
    StreamsBuilder,
    TestRecord,
    Windowed,
)
from streamsdsl.runtime.driver import TopologyTestDriver

pytestmark = pytest.mark.spark


def W(key: Any, start: int, end: int, value: Any) -> TestRecord:  # noqa: N802
    """An expected session-windowed output record (timestamp = window end)."""
    return TestRecord(Windowed(key, SessionWindow(start, end)), value, end)


def count_topology(gap: int, grace: int = 0, *, on_close: bool = False) -> Any:
    b = StreamsBuilder()
    windowed = b.stream("in", Consumed.with_serdes(Serdes.String(), Serdes.String())).group_by_key().windowed_by(
        SessionWindows.of_inactivity_gap_and_grace(gap, grace)
    )
    if on_close:
        windowed = windowed.emit_strategy(EmitStrategy.on_window_close())
    windowed.count().to_stream().to("out")
    return b.build()


def recs(*items: tuple[Any, int]) -> list[tuple[Any, str, int]]:
    return [(k, "v", ts) for k, ts in items]


@pytest.mark.every_host
class TestSessionMerging:
    def test_single_session_within_gap(self, run_driver: Any) -> None:
        """Records within the gap extend one session; each extension retracts the previous window."""
        out = run_driver(count_topology(5), recs(("a", 0), ("a", 3), ("a", 5)))
        assert out == [
            W("a", 0, 0, 1),
            W("a", 0, 0, None), W("a", 0, 3, 2),
            W("a", 0, 3, None), W("a", 0, 5, 3),
        ]

    def test_records_exactly_gap_apart_merge(self, run_driver: Any) -> None:
        """Both search bounds are inclusive: records exactly `gap` apart are one session."""
        assert run_driver(count_topology(5), recs(("a", 0), ("a", 5))) == [
            W("a", 0, 0, 1), W("a", 0, 0, None), W("a", 0, 5, 2),
        ]

    def test_two_sessions_more_than_gap_apart(self, run_driver: Any) -> None:
        """Records more than `gap` apart start a new session; no tombstone."""
        assert run_driver(count_topology(5, 100), recs(("a", 0), ("a", 6))) == [W("a", 0, 0, 1), W("a", 6, 6, 1)]

    @pytest.mark.streaming_host
    def test_out_of_order_record_bridges_two_sessions(self, run_driver: Any) -> None:
        """A late record within the gap of two sessions merges them: a tombstone for each, in
        (end, start) order, then the merged session."""
        out = run_driver(count_topology(5, 100), recs(("a", 0), ("a", 10), ("a", 5)))
        assert out == [
            W("a", 0, 0, 1),
            W("a", 10, 10, 1),
            W("a", 0, 0, None), W("a", 10, 10, None), W("a", 0, 10, 3),
        ]

    def test_bridging_three_sessions(self, run_driver: Any) -> None:
        """Three sessions become one as bridging records arrive out of order."""
        out = run_driver(count_topology(5, 100), recs(("a", 0), ("a", 10), ("a", 20), ("a", 15), ("a", 5)))
        assert out == [
            W("a", 0, 0, 1), W("a", 10, 10, 1), W("a", 20, 20, 1),
            W("a", 10, 10, None), W("a", 20, 20, None), W("a", 10, 20, 3),
            W("a", 0, 0, None), W("a", 10, 20, None), W("a", 0, 20, 5),
        ]

    def test_same_timestamp_update_has_no_tombstone(self, run_driver: Any) -> None:
        """A record at the same timestamp as a [ts, ts] session updates it without a tombstone."""
        assert run_driver(count_topology(5), recs(("a", 7), ("a", 7))) == [W("a", 7, 7, 1), W("a", 7, 7, 2)]

    def test_keys_interleaved(self, run_driver: Any) -> None:
        """Sessions are per key."""
        out = run_driver(count_topology(5, 100), recs(("a", 0), ("b", 1), ("a", 2), ("b", 20), ("a", 4)))
        assert out == [
            W("a", 0, 0, 1), W("b", 1, 1, 1),
            W("a", 0, 0, None), W("a", 0, 2, 2),
            W("b", 20, 20, 1),
            W("a", 0, 2, None), W("a", 0, 4, 3),
        ]


@pytest.mark.every_host
class TestDrops:
    def test_null_key_dropped_and_counted(self, run_driver: Any) -> None:
        """A null-key record is dropped, counted, and does not advance stream time."""
        out, metrics = run_driver(count_topology(5), recs((None, 100), ("a", 0)), with_metrics=True)
        assert out == [W("a", 0, 0, 1)]
        assert metrics["dropped-records-total"] == 1.0

    def test_late_record_grace_zero(self, run_driver: Any) -> None:
        """close time = stream time − grace − gap: a session ending before it is dropped; one
        ending exactly at it is accepted."""
        out, metrics = run_driver(
            count_topology(5, 0), recs(("b", 20), ("a", 14), ("a", 15)), with_metrics=True
        )
        assert out == [W("b", 20, 20, 1), W("a", 15, 15, 1)]
        assert metrics["dropped-records-total"] == 1.0

    def test_late_record_with_grace(self, run_driver: Any) -> None:
        """With grace 10 the close time is stream time − 15; a closed session is not extended."""
        out, metrics = run_driver(
            count_topology(5, 10), recs(("a", 0), ("b", 20), ("a", 4), ("a", 5)), with_metrics=True
        )
        assert out == [W("a", 0, 0, 1), W("b", 20, 20, 1), W("a", 5, 5, 1)]
        assert metrics["dropped-records-total"] == 1.0

    def test_late_record_merging_into_open_session_is_accepted(self, run_driver: Any) -> None:
        """A record whose own window would be closed is accepted when it merges into an open
        session (Kafka's rule runs on the merged window; Spark must not drop it first)."""
        out, metrics = run_driver(
            count_topology(5, 10), recs(("a", 10), ("b", 22), ("a", 6), ("a", 0)), with_metrics=True
        )
        assert out == [
            W("a", 10, 10, 1), W("b", 22, 22, 1),
            W("a", 10, 10, None), W("a", 6, 10, 2),
        ]
        assert metrics["dropped-records-total"] == 1.0


class TestAggregations:
    def test_reduce(self, run_driver: Any) -> None:
        """reduce: null initializer; merging folds sessions with the reducer."""
        b = StreamsBuilder()
        b.stream("in", Consumed.with_serdes(Serdes.String(), Serdes.String())).group_by_key().windowed_by(
            SessionWindows.with_gap(5)
        ).reduce(lambda agg, v: agg + v).to_stream().to("out")
        out = run_driver(b.build(), [("a", "x", 0), ("a", "y", 3)])
        assert out == [W("a", 0, 0, "x"), W("a", 0, 0, None), W("a", 0, 3, "xy")]

    def test_aggregate_initializer_takes_part_in_every_merge(self, run_driver: Any) -> None:
        """Kafka's `"0+1"` merged and then `+2` gives `"0+0+1+2"`."""
        b = StreamsBuilder()
        b.stream("in", Consumed.with_serdes(Serdes.String(), Serdes.String())).group_by_key().windowed_by(
            SessionWindows.with_gap(5)
        ).aggregate(lambda: "0", lambda k, v, a: a + "+" + v, lambda k, a1, a2: a1 + "+" + a2).to_stream().to("out")
        out = run_driver(b.build(), [("a", "1", 0), ("a", "2", 3)])
        assert out == [W("a", 0, 0, "0+1"), W("a", 0, 0, None), W("a", 0, 3, "0+0+1+2")]

    def test_aggregate_to_dict_with_materialized(self, run_driver: Any) -> None:
        """Aggregates of any JSON value; the store can be named."""
        b = StreamsBuilder()
        b.stream("in", Consumed.with_serdes(Serdes.String(), Serdes.Long())).group_by_key().windowed_by(
            SessionWindows.with_gap(10)
        ).aggregate(
            lambda: {"sum": 0, "n": 0},
            lambda k, v, a: {"sum": a["sum"] + v, "n": a["n"] + 1},
            lambda k, a, b: {"sum": a["sum"] + b["sum"], "n": a["n"] + b["n"]},
            materialized=Materialized.as_("totals"),
        ).to_stream().to("out")
        out = run_driver(b.build(), [("a", 5, 100), ("a", 7, 104)])
        assert out == [
            W("a", 100, 100, {"sum": 5, "n": 1}),
            W("a", 100, 100, None),
            W("a", 100, 104, {"sum": 12, "n": 2}),
        ]


@pytest.mark.every_host
class TestEmitOnClose:
    def test_emits_each_session_once_in_order_after_close(self, spark: Any) -> None:
        """on_window_close forwards nothing on update, then each session exactly once, when
        stream time passes end + gap + grace, ordered (end, start, key), ts = end."""
        with TopologyTestDriver(count_topology(5, 2, on_close=True), spark=spark) as d:
            i, o = d.create_input_topic("in"), d.create_output_topic("out")
            for k, ts in [("a", 0), ("b", 1), ("a", 3), ("c", 2)]:
                i.pipe_input(k, "v", ts)
            assert o.read_records_to_list() == []
            i.pipe_input("z", "v", 8)  # close time 1: nothing ends before it
            assert o.read_records_to_list() == []
            i.pipe_input("z", "v", 9)  # passes b's 1 + 5 + 2 = 8
            assert o.read_records_to_list() == [W("b", 1, 1, 1)]
            i.pipe_input("z", "v", 100)
            assert o.read_records_to_list() == [W("c", 2, 2, 1), W("a", 0, 3, 2), W("z", 8, 9, 2)]
            i.pipe_input("a", "v", 101)
            assert o.read_records_to_list() == []
            metrics = d.metrics()
        assert metrics["emit-final-records-total"] == 4.0
        # latency = stream time at emit − (end + gap + grace + 1): b 9−9, c 100−10, a 100−11, z 100−17
        assert metrics["emit-final-latency-max"] == 90.0
        assert metrics["emit-final-latency-avg"] == pytest.approx((0 + 90 + 89 + 83) / 4)

    def test_merged_sessions_emit_only_the_final_window(self, run_driver: Any) -> None:
        """No tombstones and no intermediate windows on close: only the merged session."""
        out = run_driver(count_topology(5, 100, on_close=True), recs(("a", 0), ("a", 10), ("a", 5), ("x", 1000)))
        assert out == [W("a", 0, 10, 3)]

    def test_late_drops_still_counted_on_close(self, run_driver: Any) -> None:
        """A dropped record is counted under on_window_close too."""
        out, metrics = run_driver(count_topology(5, 0, on_close=True), recs(("a", 10), ("b", 30), ("a", 1)),
                                  with_metrics=True)
        assert out == [W("a", 10, 10, 1)]
        assert metrics["dropped-records-total"] == 1.0
