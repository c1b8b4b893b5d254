"""An alert when a sensor goes quiet: a custom processor (the Processor API) with a key-value
store of each sensor's last reading and a stream-time punctuator that scans it.

Every reading updates its sensor's last-seen time in the store ``last-seen``. Every 10 seconds
of stream time the punctuator scans the whole store (every sensor of the task, in key order)
and, for each sensor silent for a minute or more, forwards one alert, timestamped with the
punctuation time, and forgets the sensor until it reports again. Runs through the
TopologyTestDriver (no broker needed):

    .venv/bin/python examples/quiet_sensors.py
"""

from __future__ import annotations

from typing import Any

from streamsdsl import Consumed, Produced, PunctuationType, Serdes, StreamsBuilder, Stores
from streamsdsl.processor import Processor, Record
from streamsdsl.runtime.driver import TopologyTestDriver

QUIET_MS = 60_000
CHECK_EVERY_MS = 10_000


class QuietSensorAlert(Processor):
    """Remembers when each sensor last reported; alerts once when it has been quiet a minute."""

    def init(self, context: Any) -> None:
        self.context = context
        self.last_seen = context.get_state_store("last-seen")
        context.schedule(CHECK_EVERY_MS, PunctuationType.STREAM_TIME, self.check)

    def process(self, record: Record) -> None:
        self.last_seen.put(record.key, record.timestamp)

    def check(self, now: int) -> None:
        with self.last_seen.all() as sensors:
            quiet = [(s.key, s.value) for s in sensors if now - s.value >= QUIET_MS]
        for sensor, seen in quiet:
            self.context.forward(Record(sensor, f"quiet since {seen // 1000} s", now))
            self.last_seen.delete(sensor)


def build() -> Any:
    builder = StreamsBuilder()
    builder.add_state_store(Stores.key_value_store_builder(
        Stores.persistent_key_value_store("last-seen"), Serdes.String(), Serdes.Long()))
    (builder.stream("readings", Consumed.with_serdes(Serdes.String(), Serdes.Double()))
     .process(QuietSensorAlert, "last-seen", named="quiet-sensors")
     .to("alerts", Produced.with_serdes(Serdes.String(), Serdes.String())))
    return builder.build()


def main() -> None:
    topology = build()
    print(topology.describe())
    readings = [("boiler", 71.5, 0), ("pump", 3.2, 5_000), ("boiler", 72.0, 30_000), ("pump", 3.1, 40_000),
                ("pump", 3.3, 80_000), ("pump", 3.0, 100_000), ("boiler", 70.9, 125_000),
                ("boiler", 70.5, 170_000)]
    with TopologyTestDriver(topology) as driver:
        topic = driver.create_input_topic("readings")
        for sensor, value, ts in readings:
            topic.pipe_input(sensor, value, ts)
        for alert in driver.create_output_topic("alerts").read_records_to_list():
            print(f"{alert.timestamp // 1000:>4} s  {alert.key}: {alert.value}")


if __name__ == "__main__":
    main()
