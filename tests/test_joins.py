"""Tables (builder.table, to_table), stream-table joins and split: API, describe(), the
TopologyTestDriver (Kafka's KStreamKTableJoinTest / KStreamKTableLeftJoinTest scenarios) and a
streaming query restarted from its checkpoint."""

from __future__ import annotations

from typing import Any

import pytest

from streamsdsl import (
    Consumed,
    InvalidTypeError,
    Materialized,
    Produced,
    Serdes,
    StreamsBuilder,
    TestRecord,
    Joiners,
    TimeWindows,
    explain,
)
from streamsdsl.dsl.api import Branched
from streamsdsl.errors import UserFunctionError
from streamsdsl.jvm import CheckpointOperatorError

R = TestRecord
INT_STR = Consumed.with_serdes(Serdes.Integer(), Serdes.String())
OUT = Produced.with_serdes(Serdes.Integer(), Serdes.String())


def joiner(value: Any, table_value: Any) -> str:
    """Kafka's test joiner ``v1 + "+" + v2`` (Java renders null as "null")."""
    return f"{value}+{'null' if table_value is None else table_value}"


def join_topology(*, left: bool = False) -> Any:
    b = StreamsBuilder()
    stream = b.stream("stream", INT_STR)
    table = b.table("table", INT_STR)
    stream.join(table, joiner).to("out", OUT)
    stream.left_join(table, joiner).to("left-out", OUT)
    return b.build()


JSONS = Consumed.with_serdes(Serdes.String(), Serdes.Json())


def builtin_joiners_topology() -> Any:
    """Orders (JSON) joined with customers (JSON) and names (strings) by each built-in joiner."""
    b = StreamsBuilder()
    orders = b.stream("orders", JSONS)
    customers, names = b.table("customers", JSONS), b.table("names", Consumed.with_serdes(Serdes.String(), Serdes.String()))
    orders.left_join(customers, Joiners.merge()).to("merged")
    orders.left_join(customers, Joiners.pair()).to("pair")
    orders.join(names, Joiners.right()).to("right")
    orders.left_join(names, Joiners.left()).to("left")
    return b.build()


