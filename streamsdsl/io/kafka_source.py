"""Kafka source on Spark's Python Data Source API (short name ``"streamsdsl-kafka"``).

The source reads Kafka topics with confluent-kafka and yields rows of
`RAW_RECORD_DDL` (``timestamp`` in epoch milliseconds). It works
without Spark's JVM Kafka connector.

* **Streaming** (``spark.readStream``): offsets live in the Spark checkpoint as JSON,
  ``{"topic": {"0": 23, "1": 7}}`` (partition ids as strings; the offset is the next one to
  read). One Spark input partition per Kafka partition with new data; admission control
  (``maxOffsetsPerTrigger``) and ``Trigger.AvailableNow`` are supported. A restarted query
  resumes exactly at the first offset its checkpoint has not committed.
* **Batch** (``spark.read``): reads ``[startingOffsets, endingOffsets)``.

Consumption uses ``assign()`` (no consumer group, nothing is committed to Kafka) and
reads exactly the planned offset range of each partition.

Options
-------
kafka.bootstrap.servers
    Required. ``host:port[,host:port...]``.
subscribe
    Required. Comma-separated topic names.
startingOffsets
    ``"earliest"``, ``"latest"`` (streaming default) or JSON such as
    ``{"orders": {"0": 23, "1": -2}}`` (``-2`` = earliest, ``-1`` = latest) naming every
    partition of each topic it names; subscribed topics it does not name start at the
    earliest offset. Only used when a query starts without a checkpoint. Partitions that appear later are read from their earliest offset. Batch
    default: ``"earliest"``.
endingOffsets
    Batch only: ``"latest"`` (default) or JSON like ``startingOffsets`` (``-1`` = latest;
    topics it does not name end at the latest offset).
maxOffsetsPerTrigger
    Positive integer: at most this many offsets per micro-batch, shared across partitions
    in proportion to their backlog (largest-remainder rounding, so a batch takes exactly
    ``min(limit, backlog)`` offsets; offsets, not records: compaction gaps and transaction
    markers count). ``Trigger.AvailableNow`` respects it too: several batches up to the
    end offsets fixed when the query started.
kafka.broker.compat
    ``"kafka"`` (default) or ``"tansu"``. The Tansu broker's high watermark can understate
    the end of a partition (it is the base offset of the last record batch + 1); with
    ``"tansu"`` the source finds the true end by reading on from the last batch until a
    fetch returns nothing. Do not use ``"tansu"`` against real Kafka: it costs a fetch per
    partition and trigger.
failOnDataLoss
    ``"true"`` (default): fail when planned offsets are no longer on the broker (retention).
    ``"false"``: skip to the earliest available offset.
kafkaConsumer.pollTimeoutMs
    Milliseconds a task waits without progress before failing (default 120000).
kafka.*
    Any other librdkafka consumer setting, passed through (``kafka.`` stripped), e.g.
    ``kafka.security.protocol``. ``isolation.level`` defaults to ``read_uncommitted`` like
    Spark's connector. ``group.id``-based offset management is not used.

Record mapping
--------------
``key``/``value`` are the raw bytes (``null`` when absent; a ``null`` value is a
tombstone), ``timestamp`` is the record timestamp in ms (``null`` if the broker has none),
``headers`` is ``null`` when a record has no headers (as in Spark's JVM connector).

Examples
--------
>>> from streamsdsl.io import register
>>> register(spark)  # doctest: +SKIP
>>> df = (spark.readStream.format("streamsdsl-kafka")  # doctest: +SKIP
...       .option("kafka.bootstrap.servers", "127.0.0.1:9092")
...       .option("subscribe", "orders")
...       .option("startingOffsets", "earliest")
...       .load())
"""

from __future__ import annotations

import json
import math
import operator
import threading
import time
import uuid
import weakref
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    InputPartition,
)
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
)

try:  # pyspark >= 4.2
    from pyspark.sql.streaming.datasource import (
        ReadAllAvailable,
        ReadLimit,
        ReadMaxRows,
        SupportsTriggerAvailableNow,
    )
except ImportError:  # pragma: no cover - older pyspark: no admission control / AvailableNow
    ReadLimit = object  # type: ignore[assignment,misc]

    class ReadAllAvailable:  # type: ignore[no-redef]
        """Placeholder for pyspark < 4.2."""

    class ReadMaxRows:  # type: ignore[no-redef]
        """Placeholder for pyspark < 4.2."""

        def __init__(self, max_rows: int) -> None:
            self.max_rows = max_rows

    class SupportsTriggerAvailableNow:  # type: ignore[no-redef]
        """Placeholder for pyspark < 4.2."""


