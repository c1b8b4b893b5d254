"""Spark's Python daemon with the workers' imports done before it forks them
(`streamsdsl.runtime.python_daemon`): used through the launcher, single-threaded when it forks,
PySpark's own daemon afresh when an import starts a thread or fails."""

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from streamsdsl.runtime import python_daemon
from streamsdsl.runtime.python_daemon import DAEMON_CONF, MODULE, PLAIN_ENV, main


def _preload_in_a_fresh_interpreter(modules: list[str], path: Path) -> list[bool]:
    """`preload` of each module in a new interpreter (this one runs threads of its own)."""
    code = ("import sys; from streamsdsl.runtime.python_daemon import preload; "
            f"print([preload(m) for m in {modules!r}])")
    env = {k: v for k, v in os.environ.items() if k != "JE_ARROW_MALLOC_CONF"}
    env["PYTHONPATH"] = os.pathsep.join([str(path), env.get("PYTHONPATH", "")])
    env["OMP_NUM_THREADS"] = "1"  # as Spark sets it for its workers (spark.task.cpus)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    return eval(out.stdout.strip())  # noqa: S307 - a list of bools printed by the child above


def test_the_workers_modules_leave_the_daemon_single_threaded(tmp_path: Path) -> None:
    """pyspark.worker with pyarrow (its jemalloc thread off) and pandas: one thread, so the daemon
    forks with them loaded; a module that starts a thread on import: not safe to fork."""
    (tmp_path / "starts_a_thread.py").write_text(
        "import threading, time\nthreading.Thread(target=time.sleep, args=(60,), daemon=True).start()\n")
    assert _preload_in_a_fresh_interpreter(["pyspark.worker", "starts_a_thread"], tmp_path) == [True, False]


def test_a_daemon_whose_imports_fail_runs_pysparks_own_afresh(monkeypatch: pytest.MonkeyPatch) -> None:
    """The worker module cannot be imported: the process becomes ``python -m pyspark.daemon`` with
    the same worker module (PySpark reports the import error as it would), marked plain."""
    calls: list[tuple[str, list[str]]] = []

    class Exec(Exception):
        pass

    def execv(path: str, argv: list[str]) -> None:
        calls.append((path, argv))
        raise Exec

    monkeypatch.setattr(python_daemon.os, "execv", execv)
    monkeypatch.setenv(PLAIN_ENV, "")  # restored (to unset) after the test, which main sets
    monkeypatch.delenv(PLAIN_ENV)
    with pytest.raises(Exec):
        main(["daemon", "pyspark.no_such_worker_module"])
    assert calls == [(sys.executable, [sys.executable, "-m", "pyspark.daemon", "pyspark.no_such_worker_module"])]
    assert os.environ[PLAIN_ENV] == "1"


@pytest.mark.spark
def test_the_sessions_workers_fork_from_the_preloaded_daemon(spark: Any) -> None:
    """A local session streamsdsl builds names this daemon; a pandas UDF's worker is its child,
    not marked plain, and the daemon had pyarrow's library mapped before it forked. (This module
    has no ``from __future__ import annotations``: ``pandas_udf`` reads the hints.)"""
    import pandas as pd
    from pyspark.sql.functions import pandas_udf

    assert spark.conf.get(DAEMON_CONF) == MODULE

    @pandas_udf("string")
    def parent(ids: pd.Series) -> pd.Series:
        import os as os_

        ppid = os_.getppid()
        with open(f"/proc/{ppid}/cmdline", "rb") as f:
            cmdline = f.read().replace(b"\0", b" ").decode()
        with open(f"/proc/{ppid}/maps") as f:
            arrow = "libarrow" in f.read()
        return ids.map(lambda _: f"{cmdline.split(' -m ')[-1].strip()}|{os_.environ.get(PLAIN_ENV)}|{arrow}")

    rows = spark.range(2).select(parent("id").alias("p")).collect()
    assert [r.p for r in rows] == [f"{MODULE} pyspark.worker|None|True"] * 2