class TestTableApi:
    def test_describe_join(self) -> None:
        """KSTREAM-JOIN is fed by the stream only and connected to the table source's store,
        which the join materializes (named <topic>-STATE-STORE-<n>, its index taken first)."""
        b = StreamsBuilder()
        b.stream("stream", INT_STR).join(b.table("table", INT_STR), joiner).to("out")
        assert b.build().describe() == (
            "Topologies:\n"
            "   Sub-topology: 0\n"
            "    Source: KSTREAM-SOURCE-0000000000 (topics: [stream])\n"
            "      --> KSTREAM-JOIN-0000000004\n"
            "    Processor: KSTREAM-JOIN-0000000004 (stores: [table-STATE-STORE-0000000001])\n"
            "      --> KSTREAM-SINK-0000000005\n"
            "      <-- KSTREAM-SOURCE-0000000000\n"
            "    Source: KSTREAM-SOURCE-0000000002 (topics: [table])\n"
            "      --> KTABLE-SOURCE-0000000003\n"
            "    Sink: KSTREAM-SINK-0000000005 (topic: out)\n"
            "      <-- KSTREAM-JOIN-0000000004\n"
            "    Processor: KTABLE-SOURCE-0000000003 (stores: [table-STATE-STORE-0000000001])\n"
            "      --> none\n"
            "      <-- KSTREAM-SOURCE-0000000002\n\n"
        )

    def test_describe_named_left_join_and_table(self) -> None:
        """A named table is '<name>-table-source' read by source '<name>'; a name= join keeps
        its name; an unjoined, unnamed table has no store; to_table is KSTREAM-TOTABLE."""
        b = StreamsBuilder()
        b.table("lonely", name="lonely").to_stream().to("lonely-out")
        b.stream("s").left_join(b.table("t", materialized=Materialized.as_("t-store")), joiner, name="enrich").to("o")
        b.stream("u").to_table().to_stream().to("u-out")
        text = b.build().describe()
        assert (
            "    Source: lonely (topics: [lonely])\n"
            "      --> lonely-table-source\n"
            "    Processor: lonely-table-source (stores: [])\n"
        ) in text
        assert (
            "  Sub-topology: 1\n"
            "    Source: KSTREAM-SOURCE-0000000005 (topics: [s])\n"
            "      --> enrich\n"
            "    Source: KSTREAM-SOURCE-0000000006 (topics: [t])\n"
            "      --> KTABLE-SOURCE-0000000007\n"
            "    Processor: enrich (stores: [t-store])\n"
            "      --> KSTREAM-SINK-0000000009\n"
            "      <-- KSTREAM-SOURCE-0000000005\n"
            "    Sink: KSTREAM-SINK-0000000009 (topic: o)\n"
            "      <-- enrich\n"
            "    Processor: KTABLE-SOURCE-0000000007 (stores: [t-store])\n"
            "      --> none\n"
            "      <-- KSTREAM-SOURCE-0000000006\n\n"
            "  Sub-topology: 2\n"
            "    Source: KSTREAM-SOURCE-0000000010 (topics: [u])\n"
            "      --> KSTREAM-TOTABLE-0000000011\n"
            "    Processor: KSTREAM-TOTABLE-0000000011 (stores: [])\n"
        ) in text

    def test_stream_stream_join_needs_windows(self) -> None:
        """A KStream other is a windowed stream-stream join (tests/test_stream_joins.py): without
        windows it fails when written; outer_join() with a KTable names the fix."""
        b = StreamsBuilder()
        with pytest.raises(ValueError, match=r"'windows' is required.*JoinWindows.of_time_difference_with_no_grace"):
            b.stream("a").join(b.stream("b"), joiner)
        with pytest.raises(InvalidTypeError, match=r"outer_join\(\) joins two KStreams.*Use left_join\(table, joiner\)"):
            b.stream("c").outer_join(b.table("t"), joiner)  # type: ignore[arg-type]

    def test_early_errors(self) -> None:
        """Wrong stage, bad arity, windows on a stream-table join, a windowed table: errors when written."""
        b = StreamsBuilder()
        s, t = b.stream("a"), b.table("t")
        with pytest.raises(InvalidTypeError, match=r"'joiner' must accept 2 positional arguments \(value, table_value\)"):
            s.join(t, lambda v: v)
        with pytest.raises(InvalidTypeError, match="'other' must be a KTable"):
            s.join("t", joiner)  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="'windows' and 'stream_joined' belong to a stream-stream join"):
            s.join(t, joiner, TimeWindows.of_size_with_no_grace(5))
        windowed = s.group_by_key().windowed_by(TimeWindows.of_size_with_no_grace(5)).count()
        with pytest.raises(InvalidTypeError, match="windowed KTable"):
            s.join(windowed, joiner)
        with pytest.raises(InvalidTypeError, match=r"KTable\.left_join\(\) joins two KTables \(got a KStream\)"):
            t.left_join(s, joiner)  # type: ignore[arg-type]
        with pytest.raises(InvalidTypeError, match=r"'predicate' must accept 2 positional arguments \(key, value\)"):
            s.split().branch(lambda v: True)

    def test_split_names(self) -> None:
        """BranchedKStream names: <prefix><name> or <prefix><index> (1-based; default 0); the
        generated prefix is the splitter's own name."""
        b = StreamsBuilder()
        branches = b.stream("in").split().branch(lambda k, v: True).branch(
            lambda k, v: True, Branched.with_name("b")).default_branch()
        assert list(branches) == ["KSTREAM-BRANCH-00000000011", "KSTREAM-BRANCH-0000000001b",
                                  "KSTREAM-BRANCH-00000000010"]
        named = StreamsBuilder().stream("in").split(named="s-").branch(lambda k, v: True).no_default_branch()
        assert list(named) == ["s-1"]

    def test_explain_names_the_operator(self, spark: Any, operator: str) -> None:
        """explain() names the join's operator: the JVM operator, the joiner run per Arrow batch
        after it, a built-in joiner as Spark columns (no Python in the plan);
        ``streamsdsl.operator=python`` keeps the Python operator."""
        text = explain(join_topology(), spark, mode="simple")
        assert ("KSTREAM-JOIN-0000000004: JVM operator (stream-table join, inner; Python joiner per Arrow batch)"
                if operator == "jvm" else
                "KSTREAM-JOIN-0000000004: Python operator (stream-table join, inner; "
                "streamsdsl.operator=python)") in text
        if operator == "jvm":
            text = explain(builtin_joiners_topology(), spark, mode="simple")
            assert [line for line in text.splitlines() if "JOIN" in line and "operator (" in line] == [
                "KSTREAM-LEFTJOIN-0000000007: JVM operator (stream-table join, left; Joiners.merge() as Spark columns)",
                "KSTREAM-LEFTJOIN-0000000009: JVM operator (stream-table join, left; Joiners.pair() as Spark columns)",
                "KSTREAM-JOIN-0000000011: JVM operator (stream-table join, inner; Joiners.right() as Spark columns)",
                "KSTREAM-LEFTJOIN-0000000013: JVM operator (stream-table join, left; Joiners.left() as Spark columns)"]
            assert "ArrowEvalPython" not in text and "MapInArrow" not in text


