"""Global tables (``builder.global_table``) and a stream's join with one: the API and its
errors, describe() as Kafka Streams prints it, the TopologyTestDriver on Kafka's
KStreamGlobalKTableJoinTest / KStreamGlobalKTableLeftJoinTest scenarios (every host), a
global table's records moving no stream time, the join against a reference model (hypothesis),
and a streaming query whose table is updated while it runs (`tests._global_table_app`)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamsdsl import (
    Consumed,
    EmitStrategy,
    GlobalKTable,
    InvalidTypeError,
    JoinWindows,
    Materialized,
    Produced,
    Serdes,
    StreamsBuilder,
    TestRecord,
    TimeWindows,
    TopologyError,
    TopologyTestDriver,
)
from streamsdsl.semantics.stream_table import StreamTableJoin, global_table_reference_run

R = TestRecord
INT_STR = Consumed.with_serdes(Serdes.Integer(), Serdes.String())
STR_STR = Consumed.with_serdes(Serdes.String(), Serdes.String())
OUT = Produced.with_serdes(Serdes.Integer(), Serdes.String())


def joiner(value: Any, table_value: Any) -> str:
    """Kafka's ``MockValueJoiner.TOSTRING_JOINER``: ``v1 + "+" + v2`` (null as "null")."""
    return f"{value}+{'null' if table_value is None else table_value}"


def foreign_key(key: Any, value: str) -> str | None:
    """Kafka's test key mapper: the second comma-separated token of the value, else null."""
    tokens = value.split(",")
    return tokens[1] if len(tokens) > 1 else None


