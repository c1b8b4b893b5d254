"""Reading one planned Kafka offset range into Arrow record batches (runs on the executors).

`KafkaInputPartition` is all a Spark task gets: a partition's offsets ``[start, end)`` and the
source options. `read_partition` reads exactly that range with an ``assign()``-ed consumer
(no consumer group, nothing committed to Kafka) and yields batches of `RAW_RECORD_SCHEMA`.

Consumers are pooled in the worker process across micro-batches
(`streamsdsl.io.consumer_pool`): a read that starts where the previous read of its partition
stopped just resumes the kept consumer; any other start seeks it. Records are fetched in large
``consume()`` calls and turned into Arrow columns with ``map()`` over the C accessors of the
messages (no Python frame per record), with Python's cyclic garbage collector paused while
that runs: the message objects are freed by reference counting, and collections triggered by
their allocation made reading twice as slow.

Record mapping
--------------
``key``/``value`` are the raw bytes (``null`` when absent; a ``null`` value is a
tombstone), ``timestamp`` is the record timestamp in ms (``null`` if the broker has none),
``headers`` is ``null`` when a record has no headers (as in Spark's JVM connector).

confluent_kafka and pyarrow are imported when a partition is read, not with this module.
"""

from __future__ import annotations

import contextlib
import gc
import operator
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pyspark.sql.datasource import InputPartition
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from streamsdsl.io import leases
from streamsdsl.io.consumer_pool import ConsumerPool, PooledConsumer, PoolKey, pool_key, worker_pool
from streamsdsl.io.leases import LEASE_OPTION
from streamsdsl.io.errors import KafkaDataLossError, KafkaSourceError, broker_timeout, topic_recreated
from streamsdsl.io.options import KafkaSourceOptions
from streamsdsl.records import RAW_RECORD_COLUMNS

if TYPE_CHECKING:
    import pyarrow as pa
    from confluent_kafka import Consumer

__all__ = ["RAW_RECORD_SCHEMA", "KafkaInputPartition", "read_partition", "reader_conf"]

_HEADERS_TYPE = ArrayType(
    StructType([StructField("key", StringType(), True), StructField("value", BinaryType(), True)]),
    True,
)

#: `RAW_RECORD_DDL` as a StructType (built without a JVM).
RAW_RECORD_SCHEMA = StructType(
    [
        StructField("key", BinaryType(), True),
        StructField("value", BinaryType(), True),
        StructField("topic", StringType(), True),
        StructField("partition", IntegerType(), True),
        StructField("offset", LongType(), True),
        StructField("timestamp", LongType(), True),
        StructField("headers", _HEADERS_TYPE, True),
    ]
)
assert tuple(RAW_RECORD_SCHEMA.fieldNames()) == RAW_RECORD_COLUMNS

#: Records per Arrow batch handed to Spark, and the most a single ``consume()`` asks for.
_BATCH_ROWS = 10_000
#: Seconds one ``consume()`` call may block; the overall no-progress limit is
#: ``kafkaConsumer.pollTimeoutMs``.
_STEP_TIMEOUT_S = 0.5
#: Seconds without progress after which a read asks the broker whether its planned range is still
#: there (and again every as many seconds): a partition whose end is now below the planned end
#: was re-created. A broker that does not answer is waited for, up to the poll timeout.
_RANGE_CHECK_S = 2.0


#: Reader consumer settings a ``kafka.*`` option may override. A fetch that waits at the end of
#: a partition holds the connection for up to ``fetch.wait.max.ms`` (default 500 ms): a pooled
#: consumer that reached the end in one read waited up to that long before the next read's
#: first fetch.
_READER_DEFAULTS: dict[str, Any] = {"fetch.wait.max.ms": 10}


@dataclass(frozen=True, repr=False)
class KafkaInputPartition(InputPartition):
    """One Kafka partition's offset range ``[start, end)``; all a task needs to read it."""

    topic: str
    partition: int
    start: int
    end: int
    options: KafkaSourceOptions

    def __repr__(self) -> str:
        return f"KafkaInputPartition({self.topic}-{self.partition} [{self.start}, {self.end}))"


