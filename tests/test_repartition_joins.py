"""Joins and tables after a key change: the repartition Kafka Streams inserts before a
stream-table join, a stream-stream join (either side) and ``to_table()`` of a re-keyed stream.

describe() texts are Kafka's own (KStreamKTableJoinTest, KStreamKStreamJoinTest,
KStreamImplTest, RepartitionTopicNamingTest); the TopologyTestDriver's output is Kafka's for
the same input, including the repartition filter that drops null keys unless a join that keeps
them (KIP-962) is downstream; a streaming query runs a re-keyed left join across micro-batches
and a restart."""

from __future__ import annotations

from typing import Any

import pytest

from streamsdsl import (
    Consumed,
    JoinWindows,
    Materialized,
    Produced,
    Serdes,
    StreamJoined,
    StreamsBuilder,
    TestRecord,
)

R = TestRecord
STR = Consumed.with_serdes(Serdes.String(), Serdes.String())
INT_STR = Consumed.with_serdes(Serdes.Integer(), Serdes.String())
OUT = Produced.with_serdes(Serdes.Integer(), Serdes.String())
W100 = JoinWindows.of_time_difference_with_no_grace(100)


def joiner(value: Any, other: Any) -> str:
    """Kafka's ``MockValueJoiner.TOSTRING_JOINER``: ``v1 + "+" + v2`` (Java renders null as "null")."""
    return f"{'null' if value is None else value}+{'null' if other is None else other}"


def concat(value: Any, other: Any) -> str:
    """Kafka's ``(value1, value2) -> value1 + value2``."""
    return f"{value}{other}"


def rekey(key: Any, value: str) -> tuple[Any, str]:
    """``"<k>:<v>"`` → key ``int(k)`` (``None`` for ``n``), value ``v``."""
    k, v = value.split(":")
    return (None if k == "n" else int(k)), v


def _sink(name: str, topic: str, pred: str) -> str:
    return f"    Sink: {name} (topic: {topic})\n      <-- {pred}\n"


def _stream_table_topology(named: bool) -> str:
    """KStreamKTableJoinTest.shouldCreateRepartitionTopicsWithGeneratedName / WithUserProvidedName."""
    b = StreamsBuilder()
    stream_a = b.stream("topic", STR)
    table_b = b.table("topic2", STR)
    table_c = b.table("topic3", STR)
    rekeyed = stream_a.map(lambda k, v: (v, k))
    rekeyed.join(table_b, concat, name="first-join" if named else None).to("out-one")
    rekeyed.join(table_c, concat, name="second-join" if named else None).to("out-two")
    return b.build().describe()


def _stream_stream_topology(named: bool) -> str:
    """KStreamKStreamJoinTest.shouldReuseRepartitionTopicWithGeneratedName /
    shouldCreateRepartitionTopicsWithUserProvidedName."""
    b = StreamsBuilder()
    stream1, stream2, stream3 = b.stream("topic", STR), b.stream("topic2", STR), b.stream("topic3", STR)
    new_stream = stream1.map(lambda k, v: (v, k))
    joined = StreamJoined.with_serdes(Serdes.String(), Serdes.String(), Serdes.String())
    first = {"stream_joined": joined.with_name("first-join")} if named else {}
    second = {"stream_joined": joined.with_name("second-join")} if named else {}
    new_stream.join(stream2, concat, W100, **first).to("out-one")
    new_stream.join(stream3, concat, W100, **second).to("out-two" if named else "out-to")
    return b.build().describe()


