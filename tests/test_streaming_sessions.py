"""Stateful operators on a real streaming query (sessions, unwindowed aggregations): several micro-batches, timers, restart from checkpoint."""

from __future__ import annotations

from typing import Any

import pytest

from streamsdsl import Consumed, EmitStrategy, Produced, Serdes, SessionWindow, SessionWindows, StreamsBuilder, Windowed
from streamsdsl.runtime.streaming import start_streaming
from streamsdsl.testing.files import FileTopic
from tests._support import Collect

pytestmark = pytest.mark.spark


def _topology(on_close: bool) -> Any:
    b = StreamsBuilder()
    w = b.stream("clicks", Consumed.with_serdes(Serdes.String(), Serdes.String())).group_by_key().windowed_by(
        SessionWindows.with_gap(10)
    )
    if on_close:
        w = w.emit_strategy(EmitStrategy.on_window_close())
    w.count().to_stream().to("sessions")
    return b.build()


def W(key: str, start: int, end: int) -> Windowed:  # noqa: N802
    return Windowed(key, SessionWindow(start, end))


class TestStreamingSessions:
    @pytest.mark.usefixtures("operator")
    def test_on_close_exactly_once_across_batches_and_restart(self, spark: Any, tmp_path: Any) -> None:
        """Each session is emitted once, when the watermark passes end + gap + grace (timers fire
        in the no-data batch after the watermark moves); stopping and restarting from the
        checkpoint loses no session and emits none twice."""
        topic = FileTopic(str(tmp_path / "in"))
        cp = str(tmp_path / "checkpoint")
        s, v = Serdes.String(), Serdes.String()
        topic.append("clicks", [("a", "x", 0), ("a", "x", 5), ("b", "x", 3)], s, v)
        topic.append("clicks", [("a", "x", 12), ("c", "x", 30)], s, v)
        out = Collect()
        q, _, metrics = start_streaming(_topology(True), lambda n: topic.read_stream(spark, n.topics), out,
                                        checkpoint_location=cp)
        q.processAllAvailable()
        q.stop()
        # batch 0: wm -> 5; batch 1: a's session grows to [0, 12], wm -> 30; batch 2 (no data):
        # timers at end + 10 + 0 + 1 fire for a (23) and b (14).
        # timers fire in one batch; finals are ordered (end, start) as Kafka Streams forwards them
        assert [(k, n, ts) for _, k, n, ts in out.records] == [(W("b", 3, 3), 1, 3), (W("a", 0, 12), 3, 12)]
        assert metrics.snapshot()["emit-final-records-total"] == 2.0

        topic.append("clicks", [("b", "x", 50), ("a", "x", 60)], s, v)
        out2 = Collect()
        q, _, metrics = start_streaming(_topology(True), lambda n: topic.read_stream(spark, n.topics), out2,
                                        checkpoint_location=cp)
        q.processAllAvailable()
        q.stop()
        # after the restart only c's session closes (wm 60 > 30 + 10); a's and b's are not re-emitted
        assert [(k, n, ts) for _, k, n, ts in out2.records] == [(W("c", 30, 30), 1, 30)]
        assert metrics.snapshot()["emit-final-latency-max"] == 60 - (30 + 10 + 1)

    @pytest.mark.usefixtures("operator")
    def test_update_mode_net_change_per_batch(self, spark: Any, tmp_path: Any) -> None:
        """on_window_update forwards, per micro-batch, the last value per window and tombstones
        only for windows forwarded in an earlier batch (Kafka's cache flushed at commit)."""
        topic = FileTopic(str(tmp_path / "in"))
        s, v = Serdes.String(), Serdes.String()
        topic.append("clicks", [("a", "x", 0), ("a", "x", 5)], s, v)  # [0,0] created and merged away: no tombstone
        topic.append("clicks", [("a", "x", 20), ("a", "x", 12)], s, v)  # [0,5] closed; [20,20] -> [12,20]
        topic.append("clicks", [("a", "x", 25)], s, v)  # [12,20] was forwarded: tombstone, then [12,25]
        out = Collect()
        q, _, _ = start_streaming(_topology(False), lambda n: topic.read_stream(spark, n.topics), out,
                                  checkpoint_location=str(tmp_path / "cp"))
        q.processAllAvailable()
        q.stop()
        assert [(b, k, n, ts) for b, k, n, ts in out.records] == [
            (0, W("a", 0, 5), 2, 5),
            (1, W("a", 12, 20), 2, 20),
            (2, W("a", 12, 20), None, 20),
            (2, W("a", 12, 25), 3, 25),
        ]


class TestStreamingAggregations:
    @pytest.mark.parametrize("python", [False, True], ids=["native-count", "python-aggregate"])
    def test_table_changelog_per_batch(self, spark: Any, tmp_path: Any, python: bool) -> None:
        """Unwindowed aggregation streaming: one update per key per micro-batch (the latest
        aggregate, ts = max record ts); null keys dropped and counted in the metrics."""
        b = StreamsBuilder()
        grouped = b.stream("clicks", Consumed.with_serdes(Serdes.String(), Serdes.String())).group_by_key()
        table = grouped.aggregate(lambda: 0, lambda k, v, n: n + 1) if python else grouped.count()
        table.to_stream().to("counts", Produced.with_serdes(Serdes.String(), Serdes.Long()))
        topic = FileTopic(str(tmp_path / "in"))
        s = Serdes.String()
        topic.append("clicks", [("a", "x", 5), ("a", "x", 3), ("b", "x", 1), (None, "x", 9)], s, s)
        topic.append("clicks", [("a", "x", 4), (None, "x", 2)], s, s)
        out = Collect()
        q, _, metrics = start_streaming(b.build(), lambda n: topic.read_stream(spark, n.topics), out,
                                        checkpoint_location=str(tmp_path / "cp"))
        q.processAllAvailable()
        q.stop()
        assert sorted(out.records) == [(0, "a", 2, 5), (0, "b", 1, 1), (1, "a", 3, 5)]
        # one null key per batch; each counted once (the native count reports a running total)
        assert metrics.snapshot()["dropped-records-total"] == 2.0


class TestQuietTable:
    def test_every_session_closes_although_the_users_table_stays_quiet(self, spark: Any) -> None:
        """The clicks-and-users application (`tests._quiet_table`): after a click far in the
        future all 20 users' sessions come out, not only the one whose own key moved on (with
        Spark's default watermark policy, the minimum over the inputs, the quiet users table
        held every other session back)."""
        from tests import _quiet_table

        assert _quiet_table.run(spark) == _quiet_table.expected_sessions()
