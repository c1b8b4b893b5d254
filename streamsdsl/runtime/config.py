"""The configuration of a `KafkaStreams` application: `StreamsConfig` and its typed values.

`StreamsConfig.from_mapping` validates a mapping of Kafka Streams' configuration keys (values
may be strings, as in Java properties) into a frozen `StreamsConfig`; the settings with a fixed
set of values become enums (`ProcessingGuarantee`, `OffsetReset`, `Connector` and
`streamsdsl.dsl.options.DeserializationHandler`).
The option builders turn it into the options of the Kafka readers and writer. Pure Python:
nothing here imports pyspark.

Examples
--------
>>> c = StreamsConfig.from_mapping({"application.id": "wordcount", "bootstrap.servers": "k:9092",
...                                 "auto.offset.reset": "LATEST", "kafka.connector": "jvm"})
>>> c.auto_offset_reset, c.connector
(<OffsetReset.LATEST: 'latest'>, <Connector.JVM: 'jvm'>)
>>> c.source_options()
{'kafka.bootstrap.servers': 'k:9092', 'startingOffsets': 'latest'}
"""

from __future__ import annotations

import difflib
import json
import enum
import os
import re
from collections.abc import Mapping
from datetime import timedelta
from typing import Any, TypeVar

import attrs

from streamsdsl._validation import to_millis
from streamsdsl.dsl.options import DeserializationHandler
from streamsdsl.errors import InvalidArgumentError, StreamsDslError
from streamsdsl.records import DRIVER_APPLICATION_ID
from streamsdsl.jvm import OPERATOR_KEY, Operator, default_operator
from streamsdsl.semantics.kernels import FlushPolicy

__all__ = [
    "DriverConfig",
    "KNOWN_KEYS",
    "REMOVED_KEYS",
    "PASSTHROUGH_PREFIXES",
    "SHARED_CLIENT_PREFIXES",
    "Connector",
    "OffsetReset",
    "ProcessingGuarantee",
    "StreamsConfig",
    "StreamsConfigError",
    "Trigger",
]


class StreamsConfigError(StreamsDslError, ValueError):
    """A `KafkaStreams` configuration key is missing, unknown or has an invalid value."""


# -- typed values ---------------------------------------------------------------------------
class ProcessingGuarantee(enum.StrEnum):
    """``processing.guarantee``: ``at_least_once`` (the default) or ``exactly_once_v2``.

    At-least-once: a micro-batch interrupted before its checkpoint commit is written again after
    a restart. Exactly-once: every write is a Kafka transaction that commits a marker of the
    micro-batch with the records, so a replayed batch is recognised and skipped, and a newer
    instance with the same ``application.id`` fences the older one (the docs page *Kafka in
    and out* has the protocol). Kafka Streams' older values ``exactly_once`` and
    ``exactly_once_beta`` (removed in Kafka Streams 4.0) are refused, naming ``exactly_once_v2``.
    """

    AT_LEAST_ONCE = "at_least_once"
    EXACTLY_ONCE_V2 = "exactly_once_v2"


class OffsetReset(enum.StrEnum):
    """``auto.offset.reset``: where a query without a checkpoint starts reading."""

    EARLIEST = "earliest"
    LATEST = "latest"


class Connector(enum.StrEnum):
    """``kafka.connector``: what reads the source topics.

    ``PYTHON`` is the ``streamsdsl-kafka`` data source (no jar needed); ``JVM`` is Spark's
    Kafka connector (``spark-sql-kafka-0-10``), which must be on the classpath.
    """

    PYTHON = "python"
    JVM = "jvm"


class Trigger(enum.StrEnum):
    """``streamsdsl.trigger``: how the query runs.

    ``MICRO_BATCH`` (the default): a micro-batch every ``commit.interval.ms``, written through
    the application's sink. ``REAL_TIME``: Spark's real-time mode (``trigger(realTime=...)``,
    Spark 4.1+), records flow through long-running tasks straight into Spark's Kafka sink and
    ``commit.interval.ms`` is the checkpoint interval; for stateless topologies of Column steps
    read with ``kafka.connector = "jvm"`` only (see the docs page *Performance*, Real-time trigger).
    """

    MICRO_BATCH = "micro_batch"
    REAL_TIME = "real_time"