class TestDescribe:
    def test_stream_table_join_generated_names_reuse_the_repartition(self) -> None:
        """KStreamKTableJoinTest.shouldCreateRepartitionTopicsWithGeneratedName: the topic is named
        after the re-keyed stream (KSTREAM-MAP-…-repartition); the second unnamed join of the same
        stream reuses it (its three indexes are burnt all the same: the join is 16)."""
        assert _stream_table_topology(named=False) == (
            "Topologies:\n"
            "   Sub-topology: 0\n"
            "    Source: KSTREAM-SOURCE-0000000000 (topics: [topic])\n"
            "      --> KSTREAM-MAP-0000000007\n"
            "    Processor: KSTREAM-MAP-0000000007 (stores: [])\n"
            "      --> KSTREAM-FILTER-0000000009\n"
            "      <-- KSTREAM-SOURCE-0000000000\n"
            "    Processor: KSTREAM-FILTER-0000000009 (stores: [])\n"
            "      --> KSTREAM-SINK-0000000008\n"
            "      <-- KSTREAM-MAP-0000000007\n"
            "    Sink: KSTREAM-SINK-0000000008 (topic: KSTREAM-MAP-0000000007-repartition)\n"
            "      <-- KSTREAM-FILTER-0000000009\n"
            "\n"
            "  Sub-topology: 1\n"
            "    Source: KSTREAM-SOURCE-0000000010 (topics: [KSTREAM-MAP-0000000007-repartition])\n"
            "      --> KSTREAM-JOIN-0000000011, KSTREAM-JOIN-0000000016\n"
            "    Processor: KSTREAM-JOIN-0000000011 (stores: [topic2-STATE-STORE-0000000001])\n"
            "      --> KSTREAM-SINK-0000000012\n"
            "      <-- KSTREAM-SOURCE-0000000010\n"
            "    Processor: KSTREAM-JOIN-0000000016 (stores: [topic3-STATE-STORE-0000000004])\n"
            "      --> KSTREAM-SINK-0000000017\n"
            "      <-- KSTREAM-SOURCE-0000000010\n"
            "    Source: KSTREAM-SOURCE-0000000002 (topics: [topic2])\n"
            "      --> KTABLE-SOURCE-0000000003\n"
            "    Source: KSTREAM-SOURCE-0000000005 (topics: [topic3])\n"
            "      --> KTABLE-SOURCE-0000000006\n"
            "    Sink: KSTREAM-SINK-0000000012 (topic: out-one)\n"
            "      <-- KSTREAM-JOIN-0000000011\n"
            "    Sink: KSTREAM-SINK-0000000017 (topic: out-two)\n"
            "      <-- KSTREAM-JOIN-0000000016\n"
            "    Processor: KTABLE-SOURCE-0000000003 (stores: [topic2-STATE-STORE-0000000001])\n"
            "      --> none\n"
            "      <-- KSTREAM-SOURCE-0000000002\n"
            "    Processor: KTABLE-SOURCE-0000000006 (stores: [topic3-STATE-STORE-0000000004])\n"
            "      --> none\n"
            "      <-- KSTREAM-SOURCE-0000000005\n\n"
        )

    def test_stream_table_join_user_provided_names(self) -> None:
        """KStreamKTableJoinTest.shouldCreateRepartitionTopicsWithUserProvidedName: a named join
        (Kafka's Joined.as, here name=) names its repartition <name>-repartition(-filter/-sink/
        -source); each named join has its own, and its own sub-topology."""
        assert _stream_table_topology(named=True) == (
            "Topologies:\n"
            "   Sub-topology: 0\n"
            "    Source: KSTREAM-SOURCE-0000000000 (topics: [topic])\n"
            "      --> KSTREAM-MAP-0000000007\n"
            "    Processor: KSTREAM-MAP-0000000007 (stores: [])\n"
            "      --> first-join-repartition-filter, second-join-repartition-filter\n"
            "      <-- KSTREAM-SOURCE-0000000000\n"
            "    Processor: first-join-repartition-filter (stores: [])\n"
            "      --> first-join-repartition-sink\n"
            "      <-- KSTREAM-MAP-0000000007\n"
            "    Processor: second-join-repartition-filter (stores: [])\n"
            "      --> second-join-repartition-sink\n"
            "      <-- KSTREAM-MAP-0000000007\n"
            + _sink("first-join-repartition-sink", "first-join-repartition", "first-join-repartition-filter")
            + _sink("second-join-repartition-sink", "second-join-repartition", "second-join-repartition-filter")
            + "\n"
            "  Sub-topology: 1\n"
            "    Source: first-join-repartition-source (topics: [first-join-repartition])\n"
            "      --> first-join\n"
            "    Source: KSTREAM-SOURCE-0000000002 (topics: [topic2])\n"
            "      --> KTABLE-SOURCE-0000000003\n"
            "    Processor: first-join (stores: [topic2-STATE-STORE-0000000001])\n"
            "      --> KSTREAM-SINK-0000000012\n"
            "      <-- first-join-repartition-source\n"
            + _sink("KSTREAM-SINK-0000000012", "out-one", "first-join")
            + "    Processor: KTABLE-SOURCE-0000000003 (stores: [topic2-STATE-STORE-0000000001])\n"
            "      --> none\n"
            "      <-- KSTREAM-SOURCE-0000000002\n"
            "\n"
            "  Sub-topology: 2\n"
            "    Source: second-join-repartition-source (topics: [second-join-repartition])\n"
            "      --> second-join\n"
            "    Source: KSTREAM-SOURCE-0000000005 (topics: [topic3])\n"
            "      --> KTABLE-SOURCE-0000000006\n"
            "    Processor: second-join (stores: [topic3-STATE-STORE-0000000004])\n"
            "      --> KSTREAM-SINK-0000000017\n"
            "      <-- second-join-repartition-source\n"
            + _sink("KSTREAM-SINK-0000000017", "out-two", "second-join")
            + "    Processor: KTABLE-SOURCE-0000000006 (stores: [topic3-STATE-STORE-0000000004])\n"
            "      --> none\n"
            "      <-- KSTREAM-SOURCE-0000000005\n\n"
        )

    def test_stream_stream_join_generated_names_reuse_the_repartition(self) -> None:
        """KStreamKStreamJoinTest.shouldReuseRepartitionTopicWithGeneratedName: the re-keyed left
        side is repartitioned once (KSTREAM-MAP-0000000003-repartition) and feeds both joins."""
        assert _stream_stream_topology(named=False) == (
            "Topologies:\n"
            "   Sub-topology: 0\n"
            "    Source: KSTREAM-SOURCE-0000000000 (topics: [topic])\n"
            "      --> KSTREAM-MAP-0000000003\n"
            "    Processor: KSTREAM-MAP-0000000003 (stores: [])\n"
            "      --> KSTREAM-FILTER-0000000005\n"
            "      <-- KSTREAM-SOURCE-0000000000\n"
            "    Processor: KSTREAM-FILTER-0000000005 (stores: [])\n"
            "      --> KSTREAM-SINK-0000000004\n"
            "      <-- KSTREAM-MAP-0000000003\n"
            + _sink("KSTREAM-SINK-0000000004", "KSTREAM-MAP-0000000003-repartition", "KSTREAM-FILTER-0000000005")
            + "\n"
            "  Sub-topology: 1\n"
            "    Source: KSTREAM-SOURCE-0000000006 (topics: [KSTREAM-MAP-0000000003-repartition])\n"
            "      --> KSTREAM-WINDOWED-0000000007, KSTREAM-WINDOWED-0000000016\n"
            "    Source: KSTREAM-SOURCE-0000000001 (topics: [topic2])\n"
            "      --> KSTREAM-WINDOWED-0000000008\n"
            "    Source: KSTREAM-SOURCE-0000000002 (topics: [topic3])\n"
            "      --> KSTREAM-WINDOWED-0000000017\n"
            "    Processor: KSTREAM-WINDOWED-0000000007 (stores: [KSTREAM-JOINTHIS-0000000009-store])\n"
            "      --> KSTREAM-JOINTHIS-0000000009\n"
            "      <-- KSTREAM-SOURCE-0000000006\n"
            "    Processor: KSTREAM-WINDOWED-0000000008 (stores: [KSTREAM-JOINOTHER-0000000010-store])\n"
            "      --> KSTREAM-JOINOTHER-0000000010\n"
            "      <-- KSTREAM-SOURCE-0000000001\n"
            "    Processor: KSTREAM-WINDOWED-0000000016 (stores: [KSTREAM-JOINTHIS-0000000018-store])\n"
            "      --> KSTREAM-JOINTHIS-0000000018\n"
            "      <-- KSTREAM-SOURCE-0000000006\n"
            "    Processor: KSTREAM-WINDOWED-0000000017 (stores: [KSTREAM-JOINOTHER-0000000019-store])\n"
            "      --> KSTREAM-JOINOTHER-0000000019\n"
            "      <-- KSTREAM-SOURCE-0000000002\n"
            "    Processor: KSTREAM-JOINOTHER-0000000010 (stores: [KSTREAM-JOINTHIS-0000000009-store])\n"
            "      --> KSTREAM-MERGE-0000000011\n"
            "      <-- KSTREAM-WINDOWED-0000000008\n"
            "    Processor: KSTREAM-JOINOTHER-0000000019 (stores: [KSTREAM-JOINTHIS-0000000018-store])\n"
            "      --> KSTREAM-MERGE-0000000020\n"
            "      <-- KSTREAM-WINDOWED-0000000017\n"
            "    Processor: KSTREAM-JOINTHIS-0000000009 (stores: [KSTREAM-JOINOTHER-0000000010-store])\n"
            "      --> KSTREAM-MERGE-0000000011\n"
            "      <-- KSTREAM-WINDOWED-0000000007\n"
            "    Processor: KSTREAM-JOINTHIS-0000000018 (stores: [KSTREAM-JOINOTHER-0000000019-store])\n"
            "      --> KSTREAM-MERGE-0000000020\n"
            "      <-- KSTREAM-WINDOWED-0000000016\n"
            "    Processor: KSTREAM-MERGE-0000000011 (stores: [])\n"
            "      --> KSTREAM-SINK-0000000012\n"
            "      <-- KSTREAM-JOINTHIS-0000000009, KSTREAM-JOINOTHER-0000000010\n"
            "    Processor: KSTREAM-MERGE-0000000020 (stores: [])\n"
            "      --> KSTREAM-SINK-0000000021\n"
            "      <-- KSTREAM-JOINTHIS-0000000018, KSTREAM-JOINOTHER-0000000019\n"
            + _sink("KSTREAM-SINK-0000000012", "out-one", "KSTREAM-MERGE-0000000011")
            + _sink("KSTREAM-SINK-0000000021", "out-to", "KSTREAM-MERGE-0000000020")
            + "\n"
        )

    def test_stream_stream_join_user_named(self) -> None:
        """KStreamKStreamJoinTest.shouldCreateRepartitionTopicsWithUserProvidedName: a join named
        by StreamJoined.with_name repartitions its left side as <name>-left-repartition. (The
        successors of KSTREAM-MAP are listed second-join first: Kafka orders them by their
        sub-tree size at the moment each was linked.)"""
        def join(n: str, store: tuple[str, str], other_source: str, sink: str, out: str) -> str:
            this_store, other_store = (f"KSTREAM-JOINTHIS-{store[0]}-store", f"KSTREAM-JOINOTHER-{store[1]}-store")
            return (
                f"    Source: {other_source}\n"
                f"      --> {n}-other-windowed\n"
                f"    Source: {n}-left-repartition-source (topics: [{n}-left-repartition])\n"
                f"      --> {n}-this-windowed\n"
                f"    Processor: {n}-other-windowed (stores: [{other_store}])\n"
                f"      --> {n}-other-join\n"
                f"      <-- {other_source.split(' ')[0]}\n"
                f"    Processor: {n}-this-windowed (stores: [{this_store}])\n"
                f"      --> {n}-this-join\n"
                f"      <-- {n}-left-repartition-source\n"
                f"    Processor: {n}-other-join (stores: [{this_store}])\n"
                f"      --> {n}-merge\n"
                f"      <-- {n}-other-windowed\n"
                f"    Processor: {n}-this-join (stores: [{other_store}])\n"
                f"      --> {n}-merge\n"
                f"      <-- {n}-this-windowed\n"
                f"    Processor: {n}-merge (stores: [])\n"
                f"      --> {sink}\n"
                f"      <-- {n}-this-join, {n}-other-join\n"
                + _sink(sink, out, f"{n}-merge")
            )

        assert _stream_stream_topology(named=True) == (
            "Topologies:\n"
            "   Sub-topology: 0\n"
            "    Source: KSTREAM-SOURCE-0000000000 (topics: [topic])\n"
            "      --> KSTREAM-MAP-0000000003\n"
            "    Processor: KSTREAM-MAP-0000000003 (stores: [])\n"
            "      --> second-join-left-repartition-filter, first-join-left-repartition-filter\n"
            "      <-- KSTREAM-SOURCE-0000000000\n"
            "    Processor: first-join-left-repartition-filter (stores: [])\n"
            "      --> first-join-left-repartition-sink\n"
            "      <-- KSTREAM-MAP-0000000003\n"
            "    Processor: second-join-left-repartition-filter (stores: [])\n"
            "      --> second-join-left-repartition-sink\n"
            "      <-- KSTREAM-MAP-0000000003\n"
            + _sink("first-join-left-repartition-sink", "first-join-left-repartition",
                    "first-join-left-repartition-filter")
            + _sink("second-join-left-repartition-sink", "second-join-left-repartition",
                    "second-join-left-repartition-filter")
            + "\n  Sub-topology: 1\n"
            + join("first-join", ("0000000009", "0000000010"), "KSTREAM-SOURCE-0000000001 (topics: [topic2])",
                   "KSTREAM-SINK-0000000012", "out-one")
            + "\n  Sub-topology: 2\n"
            + join("second-join", ("0000000018", "0000000019"), "KSTREAM-SOURCE-0000000002 (topics: [topic3])",
                   "KSTREAM-SINK-0000000021", "out-two")
            + "\n"
        )

    def test_both_sides_rekeyed_keep_the_join_name(self) -> None:
        """RepartitionTopicNamingTest.shouldKeepRepartitionTopicNameForJoins: with both sides
        re-keyed (and other steps after the key change), a named join's topics are
        <name>-left-repartition and <name>-right-repartition."""
        for other_operations in (False, True):
            b = StreamsBuilder()
            one, two = b.stream("topic-one", STR), b.stream("topic-two", STR)
            one, two = one.select_key(lambda k, v: k + v), two.select_key(lambda k, v: k + v)
            if other_operations:
                one = one.filter(lambda k, v: True).peek(lambda k, v: None)
                two = two.filter(lambda k, v: True).peek(lambda k, v: None)
            one.join(two, concat, JoinWindows.of_time_difference_with_no_grace(1000),
                     stream_joined=StreamJoined.with_serdes(Serdes.String(), Serdes.String(), Serdes.String())
                     .with_name("my-join"))
            text = b.build().describe()
            assert "(topic: my-join-left-repartition)" in text
            assert "(topic: my-join-right-repartition)" in text

    def test_to_table_after_a_key_change(self) -> None:
        """KStreamImplTest.shouldSupportKeyChangeKTableFromKStream: the repartition is named after
        the KSTREAM-TOTABLE node (the store name burns index 3; no store is shown)."""
        b = StreamsBuilder()
        (b.stream("input", STR).map(lambda key, value: (ord(key[0]) - ord("A"), value))
         .to_table(materialized=Materialized.with_serdes(Serdes.Integer(), None)).to_stream().to("output"))
        assert b.build().describe() == (
            "Topologies:\n"
            "   Sub-topology: 0\n"
            "    Source: KSTREAM-SOURCE-0000000000 (topics: [input])\n"
            "      --> KSTREAM-MAP-0000000001\n"
            "    Processor: KSTREAM-MAP-0000000001 (stores: [])\n"
            "      --> KSTREAM-FILTER-0000000005\n"
            "      <-- KSTREAM-SOURCE-0000000000\n"
            "    Processor: KSTREAM-FILTER-0000000005 (stores: [])\n"
            "      --> KSTREAM-SINK-0000000004\n"
            "      <-- KSTREAM-MAP-0000000001\n"
            "    Sink: KSTREAM-SINK-0000000004 (topic: KSTREAM-TOTABLE-0000000002-repartition)\n"
            "      <-- KSTREAM-FILTER-0000000005\n"
            "\n"
            "  Sub-topology: 1\n"
            "    Source: KSTREAM-SOURCE-0000000006 (topics: [KSTREAM-TOTABLE-0000000002-repartition])\n"
            "      --> KSTREAM-TOTABLE-0000000002\n"
            "    Processor: KSTREAM-TOTABLE-0000000002 (stores: [])\n"
            "      --> KTABLE-TOSTREAM-0000000007\n"
            "      <-- KSTREAM-SOURCE-0000000006\n"
            "    Processor: KTABLE-TOSTREAM-0000000007 (stores: [])\n"
            "      --> KSTREAM-SINK-0000000008\n"
            "      <-- KSTREAM-TOTABLE-0000000002\n"
            "    Sink: KSTREAM-SINK-0000000008 (topic: output)\n"
            "      <-- KTABLE-TOSTREAM-0000000007\n\n"
        )

    def test_the_join_result_needs_no_repartition(self) -> None:
        """A join's result keeps its key: grouping it adds no second repartition (Kafka returns
        the joined stream with repartitionRequired = false)."""
        b = StreamsBuilder()
        joined = b.stream("s", STR).select_key(lambda k, v: v).join(b.table("t", STR), concat)
        joined.group_by_key().count().to_stream().to("out")
        assert b.build().describe().count("-repartition)") == 1


