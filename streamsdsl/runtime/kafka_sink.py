"""`KafkaTopicSink`: the `streamsdsl.runtime.streaming.BatchSink` of `KafkaStreams`.

Each micro-batch, the rows of every sink are produced to its topic with the
``streamsdsl-kafka`` batch writer (`streamsdsl.io.sink`); the records the
``log_and_continue`` handler skipped are logged and go to the dead-letter topic when one is
configured. The sink counts what it wrote, for `KafkaStreams.metrics`. pyspark is imported
lazily.

Under ``processing.guarantee = exactly_once_v2`` every write is transactional
(`streamsdsl.io.sink.produce_transactionally`): the tasks' producers are named
``<application.id>-<sink name>-<partition>`` and commit the marker ``<query id>:<batch id>``
with their records, and the application registers itself in an `InstanceFence`, which a newer
instance with the same ``application.id`` replaces (the docs page *Kafka in and out* has the
protocol).

Examples
--------
>>> from streamsdsl.runtime.config import StreamsConfig
>>> sink = KafkaTopicSink(StreamsConfig.from_mapping({
...     "application.id": "copy", "bootstrap.servers": "k:9092", "producer.linger.ms": 5}))
>>> sink.emitted_total, sink.dead_letters
(0, 0)
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
import uuid
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.streaming import DataStreamWriter

    from streamsdsl.compiler import CompiledSink
    from streamsdsl.runtime.connect import ConnectBatchWriter
    from streamsdsl.runtime.config import StreamsConfig

__all__ = ["DEAD_LETTER_WRITER", "InstanceFence", "KafkaTopicSink", "log_skipped"]

log = logging.getLogger("streamsdsl")

#: How many skipped records of one micro-batch are logged one by one.
_LOGGED_SKIPS = 10


#: The writer name in the dead-letter topic's transactional ids (sink names are processor names).
DEAD_LETTER_WRITER = "dead-letters"



def log_skipped(rows: DataFrame, batch_id: int) -> None:
    """One warning per record ``log_and_continue`` skipped in micro-batch ``batch_id`` (its source
    coordinates; at most `_LOGGED_SKIPS`, then one line with how many more): ``rows`` are the
    batch's dead-letter records."""
    skipped = rows.select("source_topic", "source_partition", "source_offset").collect()
    for r in skipped[:_LOGGED_SKIPS]:
        log.warning(
            "Skipped a record that cannot be deserialized (default.deserialization.exception.handler="
            "log_and_continue): topic %s partition %s offset %s",
            r["source_topic"], r["source_partition"], r["source_offset"],
        )
    if len(skipped) > _LOGGED_SKIPS:
        log.warning("... and %d more skipped record(s) in micro-batch %d", len(skipped) - _LOGGED_SKIPS, batch_id)