class Ship(enum.StrEnum):
    """``streamsdsl.ship``: whether the session streamsdsl builds for an application ships
    streamsdsl's Python code and dependencies to the Python processes Spark starts
    (`streamsdsl.runtime.shipping`).

    ``AUTO`` ships on a cluster's master (``spark://``, ``yarn``, ``k8s://``); ``ALWAYS`` on any
    master; ``NEVER`` not at all (an image or a cluster Python that has streamsdsl installed).
    """

    AUTO = "auto"
    ALWAYS = "always"
    NEVER = "never"

    @property
    def decision(self) -> bool | None:
        """What `streamsdsl.runtime.session.get_session`'s ``ship`` takes: ``None`` for ``AUTO``."""
        return {Ship.AUTO: None, Ship.ALWAYS: True, Ship.NEVER: False}[self]


_E = TypeVar("_E", bound=enum.StrEnum)
_OLD_EXACTLY_ONCE = ("exactly_once", "exactly_once_beta")
#: librdkafka's bounds of ``transaction.timeout.ms``.
_TRANSACTION_TIMEOUT_MIN_MS = 1000
_APP_ID = re.compile(r"^[A-Za-z0-9._-]{1,249}$")
_HANDLER_KEY = "default.deserialization.exception.handler"
#: Configuration keys `StreamsConfig` understands (besides the prefixes below).
KNOWN_KEYS = (
    "application.id",
    "bootstrap.servers",
    "state.dir",
    "commit.interval.ms",
    "processing.guarantee",
    "max.offsets.per.trigger",
    "auto.offset.reset",
    "task.timeout.ms",
    _HANDLER_KEY,
    "errors.dead.letter.topic",
    "errors.dead.letter.queue.topic.name",
    "kafka.connector",
    OPERATOR_KEY,
    "streamsdsl.ship",
    "statestore.cache.max.bytes",
    "cache.max.bytes.buffering",
    "streamsdsl.window.idle.close.ms",
    "streamsdsl.trigger",
)
#: Keys that were removed, refused with what replaced them.
REMOVED_KEYS = {
    "kafka.broker.compat": (
        "it was removed with the Tansu broker: the source reads every partition up to its high watermark, which "
        "Apache Kafka reports exactly (the local broker, local_kafka() and streamsdsl dev-broker, is Apache Kafka "
        "too); drop the key"
    ),
}
#: Prefixes passed through: ``spark.*`` to the SparkSession, ``consumer.*`` to the source,
#: ``producer.*`` to the sink; ``security.*``, ``sasl.*`` and ``ssl.*`` to every client.
PASSTHROUGH_PREFIXES = ("spark.", "consumer.", "producer.", "security.", "sasl.", "ssl.")
#: Prefixes of the librdkafka settings every client (source, sink, admin) shares.
SHARED_CLIENT_PREFIXES = ("security.", "sasl.", "ssl.")


# -- value parsing --------------------------------------------------------------------------
def _int_value(config: Mapping[str, Any], key: str, default: int | None, *, minimum: int) -> int | None:
    raw = config.get(key)
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return default
    try:
        if isinstance(raw, bool):
            raise ValueError
        value = int(str(raw).strip()) if not isinstance(raw, int) else raw
    except ValueError:
        raise StreamsConfigError(f"'{key}' must be an integer >= {minimum} (got {raw!r}).") from None
    if value < minimum:
        raise StreamsConfigError(f"'{key}' must be an integer >= {minimum} (got {value}).")
    return value


def _str_value(config: Mapping[str, Any], key: str, default: str | None) -> str | None:
    raw = config.get(key)
    if raw is None:
        return default
    value = str(raw).strip()
    return value or default


def _lower_value(config: Mapping[str, Any], key: str, default: str) -> str:
    """The value of ``key`` stripped and lower-cased; ``default`` when absent or blank."""
    return (_str_value(config, key, default) or default).lower()


def _enum_value(config: Mapping[str, Any], key: str, default: _E, *, quote: str = "'", hint: str = "") -> _E:
    """Parse ``key`` (case-insensitive) into a member of ``default``'s enum.

    The error lists the values, quoted with ``quote``, and ends with ``hint`` when given.
    """
    kind = type(default)
    try:
        return kind(_lower_value(config, key, default.value))
    except ValueError:
        allowed = " or ".join(f"{quote}{member.value}{quote}" for member in kind)
        end = f"; {hint}" if hint else "."
        raise StreamsConfigError(f"'{key}' must be {allowed} (got {config[key]!r}){end}") from None


