"""KTable.group_by and KGroupedTable count / reduce / aggregate: API and validation, describe()
(Kafka's TopologyTest), the TopologyTestDriver (Kafka's KTableAggregateTest /
KGroupedTableImplTest scenarios, read after each pipe) and a streaming query restarted from its
checkpoint."""

from __future__ import annotations

from typing import Any

import pytest

from streamsdsl import (
    Consumed,
    Grouped,
    InvalidArgumentError,
    InvalidTypeError,
    KGroupedTable,
    KeyValue,
    Materialized,
    Produced,
    Serdes,
    StreamsBuilder,
    TestRecord,
)
from streamsdsl import ir
from streamsdsl.errors import StageMethodError

R = TestRecord
STR = Consumed.with_serdes(Serdes.String(), Serdes.String())
OUT_STR = Produced.with_serdes(Serdes.String(), Serdes.String())
OUT_LONG = Produced.with_serdes(Serdes.String(), Serdes.Long())


def select_value(key: Any, value: Any) -> Any:
    """Kafka's MockMapper.selectValueKeyValueMapper: the value becomes the key."""
    return KeyValue(value, value)


def to_string_adder(key: Any, value: Any, agg: Any) -> str:
    """Kafka's MockAggregator.TOSTRING_ADDER."""
    return f"{agg}+{value}"


def to_string_remover(key: Any, value: Any, agg: Any) -> str:
    """Kafka's MockAggregator.TOSTRING_REMOVER."""
    return f"{agg}-{value}"


class TestGroupedTableApi:
    def test_group_by_returns_a_grouped_table(self) -> None:
        """group_by gives a KGroupedTable whose aggregations give KTables; the stage is immutable."""
        b = StreamsBuilder()
        grouped = b.table("in").group_by(select_value)
        assert isinstance(grouped, KGroupedTable)
        counts, sums = grouped.count(), grouped.aggregate(lambda: 0, lambda k, v, a: a + v, lambda k, v, a: a - v)
        assert counts.node_name == "KTABLE-AGGREGATE-0000000007"
        assert sums.node_name == "KTABLE-AGGREGATE-0000000011"
        assert grouped.node_name == "KTABLE-SELECT-0000000003"

    def test_missing_subtractor_is_named(self) -> None:
        """reduce and aggregate need a subtractor; the message names it and shows a full call."""
        g = StreamsBuilder().table("in").group_by(select_value)
        with pytest.raises(InvalidTypeError) as e:
            g.reduce(lambda agg, v: agg + v)
        assert str(e.value) == (
            "reduce() needs adder and subtractor: reduce(adder, subtractor), e.g. reduce(lambda agg, value: "
            "agg + value, lambda agg, value: agg - value). Missing: 'subtractor'.")
        with pytest.raises(InvalidTypeError) as e:
            g.aggregate(lambda: 0, lambda k, v, a: a + v)
        assert str(e.value).endswith("Missing: 'subtractor'.")

    def test_arity_is_checked_when_written(self) -> None:
        """Selector, adder and subtractor are checked for their parameter count."""
        t = StreamsBuilder().table("in")
        with pytest.raises(InvalidTypeError, match=r"'selector' must accept 2 positional arguments \(key, value\); lambda v has 1"):
            t.group_by(lambda v: v)
        with pytest.raises(InvalidTypeError, match=r"'subtractor' must accept 2 positional arguments \(aggregate, value\)"):
            t.group_by(select_value).reduce(lambda a, v: a, lambda k, v, a: a)
        with pytest.raises(InvalidTypeError, match=r"'initializer' must accept no arguments; lambda x has 1 required"):
            t.group_by(select_value).aggregate(lambda x: 0, to_string_adder, to_string_remover)

    def test_selector_is_required(self) -> None:
        """group_by() without a selector names it."""
        with pytest.raises(InvalidTypeError, match=r"group_by\(\) needs selector"):
            StreamsBuilder().table("in").group_by()

    def test_ir_validates_the_functions(self) -> None:
        """A KGroupedTable aggregation node holds exactly the functions its kind takes."""
        fn = ir.UserFn(to_string_adder, "(key, value, aggregate) -> aggregate")
        with pytest.raises(InvalidArgumentError, match="missing: \\['subtractor'\\]"):
            ir.GroupedTableAgg("reduce", adder=fn)
        with pytest.raises(InvalidArgumentError, match="not allowed: \\['adder'\\]"):
            ir.GroupedTableAgg("count", adder=fn)
        with pytest.raises(InvalidArgumentError, match="'kind' must be"):
            ir.GroupedTableAgg("sum")

    def test_table_hints_name_group_by(self) -> None:
        """count() on a KTable says to group the table first."""
        with pytest.raises(StageMethodError, match="group the table first: group_by"):
            StreamsBuilder().table("in").count()