class InstanceFence:
    """Exactly-once: the application instance's registration, which a newer instance replaces.

    `acquire` (before the instance's first write) commits a new instance id as the metadata of
    the offset of partition 0 of ``marker_topic`` for the consumer group
    ``<application.id>-instance``; `check` (before each micro-batch writes) reads it back and raises
    `streamsdsl.io.errors.KafkaProducerFencedError` once another instance registered after this
    one: a zombie stops before it writes another batch. The writes themselves are fenced per task
    by their transactional producers (`streamsdsl.io.sink.produce_transactionally`), whatever the
    timing; this check makes the old instance stop for certain, at its next batch. A plain
    offset fetch: a long-lived transactional producer in the driver was tried and its
    ``send_offsets_to_transaction`` hung past its timeout after a broker restart.
    """

    def __init__(self, config: StreamsConfig, marker_topic: str) -> None:
        self._config = config
        self._marker_topic = marker_topic
        self.group = f"{config.application_id}-instance"
        self.instance = uuid.uuid4().hex
        self._consumer: Any = None
        #: The message of the fencing, once fenced: a fenced instance never registers again.
        self.fenced: str | None = None

    def _offsets(self, metadata: str | None = None) -> list[Any]:
        from confluent_kafka import TopicPartition

        return [TopicPartition(self._marker_topic, 0, 0, metadata=metadata)] if metadata else [
            TopicPartition(self._marker_topic, 0)]

    def acquire(self, timeout_s: float = 60.0) -> None:
        """Register this instance (every older one is fenced from its next micro-batch on)."""
        from confluent_kafka import Consumer

        self._consumer = Consumer({**self._config.admin_conf, "group.id": self.group, "enable.auto.commit": False,
                                   "logger": log})
        self._retry(lambda: self._consumer.commit(offsets=self._offsets(self.instance), asynchronous=False),
                    "register the instance", timeout_s)

    def _retry(self, call: Any, what: str, timeout_s: float) -> Any:
        from confluent_kafka import KafkaException

        from streamsdsl.io.errors import KafkaTransactionError

        deadline = time.monotonic() + timeout_s
        while True:
            try:
                return call()
            except KafkaException as exc:
                if time.monotonic() >= deadline:
                    raise KafkaTransactionError(
                        f"KafkaStreams {self._config.application_id!r} (processing.guarantee = exactly_once_v2) could "
                        f"not {what} (consumer group {self.group!r}) within {timeout_s:.0f} s: {exc.args[0].str()}. "
                        "Check 'bootstrap.servers'."
                    ) from exc
                time.sleep(0.2)

    def check(self, batch_id: int, timeout_s: float = 60.0) -> None:
        """Fail with `KafkaProducerFencedError` if another instance registered after this one."""
        from streamsdsl.io.errors import KafkaProducerFencedError

        if self.fenced is not None:
            raise KafkaProducerFencedError(self.fenced)
        if self._consumer is None:
            self.acquire(timeout_s)
        tp = self._retry(lambda: self._consumer.committed(self._offsets(), timeout=10)[0], "read the instance",
                         timeout_s)
        if tp.metadata != self.instance:
            self.close()
            self.fenced = (
                f"KafkaStreams {self._config.application_id!r} was fenced before micro-batch {batch_id}: another "
                f"instance with the same application.id started after this one (consumer group {self.group!r}); "
                "this instance is a zombie and stops without writing the batch. Run one instance per "
                "application.id (sharing its state.dir) at a time."
            )
            raise KafkaProducerFencedError(self.fenced)

    def close(self) -> None:
        """Drop the consumer (the registration stays until a newer instance replaces it)."""
        consumer, self._consumer = self._consumer, None
        if consumer is not None:
            consumer.close()


