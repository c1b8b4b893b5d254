"""``group_by`` of a windowed KTable (Kafka Streams' ``KTable<Windowed<K>, V>.groupBy``): the
selector receives each row's `Windowed` key; ``count`` / ``reduce`` / ``aggregate`` subtract a
row's old value before adding its new one, and a session merged away arrives as a tombstone
and leaves its group. describe(), the TopologyTestDriver's exact records and a streaming query."""

from __future__ import annotations

from typing import Any

import pytest

from streamsdsl import (
    Consumed,
    Serdes,
    SessionWindows,
    StreamsBuilder,
    TestRecord,
    TimeWindows,
)
from streamsdsl.values.windows import SessionWindow, Windowed

R = TestRecord
STR = Consumed.with_serdes(Serdes.String(), Serdes.String())


def _sessions_per_team(kind: str, seen: list[Any] | None = None) -> Any:
    """Session counts per user (gap 10 ms), grouped by team (the user's prefix)."""
    b = StreamsBuilder()
    sessions = b.stream("clicks", STR).group_by_key().windowed_by(
        SessionWindows.of_inactivity_gap_with_no_grace(10)).count()

    def team(wk: Windowed, n: int) -> tuple[str, int]:
        assert isinstance(wk, Windowed) and isinstance(wk.window, SessionWindow)
        return wk.key.split("-")[0], n

    grouped = sessions.group_by(team)
    table = grouped.count() if kind == "count" else grouped.aggregate(
        lambda: 0, lambda k, v, agg: agg + v, lambda k, v, agg: agg - v)
    table.to_stream().to("out")
    return b.build()


CLICKS = [("a-1", "x", 0), ("a-2", "x", 5),
          ("a-1", "x", 8),  # merges a-1's session [0,0] into [0,8]: tombstone, then the merged count
          ("b-1", "x", 9),
          ("a-2", "x", 30)]  # a new session of a-2 (a-2's [5,5] is closed: no tombstone)


class TestDescribe:
    def test_windowed_group_by_is_described_as_a_plain_one(self) -> None:
        """KTABLE-SELECT after the windowed aggregation, the repartition topic named after the
        grouped aggregation's store, and KTABLE-AGGREGATE with that store."""
        assert _sessions_per_team("aggregate").describe() == (
            "Topologies:\n"
            "   Sub-topology: 0\n"
            "    Source: KSTREAM-SOURCE-0000000000 (topics: [clicks])\n"
            "      --> KSTREAM-AGGREGATE-0000000002\n"
            "    Processor: KSTREAM-AGGREGATE-0000000002 (stores: [KSTREAM-AGGREGATE-STATE-STORE-0000000001])\n"
            "      --> KTABLE-SELECT-0000000003\n"
            "      <-- KSTREAM-SOURCE-0000000000\n"
            "    Processor: KTABLE-SELECT-0000000003 (stores: [])\n"
            "      --> KSTREAM-SINK-0000000005\n"
            "      <-- KSTREAM-AGGREGATE-0000000002\n"
            "    Sink: KSTREAM-SINK-0000000005 (topic: KTABLE-AGGREGATE-STATE-STORE-0000000004-repartition)\n"
            "      <-- KTABLE-SELECT-0000000003\n"
            "\n"
            "  Sub-topology: 1\n"
            "    Source: KSTREAM-SOURCE-0000000006 (topics: [KTABLE-AGGREGATE-STATE-STORE-0000000004-repartition])\n"
            "      --> KTABLE-AGGREGATE-0000000007\n"
            "    Processor: KTABLE-AGGREGATE-0000000007 (stores: [KTABLE-AGGREGATE-STATE-STORE-0000000004])\n"
            "      --> KTABLE-TOSTREAM-0000000008\n"
            "      <-- KSTREAM-SOURCE-0000000006\n"
            "    Processor: KTABLE-TOSTREAM-0000000008 (stores: [])\n"
            "      --> KSTREAM-SINK-0000000009\n"
            "      <-- KTABLE-AGGREGATE-0000000007\n"
            "    Sink: KSTREAM-SINK-0000000009 (topic: out)\n"
            "      <-- KTABLE-TOSTREAM-0000000008\n\n"
        )


@pytest.mark.spark
class TestDriver:
    def test_session_counts_summed_per_team(self, run_driver: Any) -> None:
        """The merge of a-1's sessions reaches team a as Kafka forwards it: the tombstone of
        [0,0] first (subtract 1, ts = max(0, 5)), then the merged [0,8] (add 2, ts 8)."""
        assert run_driver(_sessions_per_team("aggregate"), CLICKS) == [
            R("a", 1, 0), R("a", 2, 5), R("a", 1, 5), R("a", 3, 8), R("b", 1, 9), R("a", 4, 30)]

    def test_sessions_counted_per_team(self, run_driver: Any) -> None:
        """count(): the rows (sessions) per team; a merged-away session leaves its group."""
        assert run_driver(_sessions_per_team("count"), CLICKS) == [
            R("a", 1, 0), R("a", 2, 5), R("a", 1, 5), R("a", 2, 8), R("b", 1, 9), R("a", 3, 30)]

    def test_time_window_counts_summed_per_window(self, run_driver: Any) -> None:
        """Tumbling counts per key re-keyed by window start and reduced: an update of a window
        stays in its group, one record (subtract the old count, add the new)."""
        b = StreamsBuilder()
        counts = b.stream("in", STR).group_by_key().windowed_by(TimeWindows.of_size_with_no_grace(10)).count()
        counts.group_by(lambda wk, n: (wk.window.start, n)).reduce(
            lambda agg, v: agg + v, lambda agg, v: agg - v).to_stream().to("out")
        records = [("x", "v", 1), ("y", "v", 2), ("x", "v", 3), ("x", "v", 12)]
        assert run_driver(b.build(), records) == [R(0, 1, 1), R(0, 2, 2), R(0, 3, 3), R(10, 1, 12)]


@pytest.mark.spark
class TestStreaming:
    def test_time_window_counts_per_window_across_micro_batches(self, spark: Any, tmp_path: Any) -> None:
        """On a streaming query: the windowed aggregation, the re-keying operator (which keeps each
        window's last count) and the grouped aggregation keep their state across micro-batches."""
        from streamsdsl.runtime.streaming import start_streaming
        from streamsdsl.testing.files import FileTopic
        from tests._support import Collect

        topic = FileTopic(str(tmp_path / "in"))
        s = Serdes.String()
        b = StreamsBuilder()
        counts = b.stream("in", STR).group_by_key().windowed_by(TimeWindows.of_size_with_no_grace(10)).count()
        counts.group_by(lambda wk, n: (wk.window.start, n)).reduce(
            lambda agg, v: agg + v, lambda agg, v: agg - v).to_stream().to("out")
        topology = b.build()
        topic.append("in", [("x", "v", 1), ("y", "v", 2)], s, s)
        out = Collect()
        q, _, _ = start_streaming(topology, lambda n: topic.read_stream(spark, n.topics), out,
                                  checkpoint_location=str(tmp_path / "cp"))
        q.processAllAvailable()
        topic.append("in", [("x", "v", 3), ("x", "v", 12)], s, s)
        q.processAllAvailable()
        q.stop()
        latest = {k: (v, ts) for _, k, v, ts in out.records}
        assert latest == {0: (3, 3), 10: (1, 12)}
