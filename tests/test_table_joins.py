"""Table-table joins (KTable.join / left_join / outer_join): API and validation, describe() as
Kafka Streams names it, the TopologyTestDriver (Kafka's KTableKTableInnerJoinTest,
KTableKTableLeftJoinTest and KTableKTableOuterJoinTest testJoin, read after every batch), a
joined table used downstream, and a streaming query restarted from its checkpoint."""

from __future__ import annotations

from typing import Any

import pytest

from streamsdsl import (
    Consumed,
    InvalidTypeError,
    Joiners,
    Materialized,
    Produced,
    Serdes,
    StreamsBuilder,
    TestRecord,
    TimeWindows,
    TopologyError,
    explain,
)
from streamsdsl import ir
from streamsdsl.errors import InvalidArgumentError

R = TestRecord
INT_STR = Consumed.with_serdes(Serdes.Integer(), Serdes.String())
OUT = Produced.with_serdes(Serdes.Integer(), Serdes.String())
KEYS = (0, 1, 2, 3)


def joiner(value: Any, other: Any) -> str:
    """Kafka's MockValueJoiner.TOSTRING_JOINER ``v1 + "+" + v2`` (Java renders null as "null")."""
    return f"{'null' if value is None else value}+{'null' if other is None else other}"


def two_tables() -> tuple[StreamsBuilder, Any, Any]:
    b = StreamsBuilder()
    return b, b.table("t1", INT_STR), b.table("t2", INT_STR)


