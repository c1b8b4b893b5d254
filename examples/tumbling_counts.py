"""Page views per user per minute: tumbling time windows, emitted on update and on close.

Page views arrive on the topic ``page-views`` keyed by user. They are counted per user in
1-minute tumbling windows ``[hh:mm:00, hh:mm+1:00)`` that accept late records for 10 more
seconds of stream time (the grace period). The same topology runs twice:

* with the default ``EmitStrategy.on_window_update()`` every record forwards the new count of
  its window at once;
* with ``EmitStrategy.on_window_close()`` each window is forwarded exactly once, with its final
  count, when stream time reaches ``end + grace``.

The input contains

* a **late record within grace**: bob's view at 09:00:58 arrives at stream time 09:01:05, after
  the window ``[09:00, 09:01)`` has ended but before ``09:01:00 + 10 s``; it is counted;
* a **late record after grace**: alice's view at 09:00:50 arrives at stream time 09:01:30, when
  that window has closed; it is dropped and counted in ``dropped-records-total``.

Run it with ``.venv/bin/python examples/tumbling_counts.py``.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from streamsdsl import Consumed, EmitStrategy, Serdes, StreamsBuilder, TimeWindows, Topology
from streamsdsl.runtime.driver import TopologyTestDriver

SIZE = timedelta(minutes=1)
GRACE = timedelta(seconds=10)
DAY = datetime(2024, 1, 1, tzinfo=timezone.utc)


def at(hhmmss: str) -> int:
    """Epoch milliseconds of ``hh:mm:ss`` UTC on 2024-01-01."""
    h, m, s = (int(x) for x in hhmmss.split(":"))
    return int((DAY + timedelta(hours=h, minutes=m, seconds=s)).timestamp() * 1000)


def clock(ms: int) -> str:
    """``hh:mm:ss`` UTC of epoch milliseconds."""
    return datetime.fromtimestamp(ms / 1000, timezone.utc).strftime("%H:%M:%S")


PAGE_VIEWS = [
    # (user, page, time) in pipe order
    ("alice", "/home", "09:00:05"),
    ("bob", "/home", "09:00:20"),
    ("alice", "/search", "09:00:40"),
    ("alice", "/item/7", "09:01:05"),  # stream time 09:01:05: [09:00, 09:01) ended, still in grace
    ("bob", "/cart", "09:00:58"),  # late but within grace: counted in [09:00, 09:01)
    ("bob", "/checkout", "09:01:30"),  # stream time 09:01:30 >= 09:01:00 + 10 s: [09:00, 09:01) closes
    ("alice", "/item/3", "09:00:50"),  # too late: [09:00, 09:01) is closed -> dropped
    ("carol", "/home", "09:02:15"),  # stream time 09:02:15 closes [09:01, 09:02)
]


def build_topology(emit: EmitStrategy = EmitStrategy.on_window_update()) -> Topology:
    """page-views → group by user → 1-minute tumbling windows (10 s grace) → count."""
    builder = StreamsBuilder()
    (
        builder.stream("page-views", Consumed.with_serdes(Serdes.String(), Serdes.String()))
        .group_by_key()
        .windowed_by(TimeWindows.of_size_and_grace(SIZE, GRACE))
        .emit_strategy(emit)
        .count()
        .to_stream()
        .to("views-per-minute")
    )
    return builder.build()


def run(emit: EmitStrategy) -> None:
    """Pipe the page views through the topology with ``emit`` and print what it forwards."""
    with TopologyTestDriver(build_topology(emit)) as driver:
        views = driver.create_input_topic("page-views")
        for user, page, time in PAGE_VIEWS:
            views.pipe_input(user, page, at(time))
        records = driver.create_output_topic("views-per-minute").read_records_to_list()
        metrics = driver.metrics()

    print(f"{emit!r}:")
    print(f"{'user':<6} {'start':>8} {'end':>8} {'views':>5} {'timestamp':>9}")
    for record in records:
        window = record.key.window
        print(f"{record.key.key:<6} {clock(window.start):>8} {clock(window.end):>8} {record.value:>5} "
              f"{clock(record.timestamp):>9}")
    print(f"dropped-records-total: {metrics['dropped-records-total']:g}")
    print()


def main() -> None:
    print(build_topology(EmitStrategy.on_window_update()).describe())
    run(EmitStrategy.on_window_update())
    run(EmitStrategy.on_window_close())
    print("(carol's window [09:02:00, 09:03:00) is still open when the input ends: not emitted on close)")


if __name__ == "__main__":
    main()
