"""State stays bounded on a streaming query: what stream time has passed leaves the state of
every operator, wherever it sits in the topology, read back with Spark's state data source."""

from __future__ import annotations

from typing import Any

import pytest

from streamsdsl import (Consumed, EmitStrategy, Grouped, JoinWindows, Produced, Serdes, StreamsBuilder,
                        TimeWindows, Topology)
from streamsdsl.runtime.streaming import await_event_time_timers, start_streaming
from streamsdsl.testing.files import FileTopic
from tests._support import Collect, state_rows

pytestmark = pytest.mark.spark

S = Serdes.String()


def _topology() -> Topology:
    """orders ⋈ customers (a table); below it a region count in 100 ms windows (on close) and
    a left join with payments (10 ms, no grace)."""
    strings = Consumed.with_serdes(S, S)
    b = StreamsBuilder()
    enriched = b.stream("orders", strings).join(b.table("customers", strings), lambda order, region: region)
    (enriched.group_by(lambda k, region: region, Grouped.with_serdes(S, S))
     .windowed_by(TimeWindows.of_size_with_no_grace(100)).emit_strategy(EmitStrategy.on_window_close())
     .count().to_stream().map(lambda w, n: (f"{w.key}@{w.window.start}", n))
     .to("counts", Produced.with_serdes(S, Serdes.Long())))
    enriched.left_join(b.stream("payments", strings), lambda region, paid: f"{region}/{paid}",
                       JoinWindows.of_time_difference_with_no_grace(10)).to("paid", Produced.with_serdes(S, S))
    return b.build()


def test_windows_and_join_records_leave_the_state_once_stream_time_passes_them(spark: Any, tmp_path: Any) -> None:
    """After stream time reaches 1000, each operator holds only what is still open: the count
    one key (EU, its window [1000, 1100)) and one timer, the stream-stream join one key (c3's
    order at 1000, held for its window) and one timer; the table its three customers (a
    table's rows never expire). Every instance of an operator holds the same. (The count runs on
    the JVM operator here; the other streaming tests run both operators.)"""
    topic = FileTopic(str(tmp_path / "in"))
    topic.append("customers", [("c1", "EU", 1), ("c2", "US", 1), ("c3", "EU", 1)], S, S)
    topic.append("orders", [("c1", "o1", 10), ("c2", "o2", 20), ("c3", "o3", 30)], S, S)
    topic.append("payments", [("c1", "p1", 12)], S, S)
    topic.append("orders", [("c3", "o4", 1000)], S, S)
    topology = _topology()
    out = Collect()
    cp = str(tmp_path / "cp")
    q, _, _ = start_streaming(topology, lambda n: topic.read_stream(spark, n.topics), out, checkpoint_location=cp)
    q.processAllAvailable()
    await_event_time_timers(q, topology)
    q.stop()
    assert sorted((k, v, ts) for _, k, v, ts in out.by_topic["counts"]) == [("EU@0", 2, 30), ("US@0", 1, 20)]
    # p1 (12) comes after stream time reached 30: o1's window had closed, as in Kafka
    assert sorted((k, v, ts) for _, k, v, ts in out.by_topic["paid"]) == [
        ("c1", "EU/None", 10), ("c2", "US/None", 20), ("c3", "EU/None", 30)]
    rows = state_rows(spark, cp)
    count_store = next(n.store for n in topology.nodes if hasattr(n, "windows") and hasattr(n, "agg"))
    assert rows[count_store] == [1]  # an aggregation's state variable is named after its store
    assert set(rows["join"]) == {1}
    assert set(rows["table"]) == {3}
    assert sorted(rows["timers"]) == [0] * len(rows["table"]) + [1, 1]


def test_a_late_record_below_a_join_is_dropped_counted_and_logged_by_the_window(
        spark: Any, tmp_path: Any, caplog: Any) -> None:
    """A record late for a window below a stream-table join reaches the window's operator (the
    join passes it on with its own timestamp) and is dropped there by the window's grace:
    counted in dropped-records-total and logged once, naming the aggregation and the record, as
    the driver does."""
    import logging

    from streamsdsl.runtime.metrics import QueryMetrics

    strings = Consumed.with_serdes(S, S)
    b = StreamsBuilder()
    (b.stream("orders", strings).join(b.table("customers", strings), lambda order, region: region)
     .group_by(lambda k, region: region, Grouped.with_serdes(S, S)).windowed_by(TimeWindows.of_size_with_no_grace(100))
     .count().to_stream().map(lambda w, n: (f"{w.key}@{w.window.start}", n))
     .to("counts", Produced.with_serdes(S, Serdes.Long())))
    topology = b.build()
    topic = FileTopic(str(tmp_path / "in"))
    topic.append("customers", [("c1", "EU", 1)], S, S)
    topic.append("orders", [("c1", "o1", 150)], S, S)
    topic.append("orders", [("c1", "o2", 20)], S, S)  # stream time 150: window [0, 100) has closed
    out = Collect()
    metrics = QueryMetrics(locate=lambda node, position: ("orders", position >> 40, position & ((1 << 40) - 1)))
    with caplog.at_level(logging.WARNING, logger="streamsdsl"):
        q, _, _ = start_streaming(topology, lambda n: topic.read_stream(spark, n.topics), out,
                                  checkpoint_location=str(tmp_path / "cp"), metrics=metrics)
        q.processAllAvailable()
        snapshot = metrics.snapshot()
        q.stop()
    assert [(k, v, ts) for _, k, v, ts in out.by_topic["counts"]] == [("EU@100", 1, 150)]
    assert snapshot["dropped-records-total"] == 1.0
    drops = [r.getMessage() for r in caplog.records if "Skipping record" in r.getMessage()]
    assert drops == ["KSTREAM-AGGREGATE-0000000007: Skipping record for expired window. topic=[orders] "
                     "partition=[0] offset=[1] timestamp=[20]"]
