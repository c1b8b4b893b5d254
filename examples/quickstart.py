"""Quickstart: count words per line of text, run on Spark through the TopologyTestDriver.

The topology reads lines from the topic ``text-lines``, splits them into lowercase words,
drops short words, regroups by word and counts. The counts table is written, as its changelog,
to ``word-counts``: one update per counted word.

No Kafka broker is needed: :class:`~streamsdsl.TopologyTestDriver` runs the compiled Spark
plan over the piped records, with Kafka Streams' record-by-record semantics.

Run it with ``make run`` or ``.venv/bin/python examples/quickstart.py``.
"""

from __future__ import annotations

from streamsdsl import Consumed, Produced, Serdes, StreamsBuilder, Topology
from streamsdsl.driver import TopologyTestDriver

LINES = [
    # (key, value, timestamp in ms)
    ("line-1", "Kafka streams on Spark", 1_000),
    ("line-2", "Spark streams it", 2_000),
    ("line-3", "kafka KAFKA", 3_000),
]


def build_topology() -> Topology:
    """text-lines → words (3+ letters) → group by word → count → word-counts."""
    builder = StreamsBuilder()
    (
        builder.stream("text-lines", Consumed.with_serdes(Serdes.String(), Serdes.String()))
        .flat_map_values(lambda line: line.lower().split())
        .filter(lambda key, word: len(word) >= 3)
        .group_by(lambda key, word: word)
        .count()
        .to_stream()
        .to("word-counts", Produced.with_serdes(Serdes.String(), Serdes.Long()))
    )
    return builder.build()


def main() -> None:
    topology = build_topology()
    print(topology.describe())

    with TopologyTestDriver(topology) as driver:
        lines = driver.create_input_topic("text-lines")
        for key, value, timestamp in LINES:
            lines.pipe_input(key, value, timestamp)
        records = driver.create_output_topic("word-counts").read_records_to_list()

    print(f"{'word':<10} {'count':>5} {'timestamp':>9}")
    for record in records:
        print(f"{record.key:<10} {record.value:>5} {record.timestamp:>9}")


if __name__ == "__main__":
    main()