def _stream_table(*, inner: bool, left: bool) -> Any:
    b = StreamsBuilder()
    rekeyed = b.stream("stream", STR).map(rekey)
    table = b.table("table", INT_STR)
    if inner:
        rekeyed.join(table, joiner).to("out", OUT)
    if left:
        rekeyed.left_join(table, joiner).to("left-out", OUT)
    return b.build()


STREAM_TABLE_INPUT = [
    ("table", 0, "Y0", 0), ("table", 1, "Y1", 1),
    ("stream", "a", "0:X0", 5),  # re-keyed to 0: joins Y0
    ("stream", "b", "2:X2", 6),  # no table value for 2
    ("stream", "c", "n:XN", 7),  # new key null
    ("table", 0, None, 8),  # tombstone
    ("stream", "d", "0:X0b", 9),
    ("stream", "e", "1:X1", 3),  # out of order: joins the current Y1, keeps its own ts
]


@pytest.mark.spark
class TestStreamTableJoinDriver:
    def test_inner_and_left_join_after_map(self, run_driver: Any) -> None:
        """Both joins read one repartition (the second unnamed join reuses it). A left join is
        downstream, so the repartition forwards the null key (KIP-962): the left join joins it
        with null, the inner join drops and counts it. Keys, values and timestamps as Kafka's."""
        out, metrics = run_driver(_stream_table(inner=True, left=True), STREAM_TABLE_INPUT, out=["out", "left-out"],
                                  key_serde=Serdes.Integer(), value_serde=Serdes.String(), with_metrics=True)
        assert out == [
            [R(0, "X0+Y0", 5), R(1, "X1+Y1", 3)],
            [R(0, "X0+Y0", 5), R(2, "X2+null", 6), R(None, "XN+null", 7), R(0, "X0b+null", 9), R(1, "X1+Y1", 3)],
        ]
        assert metrics["dropped-records-total"] == 1.0

    def test_inner_join_after_map_filters_null_keys_counted(self, run_driver: Any) -> None:
        """With only inner joins downstream, the repartition's filter drops the null key before the
        join and counts it (Kafka's KStreamFilter counts nothing: docs/differences.md)."""
        out, metrics = run_driver(_stream_table(inner=True, left=False), STREAM_TABLE_INPUT,
                                  key_serde=Serdes.Integer(), value_serde=Serdes.String(), with_metrics=True)
        assert out == [R(0, "X0+Y0", 5), R(1, "X1+Y1", 3)]
        assert metrics["dropped-records-total"] == 1.0

    def test_select_key_then_left_join(self, run_driver: Any) -> None:
        """select_key (a Column-free Python selector) before a left join: the stream record keeps
        its value and timestamp, the new key selects the table row."""
        b = StreamsBuilder()
        b.stream("stream", STR).select_key(lambda k, v: int(v[1])).left_join(b.table("table", INT_STR), joiner).to(
            "out", OUT)
        records = [("table", 1, "Y1", 0), ("stream", "x", "X1", 4), ("stream", "y", "X2", 2)]
        assert run_driver(b.build(), records, key_serde=Serdes.Integer(), value_serde=Serdes.String()) == [
            R(1, "X1+Y1", 4), R(2, "X2+null", 2)]