from streamsdsl.errors import StreamsDslError
from streamsdsl.records import RAW_RECORD_COLUMNS

if TYPE_CHECKING:
    import pyarrow as pa
    from confluent_kafka import Consumer
    from pyspark.sql import SparkSession

    from streamsdsl.io.kafka_sink import KafkaBatchWriter, KafkaStreamWriter

__all__ = [
    "KafkaDataSource",
    "KafkaInputPartition",
    "KafkaOptionError",
    "KafkaSourceError",
    "KafkaDataLossError",
    "KafkaSourceOptions",
    "RAW_RECORD_SCHEMA",
    "SOURCE_NAME",
    "register",
]

#: The short name under which `register` makes the data source available.
SOURCE_NAME = "streamsdsl-kafka"

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

EARLIEST = -2
LATEST = -1
_COMPAT_VALUES = ("kafka", "tansu")
#: Records per Arrow batch handed to Spark, and the most a single ``consume()`` asks for.
_BATCH_ROWS = 10_000
#: Seconds one ``consume()`` call may block; the overall no-progress limit is
#: ``kafkaConsumer.pollTimeoutMs``.
_STEP_TIMEOUT_S = 0.5
#: Options the source manages itself; passing them as ``kafka.*`` is an error.
_FORBIDDEN_KAFKA_OPTIONS = {
    "auto.offset.reset": "use the 'startingOffsets' option instead",
    "enable.auto.commit": "offsets are kept in the Spark checkpoint, not committed to Kafka",
    "key.deserializer": "keys are returned as bytes; deserialize them in the query",
    "value.deserializer": "values are returned as bytes; deserialize them in the query",
}

TopicPartitionKey = tuple[str, int]
#: Offsets as they are in a checkpoint: ``{topic: {"partition": next_offset}}``.
OffsetsJson = dict[str, dict[str, int]]


# -- errors -------------------------------------------------------------------------------
class KafkaOptionError(StreamsDslError, ValueError):
    """An option of the ``streamsdsl-kafka`` data source is missing or invalid."""


class KafkaSourceError(StreamsDslError, RuntimeError):
    """Reading from Kafka failed (broker error, timeout)."""


class KafkaDataLossError(KafkaSourceError):
    """Planned offsets are gone from the broker and ``failOnDataLoss`` is true."""


# -- options ------------------------------------------------------------------------------
def _parse_bool(options: Mapping[str, str], name: str, default: bool) -> bool:
    raw = options.get(name.lower())
    if raw is None:
        return default
    value = str(raw).strip().lower()
    if value in ("true", "1", "yes"):
        return True
    if value in ("false", "0", "no"):
        return False
    raise KafkaOptionError(f"option '{name}' must be 'true' or 'false' (got {raw!r}).")


def _parse_positive_int(options: Mapping[str, str], name: str) -> int | None:
    raw = options.get(name.lower())
    if raw is None or str(raw).strip() == "":
        return None
    try:
        value = int(str(raw).strip())
    except ValueError:
        value = 0
    if value <= 0:
        raise KafkaOptionError(f"option '{name}' must be a positive integer (got {raw!r}).")
    return value


def _parse_offsets_spec(raw: str, name: str, topics: Sequence[str], *, ending: bool) -> str | OffsetsJson:
    """Validate a ``startingOffsets``/``endingOffsets`` value; return the keyword or the JSON."""
    value = raw.strip()
    keywords = ("latest",) if ending else ("earliest", "latest")
    if value.lower() in keywords:
        return value.lower()
    allowed = "'latest' (-1)" if ending else "'earliest' (-2), 'latest' (-1)"
    hint = (
        f"option '{name}' must be {' or '.join(repr(k) for k in keywords)} or JSON like "
        f'{{"{topics[0] if topics else "topic"}": {{"0": 23, "1": -1}}}} with offsets >= 0 or {allowed}'
    )
    try:
        parsed = json.loads(value)
    except json.JSONDecodeError:
        raise KafkaOptionError(f"{hint} (got {raw!r}).") from None
    if not isinstance(parsed, dict):
        raise KafkaOptionError(f"{hint} (got {raw!r}).")
    out: OffsetsJson = {}
    for topic, parts in parsed.items():
        if topic not in topics:
            raise KafkaOptionError(
                f"option '{name}' names topic {topic!r}, which is not subscribed ({', '.join(topics)}); "
                f"add it to 'subscribe' or remove it from '{name}'."
            )
        if not isinstance(parts, dict) or not parts:
            raise KafkaOptionError(f"{hint} (got {raw!r}).")
        out[topic] = {}
        for part, offset in parts.items():
            lowest = LATEST if ending else EARLIEST
            if (
                not str(part).isdigit()
                or isinstance(offset, bool)
                or not isinstance(offset, int)
                or offset < lowest
            ):
                raise KafkaOptionError(f"{hint} (got {topic!r}: {{{part!r}: {offset!r}}}).")
            out[topic][str(int(part))] = offset
    return out


