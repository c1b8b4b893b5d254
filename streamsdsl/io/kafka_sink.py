"""Kafka sink on Spark's Python Data Source API (format ``"streamsdsl-kafka"``).

Writes rows of `RAW_SINK_DDL` to the topic named by the option
``topic`` with an idempotent confluent-kafka producer (``enable.idempotence=true``,
``acks=all``):

* ``key`` (binary or string, may be null), ``value`` (binary or string; **null is a
  tombstone**), ``timestamp`` (long, epoch ms; null lets the producer stamp the current
  time; so does **0**: librdkafka treats a timestamp of 0 as unset) and ``headers`` (``array<struct<key:string,value:binary>>``, may be null). Only
  ``value`` is required; ``key``, ``timestamp`` and ``headers`` are optional columns.
* Keys are partitioned with ``murmur2_random``, the Java client's partitioner, so records
  land on the same partitions as with Kafka Streams or any JVM producer (override with
  ``kafka.partitioner``).
* Each Spark task produces its rows, then flushes and raises if any record was not
  acknowledged, **before** it reports success; so a micro-batch only commits when every
  record of it is in Kafka.

Delivery guarantee: **at-least-once.** The idempotent producer removes duplicates caused
by its own retries within one task, but when a task or micro-batch is retried (a failure,
a ``kill -9`` of the driver before the checkpoint's commit) its records are produced again.
Consumers must tolerate duplicates (e.g. by key/upsert semantics). ``abort`` cannot take
back records already acknowledged.

Options
-------
kafka.bootstrap.servers
    Required. ``host:port[,host:port...]``.
topic
    Required. The target topic (must exist).
kafka.flush.timeout.ms
    Milliseconds a task waits for acknowledgements at its end (default 120000).
kafka.*
    Any other librdkafka producer setting, passed through (``kafka.`` stripped), e.g.
    ``kafka.compression.type=lz4``. ``enable.idempotence`` and ``acks`` cannot be weakened.

Examples
--------
Writing a streaming DataFrame of raw records needs a broker, so this is shown, not run
(``integration/`` runs the sink against a real broker)::

    (df.writeStream.format("streamsdsl-kafka")
       .option("kafka.bootstrap.servers", "127.0.0.1:9092")
       .option("topic", "counts")
       .option("checkpointLocation", "/tmp/ckpt")
       .start())
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    DataType,
    LongType,
    StringType,
    StructType,
    TimestampType,
)

from streamsdsl.errors import StreamsDslError

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = [
    "KafkaBatchWriter",
    "KafkaDeliveryError",
    "KafkaSinkOptionError",
    "KafkaSinkOptions",
    "KafkaStreamWriter",
    "ProducedCommitMessage",
    "produce_batches",
]

_SINK_COLUMNS = ("key", "value", "timestamp", "headers")
_FORBIDDEN_PRODUCER_OPTIONS = {
    "enable.idempotence": "the sink always uses an idempotent producer",
    "acks": "the sink always waits for all in-sync replicas (acks=all)",
    "key.serializer": "keys are written as the bytes of the 'key' column",
    "value.serializer": "values are written as the bytes of the 'value' column",
    "transactional.id": "transactions are not supported; the sink is at-least-once",
}


class KafkaSinkOptionError(StreamsDslError, ValueError):
    """An option or the input schema of the ``streamsdsl-kafka`` sink is invalid."""


class KafkaDeliveryError(StreamsDslError, RuntimeError):
    """Records were not acknowledged by the broker; the task (and batch) fails."""


def _is_headers_type(dt: DataType) -> bool:
    if not isinstance(dt, ArrayType) or not isinstance(dt.elementType, StructType):
        return False
    fields = dt.elementType.fields
    return (
        len(fields) == 2
        and fields[0].name == "key"
        and isinstance(fields[0].dataType, StringType)
        and fields[1].name == "value"
        and isinstance(fields[1].dataType, (BinaryType, StringType))
    )


def _validate_schema(schema: StructType) -> None:
    names = schema.fieldNames()
    extra = [n for n in names if n not in _SINK_COLUMNS]
    if extra:
        raise KafkaSinkOptionError(
            f"the streamsdsl-kafka sink takes the columns key, value, timestamp, headers "
            f"(streamsdsl.records.RAW_SINK_DDL); drop or rename {', '.join(map(repr, extra))}."
        )
    if "value" not in names:
        raise KafkaSinkOptionError(
            "the streamsdsl-kafka sink needs a 'value' column (binary or string; null = tombstone)."
        )
    for f in schema.fields:
        dt = f.dataType
        ok = {
            "key": isinstance(dt, (BinaryType, StringType)),
            "value": isinstance(dt, (BinaryType, StringType)),
            "timestamp": isinstance(dt, (LongType, TimestampType)),
            "headers": _is_headers_type(dt),
        }[f.name]
        if not ok:
            expected = {
                "key": "binary or string",
                "value": "binary or string",
                "timestamp": "long (epoch milliseconds) or timestamp",
                "headers": "array<struct<key:string,value:binary>>",
            }[f.name]
            raise KafkaSinkOptionError(
                f"column {f.name!r} of the streamsdsl-kafka sink must be {expected} "
                f"(got {dt.simpleString()}); cast it, e.g. col('{f.name}').cast('binary')."
            )


@dataclass(frozen=True)
class KafkaSinkOptions:
    """Validated writer options (picklable; travels to the executors with the writer)."""

    bootstrap_servers: str
    topic: str
    flush_timeout_ms: int
    producer_conf: dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_options(cls, options: Mapping[str, str], schema: StructType) -> KafkaSinkOptions:
        """Validate Spark writer options (keys are case-insensitive) and the input schema.

        Raises
        ------
        KafkaSinkOptionError
            With the option or column name and how to fix it.
        """
        opts = {str(k).lower(): str(v) for k, v in options.items()}
        bootstrap = opts.get("kafka.bootstrap.servers", "").strip()
        if not bootstrap:
            raise KafkaSinkOptionError(
                "option 'kafka.bootstrap.servers' is required, e.g. "
                ".option('kafka.bootstrap.servers', 'localhost:9092')."
            )
        topic = opts.get("topic", "").strip()
        if not topic:
            raise KafkaSinkOptionError("option 'topic' is required: the topic to write to, e.g. .option('topic', 'out').")
        _validate_schema(schema)
        flush_ms = 120_000
        producer_conf: dict[str, str] = {}
        for key, value in opts.items():
            if not key.startswith("kafka.") or key in ("kafka.bootstrap.servers", "kafka.broker.compat"):
                continue
            conf_key = key[len("kafka.") :]
            if conf_key == "flush.timeout.ms":
                try:
                    flush_ms = int(value)
                except ValueError:
                    flush_ms = 0
                if flush_ms <= 0:
                    raise KafkaSinkOptionError(
                        f"option 'kafka.flush.timeout.ms' must be a positive integer (got {value!r})."
                    )
                continue
            if conf_key in _FORBIDDEN_PRODUCER_OPTIONS:
                raise KafkaSinkOptionError(f"option '{key}' is not supported: {_FORBIDDEN_PRODUCER_OPTIONS[conf_key]}.")
            producer_conf[conf_key] = value
        return cls(bootstrap_servers=bootstrap, topic=topic, flush_timeout_ms=flush_ms, producer_conf=producer_conf)

    def client_conf(self) -> dict[str, Any]:
        """librdkafka producer configuration (idempotent, acks=all, murmur2 partitioner)."""
        conf: dict[str, Any] = {
            "bootstrap.servers": self.bootstrap_servers,
            "partitioner": "murmur2_random",
            "linger.ms": 5,
        }
        conf.update(self.producer_conf)
        conf.update({"enable.idempotence": True, "acks": "all"})
        return conf


@dataclass
class ProducedCommitMessage(WriterCommitMessage):
    """What one task reports: how many records it produced and acknowledged."""

    records: int


def _column(batch: pa.RecordBatch, name: str) -> list[Any] | None:
    import pyarrow as pa

    idx = batch.schema.get_field_index(name)
    if idx < 0:
        return None
    col = batch.column(idx)
    if pa.types.is_timestamp(col.type):
        col = col.cast(pa.timestamp("ms", tz=col.type.tz), safe=False).cast(pa.int64())  # truncate µs
    if pa.types.is_string(col.type) or pa.types.is_large_string(col.type):
        col = col.cast(pa.binary())
    return col.to_pylist()


def _headers(raw: Any) -> list[tuple[str, bytes | None]] | None:
    if not raw:
        return None
    out: list[tuple[str, bytes | None]] = []
    for h in raw:
        value = h["value"]
        out.append((h["key"], value.encode() if isinstance(value, str) else value))
    return out


# One producer per configuration and Python worker process, reused by later tasks and
# micro-batches: an idempotent producer needs ~0.5 s to obtain its producer id. Each task
# flushes it completely before returning, so no delivery report crosses tasks.
_producers: dict[tuple[tuple[str, str], ...], Any] = {}
_producers_lock = threading.Lock()
_LOG = logging.getLogger("streamsdsl.io.kafka_sink")


def _cache_key(conf: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((k, str(v)) for k, v in conf.items()))


def _get_producer(conf: dict[str, Any]) -> Any:
    from confluent_kafka import Producer

    key = _cache_key(conf)
    with _producers_lock:
        producer = _producers.get(key)
        if producer is None:
            # librdkafka's own log lines go to Python logging (delivered while the producer
            # is polled), not straight to the worker's stderr.
            producer = _producers[key] = Producer({**conf, "logger": _LOG})
        return producer


def _drop_producer(conf: dict[str, Any]) -> None:
    with _producers_lock:
        _producers.pop(_cache_key(conf), None)


def produce_batches(options: KafkaSinkOptions, batches: Iterator[pa.RecordBatch]) -> int:
    """Produce every row of ``batches`` to ``options.topic``; return the count once acknowledged.

    Raises
    ------
    KafkaDeliveryError
        If a record failed or was not acknowledged within ``kafka.flush.timeout.ms``.
    """
    from confluent_kafka import KafkaException

    failures: list[str] = []
    failed = 0

    def on_delivery(err: Any, msg: Any) -> None:
        nonlocal failed
        if err is not None:
            failed += 1
            if len(failures) < 5:
                failures.append(str(err))

    conf = options.client_conf()
    producer = _get_producer(conf)
    topic = options.topic
    produce = producer.produce
    count = 0
    try:
        for batch in batches:
            n = batch.num_rows
            keys = _column(batch, "key") or [None] * n
            values = _column(batch, "value") or [None] * n
            stamps = _column(batch, "timestamp") or [None] * n
            headers = _column(batch, "headers") or [None] * n
            for key, value, ts, hdrs in zip(keys, values, stamps, headers, strict=True):
                kwargs: dict[str, Any] = {}
                if ts is not None:
                    kwargs["timestamp"] = ts
                if hdrs:
                    kwargs["headers"] = _headers(hdrs)
                while True:
                    try:
                        produce(topic, value, key, on_delivery=on_delivery, **kwargs)
                        break
                    except BufferError:
                        producer.poll(0.05)  # local queue full: let deliveries drain
                    except KafkaException as exc:
                        raise KafkaDeliveryError(f"producing to topic {topic!r} failed: {exc}") from exc
                if failed:
                    break
            count += n
            producer.poll(0)
            if failed:
                break
        deadline = time.monotonic() + options.flush_timeout_ms / 1000
        remaining = producer.flush(options.flush_timeout_ms / 1000)
        while remaining and time.monotonic() < deadline:
            remaining = producer.flush(max(0.0, deadline - time.monotonic()))
    except BaseException:
        _drop_producer(conf)
        producer.purge()
        producer.flush(1.0)
        raise
    if failed or remaining:
        _drop_producer(conf)  # a producer that lost records may be in a bad state
        producer.purge()
    if failed:
        raise KafkaDeliveryError(
            f"{failed} record(s) to topic {topic!r} were not delivered: {'; '.join(failures)}"
        )
    if remaining:
        raise KafkaDeliveryError(
            f"{remaining} record(s) to topic {topic!r} were not acknowledged within "
            f"kafka.flush.timeout.ms={options.flush_timeout_ms}; check the broker or raise the option."
        )
    return count


class KafkaBatchWriter(DataSourceArrowWriter):
    """Batch writer (``df.write.format("streamsdsl-kafka").mode("append")``)."""

    def __init__(self, options: KafkaSinkOptions) -> None:
        self._options = options

    def write(self, iterator: Iterator[pa.RecordBatch]) -> ProducedCommitMessage:
        """Produce one task's rows; returns only when all are acknowledged."""
        return ProducedCommitMessage(produce_batches(self._options, iterator))

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        """Nothing to do: every task flushed before it reported success."""

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        """Nothing can be undone: acknowledged records stay in the topic (at-least-once)."""


class KafkaStreamWriter(DataSourceStreamArrowWriter):
    """Streaming writer (``df.writeStream.format("streamsdsl-kafka")``), at-least-once.

    Every output mode appends; Kafka has no truncate for ``complete`` mode.
    """

    def __init__(self, options: KafkaSinkOptions) -> None:
        self._options = options

    def write(self, iterator: Iterator[pa.RecordBatch]) -> ProducedCommitMessage:
        """Produce one task's rows; returns only when all are acknowledged."""
        return ProducedCommitMessage(produce_batches(self._options, iterator))

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Nothing to do: every task flushed before it reported success."""

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Nothing can be undone: acknowledged records stay in the topic (at-least-once)."""
