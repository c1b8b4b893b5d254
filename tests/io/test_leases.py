"""Client leases (`streamsdsl.io.leases`): the clients a Python worker keeps for an application are
closed when the application releases its lease."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time

from streamsdsl.io import leases
from streamsdsl.io.consumer_pool import ConsumerPool, PooledConsumer, pool_key
from streamsdsl.io.leases import ClientLease


class _Client:
    def __init__(self) -> None:
        self.closed = 0

    def close(self) -> None:
        self.closed += 1


class TestClientLease:
    def test_release_closes_the_held_clients_and_removes_the_lease(self) -> None:
        """``release`` returns True once the watcher closed every client held under the lease; the
        holder file and the lease's directory are gone."""
        lease = ClientLease.create()
        a, b = _Client(), _Client()
        assert leases.hold(lease.path, "a", a.close) is True
        assert leases.hold(lease.path, "b", b.close) is True
        assert lease.holders() == [f"{socket.gethostname()}-{os.getpid()}"]
        assert lease.release(timeout_s=5.0) is True
        assert (a.closed, b.closed) == (1, 1)
        assert not os.path.exists(lease.path)

    def test_a_forgotten_client_is_not_closed(self) -> None:
        """A client its owner took back (`forget`: a read uses it) is left to its owner."""
        lease = ClientLease.create()
        a = _Client()
        leases.hold(lease.path, "a", a.close)
        leases.forget(lease.path, "a")
        assert lease.release(timeout_s=5.0) is True
        assert a.closed == 0

    def test_hold_after_release_closes_at_once(self) -> None:
        """A client given back after the release (the directory still there) is closed at once and
        must not be kept (False)."""
        lease = ClientLease.create()
        os.remove(os.path.join(lease.path, "open"))
        a = _Client()
        assert leases.hold(lease.path, "a", a.close) is False
        assert a.closed == 1
        assert lease.release(timeout_s=1.0) is True

    def test_without_a_visible_lease_the_client_is_kept(self) -> None:
        """No lease, or a lease this host cannot see (an executor on another machine): nothing is
        recorded, the client stays kept."""
        a = _Client()
        assert leases.hold(None, "a", a.close) is True
        assert leases.hold("/nonexistent/streamsdsl-clients-x", "a", a.close) is True
        assert a.closed == 0

    def test_a_holder_process_that_died_does_not_block_release(self) -> None:
        """A holder file of a process that no longer exists is removed, not waited for."""
        lease = ClientLease.create()
        dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                              text=True, check=True).stdout.strip()
        open(os.path.join(lease.path, f"holder-{socket.gethostname()}-{dead}"), "w").close()
        started = time.monotonic()
        assert lease.release(timeout_s=5.0) is True
        assert time.monotonic() - started < 1.0

    def test_release_times_out_on_a_live_holder(self) -> None:
        """A live holder that does not close (no watcher) makes ``release`` return False after the
        timeout, naming it."""
        lease = ClientLease.create()
        holder = f"{socket.gethostname()}-{os.getppid()}"
        open(os.path.join(lease.path, f"holder-{holder}"), "w").close()
        assert lease.release(timeout_s=0.3) is False
        assert lease.holders() == [holder]
        os.remove(os.path.join(lease.path, f"holder-{holder}"))
        assert lease.release(timeout_s=1.0) is True


class TestPoolDiscard:
    def test_discard_closes_only_the_kept_entry(self) -> None:
        """``ConsumerPool.discard`` closes the consumer kept under the key if it is that entry;
        an entry a read has taken (not in the pool) is left alone."""
        pool = ConsumerPool()
        key = pool_key({"bootstrap.servers": "h:1"}, "t", 0)
        kept, other = PooledConsumer(_Client()), PooledConsumer(_Client())
        pool.give_back(key, kept)
        pool.discard(key, other)
        assert (len(pool), other.consumer.closed) == (1, 0)
        pool.discard(key, kept)
        assert (len(pool), kept.consumer.closed) == (0, 1)


class TestPrune:
    def test_a_lease_whose_driver_is_gone_is_removed_at_the_next_create(self) -> None:
        """A driver killed before `release` leaves its lease; the next lease created on this host
        removes it (its owner process is gone) and keeps a live driver's and one of another host."""
        code = "from streamsdsl.io.leases import ClientLease; print(ClientLease.create('streamsdsl-t-clients-').path)"
        other_host = ClientLease.create("streamsdsl-t-clients-")
        for name in os.listdir(other_host.path):
            if name.startswith("owner-"):
                os.rename(os.path.join(other_host.path, name), os.path.join(other_host.path, "owner-elsewhere-1"))
        dead = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
        assert os.path.isdir(dead)
        live = ClientLease.create("streamsdsl-t-clients-")
        assert not os.path.exists(dead)
        assert os.path.isdir(live.path) and os.path.isdir(other_host.path)
        assert leases.prune("streamsdsl-t-clients-") == []
        for lease in (live, other_host):
            assert lease.release(timeout_s=1.0)