@pytest.mark.spark
class TestStreamTableJoinDriver:
    @pytest.mark.streaming_host
    def test_kafka_join_scenarios(self, spark: Any) -> None:
        """KStreamKTableJoinTest / KStreamKTableLeftJoinTest, in one pipe sequence:
        shouldNotJoinWithEmptyTableOnStreamUpdates, shouldNotJoinOnTableUpdates,
        shouldJoinOnlyIfMatchFoundOnStreamUpdates, shouldClearTableEntryOnNullValueUpdates,
        shouldLogAndMeterWhenSkippingNullLeftKey / NullLeftValue; a second run continues from
        the table state the first left."""
        from streamsdsl.runtime.driver import TopologyTestDriver

        with TopologyTestDriver(join_topology()) as d:
            stream = d.create_input_topic("stream", Serdes.Integer(), Serdes.String())
            table = d.create_input_topic("table", Serdes.Integer(), Serdes.String())
            out = d.create_output_topic("out", Serdes.Integer(), Serdes.String())
            left = d.create_output_topic("left-out", Serdes.Integer(), Serdes.String())
            for k in (0, 1):  # empty table: nothing (inner), X+null (left)
                stream.pipe_input(k, f"X{k}", k)
            for k in (0, 1):  # table updates emit nothing
                table.pipe_input(k, f"Y{k}", 10 + k)
            for k in (0, 1, 2, 3):  # only keys in the table join
                stream.pipe_input(k, f"X{k}", 20 + k)
            stream.pipe_input(None, "XN", 30)  # null key: dropped (inner), joined with null (left, KIP-962)
            stream.pipe_input(2, None, 31)  # null value: dropped by both
            assert out.read_records_to_list() == [R(0, "X0+Y0", 20), R(1, "X1+Y1", 21)]
            assert left.read_records_to_list() == [
                R(0, "X0+null", 0), R(1, "X1+null", 1), R(0, "X0+Y0", 20), R(1, "X1+Y1", 21), R(2, "X2+null", 22),
                R(3, "X3+null", 23), R(None, "XN+null", 30)]
            assert d.metrics()["dropped-records-total"] == 3.0

            table.pipe_input(0, None, 40)  # a tombstone clears the entry; out-of-order updates replace
            table.pipe_input(1, "Y1'", 5)
            for k in (0, 1):
                stream.pipe_input(k, f"X{k}", 50 + k)
            assert out.read_records_to_list() == [R(1, "X1+Y1'", 51)]
            assert left.read_records_to_list() == [R(0, "X0+null", 50), R(1, "X1+Y1'", 51)]


