"""User sessions from a click stream: session windows emitted once, when they close.

Clicks arrive on the topic ``clicks`` keyed by user. A session is a run of clicks with no gap
longer than 5 minutes; late clicks are accepted for 2 more minutes of stream time (the grace
period). With ``EmitStrategy.on_window_close()`` each session is written to ``user-sessions``
exactly once, when stream time passes ``end + gap + grace``; no intermediate updates and no
tombstones are written.

The input contains

* a **bridging click**: alice's click at 09:05 arrives after her click at 09:08 and lies within
  the gap of both of her sessions, so it merges ``[09:00, 09:02]`` and ``[09:08, 09:08]`` into
  one session ``[09:00, 09:08]``;
* a **late click**: bob's click at 09:02:30 arrives when his session ``[09:01, 09:03]`` has
  already closed; it is dropped and counted in ``dropped-records-total``.

Run it with ``.venv/bin/python examples/clickstream_sessions.py``.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from streamsdsl import Consumed, EmitStrategy, Serdes, SessionWindows, StreamsBuilder, Topology
from streamsdsl.runtime.driver import TopologyTestDriver

GAP = timedelta(minutes=5)
GRACE = timedelta(minutes=2)
DAY = datetime(2024, 1, 1, tzinfo=timezone.utc)


def at(hhmmss: str) -> int:
    """Epoch milliseconds of ``hh:mm:ss`` UTC on 2024-01-01."""
    h, m, s = (int(x) for x in hhmmss.split(":"))
    return int((DAY + timedelta(hours=h, minutes=m, seconds=s)).timestamp() * 1000)


def clock(ms: int) -> str:
    """``hh:mm:ss`` UTC of epoch milliseconds."""
    return datetime.fromtimestamp(ms / 1000, timezone.utc).strftime("%H:%M:%S")


CLICKS = [
    # (user, page, time) in pipe order
    ("alice", "/home", "09:00:00"),
    ("bob", "/home", "09:01:00"),
    ("alice", "/search", "09:02:00"),
    ("bob", "/cart", "09:03:00"),
    ("alice", "/item/7", "09:08:00"),
    ("alice", "/item/3", "09:05:00"),  # out of order: bridges alice's two sessions
    ("bob", "/home", "09:11:00"),  # stream time 09:11 > 09:03 + 5 + 2: bob's first session closes
    ("bob", "/checkout", "09:02:30"),  # too late: that session is closed -> dropped
    ("carol", "/home", "09:20:00"),  # stream time 09:20 closes alice's session and bob's second
]


def build_topology() -> Topology:
    """clicks → group by user → 5-minute sessions (2 min grace) → count → emitted on close."""
    builder = StreamsBuilder()
    (
        builder.stream("clicks", Consumed.with_serdes(Serdes.String(), Serdes.String()))
        .group_by_key()
        .windowed_by(SessionWindows.with_gap(GAP).grace(GRACE))
        .emit_strategy(EmitStrategy.on_window_close())
        .count()
        .to_stream()
        .to("user-sessions")
    )
    return builder.build()


def main() -> None:
    topology = build_topology()
    print(topology.describe())

    with TopologyTestDriver(topology) as driver:
        clicks = driver.create_input_topic("clicks")
        for user, page, time in CLICKS:
            clicks.pipe_input(user, page, at(time))
        sessions = driver.create_output_topic("user-sessions").read_records_to_list()
        metrics = driver.metrics()

    print(f"{'user':<6} {'start':>8} {'end':>8} {'clicks':>6}")
    for record in sessions:
        window = record.key.window
        print(f"{record.key.key:<6} {clock(window.start):>8} {clock(window.end):>8} {record.value:>6}")
    print()
    for name, value in metrics.items():
        print(f"{name}: {value:g}")
    print("(carol's session [09:20:00, 09:20:00] is still open when the input ends: not emitted)")


if __name__ == "__main__":
    main()
