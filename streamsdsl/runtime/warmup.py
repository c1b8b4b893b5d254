"""Start Spark's Python processes that a first micro-batch needs while the query is planned.

A streaming query of streamsdsl runs Python in several kinds of processes: the UDF workers
(the Kafka reader, ``filter`` / ``map_values``, the serdes), and one planner process per kind of
Python data source call (planning the read, creating the writer). Spark starts each kind the
first time a job needs it, one after the other, each an interpreter importing PySpark, pyarrow
and streamsdsl: about 2 s apiece on two cores, in the first micro-batch of the first application
of a session (``docs/performance.md``, P7). Spark keeps them running for the session (a daemon
per worker module, its workers reused).

`start_python_workers` runs one tiny batch job in a background thread as ``start()`` begins: it
reads two empty partitions of a data source of this module and writes them back to it, which
starts the UDF daemon with two workers (they import the modules the Kafka reader and the serdes
import), the read planner, and the write and commit planners that the sink's batch write in
``foreachBatch`` uses. The first micro-batch then finds them running. The streaming source's own
runner, the fifth kind, is started per query by Spark and cannot be started ahead.
"""

from __future__ import annotations

import importlib
import logging
import threading
import weakref
from collections.abc import Iterator, Sequence
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceWriter,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.types import IntegerType, StructField, StructType

from streamsdsl.runtime.connect import is_connect

__all__ = ["WARM_UP_SOURCE", "start_python_workers"]

log = logging.getLogger("streamsdsl.runtime.warmup")

#: The format name of the warm-up data source.
WARM_UP_SOURCE = "streamsdsl-warmup"

#: What the first micro-batch's Python workers import: the Kafka reader, the serdes' Arrow
#: UDFs and the keyed processors (imported in the warmed workers, which Spark reuses).
WORKER_MODULES = ("pyarrow", "confluent_kafka", "streamsdsl.io.partition_reader", "streamsdsl.compiler.serde_exprs",
                  "streamsdsl.compiler.processors")

_started: weakref.WeakKeyDictionary[Any, threading.Thread] = weakref.WeakKeyDictionary()
_lock = threading.Lock()


class _Reader(DataSourceReader):
    def partitions(self) -> Sequence[InputPartition]:
        return [InputPartition(0), InputPartition(1)]  # two workers, as local[2] runs two tasks

    def read(self, partition: InputPartition) -> Iterator[tuple[Any, ...]]:
        for name in WORKER_MODULES:
            importlib.import_module(name)
        return iter(())


class _Writer(DataSourceWriter):
    def write(self, iterator: Iterator[Any]) -> WriterCommitMessage:
        for _ in iterator:
            pass
        return WriterCommitMessage()

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        pass


class WarmUpSource(DataSource):
    """A data source of no rows whose reads and writes start Spark's Python processes."""

    @classmethod
    def name(cls) -> str:
        return WARM_UP_SOURCE

    def schema(self) -> StructType:
        return StructType([StructField("x", IntegerType())])

    def reader(self, schema: StructType) -> DataSourceReader:
        return _Reader()

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        return _Writer()


def _warm_up(spark: SparkSession) -> None:
    try:
        if not is_connect(spark):  # over Spark Connect the server runs the job in the session's own thread
            # a Python data source's write is looked up in the session active in the JVM thread
            spark._jvm.SparkSession.setActiveSession(spark._jsparkSession)  # type: ignore[union-attr]
        spark.read.format(WARM_UP_SOURCE).load().write.format(WARM_UP_SOURCE).mode("append").save()
    except Exception as e:  # noqa: BLE001 - a warm-up that fails (the session stopping) changes nothing
        log.debug("warming up Spark's Python workers failed: %s", e)


def start_python_workers(spark: SparkSession) -> threading.Thread:
    """Start, in a background thread, the Python processes of a first micro-batch (once per
    session); returns the thread (already running, or the one started before)."""
    with _lock:
        thread = _started.get(spark)
        if thread is None:
            spark.dataSource.register(WarmUpSource)
            thread = threading.Thread(target=_warm_up, args=(spark,), name="streamsdsl-warm-up", daemon=True)
            _started[spark] = thread
            thread.start()
        return thread