_arrow_schema: pa.Schema | None = None
_first = operator.itemgetter(0)
_second = operator.itemgetter(1)


def _raw_arrow_schema() -> pa.Schema:
    """`RAW_RECORD_SCHEMA` in Arrow, as ``to_arrow_schema(..., timezone="UTC")`` gives it.

    Built with pyarrow alone (built once per process): ``pyspark.sql.pandas.types`` would import
    pandas into every new Python worker, which a cold first batch pays for.
    """
    global _arrow_schema
    if _arrow_schema is None:
        import pyarrow as pa

        header = pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())])
        _arrow_schema = pa.schema(
            [
                pa.field("key", pa.binary()),
                pa.field("value", pa.binary()),
                pa.field("topic", pa.string()),
                pa.field("partition", pa.int32()),
                pa.field("offset", pa.int64()),
                pa.field("timestamp", pa.int64()),
                pa.field("headers", pa.list_(pa.field("element", header))),
            ]
        )
    return _arrow_schema


def _to_batch(topic: str, partition: int, msgs: list[Any]) -> pa.RecordBatch:
    """Messages of one partition (no error events) as one Arrow batch of `RAW_RECORD_SCHEMA`."""
    import pyarrow as pa
    from confluent_kafka import Message

    # map() over the C methods: no Python frame per record (2-3x faster than comprehensions).
    schema = _raw_arrow_schema()
    n = len(msgs)
    stamps = list(map(Message.timestamp, msgs))
    if min(map(_first, stamps), default=1) != 0:  # every record has a timestamp (the norm)
        timestamps: list[int | None] = list(map(_second, stamps))
    else:
        timestamps = [ts if kind != 0 else None for kind, ts in stamps]
    headers = list(map(Message.headers, msgs))
    headers_type = schema.field("headers").type
    if headers.count(None) == n:
        headers_array = pa.nulls(n, type=headers_type)
    else:
        headers_array = pa.array(headers, type=headers_type)
    return pa.RecordBatch.from_arrays(
        [
            pa.array(list(map(Message.key, msgs)), type=pa.binary()),
            pa.array(list(map(Message.value, msgs)), type=pa.binary()),
            pa.array([topic] * n, type=pa.string()),
            pa.array([partition] * n, type=pa.int32()),
            pa.array(list(map(Message.offset, msgs)), type=pa.int64()),
            pa.array(timestamps, type=pa.int64()),
            headers_array,
        ],
        schema=schema,
    )


@contextlib.contextmanager
def _gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector (if it runs) for the block."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _earliest_after_loss(consumer: Consumer, part: KafkaInputPartition, pos: int) -> int:
    """The offset to go on from when ``pos`` is out of range on the broker.

    Raises
    ------
    KafkaTopicRecreatedError
        If the broker's range does not start after ``pos`` (topic re-created) and
        ``failOnDataLoss`` is true (else the rest of the range is skipped: the driver then
        restarts the partition at its earliest offset).
    KafkaDataLossError
        If offsets are gone and ``failOnDataLoss`` is true.
    KafkaBrokerTimeoutError
        If the broker does not tell its offsets within the poll timeout.
    """
    from confluent_kafka import TopicPartition

    opts = part.options
    try:
        low, high = consumer.get_watermark_offsets(
            TopicPartition(part.topic, part.partition), timeout=opts.poll_timeout_ms / 1000, cached=False
        )
    except Exception as exc:
        raise broker_timeout(
            f"fetch the offsets of {part.topic}-{part.partition}", opts.bootstrap_servers, opts.poll_timeout_ms, exc
        ) from exc
    if low <= pos:
        if opts.fail_on_data_loss:
            raise topic_recreated(part.topic, part.partition, part.end, low, high)
        return part.end
    if opts.fail_on_data_loss:
        raise KafkaDataLossError(
            f"offsets [{pos}, {min(low, part.end)}) of {part.topic}-{part.partition} are no "
            f"longer on the broker (earliest available: {low}). Set the option "
            "'failOnDataLoss' to 'false' to skip them."
        )
    return int(low)


