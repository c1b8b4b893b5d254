"""Time windows (tumbling, hopping, sliding) with both emit strategies through the
TopologyTestDriver, and on a real streaming query.

Every expectation is Kafka Streams' output for the same input (KAFKA_STREAMS_SEMANTICS.md §3 and
KStreamSlidingWindowAggregate): windowed key, window [start, end), value and timestamp (= the
largest record timestamp in the window).
"""

from __future__ import annotations

from typing import Any

import pytest

from streamsdsl import (
    Consumed,
    EmitStrategy,
    InvalidArgumentError,
    Serdes,
    SlidingWindows,
    StreamsBuilder,
    TestRecord,
    TimeWindow,
    TimeWindows,
    Windowed,
)
from streamsdsl.runtime.streaming import start_streaming
from streamsdsl.semantics.aggregation import AggFunctions
from streamsdsl.semantics.reference import reference_run
from streamsdsl.semantics.sliding import SlidingWindowing
from streamsdsl.testing.files import FileTopic
from tests._support import Collect

STRINGS = Consumed.with_serdes(Serdes.String(), Serdes.String())


def W(key: Any, start: int, end: int, value: Any, ts: int) -> TestRecord:  # noqa: N802
    """An expected time-windowed output record."""
    return TestRecord(Windowed(key, TimeWindow(start, end)), value, ts)


def windowed(windows: Any, on_close: bool = False) -> tuple[StreamsBuilder, Any]:
    b = StreamsBuilder()
    w = b.stream("in", STRINGS).group_by_key().windowed_by(windows)
    if on_close:
        w = w.emit_strategy(EmitStrategy.on_window_close())
    return b, w


def count_topology(windows: Any, on_close: bool = False) -> Any:
    b, w = windowed(windows, on_close)
    w.count().to_stream().to("out")
    return b.build()


def recs(*items: tuple[Any, int]) -> list[tuple[Any, str, int]]:
    return [(k, "v", ts) for k, ts in items]


class TestTimeWindowsSpec:
    def test_windows_for_tumbling(self) -> None:
        """Tumbling: exactly one window [start, start + size) per timestamp, start a multiple of size."""
        w = TimeWindows.of_size_with_no_grace(10)
        assert w.windows_for(0) == [TimeWindow(0, 10)]
        assert w.windows_for(9) == [TimeWindow(0, 10)]
        assert w.windows_for(10) == [TimeWindow(10, 20)]

    def test_windows_for_hopping(self) -> None:
        """Hopping: every window with start <= ts < start + size, start >= 0, ascending start."""
        w = TimeWindows.of_size_with_no_grace(10).advance_by(3)
        assert w.windows_for(0) == [TimeWindow(0, 10)]
        assert w.windows_for(5) == [TimeWindow(0, 10), TimeWindow(3, 13)]
        assert w.windows_for(12) == [TimeWindow(3, 13), TimeWindow(6, 16), TimeWindow(9, 19), TimeWindow(12, 22)]

    def test_accessors_and_validation(self) -> None:
        """size/advance/grace in ms; advance must be in (0, size]; size > 0; grace >= 0."""
        w = TimeWindows.of_size_and_grace(10, 4).advance_by(5)
        assert (w.size_ms, w.advance_ms, w.grace_period_ms) == (10, 5, 4)
        with pytest.raises(InvalidArgumentError, match=r"'advance' must be > 0 ms and <= the window size \(10 ms\) \(got 11\)"):
            TimeWindows.of_size_with_no_grace(10).advance_by(11)
        with pytest.raises(InvalidArgumentError, match=r"'size' must be > 0 ms \(got 0\)"):
            TimeWindows.of_size_with_no_grace(0)
        with pytest.raises(InvalidArgumentError, match=r"'grace' must be >= 0 ms \(got -1\)"):
            TimeWindows.of_size_and_grace(10, -1)
        s = SlidingWindows.of_time_difference_and_grace(10, 2)
        assert (s.time_difference_ms, s.grace_period_ms) == (10, 2)

    def test_windowed_table_describe(self) -> None:
        """A time-windowed count is one aggregate processor with its store, as in Kafka Streams."""
        assert count_topology(TimeWindows.of_size_with_no_grace(10)).describe().splitlines()[4] == (
            "    Processor: KSTREAM-AGGREGATE-0000000002 (stores: [KSTREAM-AGGREGATE-STATE-STORE-0000000001])"
        )


