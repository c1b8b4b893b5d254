"""The SparkSession streamsdsl runs on.

streamsdsl never reconfigures a session it did not create. `get_session` returns the active
session, or — only when there is none — builds a local one with the settings streamsdsl needs
(the `TopologyTestDriver` and `KafkaStreams` call it when no ``spark=`` is given).
`require_state_store` checks, before a stateful topology runs, that a session has the state
store ``transformWithState`` needs, and says how to set it if not.
"""

from __future__ import annotations

import os
import sys
import threading
from typing import TYPE_CHECKING, Any

from streamsdsl.errors import StreamsDslError
from streamsdsl.jvm import ensure_built, jar_path

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["LOCAL_DEFAULTS", "REQUIRED_CONF", "SparkSessionError", "configure_spark", "get_session",
           "require_state_store"]

STATE_STORE_PROVIDER = "spark.sql.streaming.stateStore.providerClass"
ROCKSDB_PROVIDER = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"

#: Settings streamsdsl needs: RocksDB state (required by transformWithState), Arrow transfer
#: for the vectorized Python steps, UTC session time.
REQUIRED_CONF: dict[str, str] = {
    STATE_STORE_PROVIDER: ROCKSDB_PROVIDER,
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.sql.session.timeZone": "UTC",
}

#: Defaults of a local session streamsdsl builds; overridable by the caller's ``conf``.
LOCAL_DEFAULTS: dict[str, str] = {
    "spark.sql.shuffle.partitions": "2",
    "spark.default.parallelism": "2",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.streaming.numRecentProgressUpdates": "20",
    "spark.driver.memory": "2g",
    "spark.sql.adaptive.enabled": "false",
    # PySpark records the Python call site of every DataFrame/Column call (four JVM round trips
    # each: a quarter of the JVM calls of planning a topology); streamsdsl's plans are built by
    # the compiler, not by user code, so the call sites would only name streamsdsl's internals.
    "spark.python.sql.dataFrameDebugging.enabled": "false",
    # No byte cap on the Arrow batches sent to Python workers (the record cap,
    # spark.sql.execution.arrow.maxRecordsPerBatch, stays): with a cap, Spark's streaming Arrow
    # writer (transformWithState's input) measures the open batch after every row, and measuring
    # a list column walks the whole batch — half the JVM's CPU time of a session aggregation on
    # the Python operator went there (docs/performance.md). Int.MaxValue is Spark's "no cap".
    "spark.sql.execution.arrow.maxBytesPerBatch": "2147483647",
}

_lock = threading.Lock()


class SparkSessionError(StreamsDslError, RuntimeError):
    """The SparkSession lacks a setting streamsdsl needs (the message says which and how)."""


def get_session(master: str | None = None, conf: dict[str, Any] | None = None) -> SparkSession:
    """The active SparkSession, or a new local one if there is none.

    A new session gets `LOCAL_DEFAULTS`, then ``conf``, then `REQUIRED_CONF`, and loads the JVM
    operator's jar (``spark.jars``, `streamsdsl.jvm.jar_path`) when it is built; its master is
    ``master``, else ``STREAMSDSL_SPARK_MASTER``, else ``local[2]``. The Python workers run the
    interpreter of this process (``PYSPARK_PYTHON`` defaults to ``sys.executable``), so user
    functions see the same packages as the caller. An active session is returned unchanged.
    """
    from pyspark.sql import SparkSession

    with _lock:
        active = SparkSession.getActiveSession()
        if active is not None:
            return active
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
        builder = SparkSession.builder.master(master or os.environ.get("STREAMSDSL_SPARK_MASTER", "local[2]"))
        builder = builder.appName("streamsdsl")
        settings = {**LOCAL_DEFAULTS, **(conf or {}), **REQUIRED_CONF}
        jars = _with_operator_jar(str(settings.get("spark.jars", "")))
        if jars:
            settings["spark.jars"] = jars
        for k, v in settings.items():
            builder = builder.config(k, str(v))
        spark = builder.getOrCreate()
        spark.sparkContext.setLogLevel(os.environ.get("STREAMSDSL_SPARK_LOG_LEVEL", "ERROR"))
        return spark


def _with_operator_jar(jars: str) -> str:
    """``spark.jars`` plus the JVM operator's jar when it is built (else unchanged: the Python
    operator then runs the built-in aggregations, and says so)."""

    ensure_built()
    jar = jar_path(must_exist=False)
    listed = [j for j in jars.split(",") if j.strip()]
    if os.path.isfile(jar) and jar not in listed:
        listed.append(jar)
    return ",".join(listed)


def require_state_store(spark: SparkSession) -> None:
    """Raise `SparkSessionError` unless ``spark`` uses the RocksDB state store, which Spark's
    ``transformWithState`` (every stateful streamsdsl operator) requires."""
    provider = spark.conf.get(STATE_STORE_PROVIDER, "")
    if provider != ROCKSDB_PROVIDER:
        raise SparkSessionError(
            f"this topology has stateful operators, which need the RocksDB state store, but the SparkSession "
            f"uses {provider or 'the default state store'!r}. Set {STATE_STORE_PROVIDER}={ROCKSDB_PROVIDER} when "
            f"the session is built (SparkSession.builder.config(...), spark-submit --conf), or before its first "
            "stateful query with spark.conf.set(...); or let streamsdsl build the session "
            "(streamsdsl.runtime.session.get_session() with no session active)."
        )


def configure_spark(builder: Any) -> Any:
    """Add the JVM operator's jar (``spark.jars``) and the settings streamsdsl needs (RocksDB
    state store, Arrow, UTC) to a ``SparkSession.Builder``; returns the builder.

    The style of ``configure_spark_with_delta_pip``: keeps the jars already configured.

    Examples
    --------
    >>> class Builder:  # a stand-in for SparkSession.builder
    ...     def __init__(self): self._options = {"spark.jars": "/opt/other.jar"}
    ...     def config(self, key, value): self._options[key] = value; return self
    >>> b = configure_spark(Builder())
    >>> b._options["spark.jars"].startswith("/opt/other.jar,") and b._options["spark.jars"].endswith("streamsdsl-operator.jar")
    True
    """
    ensure_built()
    jar = jar_path()
    existing = [j for j in str(getattr(builder, "_options", {}).get("spark.jars", "")).split(",") if j.strip()]
    if jar not in existing:
        existing.append(jar)
    builder = builder.config("spark.jars", ",".join(existing))
    for key, value in REQUIRED_CONF.items():
        builder = builder.config(key, value)
    return builder