class _RangeRead:
    """The state of reading ``[start, end)`` of one partition with one consumer."""

    def __init__(self, consumer: Consumer, part: KafkaInputPartition) -> None:
        self.consumer = consumer
        self.part = part
        self.pos = part.start
        self.done = part.end <= part.start
        self.last_progress = time.monotonic()
        self.next_range_check = self.last_progress + _RANGE_CHECK_S
        self.last_error: Any = None

    def next_batch(self) -> pa.RecordBatch | None:
        """The next batch of at most `_BATCH_ROWS` records, or ``None`` when the range is read."""
        pending: list[Any] = []
        while not self.done and self.pos < self.part.end and len(pending) < _BATCH_ROWS:
            self._step(pending)
        return _to_batch(self.part.topic, self.part.partition, pending) if pending else None

    def _step(self, pending: list[Any]) -> None:
        """One ``consume()``: add the range's records to ``pending``; track the position."""
        from confluent_kafka import KafkaError, Message, TopicPartition

        part, consumer = self.part, self.consumer
        started = self.last_progress
        msgs = consumer.consume(min(part.end - self.pos, _BATCH_ROWS - len(pending)), _STEP_TIMEOUT_S)
        if not msgs:
            self._no_progress()
            return
        # Fast path, the norm: no error events and every offset inside [pos, end).
        first, last = msgs[0], msgs[-1]
        if (
            first.error() is None
            and last.error() is None
            and first.offset() >= self.pos
            and last.offset() < part.end
            and list(map(Message.error, msgs)).count(None) == len(msgs)
        ):
            pending.extend(msgs)
            self.pos = last.offset() + 1
            self.last_progress = time.monotonic()
            self.next_range_check = self.last_progress + _RANGE_CHECK_S
            return
        for m in msgs:
            err = m.error()
            if err is not None:
                code = err.code()
                if code == KafkaError._PARTITION_EOF:
                    if m.offset() >= part.end:
                        self.done = True
                        return
                    continue
                if code in (KafkaError._AUTO_OFFSET_RESET, KafkaError.OFFSET_OUT_OF_RANGE):
                    low = _earliest_after_loss(consumer, part, self.pos)
                    if low >= part.end:
                        self.done = True
                    else:
                        self.pos = low
                        consumer.assign([TopicPartition(part.topic, part.partition, low)])
                    return
                if code in (KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_PARTITION):
                    raise KafkaSourceError(
                        f"reading {part.topic}-{part.partition} failed: {err}: the partition does not exist on "
                        f"{part.options.bootstrap_servers} (was the topic deleted?). Re-create the topic with at "
                        "least as many partitions, or reset the application to start afresh."
                    )
                if err.fatal() or code == KafkaError.TOPIC_AUTHORIZATION_FAILED:
                    raise KafkaSourceError(f"reading {part.topic}-{part.partition} failed: {err}")
                self.last_error = err
                continue
            offset = m.offset()
            if offset >= part.end:
                self.done = True
                return
            if offset < self.pos:
                continue
            pending.append(m)
            self.pos = offset + 1
            self.last_progress = time.monotonic()
            self.next_range_check = self.last_progress + _RANGE_CHECK_S
        if self.last_progress == started:  # error events, or records outside the range only
            self._no_progress()

    def _no_progress(self) -> None:
        """A ``consume()`` read nothing new: fail after the poll timeout, check the range meanwhile.

        Raises
        ------
        KafkaBrokerTimeoutError
            After ``kafkaConsumer.pollTimeoutMs`` without progress.
        KafkaTopicRecreatedError
            See `_check_range`.
        """
        part = self.part
        now = time.monotonic()
        if now - self.last_progress > part.options.poll_timeout_ms / 1000:
            raise broker_timeout(
                f"read {part.topic}-{part.partition} at offset {self.pos} (planned up to {part.end})",
                part.options.bootstrap_servers,
                part.options.poll_timeout_ms,
                self.last_error,
            )
        if now >= self.next_range_check:
            self.next_range_check = now + _RANGE_CHECK_S
            self._check_range()

    def _check_range(self) -> None:
        """Fail (or skip the range) if the partition now ends below the planned end.

        The planned end was the partition's end when the batch was planned, and an end never
        moves back: if the broker now reports a high watermark below the planned end and at or
        below the position, while fetches at the position return nothing, the topic was
        re-created. A broker that does not answer is left to the poll timeout.

        Raises
        ------
        KafkaTopicRecreatedError
            If so and ``failOnDataLoss`` is true (else the rest of the range is skipped).
        """
        from confluent_kafka import TopicPartition

        part = self.part
        try:
            low, high = self.consumer.get_watermark_offsets(
                TopicPartition(part.topic, part.partition), timeout=_RANGE_CHECK_S, cached=False
            )
        except Exception as exc:  # noqa: BLE001 - the broker does not answer: wait (poll timeout)
            self.last_error = exc
            return
        if high < part.end and high <= self.pos:
            if part.options.fail_on_data_loss:
                raise topic_recreated(part.topic, part.partition, part.end, int(low), int(high))
            self.done = True


