"""Client leases: the Kafka clients Spark's Python workers keep for an application end with it.

The executors' Python workers keep their Kafka clients between micro-batches (the consumers of
`streamsdsl.io.consumer_pool`, the producers of `streamsdsl.io.sink`): creating them per task
costs a connection, a metadata round trip and, for an idempotent producer, its producer id. The
workers outlive a query (Spark reuses them), so without more the clients would stay connected to
the brokers after the application closed, and log ``Connection refused`` once the brokers stop.

A `ClientLease` ties those clients to one application run. The driver creates it (a directory
with an ``open`` file) and passes its path to the source and sink (the option ``clientLease``).
A worker that keeps a client under a lease records itself in the directory (a ``holder-`` file
naming its host and process) and watches the ``open`` file from a daemon thread; `release`
removes the file, each worker then closes the clients it keeps under the lease and removes its
holder file, and `release` returns once every holder has done so.

A driver killed before `release` leaves its lease behind; the lease records its owner (host and
process), and the next lease created on that host removes it (`prune`).

A worker that cannot see the lease's directory (an executor on another machine without a shared
file system) keeps its clients as before: they are closed when idle for the pool's timeout and
when the worker exits.

Imports neither pyspark nor confluent_kafka.

Examples
--------
>>> lease = ClientLease.create()
>>> closed = []
>>> hold(lease.path, "consumer-1", lambda: closed.append("consumer-1"))
True
>>> sorted(os.listdir(lease.path))[0]
'holder-...'
>>> lease.release(timeout_s=5.0)
True
>>> closed, os.path.exists(lease.path)
(['consumer-1'], False)
>>> hold(lease.path, "consumer-2", lambda: closed.append("consumer-2"))  # the directory is gone: kept
True
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import socket
import tempfile
import threading
import time
from collections.abc import Callable, Hashable

__all__ = ["LEASE_OPTION", "ClientLease", "forget", "hold", "prune", "release_now"]

log = logging.getLogger(__name__)

#: The source and sink option carrying the lease's path.
LEASE_OPTION = "clientLease"
_OPEN = "open"
_HOLDER = "holder-"
_OWNER = "owner-"
#: Seconds between two looks of a worker's watcher at its leases.
_WATCH_INTERVAL_S = 0.1


class ClientLease:
    """The driver's side of a lease: create it before the query starts, `release` it after the
    query stopped.

    Parameters
    ----------
    path : str
        The lease's directory (`create` makes one).
    """

    def __init__(self, path: str) -> None:
        self.path = path

    @classmethod
    def create(cls, prefix: str = "streamsdsl-clients-") -> ClientLease:
        """A new open lease in the temporary directory, owned by this process (`prune` removes the
        leases of owners that ended without releasing theirs, as a killed driver does)."""
        prune(prefix)
        path = tempfile.mkdtemp(prefix=prefix)
        for name in (_OPEN, _OWNER + _process_name(os.getpid())):
            with open(os.path.join(path, name), "w"):
                pass
        return cls(path)

    def holders(self) -> list[str]:
        """The workers still keeping clients under this lease (``host-pid``); a holder on this
        host whose process is gone is removed."""
        try:
            names = [n for n in os.listdir(self.path) if n.startswith(_HOLDER)]
        except FileNotFoundError:
            return []
        host = socket.gethostname()
        alive = []
        for name in names:
            owner = name[len(_HOLDER):]
            owner_host, _, pid = owner.rpartition("-")
            if owner_host == host and pid.isdigit() and not _process_exists(int(pid)):
                with contextlib.suppress(FileNotFoundError):
                    os.remove(os.path.join(self.path, name))
                continue
            alive.append(owner)
        return alive

    def release(self, timeout_s: float | None = 10.0, *, owner: str = "streamsdsl") -> bool:
        """End the lease: every worker closes the clients it keeps under it. Returns True once
        all have (the directory is then removed), False if some still hold clients after
        ``timeout_s`` seconds (``None``: wait as long as it takes); that is logged as a warning
        naming ``owner`` and the workers."""
        with contextlib.suppress(FileNotFoundError):
            os.remove(os.path.join(self.path, _OPEN))
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while self.holders():
            if deadline is not None and time.monotonic() >= deadline:
                log.warning("%s: the Kafka clients of the Python workers %s were not closed within %.1f s; they "
                            "close when idle for 5 minutes or when the worker exits", owner,
                            ", ".join(self.holders()), timeout_s)
                return False
            time.sleep(_WATCH_INTERVAL_S / 2)
        shutil.rmtree(self.path, ignore_errors=True)
        return True


def _process_name(pid: int) -> str:
    return f"{socket.gethostname()}-{pid}"


def prune(prefix: str = "streamsdsl-clients-") -> list[str]:
    """Remove the leases in the temporary directory (named ``prefix...`` or, as `KafkaStreams`
    names them, ``streamsdsl-<application.id>-clients-...``) whose owner, the driver that created
    it on this host, is gone without releasing it; returns their paths. A lease of another host's
    driver, or of a live one, is left alone."""
    root, host, removed = tempfile.gettempdir(), socket.gethostname(), []
    try:
        candidates = [os.path.join(root, n) for n in os.listdir(root)
                      if n.startswith(prefix) or (n.startswith("streamsdsl-") and "-clients-" in n)]
    except OSError:
        return []
    for path in candidates:
        try:
            owners = [n[len(_OWNER):] for n in os.listdir(path) if n.startswith(_OWNER)]
        except OSError:
            continue
        for owner in owners:
            owner_host, _, pid = owner.rpartition("-")
            if owner_host == host and pid.isdigit() and not _process_exists(int(pid)):
                shutil.rmtree(path, ignore_errors=True)
                removed.append(path)
    return removed


def _process_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


# -- the worker's side ---------------------------------------------------------------------
_lock = threading.Lock()
#: lease path -> client id -> its close function, for the leases this process watches.
_held: dict[str, dict[Hashable, Callable[[], None]]] = {}
_watcher: threading.Thread | None = None


def _holder_file(lease: str) -> str:
    return os.path.join(lease, f"{_HOLDER}{socket.gethostname()}-{os.getpid()}")


def hold(lease: str | None, client: Hashable, close: Callable[[], None]) -> bool:
    """Record that this process keeps ``client`` under ``lease``: ``close()`` is called once the
    lease is released (from the watcher thread). Nothing is recorded without a lease or when
    this host cannot see the lease's directory. When the lease is already released,
    ``close()`` is called at once and the result is False (the caller must not keep the client)."""
    global _watcher
    if not lease or not os.path.isdir(lease):
        return True
    if not os.path.exists(os.path.join(lease, _OPEN)):
        with contextlib.suppress(Exception):
            close()
        return False
    with _lock:
        clients = _held.setdefault(lease, {})
        if not clients:
            with open(_holder_file(lease), "w"):
                pass
        clients[client] = close
        if _watcher is None or not _watcher.is_alive():
            _watcher = threading.Thread(target=_watch, name="streamsdsl-client-leases", daemon=True)
            _watcher.start()
    return True


def forget(lease: str | None, client: Hashable) -> None:
    """``client`` was closed by its owner: nothing to close for it on release."""
    if not lease:
        return
    with _lock:
        clients = _held.get(lease)
        if clients is not None:
            clients.pop(client, None)


def release_now(lease: str) -> None:
    """Close every client this process keeps under ``lease`` and remove its holder file."""
    with _lock:
        clients = _held.pop(lease, {})
    for close in clients.values():
        with contextlib.suppress(Exception):
            close()
    with contextlib.suppress(FileNotFoundError):
        os.remove(_holder_file(lease))


def _watch() -> None:
    """The watcher thread: release the leases whose ``open`` file is gone; ends with none left."""
    global _watcher
    while True:
        time.sleep(_WATCH_INTERVAL_S)
        with _lock:
            leases = list(_held)
            if not leases:
                _watcher = None
                return
        for lease in leases:
            if not os.path.exists(os.path.join(lease, _OPEN)):
                release_now(lease)