def _stream_stream(kind: str) -> Any:
    b = StreamsBuilder()
    left = b.stream("left", STR).map(rekey)
    getattr(left, kind)(b.stream("right", INT_STR), joiner, W100).to("out", OUT)
    return b.build()


STREAM_STREAM_INPUT = [
    ("left", "a", "0:L0", 0), ("left", "b", "1:L1", 10),
    ("left", "c", "n:LN", 20),  # new key null
    ("right", 0, "R0", 50), ("right", 2, "R2", 60),
    ("left", "d", "0:L0b", 300),  # stream time 300: closes the windows of L1 and R2
]


@pytest.mark.spark
class TestStreamStreamJoinDriver:
    @pytest.mark.parametrize(("kind", "expected", "dropped"), [
        ("join", [R(0, "L0+R0", 50)], 1.0),
        ("left_join", [R(None, "LN+null", 20), R(0, "L0+R0", 50), R(1, "L1+null", 10)], 0.0),
        ("outer_join", [R(None, "LN+null", 20), R(0, "L0+R0", 50), R(1, "L1+null", 10), R(2, "null+R2", 60)], 0.0),
    ])
    def test_join_kinds_after_map(self, run_driver: Any, kind: str, expected: list[Any], dropped: float) -> None:
        """The re-keyed left side joins by its new key. Inner: the repartition drops the null key
        (counted). Left/outer: it forwards it and the join emits it at once joined with null
        (KIP-962); unmatched records come out once their window has closed (KIP-633), at the
        record that moves stream time past it, in (ts, right-before-left) order."""
        out, metrics = run_driver(_stream_stream(kind), STREAM_STREAM_INPUT, key_serde=Serdes.Integer(),
                                  value_serde=Serdes.String(), with_metrics=True)
        assert out == expected
        assert metrics["dropped-records-total"] == dropped

    def test_right_side_rekeyed(self, run_driver: Any) -> None:
        """The other stream re-keyed: its repartition is <join's stream>-repartition of its own
        node; records join as if they had been written with the new key."""
        b = StreamsBuilder()
        b.stream("left", INT_STR).join(b.stream("right", STR).map(rekey), joiner, W100).to("out", OUT)
        records = [("left", 0, "L0", 10), ("right", "x", "0:R0", 20), ("right", "y", "n:RN", 30),
                   ("right", "z", "1:R1", 40), ("left", 1, "L1", 45)]
        assert run_driver(b.build(), records, key_serde=Serdes.Integer(), value_serde=Serdes.String()) == [
            R(0, "L0+R0", 20), R(1, "L1+R1", 45)]