class TestGroupedTableDescribe:
    def test_zero_arg_count(self) -> None:
        """TopologyTest.tableZeroArgCountShouldPreserveTopologyStructure: the source is
        materialized (old values), the select node feeds the repartition sink, and the
        aggregate's store names the repartition topic."""
        b = StreamsBuilder()
        b.table("input-topic").group_by(lambda k, v: None).count()
        assert b.build().describe() == (
            "Topologies:\n"
            "   Sub-topology: 0\n"
            "    Source: KSTREAM-SOURCE-0000000001 (topics: [input-topic])\n"
            "      --> KTABLE-SOURCE-0000000002\n"
            "    Processor: KTABLE-SOURCE-0000000002 (stores: [input-topic-STATE-STORE-0000000000])\n"
            "      --> KTABLE-SELECT-0000000003\n"
            "      <-- KSTREAM-SOURCE-0000000001\n"
            "    Processor: KTABLE-SELECT-0000000003 (stores: [])\n"
            "      --> KSTREAM-SINK-0000000005\n"
            "      <-- KTABLE-SOURCE-0000000002\n"
            "    Sink: KSTREAM-SINK-0000000005 (topic: KTABLE-AGGREGATE-STATE-STORE-0000000004-repartition)\n"
            "      <-- KTABLE-SELECT-0000000003\n"
            "\n"
            "  Sub-topology: 1\n"
            "    Source: KSTREAM-SOURCE-0000000006 (topics: [KTABLE-AGGREGATE-STATE-STORE-0000000004-repartition])\n"
            "      --> KTABLE-AGGREGATE-0000000007\n"
            "    Processor: KTABLE-AGGREGATE-0000000007 (stores: [KTABLE-AGGREGATE-STATE-STORE-0000000004])\n"
            "      --> none\n"
            "      <-- KSTREAM-SOURCE-0000000006\n"
            "\n"
        )

    def test_named_materialized_count(self) -> None:
        """TopologyTest.tableNamedMaterializedCountShouldPreserveTopologyStructure: a store name
        takes no index; the repartition topic is <store>-repartition."""
        b = StreamsBuilder()
        b.table("input-topic").group_by(lambda k, v: None).count(materialized=Materialized.as_("count-store"))
        text = b.build().describe()
        assert "    Sink: KSTREAM-SINK-0000000004 (topic: count-store-repartition)\n" in text
        assert "    Source: KSTREAM-SOURCE-0000000005 (topics: [count-store-repartition])\n" in text
        assert "    Processor: KTABLE-AGGREGATE-0000000006 (stores: [count-store])\n" in text

    def test_grouped_and_named_reduce(self) -> None:
        """Grouped.as_ names the select node and the repartition topic; name= names the
        aggregate and its repartition sink/source (-sink, -source), each still burning an index."""
        b = StreamsBuilder()
        b.table("in", STR).group_by(select_value, Grouped.as_("by-value")).reduce(
            lambda a, v: a + v, lambda a, v: a, name="concat").to_stream().to("out")
        assert b.build().describe() == (
            "Topologies:\n"
            "   Sub-topology: 0\n"
            "    Source: KSTREAM-SOURCE-0000000001 (topics: [in])\n"
            "      --> KTABLE-SOURCE-0000000002\n"
            "    Processor: KTABLE-SOURCE-0000000002 (stores: [in-STATE-STORE-0000000000])\n"
            "      --> by-value\n"
            "      <-- KSTREAM-SOURCE-0000000001\n"
            "    Processor: by-value (stores: [])\n"
            "      --> concat-sink\n"
            "      <-- KTABLE-SOURCE-0000000002\n"
            "    Sink: concat-sink (topic: by-value-repartition)\n"
            "      <-- by-value\n"
            "\n"
            "  Sub-topology: 1\n"
            "    Source: concat-source (topics: [by-value-repartition])\n"
            "      --> concat\n"
            "    Processor: concat (stores: [KTABLE-AGGREGATE-STATE-STORE-0000000004])\n"
            "      --> KTABLE-TOSTREAM-0000000008\n"
            "      <-- concat-source\n"
            "    Processor: KTABLE-TOSTREAM-0000000008 (stores: [])\n"
            "      --> KSTREAM-SINK-0000000009\n"
            "      <-- concat\n"
            "    Sink: KSTREAM-SINK-0000000009 (topic: out)\n"
            "      <-- KTABLE-TOSTREAM-0000000008\n"
            "\n"
        )

    def test_reduce_processor_name(self) -> None:
        """reduce's processor is KTABLE-REDUCE; its store is still KTABLE-AGGREGATE-STATE-STORE."""
        b = StreamsBuilder()
        b.table("in").group_by(select_value).reduce(lambda a, v: a + v, lambda a, v: a)
        text = b.build().describe()
        assert "    Processor: KTABLE-REDUCE-0000000007 (stores: [KTABLE-AGGREGATE-STATE-STORE-0000000004])\n" in text


