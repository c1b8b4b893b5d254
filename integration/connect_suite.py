"""streamsdsl over Spark Connect (issue 40, item 3): a local Connect server started once from the
installed PySpark (`streamsdsl.testing.connect_server.ConnectServer`: the JVM operator's jar and
its SQL extension, Spark's Kafka connector, RocksDB state), applications run through
``SparkSession.builder.remote("sc://...")``, each checked record for record (keys, values,
timestamps, tombstones) against the same topology on the TopologyTestDriver's direct engine.

One file, one server (module-scoped), run by `integration.test_spark_connect` in a Python process
of its own: PySpark refuses a Connect client (``SESSION_ALREADY_EXIST``) in a process where a
classic session runs, as in a test worker that ran a classic Spark test before. The Connect client
puts its process in Connect mode (``SPARK_CONNECT_MODE_ENABLED``: ``pyspark.sql.functions`` then
builds Connect columns); the fixture restores the environment at the end.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import TYPE_CHECKING

import pytest

from integration.examples import load_example
from streamsdsl import Consumed, JoinWindows, Materialized, Produced, QueryableStoreTypes, Serdes, SessionWindow
from streamsdsl import SessionWindows, StoreQueryParameters, StreamJoined, StreamsBuilder, UserFunctionError, Windowed
from streamsdsl.runtime.app import KafkaStreams, State
from streamsdsl.runtime.connect import ConnectUnsupportedError
from streamsdsl.runtime.driver import TopologyTestDriver
from streamsdsl.runtime.engines import Engine
from streamsdsl.runtime.stores import KeyValue
from streamsdsl.testing.connect_server import ConnectServer
from streamsdsl.testing.local_kafka import LocalKafka
from streamsdsl.values.serdes import WindowedSerdes

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from streamsdsl.ir.topology import Topology

pytestmark = [pytest.mark.integration, pytest.mark.spark]

_CONNECT_ENV = ("SPARK_CONNECT_MODE_ENABLED", "SPARK_REMOTE", "SPARK_LOCAL_REMOTE")


@pytest.fixture(scope="module")
def connect_server() -> Iterator[ConnectServer]:
    """One Spark Connect server for the file, stopped (its process group) at the end, also on failure."""
    with ConnectServer() as server:
        yield server


@pytest.fixture(scope="module")
def remote(connect_server: ConnectServer, kafka: LocalKafka) -> Iterator[SparkSession]:
    """A Spark Connect session on the file's server; the process's Connect mode is undone at the end.
    It depends on ``kafka`` so that the broker outlives the server's Python workers' producers."""
    from pyspark.sql import SparkSession

    saved = {name: os.environ.get(name) for name in _CONNECT_ENV}
    session = SparkSession.builder.remote(connect_server.url).getOrCreate()
    try:
        yield session
    finally:
        try:
            session.stop()
        finally:
            for name, value in saved.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value


@pytest.fixture
def run(remote: SparkSession, connect_server: ConnectServer) -> Callable[..., KafkaStreams]:
    """``run(topology, config, running=None)``: start ``topology`` on the Connect session, process what
    its topics hold, call ``running(app)``, close it; a failure carries the end of the server's log."""

    def run_app(topology: Topology, config: dict[str, object],
                running: Callable[[KafkaStreams], None] | None = None) -> KafkaStreams:
        app = KafkaStreams(topology, config, spark=remote)
        try:
            try:
                app.start()
                app.process_all_available()
                if running is not None:
                    running(app)
            finally:
                app.close(60)
        except Exception as e:
            e.add_note(f"The Spark Connect server's log ends with:\n{connect_server.log_tail()}")
            raise
        assert app.state() is State.NOT_RUNNING
        return app

    return run_app