@pytest.mark.spark
class TestBuiltinJoiners:
    @pytest.mark.parametrize("engine_operator", ["direct", "jvm"])
    def test_each_joiner_records(self, request: pytest.FixtureRequest, engine_operator: str,
                                 monkeypatch: pytest.MonkeyPatch) -> None:
        """Joiners.merge(), pair(), right() and left() give the same records in the direct engine
        (the Python functions, as the Python operator calls them) and on the JVM operator (Spark
        columns): merge puts the table's fields over the order's, a missing side gives the other;
        pair keeps both (None for a missing one); JSON text of nested values and of strings with
        quotes and newlines as Python writes it; a JSON ``null`` order is dropped and a JSON
        ``null`` customer deletes it, as the Python operator decodes them."""
        from streamsdsl.jvm import OPERATOR_ENV
        from streamsdsl.runtime.driver import TopologyTestDriver

        monkeypatch.setenv(OPERATOR_ENV, "jvm")
        customer = {"name": "Ann", "n": 2, "x": [1, {"y": "a,b"}]}
        engine = "direct" if engine_operator == "direct" else "spark"
        spark = request.getfixturevalue("spark") if engine == "spark" else None
        with TopologyTestDriver(builtin_joiners_topology(), engine=engine, spark=spark) as d:
            orders, customers = d.create_input_topic("orders"), d.create_input_topic("customers")
            names = d.create_input_topic("names", Serdes.String(), Serdes.String())
            orders.pipe_input("c1", {"item": "a", "n": 1}, 1)
            customers.pipe_input("c1", customer, 2)
            names.pipe_input("c1", 'Ann "A"\n', 2)
            orders.pipe_input("c1", {"item": "b", "n": 1, "z": None}, 3)
            orders.pipe_input(None, {"item": "d"}, 5)
            d.create_input_topic("orders", Serdes.String(), Serdes.Bytes()).pipe_input("c1", b"null", 6)  # dropped
            d.create_input_topic("customers", Serdes.String(), Serdes.Bytes()).pipe_input("c1", b" null", 7)  # deleted
            orders.pipe_input("c1", {"item": "e"}, 8)
            got = {t: [(r.key, r.value, r.timestamp) for r in d.create_output_topic(t).read_records_to_list()]
                   for t in ("merged", "pair", "right", "left")}
        assert got == {
            "merged": [("c1", {"item": "a", "n": 1}, 1), ("c1", {"item": "b", "n": 2, "z": None, "name": "Ann",
                                                               "x": [1, {"y": "a,b"}]}, 3), (None, {"item": "d"}, 5),
                       ("c1", {"item": "e"}, 8)],
            "pair": [("c1", [{"item": "a", "n": 1}, None], 1), ("c1", [{"item": "b", "n": 1, "z": None}, customer], 3),
                     (None, [{"item": "d"}, None], 5), ("c1", [{"item": "e"}, None], 8)],
            "right": [("c1", 'Ann "A"\n', 3), ("c1", 'Ann "A"\n', 8)],
            "left": [("c1", {"item": "a", "n": 1}, 1), ("c1", {"item": "b", "n": 1, "z": None}, 3),
                     (None, {"item": "d"}, 5), ("c1", {"item": "e"}, 8)],
        }

    @pytest.mark.parametrize("engine_operator", ["direct", "jvm"])
    @pytest.mark.parametrize("joiner, cause", [
        (Joiners.merge(), "Joiners.merge() joins two JSON objects (dicts); the other value is a list. Use "
                          "Joiners.pair() to keep both values, or a joiner of your own."),
        (lambda order, customer: order["item"] + (customer[0] if customer else ""),
         'TypeError: can only concatenate str (not "int") to str'),
    ], ids=["merge", "python"])
    def test_a_failing_joiner_is_the_joiners_error(self, request: pytest.FixtureRequest, engine_operator: str,
                                                   joiner: Any, cause: str, monkeypatch: pytest.MonkeyPatch) -> None:
        """A joiner that fails for a record (Joiners.merge() of a value that is not a JSON object;
        a Python joiner that raises) is reported as on the Python operator: the processor, the
        record, the cause; on the JVM operator too, where the joiner runs after it (Spark columns,
        a batch at a time). The record before it keeps its output."""
        from streamsdsl.jvm import OPERATOR_ENV
        from streamsdsl.runtime.driver import TopologyTestDriver

        monkeypatch.setenv(OPERATOR_ENV, "jvm")
        b = StreamsBuilder()
        b.stream("orders", JSONS).left_join(b.table("customers", JSONS), joiner).to("out")
        engine = "direct" if engine_operator == "direct" else "spark"
        spark = request.getfixturevalue("spark") if engine == "spark" else None
        with TopologyTestDriver(b.build(), engine=engine, spark=spark) as d:
            d.create_input_topic("customers").pipe_input("c1", [1, 2], 1)
            orders = d.create_input_topic("orders")
            orders.pipe_input("c0", {"item": "a"}, 2)
            orders.pipe_input("c1", {"item": "b"}, 3)
            out = d.create_output_topic("out")
            with pytest.raises(UserFunctionError) as caught:
                out.read_records_to_list()
            assert [r.key for r in out.read_records_to_list()] == ["c0"]
        assert str(caught.value) == (f"KSTREAM-LEFTJOIN-0000000004: the joiner raised {cause} (record at topic orders "
                                     "partition 0 offset 1, key 'c1')")