class TestDescribe:
    def test_inner_join(self) -> None:
        """Kafka's names and order: merge first, then JOINTHIS (fed by this table, reading the
        other's store) and JOINOTHER; both source tables are materialized by the join."""
        b, t1, t2 = two_tables()
        t1.join(t2, joiner).to_stream().to("out", OUT)
        assert b.build().describe() == (
            "Topologies:\n"
            "   Sub-topology: 0\n"
            "    Source: KSTREAM-SOURCE-0000000001 (topics: [t1])\n"
            "      --> KTABLE-SOURCE-0000000002\n"
            "    Source: KSTREAM-SOURCE-0000000004 (topics: [t2])\n"
            "      --> KTABLE-SOURCE-0000000005\n"
            "    Processor: KTABLE-SOURCE-0000000002 (stores: [t1-STATE-STORE-0000000000])\n"
            "      --> KTABLE-JOINTHIS-0000000007\n"
            "      <-- KSTREAM-SOURCE-0000000001\n"
            "    Processor: KTABLE-SOURCE-0000000005 (stores: [t2-STATE-STORE-0000000003])\n"
            "      --> KTABLE-JOINOTHER-0000000008\n"
            "      <-- KSTREAM-SOURCE-0000000004\n"
            "    Processor: KTABLE-JOINOTHER-0000000008 (stores: [t1-STATE-STORE-0000000000])\n"
            "      --> KTABLE-MERGE-0000000006\n"
            "      <-- KTABLE-SOURCE-0000000005\n"
            "    Processor: KTABLE-JOINTHIS-0000000007 (stores: [t2-STATE-STORE-0000000003])\n"
            "      --> KTABLE-MERGE-0000000006\n"
            "      <-- KTABLE-SOURCE-0000000002\n"
            "    Processor: KTABLE-MERGE-0000000006 (stores: [])\n"
            "      --> KTABLE-TOSTREAM-0000000009\n"
            "      <-- KTABLE-JOINTHIS-0000000007, KTABLE-JOINOTHER-0000000008\n"
            "    Processor: KTABLE-TOSTREAM-0000000009 (stores: [])\n"
            "      --> KSTREAM-SINK-0000000010\n"
            "      <-- KTABLE-MERGE-0000000006\n"
            "    Sink: KSTREAM-SINK-0000000010 (topic: out)\n"
            "      <-- KTABLE-TOSTREAM-0000000009\n\n"
        )

    def test_left_join_named_and_materialized(self) -> None:
        """A named join: the merge is '<name>', its join processors '<name>-join-this' /
        '-join-other' (indexes burnt all the same); Materialized.as_ puts the store on the merge."""
        b, t1, t2 = two_tables()
        t1.left_join(t2, joiner, name="enrich", materialized=Materialized.as_("joined")).to_stream().to("out")
        assert b.build().describe() == (
            "Topologies:\n"
            "   Sub-topology: 0\n"
            "    Source: KSTREAM-SOURCE-0000000001 (topics: [t1])\n"
            "      --> KTABLE-SOURCE-0000000002\n"
            "    Source: KSTREAM-SOURCE-0000000004 (topics: [t2])\n"
            "      --> KTABLE-SOURCE-0000000005\n"
            "    Processor: KTABLE-SOURCE-0000000002 (stores: [t1-STATE-STORE-0000000000])\n"
            "      --> enrich-join-this\n"
            "      <-- KSTREAM-SOURCE-0000000001\n"
            "    Processor: KTABLE-SOURCE-0000000005 (stores: [t2-STATE-STORE-0000000003])\n"
            "      --> enrich-join-other\n"
            "      <-- KSTREAM-SOURCE-0000000004\n"
            "    Processor: enrich-join-other (stores: [t1-STATE-STORE-0000000000])\n"
            "      --> enrich\n"
            "      <-- KTABLE-SOURCE-0000000005\n"
            "    Processor: enrich-join-this (stores: [t2-STATE-STORE-0000000003])\n"
            "      --> enrich\n"
            "      <-- KTABLE-SOURCE-0000000002\n"
            "    Processor: enrich (stores: [joined])\n"
            "      --> KTABLE-TOSTREAM-0000000009\n"
            "      <-- enrich-join-this, enrich-join-other\n"
            "    Processor: KTABLE-TOSTREAM-0000000009 (stores: [])\n"
            "      --> KSTREAM-SINK-0000000010\n"
            "      <-- enrich\n"
            "    Sink: KSTREAM-SINK-0000000010 (topic: out)\n"
            "      <-- KTABLE-TOSTREAM-0000000009\n\n"
        )

    def test_outer_join_materialized_without_store_name(self) -> None:
        """Materialized without a store name takes 'KTABLE-MERGE-STATE-STORE-<n>' before the
        merge's own index (Kafka's MaterializedInternal is built before doJoin); outer joins
        use the JOINTHIS / JOINOTHER prefixes too."""
        b, t1, t2 = two_tables()
        t1.outer_join(t2, joiner, materialized=Materialized.with_serdes(None, Serdes.String())).to_stream().to("o")
        text = b.build().describe()
        assert (
            "    Processor: KTABLE-JOINOTHER-0000000009 (stores: [t1-STATE-STORE-0000000000])\n"
            "      --> KTABLE-MERGE-0000000007\n"
            "      <-- KTABLE-SOURCE-0000000005\n"
            "    Processor: KTABLE-JOINTHIS-0000000008 (stores: [t2-STATE-STORE-0000000003])\n"
            "      --> KTABLE-MERGE-0000000007\n"
            "      <-- KTABLE-SOURCE-0000000002\n"
            "    Processor: KTABLE-MERGE-0000000007 (stores: [KTABLE-MERGE-STATE-STORE-0000000006])\n"
        ) in text

    def test_stream_join_of_a_materialized_joined_table(self) -> None:
        """KStreamKTableJoinTest's shouldAllowJoinMaterializedJoinedKTable: the stream-table join
        (index 10) reads the joined table's store, which the merge (index 7) holds."""
        b = StreamsBuilder()
        t1, t2 = b.table("table-topic1"), b.table("table-topic2")
        b.stream("stream-topic").join(t1.join(t2, joiner, materialized=Materialized.as_("store")), joiner).to("o")
        topology = b.build()
        assert topology.node("KSTREAM-JOIN-0000000010").stores == ("store",)
        assert topology.node("KTABLE-MERGE-0000000007").stores == ("store",)
        assert "Processor: KTABLE-MERGE-0000000007 (stores: [store])" in topology.describe()

    def test_stream_join_of_an_unmaterialized_joined_table(self) -> None:
        """KStreamKTableJoinTest's shouldAllowJoinUnmaterializedJoinedKTable: the stream-table
        join reads the joined table through both tables' stores; the merge has none."""
        b = StreamsBuilder()
        t1, t2 = b.table("table-topic1"), b.table("table-topic2")
        b.stream("stream-topic").join(t1.join(t2, joiner), joiner).to("o")
        text = b.build().describe()
        assert ("Processor: KSTREAM-JOIN-0000000010 (stores: [table-topic1-STATE-STORE-0000000000, "
                "table-topic2-STATE-STORE-0000000003])\n") in text
        assert "Processor: KTABLE-MERGE-0000000007 (stores: [])\n" in text

    def test_chained_join_reads_both_stores_of_an_unmaterialized_join(self) -> None:
        """A join result that is not materialized is read through both of its sides' stores
        (KTableKTableJoinMerger's view), listed in Java HashSet order."""
        b = StreamsBuilder()
        t1, t2, t3 = b.table("a"), b.table("b"), b.table("c")
        t1.join(t2, joiner).join(t3, joiner).to_stream().to("o")
        text = b.build().describe()
        assert ("Processor: KTABLE-JOINOTHER-0000000014 (stores: [a-STATE-STORE-0000000000, "
                "b-STATE-STORE-0000000003])\n") in text
        assert "Processor: KTABLE-JOINTHIS-0000000013 (stores: [c-STATE-STORE-0000000006])\n" in text
        assert "Processor: KTABLE-MERGE-0000000012 (stores: [])\n" in text


