"""The worker's consumer pool (`streamsdsl.io.consumer_pool`), with fake consumers and a fake clock."""

from __future__ import annotations

import pytest

from streamsdsl.io.consumer_pool import ConsumerPool, PooledConsumer, pool_key, worker_pool


class FakeConsumer:
    """Records whether it was closed; closing twice is a test failure."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.closed = False

    def close(self) -> None:
        assert not self.closed, f"{self.name} closed twice"
        self.closed = True


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


CONF = {"bootstrap.servers": "h:9092", "group.id": "streamsdsl-kafka-source-1"}


def _entry(name: str) -> PooledConsumer:
    return PooledConsumer(FakeConsumer(name))


class TestPoolKey:
    """Which consumers are interchangeable."""

    def test_group_id_is_not_part_of_the_key(self) -> None:
        """Every configuration has a random group.id; no group is used, so it does not matter."""
        assert pool_key(CONF, "t", 0) == pool_key({**CONF, "group.id": "other"}, "t", 0)

    def test_settings_topic_and_partition_are(self) -> None:
        """Another setting, topic or partition is another consumer."""
        keys = {
            pool_key(CONF, "t", 0),
            pool_key(CONF, "t", 1),
            pool_key(CONF, "u", 0),
            pool_key({**CONF, "fetch.wait.max.ms": 10}, "t", 0),
        }
        assert len(keys) == 4


class TestConsumerPool:
    """Take, give back, expiry, capacity, close."""

    def test_take_from_empty_pool(self) -> None:
        """Nothing kept: the reader creates a consumer."""
        assert ConsumerPool().take(pool_key(CONF, "t", 0)) is None

    def test_given_back_consumer_is_taken_again_once(self) -> None:
        """A consumer given back is the next read's; while in use it is not in the pool."""
        pool = ConsumerPool()
        key = pool_key(CONF, "t", 0)
        entry = _entry("a")
        pool.give_back(key, entry)
        assert pool.take(key) is entry
        assert pool.take(key) is None
        assert not entry.consumer.closed

    def test_idle_consumers_are_closed(self) -> None:
        """A consumer unused for longer than the idle timeout is closed when the pool is next used."""
        clock = Clock()
        pool = ConsumerPool(idle_timeout_s=300, clock=clock)
        old, fresh = _entry("old"), _entry("fresh")
        pool.give_back(pool_key(CONF, "t", 0), old)
        clock.now = 200
        pool.give_back(pool_key(CONF, "t", 1), fresh)
        clock.now = 301
        assert pool.take(pool_key(CONF, "t", 0)) is None
        assert old.consumer.closed
        assert pool.take(pool_key(CONF, "t", 1)) is fresh
        assert not fresh.consumer.closed

    def test_least_recently_used_beyond_capacity_is_closed(self) -> None:
        """At most ``capacity`` consumers are kept."""
        clock = Clock()
        pool = ConsumerPool(capacity=2, clock=clock)
        entries = [_entry(f"c{i}") for i in range(3)]
        for i, entry in enumerate(entries):
            clock.now = i
            pool.give_back(pool_key(CONF, "t", i), entry)
        assert len(pool) == 2
        assert [e.consumer.closed for e in entries] == [True, False, False]

    def test_second_consumer_of_a_partition_replaces_the_first(self) -> None:
        """Two reads of one partition at once each had a consumer; one is kept, the other closed."""
        pool = ConsumerPool()
        key = pool_key(CONF, "t", 0)
        first, second = _entry("first"), _entry("second")
        pool.give_back(key, first)
        pool.give_back(key, second)
        assert first.consumer.closed
        assert pool.take(key) is second

    def test_close_all(self) -> None:
        """At worker exit every kept consumer is closed and the pool is empty."""
        pool = ConsumerPool()
        entries = [_entry(f"c{i}") for i in range(3)]
        for i, entry in enumerate(entries):
            pool.give_back(pool_key(CONF, "t", i), entry)
        pool.close_all()
        assert len(pool) == 0
        assert all(e.consumer.closed for e in entries)

    def test_failing_close_is_ignored(self) -> None:
        """Closing is best effort: a consumer whose close raises does not break the pool."""

        class Broken(FakeConsumer):
            def close(self) -> None:
                raise RuntimeError("broker gone")

        pool = ConsumerPool(capacity=0)
        pool.give_back(pool_key(CONF, "t", 0), PooledConsumer(Broken("b")))
        assert len(pool) == 0

    def test_negative_capacity_is_rejected(self) -> None:
        """The capacity is a count."""
        with pytest.raises(ValueError, match=r"^'capacity' must be >= 0 \(got -1\)$"):
            ConsumerPool(capacity=-1)

    def test_worker_pool_is_one_per_process(self) -> None:
        """Every read in a worker process shares one pool."""
        assert worker_pool() is worker_pool()