@dataclass(frozen=True)
class KafkaSourceOptions:
    """Validated reader options (picklable; travels to the executors inside partitions).

    Build it with `from_options`.
    """

    bootstrap_servers: str
    topics: tuple[str, ...]
    starting_offsets: str | OffsetsJson
    ending_offsets: str | OffsetsJson
    max_offsets_per_trigger: int | None
    compat: str
    fail_on_data_loss: bool
    poll_timeout_ms: int
    consumer_conf: dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_options(cls, options: Mapping[str, str], *, streaming: bool) -> KafkaSourceOptions:
        """Validate Spark reader options (keys are case-insensitive).

        Raises
        ------
        KafkaOptionError
            With the option's name and how to fix it.
        """
        opts = {str(k).lower(): str(v) for k, v in options.items()}
        bootstrap = opts.get("kafka.bootstrap.servers", "").strip()
        if not bootstrap:
            raise KafkaOptionError(
                "option 'kafka.bootstrap.servers' is required, e.g. "
                ".option('kafka.bootstrap.servers', 'localhost:9092')."
            )
        if "assign" in opts or "subscribepattern" in opts:
            raise KafkaOptionError(
                "options 'assign' and 'subscribePattern' are not supported by streamsdsl-kafka; "
                "use 'subscribe' with a comma-separated list of topics."
            )
        topics = tuple(t.strip() for t in opts.get("subscribe", "").split(",") if t.strip())
        if not topics:
            raise KafkaOptionError(
                "option 'subscribe' is required: a comma-separated list of topics, e.g. "
                ".option('subscribe', 'orders,payments')."
            )
        if len(set(topics)) != len(topics):
            raise KafkaOptionError(f"option 'subscribe' lists a topic twice: {opts['subscribe']!r}.")
        compat = opts.get("kafka.broker.compat", "kafka").strip().lower()
        if compat not in _COMPAT_VALUES:
            raise KafkaOptionError(
                f"option 'kafka.broker.compat' must be 'kafka' or 'tansu' (got {opts['kafka.broker.compat']!r}); "
                "use 'tansu' only for the Tansu broker."
            )
        starting = _parse_offsets_spec(
            opts.get("startingoffsets", "latest" if streaming else "earliest"),
            "startingOffsets",
            topics,
            ending=False,
        )
        if "endingoffsets" in opts and streaming:
            raise KafkaOptionError(
                "option 'endingOffsets' is only valid for batch reads (spark.read); "
                "a streaming query reads until it is stopped, or use trigger(availableNow=True)."
            )
        ending = _parse_offsets_spec(opts.get("endingoffsets", "latest"), "endingOffsets", topics, ending=True)
        max_per_trigger = _parse_positive_int(opts, "maxOffsetsPerTrigger")
        poll_timeout = _parse_positive_int(opts, "kafkaConsumer.pollTimeoutMs") or 120_000
        consumer_conf: dict[str, str] = {}
        for key, value in opts.items():
            if not key.startswith("kafka.") or key in ("kafka.bootstrap.servers", "kafka.broker.compat"):
                continue
            conf_key = key[len("kafka.") :]
            if conf_key in _FORBIDDEN_KAFKA_OPTIONS:
                raise KafkaOptionError(f"option '{key}' is not supported: {_FORBIDDEN_KAFKA_OPTIONS[conf_key]}.")
            consumer_conf[conf_key] = value
        return cls(
            bootstrap_servers=bootstrap,
            topics=topics,
            starting_offsets=starting,
            ending_offsets=ending,
            max_offsets_per_trigger=max_per_trigger,
            compat=compat,
            fail_on_data_loss=_parse_bool(opts, "failOnDataLoss", True),
            poll_timeout_ms=poll_timeout,
            consumer_conf=consumer_conf,
        )

    def client_conf(self, **overrides: Any) -> dict[str, Any]:
        """librdkafka consumer configuration: defaults, then ``kafka.*`` passthrough, then overrides."""
        conf: dict[str, Any] = {
            "bootstrap.servers": self.bootstrap_servers,
            "group.id": f"streamsdsl-kafka-source-{uuid.uuid4().hex}",
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "isolation.level": "read_uncommitted",
            "allow.auto.create.topics": False,
            # Measured on Tansu: librdkafka's defaults (1 MiB per partition and fetch; a 1 s
            # pause whenever the prefetch queue is over its threshold) made reads 3-4x slower.
            "max.partition.fetch.bytes": 10 * 1024 * 1024,
            "fetch.queue.backoff.ms": 10,
        }
        conf.update(self.consumer_conf)
        conf.update(overrides)
        return conf


