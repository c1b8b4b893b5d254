"""The application runner: `KafkaStreams` runs a topology Kafka → Spark → Kafka.

`KafkaStreams` mirrors Kafka Streams' class of the same name. It reads the topology's source
topics with the ``streamsdsl-kafka`` data source (`streamsdsl.io.kafka_source`), or with
Spark's JVM Kafka connector when ``kafka.connector`` is ``"jvm"``, runs the
whole topology as **one** Spark Structured Streaming query, and writes each sink's records
to its topic with the ``streamsdsl-kafka`` batch writer (`streamsdsl.io.kafka_sink`), once
per micro-batch. Offsets and operator state live in a Spark checkpoint under
``state.dir/application.id/checkpoint``: a new `KafkaStreams` with the same
``application.id`` and ``state.dir`` resumes where the previous one stopped.

Delivery is **at-least-once**: a micro-batch that was written but not yet committed to the
checkpoint when the application stopped (a crash, ``kill -9``, a ``close()`` that had to
interrupt a batch) is processed and written again after the restart.

Examples
--------
>>> from streamsdsl import KafkaStreams, StreamsBuilder
>>> builder = StreamsBuilder()
>>> builder.stream("orders").to("orders-copy")
>>> app = KafkaStreams(builder.build(), {
...     "application.id": "copy-orders",
...     "bootstrap.servers": "localhost:9092",
...     "commit.interval.ms": 200,
... })
>>> app.state()
<State.CREATED: 'CREATED'>
>>> app.start()  # doctest: +SKIP
>>> app.process_all_available()  # doctest: +SKIP
>>> app.close()  # doctest: +SKIP
True
"""

from __future__ import annotations

import difflib
import enum
import logging
import os
import re
import shutil
import threading
import time
from collections.abc import Mapping
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import attrs

from streamsdsl.errors import StreamsDslError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming import StreamingQuery

    from streamsdsl import ir
    from streamsdsl.compiler import CompiledSink, CompiledTopology
    from streamsdsl.runtime.streaming import Metrics
    from streamsdsl.ir.topology import Topology

__all__ = [
    "IllegalStateError",
    "KafkaStreams",
    "KafkaTopicSink",
    "MissingTopicError",
    "State",
    "StreamsConfig",
    "StreamsConfigError",
    "StreamsError",
    "jvm_kafka_connector_available",
    "jvm_kafka_package",
]

log = logging.getLogger("streamsdsl")


# -- errors -------------------------------------------------------------------------------
class StreamsConfigError(StreamsDslError, ValueError):
    """A `KafkaStreams` configuration key is missing, unknown or has an invalid value."""


class IllegalStateError(StreamsDslError, RuntimeError):
    """A `KafkaStreams` method was called in a state that does not allow it."""


class MissingTopicError(StreamsDslError, RuntimeError):
    """A topic the topology reads or writes does not exist on the broker."""


class StreamsError(StreamsDslError, RuntimeError):
    """The streaming query failed; the cause is chained (``__cause__``)."""


# -- configuration ------------------------------------------------------------------------
class State(enum.StrEnum):
    """Lifecycle of a `KafkaStreams` instance (Kafka Streams' ``KafkaStreams.State``).

    ``CREATED`` → ``start()`` → ``RUNNING`` → ``close()`` → ``PENDING_SHUTDOWN`` →
    ``NOT_RUNNING``. A query that fails moves to ``ERROR``.
    """

    CREATED = "CREATED"
    RUNNING = "RUNNING"
    PENDING_SHUTDOWN = "PENDING_SHUTDOWN"
    NOT_RUNNING = "NOT_RUNNING"
    ERROR = "ERROR"


AT_LEAST_ONCE = "at_least_once"
_EXACTLY_ONCE = ("exactly_once", "exactly_once_beta", "exactly_once_v2")
_HANDLERS = {
    "log_and_fail": "log_and_fail",
    "logandfailexceptionhandler": "log_and_fail",
    "org.apache.kafka.streams.errors.logandfailexceptionhandler": "log_and_fail",
    "log_and_continue": "log_and_continue",
    "logandcontinueexceptionhandler": "log_and_continue",
    "org.apache.kafka.streams.errors.logandcontinueexceptionhandler": "log_and_continue",
}
_APP_ID = re.compile(r"^[A-Za-z0-9._-]{1,249}$")
#: Configuration keys `StreamsConfig` understands (besides the prefixes below).
KNOWN_KEYS = (
    "application.id",
    "bootstrap.servers",
    "state.dir",
    "commit.interval.ms",
    "processing.guarantee",
    "max.offsets.per.trigger",
    "auto.offset.reset",
    "kafka.broker.compat",
    "default.deserialization.exception.handler",
    "errors.dead.letter.topic",
    "errors.dead.letter.queue.topic.name",
    "kafka.connector",
)
#: Prefixes passed through: ``spark.*`` to the SparkSession, ``consumer.*`` to the source,
#: ``producer.*`` to the sink; ``security.*``, ``sasl.*`` and ``ssl.*`` to every client.
PASSTHROUGH_PREFIXES = ("spark.", "consumer.", "producer.", "security.", "sasl.", "ssl.")
_SHARED_CLIENT_PREFIXES = ("security.", "sasl.", "ssl.")
#: Values of ``kafka.connector``.
CONNECTORS = ("python", "jvm")
#: The class Spark's JVM Kafka connector (``spark-sql-kafka-0-10``) registers format "kafka" with.
JVM_KAFKA_PROVIDER = "org.apache.spark.sql.kafka010.KafkaSourceProvider"


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


