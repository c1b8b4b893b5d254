"""Windows that close on a quiet key (idle close, beyond Kafka Streams).

Per-minute page-view counts, emitted once per window on close. In Kafka Streams the last window
of a key comes out only when newer records move stream time past its end: here the night's last
views would wait for the morning. With ``EmitStrategy.on_window_close(idle_close=...)`` a key
that has had no record for five minutes of wall-clock time has its open windows closed and
emitted, as if stream time had passed them; a record that arrives later for one of them is late
(dropped and counted). Runs through the TopologyTestDriver, whose wall clock
``advance_wall_clock_time`` moves (no broker needed):

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
        for page, at in [("home", 5_000), ("about", 20_000), ("home", 50_000), ("home", 65_000)]:
            views.pipe_input(page, "view", at)

        def show(when: str) -> None:
            print(f"{when}:")
            for r in out.read_records_to_list():
                print(f"  {r.key:<6} {r.value}  (timestamp {r.timestamp})")

        show("after the last view")  # stream time 65 s: no window has reached end + grace yet
        driver.advance_wall_clock_time(timedelta(minutes=5))
        show("five quiet minutes later")
        views.pipe_input("home", "view", 55_000)  # for the closed 00:00 window: late
        print("dropped-records-total:", int(driver.metrics()["dropped-records-total"]))


if __name__ == "__main__":
    main()
