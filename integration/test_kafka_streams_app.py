"""`KafkaStreams` end to end against a real broker: topics in, Spark, topics out.

Each test runs on both connectors (``kafka.connector``: the Python data source and Spark's own
Kafka connector) with the same assertions. It produces its input first, runs the application until every record is processed
(`KafkaStreams.process_all_available`, which also waits for the no-data micro-batch in which
windows close), stops it, and reads the output topics back with an ``assign()`` consumer.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import pytest

from streamsdsl import Consumed, EmitStrategy, Produced, Serdes, SessionWindows, StreamsBuilder
from streamsdsl.runtime.app import KafkaStreams, State
from streamsdsl.runtime.state_stores import loaded_state_stores
from streamsdsl.testing.local_kafka import LocalKafka

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from streamsdsl.ir.topology import Topology

pytestmark = [pytest.mark.integration, pytest.mark.spark]

T = 1_700_000_000_000  # a base timestamp (ms)


def _run(topology: Topology, config: dict[str, Any], spark: SparkSession) -> KafkaStreams:
    """Start an application, process everything available, close it; return it (for metrics)."""
    app = KafkaStreams(topology, config, spark=spark)
    app.start()
    try:
        assert app.state() is State.RUNNING
        app.process_all_available()
    finally:
        assert app.close(60), "KafkaStreams.close() did not finish within 60 s"
    assert app.state() is State.NOT_RUNNING
    # closed with its state stores, as Kafka Streams' close(): nothing writes into the checkpoint after it
    assert loaded_state_stores(spark, app.streaming_query.runId, app.config.checkpoint_location) == []
    return app


@pytest.fixture
def run(spark: SparkSession) -> Iterator[Callable[[Topology, dict[str, Any]], KafkaStreams]]:
    yield lambda topology, config: _run(topology, config, spark)


@pytest.fixture(params=["python", "jvm"])
def streams_config(request: pytest.FixtureRequest,
                   streams_config: Callable[..., dict[str, object]]) -> Callable[..., dict[str, object]]:
    """Every test of this module on both connectors (``kafka.connector``): the ``streamsdsl-kafka``
    data source and Spark's own Kafka connector (resolved by ``make install``: a missing
    connector fails the ``jvm`` case with the error naming ``streamsdsl kafka-connector``)."""
    connector = request.param

    def make(app_id: str, overrides: dict[str, object] | None = None) -> dict[str, object]:
        return streams_config(f"{app_id}-{connector}", {"kafka.connector": connector, **(overrides or {})})

    return make


@pytest.mark.parametrize("operator", ["python", "jvm"])
def test_session_windows_emit_on_close_three_partitions_windowed_key_bytes(
    kafka: LocalKafka,
    new_topic: Callable[..., str],
    streams_config: Callable[..., dict[str, object]],
    run: Callable[[Topology, dict[str, Any]], KafkaStreams],
    operator: str,
) -> None:
    """Scenarios 1 and 5: session windows (gap 1 s, no grace) emitted on close, from a
    3-partition topic; each output key is decoded by hand with Kafka Streams' session-windowed
    layout (key bytes + end + start, 8-byte big-endian), values are Serdes.Long(). On both
    operators of the built-in count (``streamsdsl.operator``: ``jvm`` fails if it cannot load)."""
    source, sink = new_topic(3), new_topic(1)
    builder = StreamsBuilder()
    (
        builder.stream(source, Consumed.with_serdes(Serdes.String(), Serdes.String()))
        .group_by_key()
        .windowed_by(SessionWindows.of_inactivity_gap_with_no_grace(1_000))
        .emit_strategy(EmitStrategy.on_window_close())
        .count()
        .to_stream()
        # The inner key serde: a windowed key is written in Kafka Streams' windowed layout.
        .to(sink, Produced.with_serdes(Serdes.String(), Serdes.Long()))
    )
    # Non-decreasing timestamps (nothing is late); each key stays on one partition.
    partition = {"a": 0, "b": 1, "c": 2, "d": 0, "z": 1}
    # T: librdkafka stamps a timestamp of 0 with the current time.
    clicks = [("a", 0), ("b", 100), ("c", 200), ("d", 300), ("a", 500), ("a", 1_400), ("b", 2_000), ("c", 2_100),
              ("z", 10_000)]  # stream time T + 10 s closes every session but z's
    kafka.produce(source, [(k.encode(), b"click", T + ts, partition[k]) for k, ts in clicks])

    app = run(builder.build(), streams_config("sessions", {"streamsdsl.operator": operator}))

    out = []
    for r in kafka.consume_all(sink):
        assert r.key is not None and r.value is not None and len(r.key) > 16
        end, start = struct.unpack(">qq", r.key[-16:])
        out.append((r.key[:-16].decode(), start - T, end - T, struct.unpack(">q", r.value)[0], r.timestamp - T))
    # (key, start, end, count, record timestamp = window end)
    assert sorted(out) == [
        ("a", 0, 1_400, 3, 1_400),
        ("b", 100, 100, 1, 100),
        ("b", 2_000, 2_000, 1, 2_000),
        ("c", 200, 200, 1, 200),
        ("c", 2_100, 2_100, 1, 2_100),
        ("d", 300, 300, 1, 300),
    ]
    metrics = app.metrics()
    assert metrics["emit-final-records-total"] == 6.0
    assert metrics["output-records-total"] == 6.0
    assert metrics["dropped-records-total"] == 0.0


def test_log_and_continue_dead_letter_topic_holds_exactly_the_bad_records(
    kafka: LocalKafka,
    new_topic: Callable[..., str],
    streams_config: Callable[..., dict[str, object]],
    run: Callable[[Topology, dict[str, Any]], KafkaStreams],
) -> None:
    """Scenario 4: with log_and_continue and errors.dead.letter.topic, the bad records land
    raw (key, value, timestamp, their headers) plus the KIP-1034 error headers in the DLQ;
    the good ones are processed; each skipped record is counted."""
    source, sink, dlq = new_topic(1), new_topic(1), new_topic(1)
    builder = StreamsBuilder()
    (
        builder.stream(source, Consumed.with_serdes(Serdes.String(), Serdes.Long()))
        .filter(lambda key, amount: amount > 0)
        .to(sink, Produced.with_serdes(Serdes.String(), Serdes.Long()))
    )
    long = Serdes.Long()
    kafka.produce(source, [
        (b"a", long.serialize(5), 1_000, 0),
        (b"b", b"oops", 2_000, 0, [("trace", b"t-1")]),  # 4 bytes: not a long
        (b"c", long.serialize(-1), 3_000, 0),  # filtered out
        (b"d", long.serialize(7), 4_000, 0),
        (b"e", b"", 5_000, 0),  # 0 bytes: not a long
    ])

    app = run(builder.build(), streams_config("dlq", {
        "default.deserialization.exception.handler": "log_and_continue",
        "errors.dead.letter.topic": dlq,
    }))

    good = [(r.key, long.deserialize(r.value), r.timestamp) for r in kafka.consume_all(sink)]
    assert good == [(b"a", 5, 1_000), (b"d", 7, 4_000)]

    def errors(offset: int, got: int) -> list[tuple[str, bytes]]:
        return [
            ("__streams.errors.exception", b"org.apache.kafka.common.errors.SerializationException"),
            ("__streams.errors.message",
             f"Serdes.Long() cannot deserialize the record value: expected 8 bytes, got {got}".encode()),
            ("__streams.errors.topic", source.encode()),
            ("__streams.errors.partition", b"0"),
            ("__streams.errors.offset", str(offset).encode()),
        ]

    dead = [(r.key, r.value, r.timestamp, r.headers) for r in kafka.consume_all(dlq)]
    assert sorted(dead) == [
        (b"b", b"oops", 2_000, [("trace", b"t-1"), *errors(1, 4)]),
        (b"e", b"", 5_000, errors(4, 0)),
    ]
    metrics = app.metrics()
    assert metrics["dropped-records-total"] == 2.0
    assert metrics["dead-letter-records-total"] == 2.0
    assert metrics["output-records-total"] == 2.0


def test_cogroup_of_three_topics_final_aggregates(
    kafka: LocalKafka,
    new_topic: Callable[..., str],
    streams_config: Callable[..., dict[str, object]],
    run: Callable[[Topology, dict[str, Any]], KafkaStreams],
) -> None:
    """Scenario 2: KIP-150's customer example, cart + purchases + wish list cogrouped into one
    aggregate per customer; the last update per customer is the exact final aggregate."""
    from streamsdsl import Materialized

    cart_t, purchases_t, wish_t, sink = new_topic(1), new_topic(1), new_topic(1), new_topic(1)
    items = Consumed.with_serdes(Serdes.Long(), Serdes.Json())

    def add_to(field: str) -> Callable[[int, dict[str, int], dict[str, list[int]]], dict[str, list[int]]]:
        return lambda customer_id, item, customer: {**customer, field: [*customer[field], item["no"]]}

    builder = StreamsBuilder()
    cart = builder.stream(cart_t, items).group_by_key()
    purchases = builder.stream(purchases_t, items).group_by_key()
    wish_list = builder.stream(wish_t, items).group_by_key()
    (
        cart.cogroup(add_to("cart"))
        .cogroup(purchases, add_to("purchases"))
        .cogroup(wish_list, add_to("wish_list"))
        .aggregate(lambda: {"cart": [], "purchases": [], "wish_list": []}, materialized=Materialized.as_("customers"))
        .to_stream()
        .to(sink, Produced.with_serdes(Serdes.Long(), Serdes.Json()))
    )
    data = {
        cart_t: [(1, 1), (2, 2), (1, 3), (1, 4), (2, 5)],
        purchases_t: [(2, 6), (1, 7), (1, 8), (2, 9), (2, 10)],
        wish_t: [(1, 11), (2, 12), (2, 13), (2, 14), (2, 15)],
    }
    long, json_ = Serdes.Long(), Serdes.Json()
    ts = T
    for topic, records in data.items():
        produced = []
        for customer, no in records:
            ts += 1
            produced.append((long.serialize(customer), json_.serialize({"no": no}), ts, 0))
        kafka.produce(topic, produced)

    run(builder.build(), streams_config("cogroup"))

    final = {long.deserialize(r.key): json_.deserialize(r.value) for r in kafka.consume_all(sink)}
    assert final == {
        1: {"cart": [1, 3, 4], "purchases": [7, 8], "wish_list": [11]},
        2: {"cart": [2, 5], "purchases": [6, 9, 10], "wish_list": [12, 13, 14, 15]},
    }


def test_restart_mid_stream_loses_nothing(
    kafka: LocalKafka,
    new_topic: Callable[..., str],
    streams_config: Callable[..., dict[str, object]],
    spark: SparkSession,
    run: Callable[[Topology, dict[str, Any]], KafkaStreams],
) -> None:
    """Scenario 3: stop the application after its first micro-batch (more input waiting),
    produce more, restart with the same application.id and state.dir: every input record is
    counted once in the final table; duplicates in the output are within the at-least-once
    bound (at most one re-written micro-batch)."""
    import time

    source, sink = new_topic(2), new_topic(1)
    builder = StreamsBuilder()
    (
        builder.stream(source, Consumed.with_serdes(Serdes.String(), Serdes.String()))
        .group_by_key()
        .count()
        .to_stream()
        .to(sink, Produced.with_serdes(Serdes.String(), Serdes.Long()))
    )
    topology = builder.build()
    per_trigger = 4
    config = streams_config("restart", {"max.offsets.per.trigger": per_trigger})
    keys = ["a", "b", "c"]
    first = [(keys[i % 3].encode(), b"x", T + i, i % 2) for i in range(20)]
    kafka.produce(source, first)

    app = KafkaStreams(topology, config, spark=spark)
    app.start()
    try:
        deadline = time.monotonic() + 120
        while app.metrics()["batches-total"] < 1:  # stop mid-stream: after the first batch
            assert time.monotonic() < deadline, "no micro-batch within 120 s"
            assert app.state() is State.RUNNING
            time.sleep(0.05)
    finally:
        assert app.close(60)
    progress = app.streaming_query.lastProgress
    assert progress is not None
    consumed_first = sum(json.loads(progress.sources[0].endOffset)[source].values())

    second = [(keys[i % 3].encode(), b"y", T + 100 + i, i % 2) for i in range(10)]
    kafka.produce(source, second)
    run(topology, config)  # same application.id and state.dir: resumes from the checkpoint

    out = [(r.key.decode(), Serdes.Long().deserialize(r.value)) for r in kafka.consume_all(sink)]
    final = dict(out)  # the last update per key
    everything = first + second
    assert final == {k: sum(1 for r in everything if r[0] == k.encode()) for k in keys}
    assert consumed_first < len(first), "the first run was not stopped mid-stream"
    # Each micro-batch writes at most one update per key; at-least-once may repeat one batch.
    batches = -(-len(everything) // per_trigger)
    assert len(out) <= (batches + 1) * len(keys)
    counts_per_key = {k: [c for key, c in out if key == k] for k in keys}
    for k, counts in counts_per_key.items():
        assert counts == sorted(counts), f"the counts of {k!r} went backwards: {counts}"


def test_backfill_of_a_kafka_range_then_the_application_continues_at_its_end(
    kafka: LocalKafka,
    new_topic: Callable[..., str],
    tmp_path_factory: pytest.TempPathFactory,
    spark: SparkSession,
) -> None:
    """`streamsdsl.backfill` over a bounded range of a 2-partition topic (partition 0 from offset
    1; a range by timestamps resolves to Kafka's offsetsForTimes): the records in Kafka's processing order (per partition in offset order, merged by
    timestamp), written to the sink topic; the streaming application it continues with starts at
    the range's end offsets, so every later record is processed exactly once and none before."""
    from integration.conftest import make_streams_config
    from streamsdsl import KafkaRange, backfill

    source, sink = new_topic(2), new_topic(1)
    builder = StreamsBuilder()
    strings = Consumed.with_serdes(Serdes.String(), Serdes.String())
    builder.stream(source, strings).map_values(str.upper).to(sink, Produced.with_serdes(Serdes.String(), Serdes.String()))
    topology = builder.build()
    kafka.produce(source, [(b"a", b"skipped", T, 0), (b"a", b"a1", T + 10, 0), (b"b", b"b1", T + 5, 1),
                           (b"a", b"a2", T + 3, 0), (b"b", b"b2", T + 20, 1)])

    out = backfill(topology, {source: KafkaRange.offsets(kafka.bootstrap_servers, start={0: 1})}, spark=spark)
    records = [(r.key, r.value, r.timestamp - T) for r in out[sink].collect()]
    # b1 (5) before a1 (10); a2 (3) after a1, its partition's order; b2 (20) last
    assert records == [(b"b", b"B1", 5), (b"a", b"A1", 10), (b"a", b"A2", 3), (b"b", b"B2", 20)]
    assert out.end_offsets == {source: {0: 3, 1: 2}}
    # by timestamp: from the first record at T + 4 or later to before the first at T + 20 or later
    by_time = KafkaRange.timestamps(kafka.bootstrap_servers, start=T + 4, end=T + 20)
    assert by_time.resolve(source) == {0: (1, 3), 1: (0, 1)}
    out.write(kafka.bootstrap_servers)
    out.release()

    kafka.produce(source, [(b"a", b"a3", T + 30, 0), (b"b", b"b3", T + 31, 1)])
    app = out.continue_streaming(make_streams_config(kafka, tmp_path_factory, "backfill"), spark=spark)
    app.start()
    try:
        app.process_all_available()
    finally:
        assert app.close(60)
    written = sorted((r.key, r.value, r.timestamp - T) for r in kafka.consume_all(sink))
    assert written == sorted([*records, (b"a", b"A3", 30), (b"b", b"B3", 31)])

    # a stateful topology: the continued application starts from the backfill's state and stream
    # time, and writes (with the backfill) what the driver writes over all records. Two of the
    # families (tests/runtime/test_backfill.py continues every one, on a memory stream): a count
    # on the JVM operator and a stream-table join's table on the Python operator.
    from tests.runtime.test_backfill import HISTORY, REST, STRING_SINKS, STRINGS, driver_output

    names = {t: new_topic(1) for t in ("orders", "customers", "regions", "counts", "enriched")}
    b = StreamsBuilder()
    orders = b.stream(names["orders"], Consumed.with_serdes(Serdes.String(), Serdes.Long()))
    orders.group_by_key().count().to_stream().to(names["counts"], Produced.with_serdes(Serdes.String(), Serdes.Long()))
    orders.join(b.table(names["customers"], STRINGS), lambda amount, name: f"{name}:{amount}").to(
        names["enriched"], Produced.with_serdes(Serdes.String(), Serdes.String()))
    stateful = b.build()

    def encoded(records: list[tuple[str, Any, Any, int]]) -> Callable[[str], list[tuple[bytes, bytes, int, int]]]:
        def of(topic: str) -> list[tuple[bytes, bytes, int, int]]:
            return [(k.encode(), struct.pack(">q", v) if topic == "orders" else v.encode(), T + ts, 0)
                    for t, k, v, ts in records if t == topic]
        return of

    sources = ("orders", "customers")
    for topic in sources:
        kafka.produce(names[topic], encoded(HISTORY)(topic))
    history = backfill(stateful, {names[t]: KafkaRange.offsets(kafka.bootstrap_servers) for t in sources}, spark=spark)
    history.write(kafka.bootstrap_servers)
    for topic in sources:
        kafka.produce(names[topic], encoded(REST)(topic))
    app = history.continue_streaming(make_streams_config(kafka, tmp_path_factory, "backfill-stateful"), spark=spark)
    history.release()
    app.start()
    try:
        app.process_all_available()
    finally:
        assert app.close(60)
    want = driver_output(stateful, [(t, k, v, T + ts) for t, k, v, ts in [*HISTORY, *REST] if t in sources],
                         names.__getitem__, ("counts", "enriched"))
    for topic, records in want.items():
        decode = (lambda b: b.decode()) if topic in STRING_SINKS else (lambda b: struct.unpack(">q", b)[0])
        written = [(r.key.decode(), None if r.value is None else decode(r.value), r.timestamp)
                   for r in kafka.consume_all(names[topic])]
        assert sorted(written, key=repr) == sorted(records, key=repr), topic