def reader_conf(options: KafkaSourceOptions) -> dict[str, Any]:
    """The librdkafka configuration of a reading consumer (`_READER_DEFAULTS` unless overridden)."""
    conf = options.client_conf(**{"enable.partition.eof": True, "auto.offset.reset": "error"})
    for name, value in _READER_DEFAULTS.items():
        if name not in options.consumer_conf:
            conf[name] = value
    return conf


def read_partition(part: KafkaInputPartition, pool: ConsumerPool | None = None) -> Iterator[pa.RecordBatch]:
    """Yield the records of ``part`` (offsets ``[start, end)``) as Arrow batches.

    Takes a consumer of this partition from ``pool`` (default: the worker's, `worker_pool`) or
    creates one, assigns it at ``start``, and gives it back unassigned after the read (also
    when the task stops reading early); a failed read closes it. Asks ``consume()`` for exactly
    the remaining count, so it returns as soon as the range is complete. Offsets missing
    inside the range (compaction, transaction markers) are skipped; a partition end reported
    before ``end`` keeps the task waiting for data, up to ``kafkaConsumer.pollTimeoutMs``
    without progress.

    Raises
    ------
    KafkaDataLossError
        If ``start`` is no longer available and ``failOnDataLoss`` is true, or the broker's
        offsets of the partition start after it (the topic was deleted and re-created).
    KafkaSourceError
        On fatal client errors or when no progress is made within the poll timeout.
    """
    from confluent_kafka import Consumer, TopicPartition

    if part.end <= part.start:
        return
    pool = worker_pool() if pool is None else pool
    conf = reader_conf(part.options)
    lease = part.options.lease
    key = pool_key(conf if lease is None else {**conf, LEASE_OPTION: lease}, part.topic, part.partition)
    with _gc_paused():
        entry = pool.take(key)
        if entry is None:
            entry = PooledConsumer(Consumer(conf))
        else:
            leases.forget(lease, entry)  # in use: a release leaves it to this read
        consumer = entry.consumer
        try:
            # On a kept consumer: a seek to ``start`` on its open connections.
            consumer.assign([TopicPartition(part.topic, part.partition, part.start)])
        except BaseException:
            consumer.close()
            raise
    reader = _RangeRead(consumer, part)
    try:
        while True:
            with _gc_paused():
                batch = reader.next_batch()
            if batch is None:
                break
            yield batch
    except GeneratorExit:  # the task stopped reading early (e.g. a LIMIT): the consumer is fine
        _give_back(pool, key, entry, lease)
        raise
    except BaseException:
        consumer.close()
        raise
    _give_back(pool, key, entry, lease)


def _give_back(pool: ConsumerPool, key: PoolKey, entry: PooledConsumer, lease: str | None = None) -> None:
    """Unassign ``entry``'s consumer (it stops fetching) and keep it in ``pool``, under ``lease``
    when there is one (`streamsdsl.io.leases`: closed when the lease is released).

    Unassigned rather than paused: a paused partition measured ~0.7 s from ``resume()`` (or a
    seek) to its first record, an unassigned one ~20 ms from ``assign()``.
    """
    try:
        entry.consumer.unassign()
    except Exception:  # noqa: BLE001 - a consumer that cannot be unassigned is not kept
        entry.consumer.close()
        return
    pool.give_back(key, entry)
    leases.hold(lease, entry, lambda: pool.discard(key, entry))
