"""Options of the ``streamsdsl-kafka`` source and sink: parsing and validation.

Imports neither pyspark nor confluent_kafka. Option names are case-insensitive; every
invalid value raises `KafkaOptionError` (source) or `KafkaSinkOptionError` (sink) naming the
option and the fix. The validated options (`KafkaSourceOptions`, `KafkaSinkOptions`) are
picklable and travel to the executors.

Source options
--------------
kafka.bootstrap.servers
    Required. ``host:port[,host:port...]``.
subscribe
    Comma-separated topic names. This or ``subscribePattern`` is required.
subscribePattern
    A Python regular expression: the source reads every topic it matches in full (Kafka's
    internal topics, ``__consumer_offsets`` and the like, excepted), including topics created
    while the query runs: each micro-batch's planning lists the brokers' topics, and a new
    matching topic (or a new partition) is read from its earliest offset, as Spark's own
    connector reads a partition it discovers.
otherPatterns
    With ``subscribePattern``: a JSON list of the patterns other sources of the same application
    read (``KafkaStreams`` sets it). A topic this pattern and one of them both match fails the
    query, as Kafka Streams fails ("Topic ... is already matched for another regex pattern ...").
startingOffsets
    ``"earliest"``, ``"latest"`` (streaming default) or JSON such as
    ``{"orders": {"0": 23, "1": -2}}`` (``-2`` = earliest, ``-1`` = latest) naming every
    partition of each topic it names; subscribed topics it does not name start at the
    earliest offset. Only used when a query starts without a checkpoint. Partitions (and,
    with ``subscribePattern``, topics) that appear later are read from their earliest offset.
    Batch default: ``"earliest"``.
endingOffsets
    Batch only: ``"latest"`` (default) or JSON like ``startingOffsets`` (``-1`` = latest;
    topics it does not name end at the latest offset).
maxOffsetsPerTrigger
    Positive integer: at most this many offsets per micro-batch, shared across partitions
    in proportion to their backlog (largest-remainder rounding, so a batch takes exactly
    ``min(limit, backlog)`` offsets; offsets, not records: compaction gaps and transaction
    markers count). ``Trigger.AvailableNow`` respects it too: several batches up to the
    end offsets fixed when the query started.
failOnDataLoss
    ``"true"`` (default): fail when planned offsets are no longer on the broker (retention).
    ``"false"``: skip to the earliest available offset.
kafkaConsumer.pollTimeoutMs
    Milliseconds a task waits without progress before failing (default 120000).
clientLease
    The path of a `streamsdsl.io.leases.ClientLease` (``KafkaStreams`` sets it): the consumers
    the executors keep between micro-batches are closed when it is released.
kafka.*
    Any other librdkafka consumer setting, passed through (``kafka.`` stripped), e.g.
    ``kafka.security.protocol``. ``isolation.level`` defaults to ``read_uncommitted`` like
    Spark's connector. ``group.id``-based offset management is not used.

Sink options
------------
kafka.bootstrap.servers
    Required. ``host:port[,host:port...]``.
topic
    Required. The target topic (must exist).
kafka.flush.timeout.ms
    Milliseconds a task waits for acknowledgements at its end (default 120000).
clientLease
    As for the source: the producers the executors keep are closed when it is released.
transactionalIdPrefix
    Exactly-once: each task writes in a Kafka transaction of the producer
    ``<prefix>-<partition of the write>`` and commits, in the same transaction, the marker
    ``transactionalBatch`` as the offset of the consumer group of that name (see
    `streamsdsl.io.sink.produce_transactionally` and the docs page *Kafka in and out*).
transactionalBatch
    With ``transactionalIdPrefix``, required: ``<query id>:<batch id>``, the identity of the
    write; a task whose marker says it already committed this write skips it.
kafka.*
    Any other librdkafka producer setting, passed through (``kafka.`` stripped), e.g.
    ``kafka.compression.type=lz4``. ``enable.idempotence`` and ``acks`` cannot be weakened;
    ``kafka.transaction.timeout.ms`` bounds each transaction (default 10000 with
    ``transactionalIdPrefix``, as Kafka Streams under exactly-once).

Examples
--------
>>> opts = KafkaSourceOptions.from_options(
...     {"kafka.bootstrap.servers": "h:9092", "subscribe": "a,b", "startingOffsets": "earliest"}, streaming=True)
>>> opts.topics, opts.starting_offsets
(('a', 'b'), 'earliest')
>>> KafkaSinkOptions.from_options({"kafka.bootstrap.servers": "h:9092", "topic": "out"}).flush_timeout_ms
120000
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from streamsdsl.io.errors import KafkaOptionError, KafkaSinkOptionError
from streamsdsl.io.offsets import EARLIEST, LATEST, OffsetSpec, OffsetsJson

__all__ = [
    "DEFAULT_TRANSACTION_TIMEOUT_MS",
    "INTERNAL_TOPICS",
    "FORBIDDEN_CONSUMER_OPTIONS",
    "FORBIDDEN_PRODUCER_OPTIONS",
    "KafkaSinkOptions",
    "KafkaSourceOptions",
]

#: Kafka's internal topics, which a ``subscribePattern`` never reads (Kafka's consumers exclude
#: internal topics from pattern subscriptions: ``exclude.internal.topics``).
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state", "__share_group_state"})
#: Consumer settings the source manages itself; passing them as ``kafka.*`` is an error.
FORBIDDEN_CONSUMER_OPTIONS = {
    "auto.offset.reset": "use the 'startingOffsets' option instead",
    "enable.auto.commit": "offsets are kept in the Spark checkpoint, not committed to Kafka",
    "key.deserializer": "keys are returned as bytes; deserialize them in the query",
    "value.deserializer": "values are returned as bytes; deserialize them in the query",
}
#: Producer settings the sink manages itself; passing them as ``kafka.*`` is an error.
FORBIDDEN_PRODUCER_OPTIONS = {
    "enable.idempotence": "the sink always uses an idempotent producer",
    "acks": "the sink always waits for all in-sync replicas (acks=all)",
    "key.serializer": "keys are written as the bytes of the 'key' column",
    "value.serializer": "values are written as the bytes of the 'value' column",
    "transactional.id": (
        "the sink names its transactional producers itself; set the option 'transactionalIdPrefix' "
        "(KafkaStreams: 'processing.guarantee' = 'exactly_once_v2') for exactly-once"
    ),
}
#: ``kafka.*`` options of this data source itself, not passed to librdkafka.
_OWN_KAFKA_OPTIONS = ("kafka.bootstrap.servers",)
#: Options that were removed, refused (by the source and the sink) with what replaced them.
_REMOVED_OPTIONS = {
    "kafka.broker.compat": (
        "it was removed with the Tansu broker: the source reads every partition up to its high watermark, "
        "which Apache Kafka (the local broker too) reports exactly; drop the option"
    ),
}
_DEFAULT_TIMEOUT_MS = 120_000


# -- shared parsing steps -------------------------------------------------------------------
def _lower_keys_and_bootstrap(options: Mapping[str, str], error: type[ValueError]) -> tuple[dict[str, str], str]:
    """The options with lower-case keys, and the required ``kafka.bootstrap.servers``."""
    opts = {str(k).lower(): str(v) for k, v in options.items()}
    for removed, why in _REMOVED_OPTIONS.items():
        if removed in opts:
            raise error(f"option {removed!r} is not supported: {why}.")
    bootstrap = opts.get("kafka.bootstrap.servers", "").strip()
    if not bootstrap:
        raise error(
            "option 'kafka.bootstrap.servers' is required, e.g. "
            ".option('kafka.bootstrap.servers', 'localhost:9092')."
        )
    return opts, bootstrap


def _positive_int(raw: str, name: str, error: type[ValueError]) -> int:
    try:
        value = int(raw.strip())
    except ValueError:
        value = 0
    if value <= 0:
        raise error(f"option '{name}' must be a positive integer (got {raw!r}).")
    return value


def _optional_positive_int(opts: Mapping[str, str], name: str) -> int | None:
    raw = opts.get(name.lower())
    if raw is None or raw.strip() == "":
        return None
    return _positive_int(raw, name, KafkaOptionError)


def _parse_bool(opts: Mapping[str, str], name: str, default: bool) -> bool:
    raw = opts.get(name.lower())
    if raw is None:
        return default
    value = raw.strip().lower()
    if value in ("true", "1", "yes"):
        return True
    if value in ("false", "0", "no"):
        return False
    raise KafkaOptionError(f"option '{name}' must be 'true' or 'false' (got {raw!r}).")


def _client_settings(
    opts: Mapping[str, str], forbidden: Mapping[str, str], error: type[ValueError], *, skip: Sequence[str] = ()
) -> dict[str, str]:
    """The ``kafka.*`` options for librdkafka (prefix stripped), except the data source's own."""
    conf: dict[str, str] = {}
    for key, value in opts.items():
        if not key.startswith("kafka.") or key in _OWN_KAFKA_OPTIONS or key in skip:
            continue
        conf_key = key[len("kafka.") :]
        if conf_key in forbidden:
            raise error(f"option '{key}' is not supported: {forbidden[conf_key]}.")
        conf[conf_key] = value
    return conf


