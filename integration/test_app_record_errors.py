"""KafkaStreams reports every record failure as the test driver does: a `RecordError` subclass
whose first line names the processor, the record (topic, partition, offset, key) and the cause,
with Spark's error chained — carried structurally from the worker, not parsed from plan text."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pytest

from streamsdsl import Consumed, Produced, RecordDeserializationError, RecordSerializationError, Serdes
from streamsdsl import SessionWindows, StreamsBuilder, UserFunctionError
from streamsdsl.runtime.app import KafkaStreams, State
from streamsdsl.testing.local_kafka import LocalKafka

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from streamsdsl.ir.topology import Topology

pytestmark = [pytest.mark.integration, pytest.mark.spark]

T = 1_700_000_000_000
STRINGS = Consumed.with_serdes(Serdes.String(), Serdes.String())


def _divide(value: str) -> str:
    return str(1 // (len(value) - 3))  # "bad" has 3 characters


def _fail(value: str) -> str:
    if value == "bad":
        raise ZeroDivisionError("division by zero")
    return value


def _fails_with(topology: Topology, config: dict[str, object], spark: SparkSession, error: type[Exception]) -> str:
    app = KafkaStreams(topology, config, spark=spark)
    app.start()
    try:
        with pytest.raises(error) as raised:
            app.process_all_available()
    finally:
        app.close(60)
    assert app.state() is State.ERROR
    assert raised.value.__cause__ is not None  # Spark's error stays chained
    return str(raised.value).splitlines()[0]


def test_user_function_error_is_not_misreported(
    kafka: LocalKafka, new_topic: Callable[..., str], streams_config: Callable[..., dict[str, object]],
    spark: SparkSession,
) -> None:
    """A map_values that raises is reported as the mapper's error, not as a deserialization
    failure found in the plan's text (finding 1)."""
    source, sink = new_topic(1), new_topic(1)
    b = StreamsBuilder()
    b.stream(source, STRINGS).map_values(_divide).to(sink)
    kafka.produce(source, [(b"k1", b"good", T, 0), (b"k2", b"bad", T + 1, 0)])
    line = _fails_with(b.build(), streams_config("udf"), spark, UserFunctionError)
    assert line == (f"KSTREAM-MAPVALUES-0000000001: the mapper raised ZeroDivisionError: integer division or modulo "
                    f"by zero (record at topic {source} partition 0 offset 1, key 'k2')")


AGGREGATE = "KSTREAM-AGGREGATE-0000000002"
#: kind -> (the grouped stream's aggregation, the records of key "k" (value, timestamp offset),
#: the error class, the first line up to "(record at ...", the failed record's offset)
STATEFUL_KINDS: dict[str, tuple[Callable[[Any], Any], list[tuple[str, int]], type[Exception], str, int]] = {
    "aggregator": (lambda g: g.aggregate(lambda: "", lambda k, v, a: a + _fail(v)), [("good", 0), ("bad", 1)],
                   UserFunctionError, f"{AGGREGATE}: the aggregator raised ZeroDivisionError: division by zero", 1),
    "reducer": (lambda g: g.reduce(lambda a, v: a + _fail(v)), [("good", 0), ("bad", 1)],
                UserFunctionError, "KSTREAM-REDUCE-0000000002: the reducer raised ZeroDivisionError: division by zero",
                1),
    "merger": (lambda g: g.windowed_by(SessionWindows.with_gap(5)).aggregate(
                   lambda: "", lambda k, v, a: a + v, lambda k, a1, a2: _fail("bad")), [("x", 0), ("y", 3)],
               UserFunctionError, f"{AGGREGATE}: the merger raised ZeroDivisionError: division by zero", 1),
    "initializer": (lambda g: g.aggregate(lambda: _fail("bad"), lambda k, v, a: a), [("v", 0)],
                    UserFunctionError, f"{AGGREGATE}: the initializer raised ZeroDivisionError: division by zero", 0),
    "bad-output-type": (lambda g: g.aggregate(lambda: 0, lambda k, v, a: {v}), [("x", 0)], RecordSerializationError,
                        f"{AGGREGATE}: the aggregator returned a result its serde cannot hold: Serdes.Json() cannot "
                        "encode set {'x'}: Object of type set is not JSON serializable. Return JSON-compatible values "
                        "(dict, list, str, int, float, bool, None) from your functions.", 0),
}


@pytest.mark.parametrize("kind", list(STATEFUL_KINDS))
def test_stateful_error_names_processor_and_record(
    kind: str, kafka: LocalKafka, new_topic: Callable[..., str], streams_config: Callable[..., dict[str, object]],
    spark: SparkSession,
) -> None:
    """An aggregator, reducer, session merger or initializer (Python lambdas: the Python operator)
    that raises, or an aggregator whose result its serde cannot hold, fails the app with the
    driver's error: the processor's Kafka name, the record's topic/partition/offset/key, the cause."""
    aggregation, records, error, cause, offset = STATEFUL_KINDS[kind]
    source, sink = new_topic(1), new_topic(1)
    b = StreamsBuilder()
    aggregation(b.stream(source, STRINGS).group_by_key()).to_stream().to(sink)
    kafka.produce(source, [(b"k", v.encode(), T + dt, 0) for v, dt in records])
    line = _fails_with(b.build(), streams_config(kind), spark, error)
    assert line == f"{cause} (record at topic {source} partition 0 offset {offset}, key 'k')"