def _check_keys(config: Mapping[str, Any]) -> None:
    for key in config:
        if key in KNOWN_KEYS or key.startswith(PASSTHROUGH_PREFIXES):
            continue
        if key in REMOVED_KEYS:
            raise StreamsConfigError(f"configuration key {key!r} is not supported: {REMOVED_KEYS[key]}.")
        close = difflib.get_close_matches(key, KNOWN_KEYS, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise StreamsConfigError(
            f"unknown configuration key {key!r}{hint}. Known keys: {', '.join(KNOWN_KEYS)}; "
            "librdkafka settings go under 'consumer.' or 'producer.', Spark settings under 'spark.'."
        )


def _application_id(config: Mapping[str, Any]) -> str:
    app_id = config.get("application.id")
    if app_id is None or str(app_id).strip() == "":
        raise StreamsConfigError(
            "'application.id' is required: it names the checkpoint directory "
            "(state.dir/application.id) and the Spark query, e.g. {'application.id': 'orders-per-customer'}."
        )
    app_id = str(app_id)
    if not _APP_ID.match(app_id) or app_id in (".", ".."):
        raise StreamsConfigError(
            f"'application.id' must be 1-249 characters of A-Z a-z 0-9 . _ - (got {app_id!r}); "
            "it becomes a directory name, e.g. 'orders-per-customer'."
        )
    return app_id


def _bootstrap_servers(config: Mapping[str, Any]) -> str:
    bootstrap = config.get("bootstrap.servers")
    if isinstance(bootstrap, (list, tuple)):
        bootstrap = ",".join(str(b).strip() for b in bootstrap)
    if bootstrap is None or str(bootstrap).strip() == "":
        raise StreamsConfigError(
            "'bootstrap.servers' is required: host:port[,host:port...] of the Kafka brokers, "
            "e.g. {'bootstrap.servers': 'localhost:9092'}."
        )
    return str(bootstrap).strip()


def _processing_guarantee(config: Mapping[str, Any]) -> ProcessingGuarantee:
    guarantee = _lower_value(config, "processing.guarantee", ProcessingGuarantee.AT_LEAST_ONCE.value)
    if guarantee in _OLD_EXACTLY_ONCE:
        raise StreamsConfigError(
            f"'processing.guarantee' = {guarantee!r} was removed in Kafka Streams 4.0 and is not supported; "
            "set it to 'exactly_once_v2' for exactly-once (Kafka transactions, brokers 2.5 or newer)."
        )
    value = _enum_value(config, "processing.guarantee", ProcessingGuarantee.AT_LEAST_ONCE)
    if value is ProcessingGuarantee.EXACTLY_ONCE_V2:
        _check_transactional_producer(config)
    return value


def _check_transactional_producer(config: Mapping[str, Any]) -> None:
    """Under exactly-once: the producer settings the transactions depend on."""
    if "producer.transactional.id" in config:
        raise StreamsConfigError(
            "'producer.transactional.id' cannot be set with 'processing.guarantee' = 'exactly_once_v2': the sink "
            "names its transactional producers itself (<application.id>-<sink>-<partition>, so that a restarted "
            "or second instance fences the first); remove it."
        )
    for key, value in (("producer.enable.idempotence", "true"), ("producer.acks", "all")):
        raw = config.get(key)
        if raw is not None and str(raw).strip().lower() not in (value, "-1" if value == "all" else value):
            raise StreamsConfigError(
                f"'{key}' = {raw!r} contradicts 'processing.guarantee' = 'exactly_once_v2', which needs "
                f"{key.removeprefix('producer.')}={value}; remove the setting."
            )
    _int_value(config, "producer.transaction.timeout.ms", None, minimum=_TRANSACTION_TIMEOUT_MIN_MS)


def _deserialization_handler(config: Mapping[str, Any]) -> DeserializationHandler:
    raw = _str_value(config, _HANDLER_KEY, DeserializationHandler.LOG_AND_FAIL.value)
    try:
        return DeserializationHandler.parse(raw, _HANDLER_KEY)
    except InvalidArgumentError as exc:
        raise StreamsConfigError(str(exc)) from None


def _dead_letter_topic(config: Mapping[str, Any], handler: DeserializationHandler) -> str | None:
    dlq = _str_value(config, "errors.dead.letter.topic", None)
    alias = _str_value(config, "errors.dead.letter.queue.topic.name", None)
    if dlq and alias and dlq != alias:
        raise StreamsConfigError(
            f"'errors.dead.letter.topic' ({dlq!r}) and its alias 'errors.dead.letter.queue.topic.name' "
            f"({alias!r}) disagree; set only one."
        )
    dlq = dlq or alias
    if dlq and handler is not DeserializationHandler.LOG_AND_CONTINUE:
        raise StreamsConfigError(
            f"'errors.dead.letter.topic' = {dlq!r} needs "
            f"'{_HANDLER_KEY}' = 'log_and_continue': with 'log_and_fail' a bad "
            "record stops the application before anything is written."
        )
    return dlq


_CACHE_KEY, _OLD_CACHE_KEY = "statestore.cache.max.bytes", "cache.max.bytes.buffering"


def _cache_max_bytes(config: Mapping[str, Any]) -> int | None:
    """``statestore.cache.max.bytes`` (or the deprecated ``cache.max.bytes.buffering``): the
    record cache's size; 0 turns the cache off, so every store write is forwarded."""
    new = _int_value(config, _CACHE_KEY, None, minimum=0)
    old = _int_value(config, _OLD_CACHE_KEY, None, minimum=0)
    if new is not None and old is not None and new != old:
        raise StreamsConfigError(
            f"'{_CACHE_KEY}' ({new}) and its deprecated name '{_OLD_CACHE_KEY}' ({old}) disagree; set only "
            f"'{_CACHE_KEY}'.")
    return new if new is not None else old


_IDLE_CLOSE_KEY = "streamsdsl.window.idle.close.ms"


def _idle_close_ms(config: Mapping[str, Any]) -> int | None:
    """``streamsdsl.window.idle.close.ms``: the idle close (ms) of every aggregation that emits on
    window close and sets none itself (docs/session-windows.md, *Idle windows*); absent: Kafka's close."""
    raw = config.get(_IDLE_CLOSE_KEY)
    if isinstance(raw, timedelta):
        raw = to_millis(raw, _IDLE_CLOSE_KEY)
    value = _int_value({_IDLE_CLOSE_KEY: raw}, _IDLE_CLOSE_KEY, None, minimum=0)
    if value == 0:
        raise StreamsConfigError(
            f"'{_IDLE_CLOSE_KEY}' must be > 0 ms (got 0): it is how long an aggregation stays without records "
            "before its open windows close. Leave the key out to keep Kafka's close.")
    return value


#: Spark's smallest real-time checkpoint interval (``spark.sql.streaming.realTimeMode.minBatchDuration``'s
#: default), and the default ``commit.interval.ms`` under ``streamsdsl.trigger = real_time``.
REAL_TIME_MIN_INTERVAL_MS = 5000
_REAL_TIME_MIN_CONF = "sql.streaming.realTimeMode.minBatchDuration"


def _trigger(config: Mapping[str, Any], connector: Connector, guarantee: ProcessingGuarantee,
             handler: DeserializationHandler) -> Trigger:
    """``streamsdsl.trigger``, with the settings real-time mode cannot run with refused, naming why."""
    trigger = _enum_value(
        config, "streamsdsl.trigger", Trigger.MICRO_BATCH,
        hint="'micro_batch' (the default) runs a micro-batch every commit.interval.ms, 'real_time' runs Spark's "
        "real-time mode (stateless Column-step topologies on kafka.connector=\"jvm\").",
    )
    if trigger is not Trigger.REAL_TIME:
        return trigger
    why = "'streamsdsl.trigger' = 'real_time' "
    if connector is not Connector.JVM:
        raise StreamsConfigError(
            why + "needs 'kafka.connector' = \"jvm\": Spark's real-time mode reads only with its own Kafka "
            "connector (it refuses the streamsdsl-kafka Python data source, INPUT_STREAM_NOT_SUPPORTED).")
    if guarantee is ProcessingGuarantee.EXACTLY_ONCE_V2:
        raise StreamsConfigError(
            why + "cannot run with 'processing.guarantee' = 'exactly_once_v2': it writes with Spark's Kafka sink, "
            "which is at-least-once (no transactions); use 'at_least_once' or the micro-batch trigger.")
    if handler is not DeserializationHandler.LOG_AND_FAIL:
        raise StreamsConfigError(
            why + "needs 'default.deserialization.exception.handler' = 'log_and_fail': the skipped records of "
            "'log_and_continue' are logged and written by the micro-batch sink, which real-time mode cannot run.")
    if "max.offsets.per.trigger" in config:
        raise StreamsConfigError(
            why + "does not take 'max.offsets.per.trigger': a real-time batch reads every record that arrives "
            "until its checkpoint interval (commit.interval.ms) ends; remove the key.")
    interval = _int_value(config, "commit.interval.ms", REAL_TIME_MIN_INTERVAL_MS, minimum=0) or 0
    if interval < REAL_TIME_MIN_INTERVAL_MS and f"spark.{_REAL_TIME_MIN_CONF}" not in config:
        raise StreamsConfigError(
            why + f"needs 'commit.interval.ms' >= {REAL_TIME_MIN_INTERVAL_MS} (got {interval}): it is the real-time "
            "checkpoint interval (how long each long-running batch reads before its offsets are committed), and "
            f"Spark refuses less than 'spark.{_REAL_TIME_MIN_CONF}' (default {REAL_TIME_MIN_INTERVAL_MS} ms); leave "
            f"the key out for {REAL_TIME_MIN_INTERVAL_MS} ms, or set that Spark setting lower in this configuration too.")
    return trigger


def _operator(config: Mapping[str, Any]) -> Operator:
    return _enum_value(
        config, OPERATOR_KEY, default_operator(),
        hint="'auto' (the default) runs built-in aggregations on the JVM operator when its jar is loaded and on "
        "the Python operator otherwise, 'jvm' requires the JVM operator, 'python' never uses it.",
    )


def _passthrough(config: Mapping[str, Any]) -> dict[str, dict[str, str]]:
    """The prefixed settings routed to ``spark_conf``, ``consumer_conf`` and ``producer_conf``."""
    spark_conf: dict[str, str] = {}
    consumer_conf: dict[str, str] = {}
    producer_conf: dict[str, str] = {}
    for key, value in config.items():
        if key.startswith("spark."):
            spark_conf[key] = str(value)
        elif key.startswith("consumer."):
            consumer_conf[key[len("consumer.") :]] = str(value)
        elif key.startswith("producer."):
            producer_conf[key[len("producer.") :]] = str(value)
        elif key.startswith(SHARED_CLIENT_PREFIXES):
            consumer_conf.setdefault(key, str(value))
            producer_conf.setdefault(key, str(value))
    return {"spark_conf": spark_conf, "consumer_conf": consumer_conf, "producer_conf": producer_conf}


def _enum_field(default: enum.StrEnum) -> Any:
    """An attrs field holding a member of ``default``'s enum (anything else is a TypeError)."""
    return attrs.field(default=default, validator=attrs.validators.instance_of(type(default)))


# -- the configuration ----------------------------------------------------------------------
@attrs.frozen
class StreamsConfig:
    """The validated configuration of a `KafkaStreams` application.

    Build it with `from_mapping`; the keys are Kafka Streams' names.

    Attributes
    ----------
    application_id : str
        ``application.id`` (required): names the checkpoint directory and the Spark query.
    bootstrap_servers : str
        ``bootstrap.servers`` (required): ``host:port[,host:port...]``.
    state_dir : str
        ``state.dir`` (default ``/tmp/streamsdsl``).
    commit_interval_ms : int
        ``commit.interval.ms`` (default 1000): the micro-batch trigger interval. Each
        micro-batch ends with a checkpoint commit, so this is how often progress is committed.
    processing_guarantee : ProcessingGuarantee
        ``processing.guarantee``: ``at_least_once`` (default) or ``exactly_once_v2`` (Kafka
        transactions; ``producer.transaction.timeout.ms`` bounds each write, default 10000).
    max_offsets_per_trigger : int or None
        ``max.offsets.per.trigger``: at most this many offsets per source and micro-batch.
    auto_offset_reset : OffsetReset
        ``auto.offset.reset``: ``earliest`` (default, as in Kafka Streams) or ``latest``;
        where a query without a checkpoint starts.
    task_timeout_ms : int or None
        ``task.timeout.ms``: how long the source waits for an unresponsive broker (or a read
        that makes no progress) before the application fails with
        `streamsdsl.io.errors.KafkaBrokerTimeoutError` (the source option
        ``kafkaConsumer.pollTimeoutMs``; default 120000).
    deserialization_handler : DeserializationHandler
        ``default.deserialization.exception.handler``: ``log_and_fail`` (default) or
        ``log_and_continue`` (Kafka Streams' class names are accepted too).
    dead_letter_topic : str or None
        ``errors.dead.letter.topic`` (alias ``errors.dead.letter.queue.topic.name``): where
        ``log_and_continue`` writes the raw records it skips.
    connector : Connector
        ``kafka.connector``: ``python`` (default, the ``streamsdsl-kafka`` data source) or
        ``jvm`` (Spark's Kafka connector reads the source topics; it must be on the classpath).
        The sink is the ``streamsdsl-kafka`` writer either way.
    operator : streamsdsl.jvm.Operator
        ``streamsdsl.operator``: ``auto`` (default; the ``STREAMSDSL_OPERATOR`` environment variable
        when set), ``jvm`` or ``python``: which operator runs the built-in aggregations (see the
        *Built-in aggregations* docs page).
    ship : Ship
        ``streamsdsl.ship``: ``auto`` (default), ``always`` or ``never``: whether a session
        streamsdsl builds ships streamsdsl to the Python processes Spark starts (docs/deploy.md).
    spark_conf, consumer_conf, producer_conf : dict
        The ``spark.*`` settings, and the librdkafka settings of the source and the sink.
    """

    application_id: str
    bootstrap_servers: str
    state_dir: str = "/tmp/streamsdsl"
    commit_interval_ms: int = 1000
    processing_guarantee: ProcessingGuarantee = _enum_field(ProcessingGuarantee.AT_LEAST_ONCE)
    max_offsets_per_trigger: int | None = None
    auto_offset_reset: OffsetReset = _enum_field(OffsetReset.EARLIEST)
    task_timeout_ms: int | None = None
    deserialization_handler: DeserializationHandler = _enum_field(DeserializationHandler.LOG_AND_FAIL)
    dead_letter_topic: str | None = None
    connector: Connector = _enum_field(Connector.PYTHON)
    operator: Operator = _enum_field(Operator.AUTO)
    spark_conf: dict[str, str] = attrs.field(factory=dict)
    consumer_conf: dict[str, str] = attrs.field(factory=dict)
    producer_conf: dict[str, str] = attrs.field(factory=dict)
    #: ``statestore.cache.max.bytes`` (``None``: a cache, flushed at every micro-batch's commit).
    cache_max_bytes: int | None = None
    #: ``streamsdsl.ship``: whether a session streamsdsl builds ships streamsdsl (`Ship`).
    ship: Ship = _enum_field(Ship.AUTO)
    #: ``streamsdsl.window.idle.close.ms``: idle close of the on-close aggregations (``None``: off).
    idle_close_ms: int | None = None
    #: ``streamsdsl.trigger``: micro-batches (the default) or Spark's real-time mode (`Trigger`).
    trigger_mode: Trigger = _enum_field(Trigger.MICRO_BATCH)
    #: Where a query without a checkpoint starts, per partition (``{topic: {"partition": offset}}``),
    #: instead of ``auto.offset.reset``: set by `streamsdsl.runtime.backfill.Backfill.continue_streaming`
    #: (not a configuration key).
    starting_offsets: dict[str, dict[str, int]] | None = None
    #: A backfill's final state (`ReplayCarry`) the query starts from (set by ``continue_streaming``).
    initial_state: Any = attrs.field(default=None, repr=False, eq=False)

    @property
    def flush(self) -> FlushPolicy:
        """When aggregations forward their store writes: the net change per micro-batch (Kafka's
        cache flushed at commit), or with ``statestore.cache.max.bytes = 0`` every write."""
        return FlushPolicy.PER_RECORD if self.cache_max_bytes is None else FlushPolicy.of_cache_bytes(
            self.cache_max_bytes)

    @classmethod
    def from_mapping(cls, config: Mapping[str, Any]) -> StreamsConfig:
        """Validate a configuration mapping (values may be strings, as in Java properties).

        Raises
        ------
        StreamsConfigError
            Naming the key and how to fix it.

        Examples
        --------
        >>> c = StreamsConfig.from_mapping({"application.id": "wordcount", "bootstrap.servers": "k:9092"})
        >>> c.checkpoint_location
        '/tmp/streamsdsl/wordcount/checkpoint'
        >>> StreamsConfig.from_mapping({"application.id": "a", "bootstrap.servers": "k:9092",
        ...                             "commit.interval": 100})
        Traceback (most recent call last):
        ...
        streamsdsl.runtime.config.StreamsConfigError: unknown configuration key 'commit.interval' (did you mean 'commit.interval.ms'?)...
        """
        if not isinstance(config, Mapping):
            raise StreamsConfigError(
                f"'config' must be a mapping of configuration keys to values (got {type(config).__name__}), "
                "e.g. {'application.id': 'my-app', 'bootstrap.servers': 'localhost:9092'}."
            )
        config = {str(k): v for k, v in config.items()}
        _check_keys(config)
        application_id = _application_id(config)
        bootstrap_servers = _bootstrap_servers(config)
        processing_guarantee = _processing_guarantee(config)
        auto_offset_reset = _enum_value(
            config, "auto.offset.reset", OffsetReset.EARLIEST,
            hint="it applies only when the application starts without a checkpoint.",
        )
        handler = _deserialization_handler(config)
        dead_letter_topic = _dead_letter_topic(config, handler)
        connector = _enum_value(
            config, "kafka.connector", Connector.PYTHON, quote='"',
            hint="\"python\" (the default) reads with the streamsdsl-kafka data source, \"jvm\" with Spark's "
            "Kafka connector (spark-sql-kafka-0-10), which must be on the classpath.",
        )
        trigger = _trigger(config, connector, processing_guarantee, handler)
        return cls(
            application_id=application_id,
            bootstrap_servers=bootstrap_servers,
            state_dir=_str_value(config, "state.dir", "/tmp/streamsdsl") or "/tmp/streamsdsl",
            commit_interval_ms=_int_value(config, "commit.interval.ms", 1000 if trigger is Trigger.MICRO_BATCH
                                          else REAL_TIME_MIN_INTERVAL_MS, minimum=0) or 0,
            processing_guarantee=processing_guarantee,
            max_offsets_per_trigger=_int_value(config, "max.offsets.per.trigger", None, minimum=1),
            auto_offset_reset=auto_offset_reset,
            task_timeout_ms=_int_value(config, "task.timeout.ms", None, minimum=1),
            deserialization_handler=handler,
            dead_letter_topic=dead_letter_topic,
            connector=connector,
            operator=_operator(config),
            **_passthrough(config),
            cache_max_bytes=_cache_max_bytes(config),
            ship=_enum_value(
                config, "streamsdsl.ship", Ship.AUTO,
                hint="'auto' (the default) ships streamsdsl to the Python processes of a cluster's master (spark://, "
                "yarn, k8s://), 'always' to any master's, 'never' to none (its Python has streamsdsl installed).",
            ),
            idle_close_ms=_idle_close_ms(config),
            trigger_mode=trigger,
        )

    # -- derived settings -----------------------------------------------------------------
    @property
    def exactly_once(self) -> bool:
        """``processing.guarantee`` is ``exactly_once_v2``."""
        return self.processing_guarantee is ProcessingGuarantee.EXACTLY_ONCE_V2

    @property
    def app_dir(self) -> str:
        """``state.dir/application.id``: everything the application keeps on disk."""
        return os.path.join(self.state_dir, self.application_id)

    @property
    def checkpoint_location(self) -> str:
        """The Spark checkpoint (offsets, commits, operator state)."""
        return os.path.join(self.app_dir, "checkpoint")

    @property
    def trigger(self) -> dict[str, Any]:
        """``DataStreamWriter.trigger`` arguments: a processing-time trigger every ``commit.interval.ms``,
        or under ``streamsdsl.trigger = real_time`` a real-time trigger with that checkpoint interval.

        >>> StreamsConfig.from_mapping({"application.id": "a", "bootstrap.servers": "k:9092", "kafka.connector": "jvm",
        ...                             "streamsdsl.trigger": "real_time"}).trigger
        {'realTime': '5000 milliseconds'}
        """
        interval = f"{self.commit_interval_ms} milliseconds"
        return {"realTime": interval} if self.trigger_mode is Trigger.REAL_TIME else {"processingTime": interval}

    @property
    def admin_conf(self) -> dict[str, str]:
        """librdkafka settings of an admin client: the brokers and the shared security settings."""
        conf = {"bootstrap.servers": self.bootstrap_servers}
        conf.update({k: v for k, v in self.consumer_conf.items() if k.startswith(SHARED_CLIENT_PREFIXES)})
        return conf

    # -- options of the Kafka readers and writer --------------------------------------------
    def source_options(self) -> dict[str, str]:
        """Options of the ``streamsdsl-kafka`` reader (``subscribe`` is added per source)."""
        opts = {
            "kafka.bootstrap.servers": self.bootstrap_servers,
            "startingOffsets": self.auto_offset_reset.value,
        }
        if self.max_offsets_per_trigger is not None:
            opts["maxOffsetsPerTrigger"] = str(self.max_offsets_per_trigger)
        if self.task_timeout_ms is not None:
            opts["kafkaConsumer.pollTimeoutMs"] = str(self.task_timeout_ms)
        opts.update({f"kafka.{k}": v for k, v in self.consumer_conf.items()})
        return opts

    @staticmethod
    def global_table_options(options: dict[str, str]) -> dict[str, str]:
        """A reader's ``options`` for a global table's topic: from the earliest offset, whatever
        ``auto.offset.reset`` says, and without admission control, so that the first micro-batch
        holds the whole table before the streams are processed (Kafka Streams' global tables,
        bootstrapped from the beginning of their topic)."""
        opts = {k: v for k, v in options.items() if k != "maxOffsetsPerTrigger"}
        opts["startingOffsets"] = "earliest"
        return opts

    def starting_at(self, options: dict[str, str], node: Any) -> dict[str, str]:
        """The reader ``options`` of source ``node`` with its topics' `starting_offsets`, when set
        (each reader is told only the partitions of the topics it reads)."""
        if self.starting_offsets is None:
            return options
        mine = {t: o for t, o in self.starting_offsets.items() if node.reads(t)}
        return {**options, "startingOffsets": json.dumps(mine)} if mine else options

    def jvm_source_options(self) -> dict[str, str]:
        """Options of Spark's JVM ``kafka`` reader (``subscribe`` is added per source).

        The same settings as `source_options`: ``startingOffsets``, ``maxOffsetsPerTrigger``
        and the ``consumer.*`` settings as ``kafka.*`` (here they configure the Java consumer),
        plus ``includeHeaders=true``.
        """
        opts = self.source_options()
        opts["includeHeaders"] = "true"
        return opts

    def sink_options(self) -> dict[str, str]:
        """Options of the ``streamsdsl-kafka`` writer (``topic`` is added per sink)."""
        opts = {"kafka.bootstrap.servers": self.bootstrap_servers}
        opts.update({f"kafka.{k}": v for k, v in self.producer_conf.items()})
        return opts


@attrs.frozen
class DriverConfig:
    """The validated configuration of a `TopologyTestDriver`: the same keys as `StreamsConfig`
    (``application.id`` and ``bootstrap.servers`` optional; unknown keys rejected with a
    "did you mean"), of which the driver uses the deserialization handler, the dead-letter
    topic, ``streamsdsl.operator`` and the ``spark.*`` settings.

    Examples
    --------
    >>> DriverConfig.from_mapping({"default.deserialization.exception.handler": "log_and_continue",
    ...                            "errors.dead.letter.topic": "dlq"}).dead_letter_topic
    'dlq'
    >>> DriverConfig.from_mapping({"default.deserialization.handler": "log_and_continue"})
    Traceback (most recent call last):
    ...
    streamsdsl.runtime.config.StreamsConfigError: unknown configuration key 'default.deserialization.handler' (did you mean 'default.deserialization.exception.handler'?)...
    """

    deserialization_handler: DeserializationHandler = DeserializationHandler.LOG_AND_FAIL
    dead_letter_topic: str | None = None
    spark_conf: dict[str, str] = attrs.field(factory=dict)
    operator: Operator = _enum_field(Operator.AUTO)
    #: ``statestore.cache.max.bytes`` (``None``: Kafka's default, a cache flushed after every record).
    cache_max_bytes: int | None = None
    #: ``application.id`` (what a processor's ``context.application_id()`` returns; Kafka's
    #: driver's default when absent).
    application_id: str = DRIVER_APPLICATION_ID
    #: ``streamsdsl.window.idle.close.ms``: idle close of the on-close aggregations (``None``: off).
    idle_close_ms: int | None = None

    @classmethod
    def from_mapping(cls, config: Mapping[str, Any] | None) -> DriverConfig:
        config = {str(k): v for k, v in (config or {}).items()}
        _check_keys(config)
        handler = _deserialization_handler(config)
        app_id = _application_id(config) if "application.id" in config else DRIVER_APPLICATION_ID
        return cls(handler, _dead_letter_topic(config, handler), _passthrough(config)["spark_conf"], _operator(config),
                   _cache_max_bytes(config), app_id, _idle_close_ms(config))

    @property
    def flush(self) -> FlushPolicy:
        """When the aggregations forward their store writes (the record cache)."""
        return FlushPolicy.PER_RECORD if self.cache_max_bytes is None else FlushPolicy.of_cache_bytes(
            self.cache_max_bytes)
