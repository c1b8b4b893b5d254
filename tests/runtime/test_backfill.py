"""``streamsdsl.backfill``: a topology run once over bounded inputs writes what the
TopologyTestDriver writes for the same records piped in the backfill's order; a streaming
application continues it only where that is true (`check_continuable`)."""

from __future__ import annotations

from typing import Any

import attrs
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamsdsl import Consumed, KafkaRange, Serdes, StreamsBuilder, backfill
from streamsdsl.errors import InvalidArgumentError, InvalidTypeError
from streamsdsl.runtime.backfill import ContinuationError, check_continuable
from streamsdsl.runtime.driver import TopologyTestDriver
from tests.test_engines_differential import FIXED, RECORDS, SHAPES

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
    def test_only_the_nodes_whose_state_cannot_be_handed_on_are_refused(self) -> None:
        """An aggregation's and a table's state are handed to the streaming operators; a node whose
        state is not (here a grouped table's, a stream-stream join's windows, idle close) is
        refused by name, with what is missing."""
        from datetime import timedelta

        from streamsdsl import EmitStrategy, JoinWindows, TimeWindows

        check_continuable(_counts(), {"orders": {0: 10}})
        b = StreamsBuilder()
        orders = b.stream("orders", STRINGS)
        grouped = orders.group_by_key()
        grouped.count().to_stream().to("counts")
        windowed = grouped.windowed_by(TimeWindows.of_size_with_no_grace(10))
        b.table("left", STRINGS).group_by(lambda k, v: (v, v)).count().to_stream().to("tables")
        windowed.emit_strategy(EmitStrategy.on_window_close(idle_close=timedelta(seconds=1))).count().to_stream().to("i")
        orders.join(b.stream("other", STRINGS), lambda a, o: a, JoinWindows.of_time_difference_with_no_grace(5)).to("j")
        with pytest.raises(ContinuationError) as info:
            check_continuable(b.build(), {"orders": {0: 10}, "other": {0: 1}, "left": {0: 1}})
        assert str(info.value) == (
            "a streaming application cannot continue this backfill: "
            "KTABLE-SELECT-0000000008: a table group-by's state (each key's current value, whose old value a change "
            "subtracts) is not handed to the streaming operator yet; "
            "KTABLE-AGGREGATE-0000000012: a table aggregation's state (each group's aggregate) is not handed to the "
            "streaming operator yet; "
            "KSTREAM-AGGREGATE-0000000016: idle close closes an aggregation's windows by the wall-clock time of its "
            "last "
            "record, which a backfill (no wall clock) does not have; continue without idle close; "
            "KSTREAM-MERGE-0000000024: a stream-stream join's window stores (each side's records within the join "
            "window) are not handed to the streaming operator yet. Run the application itself over the history "
            "instead: KafkaStreams with 'auto.offset.reset' = 'earliest' and a new application.id replays the "
            "topics, builds the state and goes on streaming (docs/backfill.md).")

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


def continued_topology(topic: Any = str) -> Any:
    """Every family a continued backfill hands state to: an unwindowed count (Spark's own
    aggregation in the backfill, the operator's state in streaming), a Python aggregate over
    time windows emitted on close, session windows in update mode, suppress (until the window
    closes, and until a time limit), a cogroup, a stream–table and a table–table join.
    ``topic``: each topic's name from its name here (the integration test's are generated)."""
    from streamsdsl import EmitStrategy, Produced, SessionWindows, Suppressed, TimeWindows

    b = StreamsBuilder()
    longs = Consumed.with_serdes(Serdes.String(), Serdes.Long())
    orders = b.stream(topic("orders"), longs)
    grouped = orders.group_by_key()
    grouped.count().to_stream().to(topic("counts"), Produced.with_serdes(Serdes.String(), Serdes.Long()))
    grouped.windowed_by(TimeWindows.of_size_and_grace(10, 5)).emit_strategy(EmitStrategy.on_window_close()).aggregate(
        lambda: 0, lambda k, v, agg: agg + v).to_stream().map(lambda w, v: (f"{w.key}@{w.window.start}", v)).to(
        topic("sums"), Produced.with_serdes(Serdes.String(), Serdes.Long()))
    grouped.windowed_by(SessionWindows.with_gap(10)).count().to_stream().map(
        lambda w, v: (f"{w.key}@{w.window.start}-{w.window.end}", v)).to(
        topic("sessions"), Produced.with_serdes(Serdes.String(), Serdes.Long()))
    fold = Suppressed.until_window_closes(Suppressed.BufferConfig.unbounded())
    grouped.windowed_by(TimeWindows.of_size_and_grace(10, 5)).count().suppress(fold).to_stream().map(
        lambda w, v: (f"{w.key}@{w.window.start}", v)).to(topic("finals"), Produced.with_serdes(Serdes.String(),
                                                                                               Serdes.Long()))
    grouped.reduce(lambda a, v: a + v).suppress(Suppressed.until_time_limit(5, Suppressed.BufferConfig.unbounded())
                                                ).to_stream().to(topic("limited"), Produced.with_serdes(
                                                    Serdes.String(), Serdes.Long()))
    grouped.cogroup(lambda k, v, agg: agg + v).aggregate(lambda: 0).to_stream().to(
        topic("cogrouped"), Produced.with_serdes(Serdes.String(), Serdes.Long()))
    customers = b.table(topic("customers"), STRINGS)
    orders.join(customers, lambda amount, name: f"{name}:{amount}").to(
        topic("enriched"), Produced.with_serdes(Serdes.String(), Serdes.String()))
    customers.join(b.table(topic("regions"), STRINGS), lambda name, region: f"{name}/{region}").to_stream().to(
        topic("placed"), Produced.with_serdes(Serdes.String(), Serdes.String()))
    return b.build()