def test_record_of_the_second_topic_is_located_in_it(
    kafka: LocalKafka, new_topic: Callable[..., str], streams_config: Callable[..., dict[str, object]],
    spark: SparkSession,
) -> None:
    """A merge of two topics: the record of the second topic that fails (in a mapper of that topic,
    before the merge) is named with its own topic, not "?"."""
    first, second, sink = new_topic(1), new_topic(1), new_topic(1)
    b = StreamsBuilder()
    b.stream(first, STRINGS).merge(b.stream(second, STRINGS).map_values(_fail)).to(sink)
    kafka.produce(first, [(b"k1", b"good", T, 0)])
    kafka.produce(second, [(b"k2", b"fine", T, 0), (b"k3", b"bad", T + 1, 0)])
    line = _fails_with(b.build(), streams_config("two-topics"), spark, UserFunctionError)
    assert line == ("KSTREAM-MAPVALUES-0000000002: the mapper raised ZeroDivisionError: division by zero "
                    f"(record at topic {second} partition 0 offset 1, key 'k3')")


def test_deserializer_error_names_source_and_record(
    kafka: LocalKafka, new_topic: Callable[..., str], streams_config: Callable[..., dict[str, object]],
    spark: SparkSession,
) -> None:
    """log_and_fail: bytes the source serde cannot read fail the app with a RecordDeserializationError."""
    source, sink = new_topic(1), new_topic(1)
    b = StreamsBuilder()
    b.stream(source, Consumed.with_serdes(Serdes.String(), Serdes.Long())).to(sink)
    kafka.produce(source, [(b"k1", Serdes.Long().serialize(1), T, 0), (b"k2", b"oops", T + 1, 0)])
    line = _fails_with(b.build(), streams_config("deser"), spark, RecordDeserializationError)
    assert line == ("KSTREAM-SOURCE-0000000000: Serdes.Long() cannot deserialize the record value: expected 8 bytes, "
                    "got 4. Fix the producer or consume the topic with a matching serde (Consumed.with_serdes), or skip such "
                    "records with default.deserialization.exception.handler=log_and_continue (errors.dead.letter.topic "
                    "keeps them) "
                    f"(record at topic {source} partition 0 offset 1, key 'k2')")


def test_serializer_error_names_sink_and_record(
    kafka: LocalKafka, new_topic: Callable[..., str], streams_config: Callable[..., dict[str, object]],
    spark: SparkSession,
) -> None:
    """A sink serde that cannot write the value fails with a RecordSerializationError naming the sink."""
    source, sink = new_topic(1), new_topic(1)
    b = StreamsBuilder()
    b.stream(source, STRINGS).to(sink, Produced.with_serdes(Serdes.String(), Serdes.Long()))
    kafka.produce(source, [(b"k1", b"text", T, 0)])
    line = _fails_with(b.build(), streams_config("ser"), spark, RecordSerializationError)
    assert line == ("KSTREAM-SINK-0000000001: cannot write the record value: Serdes.Long() cannot serialize str 'text': "
                    "expected int. Give the sink a serde for this type (Produced.with_serdes) or map the value to the "
                    f"type its serde writes (record at topic {source} partition 0 offset 0, key 'k1')")


def test_dropped_records_are_logged_with_their_coordinates(
    kafka: LocalKafka, new_topic: Callable[..., str], streams_config: Callable[..., dict[str, object]],
    spark: SparkSession, caplog: pytest.LogCaptureFixture,
) -> None:
    """KafkaStreams logs one warning per skipped record (null key, undeserializable bytes) with
    topic, partition and offset, as Kafka Streams does, and counts it."""
    source, sink = new_topic(1), new_topic(1)
    b = StreamsBuilder()
    b.stream(source, Consumed.with_serdes(Serdes.String(), Serdes.Json())).group_by_key().count().to_stream().to(sink)
    kafka.produce(source, [(b"k1", b'"a"', T, 0), (None, b'"b"', T + 1, 0), (b"\xff", b"c", T + 2, 0)])
    config = streams_config("drops", {"default.deserialization.exception.handler": "log_and_continue"})
    app = KafkaStreams(b.build(), config, spark=spark)
    with caplog.at_level("WARNING", logger="streamsdsl"):
        app.start()
        try:
            app.process_all_available()
            dropped = app.metrics()["dropped-records-total"]
        finally:
            app.close(60)
    assert dropped == 2.0
    skipped = [r.getMessage() for r in caplog.records if "Skipping record" in r.getMessage()]
    assert skipped == [
        f"KSTREAM-AGGREGATE-0000000002: Skipping record due to null key or value. topic=[{source}] partition=[0] "
        f"offset=[1] timestamp=[{T + 1}]",
        f"KSTREAM-SOURCE-0000000000: Skipping record that could not be deserialized (log_and_continue). "
        f"topic=[{source}] partition=[0] offset=[2] timestamp=[{T + 2}] reason=[Serdes.Json() cannot deserialize "
        f"the record value: not valid UTF-8 JSON]",
    ]