# -- the TopologyTestDriver's Spark engine (first: on a fresh server) ----------------------------
def test_driver_spark_engine_over_connect(remote: SparkSession) -> None:
    """``TopologyTestDriver(engine="spark", spark=<Connect session>)`` replays the plan on the server
    (first on a fresh server, which has no state store coordinator: the replay needs none) with the
    direct engine's records, stores and metrics: a session count on
    the JVM operator with a dropped record (read from the observations Connect returns with the
    result), and a user processor with a store and a stream-time punctuator."""
    from tests._processor_app import topology as processor_topology

    session_records = [*SESSION_INPUT, ("a", 100_000), ("b", 2_500)]  # the last one is too late: dropped
    results = []
    for engine in ("direct", "spark"):
        spark = remote if engine == "spark" else None
        with TopologyTestDriver(_session_count("in", "out"), {"streamsdsl.operator": "jvm"}, engine=engine,
                                spark=spark) as driver:
            pipe = driver.create_input_topic("in")
            for k, ts in session_records:
                pipe.pipe_input(k, "v", ts)
            out = [(r.key, r.value, r.timestamp) for r in driver.create_output_topic("out").read_records_to_list()]
            results.append((out, driver.metrics()["dropped-records-total"]))
        with TopologyTestDriver(processor_topology(), engine=engine, spark=spark) as driver:
            pipe = driver.create_input_topic("in")
            for k, v, ts in [("a", "x", 10), ("b", "y", 20), ("c", "x", 130)]:
                pipe.pipe_input(k, v, ts)
            out = [(r.key, r.value, r.timestamp) for r in driver.create_output_topic("out").read_records_to_list()]
            results.append((out, sorted((kv.key, kv.value) for kv in driver.get_key_value_store("seen").all())))
    assert results[:2] == results[2:]
    assert results[2][1] == 1.0
    assert results[3] == ([("a", "x@0_0:0/0", 10), ("0_0", "1", 10), ("b", "y@0_0:0/1", 20), ("0_0", "2", 130)],
                          [("x", 130), ("y", 20)])


# -- the quickstart: count paid orders per customer -----------------------------------------------
ORDERS = load_example("quickstart").ORDERS


def _quickstart(orders: str, counts: str) -> Topology:
    """examples/quickstart.py's topology."""
    return load_example("quickstart").build_topology(orders, counts)  # type: ignore[no-any-return]


def test_quickstart_over_connect(run: Callable[..., KafkaStreams], kafka: LocalKafka, new_topic: Callable[..., str],
                                 streams_config: Callable[..., dict[str, object]]) -> None:
    """The quickstart (count paid orders per customer) on a Connect session writes the changelog the
    TopologyTestDriver writes, one update per counted order; its metrics (what it read, what the
    server's Python process wrote) come from the query's progress, which Connect carries."""
    import json

    orders, counts = new_topic(), new_topic()
    kafka.produce(orders, [(k.encode(), json.dumps(v).encode(), ts, None) for k, v, ts in ORDERS])
    topology = _quickstart(orders, counts)
    app = run(topology, streams_config("connect-quickstart", {"max.offsets.per.trigger": 1}))

    with TopologyTestDriver(topology, engine="direct") as driver:
        pipe = driver.create_input_topic(orders)
        for k, v, ts in ORDERS:
            pipe.pipe_input(k, v, ts)
        expected = [(r.key, r.value, r.timestamp) for r in driver.create_output_topic(counts).read_records_to_list()]
    keys, values = Serdes.String(), Serdes.Long()
    got = [(keys.deserialize(r.key), values.deserialize(r.value), r.timestamp) for r in kafka.consume_all(counts)]
    assert got == expected == [("alice", 1, 1_000), ("bob", 1, 2_000), ("alice", 2, 4_000), ("bob", 2, 5_000)]
    metrics = app.metrics()
    assert (metrics["input-records-total"], metrics["output-records-total"]) == (5.0, 4.0)


# -- session windows on the JVM operator: merges and their tombstones ----------------------------
SESSION_INPUT = [("a", 1_000), ("b", 2_000), ("a", 3_000), ("a", 12_000), ("a", 7_500)]


def _session_count(source: str, sink: str) -> Topology:
    builder = StreamsBuilder()
    (builder.stream(source, Consumed.with_serdes(Serdes.String(), Serdes.String()))
     .group_by_key()
     .windowed_by(SessionWindows.of_inactivity_gap_and_grace(timedelta(seconds=5), timedelta(minutes=1)))
     .count(materialized=Materialized.as_("sessions"))
     .to_stream()
     .to(sink, Produced.with_serdes(Serdes.String(), Serdes.Long())))
    return builder.build()