#: The sink topics of `continued_topology` whose values are strings (the others': longs).
STRING_SINKS = ("enriched", "placed")


#: The sink topics of `continued_topology`.
SINKS = ("counts", "sums", "sessions", "enriched", "finals", "limited", "cogrouped", "placed")


def driver_output(topology: Any, records: list[tuple[str, Any, Any, int]], topic: Any = str,
                  sinks: tuple[str, ...] = SINKS) -> dict[str, list[Any]]:
    """What the driver writes for ``records`` (``(topic, key, value, ts)``) piped into
    `continued_topology` (or a topology of some of its ``sinks``): per sink topic ``(key, value, ts)``, decoded."""
    with TopologyTestDriver(topology, engine="direct") as d:
        inputs = {t: d.create_input_topic(topic(t), Serdes.String(), Serdes.Long() if t == "orders" else Serdes.String())
                  for t in ("orders", "customers", "regions") if topic(t) in topology.source_topics}
        outs = {t: d.create_output_topic(topic(t), Serdes.String(), Serdes.String() if t in STRING_SINKS else Serdes.Long())
                for t in sinks}
        for t, k, v, ts in records:
            inputs[t].pipe_input(k, v, ts)
        return {t: [(r.key, r.value, r.timestamp) for r in o.read_records_to_list()] for t, o in outs.items()}


#: ``(topic, key, value, ts)``: what the backfill reads; stream time at its end is 1015, which
#: closed the window [1000, 1010) (grace 5) and left [1010, 1020) open.
HISTORY = [("customers", "a", "Ann", 990), ("regions", "a", "North", 992), ("customers", "b", "Bob", 995),
            ("regions", "b", "South", 996), ("orders", "a", 1, 1000),
            ("orders", "b", 2, 1003), ("orders", "a", 3, 1008), ("orders", "b", 4, 1012), ("orders", "a", 5, 1015)]
#: The records after it, one micro-batch (one record per key: its net change is the driver's
#: record): b at 1009 is late for [1000, 1010) (stream time 1015 - grace) though the continued
#: query's first watermark is 0; c at 1026 closes [1010, 1020).
REST = [("orders", "b", 7, 1009), ("orders", "a", 6, 1018), ("orders", "c", 8, 1026), ("regions", "a", "East", 1030)]


@pytest.mark.spark
def test_a_streaming_query_continues_a_stateful_backfill(spark: Any, tmp_path: Any, jvm_operator: str) -> None:
    """A backfill of the first records, then a streaming query over the rest that starts from the
    backfill's final state and stream time, writes what the driver writes over all records: the
    count goes on from the backfill's, the window open at the backfill's end gets the later
    records and closes (its timer re-registered), a record late by the backfill's stream time is
    dropped, a session grows, both suppress modes release what they held, the cogroup goes on,
    the stream-table join finds the table values the backfill read and the table-table join the
    other table's."""
    from streamsdsl.runtime.streaming import start_streaming
    from streamsdsl.testing.files import FileTopic
    from tests._support import Collect

    topology = continued_topology()
    want = driver_output(topology, [*HISTORY, *REST])

    sources = {t: spark.createDataFrame([(k, v, ts) for topic, k, v, ts in HISTORY if topic == t],
                                        f"key string, value {'long' if t == 'orders' else 'string'}, timestamp long")
               for t in ("orders", "customers", "regions")}
    out = backfill(topology, sources, spark=spark)
    try:
        got = {t: [(r.key, r.value, r.timestamp) for r in _decoded(out, t)] for t in topology.sink_topics}
        initial = out.final_state()
    finally:
        out.release()
    topic = FileTopic(str(tmp_path / "in"))
    # one micro-batch (the timers fire in the next)
    topic.append_raw([(t, Serdes.String().serialize(k), (Serdes.Long() if t == "orders" else Serdes.String()).serialize(v),
                       ts, []) for t, k, v, ts in REST])
    sink = Collect()
    q, compiled, _ = start_streaming(topology, lambda n: topic.read_stream(spark, n.topics), sink,
                                     checkpoint_location=str(tmp_path / "cp"), initial_state=initial)
    q.processAllAvailable()
    q.stop()
    for t, records in sink.by_topic.items():
        got[t] = got.get(t, []) + [(k, v, ts) for _, k, v, ts in records]
    assert {t: sorted(r, key=repr) for t, r in got.items() if r} == {t: sorted(r, key=repr) for t, r in want.items() if r}
    # both operators start from the backfill's state: the built-in counts on the JVM one (the
    # unwindowed count: Spark's own in the backfill; suppress(until_window_closes) of time windows:
    # the count emitted on close), the Python aggregate, reduce, suppress(until_time_limit), the
    # cogroup and the joins on the Python one
    assert {n: c.backend.value for n, c in compiled.operators.items()} == {
        "KSTREAM-AGGREGATE-0000000002": "jvm", "KSTREAM-AGGREGATE-0000000006": "python",
        "KSTREAM-AGGREGATE-0000000011": "jvm", "KTABLE-SUPPRESS-0000000017": "jvm",
        "KSTREAM-REDUCE-0000000023": "python", "KTABLE-SUPPRESS-0000000024": "python",
        "COGROUPKSTREAM-MERGE-0000000030": "python", "KTABLE-SOURCE-0000000035": "python",
        "KSTREAM-JOIN-0000000036": "python", "KTABLE-SOURCE-0000000040": "python", "KTABLE-MERGE-0000000041": "python"}
    # b's 1009 late; the windows open at the backfill's end closed by c's 1026
    assert sorted(want["sums"]) == [("a@1000", 4, 1008), ("a@1010", 11, 1018), ("b@1000", 2, 1003), ("b@1010", 4, 1012)]


