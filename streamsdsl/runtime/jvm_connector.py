"""Spark's JVM Kafka connector (``spark-sql-kafka-0-10``) as the source of `KafkaStreams`.

With ``kafka.connector = "jvm"`` the source topics are read by Spark's own Kafka connector
instead of the ``streamsdsl-kafka`` data source. This module tells whether the connector is
on a session's classpath, names the Maven package that provides it, resolves that package into
the user's cache (`resolve_connector`, the command `RESOLVE_CONNECTOR_COMMAND`, which ``make
install`` runs; `streamsdsl.maven`), lists the cached jars a session loads (`connector_jars`: the
sessions streamsdsl builds or configures add them to ``spark.jars``), and builds the raw source
that reads a topology's source topics with it. pyspark is imported lazily.

The connector's version is the installed PySpark's: Spark's connector is built against one
Spark release's internals.

Examples
--------
A Spark Connect session has no JVM handle to ask, so the connector is reported missing,
`check_jvm_connector` leaves the verdict to Spark, and the package defaults to Scala 2.13:

>>> class ConnectSession:
...     version = "4.1.0"
>>> jvm_kafka_connector_available(ConnectSession())
False
>>> check_jvm_connector(ConnectSession())
>>> jvm_kafka_package(ConnectSession())
'org.apache.spark:spark-sql-kafka-0-10_2.13:4.1.0'
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from streamsdsl import maven
from streamsdsl.errors import StreamsDslError
from streamsdsl.runtime.config import StreamsConfig, StreamsConfigError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from streamsdsl import ir

__all__ = [
    "JVM_KAFKA_PROVIDER",
    "RESOLVE_CONNECTOR_COMMAND",
    "ConnectorJarsMissingError",
    "connector_jars",
    "resolve_connector",
    "check_jvm_connector",
    "jvm_kafka_connector_available",
    "jvm_kafka_package",
    "jvm_raw_source",
    "subscription",
]

#: The class Spark's JVM Kafka connector (``spark-sql-kafka-0-10``) registers format "kafka" with.
JVM_KAFKA_PROVIDER = "org.apache.spark.sql.kafka010.KafkaSourceProvider"
#: The command that resolves the connector into the user's cache (``make install`` runs it).
RESOLVE_CONNECTOR_COMMAND = "streamsdsl kafka-connector"
#: Spark 4 is built for Scala 2.13 only.
_SCALA = "2.13"


class ConnectorJarsMissingError(StreamsDslError, RuntimeError):
    """``mvn`` could not resolve Spark's Kafka connector for the installed PySpark."""


def _pyspark_version() -> str:
    from pyspark.version import __version__

    return str(__version__)


def _connector_artifact(spark_version: str) -> str:
    return f"org.apache.spark:spark-sql-kafka-0-10_{_SCALA}:{spark_version}"


def _connector_dir(spark_version: str) -> Path:
    return maven.cache_dir() / f"spark-sql-kafka-0-10_{_SCALA}-{spark_version}"


def resolve_connector(spark_version: str | None = None) -> Path:
    """Resolve ``spark-sql-kafka-0-10`` for ``spark_version`` (default: the installed PySpark's)
    and its runtime dependencies into the user's cache; return the directory. Nothing to do when
    it is there.

    Raises
    ------
    ConnectorJarsMissingError
        When ``mvn`` is missing or fails, e.g. Maven Central does not serve that version.
    """
    version = spark_version or _pyspark_version()
    return maven.resolve([_connector_artifact(version)], _connector_dir(version), error=ConnectorJarsMissingError,
                         what=f"Spark's Kafka connector for Spark {version}")


_VERSIONED_JAR = re.compile(r"^(?P<name>.+?)-\d+(?:\.\d+)+(?:[-.][A-Za-z0-9_]+)*\.jar$")


def _artifact_name(jar: str) -> str:
    """``kafka-clients-3.9.2.jar`` → ``kafka-clients``."""
    match = _VERSIONED_JAR.match(jar)
    return match.group("name") if match else jar