class TestApi:
    def test_joined_table_is_a_table(self) -> None:
        """join / left_join / outer_join return a KTable whose node is the merge processor."""
        b, t1, t2 = two_tables()
        for method, kind in (("join", "inner"), ("left_join", "left"), ("outer_join", "outer")):
            joined = getattr(t1, method)(t2, joiner)
            node = b.build().node(joined.node_name)
            assert isinstance(node, ir.TableTableJoinNode) and node.kind == kind
            assert node.parents == (t1.node_name, t2.node_name)
            assert joined.to_stream().node_name.startswith("KTABLE-TOSTREAM-")

    def test_a_stream_is_rejected_with_the_fix(self) -> None:
        """Joining a KStream into KTable.join names both fixes: a stream-table join, or to_table()."""
        b, t1, _ = two_tables()
        with pytest.raises(InvalidTypeError) as err:
            t1.left_join(b.stream("s"), joiner)
        assert str(err.value) == (
            "KTable.left_join() joins two KTables (got a KStream). To look up this table for each record of the "
            "stream, write stream.join(table, joiner) or stream.left_join(table, joiner); to join the stream's latest "
            "value per key, turn it into a table first: table.left_join(stream.to_table(), joiner).")

    def test_argument_errors(self) -> None:
        """Not a table, no joiner, a joiner of the wrong arity, another builder, windowed
        tables, a wrong materialized and a bad name fail when the topology is written."""
        b, t1, t2 = two_tables()
        with pytest.raises(InvalidTypeError, match=r"^'other' must be a KTable \(got str: 't2'\)\.$"):
            t1.join("t2", joiner)  # type: ignore[arg-type]
        with pytest.raises(InvalidTypeError, match=r"^join\(\) needs joiner: join\(joiner\), e\.g\. join\(other_table, lambda"):
            t1.join(t2)
        with pytest.raises(InvalidTypeError, match=r"'joiner' must accept 2 positional arguments \(value, other_value\)"):
            t1.outer_join(t2, lambda v: v)
        with pytest.raises(TopologyError, match="different StreamsBuilder"):
            t1.join(StreamsBuilder().table("x"), joiner)
        windowed = b.stream("s").group_by_key().windowed_by(TimeWindows.of_size_with_no_grace(5)).count()
        with pytest.raises(InvalidTypeError, match=r"^join\(\) of windowed KTables is not supported"):
            t1.join(windowed, joiner)
        with pytest.raises(InvalidTypeError, match="'materialized' must be a Materialized"):
            t1.join(t2, joiner, materialized="store")  # type: ignore[arg-type]
        with pytest.raises(InvalidArgumentError, match="illegal character"):
            t1.join(t2, joiner, name="bad name")
        assert [n.name for n in b.build().nodes if isinstance(n, ir.TableTableJoinNode)] == []

    def test_node_validation(self) -> None:
        """TableTableJoinNode validates itself: the kind, three distinct processor names, stores."""
        fn = ir.UserFn(joiner, "(value, other_value) -> value")
        ok = dict(joiner=fn, kind="left", join_this="j-this", join_other="j-other", this_stores=("s1",),
                  other_stores=("s2",))
        assert ir.TableTableJoinNode("j", ("a", "b"), **ok).stores == ("s1", "s2")
        assert ir.TableTableJoinNode("j", ("a", "b"), **ok, store="m").stores == ("m",)
        with pytest.raises(InvalidArgumentError, match="'kind' of a table-table join must be 'inner', 'left' or 'outer'"):
            ir.TableTableJoinNode("j", ("a", "b"), **{**ok, "kind": "full"})
        with pytest.raises(InvalidArgumentError, match="need three names"):
            ir.TableTableJoinNode("j", ("a", "b"), **{**ok, "join_other": "j-this"})
        with pytest.raises(InvalidArgumentError, match="'this_stores' must hold at least 1"):
            ir.TableTableJoinNode("j", ("a", "b"), **{**ok, "this_stores": ()})
        with pytest.raises(InvalidArgumentError, match="exactly 2 node"):
            ir.TableTableJoinNode("j", ("a",), **ok)

    def test_explain_names_the_operator(self, spark: Any, operator: str) -> None:
        """explain() names the join's operator: the JVM operator with the joiner run per Arrow batch
        after it (a built-in joiner as Spark columns); ``streamsdsl.operator=python`` keeps the
        Python operator; a materialized join whose joiner may return None stays on the Python
        operator, where the joiner's result decides the store's row."""
        b, t1, t2 = two_tables()
        t1.join(t2, joiner).to_stream().to("out", OUT)
        t1.outer_join(t2, Joiners.pair(), materialized=Materialized.as_("pairs")).to_stream().to("pairs")
        t1.left_join(t2, joiner, materialized=Materialized.as_("left")).to_stream().to("left", OUT)
        text = explain(b.build(), spark, mode="simple").split("== streamsdsl operators ==")[1]
        python = ("KTABLE-MERGE-0000000006: Python operator (table-table join, inner; streamsdsl.operator=python)\n"
                  "KTABLE-MERGE-0000000011: Python operator (table-table join, outer; streamsdsl.operator=python)")
        jvm = ("KTABLE-MERGE-0000000006: JVM operator (table-table join, inner; Python joiner per Arrow batch)\n"
               "KTABLE-MERGE-0000000011: JVM operator (table-table join, outer; Joiners.pair() as Spark columns)")
        sources = ("KTABLE-SOURCE-0000000002: Python operator (tables run on the Python operator)\n"
                   "KTABLE-SOURCE-0000000005: Python operator (tables run on the Python operator)\n")
        assert text.strip() == sources + (jvm if operator == "jvm" else python) + (
            "\nKTABLE-MERGE-0000000016: Python operator (table-table join, left; materialized, and its joiner may "
            "return None: the joiner's result decides whether the store holds a row, and the JVM operator runs "
            "the joiner after the join (Joiners.pair() and merge() never return None))")


