"""A pattern source on a real broker, on both connectors: ``builder.stream(re.compile(...))``
reads a topic created after the application started, from its earliest offset, at the next
micro-batch planning (docs/kafka.md#topic-patterns)."""

from __future__ import annotations

import logging
import re
import time
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING

import pytest

from streamsdsl import Consumed, Produced, Serdes, StreamsBuilder
from streamsdsl.runtime.app import KafkaStreams, State
from streamsdsl.testing.local_kafka import LocalKafka

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = [pytest.mark.integration, pytest.mark.spark]

T = 1_700_000_000_000  # a base timestamp (ms)
log = logging.getLogger(__name__)


def _await_records(kafka: LocalKafka, topic: str, count: int, timeout: float) -> list[tuple[str, str, int | None]]:
    """The records of ``topic`` once it holds ``count`` of them (fails after ``timeout`` seconds)."""
    deadline = time.monotonic() + timeout
    while True:
        got = [(r.key.decode(), r.value.decode(), r.timestamp) for r in kafka.consume_all(topic)
               if r.key is not None and r.value is not None]
        if len(got) >= count or time.monotonic() > deadline:
            return got
        time.sleep(0.2)


@pytest.mark.parametrize("connector", ["python", "jvm"])
def test_a_topic_created_after_the_start_is_read_from_its_earliest_offset(
    connector: str, kafka: LocalKafka, spark: SparkSession, streams_config: Callable[..., dict[str, object]],
) -> None:
    """Started at ``latest`` on the one matching topic: the record written there before the start is
    not read, one written after it is; then a second matching topic is created (two partitions)
    and written to at once: all its records arrive (its offsets start at the earliest, not at
    where the topic stood when the source found it); a topic the pattern does not match in full
    is not read. The time from the new topic's write to its output is logged (docs/kafka.md)."""
    prefix = f"pat-{connector}-{uuid.uuid4().hex[:6]}"
    first, sink = f"{prefix}-orders-eu", f"{prefix}-out"
    kafka.create_topic(first, 1)
    kafka.create_topic(sink, 1)
    kafka.produce(first, [(b"before", b"skipped", T, 0)])
    builder = StreamsBuilder()
    (builder.stream(re.compile(re.escape(prefix) + "-orders-[a-z]+"), Consumed.with_serdes(Serdes.String(), Serdes.String()))
     .map_values(lambda v: v.upper())
     .to(sink, Produced.with_serdes(Serdes.String(), Serdes.String())))
    app = KafkaStreams(builder.build(), streams_config(f"patterns-{connector}", {
        "kafka.connector": connector, "auto.offset.reset": "latest"}), spark=spark)
    app.start()
    try:
        deadline = time.monotonic() + 120
        while app.metrics()["batches-total"] < 1:  # the start offsets ("latest") are fixed
            assert time.monotonic() < deadline, "no micro-batch within 120 s"
            assert app.state() is State.RUNNING
            time.sleep(0.05)
        kafka.produce(first, [(b"k1", b"a", T + 1, 0)])
        assert _await_records(kafka, sink, 1, 120) == [("k1", "A", T + 1)], app.streaming_query.lastProgress

        second, other = f"{prefix}-orders-us", f"{prefix}-orders-us-old"
        kafka.create_topic(other, 1)
        kafka.create_topic(second, 2)
        written, batches = time.monotonic(), app.metrics()["batches-total"]
        kafka.produce(other, [(b"k9", b"not-matched", T + 9, 0)])
        kafka.produce(second, [(b"k2", b"b", T + 2, 0), (b"k3", b"c", T + 3, 1), (b"k4", b"d", T + 4, 1)])
        out = _await_records(kafka, sink, 4, 120)
        seen, batches = time.monotonic() - written, app.metrics()["batches-total"] - batches
        log.warning("topic pattern, %s connector: a new topic's records reached the sink %.1f s (%d micro-batches) "
                    "after they were written", connector, seen, batches)
        assert sorted(out) == [("k1", "A", T + 1), ("k2", "B", T + 2), ("k3", "C", T + 3), ("k4", "D", T + 4)], (
            app.streaming_query.lastProgress)
        time.sleep(1)  # a stray record of the unmatched topic would be there by now
        assert len(_await_records(kafka, sink, 5, 0)) == 4
    finally:
        assert app.close(60)