def _topic_pattern(raw: str | None, name: str = "subscribePattern") -> re.Pattern[str] | None:
    """The compiled ``subscribePattern`` (None when not given)."""
    if raw is None:
        return None
    if not raw.strip():
        raise KafkaOptionError(f"option '{name}' is empty; give a regular expression, e.g. 'orders-.*'.")
    try:
        return re.compile(raw)
    except re.error as e:
        raise KafkaOptionError(f"option '{name}' is not a valid regular expression ({e}): {raw!r}.") from None


def _other_patterns(raw: str | None, pattern: re.Pattern[str] | None) -> tuple[str, ...]:
    """The parsed ``otherPatterns`` (a JSON list of regular expressions; only with a pattern)."""
    if raw is None:
        return ()
    try:
        parsed = json.loads(raw)
    except json.JSONDecodeError:
        parsed = None
    if pattern is None or not isinstance(parsed, list) or not all(isinstance(p, str) for p in parsed):
        raise KafkaOptionError(
            f"option 'otherPatterns' must be a JSON list of regular expressions, with 'subscribePattern' (got {raw!r}).")
    for p in parsed:
        _topic_pattern(p, "otherPatterns")
    return tuple(parsed)


def _parse_offsets_spec(raw: str, name: str, topics: Sequence[str], *, ending: bool,
                        pattern: re.Pattern[str] | None = None) -> OffsetSpec:
    """Validate a ``startingOffsets``/``endingOffsets`` value; return the keyword or the JSON."""
    value = raw.strip()
    keywords = ("latest",) if ending else ("earliest", "latest")
    if value.lower() in keywords:
        return value.lower()
    allowed = "'latest' (-1)" if ending else "'earliest' (-2), 'latest' (-1)"
    example = topics[0] if topics else "orders"
    hint = (
        f"option '{name}' must be {' or '.join(repr(k) for k in keywords)} or JSON like "
        f'{{"{example}": {{"0": 23, "1": -1}}}} with offsets >= 0 or {allowed}'
    )
    try:
        parsed = json.loads(value)
    except json.JSONDecodeError:
        raise KafkaOptionError(f"{hint} (got {raw!r}).") from None
    if not isinstance(parsed, dict):
        raise KafkaOptionError(f"{hint} (got {raw!r}).")
    lowest = LATEST if ending else EARLIEST
    out: OffsetsJson = {}
    for topic, parts in parsed.items():
        if pattern is not None and pattern.fullmatch(topic) is None:
            raise KafkaOptionError(
                f"option '{name}' names topic {topic!r}, which 'subscribePattern' ({pattern.pattern}) does not "
                f"match; remove it from '{name}'.")
        if pattern is None and topic not in topics:
            raise KafkaOptionError(
                f"option '{name}' names topic {topic!r}, which is not subscribed ({', '.join(topics)}); "
                f"add it to 'subscribe' or remove it from '{name}'."
            )
        if not isinstance(parts, dict) or not parts:
            raise KafkaOptionError(f"{hint} (got {raw!r}).")
        out[topic] = {}
        for part, offset in parts.items():
            if (
                not str(part).isdigit()
                or isinstance(offset, bool)
                or not isinstance(offset, int)
                or offset < lowest
            ):
                raise KafkaOptionError(f"{hint} (got {topic!r}: {{{part!r}: {offset!r}}}).")
            out[topic][str(int(part))] = offset
    return out