def kafka_batches() -> list[list[tuple[str, Any, Any, int]]]:
    """What KTableKTableInnerJoinTest / LeftJoinTest / OuterJoinTest.testJoin pipe, batch by batch:
    (topic, key, value, timestamp)."""
    return [
        [("t1", 0, "X0", 5), ("t1", 1, "X1", 6), ("t1", None, "SomeVal", 42)],
        [("t2", 0, "Y0", 0), ("t2", 1, "Y1", 10), ("t2", None, "AnotherVal", 73)],
        [("t1", k, f"XX{k}", 7) for k in KEYS],
        [("t2", k, f"YY{k}", k * 5) for k in KEYS],
        [("t1", k, f"XXX{k}", 6) for k in KEYS],
        [("t2", 0, None, 5), ("t2", 1, None, 7)],
        [("t1", k, f"XXXX{k}", 13) for k in KEYS],
        [("t1", 0, None, 0), ("t1", 1, None, 42), ("t1", 2, None, 5), ("t1", 3, None, 20)],
    ]


#: Kafka's expected output after each batch, (key, value, timestamp), per join.
KAFKA_EXPECTED = {
    "inner": [
        [],
        [(0, "X0+Y0", 5), (1, "X1+Y1", 10)],
        [(0, "XX0+Y0", 7), (1, "XX1+Y1", 10)],
        [(0, "XX0+YY0", 7), (1, "XX1+YY1", 7), (2, "XX2+YY2", 10), (3, "XX3+YY3", 15)],
        [(0, "XXX0+YY0", 6), (1, "XXX1+YY1", 6), (2, "XXX2+YY2", 10), (3, "XXX3+YY3", 15)],
        [(0, None, 6), (1, None, 7)],
        [(2, "XXXX2+YY2", 13), (3, "XXXX3+YY3", 15)],
        [(2, None, 10), (3, None, 20)],
    ],
    "left": [
        [(0, "X0+null", 5), (1, "X1+null", 6)],
        [(0, "X0+Y0", 5), (1, "X1+Y1", 10)],
        [(0, "XX0+Y0", 7), (1, "XX1+Y1", 10), (2, "XX2+null", 7), (3, "XX3+null", 7)],
        [(0, "XX0+YY0", 7), (1, "XX1+YY1", 7), (2, "XX2+YY2", 10), (3, "XX3+YY3", 15)],
        [(0, "XXX0+YY0", 6), (1, "XXX1+YY1", 6), (2, "XXX2+YY2", 10), (3, "XXX3+YY3", 15)],
        [(0, "XXX0+null", 6), (1, "XXX1+null", 7)],
        [(0, "XXXX0+null", 13), (1, "XXXX1+null", 13), (2, "XXXX2+YY2", 13), (3, "XXXX3+YY3", 15)],
        [(0, None, 0), (1, None, 42), (2, None, 10), (3, None, 20)],
    ],
    "outer": [
        [(0, "X0+null", 5), (1, "X1+null", 6)],
        [(0, "X0+Y0", 5), (1, "X1+Y1", 10)],
        [(0, "XX0+Y0", 7), (1, "XX1+Y1", 10), (2, "XX2+null", 7), (3, "XX3+null", 7)],
        [(0, "XX0+YY0", 7), (1, "XX1+YY1", 7), (2, "XX2+YY2", 10), (3, "XX3+YY3", 15)],
        [(0, "XXX0+YY0", 6), (1, "XXX1+YY1", 6), (2, "XXX2+YY2", 10), (3, "XXX3+YY3", 15)],
        [(0, "XXX0+null", 6), (1, "XXX1+null", 7)],
        [(0, "XXXX0+null", 13), (1, "XXXX1+null", 13), (2, "XXXX2+YY2", 13), (3, "XXXX3+YY3", 15)],
        [(0, None, 0), (1, None, 42), (2, "null+YY2", 10), (3, "null+YY3", 20)],
    ],
}