# -- offsets helpers ----------------------------------------------------------------------
def _offsets_from_json(offsets: Mapping[str, Mapping[str, int]] | None) -> dict[TopicPartitionKey, int]:
    out: dict[TopicPartitionKey, int] = {}
    for topic, parts in (offsets or {}).items():
        for part, offset in parts.items():
            out[(topic, int(part))] = int(offset)
    return out


def _offsets_to_json(offsets: Mapping[TopicPartitionKey, int]) -> OffsetsJson:
    out: OffsetsJson = {}
    for (topic, part), offset in sorted(offsets.items()):
        out.setdefault(topic, {})[str(part)] = int(offset)
    return out


def allocate_rate_limit(
    start: Mapping[TopicPartitionKey, int], end: Mapping[TopicPartitionKey, int], limit: int
) -> dict[TopicPartitionKey, int]:
    """Cap ``end`` so that at most ``limit`` offsets are read, shared by backlog.

    Each partition gets ``floor(limit * backlog / total)``; the offsets left over go one
    each to the partitions with the largest remainders (ties: topic, partition order). So a
    batch reads exactly ``min(limit, total backlog)`` offsets and always makes progress.

    Examples
    --------
    >>> allocate_rate_limit({("t", 0): 0, ("t", 1): 0}, {("t", 0): 10, ("t", 1): 5}, 6)
    {('t', 0): 4, ('t', 1): 2}
    """
    backlog = {tp: max(0, end[tp] - start.get(tp, end[tp])) for tp in end}
    total = sum(backlog.values())
    if total <= limit:
        return dict(end)
    shares = {tp: limit * n / total for tp, n in backlog.items()}
    take = {tp: math.floor(s) for tp, s in shares.items()}
    left = limit - sum(take.values())
    by_remainder = sorted(
        (tp for tp in backlog if take[tp] < backlog[tp]),
        key=lambda tp: (-(shares[tp] - take[tp]), tp),
    )
    for tp in by_remainder[:left]:
        take[tp] += 1
    return {tp: start.get(tp, end[tp]) + take[tp] for tp in end}


