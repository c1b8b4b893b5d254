"""What `KafkaStreams` asks of Spark: the session it runs on and the sources its query reads
(the Spark wiring of `streamsdsl.runtime.app`, which keeps the application's life cycle)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from streamsdsl.runtime.config import Connector, StreamsConfig
from streamsdsl.runtime.jvm_connector import jvm_raw_source

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from streamsdsl import ir
    from streamsdsl.io.leases import ClientLease

__all__ = ["application_session", "raw_source"]

log = logging.getLogger("streamsdsl")


def application_session(config: StreamsConfig) -> SparkSession:
    """The active session, else a new local one with the ``spark.*`` settings of ``config`` (a
    running session is never reconfigured: the settings it does not have are named in a warning)."""
    from pyspark.sql import SparkSession

    from streamsdsl.runtime.session import get_session

    active = SparkSession.getActiveSession()
    ignored = [k for k, v in config.spark_conf.items() if active is not None and active.conf.get(k, None) != v]
    if ignored:
        log.warning(
            "%s: not applied, a SparkSession is already running (streamsdsl does not reconfigure a session "
            "it did not create); set them when the session is built, or pass spark= a configured session.",
            ", ".join(ignored),
        )
    return get_session(conf=config.spark_conf)


def raw_source(spark: SparkSession, config: StreamsConfig,
               lease: ClientLease | None) -> Callable[[ir.SourceNode], DataFrame]:
    """Source node → its topics as a streaming DataFrame, read by the configured connector (the
    ``streamsdsl-kafka`` data source with the executors' client ``lease``, or Spark's own)."""
    if config.connector is Connector.JVM:
        return jvm_raw_source(spark, config)
    from streamsdsl.io import SOURCE_NAME

    options = config.source_options()
    if lease is not None:
        from streamsdsl.io.leases import LEASE_OPTION

        options[LEASE_OPTION] = lease.path

    def read(node: ir.SourceNode) -> DataFrame:
        return spark.readStream.format(SOURCE_NAME).options(**options).option("subscribe", ",".join(node.topics)).load()

    return read