@pytest.mark.spark
class TestKafkaScenarios:
    def test_inner_left_and_outer_join(self, spark: Any) -> None:
        """KTableKTableInnerJoinTest / LeftJoinTest / OuterJoinTest.testJoin, the three joins over
        the same two tables, read after every batch (each run continues from the state the
        previous one left): values, tombstones and timestamps (max of both sides) as Kafka's;
        the two null-key records are dropped (and counted) once, by the table sources."""
        from streamsdsl.runtime.driver import TopologyTestDriver

        b, t1, t2 = two_tables()
        t1.join(t2, joiner).to_stream().to("inner", OUT)
        t1.left_join(t2, joiner).to_stream().to("left", OUT)
        t1.outer_join(t2, joiner).to_stream().to("outer", OUT)
        with TopologyTestDriver(b.build(), spark=spark) as d:
            inputs = {t: d.create_input_topic(t, Serdes.Integer(), Serdes.String()) for t in ("t1", "t2")}
            outputs = {o: d.create_output_topic(o, Serdes.Integer(), Serdes.String()) for o in KAFKA_EXPECTED}
            got: dict[str, list[list[tuple[Any, Any, int]]]] = {o: [] for o in KAFKA_EXPECTED}
            for batch in kafka_batches():
                for topic, key, value, ts in batch:
                    inputs[topic].pipe_input(key, value, ts)
                for name, out in outputs.items():
                    got[name].append([(r.key, r.value, r.timestamp) for r in out.read_records_to_list()])
            assert got == KAFKA_EXPECTED
            assert d.metrics()["dropped-records-total"] == 2.0