class KafkaTopicSink:
    """A `streamsdsl.runtime.streaming.BatchSink` writing each sink's rows to its Kafka topic.

    Every micro-batch, each sink's rows are produced with the ``streamsdsl-kafka`` batch
    writer (idempotent producer, ``acks=all``); the write returns only when the broker
    acknowledged every record, before the micro-batch commits. Records skipped by the
    ``log_and_continue`` handler are logged and, when a dead-letter topic is configured,
    written to it as the raw record plus KIP-1034 error headers.

    Parameters
    ----------
    config : StreamsConfig
        Supplies the broker, the producer settings and the dead-letter topic.
    lease : str, optional
        The path of the application's `streamsdsl.io.leases.ClientLease`: the producers the
        executors keep are closed when it is released.
    """

    def __init__(self, config: StreamsConfig, lease: str | None = None) -> None:
        from streamsdsl.io.leases import LEASE_OPTION

        self._config = config
        self._options = config.sink_options()
        if lease:
            self._options[LEASE_OPTION] = lease
        self._lock = threading.Lock()
        #: Exactly-once: the instance's fence, the query id of the checkpoint, the last batch checked.
        self.exactly_once = config.exactly_once
        self._fence: InstanceFence | None = None
        self._query_id: str | None = None
        self._fenced_batch = -1
        #: Records written to sink topics: in total, and per micro-batch not yet logged.
        self.emitted_total = 0
        self.emitted: dict[int, int] = {}
        self.dead_letters = 0

    def _query_identity(self) -> str:
        """The id of the checkpoint's query (Spark keeps it in ``checkpoint/metadata`` across restarts;
        a new checkpoint has a new one), read once."""
        if self._query_id is None:
            path = os.path.join(self._config.checkpoint_location, "metadata")
            for _ in range(100):  # written when the query is created, before its first batch
                if os.path.exists(path):
                    break
                time.sleep(0.05)
            with open(path, encoding="utf-8") as f:
                self._query_id = str(json.loads(f.readline())["id"])
        return self._query_id

    def _transactional_options(self, writer: str, topic: str, batch_id: int) -> dict[str, str]:
        """Exactly-once: the instance registered before its first write (its fence closes with the
        client lease), the fence checked once per batch, and the options of a transactional write."""
        from streamsdsl.io import leases
        from streamsdsl.io.leases import LEASE_OPTION

        if self._fence is None:
            self._fence = InstanceFence(self._config, topic)
            self._fence.acquire()
            leases.hold(self._options.get(LEASE_OPTION), ("instance-fence", id(self)), self._fence.close)
        elif self._fenced_batch != batch_id:
            self._fence.check(batch_id)
        self._fenced_batch = batch_id
        return {
            "transactionalIdPrefix": f"{self._config.application_id}-{writer}",
            "transactionalBatch": f"{self._query_identity()}:{batch_id}",
        }

    def _write(self, rows: DataFrame, topic: str, writer: str, batch_id: int) -> int:
        from streamsdsl.io import SOURCE_NAME
        from streamsdsl.runtime.streaming import SINK_COLUMNS

        count = rows.count()  # the batch is persisted: a cheap JVM job, and skips empty writes
        if count:
            options = dict(self._options)
            if self.exactly_once:
                options.update(self._transactional_options(writer, topic, batch_id))
            rows.select(*SINK_COLUMNS).write.format(SOURCE_NAME).mode("append").options(
                **options
            ).option("topic", topic).save()
        return count

    def write_batch(self, sink: CompiledSink, rows: DataFrame, batch_id: int) -> None:
        """Produce one sink's rows of micro-batch ``batch_id`` to ``sink.topic``."""
        self.add_written(batch_id, self._write(rows, sink.topic, sink.node.name, batch_id))

    def add_written(self, batch_id: int, records: int, dead_letters: int = 0) -> None:
        """Count ``records`` written to sink topics and ``dead_letters`` to the dead-letter topic in
        micro-batch ``batch_id`` (on Spark Connect: read from the batch's observations)."""
        with self._lock:
            self.emitted_total += records
            self.emitted[batch_id] = self.emitted.get(batch_id, 0) + records
            self.dead_letters += dead_letters

    def connect_writer(self, sinks: list[CompiledSink], dead_letters: bool) -> ConnectBatchWriter:
        """The micro-batch function of this sink on a Spark Connect session, which runs in a Python
        process of the server (`streamsdsl.runtime.connect.ConnectBatchWriter`): the same writes,
        counted in the plan and read back from the query's progress (`add_written`)."""
        from streamsdsl.runtime.connect import ConnectBatchWriter

        return ConnectBatchWriter(sinks, self._options, dead_letters=dead_letters,
                                  dead_letter_topic=self._config.dead_letter_topic)

    def real_time_writer(self, output: DataFrame, sinks: tuple[CompiledSink, ...]) -> DataStreamWriter:
        """The writer of a real-time query (``streamsdsl.trigger = real_time``): every sink's rows
        of ``output`` go to Spark's own Kafka sink (``format("kafka")``, the only sink Spark's
        real-time mode writes to Kafka with), each to its sink's topic; key, value and headers as
        serialized. Spark's Kafka sink writes no record timestamp: the producer stamps the time
        of the write. At-least-once; what it writes is not counted in `metrics`."""
        from pyspark.sql import functions as F

        from streamsdsl.compiler.columns import SINK_INDEX

        topic = F.lit(None).cast("string")
        for s in reversed(sinks):
            topic = F.when(F.col(SINK_INDEX) == F.lit(s.index), F.lit(s.topic)).otherwise(topic)
        rows = output.where(F.col(SINK_INDEX) >= 0).select("key", "value", "headers", topic.alias("topic"))
        return rows.writeStream.format("kafka").options(**self._config.sink_options())

    def write_dead_letters(self, rows: DataFrame, batch_id: int) -> None:
        """Log the records ``log_and_continue`` skipped; write them to the dead-letter topic.

        ``rows`` are the dead-letter records of the batch (see `streamsdsl.runtime.streaming.BatchSink`):
        the raw key, value, timestamp and headers (plus the error headers) and the source coordinates.
        """
        log_skipped(rows, batch_id)
        dlq = self._config.dead_letter_topic
        if dlq:
            self.add_written(batch_id, 0, self._write(rows, dlq, DEAD_LETTER_WRITER, batch_id))
