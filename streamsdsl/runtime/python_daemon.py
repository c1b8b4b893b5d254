"""Spark's Python daemon, with what its workers import done once, before it forks them.

Spark starts a session's Python workers from a daemon process (``python -m pyspark.daemon
<worker module>``) that forks one per worker. PySpark's daemon imports nothing of the worker's
before it forks, because a module that starts a thread on import (pyarrow starts jemalloc's
background thread; numpy may start its BLAS threads) makes a fork unsafe. So every worker
imports the worker module, pyarrow and pandas again on its first task: ≈ 0.8 s of CPU apiece
here, for every one of the hundreds of workers a test run or a long application starts
(``docs/performance.md``, "Where a test run's CPU goes").

This daemon (``spark.python.daemon.module``, set with the `streamsdsl.runtime.python_launcher`
on a local master: the workers run this interpreter, which has streamsdsl) imports them first,
with jemalloc's background thread off (``JE_ARROW_MALLOC_CONF``, unless set: pyarrow allocates
with mimalloc by default, jemalloc's thread only purges), then checks that the process still
has one thread. If it has, PySpark's own daemon runs in it and each fork starts with those
modules loaded; if any import started a thread (or failed), the process runs PySpark's daemon
afresh without them (``exec``), exactly as Spark would have. ``STREAMSDSL_PYTHON_DAEMON_PLAIN=1``
(`PLAIN_ENV`) runs PySpark's daemon without them from the start. Spark starts the data source
planners' daemon itself (``pyspark.daemon``): this one serves the UDF workers.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Sequence

__all__ = ["ARROW_MODULES", "DAEMON_CONF", "MODULE", "PLAIN_ENV", "main", "preload", "settings"]

#: Spark's setting that names the daemon module.
DAEMON_CONF = "spark.python.daemon.module"

#: This module, as ``spark.python.daemon.module`` names it.
MODULE = "streamsdsl.runtime.python_daemon"

#: Set (to ``1``) in the environment of a daemon that runs PySpark's own daemon without the
#: imports: by this module when they were unsafe, or by the user to turn them off.
PLAIN_ENV = "STREAMSDSL_PYTHON_DAEMON_PLAIN"

#: What a UDF worker (``pyspark.worker``) imports on its first Arrow task, besides its module.
ARROW_MODULES: tuple[str, ...] = ("pyarrow", "pandas", "pyspark.sql.pandas.serializers")


def settings(python: str, launcher: str) -> dict[str, str]:
    """``{spark.python.daemon.module: this module}`` when the workers run through the launcher
    (``launcher`` is not ``python``: a local master and this interpreter, which imports
    streamsdsl), else nothing.

    >>> settings("/usr/bin/python3", "/usr/bin/python3")
    {}
    >>> settings("/usr/bin/python3", "/cache/python-launchers/k/python")
    {'spark.python.daemon.module': 'streamsdsl.runtime.python_daemon'}
    """
    return {DAEMON_CONF: MODULE} if launcher != python else {}


def _threads() -> int:
    """The process's threads (``/proc``), or -1 when it cannot tell."""
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return -1


def preload(worker_module: str) -> bool:
    """Import ``worker_module`` (and, for ``pyspark.worker``, `ARROW_MODULES`); whether the
    process still has a single thread, so that a fork is as safe as PySpark's."""
    os.environ.setdefault("JE_ARROW_MALLOC_CONF", "background_thread:false")
    modules = (worker_module, *ARROW_MODULES) if worker_module == "pyspark.worker" else (worker_module,)
    try:
        for name in modules:
            importlib.import_module(name)
    except Exception:  # noqa: BLE001 - PySpark's daemon reports what its worker cannot import
        return False
    return _threads() == 1


def main(argv: Sequence[str]) -> None:
    """Run PySpark's daemon for the worker module ``argv[1]``, after `preload`, or afresh
    without it (see the module docs)."""
    worker = argv[1] if len(argv) > 1 and argv[1].startswith("pyspark") else "pyspark.worker"
    if not os.environ.get(PLAIN_ENV) and not preload(worker):
        os.environ[PLAIN_ENV] = "1"
        os.execv(sys.executable, [sys.executable, "-m", "pyspark.daemon", *argv[1:]])
    from pyspark.daemon import manager

    manager()


if __name__ == "__main__":
    main(sys.argv)
