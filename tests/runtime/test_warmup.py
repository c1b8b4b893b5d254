"""`start_python_workers`: the Python processes of a first micro-batch started in the background
as `KafkaStreams.start()` begins (docs/performance.md, P7)."""

from __future__ import annotations

import subprocess
from typing import Any

import pytest

from streamsdsl.runtime.python_daemon import DAEMON_CONF
from streamsdsl.runtime.warmup import WARM_UP_SOURCE, start_python_workers

pytestmark = pytest.mark.spark


def _python_modules_under(pid: int) -> set[str]:
    """The ``-m`` modules of the Python processes descended from ``pid``."""
    rows = subprocess.run(["ps", "-ww", "-eo", "pid=,ppid=,args="], capture_output=True, text=True, check=True).stdout
    children: dict[int, list[tuple[int, list[str]]]] = {}
    for line in rows.splitlines():
        p, pp, *args = line.split()
        children.setdefault(int(pp), []).append((int(p), args))
    found, todo = set(), [pid]
    while todo:
        for child, args in children.get(todo.pop(), []):
            todo.append(child)
            if "-m" in args:
                found.add(" ".join(args[args.index("-m") + 1:]))
    return found


def _jvm_pid(spark: Any) -> int:
    return int(spark.sparkContext._jvm.ProcessHandle.current().pid())


def test_the_planners_and_workers_are_running_afterwards(spark: Any) -> None:
    """Once the warm-up thread is done, the session's JVM runs the UDF daemon (ours, where the
    session names it) and the read, write and commit planners' daemons (PySpark's); a second
    call returns the same thread."""
    thread = start_python_workers(spark)
    thread.join(timeout=240)
    assert not thread.is_alive()
    assert start_python_workers(spark) is thread
    modules = _python_modules_under(_jvm_pid(spark))
    udf_daemon = spark.sparkContext.getConf().get(DAEMON_CONF, "pyspark.daemon")
    assert {f"{udf_daemon} pyspark.worker", "pyspark.daemon pyspark.sql.worker.plan_data_source_read",
            "pyspark.daemon pyspark.sql.worker.write_into_data_source",
            "pyspark.daemon pyspark.sql.worker.commit_data_source_write"} <= modules, modules


def test_the_warm_up_source_reads_no_rows(spark: Any) -> None:
    """The data source the warm-up reads and writes has no rows and accepts a write."""
    start_python_workers(spark).join(timeout=240)
    df = spark.read.format(WARM_UP_SOURCE).load()
    assert (df.columns, df.count()) == (["x"], 0)
    df.write.format(WARM_UP_SOURCE).mode("append").save()  # raises if the writer fails