class TestGlobalTableApi:
    def test_describe_as_kafka_prints_it(self) -> None:
        """The global store is a sub-topology of its own, numbered among the others by its
        source's name, printed without a blank line after it; the join is KSTREAM-LEFTJOIN (for
        an inner join too) with no stores. (Kafka Streams 4.0's text, compared in full.)"""
        b = StreamsBuilder()
        customers = b.global_table("customers")
        b.stream("orders").join(customers, lambda k, v: v, joiner).to("out")
        assert b.build().describe() == (
            "Topologies:\n"
            "   Sub-topology: 0 for global store (will not generate tasks)\n"
            "    Source: KSTREAM-SOURCE-0000000001 (topics: [customers])\n"
            "      --> KTABLE-SOURCE-0000000002\n"
            "    Processor: KTABLE-SOURCE-0000000002 (stores: [customers-STATE-STORE-0000000000])\n"
            "      --> none\n"
            "      <-- KSTREAM-SOURCE-0000000001\n"
            "  Sub-topology: 1\n"
            "    Source: KSTREAM-SOURCE-0000000003 (topics: [orders])\n"
            "      --> KSTREAM-LEFTJOIN-0000000004\n"
            "    Processor: KSTREAM-LEFTJOIN-0000000004 (stores: [])\n"
            "      --> KSTREAM-SINK-0000000005\n"
            "      <-- KSTREAM-SOURCE-0000000003\n"
            "    Sink: KSTREAM-SINK-0000000005 (topic: out)\n"
            "      <-- KSTREAM-LEFTJOIN-0000000004\n\n"
        )

    def test_describe_named_after_a_stream(self) -> None:
        """Consumed.as_(name): the source is '<name>-source', the processor '<name>'; a named
        store; a name= join; the global sub-topology last when its source's name sorts last."""
        b = StreamsBuilder()
        orders = b.stream("orders")
        customers = b.global_table("customers", Consumed.as_("cust"), Materialized.as_("cust-store"))
        orders.left_join(customers, lambda k, v: v, joiner, name="enrich").to("out")
        assert customers.queryable_store_name == "cust-store"
        assert b.build().describe() == (
            "Topologies:\n"
            "   Sub-topology: 0\n"
            "    Source: KSTREAM-SOURCE-0000000000 (topics: [orders])\n"
            "      --> enrich\n"
            "    Processor: enrich (stores: [])\n"
            "      --> KSTREAM-SINK-0000000004\n"
            "      <-- KSTREAM-SOURCE-0000000000\n"
            "    Sink: KSTREAM-SINK-0000000004 (topic: out)\n"
            "      <-- enrich\n\n"
            "  Sub-topology: 1 for global store (will not generate tasks)\n"
            "    Source: cust-source (topics: [customers])\n"
            "      --> cust\n"
            "    Processor: cust (stores: [cust-store])\n"
            "      --> none\n"
            "      <-- cust-source\n"
        )

    def test_describe_two_global_tables_and_a_chain(self) -> None:
        """Two global stores, a stream joined with both and counted, another stream: Kafka's
        numbering and order of the four sub-topologies."""
        b = StreamsBuilder()
        g1, g2 = b.global_table("g1"), b.global_table("g2")
        b.stream("orders").join(g1, lambda k, v: v, joiner).left_join(g2, lambda k, v: k, joiner).group_by_key().count()
        b.stream("other").to("x")
        text = b.build().describe()
        assert [line for line in text.splitlines() if "Sub-topology" in line] == [
            "   Sub-topology: 0 for global store (will not generate tasks)",
            "  Sub-topology: 1 for global store (will not generate tasks)",
            "  Sub-topology: 2", "  Sub-topology: 3"]
        assert (
            "    Processor: KTABLE-SOURCE-0000000005 (stores: [g2-STATE-STORE-0000000003])\n"
            "      --> none\n"
            "      <-- KSTREAM-SOURCE-0000000004\n"
            "  Sub-topology: 2\n"
            "    Source: KSTREAM-SOURCE-0000000006 (topics: [orders])\n"
            "      --> KSTREAM-LEFTJOIN-0000000007\n"
            "    Processor: KSTREAM-LEFTJOIN-0000000007 (stores: [])\n"
            "      --> KSTREAM-LEFTJOIN-0000000008\n"
        ) in text
        assert "Sub-topology: 0 for global store (will not generate tasks)" in text.to_mermaid()

    def test_keywords_and_errors(self) -> None:
        """key_selector= and joiner= by keyword; a missing or misshapen function, windows, a
        table of another builder, a topic read twice: errors when written."""
        b = StreamsBuilder()
        s, g = b.stream("a"), b.global_table("g")
        assert isinstance(g, GlobalKTable) and g.queryable_store_name is None
        s.join(g, key_selector=lambda k, v: v, joiner=joiner)
        with pytest.raises(InvalidTypeError, match=r"join\(\) needs key_selector and joiner: join\(key_selector, "
                                                   r"joiner\), e\.g\. join\(global_table, lambda key, value"):
            s.join(g, lambda k, v: v)
        with pytest.raises(InvalidTypeError, match=r"'key_selector' must accept 2 positional arguments \(key, value\)"):
            s.left_join(g, lambda v: v, joiner)
        with pytest.raises(InvalidTypeError, match=r"'joiner' must accept 2 positional arguments \(value, table_value\)"):
            s.join(g, lambda k, v: v, lambda v: v)
        with pytest.raises(ValueError, match="a stream-global-table join\\(\\) takes neither"):
            s.join(g, lambda k, v: v, joiner, stream_joined=object())
        with pytest.raises(ValueError, match="a stream-global-table left_join\\(\\) takes neither"):
            s.left_join(g, joiner, JoinWindows.of_time_difference_with_no_grace(5), key_selector=lambda k, v: v)
        with pytest.raises(TopologyError, match="different StreamsBuilder"):
            s.join(StreamsBuilder().global_table("g"), lambda k, v: v, joiner)
        with pytest.raises(TopologyError, match="Topic 'g' is already consumed"):
            b.global_table("g")
        from streamsdsl import Stores

        with pytest.raises(TopologyError, match="GlobalTables cannot be versioned"):
            b.global_table("v", materialized=Materialized.as_(Stores.persistent_versioned_key_value_store("v", 10)))
        with pytest.raises(InvalidTypeError, match="'other' must be a KStream"):
            s.outer_join(g, joiner)  # type: ignore[arg-type]


    def test_joiner_with_key(self) -> None:
        """A joiner of three arguments is Kafka's ValueJoinerWithKey: it gets the stream record's
        key (not the selected one); a wrong arity names both forms."""
        b = StreamsBuilder()
        g = b.global_table("g", STR_STR)
        s = b.stream("s", STR_STR)
        s.left_join(g, lambda k, v: v, lambda k, v, t: f"{k}:{v}:{t}").to(
            "out", Produced.with_serdes(Serdes.String(), Serdes.String()))
        with pytest.raises(InvalidTypeError, match=r"\(key, value, table_value\)"):
            s.join(g, lambda k, v: v, lambda a, b, c, d: a)
        with TopologyTestDriver(b.build(), engine="direct") as d:
            d.create_input_topic("g", Serdes.String(), Serdes.String()).pipe_input("c1", "Ann", 1)
            d.create_input_topic("s", Serdes.String(), Serdes.String()).pipe_input("o1", "c1", 2)
            out = d.create_output_topic("out", Serdes.String(), Serdes.String())
            assert out.read_records_to_list() == [R("o1", "o1:c1:Ann", 2)]

    def test_explain_and_a_joiner_with_key_on_both_operators(self, spark: Any, operator: str) -> None:
        """explain() names the join's operator (the JVM operator: the joiner per Arrow batch after
        it, a built-in joiner as Spark columns; ``streamsdsl.operator = python`` keeps the Python
        operator); a joiner with the key gets the stream record's key on either operator."""
        from streamsdsl import Joiners, explain

        b = StreamsBuilder()
        g = b.global_table("g", STR_STR)
        s = b.stream("s", STR_STR)
        s.left_join(g, lambda k, v: v, lambda k, v, t: f"{k}:{v}:{t}").to(
            "out", Produced.with_serdes(Serdes.String(), Serdes.String()))
        s.join(g, lambda k, v: v, Joiners.right()).to("right", Produced.with_serdes(Serdes.String(), Serdes.String()))
        topology = b.build()
        text = explain(topology, spark, mode="simple").split("== streamsdsl operators ==")[1]
        assert text.strip() == {
            "jvm": "KSTREAM-LEFTJOIN-0000000004: JVM operator (global-table join, left; "
                   "Python joiner per Arrow batch)\n"
                   "KSTREAM-LEFTJOIN-0000000006: JVM operator (global-table join, inner; "
                   "Joiners.right() as Spark columns)",
            "python": "KSTREAM-LEFTJOIN-0000000004: Python operator (global-table join, left; "
                      "streamsdsl.operator=python)\n"
                      "KSTREAM-LEFTJOIN-0000000006: Python operator (global-table join, inner; "
                      "streamsdsl.operator=python)",
        }[operator]
        with TopologyTestDriver(topology, spark=spark) as d:
            d.create_input_topic("g", Serdes.String(), Serdes.String()).pipe_input("c1", "Ann", 1)
            orders = d.create_input_topic("s", Serdes.String(), Serdes.String())
            orders.pipe_key_value_list([("o1", "c1"), ("o2", "c2")], 2)
            assert d.create_output_topic("out", Serdes.String(), Serdes.String()).read_key_values_to_list() == [
                ("o1", "o1:c1:Ann"), ("o2", "o2:c2:None")]
            assert d.create_output_topic("right", Serdes.String(), Serdes.String()).read_key_values_to_list() == [
                ("o1", "Ann")]


