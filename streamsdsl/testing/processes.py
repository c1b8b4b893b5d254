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
    """SIGTERM every process's group and wait, all within ``timeout_s``, for each leader to exit
    and then for its group to empty (what the leader started, e.g. a worker's executors and their
    Python workers, may outlive it by a moment); SIGKILL a group still there by then.

    >>> import sys
    >>> p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
    >>> stop_groups([p], 10.0)
    >>> p.returncode == -signal.SIGTERM, _group_alive(p.pid)
    (True, False)
    """
    for process in processes:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    for process in processes:
        try:
            process.wait(max(0.0, deadline - time.monotonic()))
            while _group_alive(process.pid) and time.monotonic() < deadline:
                time.sleep(0.05)
        except subprocess.TimeoutExpired:
            pass
        if process.poll() is None or _group_alive(process.pid):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def _group_alive(group: int) -> bool:
    """Whether a process of the group ``group`` still exists."""
    try:
        os.killpg(group, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # pragma: no cover - a member we may not signal: it exists
        return True
    return True