def _topology(build: Any, out_produced: Produced = OUT_STR) -> Any:
    b = StreamsBuilder()
    build(b.table("in", STR)).to_stream().to("out", out_produced)
    return b.build()


@pytest.mark.spark
class TestGroupedTableDriver:
    def test_count(self, spark: Any) -> None:
        """KTableAggregateTest.testCount (re-keying across groups), read after each pipe; a
        tombstone leaves its group (a group counted down to 0 stays, at 0)."""
        from streamsdsl.runtime.driver import TopologyTestDriver

        topo = _topology(lambda t: t.group_by(select_value).count(), OUT_LONG)
        with TopologyTestDriver(topo, spark=spark) as d:
            inp = d.create_input_topic("in", Serdes.String(), Serdes.String())
            out = d.create_output_topic("out", Serdes.String(), Serdes.Long())
            inp.pipe_input("A", "green", 10)
            assert out.read_records_to_list() == [R("green", 1, 10)]
            inp.pipe_input("B", "green", 9)
            assert out.read_records_to_list() == [R("green", 2, 10)]
            inp.pipe_input("A", "blue", 12)
            assert out.read_records_to_list() == [R("green", 1, 12), R("blue", 1, 12)]
            inp.pipe_input("C", "yellow", 15)
            inp.pipe_input("D", "green", 11)
            assert out.read_records_to_list() == [R("yellow", 1, 15), R("green", 2, 12)]
            inp.pipe_input("A", None, 16)
            inp.pipe_input("Z", None, 17)  # a tombstone for an absent key: nothing
            assert out.read_records_to_list() == [R("blue", 0, 16)]
            assert d.get_key_value_store("KTABLE-AGGREGATE-STATE-STORE-0000000004").get("blue") == 0

    def test_aggregate_repartition(self, spark: Any) -> None:
        """KTableAggregateTest.testAggRepartition: a selector result with a null key, or null,
        is dropped; a re-keyed update subtracts from its old group before adding to the new."""
        from streamsdsl.runtime.driver import TopologyTestDriver

        def selector(key: str, value: str) -> Any:
            if key == "null":
                return (None, value)
            if key == "NULL":
                return None
            return (value, value)

        topo = _topology(lambda t: t.group_by(selector).aggregate(lambda: "0", to_string_adder, to_string_remover))
        with TopologyTestDriver(topo, spark=spark) as d:
            inp = d.create_input_topic("in", Serdes.String(), Serdes.String())
            out = d.create_output_topic("out", Serdes.String(), Serdes.String())
            inp.pipe_input("A", "1", 10)
            inp.pipe_input("A", None, 15)
            inp.pipe_input("A", "1", 12)
            assert out.read_records_to_list() == [R("1", "0+1", 10), R("1", "0+1-1", 15), R("1", "0+1-1+1", 15)]
            inp.pipe_input("B", "2", 20)
            inp.pipe_input("null", "3", 25)
            inp.pipe_input("B", "4", 23)
            inp.pipe_input("NULL", "5", 24)
            inp.pipe_input("B", "7", 22)
            assert out.read_records_to_list() == [
                R("2", "0+2", 20), R("2", "0+2-2", 23), R("4", "0+4", 23), R("4", "0+4-4", 23), R("7", "0+7", 22)]

    def test_aggregate_basic_and_remove_old_before_add_new(self, spark: Any) -> None:
        """KTableAggregateTest.testAggBasic (same group: one record, subtract then add; ts = max
        with the aggregate's) and testRemoveOldBeforeAddNew."""
        from streamsdsl.runtime.driver import TopologyTestDriver

        b = StreamsBuilder()
        table = b.table("in", STR)
        table.group_by(lambda k, v: (k, v)).aggregate(lambda: "0", to_string_adder, to_string_remover).to_stream().to(
            "basic", OUT_STR)
        table.group_by(lambda k, v: (k[0], k[1]) if len(k) == 2 else None).aggregate(
            lambda: "", lambda k, v, a: a + v, lambda k, v, a: a.replace(v, "")).to_stream().to("remove", OUT_STR)
        with TopologyTestDriver(b.build(), spark=spark) as d:
            inp = d.create_input_topic("in", Serdes.String(), Serdes.String())
            basic = d.create_output_topic("basic", Serdes.String(), Serdes.String())
            remove = d.create_output_topic("remove", Serdes.String(), Serdes.String())
            for k, v, ts in (("A", "1", 10), ("B", "2", 15), ("A", "3", 20), ("B", "4", 18), ("C", "5", 5),
                             ("D", "6", 25), ("B", "7", 15), ("C", "8", 10)):
                inp.pipe_input(k, v, ts)
            assert basic.read_records_to_list() == [
                R("A", "0+1", 10), R("B", "0+2", 15), R("A", "0+1-1+3", 20), R("B", "0+2-2+4", 18), R("C", "0+5", 5),
                R("D", "0+6", 25), R("B", "0+2-2+4-4+7", 18), R("C", "0+5-5+8", 10)]
            assert remove.read_records_to_list() == []  # keys of one letter: the selector returns None
            for k, v, ts in (("11", "A", 10), ("12", "B", 8), ("11", None, 12), ("12", "C", 6)):
                inp.pipe_input(k, v, ts)
            assert remove.read_records_to_list() == [R("1", "1", 10), R("1", "12", 10), R("1", "2", 12), R("1", "2", 12)]

    def test_reduce(self, spark: Any) -> None:
        """KGroupedTableImplTest.shouldReduce: the integer part of a double, reduced with
        adder/subtractor; out-of-order updates keep the aggregate's later timestamp."""
        from streamsdsl.runtime.driver import TopologyTestDriver

        b = StreamsBuilder()
        b.table("in", Consumed.with_serdes(Serdes.String(), Serdes.Double())).group_by(
            lambda k, v: (k, int(v)), Grouped.with_serdes(Serdes.String(), Serdes.Integer())).reduce(
            lambda a, v: a + v, lambda a, v: a - v, materialized=Materialized.as_("reduced")).to_stream().to(
            "out", Produced.with_serdes(Serdes.String(), Serdes.Integer()))
        with TopologyTestDriver(b.build(), spark=spark) as d:
            inp = d.create_input_topic("in", Serdes.String(), Serdes.Double())
            out = d.create_output_topic("out", Serdes.String(), Serdes.Integer())
            inp.pipe_input("A", 1.1, 10)
            inp.pipe_input("B", 2.2, 11)
            assert out.read_records_to_list() == [R("A", 1, 10), R("B", 2, 11)]
            for k, v, ts in (("A", 2.6, 30), ("B", 1.3, 30), ("A", 5.7, 50), ("B", 6.2, 20)):
                inp.pipe_input(k, v, ts)
            assert out.read_records_to_list() == [R("A", 2, 30), R("B", 1, 30), R("A", 5, 50), R("B", 6, 30)]
            store = d.get_key_value_store("reduced")
            assert (store.get("A"), store.get("B")) == (5, 6)

    def test_filtered_table_and_selector_errors(self, spark: Any) -> None:
        """Grouping a filtered table with Integer keys: a row the filter turns into a tombstone
        leaves its group, also in a later driver run.
        A selector that returns no pair fails the record, naming the processor."""
        from streamsdsl.errors import UserFunctionError
        from streamsdsl.runtime.driver import TopologyTestDriver

        b = StreamsBuilder()
        b.table("in", Consumed.with_serdes(Serdes.Integer(), Serdes.String())).filter(lambda k, v: v != "skip").group_by(
            select_value).count().to_stream().to("out", OUT_LONG)
        with TopologyTestDriver(b.build(), spark=spark) as d:
            inp = d.create_input_topic("in", Serdes.Integer(), Serdes.String())
            out = d.create_output_topic("out", Serdes.String(), Serdes.Long())
            inp.pipe_input(1, "x", 1)
            inp.pipe_input(2, "x", 2)
            assert out.read_records_to_list() == [R("x", 1, 1), R("x", 2, 2)]
            inp.pipe_input(1, "skip", 3)  # the next run knows key 1's old value (an int key, a JSON group)
            assert out.read_records_to_list() == [R("x", 1, 3)]
        bad = _topology(lambda t: t.group_by(lambda k, v: "no pair").count(), OUT_LONG)
        with TopologyTestDriver(bad, spark=spark) as d:
            d.create_input_topic("in", Serdes.String(), Serdes.String()).pipe_input("A", "x", 1)
            with pytest.raises(UserFunctionError, match="KTABLE-SELECT-0000000003.*must return a \\(key, value\\) pair"):
                d.create_output_topic("out", Serdes.String(), Serdes.Long()).read_records_to_list()


