"""Hopping and sliding window ``count()`` on a real streaming query, on both operators of the
built-in aggregations (the ``operator`` fixture): several micro-batches, the net change per
batch on update, each window once on close (event-time timers), late records dropped and counted.

The expected records are Kafka Streams' (`streamsdsl.semantics.reference.reference_run` gives the
same windows, values and timestamps for these inputs: one key per micro-batch decides stream
time, so the watermark-based stream time of the query equals the driver's).
"""

from __future__ import annotations

from typing import Any

import pytest

from streamsdsl import Consumed, EmitStrategy, Serdes, SlidingWindows, StreamsBuilder, TimeWindows
from streamsdsl.runtime.streaming import start_streaming
from streamsdsl.testing.files import FileTopic
from tests._support import Collect

pytestmark = [pytest.mark.spark, pytest.mark.usefixtures("operator")]

HOPPING = TimeWindows.of_size_with_no_grace(10).advance_by(5)
SLIDING = SlidingWindows.of_time_difference_and_grace(10, 5)


def _count(windows: Any, on_close: bool) -> Any:
    b = StreamsBuilder()
    w = b.stream("in", Consumed.with_serdes(Serdes.String(), Serdes.String())).group_by_key().windowed_by(windows)
    if on_close:
        w = w.emit_strategy(EmitStrategy.on_window_close())
    w.count().to_stream().to("out")
    return b.build()


def _run(spark: Any, tmp_path: Any, windows: Any, on_close: bool,
         batches: list[list[tuple[str, int]]]) -> tuple[list[tuple[int, str, int, int, Any, int]], dict[str, float]]:
    """One micro-batch per element of ``batches`` (``(key, timestamp)`` records); the output as
    ``(batch, key, start, end, count, timestamp)``, sorted, and the metrics."""
    topic = FileTopic(str(tmp_path / "in"))
    s = Serdes.String()
    for batch in batches:
        topic.append("in", [(k, "v", ts) for k, ts in batch], s, s)
    out = Collect()
    q, _, metrics = start_streaming(_count(windows, on_close), lambda n: topic.read_stream(spark, n.topics), out,
                                    checkpoint_location=str(tmp_path / "cp"))
    try:
        q.processAllAvailable()
    finally:
        q.stop()
    records = sorted((b, k.key, k.window.start, k.window.end, n, ts) for b, k, n, ts in out.records)
    return records, metrics.snapshot()


class TestStreamingHopping:
    def test_update_mode_net_change_per_batch(self, spark: Any, tmp_path: Any) -> None:
        """Size 10, advance 5, no grace: each record updates every window it falls in; per
        micro-batch the last count of each updated window (ts = the window's max record ts);
        a@4 after a@12 (watermark 7, a's stream time 12) is too late for [0, 10): dropped once."""
        records, metrics = _run(spark, tmp_path, HOPPING, False, [
            [("a", 1), ("a", 7), ("b", 3)],
            [("a", 12), ("a", 4), ("b", 14)],
        ])
        assert records == [
            (0, "a", 0, 10, 2, 7), (0, "a", 5, 15, 1, 7), (0, "b", 0, 10, 1, 3),
            (1, "a", 5, 15, 2, 12), (1, "a", 10, 20, 1, 12), (1, "b", 5, 15, 1, 14), (1, "b", 10, 20, 1, 14),
        ]
        assert metrics["dropped-records-total"] == 1.0

    def test_on_close_each_window_once(self, spark: Any, tmp_path: Any) -> None:
        """On close: [0, 10) of a and b close while a@12 / b@14 are processed; the windows
        ending at 15 and 20 close on their timers once c@40 moves the watermark; c's stay open."""
        records, metrics = _run(spark, tmp_path, HOPPING, True, [
            [("a", 1), ("a", 7), ("b", 3)],
            [("a", 12), ("b", 14)],
            [("c", 40)],
        ])
        assert sorted(r[1:] for r in records) == sorted([
            ("a", 0, 10, 2, 7), ("b", 0, 10, 1, 3),
            ("a", 5, 15, 2, 12), ("a", 10, 20, 1, 12), ("b", 5, 15, 1, 14), ("b", 10, 20, 1, 14),
        ])
        assert [r[1:3] for r in records if r[0] == 1] == [("a", 0), ("b", 0)]  # closed in the batch of a@12, b@14
        assert metrics["emit-final-records-total"] == 6.0
        assert metrics["dropped-records-total"] == 0.0


class TestStreamingSliding:
    BATCHES = [
        [("A", 10), ("A", 14), ("B", 20)],
        # A's stream time 30 (close time 25): A@12 is dropped (its windows closed); A@16 is too
        # late for its left window [6, 16] and for [11, 21] (two drops) but creates A@14's
        # right window [15, 25]
        [("A", 30), ("A", 12), ("A", 16)],
    ]

    def test_update_mode_net_change_per_batch(self, spark: Any, tmp_path: Any) -> None:
        """Time difference 10, grace 5: left and right windows per record, the net change per
        micro-batch, late records counted once per closed window."""
        records, metrics = _run(spark, tmp_path, SLIDING, False, self.BATCHES)
        assert records == [
            (0, "A", 0, 10, 1, 10), (0, "A", 4, 14, 2, 14), (0, "A", 11, 21, 1, 14), (0, "B", 10, 20, 1, 20),
            (1, "A", 15, 25, 1, 16), (1, "A", 20, 30, 1, 30),
        ]
        assert metrics["dropped-records-total"] == 3.0

    def test_on_close_each_window_once(self, spark: Any, tmp_path: Any) -> None:
        """On close: every window of A and B once, with its final count, after the watermark
        passes end + grace (C@60 closes [20, 30]); C's window stays open."""
        records, metrics = _run(spark, tmp_path, SLIDING, True, [*self.BATCHES, [("C", 60)]])
        assert sorted(r[1:] for r in records) == [
            ("A", 0, 10, 1, 10), ("A", 4, 14, 2, 14), ("A", 11, 21, 1, 14), ("A", 15, 25, 1, 16),
            ("A", 20, 30, 1, 30), ("B", 10, 20, 1, 20),
        ]
        assert metrics["emit-final-records-total"] == 6.0
        assert metrics["dropped-records-total"] == 3.0