def left_topology() -> Any:
    """KStreamGlobalKTable(Left)JoinTest's topology: an Integer/String stream joined with a
    String/String global table on the value's second token; both joins, one topic each."""
    b = StreamsBuilder()
    stream = b.stream("stream", INT_STR)
    table = b.global_table("global", STR_STR)
    stream.join(table, foreign_key, joiner).to("out", OUT)
    stream.left_join(table, foreign_key, joiner).to("left-out", OUT)
    return b.build()


class Kafka:
    """The driver of `left_topology` with Kafka's test helpers (auto-advancing timestamps from 0
    by 1 ms per record on each input topic, as Kafka's tests create their input topics)."""

    def __init__(self, driver: Any) -> None:
        self.driver = driver
        self.stream = driver.create_input_topic("stream", Serdes.Integer(), Serdes.String())
        self.table = driver.create_input_topic("global", Serdes.String(), Serdes.String())
        self.out = driver.create_output_topic("out", Serdes.Integer(), Serdes.String())
        self.left = driver.create_output_topic("left-out", Serdes.Integer(), Serdes.String())
        self.times = {"stream": 0, "global": 0}

    def _ts(self, topic: str) -> int:
        ts = self.times[topic]
        self.times[topic] += 1
        return ts

    def push_stream(self, count: int, prefix: str, foreign: bool = True, null_key: bool = False) -> None:
        for i in range(count):
            value = f"{prefix}{i}" + (f",FKey{i}" if foreign else "")
            self.stream.pipe_input(None if null_key and i == 0 else i, value, self._ts("stream"))

    def push_table(self, count: int, prefix: str | None) -> None:
        for i in range(count):
            self.table.pipe_input(f"FKey{i}", None if prefix is None else f"{prefix}{i}", self._ts("global"))

    def read(self) -> tuple[list[tuple[Any, str, int]], list[tuple[Any, str, int]]]:
        def plain(topic: Any) -> list[tuple[Any, str, int]]:
            return [(r.key, r.value, r.timestamp) for r in topic.read_records_to_list()]

        return plain(self.out), plain(self.left)