# -- broker access (driver side) ----------------------------------------------------------
class _OffsetClient:
    """Lazily created metadata/watermark clients for the driver-side planner."""

    def __init__(self, options: KafkaSourceOptions) -> None:
        self._options = options
        self._consumer: Consumer | None = None
        self._probe: Consumer | None = None
        self._lock = threading.Lock()

    def close(self) -> None:
        for client in (self._consumer, self._probe):
            if client is not None:
                try:
                    client.close()
                except Exception:  # noqa: BLE001, S110 - closing is best effort
                    pass
        self._consumer = self._probe = None

    def _meta(self) -> Consumer:
        if self._consumer is None:
            from confluent_kafka import Consumer

            self._consumer = Consumer(self._options.client_conf())
        return self._consumer

    def partitions(self) -> list[TopicPartitionKey]:
        """Partitions of every subscribed topic that exists (missing topics: none yet)."""
        timeout = self._options.poll_timeout_ms / 1000
        out: list[TopicPartitionKey] = []
        for topic in self._options.topics:
            try:
                meta = self._meta().list_topics(topic=topic, timeout=timeout)
            except Exception as exc:
                raise KafkaSourceError(
                    f"could not fetch metadata of topic {topic!r} from {self._options.bootstrap_servers}: {exc}"
                ) from exc
            info = meta.topics.get(topic)
            if info is None or info.error is not None:
                continue  # like Spark's subscribe: a topic that does not exist yet has no partitions
            out.extend((topic, p) for p in sorted(info.partitions))
        return out

    def watermarks(self, tps: Sequence[TopicPartitionKey]) -> dict[TopicPartitionKey, tuple[int, int]]:
        """``(low, high)`` watermark of each partition, as reported by the broker."""
        from confluent_kafka import TopicPartition

        timeout = self._options.poll_timeout_ms / 1000
        out: dict[TopicPartitionKey, tuple[int, int]] = {}
        for topic, part in tps:
            try:
                low, high = self._meta().get_watermark_offsets(
                    TopicPartition(topic, part), timeout=timeout, cached=False
                )
            except Exception as exc:
                raise KafkaSourceError(f"could not fetch the offsets of {topic}-{part}: {exc}") from exc
            out[(topic, part)] = (int(low), int(high))
        return out

    def earliest(self, tps: Sequence[TopicPartitionKey]) -> dict[TopicPartitionKey, int]:
        """Earliest available offset of each partition."""
        return {tp: low for tp, (low, _high) in self.watermarks(tps).items()}

    def latest(self, tps: Sequence[TopicPartitionKey]) -> dict[TopicPartitionKey, int]:
        """End offset (next offset to be written) of each partition.

        With ``compat="tansu"`` the high watermark is only a lower bound; the true end is
        found by fetching from the last batch on until a fetch returns nothing.
        """
        marks = self.watermarks(tps)
        ends = {tp: high for tp, (_low, high) in marks.items()}
        if self._options.compat == "tansu":
            ends.update(self._probe_true_ends(marks))
        return ends

    def _probe_true_ends(self, marks: Mapping[TopicPartitionKey, tuple[int, int]]) -> dict[TopicPartitionKey, int]:
        from confluent_kafka import KafkaError, TopicPartition

        # Tansu: high watermark = base offset of the last batch + 1, so that batch starts at
        # high - 1; anything after it in the same batch is beyond the reported watermark.
        todo = {tp: (low, high) for tp, (low, high) in marks.items() if high > low}
        ends = {tp: high for tp, (_low, high) in todo.items()}
        if not todo:
            return ends
        with self._lock:
            if self._probe is None:
                from confluent_kafka import Consumer

                self._probe = Consumer(
                    self._options.client_conf(
                        **{
                            "enable.partition.eof": True,
                            "fetch.wait.max.ms": 10,
                            "auto.offset.reset": "earliest",
                        }
                    )
                )
            probe = self._probe
            probe.assign([TopicPartition(t, p, max(low, high - 1)) for (t, p), (low, high) in todo.items()])
            pending = set(todo)
            seen: set[TopicPartitionKey] = set()
            idle_polls = 0
            deadline = time.monotonic() + self._options.poll_timeout_ms / 1000
            try:
                while pending and time.monotonic() < deadline:
                    msgs = probe.consume(1000, 0.05)
                    idle_polls = 0 if msgs else idle_polls + 1
                    for m in msgs:
                        tp = (m.topic(), m.partition())
                        err = m.error()
                        if err is not None:
                            if err.code() == KafkaError._PARTITION_EOF:
                                ends[tp] = max(ends[tp], m.offset())
                                pending.discard(tp)
                            elif err.fatal():
                                raise KafkaSourceError(f"finding the end of {tp[0]}-{tp[1]} failed: {err}")
                            continue
                        seen.add(tp)
                        ends[tp] = max(ends[tp], m.offset() + 1)
                    if idle_polls >= 4 and pending <= seen:
                        break  # every partition fetched and fetches now return nothing
            finally:
                probe.unassign()
        return ends


# -- executor side ------------------------------------------------------------------------
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
    global _arrow_schema
    if _arrow_schema is None:
        from pyspark.sql.pandas.types import to_arrow_schema

        _arrow_schema = to_arrow_schema(RAW_RECORD_SCHEMA, timezone="UTC")
    return _arrow_schema


def _to_batch(topic: str, partition: int, msgs: list[Any]) -> pa.RecordBatch:
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