# -- source -------------------------------------------------------------------------------
@dataclass(frozen=True)
class KafkaSourceOptions:
    """Validated reader options (picklable; travels to the executors inside partitions).

    Build it with `from_options`; the options are described in this module's docstring.
    """

    bootstrap_servers: str
    topics: tuple[str, ...]
    starting_offsets: OffsetSpec
    ending_offsets: OffsetSpec
    max_offsets_per_trigger: int | None
    fail_on_data_loss: bool
    poll_timeout_ms: int
    consumer_conf: dict[str, str] = field(default_factory=dict)
    lease: str | None = None
    #: ``subscribePattern``: the topics read are those it matches in full (``topics`` is empty).
    pattern: str | None = None
    #: ``otherPatterns``: the patterns of the application's other sources (no topic is read by two).
    other_patterns: tuple[str, ...] = ()

    def also_matched_by(self, topic: str) -> str | None:
        """The first of `other_patterns` that matches ``topic`` in full, if any."""
        return next((p for p in self.other_patterns if re.fullmatch(p, topic)), None)

    def reads(self, topic: str) -> bool:
        """Whether the source reads ``topic``: a subscribed topic, or one the pattern matches in
        full (Kafka's internal topics never)."""
        if self.pattern is None:
            return topic in self.topics
        return topic not in INTERNAL_TOPICS and re.fullmatch(self.pattern, topic) is not None

    @classmethod
    def from_options(cls, options: Mapping[str, str], *, streaming: bool) -> KafkaSourceOptions:
        """Validate Spark reader options (keys are case-insensitive).

        Parameters
        ----------
        options : mapping of str to str
            The options given to ``spark.read`` / ``spark.readStream``.
        streaming : bool
            Whether the read is a streaming one (``startingOffsets`` defaults to
            ``"latest"``, ``endingOffsets`` is not allowed).

        Raises
        ------
        KafkaOptionError
            With the option's name and how to fix it.
        """
        opts, bootstrap = _lower_keys_and_bootstrap(options, KafkaOptionError)
        if "assign" in opts:
            raise KafkaOptionError(
                "option 'assign' is not supported by streamsdsl-kafka; use 'subscribe' with a comma-separated "
                "list of topics, or 'subscribePattern'."
            )
        topics = tuple(t.strip() for t in opts.get("subscribe", "").split(",") if t.strip())
        pattern = _topic_pattern(opts.get("subscribepattern"))
        if topics and pattern is not None:
            raise KafkaOptionError("options 'subscribe' and 'subscribePattern' cannot be used together; choose one.")
        if not topics and pattern is None:
            raise KafkaOptionError(
                "option 'subscribe' is required: a comma-separated list of topics, e.g. "
                ".option('subscribe', 'orders,payments'), or 'subscribePattern': a regular expression, "
                "e.g. .option('subscribePattern', 'orders-.*')."
            )
        if len(set(topics)) != len(topics):
            raise KafkaOptionError(f"option 'subscribe' lists a topic twice: {opts['subscribe']!r}.")
        starting = _parse_offsets_spec(
            opts.get("startingoffsets", "latest" if streaming else "earliest"),
            "startingOffsets",
            topics,
            ending=False,
            pattern=pattern,
        )
        if "endingoffsets" in opts and streaming:
            raise KafkaOptionError(
                "option 'endingOffsets' is only valid for batch reads (spark.read); "
                "a streaming query reads until it is stopped, or use trigger(availableNow=True)."
            )
        ending = _parse_offsets_spec(opts.get("endingoffsets", "latest"), "endingOffsets", topics, ending=True,
                                     pattern=pattern)
        max_per_trigger = _optional_positive_int(opts, "maxOffsetsPerTrigger")
        poll_timeout = _optional_positive_int(opts, "kafkaConsumer.pollTimeoutMs") or _DEFAULT_TIMEOUT_MS
        consumer_conf = _client_settings(opts, FORBIDDEN_CONSUMER_OPTIONS, KafkaOptionError)
        return cls(
            bootstrap_servers=bootstrap,
            topics=topics,
            pattern=None if pattern is None else pattern.pattern,
            other_patterns=_other_patterns(opts.get("otherpatterns"), pattern),
            starting_offsets=starting,
            ending_offsets=ending,
            max_offsets_per_trigger=max_per_trigger,
            fail_on_data_loss=_parse_bool(opts, "failOnDataLoss", True),
            poll_timeout_ms=poll_timeout,
            consumer_conf=consumer_conf,
            lease=opts.get("clientlease") or None,
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
            # Measured (on the earlier local broker, Tansu): librdkafka's defaults (1 MiB per partition
            # and fetch; a 1 s pause whenever the prefetch queue is over its threshold) made reads 3-4x slower.
            "max.partition.fetch.bytes": 10 * 1024 * 1024,
            "fetch.queue.backoff.ms": 10,
        }
        conf.update(self.consumer_conf)
        conf.update(overrides)
        return conf