@pytest.mark.spark
class TestGlobalTableJoinDriver:
    @pytest.mark.every_host
    def test_kafka_join_scenarios(self, spark: Any) -> None:
        """shouldNotJoinWithEmptyGlobalTableOnStreamUpdates, shouldNotJoinOnGlobalTableUpdates,
        shouldClearGlobalTableEntryOnNullValueUpdates, shouldNotJoinOnNullKeyMapperValues and
        shouldJoinOnNullKeyWithNonNullKeyMapperValues of both Kafka tests, in one pipe sequence:
        the table's records apply when piped, emit nothing, and do not advance stream time."""
        with TopologyTestDriver(left_topology()) as d:
            k = Kafka(d)
            k.push_stream(2, "X")  # an empty table: nothing (inner), X+null (left)
            assert k.read() == ([], [(0, "X0,FKey0+null", 0), (1, "X1,FKey1+null", 1)])
            k.push_table(2, "Y")  # table updates emit nothing
            assert k.read() == ([], [])
            k.push_stream(4, "X")
            inner = [(0, "X0,FKey0+Y0", 2), (1, "X1,FKey1+Y1", 3)]
            assert k.read() == (inner, [*inner, (2, "X2,FKey2+null", 4), (3, "X3,FKey3+null", 5)])
            k.push_table(4, "YY")
            k.push_stream(4, "X")
            both = [(0, "X0,FKey0+YY0", 6), (1, "X1,FKey1+YY1", 7), (2, "X2,FKey2+YY2", 8), (3, "X3,FKey3+YY3", 9)]
            assert k.read() == (both, both)
            k.push_table(2, None)  # deletes
            k.push_stream(4, "XX")
            assert k.read() == ([(2, "XX2,FKey2+YY2", 12), (3, "XX3,FKey3+YY3", 13)],
                                [(0, "XX0,FKey0+null", 10), (1, "XX1,FKey1+null", 11), (2, "XX2,FKey2+YY2", 12),
                                 (3, "XX3,FKey3+YY3", 13)])
            assert d.metrics()["dropped-records-total"] == 0.0
            k.push_stream(4, "XXX", foreign=False)  # null mapper values: dropped by both joins
            assert k.read() == ([], [])
            assert d.metrics()["dropped-records-total"] == 8.0
            k.push_stream(4, "X", null_key=True)  # a null key with a mapper value: joined by both
            expected = [(None, "X0,FKey0+null", 18), (1, "X1,FKey1+null", 19), (2, "X2,FKey2+YY2", 20),
                        (3, "X3,FKey3+YY3", 21)]
            assert k.read() == ([r for r in expected if not r[1].endswith("null")], expected)
            store = d.get_key_value_store("global-STATE-STORE-0000000001")  # the global store, read-only
            assert [store.get(f"FKey{i}") for i in range(4)] == [None, None, "YY2", "YY3"]

    @pytest.mark.every_host
    @pytest.mark.streaming_host
    def test_global_records_move_no_stream_time(self, spark: Any) -> None:
        """A window that closes on stream time, after the join: a table record far ahead of
        the stream closes nothing (Kafka's global thread does not feed the stream's tasks), and
        a null-value stream record is dropped by the join (counted) before the count."""
        b = StreamsBuilder()
        table = b.global_table("global", STR_STR)
        b.stream("stream", STR_STR).join(table, lambda k, v: v, joiner).group_by_key() \
            .windowed_by(TimeWindows.of_size_with_no_grace(10)).emit_strategy(EmitStrategy.on_window_close()) \
            .count().to_stream().map(lambda k, v: (f"{k.key}@{k.window.start}", v)) \
            .to("out", Produced.with_serdes(Serdes.String(), Serdes.Long()))
        with TopologyTestDriver(b.build()) as d:
            stream = d.create_input_topic("stream", Serdes.String(), Serdes.String())
            glob = d.create_input_topic("global", Serdes.String(), Serdes.String())
            out = d.create_output_topic("out", Serdes.String(), Serdes.Long())
            glob.pipe_input("c1", "Ann", 1_000)
            stream.pipe_input("a", "c1", 1)
            glob.pipe_input("c1", "Bob", 2_000)
            stream.pipe_input("a", "c1", 2)
            stream.pipe_input("a", None, 3)
            assert out.read_records_to_list() == []  # stream time is 2: the window [0, 10) is open
            stream.pipe_input("b", "c1", 10)
            assert out.read_records_to_list() == [R("a@0", 2, 2)]
            assert d.metrics()["dropped-records-total"] == 1.0