@pytest.mark.spark
@pytest.mark.every_host
class TestTumbling:
    @pytest.mark.streaming_host
    def test_boundaries(self, run_driver: Any) -> None:
        """A record at exactly `start` and at `end - 1` is in [start, end); a record at `end` is in the next window."""
        out = run_driver(count_topology(TimeWindows.of_size_with_no_grace(10)), recs(("a", 10), ("a", 19), ("a", 20)))
        assert out == [W("a", 10, 20, 1, 10), W("a", 10, 20, 2, 19), W("a", 20, 30, 1, 20)]

    def test_window_closes_when_stream_time_reaches_end_without_grace(self, run_driver: Any) -> None:
        """Grace 0: at stream time 10 the window [0, 10) no longer accepts a record at 9 (dropped, counted)."""
        out, metrics = run_driver(count_topology(TimeWindows.of_size_with_no_grace(10)),
                                  recs(("a", 5), ("a", 10), ("a", 9)), with_metrics=True)
        assert out == [W("a", 0, 10, 1, 5), W("a", 10, 20, 1, 10)]
        assert metrics["dropped-records-total"] == 1.0

    def test_out_of_order_within_grace_and_dropped_beyond(self, run_driver: Any) -> None:
        """Grace 5: a record for [0, 10) is accepted while stream time < 15 (ts stays the max
        record ts), and dropped and counted from then on."""
        topology = count_topology(TimeWindows.of_size_and_grace(10, 5))
        out, metrics = run_driver(topology, recs(("a", 5), ("a", 13), ("a", 9), ("a", 16), ("a", 7)),
                                  with_metrics=True)
        assert out == [
            W("a", 0, 10, 1, 5),
            W("a", 10, 20, 1, 13),
            W("a", 0, 10, 2, 9),
            W("a", 10, 20, 2, 16),
        ]
        assert metrics["dropped-records-total"] == 1.0

    def test_reduce_and_several_keys(self, run_driver: Any) -> None:
        """reduce starts from the first value of each window; keys are independent."""
        b, w = windowed(TimeWindows.of_size_with_no_grace(10))
        w.reduce(lambda agg, v: agg + v).to_stream().to("out")
        out = run_driver(b.build(), [("a", "x", 1), ("b", "z", 3), ("a", "y", 2), ("a", "w", 11)])
        assert out == [W("a", 0, 10, "x", 1), W("b", 0, 10, "z", 3), W("a", 0, 10, "xy", 2), W("a", 10, 20, "w", 11)]

    def test_aggregate_null_key_dropped(self, run_driver: Any) -> None:
        """aggregate folds from initializer() per window; a null key is dropped and counted."""
        b, w = windowed(TimeWindows.of_size_with_no_grace(100))
        w.aggregate(lambda: 0, lambda k, v, a: a + len(v)).to_stream().to("out")
        out, metrics = run_driver(b.build(), [("a", "xy", 1), (None, "zzz", 2), ("a", "abc", 50)], with_metrics=True)
        assert out == [W("a", 0, 100, 2, 1), W("a", 0, 100, 5, 50)]
        assert metrics["dropped-records-total"] == 1.0

    def test_on_close_once_in_order_after_end_plus_grace(self, run_driver: Any) -> None:
        """on_window_close: nothing on update; each window once, when stream time reaches
        end + grace, ordered (start, key); ts = max record ts; KIP-825 metrics."""
        topology = count_topology(TimeWindows.of_size_with_no_grace(10), on_close=True)
        out, metrics = run_driver(topology, recs(("b", 2), ("a", 1), ("a", 9), ("a", 10), ("b", 25)), with_metrics=True)
        assert out == [W("a", 0, 10, 2, 9), W("b", 0, 10, 1, 2), W("a", 10, 20, 1, 10)]
        assert metrics["emit-final-records-total"] == 3.0
        assert metrics["emit-final-latency-max"] == 5.0  # [10, 20) could go at 20, went at 25

    def test_on_close_waits_for_grace(self, run_driver: Any) -> None:
        """Grace 5: [0, 10) takes a late record at stream time 12 and is emitted only at 15."""
        topology = count_topology(TimeWindows.of_size_and_grace(10, 5), on_close=True)
        assert run_driver(topology, recs(("a", 1), ("a", 12), ("a", 4), ("a", 14))) == []
        assert run_driver(topology, recs(("a", 1), ("a", 12), ("a", 4), ("a", 15))) == [W("a", 0, 10, 2, 4)]