def _decoded(out: Any, topic: str) -> list[Any]:
    sink = out.compiled.sink_for_topic(topic)
    key, value = sink.key_serde, sink.value_serde
    return [type("R", (), {"key": key.deserialize(bytes(r.key)), "value": None if r.value is None else
                           value.deserialize(bytes(r.value)), "timestamp": r.timestamp})
            for r in out[topic].collect()]


def test_a_continued_application_restarts_with_the_backfills_stream_times(tmp_path: Any) -> None:
    """The first start of a continued application records the backfill's stream times in its
    checkpoint; a restart (no initial state: Spark reads one in a query's first batch only)
    compiles with them, so its plan and its operators' stream-time floors stay the first start's."""
    from streamsdsl.compiler.modes import ReplayCarry
    from streamsdsl.runtime.config import StreamsConfig
    from streamsdsl.runtime.wiring import continuation

    config = StreamsConfig.from_mapping({"application.id": "continued", "bootstrap.servers": "b:9092",
                                         "state.dir": str(tmp_path)})
    assert continuation(config) is None
    first = ReplayCarry(states={"n": [("a", [])]}, stream_times={"n": (1015,), "m": (3, 7)})
    assert continuation(attrs.evolve(config, initial_state=first)) is first
    assert continuation(config) == ReplayCarry(stream_times={"n": (1015,), "m": (3, 7)})


@pytest.mark.spark
@pytest.mark.parametrize("shape", ["stream-stream-outer"])
def test_a_backfill_in_blocks_writes_what_the_driver_writes(spark: Any, shape: str,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """More records than `scan.SCAN_BLOCK` (here blocks of two, two topics): the largest
    timestamp of each partition so far, the records' order, the join's times and the record
    that releases each held record are computed per block, and the backfill still writes what
    the driver writes."""
    from streamsdsl.compiler import scan

    monkeypatch.setattr(scan, "SCAN_BLOCK", 2)
    b = StreamsBuilder()
    SHAPES[shape](b)
    topology = b.build()
    records = [(t if t in topology.source_topics else topology.source_topics[0], k, v, ts) for t, k, v, ts in FIXED]
    ordered = _in_backfill_order(records, list(topology.source_topics))
    assert _backfill(spark, topology, ordered) == _driver(topology, ordered)


@pytest.mark.spark
def test_the_input_is_ordered_and_numbered_alike_in_blocks(spark: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The backfill's input in processing order, per block of two records (a sort over all
    partitions, the largest timestamp of each partition so far and the places of records
    without an offset per block) and in one window: the same positions and offsets."""
    from streamsdsl.compiler import scan
    from streamsdsl.runtime.backfill import _raw_records

    b = StreamsBuilder()
    b.stream("in", STRINGS).merge(b.stream("other", STRINGS)).to("out")
    topology = b.build()
    sources = {"in": spark.createDataFrame([("a", "x", 5, 0), ("b", "y", 3, 1), ("a", "z", 9, 2), ("c", "w", 9, 3)],
                                           "key string, value string, timestamp long, offset long"),
               "other": spark.createDataFrame([("a", "p", 4), ("b", "q", 9), ("c", "r", 1), ("d", "s", 9), ("e", "t", 2)],
                                              "key string, value string, timestamp long")}

    def numbered() -> list[tuple[Any, ...]]:
        cached: list[Any] = []
        raw, _, positions = _raw_records(spark, topology, sources, cached)
        rows = sorted((r["_source_position"], r["topic"], r["offset"], bytes(r["key"])) for r in raw.collect())
        for df in cached:
            df.unpersist()
        assert positions == len(rows)
        return rows

    whole = numbered()
    monkeypatch.setattr(scan, "SCAN_BLOCK", 2)
    assert numbered() == whole
    assert [p for p, *_ in whole] == list(range(9))