class TestTablesAndSplitDriver:
    def test_table_sources_filter_and_split(self, spark: Any) -> None:
        """An unmaterialized table forwards every record (a null key dropped and counted); a
        materialized one does not forward a tombstone for an absent key (record cache);
        KTable.filter on an unmaterialized source turns a failing value into a tombstone; to_table keeps the latest value;
        split sends each record to the first matching branch, else the default branch."""
        from streamsdsl.runtime.driver import TopologyTestDriver

        b = StreamsBuilder()
        b.table("plain", INT_STR).filter(lambda k, v: v != "drop").to_stream().to("plain-out", OUT)
        b.table("stored", INT_STR, Materialized.as_("stored")).to_stream().to("stored-out", OUT)
        branches = b.stream("nums", INT_STR).split(named="n-").branch(
            lambda k, v: int(v) > 10, Branched.with_name("big")).branch(lambda k, v: int(v) > 0).default_branch()
        for name, branch in branches.items():
            branch.to(name, OUT)
        with TopologyTestDriver(b.build()) as d:
            plain = d.create_input_topic("plain", Serdes.Integer(), Serdes.String())
            stored = d.create_input_topic("stored", Serdes.Integer(), Serdes.String())
            nums = d.create_input_topic("nums", Serdes.Integer(), Serdes.String())
            for topic in (plain, stored):
                topic.pipe_input(1, None, 1)
                topic.pipe_input(1, "a", 2)
                topic.pipe_input(None, "x", 3)
                topic.pipe_input(1, "drop", 4)
                topic.pipe_input(1, None, 5)
            for i, v in enumerate(("20", "5", "-1", "11")):
                nums.pipe_input(i, v, i)
            read = {t: d.create_output_topic(t, Serdes.Integer(), Serdes.String()).read_records_to_list()
                    for t in ("plain-out", "stored-out", "n-big", "n-2", "n-0")}
            assert read["plain-out"] == [R(1, None, 1), R(1, "a", 2), R(1, None, 4), R(1, None, 5)]
            assert read["stored-out"] == [R(1, "a", 2), R(1, "drop", 4), R(1, None, 5)]
            assert read["n-big"] == [R(0, "20", 0), R(3, "11", 3)]
            assert read["n-2"] == [R(1, "5", 1)]
            assert read["n-0"] == [R(2, "-1", 2)]
            assert d.metrics()["dropped-records-total"] == 2.0


