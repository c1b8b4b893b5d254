"""Windows that close on a quiet aggregation (idle close, beyond Kafka Streams).

Per-minute page-view counts, emitted once per window on close. In Kafka Streams the last windows
come out only when newer records move stream time past their end: here the night's last views
would wait for the morning. With ``EmitStrategy.on_window_close(idle_close=...)``, once no record
has reached the aggregation for five minutes of wall-clock time, every window it holds open is
closed and emitted, as if stream time had passed them; a record that arrives later for one of
them is late (dropped and counted). While another page keeps the aggregation busy, a quiet page's
window stays open (stream time still moves): a late view within its grace is taken, as in Kafka
Streams. Runs through the TopologyTestDriver, whose wall clock ``advance_wall_clock_time`` moves
(no broker needed):

    .venv/bin/python examples/idle_windows.py
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from streamsdsl import Consumed, EmitStrategy, Serdes, StreamsBuilder, TimeWindows
from streamsdsl.runtime.driver import TopologyTestDriver

MINUTE = 60_000


def build() -> Any:
    builder = StreamsBuilder()
    (builder.stream("page-views", Consumed.with_serdes(Serdes.String(), Serdes.String()))
     .group_by_key()
     .windowed_by(TimeWindows.of_size_and_grace(timedelta(minutes=1), timedelta(seconds=10)))
     .emit_strategy(EmitStrategy.on_window_close(idle_close=timedelta(minutes=5)))
     .count()
     .to_stream()
     .map(lambda window, n: (window.key, f"{window.window.start // MINUTE:02d}:00 {n}"))
     .to("views-per-minute"))
    return builder.build()


def main() -> None:
    with TopologyTestDriver(build(), engine="direct", initial_wall_clock_time_ms=0) as driver:
        views = driver.create_input_topic("page-views")
        out = driver.create_output_topic("views-per-minute")

        def show(when: str) -> None:
            print(f"{when}:")
            for r in out.read_records_to_list():
                print(f"  {r.key:<6} {r.value}  (timestamp {r.timestamp})")

        for page, at in [("home", 5_000), ("about", 20_000), ("home", 50_000)]:
            views.pipe_input(page, "view", at)
        driver.advance_wall_clock_time(timedelta(minutes=4))
        views.pipe_input("home", "view", 65_000)  # stream time 65 s: 00:00 closes at 70 s (end + grace)
        driver.advance_wall_clock_time(timedelta(minutes=2))
        show("about quiet for 6 minutes, home 2 minutes ago")  # the aggregation is busy: nothing closes
        views.pipe_input("about", "view", 55_000)  # within 00:00's grace: taken
        driver.advance_wall_clock_time(timedelta(minutes=5))
        show("five quiet minutes later")
        views.pipe_input("home", "view", 58_000)  # for the closed 00:00 window: late
        print("dropped-records-total:", int(driver.metrics()["dropped-records-total"]))


if __name__ == "__main__":
    main()
