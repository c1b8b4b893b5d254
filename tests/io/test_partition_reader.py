"""`read_partition`'s error paths and consumer handling, with a fake consumer (no broker).

The records themselves are read against a real broker in ``integration/test_kafka_io.py``.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from confluent_kafka import KafkaError, Message

from streamsdsl.io import KafkaDataLossError, KafkaSourceError
from streamsdsl.io import partition_reader
from streamsdsl.io.consumer_pool import ConsumerPool, PooledConsumer, pool_key
from streamsdsl.io.errors import KafkaBrokerTimeoutError, KafkaTopicRecreatedError
from streamsdsl.io.options import KafkaSourceOptions
from streamsdsl.io.partition_reader import (
    RAW_RECORD_SCHEMA,
    KafkaInputPartition,
    _raw_arrow_schema,
    read_partition,
    reader_conf,
)


class ErrorEvent:
    """A consumer error event (what ``consume()`` returns for a partition error)."""

    def __init__(self, code: int, offset: int = -1001) -> None:
        self._error = KafkaError(code)
        self._offset = offset

    def error(self) -> KafkaError:
        return self._error

    def offset(self) -> int:
        return self._offset


def record(offset: int) -> Message:
    """A consumed record of t-0."""
    return Message(topic="t", partition=0, offset=offset, key=b"k", value=b"v", timestamp=(1, 1000 + offset))


class FakeConsumer:
    """Returns the queued ``consume()`` results in turn; records assign/close calls."""

    def __init__(self, results: list[list[Any]], watermarks: tuple[int, int] | Exception = (0, 3)) -> None:
        self.results = results
        self.watermarks = watermarks
        self.watermark_calls = 0
        self.assigned: list[tuple[str, int, int]] = []
        self.closed = False

    def assign(self, tps: list[Any]) -> None:
        self.assigned += [(tp.topic, tp.partition, tp.offset) for tp in tps]

    def consume(self, num_messages: int, timeout: float) -> list[Any]:
        return self.results.pop(0) if self.results else []

    def get_watermark_offsets(self, tp: Any, timeout: float, cached: bool) -> tuple[int, int]:
        self.watermark_calls += 1
        if isinstance(self.watermarks, Exception):
            raise self.watermarks
        return self.watermarks

    def unassign(self) -> None:
        self.assigned.append(("unassigned", -1, -1))

    def close(self) -> None:
        self.closed = True


def _part(start: int, end: int, **options: str) -> KafkaInputPartition:
    opts = KafkaSourceOptions.from_options({"kafka.bootstrap.servers": "h:9092", "subscribe": "t", **options}, streaming=True)
    return KafkaInputPartition("t", 0, start, end, opts)


def _pooled(part: KafkaInputPartition, consumer: FakeConsumer) -> tuple[ConsumerPool, Any]:
    """A pool holding ``consumer`` under the key `read_partition` computes for ``part``."""
    key = pool_key(reader_conf(part.options), part.topic, part.partition)
    pool = ConsumerPool()
    pool.give_back(key, PooledConsumer(consumer))
    return pool, key


RECREATED_T0_12 = (
    "partition t-0 now ends at offset 3 (it holds [0, 3)), below offset 12 it had reached before: the "
    "topic was deleted and re-created (or the broker lost its data). Set the source option "
    "'failOnDataLoss' to 'false' to go on from the new topic's earliest offset, or reset the application "
    "to start afresh (close it, call KafkaStreams.clean_up() and start it again; a plain query: a new "
    "checkpoint)."
)


class TestReadPartition:
    """Data loss, fatal errors and what happens to the consumer."""

    def test_offsets_past_the_brokers_range_ask_whether_the_topic_was_recreated(self) -> None:
        """Out of range although the broker's range starts before the position: the topic was
        re-created. The kept consumer was sought to the start, and is closed, not kept."""
        part = _part(10, 12)
        consumer = FakeConsumer([[ErrorEvent(KafkaError._AUTO_OFFSET_RESET)]], watermarks=(0, 3))
        pool, _ = _pooled(part, consumer)

        with pytest.raises(KafkaTopicRecreatedError) as info:
            list(read_partition(part, pool))

        assert info.value.args == (RECREATED_T0_12,)
        assert consumer.assigned == [("t", 0, 10)]
        assert consumer.closed
        assert len(pool) == 0

    def test_offsets_gone_fail_when_fail_on_data_loss(self) -> None:
        """Offsets removed by retention: fail, naming the option that skips them."""
        part = _part(2, 9)
        consumer = FakeConsumer([[ErrorEvent(KafkaError.OFFSET_OUT_OF_RANGE)]], watermarks=(5, 20))
        pool, _ = _pooled(part, consumer)

        with pytest.raises(KafkaDataLossError) as info:
            list(read_partition(part, pool))

        assert info.value.args == (
            "offsets [2, 5) of t-0 are no longer on the broker (earliest available: 5). Set the "
            "option 'failOnDataLoss' to 'false' to skip them.",
        )

    def test_range_entirely_gone_is_skipped_without_fail_on_data_loss(self) -> None:
        """failOnDataLoss=false and nothing of the range left: no records, the consumer is kept."""
        part = _part(2, 4, failOnDataLoss="false")
        consumer = FakeConsumer([[ErrorEvent(KafkaError.OFFSET_OUT_OF_RANGE)]], watermarks=(5, 20))
        pool, key = _pooled(part, consumer)

        assert list(read_partition(part, pool)) == []

        assert consumer.assigned == [("t", 0, 2), ("unassigned", -1, -1)]
        assert not consumer.closed
        assert pool.take(key).consumer is consumer

    def test_fatal_error_closes_the_consumer(self) -> None:
        """An unknown partition fails the read; its consumer is closed."""
        part = _part(0, 5)
        consumer = FakeConsumer([[ErrorEvent(KafkaError._UNKNOWN_PARTITION)]])
        pool, _ = _pooled(part, consumer)

        with pytest.raises(KafkaSourceError, match=r"^reading t-0 failed: "):
            list(read_partition(part, pool))

        assert consumer.closed
        assert len(pool) == 0

    def test_a_kafka_option_overrides_the_readers_fetch_wait(self) -> None:
        """``fetch.wait.max.ms`` is 10 ms for readers unless ``kafka.fetch.wait.max.ms`` is given."""
        assert reader_conf(_part(0, 1).options)["fetch.wait.max.ms"] == 10
        assert reader_conf(_part(0, 1, **{"kafka.fetch.wait.max.ms": "200"}).options)["fetch.wait.max.ms"] == "200"

    def test_empty_range_takes_no_consumer(self) -> None:
        """``[start, end)`` with end <= start reads nothing and touches no consumer."""
        part = _part(4, 4)
        consumer = FakeConsumer([])
        pool, _ = _pooled(part, consumer)

        assert list(read_partition(part, pool)) == []
        assert consumer.assigned == []
        assert len(pool) == 1


def test_arrow_schema_is_sparks_conversion() -> None:
    """The pyarrow-only schema equals ``to_arrow_schema(RAW_RECORD_SCHEMA, timezone="UTC")``."""
    from pyspark.sql.pandas.types import to_arrow_schema

    assert _raw_arrow_schema().equals(to_arrow_schema(RAW_RECORD_SCHEMA, timezone="UTC"), check_metadata=True)


class TestNoProgress:
    """A read that gets nothing: the topic was re-created (checked every `_RANGE_CHECK_S`
    seconds: fetches at the position of a re-created partition bring nothing), or the broker is
    slow or gone (the poll timeout)."""

    @pytest.fixture(autouse=True)
    def _fast_checks(self, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setattr(partition_reader, "_RANGE_CHECK_S", 0.05)

    def test_partition_ending_below_the_planned_range_is_a_recreated_topic(self) -> None:
        """Planned [10, 12) while the partition now ends at 3: detected at the first range
        check, not after the poll timeout (120 s by default); the consumer is closed."""
        part = _part(10, 12)
        consumer = FakeConsumer([], watermarks=(0, 3))
        pool, _ = _pooled(part, consumer)

        started = time.monotonic()
        with pytest.raises(KafkaTopicRecreatedError) as info:
            list(read_partition(part, pool))

        assert info.value.args == (RECREATED_T0_12,)
        assert time.monotonic() - started < 5
        assert consumer.closed

    def test_recreated_topic_mid_range_fails_after_the_records_still_there(self) -> None:
        """The new topic has records up to 10 (< the planned end 14): read them, then fail."""
        part = _part(10, 14)
        consumer = FakeConsumer([[record(10)]], watermarks=(0, 11))
        pool, _ = _pooled(part, consumer)

        with pytest.raises(KafkaTopicRecreatedError, match=r"^partition t-0 now ends at offset 11 \(it holds \[0, 11\)\), below offset 14 "):
            list(read_partition(part, pool))
        assert consumer.results == []  # record 10 was read first

    def test_recreated_topic_skips_the_range_without_fail_on_data_loss(self) -> None:
        """failOnDataLoss=false: the rest of the range is skipped (the driver then restarts the
        partition at its earliest offset); the consumer is kept."""
        part = _part(10, 12, failOnDataLoss="false")
        consumer = FakeConsumer([], watermarks=(0, 3))
        pool, key = _pooled(part, consumer)

        assert list(read_partition(part, pool)) == []
        assert pool.take(key).consumer is consumer

    def test_a_partition_still_holding_the_range_waits_for_the_poll_timeout(self) -> None:
        """The broker still has the range (a slow fetch): no re-created error; after
        ``kafkaConsumer.pollTimeoutMs`` a timeout naming the broker and the option."""
        part = _part(10, 12, **{"kafkaConsumer.pollTimeoutMs": "300"})
        consumer = FakeConsumer([], watermarks=(0, 12))

        with pytest.raises(KafkaBrokerTimeoutError) as info:
            list(read_partition(part, _pooled(part, consumer)[0]))

        assert info.value.args == (
            "could not read t-0 at offset 10 (planned up to 12) from the broker at 'bootstrap.servers' = "
            "h:9092 within kafkaConsumer.pollTimeoutMs = 300 ms. Check that the broker is running and "
            "reachable, or raise 'kafkaConsumer.pollTimeoutMs' (KafkaStreams: 'task.timeout.ms') to wait longer.",
        )
        assert consumer.watermark_calls >= 2

    def test_an_unreachable_broker_fails_after_the_poll_timeout_with_the_last_error(self) -> None:
        """Offsets cannot be asked either (broker down): wait, then the timeout with its cause."""
        part = _part(10, 12, **{"kafkaConsumer.pollTimeoutMs": "300"})
        consumer = FakeConsumer([], watermarks=RuntimeError("KafkaError{code=_TRANSPORT,val=-195}"))

        with pytest.raises(KafkaBrokerTimeoutError, match=(
            r"^could not read t-0 at offset 10 \(planned up to 12\) from the broker at 'bootstrap.servers' = "
            r"h:9092 within kafkaConsumer.pollTimeoutMs = 300 ms \(KafkaError\{code=_TRANSPORT,val=-195\}\)\. "
        )):
            list(read_partition(part, _pooled(part, consumer)[0]))