@pytest.mark.spark
class TestJoinedTableDownstream:
    def test_materialized_chained_filtered_and_stream_joined(self, spark: Any) -> None:
        """A materialized join result does not forward a delete of a key it holds no row for (its
        record cache), where an unmaterialized one forwards it; the joined table is joined
        again (left join: a delete on the joined side deletes the row, ts = max of both), filtered
        (a failing row becomes a tombstone) and looked up by a stream-table join."""
        from streamsdsl.runtime.driver import TopologyTestDriver

        def none_joiner(value: Any, other: Any) -> Any:
            return None if other == "none" else joiner(value, other)

        b = StreamsBuilder()
        a, c, e = b.table("a", INT_STR), b.table("c", INT_STR), b.table("e", INT_STR)
        a.join(c, none_joiner).to_stream().to("plain", OUT)
        ac = a.join(c, none_joiner, materialized=Materialized.as_("ac"))
        ac.to_stream().to("ac", OUT)
        ac.left_join(e, joiner).to_stream().to("ace", OUT)
        ac.filter(lambda k, v: v != "A2+C2").to_stream().to("filtered", OUT)
        b.stream("s", INT_STR).join(ac, joiner).to("s-ac", OUT)
        with TopologyTestDriver(b.build(), spark=spark) as d:
            pipe = {t: d.create_input_topic(t, Serdes.Integer(), Serdes.String()) for t in ("a", "c", "e", "s")}
            outs = {o: d.create_output_topic(o, Serdes.Integer(), Serdes.String())
                    for o in ("plain", "ac", "ace", "filtered", "s-ac")}

            def read() -> dict[str, list[tuple[Any, Any, int]]]:
                return {o: [(r.key, r.value, r.timestamp) for r in out.read_records_to_list()]
                        for o, out in outs.items()}

            pipe["a"].pipe_input(1, "A1", 1)
            pipe["c"].pipe_input(1, "C1", 2)
            pipe["a"].pipe_input(2, "A2", 3)
            pipe["c"].pipe_input(2, "none", 4)  # the joiner returns None: a delete of a row never written
            pipe["s"].pipe_input(1, "S1", 5)
            assert read() == {
                "plain": [(1, "A1+C1", 2), (2, None, 4)],
                "ac": [(1, "A1+C1", 2)],
                "ace": [(1, "A1+C1+null", 2)],
                "filtered": [(1, "A1+C1", 2)],
                "s-ac": [(1, "S1+A1+C1", 5)],
            }
            pipe["e"].pipe_input(1, "E1", 10)
            pipe["c"].pipe_input(2, "C2", 6)
            pipe["a"].pipe_input(2, None, 7)
            pipe["c"].pipe_input(1, None, 8)
            pipe["s"].pipe_input(1, "S1", 9)
            assert read() == {
                "plain": [(2, "A2+C2", 6), (2, None, 7), (1, None, 8)],
                "ac": [(2, "A2+C2", 6), (2, None, 7), (1, None, 8)],
                "ace": [(1, "A1+C1+E1", 10), (2, "A2+C2+null", 6), (2, None, 7), (1, None, 10)],
                "filtered": [(2, None, 6), (2, None, 7), (1, None, 8)],
                "s-ac": [],
            }


@pytest.mark.spark
class TestStreamingTableJoin:
    def test_micro_batches_and_restart(self, spark: Any, tmp_path: Any, operator: str) -> None:
        """On a streaming query (one micro-batch per appended file): both tables' values survive
        micro-batches and a restart from the checkpoint; an outer join forwards every update of
        either side, ts = max of both sides, and a delete when the last side goes. Both operators
        forward the same records; a restart on the other operator is refused with the fix."""
        from streamsdsl.jvm import CheckpointOperatorError
        from streamsdsl.runtime.streaming import start_streaming
        from streamsdsl.testing.files import FileTopic
        from tests._support import Collect

        topic = FileTopic(str(tmp_path / "in"))
        cp = str(tmp_path / "checkpoint")
        i, s = Serdes.Integer(), Serdes.String()
        b, t1, t2 = two_tables()
        t1.outer_join(t2, joiner).to_stream().to("out", OUT)
        topology = b.build()

        def run(on: str = operator) -> list[tuple[Any, Any, int]]:
            out = Collect()
            q, _, _ = start_streaming(topology, lambda n: topic.read_stream(spark, n.topics), out,
                                      checkpoint_location=cp, operator=on)
            q.processAllAvailable()
            q.stop()
            return [(k, v, ts) for _, k, v, ts in out.records]

        topic.append("t1", [(1, "A1", 10), (2, "A2", 11)], i, s)
        topic.append("t2", [(1, "B1", 12), (3, "B3", 13)], i, s)
        assert run() == [(1, "A1+null", 10), (2, "A2+null", 11), (1, "A1+B1", 12), (3, "null+B3", 13)]

        topic.append("t1", [(1, None, 20), (3, "A3", 21)], i, s)
        topic.append("t2", [(2, "B2", 5), (1, None, 30)], i, s)
        assert run() == [(1, "null+B1", 20), (3, "A3+B3", 21), (2, "A2+B2", 11), (1, None, 30)]
        with pytest.raises(CheckpointOperatorError, match=f"set streamsdsl.operator to '{operator}'"):
            run(on="python" if operator == "jvm" else "jvm")
