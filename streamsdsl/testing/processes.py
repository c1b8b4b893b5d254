"""Stopping the process groups the test helpers start (a standalone cluster's master and workers,
a Spark Connect server): each was started as its own group (``start_new_session=True``), so that
stopping it stops what it started too (executors, Python workers)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Sequence

__all__ = ["stop_groups"]


def stop_groups(processes: Sequence[subprocess.Popen[bytes]], timeout_s: float) -> None:
    """SIGTERM every process's group, wait for each leader (all of them within ``timeout_s``),
    SIGKILL the groups of those that did not exit by then.

    >>> import sys
    >>> p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
    >>> stop_groups([p], 10.0)
    >>> p.returncode == -signal.SIGTERM
    True
    """
    for process in processes:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    for process in processes:
        try:
            process.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()