def read_partition(part: KafkaInputPartition) -> Iterator[pa.RecordBatch]:
    """Yield the records of ``part`` (offsets ``[start, end)``) as Arrow batches.

    Asks ``consume()`` for exactly the remaining count, so it returns as soon as the
    range is complete. Offsets missing inside the range (compaction, transaction markers)
    are skipped; a partition end reported before ``end`` keeps the task waiting for data,
    up to ``kafkaConsumer.pollTimeoutMs`` without progress.

    Raises
    ------
    KafkaDataLossError
        If ``start`` is no longer available and ``failOnDataLoss`` is true.
    KafkaSourceError
        On fatal client errors or when no progress is made within the poll timeout.
    """
    from confluent_kafka import Consumer, KafkaError, Message, TopicPartition

    opts = part.options
    if part.end <= part.start:
        return
    consumer = Consumer(
        opts.client_conf(
            **{
                "enable.partition.eof": True,
                "auto.offset.reset": "error",
            }
        )
    )
    timeout_s = opts.poll_timeout_ms / 1000
    try:
        consumer.assign([TopicPartition(part.topic, part.partition, part.start)])
        pos = part.start
        pending: list[Any] = []
        last_progress = time.monotonic()
        last_error: Any = None
        while pos < part.end:
            msgs = consumer.consume(min(part.end - pos, _BATCH_ROWS), _STEP_TIMEOUT_S)
            if not msgs:
                if time.monotonic() - last_progress > timeout_s:
                    raise KafkaSourceError(
                        f"no records from {part.topic}-{part.partition} at offset {pos} (planned up to "
                        f"{part.end}) within kafkaConsumer.pollTimeoutMs={opts.poll_timeout_ms}"
                        + (f"; last error: {last_error}" if last_error is not None else "")
                        + ". Check the broker, or raise the option 'kafkaConsumer.pollTimeoutMs'."
                    )
                continue
            # Fast path, the norm: no error events and every offset inside [pos, end).
            first, last = msgs[0], msgs[-1]
            if (
                first.error() is None
                and last.error() is None
                and first.offset() >= pos
                and last.offset() < part.end
                and list(map(Message.error, msgs)).count(None) == len(msgs)
            ):
                pending.extend(msgs)
                pos = last.offset() + 1
                last_progress = time.monotonic()
                msgs = []
            done = False
            for m in msgs:
                err = m.error()
                if err is not None:
                    code = err.code()
                    if code == KafkaError._PARTITION_EOF:
                        if m.offset() >= part.end:
                            done = True
                            break
                        continue
                    if code in (KafkaError._AUTO_OFFSET_RESET, KafkaError.OFFSET_OUT_OF_RANGE):
                        low, high = consumer.get_watermark_offsets(
                            TopicPartition(part.topic, part.partition), timeout=timeout_s, cached=False
                        )
                        if low <= pos:
                            raise KafkaDataLossError(
                                f"offset {pos} of {part.topic}-{part.partition} is out of range (the broker "
                                f"has [{low}, {high})); was the topic deleted and re-created? Start the "
                                "query on a new checkpoint."
                            )
                        if opts.fail_on_data_loss:
                            raise KafkaDataLossError(
                                f"offsets [{pos}, {min(low, part.end)}) of {part.topic}-{part.partition} are no "
                                f"longer on the broker (earliest available: {low}). Set the option "
                                "'failOnDataLoss' to 'false' to skip them."
                            )
                        if low >= part.end:
                            done = True
                            break
                        pos = low
                        consumer.assign([TopicPartition(part.topic, part.partition, low)])
                        break
                    if err.fatal() or code in (
                        KafkaError.UNKNOWN_TOPIC_OR_PART,
                        KafkaError.TOPIC_AUTHORIZATION_FAILED,
                        KafkaError._UNKNOWN_PARTITION,
                    ):
                        raise KafkaSourceError(f"reading {part.topic}-{part.partition} failed: {err}")
                    last_error = err
                    continue
                offset = m.offset()
                if offset >= part.end:
                    done = True
                    break
                if offset < pos:
                    continue
                pending.append(m)
                pos = offset + 1
                last_progress = time.monotonic()
            if len(pending) >= _BATCH_ROWS:
                yield _to_batch(part.topic, part.partition, pending)
                pending = []
            if done:
                break
        if pending:
            yield _to_batch(part.topic, part.partition, pending)
    finally:
        consumer.close()


# -- readers ------------------------------------------------------------------------------
class _ClientHolder:
    """Mixin: a lazily created `_OffsetClient` that is never pickled."""

    _options: KafkaSourceOptions
    _client_obj: _OffsetClient | None

    @property
    def _client(self) -> _OffsetClient:
        if self._client_obj is None:
            self._client_obj = _OffsetClient(self._options)
        return self._client_obj

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_client_obj"] = None
        return state

    def _close_client(self) -> None:
        if self._client_obj is not None:
            self._client_obj.close()
            self._client_obj = None