@pytest.mark.spark
class TestToTableDriver:
    def test_kafka_key_change_scenario(self, run_driver: Any) -> None:
        """KStreamImplTest.shouldSupportKeyChangeKTableFromKStream: every record reaches the
        table under its new key with its own timestamp, out-of-order ones too."""
        b = StreamsBuilder()
        (b.stream("input", STR).map(lambda key, value: (ord(key[0]) - ord("A"), value))
         .to_table(materialized=Materialized.with_serdes(Serdes.Integer(), None)).to_stream().to("output"))
        records = [("A", "01", 5), ("B", "02", 100), ("C", "03", 0), ("D", "04", 0), ("A", "05", 10), ("A", "06", 8)]
        # the mapper's values are held as JSON (docs/differences.md), read back as JSON
        assert run_driver(b.build(), records, out="output", key_serde=Serdes.Integer()) == [
            R(0, "01", 5), R(1, "02", 100), R(2, "03", 0), R(3, "04", 0), R(0, "05", 10), R(0, "06", 8)]

    def test_materialized_table_after_map_drops_null_keys_counted(self, run_driver: Any) -> None:
        """A materialized table (a store) keeps the latest value per new key; a null new key is
        dropped by the repartition's filter and counted; a null value deletes the key."""
        b = StreamsBuilder()
        b.stream("input", STR).map(rekey).to_table(materialized=Materialized.as_("latest")).to_stream().to("out")
        records = [("a", "0:x", 1), ("b", "n:y", 2), ("c", "0:z", 3), ("d", "1:w", 4)]
        out, metrics = run_driver(b.build(), records, with_metrics=True)  # JSON keys and values
        assert out == [R(0, "x", 1), R(0, "z", 3), R(1, "w", 4)]
        assert metrics["dropped-records-total"] == 1.0


