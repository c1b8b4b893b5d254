"""Windows and joins below other stateful operators on a streaming query, against the
`TopologyTestDriver` on the same input: one application with an outer stream–stream join below
a stream–table join, a suppressed sliding-window count, and on-close window counts below a
grouped table and below a cogroup; stopped and restarted from its checkpoint in the middle.

Without a record cache (``statestore.cache.max.bytes = 0``) the tables above the windows forward
every change in both, so the records are the same; a micro-batch's records of different keys
come in no promised order, so each topic is compared as a multiset. The built-in counts run on
the JVM operator: the subject is event time past stateful operators, which Spark's watermark
carries the same way whichever operator runs them."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from streamsdsl import (Consumed, EmitStrategy, Grouped, JoinWindows, Produced, Serdes, SlidingWindows,
                        StreamsBuilder, Suppressed, TimeWindows, Topology)
from streamsdsl.runtime.streaming import await_event_time_timers, start_streaming
from streamsdsl.semantics.kernels import FlushPolicy
from streamsdsl.testing.files import FileTopic
from tests._support import Collect

pytestmark = pytest.mark.spark

S, L = Serdes.String(), Serdes.Long()
STRINGS = Consumed.with_serdes(S, S)
ON_CLOSE = EmitStrategy.on_window_close()
OUTPUTS = {"outer": (S, S), "sliding": (S, L), "grouped": (S, L), "cogrouped": (S, L)}


def _topology() -> Topology:
    b = StreamsBuilder()
    users = b.table("users", STRINGS)
    # an outer stream-stream join below a stream-table join
    (b.stream("clicks", STRINGS).join(users, lambda page, name: f"{name}:{page}")
     .outer_join(b.stream("payments", STRINGS), lambda click, paid: f"{click}|{paid}",
                 JoinWindows.of_time_difference_with_no_grace(10))
     .to("outer", Produced.with_serdes(S, S)))
    # a suppressed sliding-window count
    (b.stream("views", STRINGS).group_by_key().windowed_by(SlidingWindows.of_time_difference_with_no_grace(10))
     .count().suppress(Suppressed.until_window_closes(Suppressed.BufferConfig.unbounded())).to_stream()
     .map(lambda w, n: (f"{w.key}@{w.window.start}", n)).to("sliding", Produced.with_serdes(S, L)))
    # on-close windows below a grouped table: users per name, re-counted in 100 ms windows
    (users.group_by(lambda user, name: (name, user), Grouped.with_serdes(S, S)).count().to_stream()
     .filter(lambda name, n: n is not None).group_by_key(Grouped.with_serdes(S, L))
     .windowed_by(TimeWindows.of_size_with_no_grace(100)).emit_strategy(ON_CLOSE).count().to_stream()
     .map(lambda w, n: (f"{w.key}@{w.window.start}", n)).to("grouped", Produced.with_serdes(S, L)))
    # on-close windows below a cogroup of two streams
    a = b.stream("a", STRINGS).group_by_key()
    c = b.stream("c", STRINGS).group_by_key()
    (a.cogroup(lambda k, v, agg: agg + v).cogroup(c, lambda k, v, agg: agg + v.upper()).aggregate(lambda: "")
     .to_stream().group_by_key().windowed_by(TimeWindows.of_size_with_no_grace(100)).emit_strategy(ON_CLOSE)
     .count().to_stream().map(lambda w, n: (f"{w.key}@{w.window.start}", n)).to("cogrouped", Produced.with_serdes(S, L)))
    return b.build()


# One list per micro-batch file: (topic, key, value, timestamp); the restart is after FIRST files.
# Time only moves forward from file to file (but for one late click), so that Kafka's stream
# time of each task and the query's global watermark agree (see docs/differences.md).
FILES: list[list[tuple[str, str, Any, int]]] = [
    [("users", "u1", "ann", 0), ("users", "u2", "bo", 0), ("users", "u3", "ann", 5)],
    [("clicks", "u1", "home", 10), ("clicks", "u2", "cart", 12)],
    [("payments", "u1", "p1", 15)],
    [("views", "x", "v", 20), ("views", "x", "v", 25), ("views", "y", "v", 28)],
    [("clicks", "u3", "faq", 30), ("a", "k", "a1", 30), ("c", "k", "c1", 35), ("payments", "u9", "p9", 40)],
    [("a", "j", "a2", 60), ("users", "u2", "ann", 90)],
    [("views", "x", "v", 120), ("a", "k", "a3", 130), ("clicks", "u1", "late", 5)],
    [("clicks", "u2", "far", 400), ("users", "u4", "cy", 400), ("views", "z", "v", 400), ("a", "z", "a4", 400)],
]
FIRST = 5


def _driver_outputs(topology: Topology) -> dict[str, Counter[tuple[Any, Any, int]]]:
    from streamsdsl.runtime.driver import TopologyTestDriver

    with TopologyTestDriver(topology, {"statestore.cache.max.bytes": 0}) as d:
        inputs = {t: d.create_input_topic(t, S, S) for t in {t for f in FILES for t, *_ in f}}
        for records in FILES:
            for t, k, v, ts in records:
                inputs[t].pipe_input(k, v, ts)
        return {name: Counter((r.key, r.value, r.timestamp)
                              for r in d.create_output_topic(name, *serdes).read_records_to_list())
                for name, serdes in OUTPUTS.items()}


@pytest.mark.usefixtures("jvm_operator")
def test_streaming_below_stateful_operators_matches_the_driver_across_a_restart(spark: Any, tmp_path: Any) -> None:
    """Every topic's records on a streaming query, stopped after the first five files and
    restarted from its checkpoint, are the driver's: the outer join's matches, its unmatched
    clicks and payments once their window closed (the late click joined with None at once, as
    KIP-633 does), the sliding windows' final counts, and the windows below the grouped table
    and the cogroup, each once when it closed."""
    topology = _topology()
    expected = _driver_outputs(topology)
    topic, cp = FileTopic(str(tmp_path / "in")), str(tmp_path / "cp")
    got: dict[str, Counter[tuple[Any, Any, int]]] = {name: Counter() for name in OUTPUTS}
    for part in (FILES[:FIRST], FILES[FIRST:]):
        for records in part:
            topic.append_topics(records, S, S)
        out = Collect()
        q, _, _ = start_streaming(topology, lambda n: topic.read_stream(spark, n.topics), out, checkpoint_location=cp,
                                  flush=FlushPolicy.EVERY_WRITE)
        q.processAllAvailable()
        await_event_time_timers(q, topology)
        q.stop()
        for name in OUTPUTS:
            got[name].update((k, v, ts) for _, k, v, ts in out.by_topic.get(name, []))
    assert got == expected