def test_session_count_on_the_jvm_operator_over_connect(
        run: Callable[..., KafkaStreams], kafka: LocalKafka, new_topic: Callable[..., str],
        streams_config: Callable[..., dict[str, object]]) -> None:
    """A session-windowed count with ``streamsdsl.operator = "jvm"`` runs on a Connect session (the
    server's SQL extension puts the JVM operator in the plan) and writes what the TopologyTestDriver
    writes: two merges, each a tombstone per merged session and the merged count, in Kafka Streams'
    session-windowed key format. Its store answers interactive queries while it runs (the server reads
    the checkpoint with Spark's state data source)."""
    source, sink = new_topic(), new_topic()
    kafka.produce(source, [(k.encode(), b"v", ts, None) for k, ts in SESSION_INPUT])
    topology = _session_count(source, sink)
    stored: list[object] = []

    def query(app: KafkaStreams) -> None:
        store = app.store(StoreQueryParameters.from_name_and_type("sessions", QueryableStoreTypes.session_store()))
        stored.extend([store.fetch("a"), store.fetch("b")])

    run(topology, streams_config("connect-sessions", {"max.offsets.per.trigger": 1, "streamsdsl.operator": "jvm"}),
        query)
    assert stored == [[KeyValue(Windowed("a", SessionWindow(1_000, 12_000)), 4)],
                      [KeyValue(Windowed("b", SessionWindow(2_000, 2_000)), 1)]]

    with TopologyTestDriver(topology, engine="direct") as driver:
        pipe = driver.create_input_topic(source)
        for k, ts in SESSION_INPUT:
            pipe.pipe_input(k, "v", ts)
        expected = [(r.key, r.value, r.timestamp) for r in driver.create_output_topic(sink).read_records_to_list()]
    keys, values = WindowedSerdes.session_windowed_serde_from(Serdes.String()), Serdes.Long()
    got = [(keys.deserialize(r.key), values.deserialize(r.value), r.timestamp) for r in kafka.consume_all(sink)]
    assert got == expected
    assert [(w.key, w.window.start, w.window.end, v) for w, v, _ in got] == [
        ("a", 1_000, 1_000, 1), ("b", 2_000, 2_000, 1),
        ("a", 1_000, 1_000, None), ("a", 1_000, 3_000, 2), ("a", 12_000, 12_000, 1),
        ("a", 1_000, 3_000, None), ("a", 12_000, 12_000, None), ("a", 1_000, 12_000, 4),
    ]


# -- a windowed stream-stream join ----------------------------------------------------------------
LEFT = [("k1", "l1", 1_000), ("k2", "l2", 2_000), ("k1", "l3", 9_000)]
RIGHT = [("k1", "r1", 3_000), ("k2", "r4", 4_000), ("k2", "r2", 20_000), ("k1", "r3", 8_000)]


def _join(left: str, right: str, sink: str) -> Topology:
    builder = StreamsBuilder()
    strings = Consumed.with_serdes(Serdes.String(), Serdes.String())
    (builder.stream(left, strings)
     .join(builder.stream(right, strings), lambda lv, rv: f"{lv}+{rv}",
           JoinWindows.of_time_difference_and_grace(timedelta(seconds=5), timedelta(minutes=1)),
           stream_joined=StreamJoined.with_serdes(Serdes.String(), Serdes.String(), Serdes.String()))
     .to(sink, Produced.with_serdes(Serdes.String(), Serdes.String())))
    return builder.build()


