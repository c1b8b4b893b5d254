"""The session-window count that the JVM operator's loading tests run in fresh interpreters
(`tests.jvm.test_loading`) and on a local cluster (`integration.local_cluster_source`), with its
exact records, and the streaming application whose packing step and Python processor ship to
the executors there."""

from __future__ import annotations

import tempfile
from typing import Any

from streamsdsl import Consumed, Serdes, SessionWindows, StreamsBuilder, Topology, TopologyTestDriver


def topology() -> Topology:
    b = StreamsBuilder()
    b.stream("in", Consumed.with_serdes(Serdes.String(), Serdes.String())).group_by_key().windowed_by(
        SessionWindows.with_gap(5)).count().to_stream().to("out")
    return b.build()


def run(spark: Any, config: dict[str, Any]) -> list[tuple[str, int, int, int | None]]:
    """`topology` on the Spark engine: (key, start, end, count) of each output record."""
    with TopologyTestDriver(topology(), config, engine="spark", spark=spark) as driver:
        topic = driver.create_input_topic("in")
        for k, ts in [("a", 0), ("a", 3), ("b", 1), ("a", 20)]:
            topic.pipe_input(k, "v", ts)
        return [(r.key.key, r.key.window.start, r.key.window.end, r.value)
                for r in driver.create_output_topic("out").read_records_to_list()]


EXPECTED = [("a", 0, 0, 1), ("a", 0, 0, None), ("a", 0, 3, 2), ("b", 1, 1, 1), ("a", 20, 20, 1)]

#: `streaming_sessions`' records: batch 0 [0, 5] "pq" and [1, 1] "x"; batch 1 a tombstone for
#: [0, 5], then [0, 12] "pqr" and [30, 30] "y" (a null-key record of each batch dropped)
STREAMING_EXPECTED = [[0, "a", 0, 5, "pq", 5], [0, "b", 1, 1, "x", 1],
                      [1, "a", 0, 12, "pqr", 12], [1, "a", 0, 5, None, 5], [1, "b", 30, 30, "y", 30],
                      ["dropped", 2.0]]


def streaming_sessions(spark: Any) -> list[list[Any]]:
    """A streaming query of a session aggregation with a Python aggregator over two files
    (two micro-batches): its records as (batch, key, start, end, value, timestamp), sorted, and
    last ``["dropped", n]``: the null-key records its drop counter counted (one per batch)."""
    from streamsdsl.runtime.state_stores import release_state_stores
    from streamsdsl.runtime.streaming import start_streaming
    from streamsdsl.testing.files import FileTopic
    from tests._support import Collect

    b = StreamsBuilder()
    (b.stream("clicks", Consumed.with_serdes(Serdes.String(), Serdes.String())).group_by_key()
     .windowed_by(SessionWindows.with_gap(10)).aggregate(lambda: "", lambda k, v, a: a + v, lambda k, a, b: a + b)
     .to_stream().to("sessions"))
    with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as d:
        topic = FileTopic(d + "/in")
        topic.append("clicks", [("a", "p", 0), (None, "n", 2), ("b", "x", 1), ("a", "q", 5)], Serdes.String(),
                     Serdes.String())
        topic.append("clicks", [("a", "r", 12), ("b", "y", 30), (None, "n", 31)], Serdes.String(), Serdes.String())
        out = Collect()
        q, compiled, metrics = start_streaming(b.build(), lambda n: topic.read_stream(spark, n.topics), out,
                                               checkpoint_location=d + "/cp")
        q.processAllAvailable()
        metrics.refresh()
        q.stop()
        release_state_stores(spark, q.runId, d + "/cp")  # before the directory goes
    counted = "dropped" if compiled.counters else "observed (no counter)"
    return [*sorted(([batch, k.key, k.window.start, k.window.end, v, ts] for batch, k, v, ts in out.records),
                    key=repr), [counted, metrics.snapshot()["dropped-records-total"]]]
