"""A processor with a store on two partitions, as a streaming query over files: each partition is
a task (``0_0``, ``0_1``) with its own store, its own stream time and punctuation.

Shared by the ``local[2]`` test (tests/test_processors.py) and the local-cluster one
(`integration.local_cluster_source`), where the processor runs in the executors' Python workers."""

from __future__ import annotations

import tempfile
from typing import Any

from streamsdsl import Consumed, Produced, Serdes, StreamsBuilder, Stores, Topology
from streamsdsl.processor import Processor, PunctuationType, Record

#: The micro-batches: (partition, records (key, value, timestamp)).
BATCHES = [(0, [("a", "x", 10), ("b", "y", 20)]), (1, [("d", "x", 15), ("e", "z", 25)]), (0, [("c", "x", 30)]),
           (1, [("f", "z", 35)])]


class FirstPerTask(Processor):
    """Forwards the first record of each value in its task (a store of the values seen), tagged
    with the task and the record's partition and offset; a stream-time punctuator forwards the
    store's size, keyed by the task."""

    def init(self, context: Any) -> None:
        self.context, self.seen = context, context.get_state_store("seen")
        context.schedule(100, PunctuationType.STREAM_TIME, self.size)

    def process(self, record: Record) -> None:
        if self.seen.get(record.value) is None:
            m = self.context.record_metadata()
            self.context.forward(record.with_value(f"{record.value}@{self.context.task_id()}:{m.partition}/{m.offset}"))
        self.seen.put(record.value, record.timestamp)

    def size(self, now: int) -> None:
        self.context.forward(Record(str(self.context.task_id()), str(self.seen.approximate_num_entries()), now))


def topology() -> Topology:
    s = Serdes.String()
    b = StreamsBuilder()
    b.add_state_store(Stores.key_value_store_builder(Stores.persistent_key_value_store("seen"), s, Serdes.Long()))
    b.stream("in", Consumed.with_serdes(s, s)).process(FirstPerTask, "seen").to("out", Produced.with_serdes(s, s))
    return b.build()


def expected() -> list[tuple[str, str, int]]:
    """(key, value, timestamp) of every record written, sorted."""
    return sorted([("a", "x@0_0:0/0", 10), ("0_0", "1", 10), ("b", "y@0_0:0/1", 20),
                   ("d", "x@0_1:1/0", 15), ("0_1", "1", 15), ("e", "z@0_1:1/1", 25)])


def run(spark: Any) -> list[tuple[str, str, int]]:
    """The topology as a streaming query over `BATCHES`: what it wrote (key, value, timestamp), sorted."""
    from streamsdsl.io.files import FileTopic
    from streamsdsl.runtime.streaming import start_streaming
    from tests._support import Collect

    s = Serdes.String()
    with tempfile.TemporaryDirectory(prefix="streamsdsl-processor-") as directory:
        topic = FileTopic(f"{directory}/in")
        out = Collect()
        query, _, _ = start_streaming(topology(), lambda n: topic.read_stream(spark, n.topics), out,
                                      checkpoint_location=f"{directory}/checkpoint")
        try:
            for partition, records in BATCHES:
                topic.append("in", records, s, s, partition=partition)
                query.processAllAvailable()
        finally:
            query.stop()
    return sorted((k, v, ts) for _, k, v, ts in out.records)
