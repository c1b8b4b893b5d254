"""The SparkSession streamsdsl runs on (I/O layer: imports pyspark)."""

from __future__ import annotations

import os
import sys
import threading
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

ROCKSDB_PROVIDER = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"

#: Settings streamsdsl needs on every session: RocksDB state (required by
#: transformWithState), Arrow transfer for the vectorized Python steps, a quiet UI.
REQUIRED_CONF: dict[str, str] = {
    "spark.sql.streaming.stateStore.providerClass": ROCKSDB_PROVIDER,
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.sql.session.timeZone": "UTC",
}

#: Defaults for a local session; overridable by the caller.
LOCAL_DEFAULTS: dict[str, str] = {
    "spark.sql.shuffle.partitions": "2",
    "spark.default.parallelism": "2",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.streaming.numRecentProgressUpdates": "20",
    "spark.driver.memory": "2g",
    "spark.sql.adaptive.enabled": "false",
}

_lock = threading.Lock()


def get_session(master: str | None = None, conf: dict[str, Any] | None = None) -> SparkSession:
    """Return the active SparkSession if it has what streamsdsl needs, else build one.

    The Python workers run the interpreter of this process (``PYSPARK_PYTHON`` defaults to
    ``sys.executable``), so user functions see the same packages as the caller.
    """
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    with _lock:
        active = SparkSession.getActiveSession()
        if active is not None:
            provider = active.conf.get("spark.sql.streaming.stateStore.providerClass", "")
            if provider != ROCKSDB_PROVIDER:
                # The provider can only be chosen before the first stateful query runs;
                # setting it on a live session works as long as no checkpoint says otherwise.
                active.conf.set("spark.sql.streaming.stateStore.providerClass", ROCKSDB_PROVIDER)
            return active
        builder = SparkSession.builder.master(master or os.environ.get("STREAMSDSL_SPARK_MASTER", "local[2]"))
        builder = builder.appName("streamsdsl")
        settings = {**LOCAL_DEFAULTS, **(conf or {}), **REQUIRED_CONF}
        for k, v in settings.items():
            builder = builder.config(k, str(v))
        spark = builder.getOrCreate()
        spark.sparkContext.setLogLevel(os.environ.get("STREAMSDSL_SPARK_LOG_LEVEL", "ERROR"))
        return spark