def _resolve_spec(
    spec: str | OffsetsJson,
    tps: Sequence[TopicPartitionKey],
    client: _OffsetClient,
    name: str,
    *,
    default: int,
) -> dict[TopicPartitionKey, int]:
    """Turn a starting/ending offsets spec into concrete offsets for ``tps``.

    A JSON spec must list every partition of the topics it names; subscribed topics it
    does not name get ``default`` (``EARLIEST`` or ``LATEST``).
    """
    if spec == "earliest":
        return client.earliest(tps)
    if spec == "latest":
        return client.latest(tps)
    assert isinstance(spec, dict)
    given = _offsets_from_json(spec)
    unknown = sorted(set(given) - set(tps))
    if unknown:
        raise KafkaOptionError(
            f"option '{name}' names partitions that do not exist: "
            f"{', '.join(f'{t}-{p}' for t, p in unknown)}."
        )
    missing = [f"{t}-{p}" for t, p in tps if t in spec and (t, p) not in given]
    if missing:
        raise KafkaOptionError(
            f"option '{name}' must give an offset for every partition of the topics it names; "
            f"missing: {', '.join(missing)}. Use -2 for earliest or -1 for latest."
        )
    wanted = {tp: given.get(tp, default) for tp in tps}
    need_earliest = [tp for tp, v in wanted.items() if v == EARLIEST]
    need_latest = [tp for tp, v in wanted.items() if v == LATEST]
    earliest = client.earliest(need_earliest) if need_earliest else {}
    latest = client.latest(need_latest) if need_latest else {}
    return {
        tp: earliest[tp] if v == EARLIEST else latest[tp] if v == LATEST else v for tp, v in wanted.items()
    }


