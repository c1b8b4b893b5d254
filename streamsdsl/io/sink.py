"""The ``streamsdsl-kafka`` sink: writers that produce rows to a topic (runs on the executors).

Writes rows of `RAW_SINK_DDL` to the topic named by the option
``topic`` with an idempotent confluent-kafka producer (``enable.idempotence=true``,
``acks=all``):

* ``key`` (binary or string, may be null), ``value`` (binary or string; **null is a
  tombstone**), ``timestamp`` (long, epoch ms; null lets the producer stamp the current
  time; so does **0**: librdkafka treats a timestamp of 0 as unset) and ``headers``
  (``array<struct<key:string,value:binary>>``, may be null). Only ``value`` is required;
  ``key``, ``timestamp`` and ``headers`` are optional columns (`validate_sink_schema`).
* Keys are partitioned with ``murmur2_random``, the Java client's partitioner, so records
  land on the same partitions as with Kafka Streams or any JVM producer (override with
  ``kafka.partitioner``).
* Each Spark task produces its rows, then flushes and raises if any record was not
  acknowledged, **before** it reports success; so a micro-batch only commits when every
  record of it is in Kafka (`produce_batches`).

Delivery guarantee: **at-least-once** by default. The idempotent producer removes duplicates
caused by its own retries within one task, but when a task or micro-batch is retried (a
failure, a ``kill -9`` of the driver before the checkpoint's commit) its records are produced
again. Consumers must tolerate duplicates (e.g. by key/upsert semantics). ``abort`` cannot
take back records already acknowledged.

**Exactly-once** with the option ``transactionalIdPrefix`` (`produce_transactionally`): each
task writes its rows in one Kafka transaction together with a marker of the write
(``transactionalBatch``), so that a task that runs again after its write committed is
recognised and skips it; ``read_committed`` consumers see each task's rows once.

The options are listed in `streamsdsl.io.options` (`KafkaSinkOptions`).

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

import itertools
import json
import logging
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
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

from streamsdsl.io import leases
from streamsdsl.io.errors import (
    KafkaDeliveryError,
    KafkaProducerFencedError,
    KafkaSinkOptionError,
    KafkaTransactionError,
    KafkaTransactionTimeoutError,
)
from streamsdsl.io.leases import LEASE_OPTION
from streamsdsl.io.options import KafkaSinkOptions

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = [
    "KafkaBatchWriter",
    "KafkaStreamWriter",
    "ProducedCommitMessage",
    "produce_batches",
    "produce_transactionally",
    "validate_sink_schema",
]

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


def _is_bytes_type(dt: DataType) -> bool:
    return isinstance(dt, (BinaryType, StringType))


def _is_time_type(dt: DataType) -> bool:
    return isinstance(dt, (LongType, TimestampType))


#: The sink's input columns: the check of each column's type and the types it accepts.
_SINK_COLUMNS: dict[str, tuple[Callable[[DataType], bool], str]] = {
    "key": (_is_bytes_type, "binary or string"),
    "value": (_is_bytes_type, "binary or string"),
    "timestamp": (_is_time_type, "long (epoch milliseconds) or timestamp"),
    "headers": (_is_headers_type, "array<struct<key:string,value:binary>>"),
}


def validate_sink_schema(schema: StructType) -> None:
    """Check that ``schema`` has only the sink's columns, ``value`` among them, with usable types.

    Raises
    ------
    KafkaSinkOptionError
        Naming the column and how to fix it.
    """
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
        accepts, expected = _SINK_COLUMNS[f.name]
        if not accepts(dt):
            raise KafkaSinkOptionError(
                f"column {f.name!r} of the streamsdsl-kafka sink must be {expected} "
                f"(got {dt.simpleString()}); cast it, e.g. col('{f.name}').cast('binary')."
            )


@dataclass
class ProducedCommitMessage(WriterCommitMessage):
    """What one task reports: how many records it produced and acknowledged."""

    records: int


def _column(batch: pa.RecordBatch, name: str) -> list[Any] | None:
    """Column ``name`` of ``batch`` as Python values (strings as bytes, timestamps as epoch ms)."""
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


# One producer per configuration (and client lease) and Python worker process, reused by later
# tasks and micro-batches: an idempotent producer needs ~0.5 s to obtain its producer id. Each
# task flushes it completely before returning, so no delivery report crosses tasks. A producer
# kept under a lease (streamsdsl.io.leases) is closed when the lease is released.
_producers: dict[tuple[tuple[str, str], ...], Any] = {}
_producers_lock = threading.Lock()
_LOG = logging.getLogger(__name__)


def _cache_key(conf: Mapping[str, Any], lease: str | None = None) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((k, str(v)) for k, v in {**conf, **({LEASE_OPTION: lease} if lease else {})}.items()))


def _get_producer(conf: dict[str, Any], lease: str | None = None) -> Any:
    from confluent_kafka import Producer

    key = _cache_key(conf, lease)
    with _producers_lock:
        producer = _producers.get(key)
        if producer is not None:
            return producer
        # librdkafka's own log lines go to Python logging (delivered while the producer
        # is polled), not straight to the worker's stderr.
        producer = _producers[key] = Producer({**conf, "logger": _LOG})
    leases.hold(lease, ("producer", key), lambda: _close_producer(key, producer))
    return producer


def _close_producer(key: tuple[tuple[str, str], ...], producer: Any) -> None:
    """Close a kept producer (its lease was released), unless a newer one replaced it."""
    with _producers_lock:
        if _producers.get(key) is producer:
            del _producers[key]
    producer.close()


def _drop_producer(conf: dict[str, Any], lease: str | None = None) -> None:
    with _producers_lock:
        _producers.pop(_cache_key(conf, lease), None)


class _Deliveries:
    """The delivery reports of one write: how many records failed, and the first five errors."""

    def __init__(self) -> None:
        self.failed = 0
        self.failures: list[str] = []

    def on_delivery(self, err: Any, msg: Any) -> None:
        if err is not None:
            self.failed += 1
            if len(self.failures) < 5:
                self.failures.append(str(err))


def produce_batches(options: KafkaSinkOptions, batches: Iterator[pa.RecordBatch]) -> int:
    """Produce every row of ``batches`` to ``options.topic``; return the count once acknowledged.

    Raises
    ------
    KafkaDeliveryError
        If a record failed or was not acknowledged within ``kafka.flush.timeout.ms``.
    """
    deliveries = _Deliveries()

    conf = options.client_conf()
    producer = _get_producer(conf, options.lease)
    topic = options.topic
    try:
        count = _produce_rows(producer, topic, batches, deliveries.on_delivery, lambda: deliveries.failed)
        deadline = time.monotonic() + options.flush_timeout_ms / 1000
        remaining = producer.flush(options.flush_timeout_ms / 1000)
        while remaining and time.monotonic() < deadline:
            remaining = producer.flush(max(0.0, deadline - time.monotonic()))
    except BaseException:
        _drop_producer(conf, options.lease)
        producer.purge()
        producer.flush(1.0)
        raise
    if deliveries.failed or remaining:
        _drop_producer(conf, options.lease)  # a producer that lost records may be in a bad state
        producer.purge()
    if deliveries.failed:
        raise KafkaDeliveryError(
            f"{deliveries.failed} record(s) to topic {topic!r} were not delivered: {'; '.join(deliveries.failures)}"
        )
    if remaining:
        raise KafkaDeliveryError(
            f"{remaining} record(s) to topic {topic!r} were not acknowledged within "
            f"kafka.flush.timeout.ms={options.flush_timeout_ms}; check the broker or raise the option."
        )
    return count


def _produce_rows(producer: Any, topic: str, batches: Iterator[pa.RecordBatch], on_delivery: Callable[..., None],
                  failed: Callable[[], int]) -> int:
    """Hand every row of ``batches`` to ``producer`` (polling when its queue is full); stops
    early once ``failed()`` is non-zero. Returns the number of rows handed over."""
    from confluent_kafka import KafkaException

    produce = producer.produce
    count = 0
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
            if failed():
                return count
        count += n
        producer.poll(0)
        if failed():
            break
    return count


#: The partition whose consumer-group offset holds a task's marker (every topic has partition 0).
_MARKER_PARTITION = 0
#: librdkafka's codes for "this producer was fenced by a newer one with the same transactional.id".
_FENCED_CODES = ("_FENCED", "PRODUCER_FENCED", "INVALID_PRODUCER_EPOCH")


def _marker_metadata(query_id: str, batch_id: int, records: int) -> str:
    return json.dumps({"query": query_id, "batch": batch_id, "records": records}, separators=(",", ":"))


def _read_marker(consumer: Any, topic: str, deadline: float) -> dict[str, Any] | None:
    """The marker the task's group committed last (``read_committed``: an offset still inside an
    open transaction is waited for, KIP-447), or None. Retries the coordinator's transient errors
    (not yet loaded, moved) until ``deadline``."""
    from confluent_kafka import KafkaException, TopicPartition

    while True:
        try:
            tp = consumer.committed([TopicPartition(topic, _MARKER_PARTITION)],
                                    timeout=max(0.1, min(10.0, deadline - time.monotonic())))[0]
            break
        except KafkaException as exc:
            err = exc.args[0]
            if time.monotonic() >= deadline or not (err.retriable() or err.name() in (
                    "NOT_COORDINATOR", "COORDINATOR_LOAD_IN_PROGRESS", "COORDINATOR_NOT_AVAILABLE",
                    "UNSTABLE_OFFSET_COMMIT", "_TIMED_OUT")):
                raise KafkaTransactionError(f"could not read the exactly-once marker of {topic!r}: {exc}") from exc
            time.sleep(0.1)
    if tp.offset < 0 or not tp.metadata:
        return None
    try:
        marker = json.loads(tp.metadata)
    except ValueError:
        return None
    return marker if isinstance(marker, dict) else None


def produce_transactionally(options: KafkaSinkOptions, batches: Iterator[pa.RecordBatch], partition: int) -> int:
    """Exactly-once: produce one task's rows in one Kafka transaction; return how many it wrote.

    The task's producer has ``transactional.id`` = ``<transactionalIdPrefix>-<partition>``, the
    same every time this partition of this write runs (a retried task, a replayed micro-batch,
    another instance of the application):

    1. ``init_transactions`` fences every older producer with that id and completes (commits or
       aborts) the transaction such a producer left open;
    2. the marker of the consumer group named like the producer is read ``read_committed``: if it
       names this write (``transactionalBatch``: the same query, this batch or a later one), the
       write already committed and is skipped (returns 0);
    3. otherwise the rows are produced in a transaction, and the marker (the batch id as the
       group's offset of partition 0 of ``topic``, the identity as its metadata) is added with
       ``send_offsets_to_transaction``; the commit makes rows and marker visible at once.

    A task without rows writes nothing. The producer is new for every task (an old one kept in a
    Python worker could only find out that it had been fenced by then).

    Raises
    ------
    KafkaProducerFencedError
        A newer producer with the same id took over while this one wrote (another instance of
        the application): nothing of this task is committed.
    KafkaTransactionTimeoutError
        The transaction stayed open longer than ``transaction.timeout.ms``; it is aborted.
    KafkaTransactionError, KafkaDeliveryError
        Another failure; the transaction is aborted.
    """
    from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

    assert options.transactional_id_prefix is not None and options.transactional_batch is not None
    query_id, batch_id = options.transactional_batch
    topic = options.topic
    first = next((b for b in batches if b.num_rows), None)
    if first is None:
        return 0
    rows = itertools.chain([first], batches)
    tid = f"{options.transactional_id_prefix}-{partition}"
    conf = options.client_conf()
    timeout_ms = options.transaction_timeout_ms
    timeout_s = options.flush_timeout_ms / 1000
    deadline = time.monotonic() + timeout_s
    producer = Producer({**conf, "transactional.id": tid, "logger": _LOG})
    shared = {k: v for k, v in conf.items() if k.startswith(("security.", "sasl.", "ssl.", "client.id"))}
    consumer = Consumer({"bootstrap.servers": options.bootstrap_servers, "group.id": tid,
                         "isolation.level": "read_committed", "enable.auto.commit": False, "logger": _LOG, **shared})
    deliveries = _Deliveries()

    what = f"the transaction of {tid!r} (micro-batch {batch_id}, topic {topic!r})"
    started: float | None = None
    try:
        try:
            producer.init_transactions(timeout_s)
            marker = _read_marker(consumer, topic, deadline)
            if marker is not None and marker.get("query") == query_id and int(marker.get("batch", -1)) >= batch_id:
                _LOG.info("exactly-once: %s committed before (marker %s); skipped", what, marker)
                return 0
            producer.begin_transaction()
            started = time.monotonic()
            count = _produce_rows(producer, topic, rows, deliveries.on_delivery, lambda: deliveries.failed)
            remaining = producer.flush(max(0.0, min(timeout_s, timeout_ms / 1000 - (time.monotonic() - started))))
            elapsed_ms = (time.monotonic() - started) * 1000
            if elapsed_ms >= timeout_ms:
                raise _timed_out(what, elapsed_ms, timeout_ms)
            if deliveries.failed or remaining:
                raise KafkaTransactionError(
                    f"{deliveries.failed or remaining} record(s) of {what} were not delivered"
                    + (f": {'; '.join(deliveries.failures)}" if deliveries.failures else f" within kafka.flush.timeout.ms={options.flush_timeout_ms}")
                    + "; the transaction is aborted.")
            offsets = [TopicPartition(topic, _MARKER_PARTITION, batch_id,
                                      metadata=_marker_metadata(query_id, batch_id, count))]
            producer.send_offsets_to_transaction(offsets, consumer.consumer_group_metadata(), timeout_s)
            elapsed_ms = (time.monotonic() - started) * 1000
            if elapsed_ms >= timeout_ms:
                raise _timed_out(what, elapsed_ms, timeout_ms)
            producer.commit_transaction(timeout_s)
            return count
        except KafkaException as exc:
            err = exc.args[0]
            elapsed_ms = 0.0 if started is None else (time.monotonic() - started) * 1000
            if started is not None and elapsed_ms >= timeout_ms:
                raise _timed_out(what, elapsed_ms, timeout_ms, err) from exc
            if err.name() in _FENCED_CODES:
                raise KafkaProducerFencedError(
                    f"{what} was fenced: a newer producer with the same transactional.id took over, i.e. another "
                    "instance of this application (same application.id) is running; this instance is a zombie and "
                    f"stops, nothing of its transaction is visible ({err.str()})."
                ) from exc
            raise KafkaTransactionError(f"{what} failed: {err.str()}; the transaction is aborted.") from exc
    except BaseException:
        _abort(producer)
        raise
    finally:
        consumer.close()


def _timed_out(what: str, elapsed_ms: float, timeout_ms: int, cause: Any = None) -> KafkaTransactionTimeoutError:
    return KafkaTransactionTimeoutError(
        f"{what} was open {elapsed_ms:.0f} ms, longer than transaction.timeout.ms = {timeout_ms} ms: Kafka aborts a "
        "transaction it does not see committed within that time, so the micro-batch fails and nothing of it is "
        "visible. Raise the producer's 'transaction.timeout.ms' (KafkaStreams: 'producer.transaction.timeout.ms'; "
        "at most the broker's transaction.max.timeout.ms, 900000 by default) or make micro-batches smaller "
        "('max.offsets.per.trigger')." + (f" ({cause.str()})" if cause is not None else "")
    )


def _abort(producer: Any) -> None:
    """Abort the producer's transaction if one is open (best effort), then drop what it queued."""
    try:
        producer.abort_transaction(5.0)
    except Exception:  # noqa: BLE001 - no transaction, fenced or fatal: the broker aborts it (or has)
        pass
    try:
        producer.purge()
        producer.flush(0)
    except Exception:  # noqa: BLE001 - best effort
        pass


class _ProducingWriter:
    """Mixin: a writer whose tasks produce their rows with `produce_batches`.

    Parameters
    ----------
    options : KafkaSinkOptions
        The validated writer options.
    """

    def __init__(self, options: KafkaSinkOptions) -> None:
        self._options = options

    def write(self, iterator: Iterator[pa.RecordBatch]) -> ProducedCommitMessage:
        """Produce one task's rows; returns only when all are acknowledged (with the option
        ``transactionalIdPrefix``: committed in one transaction)."""
        if self._options.transactional_id_prefix is not None:
            from pyspark import TaskContext

            context = TaskContext.get()
            partition = context.partitionId() if context is not None else 0
            return ProducedCommitMessage(produce_transactionally(self._options, iterator, partition))
        return ProducedCommitMessage(produce_batches(self._options, iterator))


class KafkaBatchWriter(_ProducingWriter, DataSourceArrowWriter):
    """Batch writer (``df.write.format("streamsdsl-kafka").mode("append")``)."""

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        """Nothing to do: every task flushed before it reported success."""

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        """Nothing can be undone: acknowledged records stay in the topic (at-least-once)."""


class KafkaStreamWriter(_ProducingWriter, DataSourceStreamArrowWriter):
    """Streaming writer (``df.writeStream.format("streamsdsl-kafka")``), at-least-once.

    Every output mode appends; Kafka has no truncate for ``complete`` mode.
    """

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Nothing to do: every task flushed before it reported success."""

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Nothing can be undone: acknowledged records stay in the topic (at-least-once)."""
