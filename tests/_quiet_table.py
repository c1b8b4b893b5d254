"""The clicks-and-users application of the quiet-table finding (issue 25): 20 users written
once to a table before any click; the clicks are joined with them (to ``enriched``) and, in
the same application, counted per user in sessions emitted on close (to ``sessions``). After a
click far in the future every user's session closes: Kafka's stream time never waits for the
quiet table, and neither does the global watermark (the largest input's).

Shared by the ``local[2]`` test and the local-cluster one (`integration.local_cluster_source`)."""

from __future__ import annotations

import tempfile
from typing import Any

from streamsdsl import Consumed, EmitStrategy, Produced, Serdes, SessionWindows, StreamsBuilder, Topology

USERS = [f"u{i:02d}" for i in range(20)]
GAP_MS = 60_000
FAR = 3_600_000  # an hour later: every session before it closes


def topology() -> Topology:
    s = Serdes.String()
    b = StreamsBuilder()
    clicks = b.stream("clicks", Consumed.with_serdes(s, s))
    users = b.table("users", Consumed.with_serdes(s, s))
    clicks.join(users, lambda page, name: f"{name}:{page}").to("enriched", Produced.with_serdes(s, s))
    (clicks.group_by_key().windowed_by(SessionWindows.of_inactivity_gap_with_no_grace(GAP_MS))
     .emit_strategy(EmitStrategy.on_window_close()).count().to_stream().to("sessions"))
    return b.build()


def expected_sessions() -> list[tuple[str, int, int, int]]:
    """(user, start, end, clicks) of every session that closes: each user's two clicks."""
    return sorted((u, 1_000 * i, 1_000 * i + 500, 2) for i, u in enumerate(USERS))


def run(spark: Any) -> list[tuple[str, int, int, int]]:
    """The application as a streaming query over files: the users, then the clicks (two per
    user), then one far click of ``u00``; the sessions it emitted (user, start, end, clicks)."""
    with tempfile.TemporaryDirectory(prefix="quiet-table-", ignore_cleanup_errors=True) as d:
        return _run_in(spark, d)


def _run_in(spark: Any, d: str) -> list[tuple[str, int, int, int]]:
    """`run` with its input and checkpoint in directory ``d``."""
    from streamsdsl.runtime.state_stores import release_state_stores
    from streamsdsl.runtime.streaming import await_event_time_timers, start_streaming
    from streamsdsl.testing.files import FileTopic
    from tests._support import Collect

    s = Serdes.String()
    topic = FileTopic(d + "/in")
    topic.append("users", [(u, f"name-{u}", 0) for u in USERS], s, s)
    topic.append("clicks", [(u, "home", 1_000 * i) for i, u in enumerate(USERS)]
                 + [(u, "cart", 1_000 * i + 500) for i, u in enumerate(USERS)], s, s)
    out = Collect()
    app = topology()
    q, _, _ = start_streaming(app, lambda n: topic.read_stream(spark, n.topics), out, checkpoint_location=d + "/cp")
    q.processAllAvailable()
    await_event_time_timers(q, app)
    topic.append("clicks", [("u00", "later", FAR)], s, s)
    q.processAllAvailable()
    await_event_time_timers(q, app)
    q.stop()
    release_state_stores(spark, q.runId, d + "/cp")  # before the directory goes
    return sorted((k.key, k.window.start, k.window.end, n) for _, k, n, _ in out.by_topic.get("sessions", []))
