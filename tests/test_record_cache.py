"""The record cache as a setting (``statestore.cache.max.bytes``), as in Kafka Streams: with 0
every store write is forwarded; by default the cache is flushed after every record. Each test
runs on both engines of the driver (``make_driver``, the streamsdsl pytest plugin)."""

from __future__ import annotations

from typing import Any

import pytest

from streamsdsl import Consumed, Materialized, Serdes, SessionWindows, StreamsBuilder
from streamsdsl.runtime.config import DriverConfig, StreamsConfig, StreamsConfigError
from streamsdsl.semantics.kernels import FlushPolicy

pytestmark = pytest.mark.spark

STRINGS = Consumed.with_serdes(Serdes.String(), Serdes.String())
NO_CACHE = {"statestore.cache.max.bytes": 0}


def _sessions(make_driver: Any, config: dict[str, Any] | None, records: list[tuple[str, int]],
              cogroup: bool = False) -> list[tuple[Any, ...]]:
    b = StreamsBuilder()
    grouped = b.stream("in", STRINGS).group_by_key()
    windows = SessionWindows.of_inactivity_gap_and_grace(10, 0)
    if cogroup:
        table = grouped.cogroup(lambda k, v, a: a + 1).windowed_by(windows).aggregate(lambda: 0, lambda k, a, b: a + b)
    else:
        table = grouped.windowed_by(windows).count()
    table.to_stream().to("out")
    with make_driver(b.build(), config) as d:
        topic = d.create_input_topic("in")
        for key, ts in records:
            topic.pipe_input(key, "v", ts)
        return [(r.key.key, r.key.window.start, r.key.window.end, r.value, r.timestamp)
                for r in d.create_output_topic("out").read_records_to_list()]


@pytest.mark.parametrize("cogroup", [False, True], ids=["count", "cogroup"])
def test_no_cache_forwards_the_tombstone_of_a_session_rewritten_in_place(make_driver: Any, cogroup: bool) -> None:
    """A record inside an existing session [0, 10]: Kafka removes the session and puts the merged
    one with the same bounds (KStreamSessionWindowAggregate.process). Without a cache both writes
    are forwarded (the tombstone, then the new count); with the cache only the new count."""
    records = [("a", 0), ("a", 10), ("a", 5)]
    cached = _sessions(make_driver, None, records, cogroup)
    uncached = _sessions(make_driver, NO_CACHE, records, cogroup)
    first = [("a", 0, 0, 1, 0), ("a", 0, 0, None, 0), ("a", 0, 10, 2, 10)]
    assert cached == [*first, ("a", 0, 10, 3, 10)]
    assert uncached == [*first, ("a", 0, 10, None, 10), ("a", 0, 10, 3, 10)]


def test_no_cache_forwards_a_tombstone_for_an_absent_table_key(make_driver: Any) -> None:
    """A materialized table source: a tombstone for a key the table does not hold is forwarded
    without a cache (Kafka's TimestampedTupleForwarder forwards every write) and not with one
    (an unmaterialized source forwards every record either way)."""
    def run(config: dict[str, Any] | None) -> list[tuple[Any, ...]]:
        b = StreamsBuilder()
        b.table("in", STRINGS, materialized=Materialized.as_("table")).to_stream().to("out")
        with make_driver(b.build(), config) as d:
            topic = d.create_input_topic("in")
            topic.pipe_input("a", "x", 1)
            topic.pipe_input("b", None, 2)
            topic.pipe_input("a", None, 3)
            return [(r.key, r.value, r.timestamp) for r in d.create_output_topic("out").read_records_to_list()]

    assert run(None) == [("a", "x", 1), ("a", None, 3)]
    assert run(NO_CACHE) == [("a", "x", 1), ("b", None, 2), ("a", None, 3)]


class TestConfig:
    def test_deprecated_name_and_the_flush_policy(self) -> None:
        """``cache.max.bytes.buffering`` is the deprecated name; 0 means every write is forwarded,
        any other size (or none) a cache flushed after every record."""
        assert DriverConfig.from_mapping({"cache.max.bytes.buffering": "0"}).flush is FlushPolicy.EVERY_WRITE
        assert DriverConfig.from_mapping({"statestore.cache.max.bytes": 10_485_760}).flush is FlushPolicy.PER_RECORD
        assert DriverConfig.from_mapping({}).flush is FlushPolicy.PER_RECORD

    def test_disagreeing_names_and_a_negative_size_are_refused(self) -> None:
        """Both names with different sizes, or a negative size, name the key and the fix."""
        with pytest.raises(StreamsConfigError) as caught:
            DriverConfig.from_mapping({"statestore.cache.max.bytes": 0, "cache.max.bytes.buffering": 100})
        assert str(caught.value) == ("'statestore.cache.max.bytes' (0) and its deprecated name "
                                     "'cache.max.bytes.buffering' (100) disagree; set only 'statestore.cache.max.bytes'.")
        with pytest.raises(StreamsConfigError, match=r"^'statestore.cache.max.bytes' must be an integer >= 0 \(got -1\)"):
            DriverConfig.from_mapping({"statestore.cache.max.bytes": -1})

    def test_streaming_refuses_no_cache_with_the_reason(self) -> None:
        """A streaming query forwards the net change per micro-batch: 0 is refused, saying why."""
        with pytest.raises(StreamsConfigError) as caught:
            StreamsConfig.from_mapping({"application.id": "a", "bootstrap.servers": "k:9092",
                                        "statestore.cache.max.bytes": 0})
        assert str(caught.value).startswith("'statestore.cache.max.bytes' = 0 is not supported on a streaming query")