class KafkaStreamReader(_ClientHolder, DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Micro-batch reader: offsets in the checkpoint, admission control, AvailableNow."""

    def __init__(self, options: KafkaSourceOptions) -> None:
        self._options = options
        self._client_obj = None
        self._target: dict[TopicPartitionKey, int] | None = None
        self._last_latest: dict[TopicPartitionKey, int] | None = None

    def initialOffset(self) -> OffsetsJson:
        """Offsets a new query starts at, from ``startingOffsets``."""
        tps = self._client.partitions()
        return _offsets_to_json(
            _resolve_spec(self._options.starting_offsets, tps, self._client, "startingOffsets", default=EARLIEST)
        )

    def getDefaultReadLimit(self) -> ReadLimit:
        """``ReadMaxRows(maxOffsetsPerTrigger)`` when the option is set, else all available."""
        if self._options.max_offsets_per_trigger is not None:
            return ReadMaxRows(self._options.max_offsets_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        """Fix the end offsets of an ``availableNow`` run: data produced later is not read."""
        tps = self._client.partitions()
        self._target = self._client.latest(tps)

    def latestOffset(self, start: OffsetsJson, limit: ReadLimit) -> OffsetsJson:
        """End offsets of the next micro-batch, capped by ``limit`` and the AvailableNow target."""
        begin = _offsets_from_json(start)
        if self._target is not None:
            latest = dict(self._target)
        else:
            latest = self._client.latest(self._client.partitions())
        self._last_latest = dict(latest)
        new = [tp for tp in latest if tp not in begin]
        begin_new = self._client.earliest(new) if new else {}
        end: dict[TopicPartitionKey, int] = {}
        for tp, offset in latest.items():
            first = begin.get(tp, begin_new.get(tp, 0))
            end[tp] = max(offset, first)
        if isinstance(limit, ReadMaxRows):
            end = allocate_rate_limit({**begin_new, **begin}, end, int(limit.max_rows))
        for tp, offset in begin.items():
            end.setdefault(tp, offset)  # partitions that vanished keep their position
        return _offsets_to_json(end)

    def reportLatestOffset(self) -> OffsetsJson | None:
        """The broker's end offsets seen by the last `latestOffset` (for progress)."""
        return _offsets_to_json(self._last_latest) if self._last_latest is not None else None

    def partitions(self, start: OffsetsJson, end: OffsetsJson) -> Sequence[InputPartition]:
        """One input partition per Kafka partition with offsets in ``[start, end)``."""
        begin = _offsets_from_json(start)
        stop = _offsets_from_json(end)
        new = [tp for tp in stop if tp not in begin]
        if new:
            begin.update(self._client.earliest(new))
        return [
            KafkaInputPartition(topic, part, begin[(topic, part)], offset, self._options)
            for (topic, part), offset in sorted(stop.items())
            if offset > begin[(topic, part)]
        ]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """Read one planned offset range (runs in an executor's Python worker)."""
        assert isinstance(partition, KafkaInputPartition)
        return read_partition(partition)

    def commit(self, end: OffsetsJson) -> None:
        """Nothing to do: offsets live in the Spark checkpoint, not in Kafka."""

    def stop(self) -> None:
        """Close the driver-side clients."""
        self._close_client()


class KafkaBatchReader(_ClientHolder, DataSourceReader):
    """Batch reader over ``[startingOffsets, endingOffsets)``."""

    def __init__(self, options: KafkaSourceOptions) -> None:
        self._options = options
        self._client_obj = None

    def partitions(self) -> Sequence[InputPartition]:
        """Resolve the offset ranges now (on the driver); one input partition per Kafka partition."""
        try:
            tps = self._client.partitions()
            missing = [t for t in self._options.topics if not any(tp[0] == t for tp in tps)]
            if missing:
                raise KafkaOptionError(
                    f"option 'subscribe' names topics that do not exist on "
                    f"{self._options.bootstrap_servers}: {', '.join(missing)}."
                )
            start = _resolve_spec(
                self._options.starting_offsets, tps, self._client, "startingOffsets", default=EARLIEST
            )
            end = _resolve_spec(self._options.ending_offsets, tps, self._client, "endingOffsets", default=LATEST)
        finally:
            self._close_client()
        parts: list[InputPartition] = [
            KafkaInputPartition(topic, part, start[(topic, part)], end[(topic, part)], self._options)
            for topic, part in tps
            if end[(topic, part)] > start[(topic, part)]
        ]
        # Spark needs at least one partition to build a (possibly empty) plan.
        return parts or [KafkaInputPartition(tps[0][0] if tps else "", 0, 0, 0, self._options)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """Read one planned offset range (runs in an executor's Python worker)."""
        assert isinstance(partition, KafkaInputPartition)
        return read_partition(partition)


# -- the data source ----------------------------------------------------------------------
class KafkaDataSource(DataSource):
    """Kafka as a Spark data source: batch and streaming reads and writes.

    Reads yield `RAW_RECORD_SCHEMA`; writes take
    `RAW_SINK_DDL` (see `streamsdsl.io.kafka_sink`).
    """

    @classmethod
    def name(cls) -> str:
        """The format name, ``"streamsdsl-kafka"``."""
        return SOURCE_NAME

    def schema(self) -> StructType:
        """`RAW_RECORD_SCHEMA`; a user-specified schema is not allowed."""
        return RAW_RECORD_SCHEMA

    def _check_schema(self, schema: StructType) -> None:
        if schema != RAW_RECORD_SCHEMA:
            raise KafkaOptionError(
                "the streamsdsl-kafka source has a fixed schema (streamsdsl.records.RAW_RECORD_DDL); "
                f"remove the .schema(...) call (got {schema.simpleString()})."
            )

    def reader(self, schema: StructType) -> DataSourceReader:
        """Batch reader (``spark.read.format("streamsdsl-kafka")``)."""
        self._check_schema(schema)
        return KafkaBatchReader(KafkaSourceOptions.from_options(self.options, streaming=False))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        """Streaming reader (``spark.readStream.format("streamsdsl-kafka")``)."""
        self._check_schema(schema)
        return KafkaStreamReader(KafkaSourceOptions.from_options(self.options, streaming=True))

    def writer(self, schema: StructType, overwrite: bool) -> KafkaBatchWriter:
        """Batch writer (``df.write.format("streamsdsl-kafka")``), see `streamsdsl.io.kafka_sink`."""
        from streamsdsl.io.kafka_sink import KafkaBatchWriter, KafkaSinkOptions

        if overwrite:
            from streamsdsl.io.kafka_sink import KafkaSinkOptionError

            raise KafkaSinkOptionError(
                "save mode 'overwrite' is not possible for Kafka (a topic cannot be truncated); "
                "use .mode('append')."
            )
        return KafkaBatchWriter(KafkaSinkOptions.from_options(self.options, schema))

    def streamWriter(self, schema: StructType, overwrite: bool) -> KafkaStreamWriter:
        """Streaming writer (``df.writeStream.format("streamsdsl-kafka")``); any output mode appends."""
        from streamsdsl.io.kafka_sink import KafkaSinkOptions, KafkaStreamWriter

        return KafkaStreamWriter(KafkaSinkOptions.from_options(self.options, schema))


_registered: weakref.WeakKeyDictionary[Any, bool] = weakref.WeakKeyDictionary()
_register_lock = threading.Lock()


def register(spark: SparkSession) -> None:
    """Register the ``streamsdsl-kafka`` data source on ``spark`` (once per session).

    Parameters
    ----------
    spark : SparkSession
        The session; `get_session` gives one.
    """
    with _register_lock:
        try:
            if _registered.get(spark):
                return
        except TypeError:  # pragma: no cover - session not weak-referenceable
            pass
        spark.dataSource.register(KafkaDataSource)
        try:
            _registered[spark] = True
        except TypeError:  # pragma: no cover
            pass