@attrs.frozen
class StreamsConfig:
    """The validated configuration of a `KafkaStreams` application.

    Build it with `from_mapping`; the keys are Kafka Streams' names.

    Parameters
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
    processing_guarantee : str
        ``processing.guarantee``: only ``at_least_once``.
    max_offsets_per_trigger : int or None
        ``max.offsets.per.trigger``: at most this many offsets per source and micro-batch.
    auto_offset_reset : str
        ``auto.offset.reset``: ``earliest`` (default, as in Kafka Streams) or ``latest``;
        where a query without a checkpoint starts.
    broker_compat : str
        ``kafka.broker.compat``: ``kafka`` (default) or ``tansu``.
    deserialization_handler : str
        ``default.deserialization.exception.handler``: ``log_and_fail`` (default) or
        ``log_and_continue``.
    dead_letter_topic : str or None
        ``errors.dead.letter.topic`` (alias ``errors.dead.letter.queue.topic.name``): where
        ``log_and_continue`` writes the raw records it skips.
    connector : str
        ``kafka.connector``: ``python`` (default, the ``streamsdsl-kafka`` data source) or
        ``jvm`` (Spark's Kafka connector reads the source topics; it must be on the classpath).
        The sink is the ``streamsdsl-kafka`` writer either way.
    spark_conf, consumer_conf, producer_conf : dict
        The ``spark.*`` settings, and the librdkafka settings of the source and the sink.
    """

    application_id: str
    bootstrap_servers: str
    state_dir: str = "/tmp/streamsdsl"
    commit_interval_ms: int = 1000
    processing_guarantee: str = AT_LEAST_ONCE
    max_offsets_per_trigger: int | None = None
    auto_offset_reset: str = "earliest"
    broker_compat: str = "kafka"
    deserialization_handler: str = "log_and_fail"
    dead_letter_topic: str | None = None
    connector: str = "python"
    spark_conf: dict[str, str] = attrs.field(factory=dict)
    consumer_conf: dict[str, str] = attrs.field(factory=dict)
    producer_conf: dict[str, str] = attrs.field(factory=dict)

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
        streamsdsl.runtime.app.StreamsConfigError: unknown configuration key 'commit.interval' (did you mean 'commit.interval.ms'?)...
        """
        if not isinstance(config, Mapping):
            raise StreamsConfigError(
                f"'config' must be a mapping of configuration keys to values (got {type(config).__name__}), "
                "e.g. {'application.id': 'my-app', 'bootstrap.servers': 'localhost:9092'}."
            )
        config = {str(k): v for k, v in config.items()}
        for key in config:
            if key in KNOWN_KEYS or key.startswith(PASSTHROUGH_PREFIXES):
                continue
            close = difflib.get_close_matches(key, KNOWN_KEYS, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise StreamsConfigError(
                f"unknown configuration key {key!r}{hint}. Known keys: {', '.join(KNOWN_KEYS)}; "
                "librdkafka settings go under 'consumer.' or 'producer.', Spark settings under 'spark.'."
            )

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
        bootstrap = config.get("bootstrap.servers")
        if isinstance(bootstrap, (list, tuple)):
            bootstrap = ",".join(str(b).strip() for b in bootstrap)
        if bootstrap is None or str(bootstrap).strip() == "":
            raise StreamsConfigError(
                "'bootstrap.servers' is required: host:port[,host:port...] of the Kafka brokers, "
                "e.g. {'bootstrap.servers': 'localhost:9092'}."
            )

        guarantee = (_str_value(config, "processing.guarantee", AT_LEAST_ONCE) or AT_LEAST_ONCE).lower()
        if guarantee in _EXACTLY_ONCE:
            raise StreamsConfigError(
                f"'processing.guarantee' = {guarantee!r} is not supported: the Kafka sink writes without "
                "transactions and a micro-batch interrupted before its checkpoint commit is written again "
                "after a restart, so output can contain duplicates. Set 'processing.guarantee' to "
                "'at_least_once' (the default) and make consumers tolerate duplicates (e.g. upsert by key)."
            )
        if guarantee != AT_LEAST_ONCE:
            raise StreamsConfigError(
                f"'processing.guarantee' must be 'at_least_once' (got {config['processing.guarantee']!r})."
            )

        reset = (_str_value(config, "auto.offset.reset", "earliest") or "earliest").lower()
        if reset not in ("earliest", "latest"):
            raise StreamsConfigError(
                f"'auto.offset.reset' must be 'earliest' or 'latest' (got {config['auto.offset.reset']!r}); "
                "it applies only when the application starts without a checkpoint."
            )
        compat = (_str_value(config, "kafka.broker.compat", "kafka") or "kafka").lower()
        if compat not in ("kafka", "tansu"):
            raise StreamsConfigError(
                f"'kafka.broker.compat' must be 'kafka' or 'tansu' (got {config['kafka.broker.compat']!r}); "
                "use 'tansu' only with the Tansu broker (streamsdsl dev-broker without Docker)."
            )
        raw_handler = _str_value(config, "default.deserialization.exception.handler", "log_and_fail") or ""
        handler = _HANDLERS.get(raw_handler.lower())
        if handler is None:
            raise StreamsConfigError(
                "'default.deserialization.exception.handler' must be 'log_and_fail' or 'log_and_continue' "
                f"(got {raw_handler!r})."
            )
        dlq = _str_value(config, "errors.dead.letter.topic", None)
        dlq_alias = _str_value(config, "errors.dead.letter.queue.topic.name", None)
        if dlq and dlq_alias and dlq != dlq_alias:
            raise StreamsConfigError(
                f"'errors.dead.letter.topic' ({dlq!r}) and its alias 'errors.dead.letter.queue.topic.name' "
                f"({dlq_alias!r}) disagree; set only one."
            )
        dlq = dlq or dlq_alias
        if dlq and handler != "log_and_continue":
            raise StreamsConfigError(
                f"'errors.dead.letter.topic' = {dlq!r} needs "
                "'default.deserialization.exception.handler' = 'log_and_continue': with 'log_and_fail' a bad "
                "record stops the application before anything is written."
            )

        connector = (_str_value(config, "kafka.connector", "python") or "python").lower()
        if connector not in CONNECTORS:
            raise StreamsConfigError(
                f"'kafka.connector' must be \"python\" or \"jvm\" (got {config['kafka.connector']!r}); "
                "\"python\" (the default) reads with the streamsdsl-kafka data source, \"jvm\" with Spark's "
                "Kafka connector (spark-sql-kafka-0-10), which must be on the classpath."
            )

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
            elif key.startswith(_SHARED_CLIENT_PREFIXES):
                consumer_conf.setdefault(key, str(value))
                producer_conf.setdefault(key, str(value))

        return cls(
            application_id=app_id,
            bootstrap_servers=str(bootstrap).strip(),
            state_dir=_str_value(config, "state.dir", "/tmp/streamsdsl") or "/tmp/streamsdsl",
            commit_interval_ms=_int_value(config, "commit.interval.ms", 1000, minimum=0) or 0,
            processing_guarantee=guarantee,
            max_offsets_per_trigger=_int_value(config, "max.offsets.per.trigger", None, minimum=1),
            auto_offset_reset=reset,
            broker_compat=compat,
            deserialization_handler=handler,
            dead_letter_topic=dlq,
            connector=connector,
            spark_conf=spark_conf,
            consumer_conf=consumer_conf,
            producer_conf=producer_conf,
        )

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
        """``DataStreamWriter.trigger`` arguments: a processing-time trigger every ``commit.interval.ms``."""
        return {"processingTime": f"{self.commit_interval_ms} milliseconds"}

    def source_options(self) -> dict[str, str]:
        """Options of the ``streamsdsl-kafka`` reader (``subscribe`` is added per source)."""
        opts = {
            "kafka.bootstrap.servers": self.bootstrap_servers,
            "kafka.broker.compat": self.broker_compat,
            "startingOffsets": self.auto_offset_reset,
        }
        if self.max_offsets_per_trigger is not None:
            opts["maxOffsetsPerTrigger"] = str(self.max_offsets_per_trigger)
        opts.update({f"kafka.{k}": v for k, v in self.consumer_conf.items()})
        return opts

    def jvm_source_options(self) -> dict[str, str]:
        """Options of Spark's JVM ``kafka`` reader (``subscribe`` is added per source).

        The same settings as `source_options`: ``startingOffsets``, ``maxOffsetsPerTrigger``
        and the ``consumer.*`` settings as ``kafka.*`` (here they configure the Java consumer),
        plus ``includeHeaders=true``. ``kafka.broker.compat`` has no JVM counterpart.
        """
        opts = {k: v for k, v in self.source_options().items() if k != "kafka.broker.compat"}
        opts["includeHeaders"] = "true"
        return opts

    def sink_options(self) -> dict[str, str]:
        """Options of the ``streamsdsl-kafka`` writer (``topic`` is added per sink)."""
        opts = {"kafka.bootstrap.servers": self.bootstrap_servers}
        opts.update({f"kafka.{k}": v for k, v in self.producer_conf.items()})
        return opts


def _seconds(timeout: float | timedelta | None, name: str = "timeout") -> float | None:
    if timeout is None:
        return None
    if isinstance(timeout, timedelta):
        timeout = timeout.total_seconds()
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout < 0:
        from streamsdsl.errors import InvalidArgumentError

        raise InvalidArgumentError(f"'{name}' must be seconds >= 0 or a timedelta (got {timeout!r}).")
    return float(timeout)


# -- Spark's JVM Kafka connector ------------------------------------------------------------
def _jvm_class_loadable(spark: SparkSession, class_name: str) -> bool | None:
    """Whether ``class_name`` loads in the session's JVM; None if the session has no JVM
    handle to ask (Spark Connect)."""
    try:
        jvm = spark._jvm  # type: ignore[attr-defined]
    except Exception:  # noqa: BLE001 - Spark Connect sessions have no _jvm
        return None
    if jvm is None:
        return None
    loaders: list[Any] = []
    try:
        loader = jvm.java.lang.Thread.currentThread().getContextClassLoader()
        if loader is not None:
            loaders.append(loader)
    except Exception:  # noqa: BLE001 - fall back to the caller's class loader
        pass
    for loader in [*loaders, None]:
        try:
            if loader is None:
                jvm.java.lang.Class.forName(class_name)
            else:
                jvm.java.lang.Class.forName(class_name, False, loader)
            return True
        except Exception:  # noqa: BLE001 - Py4JJavaError(ClassNotFoundException) and the like
            continue
    return False


def jvm_kafka_connector_available(spark: SparkSession) -> bool:
    """True if Spark's JVM Kafka connector (``spark-sql-kafka-0-10``) is on the session's classpath.

    Checks that ``org.apache.spark.sql.kafka010.KafkaSourceProvider`` loads in the session's
    JVM (False when it does not, or when the session has no JVM handle, as with Spark Connect).
    """
    return _jvm_class_loadable(spark, JVM_KAFKA_PROVIDER) is True


def jvm_kafka_package(spark: SparkSession) -> str:
    """The Maven coordinates of the JVM Kafka connector matching the session's Spark and Scala
    versions, e.g. ``org.apache.spark:spark-sql-kafka-0-10_2.13:4.3.0``."""
    scala = "2.13"
    try:
        full = str(spark._jvm.scala.util.Properties.versionNumberString())  # type: ignore[attr-defined]
        scala = ".".join(full.split(".")[:2]) or scala
    except Exception:  # noqa: BLE001 - Spark 4 is built for Scala 2.13 only
        pass
    return f"org.apache.spark:spark-sql-kafka-0-10_{scala}:{spark.version}"


# -- the sink -----------------------------------------------------------------------------
class KafkaTopicSink:
    """A `streamsdsl.runtime.BatchSink` writing each sink's rows to its Kafka topic.

    Every micro-batch, each sink's rows are produced with the ``streamsdsl-kafka`` batch
    writer (idempotent producer, ``acks=all``); the write returns only when the broker
    acknowledged every record, before the micro-batch commits. Records skipped by the
    ``log_and_continue`` handler are logged and, when a dead-letter topic is configured,
    written to it as the raw record plus KIP-1034 error headers.

    Parameters
    ----------
    config : StreamsConfig
        Supplies the broker, the producer settings and the dead-letter topic.
    """

    def __init__(self, config: StreamsConfig) -> None:
        self._config = config
        self._options = config.sink_options()
        self._lock = threading.Lock()
        #: Records written to sink topics: in total, and per micro-batch not yet logged.
        self.emitted_total = 0
        self.emitted: dict[int, int] = {}
        self.dead_letters = 0
        #: ``dropped-records-total`` as it stood when each batch wrote (for the progress log).
        self.dropped_at: dict[int, float] = {}
        self.metrics: Metrics | None = None

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
            if self.metrics is not None:
                self.dropped_at[batch_id] = float(self.metrics.dropped)

    def write_dead_letters(self, rows: DataFrame, batch_id: int) -> None:
        """Log the records ``log_and_continue`` skipped; write them to the dead-letter topic.

        ``rows`` are shaped by `streamsdsl.runtime.dead_letter_rows`: the raw key, value,
        timestamp and headers (plus the error headers) and the source coordinates.
        """
        skipped = rows.select("source_topic", "source_partition", "source_offset").collect()
        for r in skipped[:10]:
            log.warning(
                "Skipped a record that cannot be deserialized (default.deserialization.exception.handler="
                "log_and_continue): topic %s partition %s offset %s",
                r["source_topic"], r["source_partition"], r["source_offset"],
            )
        if len(skipped) > 10:
            log.warning("... and %d more skipped record(s) in micro-batch %d", len(skipped) - 10, batch_id)
        dlq = self._config.dead_letter_topic
        if dlq:
            n = self._write(rows, dlq)
            with self._lock:
                self.dead_letters += n


# -- the application ----------------------------------------------------------------------
class _ProgressListener:
    """Forwards progress events of one query (by name) to `KafkaStreams._account`."""

    @staticmethod
    def create(app: KafkaStreams) -> Any:
        from pyspark.sql.streaming import StreamingQueryListener

        class Listener(StreamingQueryListener):
            def onQueryStarted(self, event: Any) -> None:
                pass

            def onQueryProgress(self, event: Any) -> None:
                try:
                    if event.progress.name == app.config.application_id:
                        app._account(event.progress)
                except Exception:  # noqa: BLE001 - never let logging break the query
                    log.debug("progress listener failed", exc_info=True)

            def onQueryIdle(self, event: Any) -> None:
                pass

            def onQueryTerminated(self, event: Any) -> None:
                pass

        return Listener()


class KafkaStreams:
    """Run a topology against Kafka as one Spark streaming query (Kafka Streams' ``KafkaStreams``).

    Parameters
    ----------
    topology : Topology
        From ``StreamsBuilder.build()``.
    config : mapping
        Configuration keys (see `StreamsConfig` and the docs page *Kafka in and out*):
        ``application.id`` and ``bootstrap.servers`` are required.
    spark : SparkSession, optional
        The session to run on; by default `streamsdsl.runtime.session.get_session` with the
        ``spark.*`` settings of ``config``.

    Raises
    ------
    StreamsConfigError
        If a configuration key is missing, unknown or invalid.

    Examples
    --------
    >>> from streamsdsl import StreamsBuilder
    >>> builder = StreamsBuilder()
    >>> builder.stream("in").to("out")
    >>> KafkaStreams(builder.build(), {"bootstrap.servers": "localhost:9092"})
    Traceback (most recent call last):
    ...
    streamsdsl.runtime.app.StreamsConfigError: 'application.id' is required: ...
    >>> KafkaStreams(builder.build(), {"application.id": "copy", "bootstrap.servers": "localhost:9092",
    ...                                "processing.guarantee": "exactly_once_v2"})
    Traceback (most recent call last):
    ...
    streamsdsl.runtime.app.StreamsConfigError: 'processing.guarantee' = 'exactly_once_v2' is not supported: ...
    """

    State = State

    def __init__(self, topology: Topology, config: Mapping[str, Any], *, spark: SparkSession | None = None) -> None:
        from streamsdsl.errors import InvalidTypeError
        from streamsdsl.ir.topology import Topology as _Topology

        if not isinstance(topology, _Topology):
            raise InvalidTypeError(
                f"'topology' must be a Topology from StreamsBuilder.build() (got {type(topology).__name__})."
            )
        if not topology.sinks:
            raise StreamsConfigError("the topology has no sink: add .to(topic) somewhere to run it.") from None
        self.topology = topology
        self.config = StreamsConfig.from_mapping(config)
        self._spark = spark
        self._state = State.CREATED
        self._lock = threading.RLock()
        self._query: StreamingQuery | None = None
        self._compiled: CompiledTopology | None = None
        self._metrics: Metrics | None = None
        self._sink: KafkaTopicSink | None = None
        self._listener: Any = None
        self._last_batch = -1
        self._progress_lock = threading.Lock()
        self._last_dropped = 0.0
        self._error: BaseException | None = None

    def __repr__(self) -> str:
        return f"KafkaStreams(application.id={self.config.application_id!r}, state={self.state().value})"

    def __enter__(self) -> KafkaStreams:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # -- lifecycle --------------------------------------------------------------------------
    def start(self) -> None:
        """Start the streaming query; resumes from the checkpoint when there is one.

        Raises
        ------
        IllegalStateError
            If called more than once (create a new `KafkaStreams` to restart).
        MissingTopicError
            If a source, sink or dead-letter topic does not exist.
        """
        from streamsdsl.io import register
        from streamsdsl.runtime.streaming import Metrics, start_streaming

        with self._lock:
            if self._state is not State.CREATED:
                raise IllegalStateError(
                    f"start() can only be called once (state is {self._state.value}); to restart, create a new "
                    f"KafkaStreams with the same 'application.id' ({self.config.application_id!r}): it resumes "
                    "from the checkpoint."
                )
            spark = self._session()
            register(spark)
            if self.config.connector == "jvm":
                self._check_jvm_connector(spark)
            self._check_topics()
            os.makedirs(self.config.app_dir, exist_ok=True)
            self._metrics = Metrics()
            self._sink = KafkaTopicSink(self.config)
            self._sink.metrics = self._metrics
            self._listener = _ProgressListener.create(self)
            spark.streams.addListener(self._listener)
            resumed = os.path.isdir(os.path.join(self.config.checkpoint_location, "commits"))
            try:
                self._query, self._compiled, _ = start_streaming(
                    self.topology,
                    self._raw_source(spark),
                    self._sink,
                    checkpoint_location=self.config.checkpoint_location,
                    trigger=self.config.trigger,
                    metrics=self._metrics,
                    query_name=self.config.application_id,
                    deserialization_handler=self.config.deserialization_handler,
                )
            except BaseException:
                self._state = State.ERROR
                self._remove_listener()
                raise
            self._state = State.RUNNING
        ui = spark.sparkContext.uiWebUrl
        log.info(
            "KafkaStreams %r started (%s checkpoint %s); reading %s, writing %s; Spark UI: %s",
            self.config.application_id,
            "resuming from" if resumed else "new",
            self.config.checkpoint_location,
            ", ".join(self.topology.source_topics)
            + (" with Spark's JVM Kafka connector" if self.config.connector == "jvm" else ""),
            ", ".join(self.topology.sink_topics),
            ui or "disabled (spark.ui.enabled=false)",
        )

    def close(self, timeout: float | timedelta | None = None) -> bool:
        """Stop the application: let a running micro-batch finish, then stop the query.

        Parameters
        ----------
        timeout : float or timedelta, optional
            Seconds to wait; ``None`` waits until the query has stopped.

        Returns
        -------
        bool
            True if the query stopped within ``timeout`` (Kafka Streams' ``close(Duration)``).
        """
        seconds = _seconds(timeout)
        deadline = None if seconds is None else time.monotonic() + seconds
        with self._lock:
            if self._state is State.CREATED:
                self._state = State.NOT_RUNNING
                return True
            query = self._query
            if query is None or self._state in (State.NOT_RUNNING,):
                return True
            if self._state is State.RUNNING:
                self._state = State.PENDING_SHUTDOWN
        # A micro-batch interrupted half-way is replayed after a restart (duplicates): wait for
        # the running trigger to finish first, but only that one: with a backlog the next trigger
        # starts at once, and waiting for an idle moment would drain the whole backlog.
        running = self._completed_batch(query) + 1
        while query.isActive and query.status.get("isTriggerActive") and self._completed_batch(query) < running:
            if deadline is not None and time.monotonic() >= deadline:
                break
            time.sleep(0.02)
        stopper = threading.Thread(target=self._stop_query, args=(query,), name="streamsdsl-close", daemon=True)
        stopper.start()
        stopper.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
        if stopper.is_alive():
            return False
        return True

    @staticmethod
    def _completed_batch(query: StreamingQuery) -> int:
        """The id of the last micro-batch the query completed (-1 if none yet)."""
        try:
            progress = query.lastProgress
        except Exception:  # noqa: BLE001 - the session may be gone
            return -1
        return -1 if progress is None else int(progress.batchId)

    def _stop_query(self, query: StreamingQuery) -> None:
        try:
            query.stop()
        except Exception as exc:  # noqa: BLE001 - recorded; state becomes ERROR
            self._error = exc
        self._account_recent()
        failed = self._error is not None or query.exception() is not None
        with self._lock:
            self._state = State.ERROR if failed else State.NOT_RUNNING
            self._remove_listener()
        log.info("KafkaStreams %r stopped (%s)", self.config.application_id, self._state.value)

    def await_termination(self, timeout: float | timedelta | None = None) -> bool:
        """Wait until the query stops (``close()`` from another thread, or a failure).

        Returns
        -------
        bool
            True if the query has terminated, False if ``timeout`` seconds passed first.

        Raises
        ------
        StreamsError
            If the query failed.
        """
        query = self._require_started("await_termination")
        seconds = _seconds(timeout)
        try:
            if seconds is None:
                query.awaitTermination()
                return True
            return bool(query.awaitTermination(seconds))
        except Exception as exc:
            raise self._failure(exc) from exc

    def process_all_available(self) -> None:
        """Block until every record available in the source topics when called is processed.

        Also waits for the no-data micro-batch in which Spark fires the timers of windows the
        last batch closed. Meant for tests and examples; with an unbounded input it may not
        return.

        Raises
        ------
        IllegalStateError
            If the application is not running.
        StreamsError
            If the query failed (for example a record ``log_and_fail`` could not deserialize;
            the message names topic, partition and offset).
        """
        query = self._require_started("process_all_available")
        if not query.isActive and query.exception() is None:
            raise IllegalStateError(
                f"process_all_available() needs a running application (state is {self.state().value})."
            )
        try:
            query.processAllAvailable()
        except Exception as exc:
            raise self._failure(exc) from exc
        self._account_recent()

    def state(self) -> State:
        """The current `State` (``ERROR`` as soon as the query has failed)."""
        with self._lock:
            query = self._query
            if self._state in (State.RUNNING, State.PENDING_SHUTDOWN) and query is not None and not query.isActive:
                if query.exception() is not None:
                    self._state = State.ERROR
                    self._remove_listener()
            return self._state

    def metrics(self) -> dict[str, float]:
        """Application metrics (KIP-825 names where Kafka Streams has one).

        Returns
        -------
        dict of str to float
            ``dropped-records-total`` (late records and, with ``log_and_continue``, records
            that could not be deserialized), ``emit-final-records-total``,
            ``emit-final-latency-max``, ``emit-final-latency-avg``, ``input-records-total``,
            ``batches-total``, ``output-records-total`` (records written to sink topics) and
            ``dead-letter-records-total``.
        """
        if self._metrics is None:
            from streamsdsl.runtime.streaming import Metrics

            out = Metrics().snapshot()
        else:
            self._account_recent()
            out = self._metrics.snapshot()
        sink = self._sink
        out["output-records-total"] = float(sink.emitted_total) if sink else 0.0
        out["dead-letter-records-total"] = float(sink.dead_letters) if sink else 0.0
        return out

    def clean_up(self) -> None:
        """Delete ``state.dir/application.id`` (checkpoint and state): the next start begins afresh.

        Raises
        ------
        IllegalStateError
            If the application is running.
        """
        with self._lock:
            if self._state in (State.RUNNING, State.PENDING_SHUTDOWN):
                raise IllegalStateError("clean_up() needs a stopped application: call close() first.")
        shutil.rmtree(self.config.app_dir, ignore_errors=True)

    @property
    def query(self) -> StreamingQuery | None:
        """The underlying Spark `StreamingQuery` (None before `start`)."""
        return self._query

    # -- internals --------------------------------------------------------------------------
    def _session(self) -> SparkSession:
        from pyspark.sql import SparkSession

        from streamsdsl.runtime.session import get_session

        if self._spark is not None:
            return self._spark
        active = SparkSession.getActiveSession()
        spark = get_session(conf=self.config.spark_conf)
        if active is not None:
            for key, value in self.config.spark_conf.items():
                if spark.conf.get(key, None) == value:
                    continue
                try:
                    spark.conf.set(key, value)
                except Exception:  # noqa: BLE001 - static settings cannot change on a live session
                    log.warning(
                        "%s=%s is ignored: the SparkSession was already running and the setting cannot change "
                        "now; set it before the session starts (or with spark-submit --conf).", key, value,
                    )
        self._spark = spark
        return spark

    def _check_jvm_connector(self, spark: SparkSession) -> None:
        """Fail clearly when ``kafka.connector = "jvm"`` but the connector is not on the classpath."""
        if _jvm_class_loadable(spark, JVM_KAFKA_PROVIDER) is not False:
            return  # loadable, or cannot tell (Spark Connect): Spark reports it at load() if missing
        package = jvm_kafka_package(spark)
        raise StreamsConfigError(
            f"'kafka.connector' = \"jvm\" needs Spark's JVM Kafka connector, but {JVM_KAFKA_PROVIDER} is not on "
            f"the classpath of this SparkSession. Add the package {package} before the session starts: "
            f"{{'spark.jars.packages': '{package}'}} in the KafkaStreams config (Spark downloads it and its "
            f"dependencies from Maven Central when the session starts), spark-submit --packages {package}, "
            "or the jars (with kafka-clients, spark-token-provider-kafka-0-10 and commons-pool2) in 'spark.jars'. "
            "Or leave 'kafka.connector' at \"python\" (the default), which needs no jar."
        )

    def _raw_source(self, spark: SparkSession) -> Any:
        from streamsdsl.io import SOURCE_NAME

        if self.config.connector == "jvm":
            return self._jvm_raw_source(spark)
        options = self.config.source_options()

        def raw_source(node: ir.SourceNode) -> DataFrame:
            return (
                spark.readStream.format(SOURCE_NAME).options(**options).option("subscribe", ",".join(node.topics)).load()
            )

        return raw_source

    def _jvm_raw_source(self, spark: SparkSession) -> Any:
        """Source topics through Spark's JVM connector, mapped to `RAW_RECORD_DDL`."""
        from pyspark.sql import functions as F

        options = self.config.jvm_source_options()
        if self.config.broker_compat == "tansu":
            log.warning(
                "'kafka.connector' = \"jvm\" with 'kafka.broker.compat' = \"tansu\": Spark's JVM connector trusts the "
                "high watermark, which Tansu can understate (the base offset of the last record batch + 1), so the "
                "tail of a partition may be read only when more records arrive. Produce single-record batches "
                "(linger.ms=0) or use 'kafka.connector' = \"python\" with Tansu."
            )

        def raw_source(node: ir.SourceNode) -> DataFrame:
            df = spark.readStream.format("kafka").options(**options).option("subscribe", ",".join(node.topics)).load()
            return df.select(
                F.col("key").cast("binary").alias("key"),
                F.col("value").cast("binary").alias("value"),
                F.col("topic").cast("string").alias("topic"),
                F.col("partition").cast("int").alias("partition"),
                F.col("offset").cast("long").alias("offset"),
                F.unix_millis(F.col("timestamp")).alias("timestamp"),
                F.col("headers"),
            )

        return raw_source

    def _check_topics(self) -> None:
        from confluent_kafka.admin import AdminClient

        conf = {"bootstrap.servers": self.config.bootstrap_servers}
        conf.update({k: v for k, v in self.config.consumer_conf.items() if k.startswith(_SHARED_CLIENT_PREFIXES)})
        try:
            meta = AdminClient(conf).list_topics(timeout=30)
        except Exception as exc:
            raise StreamsError(
                f"cannot reach the brokers at 'bootstrap.servers' = {self.config.bootstrap_servers!r}: {exc}"
            ) from exc
        existing = {name for name, t in meta.topics.items() if t.error is None}
        needed = [("source", t) for t in self.topology.source_topics] + [("sink", t) for t in self.topology.sink_topics]
        if self.config.dead_letter_topic:
            needed.append(("dead-letter", self.config.dead_letter_topic))
        missing = [(role, t) for role, t in needed if t not in existing]
        if missing:
            listed = ", ".join(f"{t!r} ({role})" for role, t in missing)
            raise MissingTopicError(
                f"topic(s) {listed} do not exist on {self.config.bootstrap_servers}; create them first, e.g. "
                f"kafka-topics.sh --create --topic {missing[0][1]} --partitions 3 (the application does not "
                "create topics)."
            )

    def _require_started(self, what: str) -> StreamingQuery:
        if self._query is None:
            raise IllegalStateError(f"{what}() needs a started application: call start() first.")
        return self._query

    def _failure(self, exc: BaseException) -> StreamsError:
        with self._lock:
            self._state = State.ERROR
            self._remove_listener()
        text = str(exc)
        match = re.search(r"Serdes\.\w+\(\) cannot deserialize the record [^\n]*?Consumed\.with_serdes\)\.", text)
        detail = match.group(0) if match else text.strip().splitlines()[0] if text.strip() else type(exc).__name__
        return StreamsError(f"KafkaStreams {self.config.application_id!r} failed: {detail}")

    def _remove_listener(self) -> None:
        if self._listener is not None and self._spark is not None:
            try:
                self._spark.streams.removeListener(self._listener)
            except Exception:  # noqa: BLE001 - the session may already be stopped
                pass
            self._listener = None

    def _account_recent(self) -> None:
        query = self._query
        if query is None:
            return
        try:
            recent = query.recentProgress
        except Exception:  # noqa: BLE001 - the session may be gone
            return
        for progress in recent:
            self._account(progress)

    def _account(self, progress: Any) -> None:
        """Count one micro-batch's progress once, and log it."""
        batch_id = progress.batchId
        with self._progress_lock:
            if batch_id <= self._last_batch:
                return
            self._last_batch = batch_id
            input_rows = int(progress.numInputRows or 0)
            if self._metrics is not None:
                with self._metrics._lock:
                    self._metrics.input_rows += input_rows
            sink = self._sink
            emitted = sink.emitted.pop(batch_id, 0) if sink else 0
            dropped_total = sink.dropped_at.pop(batch_id, self._last_dropped) if sink else self._last_dropped
            dropped = int(dropped_total - self._last_dropped)
            self._last_dropped = max(self._last_dropped, dropped_total)
            ops = progress.stateOperators or []
            state_rows = sum(int(op.numRowsTotal or 0) for op in ops)
            dropped += sum(int(op.numRowsDroppedByWatermark or 0) for op in ops)
            rate = progress.processedRowsPerSecond or 0.0
        log.info(
            "%s batch %d: %d input rows (%.0f rows/s), %d state rows, %d dropped, %d emitted, %d ms",
            self.config.application_id, batch_id, input_rows, rate, state_rows, dropped, emitted,
            progress.batchDuration or 0,
        )