@pytest.mark.spark
class TestGroupedTableStreaming:
    def test_micro_batches_and_restart(self, spark: Any, tmp_path: Any) -> None:
        """Two chained operators on a streaming query: the table's old values and the group
        counts survive micro-batches and a restart from the checkpoint."""
        from streamsdsl.runtime.streaming import start_streaming
        from streamsdsl.testing.files import FileTopic
        from tests._support import Collect

        topic = FileTopic(str(tmp_path / "in"))
        cp = str(tmp_path / "checkpoint")
        s = Serdes.String()
        topology = _topology(lambda t: t.group_by(select_value).count(), OUT_LONG)
        topic.append("in", [("A", "green", 10), ("B", "green", 9)], s, s)
        topic.append("in", [("A", "blue", 12)], s, s)
        out = Collect()
        q, _, _ = start_streaming(topology, lambda n: topic.read_stream(spark, n.topics), out, checkpoint_location=cp)
        q.processAllAvailable()
        q.stop()
        assert [(k, v, ts) for _, k, v, ts in out.records] == [
            ("green", 1, 10), ("green", 2, 10), ("green", 1, 12), ("blue", 1, 12)]

        topic.append("in", [("B", "blue", 20), ("A", None, 21)], s, s)
        out2 = Collect()
        q, _, _ = start_streaming(topology, lambda n: topic.read_stream(spark, n.topics), out2, checkpoint_location=cp)
        q.processAllAvailable()
        q.stop()
        assert [(k, v, ts) for _, k, v, ts in out2.records] == [("green", 0, 20), ("blue", 2, 20), ("blue", 1, 21)]