def connector_jars(spark_version: str | None = None) -> list[str]:
    """The cached connector's jars a session of ``spark_version`` (default: the installed PySpark)
    loads, or ``[]`` when `resolve_connector` has not run: the connector and the dependencies
    Spark does not ship itself (a jar whose artifact is in PySpark's ``jars`` directory, in any
    version, is left out, as ``spark-submit --packages`` leaves Spark's own modules out)."""
    version = spark_version or _pyspark_version()
    directory = _connector_dir(version)
    if not directory.is_dir():
        return []
    import pyspark

    spark_jars = Path(pyspark.__file__).parent / "jars"
    shipped = {_artifact_name(j) for j in os.listdir(spark_jars)} if spark_jars.is_dir() else set()
    return sorted(str(directory / j) for j in os.listdir(directory)
                  if j.endswith(".jar") and _artifact_name(j) not in shipped)


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
    versions, e.g. ``org.apache.spark:spark-sql-kafka-0-10_2.13:4.2.0``."""
    scala = "2.13"
    try:
        full = str(spark._jvm.scala.util.Properties.versionNumberString())  # type: ignore[attr-defined]
        scala = ".".join(full.split(".")[:2]) or scala
    except Exception:  # noqa: BLE001 - Spark 4 is built for Scala 2.13 only
        pass
    return f"org.apache.spark:spark-sql-kafka-0-10_{scala}:{spark.version}"


def check_jvm_connector(spark: SparkSession) -> None:
    """Fail clearly when ``kafka.connector = "jvm"`` but the connector is not on the classpath.

    Raises
    ------
    StreamsConfigError
        Naming the Maven package for the session's Spark version and how to add it. When the
        session cannot tell (Spark Connect) nothing is raised: Spark reports a missing
        connector when the source loads.
    """
    if _jvm_class_loadable(spark, JVM_KAFKA_PROVIDER) is not False:
        return
    package = jvm_kafka_package(spark)
    raise StreamsConfigError(
        f"'kafka.connector' = \"jvm\" needs Spark's JVM Kafka connector, but {JVM_KAFKA_PROVIDER} is not on "
        f"the classpath of this SparkSession. Run `{RESOLVE_CONNECTOR_COMMAND}` once (make install does): it "
        "resolves the connector from Maven Central into the user's cache, and every session streamsdsl builds "
        "or configures (configure_spark) after that loads it. Or add the package "
        f"{package} before the session starts: "
        f"{{'spark.jars.packages': '{package}'}} in the KafkaStreams config (Spark downloads it and its "
        f"dependencies from Maven Central when the session starts), spark-submit --packages {package}, "
        "or the jars (with kafka-clients, spark-token-provider-kafka-0-10 and commons-pool2) in 'spark.jars'. "
        "Or leave 'kafka.connector' at \"python\" (the default), which needs no jar."
    )


def subscription(node: ir.SourceNode, *, jvm: bool = False) -> tuple[str, str]:
    """The reader option that subscribes a Kafka connector (both take Spark's option names) to
    ``node``'s topics: ``("subscribe", "a,b")``, or ``("subscribePattern", pattern)`` for a
    pattern source. For Spark's connector (``jvm``) the pattern is anchored, ``^(?:...)$``: it
    compiles the pattern as a Java regular expression and, listing topics with its admin client
    (Spark's default offset reader), keeps those where it is *found* (``Regex.findFirstIn``), not
    those it matches in full as Kafka's consumer does; anchored, both mean Kafka's full match.
    The Python source matches in full itself (Python refuses ``(?i)`` after an anchor)."""
    if node.pattern is not None:
        return "subscribePattern", f"^(?:{node.pattern.pattern})$" if jvm else node.pattern.pattern
    return "subscribe", ",".join(node.topics)


def jvm_raw_source(spark: SparkSession, config: StreamsConfig) -> Callable[[ir.SourceNode], DataFrame]:
    """The raw source of a topology read by Spark's JVM connector, mapped to `RAW_RECORD_DDL`.

    Parameters
    ----------
    spark : SparkSession
        The session the query runs on (with the connector on its classpath).
    config : StreamsConfig
        Supplies `StreamsConfig.jvm_source_options`.

    Returns
    -------
    callable
        Source node → streaming DataFrame of its topics (``key``, ``value``, ``topic``,
        ``partition``, ``offset``, ``timestamp`` in ms, ``headers``).
    """
    from pyspark.sql import functions as F

    options = config.jvm_source_options()

    def raw_source(node: ir.SourceNode) -> DataFrame:
        opts = config.global_table_options(options) if _is_global_table(node) else config.starting_at(options, node)
        df = spark.readStream.format("kafka").options(**opts).option(*subscription(node, jvm=True)).load()
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


def _is_global_table(node: ir.SourceNode) -> bool:
    """Whether ``node`` reads a global table (its reader: `StreamsConfig.global_table_options`)."""
    from streamsdsl.ir import GlobalTableSourceNode

    return isinstance(node, GlobalTableSourceNode)
