"""Reader-side pool of librdkafka consumers, kept across micro-batches in a Python worker.

Spark runs each micro-batch's read of a Kafka partition as a task in a Python worker process,
and reuses the worker for later tasks (``spark.python.worker.reuse``, on by default). Creating a
consumer per task costs a client, its broker connections, a metadata round trip and the first
fetch. Like the consumer cache of Spark's JVM connector (``spark.kafka.consumer.cache.*``), this
module keeps one consumer per (configuration, topic, partition) in each worker: the next read
of that partition takes it back and assigns it at its start offset, a seek on the open broker
connections (no new client, no reconnect, no metadata round trip).

* A consumer is taken out of the pool while a read uses it (`ConsumerPool.take`) and given back
  only after a read that ended cleanly (`ConsumerPool.give_back`); a read that failed closes
  its consumer. Two reads of one partition at the same time therefore never share a consumer.
* A consumer in the pool is unassigned (no background fetching, so an idle worker holds no
  prefetched data and puts no load on the broker). Not paused: librdkafka took ~0.7 s from
  ``resume()`` or a seek of a paused partition to its first record, ~20 ms from ``assign()``.
* Consumers unused for `IDLE_TIMEOUT_S` are closed when the pool is next used, the least recently
  used are closed beyond `CAPACITY`, and all are closed when the worker process exits. A read
  under a client lease (`streamsdsl.io.leases`: ``KafkaStreams`` sets one) keeps its consumer
  only until the lease is released, when the application closes.
* The key leaves out ``group.id`` (every configuration gets a random one; no group is used).

Imports neither pyspark nor confluent_kafka (the consumers are created by the caller).
"""

from __future__ import annotations

import atexit
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Any

import attrs

__all__ = ["CAPACITY", "IDLE_TIMEOUT_S", "ConsumerPool", "PoolKey", "PooledConsumer", "pool_key", "worker_pool"]

#: Most consumers one worker keeps (as ``spark.kafka.consumer.cache.capacity``).
CAPACITY = 64
#: Seconds a pooled consumer may stay unused before it is closed (as
#: ``spark.kafka.consumer.cache.timeout``, 5 minutes).
IDLE_TIMEOUT_S = 300.0

#: ``(configuration items without group.id, topic, partition)``.
PoolKey = tuple[tuple[tuple[str, str], ...], str, int]


def pool_key(conf: Mapping[str, Any], topic: str, partition: int) -> PoolKey:
    """The pool key of a consumer of ``topic``-``partition`` created with ``conf``.

    Examples
    --------
    >>> pool_key({"group.id": "a", "bootstrap.servers": "h:1"}, "t", 0) == pool_key(
    ...     {"bootstrap.servers": "h:1", "group.id": "b"}, "t", 0)
    True
    """
    items = tuple(sorted((str(k), str(v)) for k, v in conf.items() if k != "group.id"))
    return (items, topic, partition)


@attrs.define(eq=False)
class PooledConsumer:
    """A kept consumer (unassigned while in the pool) and when it was last given back.

    Attributes
    ----------
    consumer : confluent_kafka.Consumer
        The client; a read assigns it to its one partition.
    last_used : float
        ``time.monotonic()`` when it was last given back.
    """

    consumer: Any
    last_used: float = attrs.field(factory=time.monotonic)


def _close(entry: PooledConsumer) -> None:
    try:
        entry.consumer.close()
    except Exception:  # noqa: BLE001, S110 - closing is best effort
        pass


class ConsumerPool:
    """Consumers kept between reads, keyed by `pool_key`; thread-safe.

    Parameters
    ----------
    capacity : int
        Most consumers kept; the least recently used beyond it are closed.
    idle_timeout_s : float
        Consumers unused for longer are closed on the next `take` or `give_back`.
    clock : callable
        Seconds, monotonic (tests pass a fake one).
    """

    def __init__(
        self,
        capacity: int = CAPACITY,
        idle_timeout_s: float = IDLE_TIMEOUT_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if capacity < 0:
            raise ValueError(f"'capacity' must be >= 0 (got {capacity})")
        self._capacity = capacity
        self._idle_timeout_s = idle_timeout_s
        self._clock = clock
        self._entries: OrderedDict[PoolKey, PooledConsumer] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._entries)

    def take(self, key: PoolKey) -> PooledConsumer | None:
        """Remove and return the consumer kept under ``key`` (``None`` if there is none)."""
        with self._lock:
            expired = self._expire()
            entry = self._entries.pop(key, None)
        for old in expired:
            _close(old)
        return entry

    def give_back(self, key: PoolKey, entry: PooledConsumer) -> None:
        """Keep ``entry`` under ``key`` for the next read (closes what no longer fits)."""
        entry.last_used = self._clock()
        with self._lock:
            surplus = self._expire()
            if key in self._entries:  # another read of the same partition gave one back first
                surplus.append(self._entries.pop(key))
            self._entries[key] = entry
            while len(self._entries) > self._capacity:
                surplus.append(self._entries.popitem(last=False)[1])
        for old in surplus:
            _close(old)

    def discard(self, key: PoolKey, entry: PooledConsumer) -> None:
        """Close ``entry`` if it is the consumer kept under ``key`` (one a read has taken is left
        to the read)."""
        with self._lock:
            if self._entries.get(key) is not entry:
                return
            del self._entries[key]
        _close(entry)

    def close_all(self) -> None:
        """Close every kept consumer (at worker exit; best effort)."""
        with self._lock:
            entries = list(self._entries.values())
            self._entries.clear()
        for entry in entries:
            _close(entry)

    def _expire(self) -> list[PooledConsumer]:
        """Remove (under the lock) and return the entries idle for too long."""
        now = self._clock()
        stale = [k for k, e in self._entries.items() if now - e.last_used > self._idle_timeout_s]
        return [self._entries.pop(k) for k in stale]


_worker_pool: ConsumerPool | None = None
_worker_pool_lock = threading.Lock()


def worker_pool() -> ConsumerPool:
    """This process's pool (created on first use; closed at interpreter exit)."""
    global _worker_pool
    with _worker_pool_lock:
        if _worker_pool is None:
            _worker_pool = ConsumerPool()
            atexit.register(_worker_pool.close_all)
        return _worker_pool