# -- sink ---------------------------------------------------------------------------------
#: ``transaction.timeout.ms`` of the exactly-once producers unless set (Kafka Streams' value under
#: exactly-once: a crashed writer's open transaction holds back read_committed consumers this long).
DEFAULT_TRANSACTION_TIMEOUT_MS = 10_000


def _transactional_batch(raw: str | None, prefix: str | None) -> tuple[str, int] | None:
    """Parse ``transactionalBatch`` (``<query id>:<batch id>``); required with a prefix."""
    if prefix is None:
        if raw:
            raise KafkaSinkOptionError(
                "option 'transactionalBatch' needs 'transactionalIdPrefix': it identifies a transactional write.")
        return None
    query, sep, batch = (raw or "").strip().rpartition(":")
    if not sep or not query or not batch.isdigit():
        raise KafkaSinkOptionError(
            f"option 'transactionalBatch' must be '<query id>:<batch id>' with 'transactionalIdPrefix' (got {raw!r}), "
            "e.g. 'c0ffee:12'.")
    return query, int(batch)


@dataclass(frozen=True)
class KafkaSinkOptions:
    """Validated writer options (picklable; travels to the executors with the writer).

    Build it with `from_options`; the options are described in this module's docstring.
    The input schema is checked by `streamsdsl.io.sink.validate_sink_schema`.
    """

    bootstrap_servers: str
    topic: str
    flush_timeout_ms: int
    #: The run's client lease (`streamsdsl.io.leases`): the producer closes when it is released.
    lease: str | None = None
    producer_conf: dict[str, str] = field(default_factory=dict)
    #: Exactly-once: the prefix of the tasks' ``transactional.id`` (None: at-least-once).
    transactional_id_prefix: str | None = None
    #: Exactly-once: ``(query id, batch id)``, the write's identity committed as each task's marker.
    transactional_batch: tuple[str, int] | None = None

    @property
    def transaction_timeout_ms(self) -> int:
        """``transaction.timeout.ms`` of the transactional producers."""
        return int(self.producer_conf.get("transaction.timeout.ms", DEFAULT_TRANSACTION_TIMEOUT_MS))

    @classmethod
    def from_options(cls, options: Mapping[str, str]) -> KafkaSinkOptions:
        """Validate Spark writer options (keys are case-insensitive).

        Parameters
        ----------
        options : mapping of str to str
            The options given to ``df.write`` / ``df.writeStream``.

        Returns
        -------
        KafkaSinkOptions
            The options; the input schema is checked separately.

        Raises
        ------
        KafkaSinkOptionError
            With the option's name and how to fix it.
        """
        opts, bootstrap = _lower_keys_and_bootstrap(options, KafkaSinkOptionError)
        topic = opts.get("topic", "").strip()
        if not topic:
            raise KafkaSinkOptionError(
                "option 'topic' is required: the topic to write to, e.g. .option('topic', 'out')."
            )
        raw_flush = opts.get("kafka.flush.timeout.ms")
        flush_ms = (
            _DEFAULT_TIMEOUT_MS
            if raw_flush is None
            else _positive_int(raw_flush, "kafka.flush.timeout.ms", KafkaSinkOptionError)
        )
        producer_conf = _client_settings(
            opts, FORBIDDEN_PRODUCER_OPTIONS, KafkaSinkOptionError, skip=("kafka.flush.timeout.ms",)
        )
        prefix = opts.get("transactionalidprefix", "").strip() or None
        batch = _transactional_batch(opts.get("transactionalbatch"), prefix)
        if prefix is not None:
            raw_timeout = producer_conf.get("transaction.timeout.ms", str(DEFAULT_TRANSACTION_TIMEOUT_MS))
            producer_conf["transaction.timeout.ms"] = str(
                _positive_int(raw_timeout, "kafka.transaction.timeout.ms", KafkaSinkOptionError))
        return cls(bootstrap_servers=bootstrap, topic=topic, flush_timeout_ms=flush_ms, producer_conf=producer_conf,
                   lease=opts.get("clientlease") or None, transactional_id_prefix=prefix, transactional_batch=batch)

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