@pytest.mark.spark
@pytest.mark.every_host
class TestHopping:
    def test_record_updates_every_window_it_falls_in(self, run_driver: Any) -> None:
        """Size 10, advance 5: a record at 7 is in [0, 10) and [5, 15), forwarded in start order."""
        topology = count_topology(TimeWindows.of_size_with_no_grace(10).advance_by(5))
        out = run_driver(topology, recs(("a", 7), ("a", 12)))
        assert out == [W("a", 0, 10, 1, 7), W("a", 5, 15, 1, 7), W("a", 5, 15, 2, 12), W("a", 10, 20, 1, 12)]

    @pytest.mark.streaming_host
    def test_late_record_counted_once_per_closed_window(self, run_driver: Any) -> None:
        """A record too late for two windows counts twice in dropped-records-total; one still
        open window takes it."""
        topology = count_topology(TimeWindows.of_size_with_no_grace(10).advance_by(5))
        out, metrics = run_driver(topology, recs(("a", 0), ("a", 20), ("a", 9)), with_metrics=True)
        assert out == [W("a", 0, 10, 1, 0), W("a", 15, 25, 1, 20), W("a", 20, 30, 1, 20)]
        assert metrics["dropped-records-total"] == 2.0
        out, metrics = run_driver(topology, recs(("a", 0), ("a", 14), ("a", 9)), with_metrics=True)
        assert out[-1] == W("a", 5, 15, 2, 14)
        assert metrics["dropped-records-total"] == 1.0

    def test_on_close(self, run_driver: Any) -> None:
        """Hopping on close: overlapping windows each emitted once, in start order."""
        topology = count_topology(TimeWindows.of_size_with_no_grace(10).advance_by(5), on_close=True)
        assert run_driver(topology, recs(("a", 7), ("a", 12), ("a", 30))) == [
            W("a", 0, 10, 1, 7), W("a", 5, 15, 2, 12), W("a", 10, 20, 1, 12),
        ]


def concat_topology(windows: Any, on_close: bool = False) -> Any:
    b, w = windowed(windows, on_close)
    w.aggregate(lambda: "0", lambda k, v, a: a + "+" + v).to_stream().to("out")
    return b.build()


@pytest.mark.spark
class TestSliding:
    RECORDS = [("A", "1", 10), ("A", "2", 14), ("A", "3", 30)]

    def test_left_and_right_windows(self, run_driver: Any) -> None:
        """A@10 creates its left window [0, 10]; A@14 creates A@10's right window [11, 21] and
        its own left window [4, 14]; A@30 is alone: [20, 30] (A@14's right window would be empty)."""
        out = run_driver(concat_topology(SlidingWindows.of_time_difference_and_grace(10, 100)), self.RECORDS)
        assert out == [
            W("A", 0, 10, "0+1", 10),
            W("A", 11, 21, "0+2", 14),
            W("A", 4, 14, "0+1+2", 14),
            W("A", 20, 30, "0+3", 30),
        ]

    def test_matches_the_semantics_core(self, run_driver: Any) -> None:
        """Out-of-order, early (ts < d) and late records: the Spark operator equals the Kafka port."""
        records = [("A", "1", 10), ("A", "2", 14), ("A", "3", 0), ("A", "4", 30), ("A", "5", 12), ("B", "6", 31),
                   ("A", "7", 2), ("A", "8", 25)]
        fns = AggFunctions(lambda: "0", lambda k, v, a: a + "+" + v)
        for on_close in (False, True):
            expected = reference_run(records, SlidingWindowing(10, 5), fns, emit_on_close=on_close)
            out, metrics = run_driver(concat_topology(SlidingWindows.of_time_difference_and_grace(10, 5), on_close),
                                      records, with_metrics=True)
            assert out == [W(o.key, o.start, o.end, o.value, o.timestamp) for o in expected.outputs]
            assert metrics["dropped-records-total"] == expected.dropped > 0

    def test_on_close(self, run_driver: Any) -> None:
        """Grace 0: at stream time 30 the windows ending before 30 are final, emitted in start order."""
        out = run_driver(concat_topology(SlidingWindows.of_time_difference_with_no_grace(10), on_close=True),
                         self.RECORDS)
        assert out == [W("A", 0, 10, "0+1", 10), W("A", 4, 14, "0+1+2", 14), W("A", 11, 21, "0+2", 14)]


