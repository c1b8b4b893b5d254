"""`KafkaTopicSink`: the `streamsdsl.runtime.streaming.BatchSink` of `KafkaStreams`.

Each micro-batch, the rows of every sink are produced to its topic with the
``streamsdsl-kafka`` batch writer (`streamsdsl.io.sink`); the records the
``log_and_continue`` handler skipped are logged and go to the dead-letter topic when one is
configured. The sink counts what it wrote, for `KafkaStreams.metrics`. pyspark is imported
lazily.

Examples
--------
>>> from streamsdsl.runtime.config import StreamsConfig
>>> sink = KafkaTopicSink(StreamsConfig.from_mapping({
...     "application.id": "copy", "bootstrap.servers": "k:9092", "producer.linger.ms": 5}))
>>> sink.emitted_total, sink.dead_letters
(0, 0)
"""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from streamsdsl.compiler import CompiledSink
    from streamsdsl.runtime.config import StreamsConfig

__all__ = ["KafkaTopicSink"]

log = logging.getLogger("streamsdsl")

#: How many skipped records of one micro-batch are logged one by one.
_LOGGED_SKIPS = 10


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
        #: Records written to sink topics: in total, and per micro-batch not yet logged.
        self.emitted_total = 0
        self.emitted: dict[int, int] = {}
        self.dead_letters = 0

    def _write(self, rows: DataFrame, topic: str) -> int:
        from streamsdsl.io import SOURCE_NAME
        from streamsdsl.runtime.streaming import SINK_COLUMNS

        count = rows.count()  # the batch is persisted: a cheap JVM job, and skips empty writes
        if count:
            rows.select(*SINK_COLUMNS).write.format(SOURCE_NAME).mode("append").options(
                **self._options
            ).option("topic", topic).save()
        return count

    def write_batch(self, sink: CompiledSink, rows: DataFrame, batch_id: int) -> None:
        """Produce one sink's rows of micro-batch ``batch_id`` to ``sink.topic``."""
        n = self._write(rows, sink.topic)
        with self._lock:
            self.emitted_total += n
            self.emitted[batch_id] = self.emitted.get(batch_id, 0) + n

    def write_dead_letters(self, rows: DataFrame, batch_id: int) -> None:
        """Log the records ``log_and_continue`` skipped; write them to the dead-letter topic.

        ``rows`` are the dead-letter records of the batch (see `streamsdsl.runtime.streaming.BatchSink`):
        the raw key, value, timestamp and headers (plus the error headers) and the source coordinates.
        """
        skipped = rows.select("source_topic", "source_partition", "source_offset").collect()
        for r in skipped[:_LOGGED_SKIPS]:
            log.warning(
                "Skipped a record that cannot be deserialized (default.deserialization.exception.handler="
                "log_and_continue): topic %s partition %s offset %s",
                r["source_topic"], r["source_partition"], r["source_offset"],
            )
        if len(skipped) > _LOGGED_SKIPS:
            log.warning("... and %d more skipped record(s) in micro-batch %d", len(skipped) - _LOGGED_SKIPS, batch_id)
        dlq = self._config.dead_letter_topic
        if dlq:
            n = self._write(rows, dlq)
            with self._lock:
                self.dead_letters += n