# --- the join against a model ---------------------------------------------------------------------

_KEYS = st.sampled_from(["a", "b", "c", None])
_RECORDS = st.lists(st.tuples(st.sampled_from(["stream", "table"]), _KEYS,
                              st.sampled_from(["a", "b", "ab", "x", None]), st.integers(0, 20)), max_size=25)


def _model(records: list[tuple[str, Any, Any, int]], kind: str) -> tuple[list[tuple[Any, Any, int]], int]:
    """The join as Kafka Streams' rules say, written out: a dict for the table, each stream
    record looked up by the first letter of its value (None when it has none)."""
    table: dict[Any, Any] = {}
    out, dropped = [], 0
    for side, key, value, ts in records:
        if side == "table":
            if key is None:
                dropped += 1
            elif value is None:
                table.pop(key, None)
            else:
                table[key] = value
            continue
        selected = value[:1] if value else None
        if value is None or (selected is None and not (kind == "left" and key is None)):
            dropped += 1
            continue
        found = table.get(selected) if selected is not None else None
        if found is not None or kind == "left":
            out.append((key, joiner(value, found), ts))
    return out, dropped


class TestAgainstAModel:
    @settings(max_examples=60, deadline=None)
    @given(records=_RECORDS, kind=st.sampled_from(["inner", "left"]))
    def test_kernel_and_direct_engine(self, records: list[tuple[str, Any, Any, int]], kind: str) -> None:
        """The reference run of the kernel (`global_table_reference_run`) and the direct
        engine's driver give the model's records and drop count, for any interleaving of table
        updates, deletes, null keys and values."""
        expected, dropped = _model(records, kind)
        selector = lambda k, v: v[:1] if v else None  # noqa: E731
        outputs, drops = global_table_reference_run(records, StreamTableJoin(kind), selector, joiner)  # type: ignore[arg-type]
        assert ([(o.key, o.value, o.timestamp) for o in outputs], len(drops)) == (expected, dropped)
        b = StreamsBuilder()
        g = b.global_table("table", STR_STR)
        stream = b.stream("stream", STR_STR)
        (stream.join if kind == "inner" else stream.left_join)(g, selector, joiner).to(
            "out", Produced.with_serdes(Serdes.String(), Serdes.String()))
        with TopologyTestDriver(b.build(), engine="direct") as d:
            topics = {t: d.create_input_topic(t, Serdes.String(), Serdes.String()) for t in ("stream", "table")}
            for side, key, value, ts in records:
                topics[side].pipe_input(key, value, ts)
            got = d.create_output_topic("out", Serdes.String(), Serdes.String()).read_records_to_list()
            assert ([(r.key, r.value, r.timestamp) for r in got], d.metrics()["dropped-records-total"]) == (
                expected, float(dropped))