def test_windowed_join_over_connect(run: Callable[..., KafkaStreams], kafka: LocalKafka,
                                    new_topic: Callable[..., str],
                                    streams_config: Callable[..., dict[str, object]]) -> None:
    """A windowed stream-stream inner join on a Connect session, reading its topics with Spark's Kafka
    connector (loaded by the server), joins the records the TopologyTestDriver joins (the same keys,
    values and timestamps; micro-batches may order the two topics' records otherwise than one pipe,
    so the records are compared as a set)."""
    left, right, sink = new_topic(), new_topic(), new_topic()
    kafka.produce(left, [(k.encode(), v.encode(), ts, None) for k, v, ts in LEFT])
    kafka.produce(right, [(k.encode(), v.encode(), ts, None) for k, v, ts in RIGHT])
    topology = _join(left, right, sink)
    run(topology, streams_config("connect-join", {"kafka.connector": "jvm"}))

    with TopologyTestDriver(topology, engine="direct") as driver:
        for topic, records in ((left, LEFT), (right, RIGHT)):
            pipe = driver.create_input_topic(topic)
            for k, v, ts in records:
                pipe.pipe_input(k, v, ts)
        expected = [(r.key, r.value, r.timestamp) for r in driver.create_output_topic(sink).read_records_to_list()]
    got = [(r.key.decode(), r.value.decode(), r.timestamp) for r in kafka.consume_all(sink)]
    assert sorted(got) == sorted(expected) == [("k1", "l1+r1", 3_000), ("k1", "l3+r3", 9_000), ("k2", "l2+r4", 4_000)]


# -- a failing record -----------------------------------------------------------------------------
def _divide(value: str) -> str:
    return str(1 // (len(value) - 3))  # "bad" has 3 characters


def test_failing_record_is_reported_over_connect(remote: SparkSession, kafka: LocalKafka,
                                                  new_topic: Callable[..., str],
                                                  streams_config: Callable[..., dict[str, object]]) -> None:
    """A user function that raises on a Connect session is reported as on a classic one: a
    `UserFunctionError` naming the processor, the record and the cause, the application in ``ERROR``."""
    source, sink = new_topic(), new_topic()
    builder = StreamsBuilder()
    builder.stream(source, Consumed.with_serdes(Serdes.String(), Serdes.String())).map_values(_divide).to(sink)
    kafka.produce(source, [(b"k1", b"good", 1_000, None), (b"k2", b"bad", 2_000, None)])
    app = KafkaStreams(builder.build(), streams_config("connect-failure"), spark=remote)
    app.start()
    try:
        with pytest.raises(UserFunctionError) as raised:
            app.process_all_available()
    finally:
        app.close(60)
    assert app.state() is State.ERROR
    assert str(raised.value).splitlines()[0] == (
        f"KSTREAM-MAPVALUES-0000000001: the mapper raised ZeroDivisionError: integer division or modulo by zero "
        f"(record at topic {source} partition 0 offset 1, key 'k2')")


# -- what is refused ----------------------------------------------------------------------------
def test_driver_streaming_engine_is_refused_over_connect(remote: SparkSession) -> None:
    """The driver's streaming engine collects micro-batches into the test process, which Connect cannot:
    refused with the engines that run there."""
    with pytest.raises(ConnectUnsupportedError, match=r"engine='streaming' cannot run on a Spark Connect session.*"
                                                      r"Use engine='spark'"):
        TopologyTestDriver(_session_count("in", "out"), engine=Engine.STREAMING, spark=remote)


def test_exactly_once_is_refused_over_connect(remote: SparkSession, new_topic: Callable[..., str],
                                              streams_config: Callable[..., dict[str, object]]) -> None:
    """``exactly_once_v2`` is refused on a Connect session before anything starts, with the reason and
    the ways out; the application stays ``CREATED``."""
    app = KafkaStreams(_session_count(new_topic(), new_topic()),
                       streams_config("connect-eos", {"processing.guarantee": "exactly_once_v2"}), spark=remote)
    with pytest.raises(ConnectUnsupportedError) as e:
        app.start()
    assert "a Python process of the server" in str(e.value)
    assert "'at_least_once'" in str(e.value)
    assert app.state() is State.CREATED
    app.close()


def test_spark_connect_test_helpers_refuse_bad_input() -> None:
    """The server's settings name a bad port and its range."""
    from streamsdsl.testing.connect_server import server_conf

    with pytest.raises(ValueError, match=r"'port' must be a TCP port, an int in 1\.\.65535 \(got 0\)"):
        server_conf(0)