@pytest.mark.spark
class TestStreamingJoin:
    def test_micro_batches_and_restart(self, spark: Any, tmp_path: Any) -> None:
        """On a streaming query: the table state survives micro-batches and a restart from the
        checkpoint; within a batch a key's records go in timestamp order."""
        from streamsdsl.runtime.streaming import start_streaming
        from streamsdsl.testing.files import FileTopic
        from tests._support import Collect

        topic = FileTopic(str(tmp_path / "in"))
        cp = str(tmp_path / "checkpoint")
        i, s = Serdes.Integer(), Serdes.String()
        b = StreamsBuilder()
        b.stream("stream", INT_STR).left_join(b.table("table", INT_STR), joiner).to("out", OUT)
        topology = b.build()
        topic.append("table", [(1, "Y1", 10), (2, "Y2", 10)], i, s)
        topic.append("stream", [(1, "X1", 20), (3, "X3", 21)], i, s)
        out = Collect()
        q, _, _ = start_streaming(topology, lambda n: topic.read_stream(spark, n.topics), out, checkpoint_location=cp)
        q.processAllAvailable()
        q.stop()
        assert [(k, v, ts) for _, k, v, ts in out.records] == [(1, "X1+Y1", 20), (3, "X3+null", 21)]

        topic.append("table", [(1, None, 30)], i, s)
        topic.append("stream", [(1, "X1", 40), (2, "X2", 41)], i, s)
        out2 = Collect()
        q, _, _ = start_streaming(topology, lambda n: topic.read_stream(spark, n.topics), out2, checkpoint_location=cp)
        q.processAllAvailable()
        q.stop()
        assert [(k, v, ts) for _, k, v, ts in out2.records] == [(1, "X1+null", 40), (2, "X2+Y2", 41)]
        # the join's state is the JVM operator's: the Python operator does not continue it
        with pytest.raises(CheckpointOperatorError, match="set streamsdsl.operator to 'jvm'"):
            start_streaming(topology, lambda n: topic.read_stream(spark, n.topics), Collect(), checkpoint_location=cp,
                            operator="python")


