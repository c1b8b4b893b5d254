"""``streamsdsl.backfill``: a topology run once over bounded inputs writes what the
TopologyTestDriver writes for the same records piped in the backfill's order; a streaming
application continues it only where that is true (`check_continuable`)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamsdsl import Consumed, KafkaRange, Serdes, StreamsBuilder, backfill
from streamsdsl.errors import InvalidArgumentError, InvalidTypeError
from streamsdsl.runtime.backfill import ContinuationError, check_continuable
from streamsdsl.runtime.driver import TopologyTestDriver
from tests.test_engines_differential import RECORDS, SHAPES

STRINGS = Consumed.with_serdes(Serdes.String(), Serdes.String())


def _in_backfill_order(records: list[tuple[str, Any, Any, int]], topics: list[str]) -> list[tuple[Any, ...]]:
    """``records`` with their offset in their topic, in the order the backfill processes them:
    per topic in offset order, merged by the largest timestamp of the topic so far, ties by the
    topic's position in ``sources``, then the offset (docs/backfill.md#order)."""
    numbered, offsets, latest = [], dict.fromkeys(topics, 0), dict.fromkeys(topics, -1)
    for topic, key, value, ts in records:
        latest[topic] = max(latest[topic], ts)
        numbered.append(((latest[topic], topics.index(topic), offsets[topic]), topic, key, value, ts, offsets[topic]))
        offsets[topic] += 1
    return [r[1:] for r in sorted(numbered)]


def _driver(topology: Any, ordered: list[tuple[Any, ...]]) -> dict[str, list[tuple[Any, ...]]]:
    with TopologyTestDriver(topology, engine="direct") as d:
        inputs = {t: d.create_input_topic(t) for t in topology.source_topics}
        outputs = {t: d.create_output_topic(t, Serdes.Bytes(), Serdes.Bytes()) for t in topology.sink_topics}
        for topic, key, value, ts, _ in ordered:
            inputs[topic].pipe_input(key, value, ts)
        return {t: [(r.key, r.value, r.timestamp, r.headers) for r in o.read_records_to_list()] for t, o in outputs.items()}


def _backfill(spark: Any, topology: Any, ordered: list[tuple[Any, ...]]) -> dict[str, list[tuple[Any, ...]]]:
    # the rows shuffled: the backfill orders them itself
    sources = {t: spark.createDataFrame([(k, v, ts, o) for topic, k, v, ts, o in reversed(ordered) if topic == t],
                                        "key string, value string, timestamp long, offset long")
               for t in topology.source_topics}
    out = backfill(topology, sources, spark=spark)
    try:
        return {t: [(None if r.key is None else bytes(r.key), None if r.value is None else bytes(r.value), r.timestamp,
                     tuple((h.key, h.value) for h in r.headers)) for r in df.collect()] for t, df in out.items()}
    finally:
        out.release()


@pytest.mark.spark
@settings(max_examples=2, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(shape=st.sampled_from(sorted(SHAPES)), records=RECORDS)
def test_backfill_writes_what_the_driver_writes(spark: Any, shape: str, records: list[tuple[str, Any, Any, int]]) -> None:
    """A conformance topology (the differential menu: every stateful family) over random input
    with late records, ties, null keys and values: the backfill on Spark writes the bytes,
    timestamps, headers and tombstones the direct engine's driver writes, in the same order."""
    b = StreamsBuilder()
    SHAPES[shape](b)
    topology = b.build()
    records = [(t if t in topology.source_topics else topology.source_topics[0], k, v, ts) for t, k, v, ts in records]
    ordered = _in_backfill_order(records, list(topology.source_topics))
    assert _backfill(spark, topology, ordered) == _driver(topology, ordered)


def _counts() -> Any:
    b = StreamsBuilder()
    b.stream("orders", STRINGS).group_by_key().count().to_stream().to("counts")
    return b.build()


def _copy() -> Any:
    b = StreamsBuilder()
    b.stream("orders", STRINGS).map_values(str.upper).to("upper")
    return b.build()


class TestContinuation:
    def test_a_stateful_topology_is_refused_with_the_reason(self) -> None:
        """The state of a streaming query is in its checkpoint's state store, which no batch job writes."""
        with pytest.raises(ContinuationError) as info:
            check_continuable(_counts(), {"orders": {0: 10}})
        assert str(info.value).startswith(
            "a streaming application cannot continue this backfill: KSTREAM-AGGREGATE-0000000002 keep(s) state, "
            "which the streaming query holds in the Spark state store of its checkpoint, and a batch job cannot "
            "write a checkpoint's state store")

    def test_a_dataframe_source_has_no_offset_to_continue_from(self) -> None:
        """A stateless topology continues only from Kafka ranges: their end offsets."""
        check_continuable(_copy(), {"orders": {0: 10}})
        with pytest.raises(ContinuationError, match="it read topic 'orders' from a DataFrame"):
            check_continuable(_copy(), {})


class TestValidation:
    def test_kafka_range_bounds(self) -> None:
        """Bounds are 'earliest'/'latest', an int or {partition: int}; validated when built."""
        assert KafkaRange.offsets("k:9092", {0: 3}, 10).end == 10
        with pytest.raises(InvalidTypeError, match="a KafkaRange bound must be 'earliest', 'latest'"):
            KafkaRange.offsets("k:9092", "first")
        with pytest.raises(InvalidArgumentError, match=r"partitions \(int >= 0\)"):
            KafkaRange.timestamps("k:9092", {0: -1})

    def test_every_source_topic_needs_an_input(self, spark: Any) -> None:
        """A missing topic, an unknown topic and a DataFrame without the record columns are named."""
        df = spark.createDataFrame([], "key string, value string, timestamp long")
        with pytest.raises(InvalidArgumentError, match=r"sources\['payments'\]: no source of the topology reads"):
            backfill(_copy(), {"orders": df, "payments": df})
        with pytest.raises(InvalidArgumentError, match=r"sources\['orders'\] lacks the column\(s\) timestamp"):
            backfill(_copy(), {"orders": df.drop("timestamp")})