@pytest.mark.spark
class TestStreamingTimeWindows:
    @pytest.mark.every_host
    def test_on_close_exactly_once_across_batches_and_restart(self, spark: Any, tmp_path: Any) -> None:
        """Tumbling on close on a real streaming query: windows close on event-time timers after
        the watermark passes end + grace; a restart from the checkpoint re-emits nothing."""
        topic = FileTopic(str(tmp_path / "in"))
        cp = str(tmp_path / "checkpoint")
        s = Serdes.String()
        topology = count_topology(TimeWindows.of_size_and_grace(10, 2), on_close=True)
        topic.append("in", [("a", "x", 1), ("b", "x", 4)], s, s)
        topic.append("in", [("a", "x", 11), ("a", "x", 8)], s, s)  # 8 is late but within grace: accepted
        topic.append("in", [("b", "x", 13)], s, s)  # watermark 13 > 10 + 2: [0, 10) closes
        out = Collect()
        q, _, metrics = start_streaming(topology, lambda n: topic.read_stream(spark, n.topics), out,
                                        checkpoint_location=cp)
        q.processAllAvailable()
        q.stop()
        # b's window closes while b@13 is processed, a's on its timer in the next (no-data)
        # batch: across micro-batches the (start, key) order of finals is not kept
        assert sorted((k.window.start, k.key, n, ts) for _, k, n, ts in out.records) == [(0, "a", 2, 8), (0, "b", 1, 4)]
        topic.append("in", [("a", "x", 3), ("c", "x", 40)], s, s)  # 3 is too late: dropped
        out2 = Collect()
        q, _, metrics = start_streaming(topology, lambda n: topic.read_stream(spark, n.topics), out2,
                                        checkpoint_location=cp)
        q.processAllAvailable()
        q.stop()
        assert sorted((k.window.start, k.key, n, ts) for _, k, n, ts in out2.records) == [
            (10, "a", 1, 11), (10, "b", 1, 13),
        ]
        assert metrics.snapshot()["dropped-records-total"] == 1.0

    @pytest.mark.every_host
    def test_update_mode_net_change_per_batch(self, spark: Any, tmp_path: Any) -> None:
        """on_window_update forwards per micro-batch the last value of each updated window."""
        topic = FileTopic(str(tmp_path / "in"))
        s = Serdes.String()
        topic.append("in", [("a", "x", 1), ("a", "x", 2), ("a", "x", 12)], s, s)
        topic.append("in", [("a", "x", 13), ("a", "x", 5)], s, s)  # 5 is late (grace 0, watermark 12): dropped
        out = Collect()
        q, _, metrics = start_streaming(count_topology(TimeWindows.of_size_with_no_grace(10)),
                                        lambda n: topic.read_stream(spark, n.topics), out,
                                        checkpoint_location=str(tmp_path / "cp"))
        q.processAllAvailable()
        q.stop()
        assert [(b, k.window.start, n, ts) for b, k, n, ts in out.records] == [
            (0, 0, 2, 2), (0, 10, 1, 12), (1, 10, 2, 13),
        ]
        assert metrics.snapshot()["dropped-records-total"] == 1.0

    def test_sliding_on_close_once_across_batches(self, spark: Any, tmp_path: Any) -> None:
        """Sliding windows stay in state after they close (later records read them) but are
        emitted once: the `fin` flag survives micro-batches and a restart."""
        topic = FileTopic(str(tmp_path / "in"))
        cp = str(tmp_path / "checkpoint")
        s = Serdes.String()
        topology = concat_topology(SlidingWindows.of_time_difference_with_no_grace(10), on_close=True)
        topic.append("in", [("A", "1", 10), ("A", "2", 14)], s, s)
        topic.append("in", [("A", "3", 30)], s, s)  # closes [0,10], [4,14], [11,21]
        out = Collect()
        q, _, _ = start_streaming(topology, lambda n: topic.read_stream(spark, n.topics), out, checkpoint_location=cp)
        q.processAllAvailable()
        q.stop()
        assert [(k.window.start, k.window.end, v, ts) for _, k, v, ts in out.records] == [
            (0, 10, "0+1", 10), (4, 14, "0+1+2", 14), (11, 21, "0+2", 14),
        ]
        topic.append("in", [("A", "4", 33)], s, s)  # creates [23,33] and A@30's right window [31,41]; nothing closes
        topic.append("in", [("A", "5", 50)], s, s)  # closes [20,30], [23,33] and A@30's right window [31,41]
        out2 = Collect()
        q, _, _ = start_streaming(topology, lambda n: topic.read_stream(spark, n.topics), out2, checkpoint_location=cp)
        q.processAllAvailable()
        q.stop()
        expected = reference_run(
            [("A", "1", 10), ("A", "2", 14), ("A", "3", 30), ("A", "4", 33), ("A", "5", 50)],
            SlidingWindowing(10, 0), AggFunctions(lambda: "0", lambda k, v, a: a + "+" + v), emit_on_close=True,
        ).outputs[3:]
        assert [(k.window.start, k.window.end, v, ts) for _, k, v, ts in out2.records] == [
            (o.start, o.end, o.value, o.timestamp) for o in expected
        ]
        assert len(expected) == 3