class TestOnCloseAfterAStatefulOperator:
    """A windowed aggregation that emits on close, downstream of a join whose output is also
    written to a topic: exact in the driver and on a streaming query (the join's operator passes
    the watermark on, to both branches)."""

    @staticmethod
    def topology() -> Any:
        from streamsdsl import EmitStrategy, Grouped

        s = Serdes.String()
        strings = Consumed.with_serdes(s, s)
        b = StreamsBuilder()
        enriched = b.stream("orders", strings).join(b.table("customers", strings), lambda order, region: region)
        enriched.to("enriched", Produced.with_serdes(s, s))
        (enriched.group_by(lambda k, region: region, Grouped.with_serdes(s, s))
         .windowed_by(TimeWindows.of_size_with_no_grace(100)).emit_strategy(EmitStrategy.on_window_close())
         .count().to_stream().map(lambda k, v: (k.key, v)).to("out", Produced.with_serdes(s, Serdes.Long())))
        return b.build()

    def test_driver_emits_each_window_once_when_it_closes(self, run_driver: Any) -> None:
        out = run_driver(self.topology(), [("customers", "c1", "EU", 1), ("customers", "c2", "US", 1),
                                           ("orders", "c1", "o1", 10), ("orders", "c2", "o2", 20),
                                           ("orders", "c2", "o3", 250)],
                         value_serde=Serdes.Long())
        assert [(r.key, r.value, r.timestamp) for r in out] == [("EU", 1, 10), ("US", 1, 20)]

    def test_streaming_query_closes_the_windows_past_the_join(self, spark: Any, tmp_path: Any,
                                                              jvm_operator: str) -> None:
        """On a streaming query the join passes event time on: the windows below it close once
        the watermark passes them, across a restart from the checkpoint, although the customers
        table is written once and stays quiet (the global watermark is the largest input's) and
        the join's output also goes to a topic (a second branch, whose reused shuffle once hid
        the watermark from the count); on the JVM operator of the count (the next test runs
        on both)."""
        from streamsdsl.runtime.streaming import await_event_time_timers, start_streaming
        from streamsdsl.testing.files import FileTopic
        from tests._support import Collect

        s = Serdes.String()
        topology = self.topology()
        topic = FileTopic(str(tmp_path / "in"))
        cp = str(tmp_path / "cp")
        def run() -> list[tuple[Any, Any, int]]:
            """One run of the query from the checkpoint over what the topics hold."""
            out = Collect()
            q, _, _ = start_streaming(topology, lambda n: topic.read_stream(spark, n.topics), out,
                                      checkpoint_location=cp)
            q.processAllAvailable()
            await_event_time_timers(q, topology)
            q.stop()
            return sorted((k, v, ts) for _, k, v, ts in out.by_topic.get("out", []))

        topic.append("customers", [("c1", "EU", 1), ("c2", "US", 1)], s, s)
        topic.append("orders", [("c1", "o1", 10), ("c2", "o2", 20)], s, s)
        assert run() == []  # no window has closed yet
        topic.append("orders", [("c2", "o3", 250)], s, s)
        assert run() == [("EU", 1, 10), ("US", 1, 20)]  # EU's window closes on the watermark alone

    def test_streaming_left_join_after_an_aggregation(self, spark: Any, tmp_path: Any, operator: str) -> None:
        """A left stream-stream join below an aggregation emits its unmatched records once the
        join window has closed (KIP-633), on a streaming query as in the driver: the same
        records, the unmatched one after a restart from the checkpoint whose first micro-batch
        moved stream time past its window; on both operators of the count."""
        from streamsdsl import JoinWindows, TopologyTestDriver
        from streamsdsl.runtime.streaming import await_event_time_timers, start_streaming
        from streamsdsl.testing.files import FileTopic
        from tests._support import Collect

        s, n = Serdes.String(), Serdes.Long()
        b = StreamsBuilder()
        counts = b.stream("a", Consumed.with_serdes(s, s)).group_by_key().count().to_stream()
        counts.left_join(b.stream("b", Consumed.with_serdes(s, n)), lambda c, v: f"{c}/{v}",
                         JoinWindows.of_time_difference_with_no_grace(10)).to("out", Produced.with_serdes(s, s))
        topology = b.build()
        a_records, b_records, later = [("k", "x", 1), ("j", "y", 2)], [("k", 7, 1)], [("z", "w", 100)]
        with TopologyTestDriver(topology) as driver:
            ina, inb = driver.create_input_topic("a"), driver.create_input_topic("b")
            for k, v, ts in a_records:
                ina.pipe_input(k, v, ts)
            for k, v, ts in b_records:
                inb.pipe_input(k, v, ts)
            for k, v, ts in later:
                ina.pipe_input(k, v, ts)
            expected = sorted((r.key, r.value, r.timestamp)
                              for r in driver.create_output_topic("out", s, s).read_records_to_list())
        assert ("j", "1/None", 2) in expected  # the unmatched record, once its window closed
        topic = FileTopic(str(tmp_path / "in"))
        topic.append("a", a_records, s, s)
        topic.append("b", b_records, s, n)
        out = Collect()
        for step in range(2):
            q, _, _ = start_streaming(topology, lambda n: topic.read_stream(spark, n.topics), out,
                                      checkpoint_location=str(tmp_path / "cp"))
            q.processAllAvailable()
            await_event_time_timers(q, topology)
            q.stop()
            if step == 0:
                topic.append("a", later, s, s)
        assert sorted((k, v, ts) for _, k, v, ts in out.records) == expected