# --- streaming --------------------------------------------------------------------------------------


@pytest.mark.spark
class TestStreamingGlobalTable:
    def test_updates_while_the_query_runs(self, spark: Any) -> None:
        """`tests._global_table_app` on a streaming query, one micro-batch per file: the first
        batch bootstraps the table (an order before the table's records in the file sees them),
        an update is seen from its own batch on, a delete too (an order of the same batch that
        came before it sees it: the table is as of the batch's end), and the table's
        timestamps, far ahead, close no window of the count; an interactive query reads the
        named global store from the checkpoint."""
        from tests import _global_table_app

        assert _global_table_app.run(spark) == {"enriched": _global_table_app.ENRICHED,
                                                "counts": _global_table_app.COUNTS,
                                                "store": _global_table_app.STORE}

    def test_python_operator_and_a_restart_on_the_other(self, spark: Any, tmp_path: Any) -> None:
        """The join on the Python operator (``streamsdsl.operator = python``; the query above runs
        the JVM operator) gives the same records: the first micro-batch bootstraps the table, an
        update and a delete are seen from their own batch on; a restart of its checkpoint on the
        JVM operator is refused with the fix."""
        from streamsdsl.io.files import FileTopic
        from streamsdsl.jvm import CheckpointOperatorError
        from streamsdsl.runtime.streaming import start_streaming
        from tests import _global_table_app
        from tests._support import Collect

        s = Serdes.String()
        b = StreamsBuilder()
        customers = b.global_table("customers", STR_STR)
        b.stream("orders", STR_STR).left_join(customers, lambda order, customer: customer,
                                              lambda customer, name: f"{customer}:{name}").to("enriched")
        topic, cp = FileTopic(str(tmp_path / "in")), str(tmp_path / "checkpoint")

        def run(operator: str) -> list[tuple[Any, Any, int]]:
            out = Collect()
            query, _, _ = start_streaming(b.build(), lambda n: topic.read_stream(spark, n.topics), out,
                                          checkpoint_location=cp, operator=operator)
            try:
                for batch in _global_table_app.BATCHES[:3]:
                    topic.append_topics(batch, s, s)
                    query.processAllAvailable()
            finally:
                query.stop()
            return [(k, v, ts) for _, k, v, ts in out.records]

        assert run("python") == _global_table_app.ENRICHED[:4]
        with pytest.raises(CheckpointOperatorError, match="set streamsdsl.operator to 'python'"):
            run("jvm")
