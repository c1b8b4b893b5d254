"""What `KafkaStreams` asks of Spark: the session it runs on, prepared (`prepare_session`), the
sources its query reads (`raw_source`) and the query itself (`start_query`): the Spark wiring of
`streamsdsl.runtime.app`, which keeps the application's life cycle."""

from __future__ import annotations

import os
import json
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from streamsdsl.runtime.config import Connector, StreamsConfig
from streamsdsl.runtime.jvm_connector import _is_global_table, check_jvm_connector, jvm_raw_source, subscription

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming import StreamingQuery

    from streamsdsl import ir
    from streamsdsl.compiler import CompiledTopology
    from streamsdsl.io.leases import ClientLease
    from streamsdsl.ir.topology import Topology
    from streamsdsl.runtime.kafka_sink import KafkaTopicSink
    from streamsdsl.runtime.metrics import QueryMetrics

__all__ = ["application_session", "prepare_session", "raw_source", "start_query"]

log = logging.getLogger("streamsdsl")


#: The setting `application_session` sizes from the source topics on a cluster's master.
SHUFFLE_PARTITIONS = "spark.sql.shuffle.partitions"


def application_session(config: StreamsConfig, tasks: Callable[[], int | None] | None = None) -> SparkSession:
    """The active session, else a new one with the ``spark.*`` settings of ``config`` (a
    running session is never reconfigured: the settings it does not have are named in a warning).

    A new session on a cluster's master (`streamsdsl.runtime.shipping.is_cluster_master`) whose
    ``config`` leaves ``spark.sql.shuffle.partitions`` out gets ``tasks()`` of them (the partitions of
    the widest source topic: as many stateful tasks as Kafka Streams would run, instead of Spark's
    default of 200 state stores per stateful operator); a checkpoint keeps the number it started
    with (docs/deploy.md#sizing). It ships streamsdsl as ``streamsdsl.ship`` says
    (`streamsdsl.runtime.config.Ship`)."""
    from pyspark.sql import SparkSession

    from streamsdsl.runtime.session import get_session
    from streamsdsl.runtime.shipping import is_cluster_master

    active = SparkSession.getActiveSession()
    ignored = [k for k, v in config.spark_conf.items() if active is not None and active.conf.get(k, None) != v]
    if ignored:
        log.warning(
            "%s: not applied, a SparkSession is already running (streamsdsl does not reconfigure a session "
            "it did not create); set them when the session is built, or pass spark= a configured session.",
            ", ".join(ignored),
        )
    conf = dict(config.spark_conf)
    if (active is None and tasks is not None and SHUFFLE_PARTITIONS not in conf
            and is_cluster_master(conf.get("spark.master") or _submitted_master())):
        partitions = tasks()
        if partitions:
            conf[SHUFFLE_PARTITIONS] = str(partitions)
    return get_session(conf=conf, ship=config.ship.decision)


def _submitted_master() -> str | None:
    """The master ``spark-submit`` gave, when this Python runs under it and it left the shuffle
    partitions out (else ``None``: the submitted settings are the user's)."""
    from streamsdsl.runtime.session import submitted_conf

    submitted = submitted_conf()
    return None if SHUFFLE_PARTITIONS in submitted else submitted.get("spark.master")


def raw_source(spark: SparkSession, config: StreamsConfig, lease: ClientLease | None,
               topology: Topology | None = None) -> Callable[[ir.SourceNode], DataFrame]:
    """Source node → its topics as a streaming DataFrame, read by the configured connector (the
    ``streamsdsl-kafka`` data source with the executors' client ``lease``, or Spark's own); a
    pattern source of the Python one is told the other patterns of ``topology``
    (``otherPatterns``: a topic two of them match fails the query, as in Kafka Streams)."""
    if config.connector is Connector.JVM:
        return jvm_raw_source(spark, config)
    from streamsdsl.io import SOURCE_NAME

    options = config.source_options()
    if lease is not None:
        from streamsdsl.io.leases import LEASE_OPTION

        options[LEASE_OPTION] = lease.path

    def read(node: ir.SourceNode) -> DataFrame:
        opts = config.global_table_options(options) if _is_global_table(node) else config.starting_at(options, node)
        reader = spark.readStream.format(SOURCE_NAME).options(**opts).option(*subscription(node))
        others = [s.pattern.pattern for s in (topology.sources if topology else ()) if s is not node and s.pattern]
        if node.pattern is not None and others:
            reader = reader.option("otherPatterns", json.dumps(others))
        return reader.load()

    return read


def prepare_session(spark: SparkSession, config: StreamsConfig) -> None:
    """Make ``spark`` ready for the application's query: py4j logging at WARNING without duplicate
    tracebacks (also on a session streamsdsl did not build), the ``streamsdsl-kafka`` data source
    registered, and Spark's JVM Kafka connector checked where the config asks for it. On a Spark
    Connect session, what cannot run there is refused first (`streamsdsl.runtime.connect.check_connect`)."""
    from streamsdsl.io import register
    from streamsdsl.runtime.connect import check_connect, is_connect
    from streamsdsl.runtime.session import quiet_py4j

    if is_connect(spark):
        check_connect(config)
    quiet_py4j()
    register(spark)
    if config.connector is Connector.JVM:
        check_jvm_connector(spark)


def start_query(spark: SparkSession, topology: Topology, config: StreamsConfig, lease: ClientLease | None,
                sink: KafkaTopicSink, metrics: QueryMetrics,
                before_start: Callable[[dict[str, Any]], None]) -> tuple[StreamingQuery, CompiledTopology]:
    """Start ``topology``'s streaming query on ``config``'s checkpoint, reading its sources with the
    configured connector (`raw_source`) and writing through ``sink``; ``before_start`` receives the
    compiler's operator report before the query starts (the checkpoint's topology check)."""
    from streamsdsl.runtime.streaming import start_streaming

    query, compiled, _ = start_streaming(
        topology,
        raw_source(spark, config, lease, topology),
        sink,
        checkpoint_location=config.checkpoint_location,
        trigger=config.trigger,
        metrics=metrics,
        query_name=config.application_id,
        deserialization_handler=config.deserialization_handler,
        flush=config.flush,
        operator=config.operator,
        before_start=before_start,
        initial_state=continuation(config),
    )
    return query, compiled


#: The file in a continued backfill's checkpoint that keeps its stream times (`continuation`).
CONTINUATION_FILE = "streamsdsl-backfill-continuation.json"


def continuation(config: StreamsConfig) -> Any:
    """What a query continuing a backfill compiles with (`CompileOptions.carry`): on its first start
    the backfill's final state (``config.initial_state``), recorded in the checkpoint
    (`CONTINUATION_FILE`: the operators' stream times); on a restart from that checkpoint the
    recorded stream times without state (Spark reads an initial state in a query's first batch
    only), so that the plan and the operators' stream-time floors stay those of its first start."""
    import json

    from streamsdsl.compiler.modes import ReplayCarry

    path = os.path.join(config.checkpoint_location, CONTINUATION_FILE)
    if config.initial_state is not None:
        os.makedirs(config.checkpoint_location, exist_ok=True)
        with open(path, "w", encoding="utf-8") as f:
            json.dump({node: list(times) for node, times in config.initial_state.stream_times.items()}, f)
        return config.initial_state
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            return ReplayCarry(stream_times={node: tuple(times) for node, times in json.load(f).items()})
    return None