@pytest.mark.spark
class TestStreaming:
    def test_rekeyed_left_join_micro_batches_and_restart(self, spark: Any, tmp_path: Any) -> None:
        """A stream re-keyed by map, left-joined with a table on a streaming query: Spark's shuffle
        of the join operator moves each record to its new key; the table state survives
        micro-batches and a restart from the checkpoint."""
        from streamsdsl.runtime.streaming import start_streaming
        from streamsdsl.testing.files import FileTopic
        from tests._support import Collect

        topic = FileTopic(str(tmp_path / "in"))
        cp = str(tmp_path / "checkpoint")
        i, s = Serdes.Integer(), Serdes.String()
        topology = _stream_table(inner=False, left=True)
        topic.append("table", [(1, "Y1", 10), (2, "Y2", 10)], i, s)
        topic.append("stream", [("a", "1:X1", 20), ("b", "3:X3", 21), ("c", "2:X2", 22)], s, s)
        out = Collect()
        q, _, _ = start_streaming(topology, lambda n: topic.read_stream(spark, n.topics), out, checkpoint_location=cp)
        q.processAllAvailable()
        q.stop()
        assert sorted(((k, v, ts) for _, k, v, ts in out.records), key=lambda r: r[2]) == [
            (1, "X1+Y1", 20), (3, "X3+null", 21), (2, "X2+Y2", 22)]

        topic.append("table", [(1, None, 30)], i, s)
        topic.append("stream", [("d", "1:X1", 40), ("e", "2:X2", 41)], s, s)
        out2 = Collect()
        q, _, _ = start_streaming(topology, lambda n: topic.read_stream(spark, n.topics), out2, checkpoint_location=cp)
        q.processAllAvailable()
        q.stop()
        assert sorted(((k, v, ts) for _, k, v, ts in out2.records), key=lambda r: r[2]) == [
            (1, "X1+null", 40), (2, "X2+Y2", 41)]
