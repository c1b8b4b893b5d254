"""Foreign-key table–table joins (KTable.join / left_join with a foreign-key extractor, KIP-213):
the API and its checks, describe() as Kafka Streams 4.0 prints it, the TopologyTestDriver on
Kafka's own scenarios (KTableKTableForeignKeyJoinIntegrationTest, its Materialization and
InnerJoinMulti siblings, KTableKTableForeignKeyJoinScenarioTest) and on a sequence whose every
output Kafka Streams 4.0's TopologyTestDriver wrote (changed, None and stale foreign keys,
tombstones of either side, the right side's timestamps), a property test against a
recomputation from the final tables, and a streaming query restarted from its checkpoint."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamsdsl import (
    Consumed,
    InvalidTypeError,
    Materialized,
    Produced,
    Serdes,
    StreamsBuilder,
    TableJoined,
    TopologyTestDriver,
)
from streamsdsl.errors import InvalidArgumentError
from streamsdsl.semantics.fk_join import FkJoinSpec, fk_join_reference_run

S = Consumed.with_serdes(Serdes.String(), Serdes.String())
OUT = Produced.with_serdes(Serdes.String(), Serdes.String())


def fk(value: str) -> str | None:
    """The foreign key before ``|`` (``null``: None), as the oracle's Java twin extracts it."""
    key = value.split("|")[0]
    return None if key == "null" else key


def pair(value: Any, other: Any) -> str:
    """Kafka's ``v1 + "+" + v2`` (Java renders null as "null")."""
    return f"{'null' if value is None else value}+{'null' if other is None else other}"


def tables() -> tuple[StreamsBuilder, Any, Any]:
    b = StreamsBuilder()
    return b, b.table("left", S), b.table("right", S)


class TestDescribe:
    def test_inner_join(self) -> None:
        """Kafka Streams 4.0's text, compared in full: two sub-topologies joined by the
        registration and response topics; every step burns an index (the result's store name
        too: KTABLE-TOSTREAM is 20)."""
        b, left, right = tables()
        left.join(right, fk, pair).to_stream().to("out", OUT)
        assert b.build().describe() == (
            "Topologies:\n"
            "   Sub-topology: 0\n"
            "    Source: KTABLE-SOURCE-0000000016 (topics: [KTABLE-FK-JOIN-SUBSCRIPTION-RESPONSE-0000000014-topic])\n"
            "      --> KTABLE-FK-JOIN-SUBSCRIPTION-RESPONSE-RESOLVER-PROCESSOR-0000000017\n"
            "    Source: KSTREAM-SOURCE-0000000001 (topics: [left])\n"
            "      --> KTABLE-SOURCE-0000000002\n"
            "    Processor: KTABLE-FK-JOIN-SUBSCRIPTION-RESPONSE-RESOLVER-PROCESSOR-0000000017 "
            "(stores: [left-STATE-STORE-0000000000])\n"
            "      --> KTABLE-FK-JOIN-OUTPUT-0000000018\n"
            "      <-- KTABLE-SOURCE-0000000016\n"
            "    Processor: KTABLE-FK-JOIN-OUTPUT-0000000018 (stores: [])\n"
            "      --> KTABLE-TOSTREAM-0000000020\n"
            "      <-- KTABLE-FK-JOIN-SUBSCRIPTION-RESPONSE-RESOLVER-PROCESSOR-0000000017\n"
            "    Processor: KTABLE-SOURCE-0000000002 (stores: [left-STATE-STORE-0000000000])\n"
            "      --> KTABLE-FK-JOIN-SUBSCRIPTION-REGISTRATION-0000000007\n"
            "      <-- KSTREAM-SOURCE-0000000001\n"
            "    Processor: KTABLE-FK-JOIN-SUBSCRIPTION-REGISTRATION-0000000007 (stores: [])\n"
            "      --> KTABLE-SINK-0000000008\n"
            "      <-- KTABLE-SOURCE-0000000002\n"
            "    Processor: KTABLE-TOSTREAM-0000000020 (stores: [])\n"
            "      --> KSTREAM-SINK-0000000021\n"
            "      <-- KTABLE-FK-JOIN-OUTPUT-0000000018\n"
            "    Sink: KSTREAM-SINK-0000000021 (topic: out)\n"
            "      <-- KTABLE-TOSTREAM-0000000020\n"
            "    Sink: KTABLE-SINK-0000000008 (topic: KTABLE-FK-JOIN-SUBSCRIPTION-REGISTRATION-0000000006-topic)\n"
            "      <-- KTABLE-FK-JOIN-SUBSCRIPTION-REGISTRATION-0000000007\n"
            "\n"
            "  Sub-topology: 1\n"
            "    Source: KSTREAM-SOURCE-0000000004 (topics: [right])\n"
            "      --> KTABLE-SOURCE-0000000005\n"
            "    Source: KTABLE-SOURCE-0000000009 (topics: [KTABLE-FK-JOIN-SUBSCRIPTION-REGISTRATION-0000000006-topic])\n"
            "      --> KTABLE-FK-JOIN-SUBSCRIPTION-PROCESSOR-0000000011\n"
            "    Processor: KTABLE-FK-JOIN-SUBSCRIPTION-PROCESSOR-0000000011 "
            "(stores: [KTABLE-FK-JOIN-SUBSCRIPTION-STATE-STORE-0000000010])\n"
            "      --> KTABLE-FK-JOIN-SUBSCRIPTION-PROCESSOR-0000000012\n"
            "      <-- KTABLE-SOURCE-0000000009\n"
            "    Processor: KTABLE-SOURCE-0000000005 (stores: [right-STATE-STORE-0000000003])\n"
            "      --> KTABLE-FK-JOIN-SUBSCRIPTION-PROCESSOR-0000000013\n"
            "      <-- KSTREAM-SOURCE-0000000004\n"
            "    Processor: KTABLE-FK-JOIN-SUBSCRIPTION-PROCESSOR-0000000012 (stores: [right-STATE-STORE-0000000003])\n"
            "      --> KTABLE-SINK-0000000015\n"
            "      <-- KTABLE-FK-JOIN-SUBSCRIPTION-PROCESSOR-0000000011\n"
            "    Processor: KTABLE-FK-JOIN-SUBSCRIPTION-PROCESSOR-0000000013 "
            "(stores: [KTABLE-FK-JOIN-SUBSCRIPTION-STATE-STORE-0000000010])\n"
            "      --> KTABLE-SINK-0000000015\n"
            "      <-- KTABLE-SOURCE-0000000005\n"
            "    Sink: KTABLE-SINK-0000000015 (topic: KTABLE-FK-JOIN-SUBSCRIPTION-RESPONSE-0000000014-topic)\n"
            "      <-- KTABLE-FK-JOIN-SUBSCRIPTION-PROCESSOR-0000000012, KTABLE-FK-JOIN-SUBSCRIPTION-PROCESSOR-0000000013\n"
            "\n"
        )

    def test_left_join_named_and_materialized(self) -> None:
        """TableJoined.as_("fk") names every processor, topic and the subscription store; a
        named result store is listed (Kafka Streams 4.0's text, in full)."""
        b, left, right = tables()
        left.left_join(right, fk, pair, table_joined=TableJoined.as_("fk"),
                       materialized=Materialized.as_("mystore")).to_stream().to("out", OUT)
        assert b.build().describe() == (
            "Topologies:\n"
            "   Sub-topology: 0\n"
            "    Source: fk-subscription-response-source (topics: [fk-subscription-response-topic])\n"
            "      --> fk-subscription-response-resolver\n"
            "    Source: KSTREAM-SOURCE-0000000001 (topics: [left])\n"
            "      --> KTABLE-SOURCE-0000000002\n"
            "    Processor: fk-subscription-response-resolver (stores: [left-STATE-STORE-0000000000])\n"
            "      --> fk-result\n"
            "      <-- fk-subscription-response-source\n"
            "    Processor: KTABLE-SOURCE-0000000002 (stores: [left-STATE-STORE-0000000000])\n"
            "      --> fk-subscription-registration-processor\n"
            "      <-- KSTREAM-SOURCE-0000000001\n"
            "    Processor: fk-result (stores: [mystore])\n"
            "      --> KTABLE-TOSTREAM-0000000019\n"
            "      <-- fk-subscription-response-resolver\n"
            "    Processor: KTABLE-TOSTREAM-0000000019 (stores: [])\n"
            "      --> KSTREAM-SINK-0000000020\n"
            "      <-- fk-result\n"
            "    Processor: fk-subscription-registration-processor (stores: [])\n"
            "      --> fk-subscription-registration-sink\n"
            "      <-- KTABLE-SOURCE-0000000002\n"
            "    Sink: KSTREAM-SINK-0000000020 (topic: out)\n"
            "      <-- KTABLE-TOSTREAM-0000000019\n"
            "    Sink: fk-subscription-registration-sink (topic: fk-subscription-registration-topic)\n"
            "      <-- fk-subscription-registration-processor\n"
            "\n"
            "  Sub-topology: 1\n"
            "    Source: KSTREAM-SOURCE-0000000004 (topics: [right])\n"
            "      --> KTABLE-SOURCE-0000000005\n"
            "    Source: fk-subscription-registration-source (topics: [fk-subscription-registration-topic])\n"
            "      --> fk-subscription-receive\n"
            "    Processor: KTABLE-SOURCE-0000000005 (stores: [right-STATE-STORE-0000000003])\n"
            "      --> fk-foreign-join-subscription\n"
            "      <-- KSTREAM-SOURCE-0000000004\n"
            "    Processor: fk-subscription-receive (stores: [fk-subscription-store])\n"
            "      --> fk-subscription-join-foreign\n"
            "      <-- fk-subscription-registration-source\n"
            "    Processor: fk-foreign-join-subscription (stores: [fk-subscription-store])\n"
            "      --> fk-subscription-response-sink\n"
            "      <-- KTABLE-SOURCE-0000000005\n"
            "    Processor: fk-subscription-join-foreign (stores: [right-STATE-STORE-0000000003])\n"
            "      --> fk-subscription-response-sink\n"
            "      <-- fk-subscription-receive\n"
            "    Sink: fk-subscription-response-sink (topic: fk-subscription-response-topic)\n"
            "      <-- fk-subscription-join-foreign, fk-foreign-join-subscription\n"
            "\n"
        )

    def test_internal_topics_are_repartition_topics_in_the_picture(self) -> None:
        """The Mermaid picture draws both internal topics as links between the sub-topologies."""
        b, left, right = tables()
        left.join(right, fk, pair, name="oc").to_stream().to("out", OUT)
        d = b.build().describe()
        assert d.repartition_topics == ("oc-subscription-registration-topic", "oc-subscription-response-topic")


class TestApi:
    def test_forms_of_the_call(self) -> None:
        """Three positional arguments, or foreign_key_extractor=, make a foreign-key join; two
        make the primary-key join; a (key, value) extractor is Kafka 4's BiFunction form."""
        from streamsdsl import ir

        b, left, right = tables()
        kinds = [
            left.join(right, fk, pair),
            left.join(right, pair, foreign_key_extractor=fk),
            left.left_join(right, foreign_key_extractor=lambda k, v: fk(v), joiner=pair),
            left.join(right, pair),
        ]
        topology = b.build()
        nodes = [topology.node(t.node_name) for t in kinds]
        assert [type(n).__name__ for n in nodes] == ["ForeignKeyJoinNode"] * 3 + ["TableTableJoinNode"]
        assert [n.extractor.takes_key for n in nodes[:3]] == [False, False, True]
        assert isinstance(nodes[2], ir.ForeignKeyJoinNode) and nodes[2].kind == "left"

    def test_joiner_with_key(self) -> None:
        """A joiner of (key, value, other_value) (Kafka's ValueJoinerWithKey, as every join here)
        gets this table's key, read-only."""
        b, left, right = tables()
        left.left_join(right, fk, lambda k, v, o: f"{k}:{pair(v, o)}").to_stream().to("out", OUT)
        with TopologyTestDriver(b.build()) as d:
            d.create_input_topic("right", Serdes.String(), Serdes.String()).pipe_input("A", "ra", 1)
            d.create_input_topic("left", Serdes.String(), Serdes.String()).pipe_input("k1", "A|1", 2)
            out = d.create_output_topic("out", Serdes.String(), Serdes.String())
            assert [(r.key, r.value, r.timestamp) for r in out.read_records_to_list()] == [("k1", "k1:A|1+ra", 2)]

    def test_argument_errors(self) -> None:
        """Each mistake fails when it is written, naming the argument and the fix."""
        b, left, right = tables()
        with pytest.raises(InvalidTypeError, match="got 4 positional arguments"):
            left.join(right, fk, pair, pair)
        with pytest.raises(InvalidTypeError, match="give each once"):
            left.join(right, fk, pair, joiner=pair)
        with pytest.raises(InvalidTypeError, match="'table_joined' configures a foreign-key join"):
            left.join(right, pair, table_joined=TableJoined.as_("x"))
        with pytest.raises(InvalidTypeError, match=r"'foreign_key_extractor' must accept 1 positional argument "
                                                   r"\(value\) or 2 \(key, value\)"):
            left.join(right, lambda a, b, c: a, pair)
        with pytest.raises(InvalidTypeError, match="'joiner' must accept 2 positional arguments"):
            left.join(right, fk, lambda v: v)
        with pytest.raises(InvalidTypeError, match="'table_joined' must be a TableJoined"):
            left.join(right, fk, pair, table_joined="x")
        with pytest.raises(InvalidArgumentError, match="name the join twice"):
            left.join(right, fk, pair, name="a", table_joined=TableJoined.as_("b"))
        with pytest.raises(InvalidTypeError, match="joins two KTables"):
            left.join(b.stream("s"), fk, pair)
        with pytest.raises(InvalidTypeError, match="a TableJoined partitioner must be a callable"):
            TableJoined.with_(1)

    def test_partitioners_are_accepted(self) -> None:
        """TableJoined's partitioners are accepted (Kafka code keeps working) and change nothing."""
        b, left, right = tables()
        options = TableJoined.with_(lambda t, k, v, n: 0, lambda t, k, v, n: 0).with_name("p")
        joined = left.join(right, fk, pair, table_joined=options)
        assert joined.node_name == "p-result"


#: A sequence piped to Kafka Streams 4.0's TopologyTestDriver (oracle/java's classpath) and what
#: it wrote after each record: (key, value, timestamp). Values are ``<foreign key>|<payload>``.
SEQUENCE = [
    ("left", "k1", "A|1", 10), ("right", "A", "ra", 5), ("left", "k2", "A|2", 3), ("right", "A", "ra2", 20),
    ("left", "k1", "B|1", 30), ("right", "B", "rb", 25), ("left", "k1", "B|1b", 31), ("left", "k1", "null|x", 40),
    ("left", "k1", "A|1", 41), ("right", "A", None, 50), ("left", "k2", None, 60), ("left", "k9", None, 61),
    ("right", "Z", None, 62), ("left", "k3", "null|3", 63), ("left", "k3", None, 64), ("left", "k4", "Q|4", 65),
    ("left", "k4", None, 66), ("right", "Q", "q", 67), ("right", "B", "rb2", 68),
]
KAFKA_OUTPUT = {
    "inner": [
        [], [("k1", "A|1+ra", 5)], [("k2", "A|2+ra", 5)], [("k1", "A|1+ra2", 20), ("k2", "A|2+ra2", 20)],
        [("k1", None, 30)], [("k1", "B|1+rb", 25)], [("k1", "B|1b+rb", 31)],
        [],  # a None foreign key: dropped, nothing retracted (the subscription to B stays)
        [],  # the old value's foreign key is None: dropped too
        [("k2", None, 50)], [("k2", None, 60)], [], [], [], [], [], [("k4", None, 66)], [],
        [],  # k1's subscription to B was made for B|1b: stale, dropped
    ],
    "left": [
        [("k1", "A|1+null", 10)], [("k1", "A|1+ra", 5)], [("k2", "A|2+ra", 5)],
        [("k1", "A|1+ra2", 20), ("k2", "A|2+ra2", 20)],
        [("k1", "B|1+null", 30), ("k1", "B|1+null", 30)],  # the old key's retraction, then the new key
        [("k1", "B|1+rb", 25)], [("k1", "B|1b+rb", 31)],
        [("k1", "null|x+null", 40), ("k1", "null|x+null", 40)], [("k1", "A|1+ra2", 41)],
        [("k1", "A|1+null", 50), ("k2", "A|2+null", 50)],  # the right side's timestamp, not the max
        [("k2", None, 60), ("k2", None, 60)], [], [], [("k3", "null|3+null", 63)], [("k3", None, 64)],
        [("k4", "Q|4+null", 65)], [("k4", None, 66), ("k4", None, 66)], [], [],
    ],
}
#: dropped-records-total after SEQUENCE: the inner join drops four records for a None foreign
#: key (of the new or the old value) and one stale response.
KAFKA_DROPPED = {"inner": 5.0, "left": 0.0}


class TestKafkaSequence:
    @pytest.mark.parametrize("kind", ["inner", "left"])
    def test_every_record_as_kafka_streams(self, kind: str) -> None:
        """Each record's outputs, as Kafka Streams 4.0 wrote them: a changed foreign key (inner:
        a tombstone when the new key has no row; left: joiner(left, None) from the old key, then
        the new match), None foreign keys, tombstones of either side, deletes of absent keys,
        stale subscriptions; a right update's results carry the right record's timestamp."""
        b, left, right = tables()
        (left.join if kind == "inner" else left.left_join)(right, fk, pair).to_stream().to("out", OUT)
        with TopologyTestDriver(b.build()) as d:
            inputs = {t: d.create_input_topic(t, Serdes.String(), Serdes.String()) for t in ("left", "right")}
            out = d.create_output_topic("out", Serdes.String(), Serdes.String())
            got = []
            for topic, key, value, ts in SEQUENCE:
                inputs[topic].pipe_input(key, value, ts)
                got.append([(r.key, r.value, r.timestamp) for r in out.read_records_to_list()])
            assert got == KAFKA_OUTPUT[kind]
            assert d.metrics()["dropped-records-total"] == KAFKA_DROPPED[kind]

    def test_reference_run_is_the_kernel_of_both_engines(self) -> None:
        """The kernel's reference run writes Kafka's records too (the engines run its steps)."""
        for kind in ("inner", "left"):
            out, drops = fk_join_reference_run(SEQUENCE, FkJoinSpec(kind), lambda k, v: fk(v), pair)  # type: ignore[arg-type]
            assert [(o.key, o.change.new, o.timestamp) for o in out] == [r for rs in KAFKA_OUTPUT[kind] for r in rs]
            assert len(drops) == KAFKA_DROPPED[kind]


def kafka_value_joiner(left: str, right: str | None) -> str:
    """KTableKTableForeignKeyJoinIntegrationTest's joiner: ``"(" + left + "," + right + ")"``."""
    return f"({left},{'null' if right is None else right})"


#: Kafka's integration test materializes the result with ``withCachingDisabled()``.
NO_CACHE = {"statestore.cache.max.bytes": 0}


def kafka_map(out: Any) -> dict[Any, Any]:
    """Kafka's ``readKeyValuesToMap``: the last value per key, a tombstone's key kept with null."""
    return dict(out.read_key_values_to_map())


def kafka_extractor(value: str) -> str:
    """KTableKTableForeignKeyJoinIntegrationTest's extractor: the part after ``|``."""
    return value.split("|")[1]


class TestKafkaIntegrationScenarios:
    """KTableKTableForeignKeyJoinIntegrationTest (Kafka 3.9/4.0): its topology (materialized as
    ``store`` or not; with ``rejoin``, the result joined again with the left table), read with
    readKeyValuesToMap after each step, and the store.

    Not transcribed: its ``optimization`` parameter (streamsdsl has no
    ``topology.optimization``: the topology is the same either way for these joins), its
    versioned parameters, so shouldIgnoreOutOfOrderRecordsIffVersioned only unversioned
    (versioned tables as a foreign-key join's inputs raise NotYetImplementedError), and the result store's
    ``withCachingDisabled()`` (streamsdsl has no per-store cache switch: the materialized
    cases run with ``statestore.cache.max.bytes = 0``, which Kafka's test has for the result
    store only). KTableKTableForeignKeyInnerJoinCustomPartitionerIntegrationTest and
    KTableKTableForeignKeyJoinDistributedTest are about partitions and several instances of a
    cluster, which the test driver does not have (one partition)."""

    def run(self, kind: str, materialized: bool, steps: list[list[tuple[str, str, str | None, int]]],
            *, extractor: Any = None, rejoin: bool = False, config: dict[str, Any] | None = None
            ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        b, left, right = tables()
        options = {"materialized": Materialized.as_("store")} if materialized else {}
        method = left.join if kind == "inner" else left.left_join
        result = method(right, extractor or kafka_extractor, kafka_value_joiner, **options)
        result.to_stream().to("out", OUT)
        if rejoin:
            rejoiner = lambda v1, v2: f"rejoin({v1},{v2})"  # noqa: E731
            (result.join if kind == "inner" else result.left_join)(left, rejoiner).to_stream().to("rejoin", OUT)
        outputs, stores = [], []
        with TopologyTestDriver(b.build(), config) as d:
            inputs = {t: d.create_input_topic(t, Serdes.String(), Serdes.String()) for t in ("left", "right")}
            out = d.create_output_topic("out", Serdes.String(), Serdes.String())
            rejoined = d.create_output_topic("rejoin", Serdes.String(), Serdes.String()) if rejoin else None
            for step in steps:
                for topic, key, value, ts in step:
                    inputs[topic].pipe_input(key, value, ts)
                # Kafka's readKeyValuesToMap keeps a tombstone's key (with null)
                outputs.append({kv.key: kv.value for kv in out.read_key_values_to_list()})
                if rejoined is not None:
                    outputs.append({kv.key: kv.value for kv in rejoined.read_key_values_to_list()})
                if materialized:
                    stores.append({kv.key: kv.value for kv in d.get_key_value_store("store").all()})
        return outputs, stores

    @pytest.mark.parametrize("kind", ["inner", "left"])
    @pytest.mark.parametrize("materialized", [False, True])
    @pytest.mark.parametrize("rejoin", [False, True])
    def test_do_join_from_left_then_delete_left_entity(self, kind: str, materialized: bool, rejoin: bool) -> None:
        """doJoinFromLeftThenDeleteLeftEntity: right rows first; left rows join; another
        reference to a foreign key; deleting a left row propagates a delete (to the rejoin
        too); the store follows."""
        t = 1000
        outputs, stores = self.run(kind, materialized, [
            [("right", "rhs1", "rhsValue1", t), ("right", "rhs2", "rhsValue2", t + 1), ("right", "rhs3", "rhsValue3", t + 2)],
            [("left", "lhs1", "lhsValue1|rhs1", t + 3), ("left", "lhs2", "lhsValue2|rhs2", t + 4)],
            [("left", "lhs3", "lhsValue3|rhs1", t + 5)],
            [("left", "lhs1", None, t + 6)],
        ], rejoin=rejoin, config=NO_CACHE if materialized else None)
        expected = [
            {},
            {"lhs1": "(lhsValue1|rhs1,rhsValue1)", "lhs2": "(lhsValue2|rhs2,rhsValue2)"},
            {"lhs3": "(lhsValue3|rhs1,rhsValue1)"},
            {"lhs1": None},
        ]
        rejoined = [
            {},
            {"lhs1": "rejoin((lhsValue1|rhs1,rhsValue1),lhsValue1|rhs1)",
             "lhs2": "rejoin((lhsValue2|rhs2,rhsValue2),lhsValue2|rhs2)"},
            {"lhs3": "rejoin((lhsValue3|rhs1,rhsValue1),lhsValue3|rhs1)"},
            {"lhs1": None},
        ]
        assert outputs == ([x for pair_ in zip(expected, rejoined) for x in pair_] if rejoin else expected)
        if materialized:
            assert stores == [
                {},
                {"lhs1": "(lhsValue1|rhs1,rhsValue1)", "lhs2": "(lhsValue2|rhs2,rhsValue2)"},
                {"lhs1": "(lhsValue1|rhs1,rhsValue1)", "lhs2": "(lhsValue2|rhs2,rhsValue2)",
                 "lhs3": "(lhsValue3|rhs1,rhsValue1)"},
                {"lhs2": "(lhsValue2|rhs2,rhsValue2)", "lhs3": "(lhsValue3|rhs1,rhsValue1)"},
            ]

    @pytest.mark.parametrize("kind", ["inner", "left"])
    @pytest.mark.parametrize("materialized", [False, True])
    def test_do_join_from_right_then_delete_right_entity(self, kind: str, materialized: bool) -> None:
        """doJoinFromRightThenDeleteRightEntity: left rows first (left join: joined with null);
        each right row joins its subscribers; an unreferenced right row joins nothing; deleting
        a right row updates all its subscribers (inner: tombstones; left: joined with null)."""
        t, left = 1000, kind == "left"
        outputs, stores = self.run(kind, materialized, [
            [("left", "lhs1", "lhsValue1|rhs1", t), ("left", "lhs2", "lhsValue2|rhs2", t + 1),
             ("left", "lhs3", "lhsValue3|rhs1", t + 2)],
            [("right", "rhs1", "rhsValue1", t + 3)],
            [("right", "rhs2", "rhsValue2", t + 4)],
            [("right", "rhs3", "rhsValue3", t + 5)],
            [("right", "rhs1", None, t + 6)],
        ], config=NO_CACHE if materialized else None)
        assert outputs == [
            {"lhs1": "(lhsValue1|rhs1,null)", "lhs2": "(lhsValue2|rhs2,null)", "lhs3": "(lhsValue3|rhs1,null)"}
            if left else {},
            {"lhs1": "(lhsValue1|rhs1,rhsValue1)", "lhs3": "(lhsValue3|rhs1,rhsValue1)"},
            {"lhs2": "(lhsValue2|rhs2,rhsValue2)"},
            {},
            {"lhs1": "(lhsValue1|rhs1,null)" if left else None, "lhs3": "(lhsValue3|rhs1,null)" if left else None},
        ]
        if materialized:
            full = {"lhs1": "(lhsValue1|rhs1,rhsValue1)", "lhs2": "(lhsValue2|rhs2,rhsValue2)",
                    "lhs3": "(lhsValue3|rhs1,rhsValue1)"}
            assert stores == [
                {"lhs1": "(lhsValue1|rhs1,null)", "lhs2": "(lhsValue2|rhs2,null)", "lhs3": "(lhsValue3|rhs1,null)"}
                if left else {},
                {"lhs1": "(lhsValue1|rhs1,rhsValue1)", "lhs2": "(lhsValue2|rhs2,null)", "lhs3": "(lhsValue3|rhs1,rhsValue1)"}
                if left else {"lhs1": "(lhsValue1|rhs1,rhsValue1)", "lhs3": "(lhsValue3|rhs1,rhsValue1)"},
                full,
                full,
                {"lhs1": "(lhsValue1|rhs1,null)", "lhs2": "(lhsValue2|rhs2,rhsValue2)", "lhs3": "(lhsValue3|rhs1,null)"}
                if left else {"lhs2": "(lhsValue2|rhs2,rhsValue2)"},
            ]

    @pytest.mark.parametrize("kind", ["inner", "left"])
    @pytest.mark.parametrize("materialized", [False, True])
    def test_should_emit_tombstone_when_deleting_non_joining_records(self, kind: str, materialized: bool) -> None:
        """shouldEmitTombstoneWhenDeletingNonJoiningRecords: deleting a left row that joined
        nothing sends a tombstone (inner: an unnecessary one, as Kafka cannot know no result was
        sent; left: a necessary one); deleting it again sends nothing."""
        t = 1000
        outputs, stores = self.run(kind, materialized, [
            [("left", "lhs1", "lhsValue1|rhs1", t)],
            [("left", "lhs1", None, t + 1)],
            [("left", "lhs1", None, t + 2)],
        ], config=NO_CACHE if materialized else None)
        first = {"lhs1": "(lhsValue1|rhs1,null)"} if kind == "left" else {}
        assert outputs == [first, {"lhs1": None}, {}]
        if materialized:
            assert stores == [first, {}, {}]

    @pytest.mark.parametrize("kind", ["inner", "left"])
    @pytest.mark.parametrize("materialized", [False, True])
    def test_should_not_emit_tombstones_when_deleting_non_existing_records(self, kind: str, materialized: bool) -> None:
        """shouldNotEmitTombstonesWhenDeletingNonExistingRecords: a delete of an absent left key
        sends nothing (the left table's store has nothing to delete)."""
        outputs, stores = self.run(kind, materialized, [[("left", "lhs1", None, 1000)]],
                                   config=NO_CACHE if materialized else None)
        assert outputs == [{}]
        if materialized:
            assert stores == [{}]

    @pytest.mark.parametrize("kind", ["inner", "left"])
    @pytest.mark.parametrize("materialized", [False, True])
    def test_join_should_produce_nulls_when_value_has_non_matching_foreign_key(self, kind: str, materialized: bool
                                                                               ) -> None:
        """joinShouldProduceNullsWhenValueHasNonMatchingForeignKey: a left row whose foreign key
        has no right row joins nothing (inner) or with null (left); moving it to another key
        without a row: inner, an unnecessary tombstone (Kafka cannot know whether a result was
        sent); left, null again; a right row of a key no longer referenced changes nothing;
        moving to a key with a row joins; moving away again: inner, a tombstone."""
        t, left = 1000, kind == "left"
        outputs, stores = self.run(kind, materialized, [
            [("left", "lhs1", "lhsValue1|rhs1", t)],
            [("left", "lhs1", "lhsValue1|rhs2", t + 1)],
            [("left", "lhs1", "lhsValue1|rhs3", t + 2)],
            [("right", "rhs1", "rhsValue1", t + 3)],
            [("left", "lhs1", "lhsValue1|rhs1", t + 4)],
            [("left", "lhs1", "lhsValue1|rhs2", t + 5)],
        ], config=NO_CACHE if materialized else None)
        assert outputs == [
            {"lhs1": "(lhsValue1|rhs1,null)"} if left else {},
            {"lhs1": "(lhsValue1|rhs2,null)" if left else None},
            {"lhs1": "(lhsValue1|rhs3,null)" if left else None},
            {},
            {"lhs1": "(lhsValue1|rhs1,rhsValue1)"},
            {"lhs1": "(lhsValue1|rhs2,null)" if left else None},
        ]
        if materialized:
            assert stores == [
                {"lhs1": "(lhsValue1|rhs1,null)"} if left else {},
                {"lhs1": "(lhsValue1|rhs2,null)"} if left else {},
                {"lhs1": "(lhsValue1|rhs3,null)"} if left else {},
                {"lhs1": "(lhsValue1|rhs3,null)"} if left else {},
                {"lhs1": "(lhsValue1|rhs1,rhsValue1)"},
                {"lhs1": "(lhsValue1|rhs2,null)"} if left else {},
            ]

    @pytest.mark.parametrize("kind", ["inner", "left"])
    @pytest.mark.parametrize("materialized", [False, True])
    def test_should_unsubscribe_old_foreign_key_if_left_side_is_updated(self, kind: str, materialized: bool) -> None:
        """shouldUnsubscribeOldForeignKeyIfLeftSideIsUpdated: after a left row moves to another
        foreign key, an update of the old key's right row reaches it no more."""
        t = 1000
        outputs, stores = self.run(kind, materialized, [
            [("right", "rhs1", "rhsValue1", t), ("right", "rhs2", "rhsValue2", t + 1)],
            [("left", "lhs1", "lhsValue1|rhs1", t + 2)],
            [("left", "lhs1", "lhsValue1|rhs2", t + 3)],
            [("right", "rhs1", "rhsValue1Delta", t + 4)],
        ], config=NO_CACHE if materialized else None)
        assert outputs == [{}, {"lhs1": "(lhsValue1|rhs1,rhsValue1)"}, {"lhs1": "(lhsValue1|rhs2,rhsValue2)"}, {}]
        if materialized:
            assert stores == [{}, {"lhs1": "(lhsValue1|rhs1,rhsValue1)"}, {"lhs1": "(lhsValue1|rhs2,rhsValue2)"},
                              {"lhs1": "(lhsValue1|rhs2,rhsValue2)"}]

    @pytest.mark.parametrize("materialized", [False, True])
    def test_should_emit_record_on_null_foreign_key_for_left_joins(self, materialized: bool) -> None:
        """shouldEmitRecordOnNullForeignKeyForLeftJoins: a left join whose extractor returns null
        joins the left row with null."""
        outputs, stores = self.run("left", materialized, [[("left", "lhs1", "lhsValue1|rhs1", 1000)]],
                                   extractor=lambda value: None, config=NO_CACHE if materialized else None)
        assert outputs == [{"lhs1": "(lhsValue1|rhs1,null)"}]
        if materialized:
            assert stores == [{"lhs1": "(lhsValue1|rhs1,null)"}]

    @pytest.mark.parametrize("materialized", [False, True])
    def test_should_emit_record_when_old_and_new_fk_differ(self, materialized: bool) -> None:
        """shouldEmitRecordWhenOldAndNewFkDiffer: a left join whose row moves from foreign key
        ``rhs1`` to a null one (the extractor returns null for ``returnNull``) is joined with
        null again, at the same timestamp. (Kafka also asserts that the subscription store holds
        (rhs1, lhs1) after the first record and not after the second: the driver does not
        expose the join's internal subscription store; the next right row of rhs1 not reaching
        lhs1 shows the unsubscription.)"""
        def extractor(value: str) -> str | None:
            split = value.split("|")[1]
            return None if split == "returnNull" else split

        outputs, stores = self.run("left", materialized, [
            [("left", "lhs1", "lhsValue1|rhs1", 1000)],
            [("left", "lhs1", "lhsValue1|returnNull", 1000)],
            [("right", "rhs1", "rhsValue1", 1001)],
        ], extractor=extractor, config=NO_CACHE if materialized else None)
        assert outputs == [{"lhs1": "(lhsValue1|rhs1,null)"}, {"lhs1": "(lhsValue1|returnNull,null)"}, {}]
        if materialized:
            assert stores[:2] == [{"lhs1": "(lhsValue1|rhs1,null)"}, {"lhs1": "(lhsValue1|returnNull,null)"}]

    @pytest.mark.parametrize("kind", ["inner", "left"])
    @pytest.mark.parametrize("materialized", [False, True])
    def test_should_ignore_out_of_order_records_iff_versioned(self, kind: str, materialized: bool) -> None:
        """shouldIgnoreOutOfOrderRecordsIffVersioned, its unversioned case (leftVersioned =
        rightVersioned = false): out-of-order records of either side, tombstones among them,
        are joined as any other."""
        t, left = 1000, kind == "left"
        outputs, stores = self.run(kind, materialized, [
            [("right", "rhs1", "rhsValue1", t + 4)],
            [("left", "lhs1", "lhsValue1|rhs1", t + 3), ("left", "lhs2", "lhsValue2|rhs1", t + 5)],
            [("left", "lhs2", None, t + 6)],
            [("left", "lhs1", "lhsValue1_ooo|rhs1", t + 2), ("left", "lhs2", "lhsValue2_ooo|rhs1", t + 2)],
            [("left", "lhs1", None, t + 2)],
            [("left", "lhs1", "lhsValue1_new|rhs1", t + 8), ("left", "lhs2", "lhsValue2_new|rhs1", t + 8)],
            [("right", "rhs1", "rhsValue1_ooo", t + 1)],
            [("right", "rhs1", None, t + 1)],
            [("right", "rhs1", "rhsValue1_new", t + 6)],
        ], config=NO_CACHE if materialized else None)
        ooo = {"lhs1": "(lhsValue1_ooo|rhs1,rhsValue1)", "lhs2": "(lhsValue2_ooo|rhs1,rhsValue1)"}
        new = {"lhs1": "(lhsValue1_new|rhs1,rhsValue1)", "lhs2": "(lhsValue2_new|rhs1,rhsValue1)"}
        new_ooo = {"lhs1": "(lhsValue1_new|rhs1,rhsValue1_ooo)", "lhs2": "(lhsValue2_new|rhs1,rhsValue1_ooo)"}
        deleted = ({"lhs1": "(lhsValue1_new|rhs1,null)", "lhs2": "(lhsValue2_new|rhs1,null)"} if left
                   else {"lhs1": None, "lhs2": None})
        newest = {"lhs1": "(lhsValue1_new|rhs1,rhsValue1_new)", "lhs2": "(lhsValue2_new|rhs1,rhsValue1_new)"}
        assert outputs == [
            {},
            {"lhs1": "(lhsValue1|rhs1,rhsValue1)", "lhs2": "(lhsValue2|rhs1,rhsValue1)"},
            {"lhs2": None},
            ooo,
            {"lhs1": None},
            new,
            new_ooo,
            deleted,
            newest,
        ]
        if materialized:
            assert stores == [
                {},
                {"lhs1": "(lhsValue1|rhs1,rhsValue1)", "lhs2": "(lhsValue2|rhs1,rhsValue1)"},
                {"lhs1": "(lhsValue1|rhs1,rhsValue1)"},
                ooo,
                {"lhs2": "(lhsValue2_ooo|rhs1,rhsValue1)"},
                new,
                new_ooo,
                deleted if left else {},
                newest,
            ]


class TestKafkaMaterializationScenarios:
    """KTableKTableForeignKeyJoinMaterializationIntegrationTest: the inner join's result not
    materialized, materialized without a name, or queryable as ``store`` (then with Kafka's
    default record cache)."""

    @pytest.mark.parametrize(("materialized", "queryable"), [(False, False), (True, False), (True, True)])
    def test_should_emit_tombstone_when_deleting_non_joining_records(self, materialized: bool, queryable: bool
                                                                     ) -> None:
        """shouldEmitTombstoneWhenDeletingNonJoiningRecords: deleting a left row that joined
        nothing sends an unnecessary tombstone, except through the queryable store's record
        cache, which knows that no result was ever sent; deleting it again sends nothing."""
        b, left, right = tables()
        options = {} if not materialized else {
            "materialized": Materialized.as_("store").with_value_serde(Serdes.String()) if queryable
            else Materialized.with_serdes(None, Serdes.String())}
        left.join(right, kafka_extractor, kafka_value_joiner, **options).to_stream().to("out", OUT)
        with TopologyTestDriver(b.build()) as d:
            lhs = d.create_input_topic("left", Serdes.String(), Serdes.String())
            out = d.create_output_topic("out", Serdes.String(), Serdes.String())
            lhs.pipe_input("lhs1", "lhsValue1|rhs1")
            assert kafka_map(out) == {}
            if queryable:
                assert list(d.get_key_value_store("store").all()) == []
            lhs.pipe_input("lhs1", None)
            assert kafka_map(out) == ({} if queryable else {"lhs1": None})
            lhs.pipe_input("lhs1", None)
            assert kafka_map(out) == {}
            if queryable:
                assert list(d.get_key_value_store("store").all()) == []

    def test_read_key_values_to_map_keeps_a_tombstone_key(self) -> None:
        """shouldEmitTombstoneWhenDeletingNonJoiningRecords read as Kafka's test reads it:
        ``readKeyValuesToMap()`` is ``{lhs1=null}`` after the delete."""
        b, left, right = tables()
        left.join(right, kafka_extractor, kafka_value_joiner).to_stream().to("out", OUT)
        with TopologyTestDriver(b.build()) as d:
            lhs = d.create_input_topic("left", Serdes.String(), Serdes.String())
            out = d.create_output_topic("out", Serdes.String(), Serdes.String())
            lhs.pipe_input("lhs1", "lhsValue1|rhs1")
            lhs.pipe_input("lhs1", None)
            assert out.read_key_values_to_map() == {"lhs1": None}


class TestKafkaScenarioTest:
    """KTableKTableForeignKeyJoinScenarioTest (kstream.internals): an inner foreign-key join
    ``asdf`` joined again with its left table, with the serdes given in different places.
    Kafka's variants differ only in where the Integer/String serdes come from (the default
    serdes of the config, Consumed, the join's Materialized, the equi-join's Materialized,
    Produced); streamsdsl has no default serdes in the config, so every variant gives them to
    Consumed and Produced, and the variants that name more serdes give those too. Not
    transcribed: shouldUseExpectedTopicsWithSerde (which topics Kafka's serdes are called for,
    the pseudo-topics among them: streamsdsl does not serialize between a join's stages in the
    driver; the internal topics' names are in TestDescribe)."""

    @pytest.mark.parametrize("variant", ["DefaultSerdes", "DefaultAndConsumedSerdes", "DefaultAndJoinResultSerdes",
                                         "DefaultAndEquiJoinResultSerdes", "DefaultAndProducedSerdes"])
    def test_should_work_with_serdes(self, variant: str) -> None:
        """shouldWorkWithDefaultSerdes, shouldWorkWithDefaultAndConsumedSerdes,
        shouldWorkWithDefaultAndJoinResultSerdes, shouldWorkWithDefaultAndEquiJoinResultSerdes,
        shouldWorkWithDefaultAndProducedSerdes (validateTopologyCanProcessData)."""
        ints = Consumed.with_serdes(Serdes.Integer(), Serdes.String())
        b = StreamsBuilder()
        a_table, b_table = b.table("A", ints), b.table("B", ints)
        join_store = Materialized.as_("asdf")
        if variant == "DefaultAndJoinResultSerdes":
            join_store = join_store.with_key_serde(Serdes.Integer()).with_value_serde(Serdes.String())
        fk_result = a_table.join(b_table, lambda value: int(value.split("-")[0]),
                                 lambda a, bv: f"({a},{bv})", materialized=join_store)
        equi = {"materialized": Materialized.with_serdes(Serdes.Integer(), Serdes.String())} \
            if variant == "DefaultAndEquiJoinResultSerdes" else {}
        final = a_table.join(fk_result, lambda a, fkv: f"({a},{fkv})", **equi)
        final.to_stream().to("output", Produced.with_serdes(Serdes.Integer(), Serdes.String()))
        with TopologyTestDriver(b.build()) as d:
            d.create_input_topic("A", Serdes.Integer(), Serdes.String()).pipe_input(1, "999-alpha")
            d.create_input_topic("B", Serdes.Integer(), Serdes.String()).pipe_input(999, "beta")
            out = d.create_output_topic("output", Serdes.Integer(), Serdes.String())
            assert kafka_map(out) == {1: "(999-alpha,(999-alpha,beta))"}


class TestKafkaInnerJoinMulti:
    """KTableKTableForeignKeyInnerJoinMultiIntegrationTest: three tables chained by two inner
    foreign-key joins, both results materialized (INNER-store1, INNER-store2) without cache
    (its statestore.cache.max.bytes = 0), the tables produced one after the other before the
    application starts. Kafka's table1 holds Floats: streamsdsl has no Float serde, so Double
    (``str`` of these doubles is Java's ``Float.toString`` of the floats: "1.33")."""

    def test_should_inner_join_multi_partition_queryable(self) -> None:
        """shouldInnerJoinMultiPartitionQueryable: the only output record is key 1,
        ``value1=1.33,value2=10,value3=waffle`` (key 2's first result has foreign key 0, not in
        table3; keys 3 and 4 match no table2 row); the stores are read too."""
        b = StreamsBuilder()
        table1 = b.table("table1", Consumed.with_serdes(Serdes.Integer(), Serdes.Double()))
        table2 = b.table("table2", Consumed.with_serdes(Serdes.String(), Serdes.Long()))
        table3 = b.table("table3", Consumed.with_serdes(Serdes.Integer(), Serdes.String()))
        store1 = Materialized.as_("INNER-store1").with_key_serde(Serdes.Integer()).with_value_serde(Serdes.String())
        store2 = Materialized.as_("INNER-store2").with_key_serde(Serdes.Integer()).with_value_serde(Serdes.String())
        table1.join(table2, lambda value: str(int(value)), lambda v1, v2: f"value1={v1},value2={v2}",
                    materialized=store1) \
            .join(table3, lambda value: 10 if "value2=10" in value else 0, lambda v1, v2: f"{v1},value3={v2}",
                  materialized=store2) \
            .to_stream().to("output-", Produced.with_serdes(Serdes.Integer(), Serdes.String()))
        with TopologyTestDriver(b.build(), NO_CACHE) as d:
            t1 = d.create_input_topic("table1", Serdes.Integer(), Serdes.Double())
            t2 = d.create_input_topic("table2", Serdes.String(), Serdes.Long())
            t3 = d.create_input_topic("table3", Serdes.Integer(), Serdes.String())
            for key, value in [(1, 1.33), (2, 2.22), (3, -1.22), (4, -2.22)]:
                t1.pipe_input(key, value)
            for i in range(10):
                t2.pipe_input(str(i), i * 10)
            t3.pipe_input(10, "waffle")
            out = d.create_output_topic("output-", Serdes.Integer(), Serdes.String())
            records = out.read_key_values_to_list()
            assert [(kv.key, kv.value) for kv in records] == [(1, "value1=1.33,value2=10,value3=waffle")]
            assert {e.key: e.value for e in d.get_key_value_store("INNER-store2").all()} == {
                1: "value1=1.33,value2=10,value3=waffle"}
            assert {e.key: e.value for e in d.get_key_value_store("INNER-store1").all()} == {
                1: "value1=1.33,value2=10", 2: "value1=2.22,value2=20"}


def _final(records: list[tuple[str, str, str | None, int]], kind: str) -> dict[str, str]:
    """The join recomputed from the final tables: every left row with a foreign key, joined with
    the right row of that key (left join: or None)."""
    lefts: dict[str, str] = {}
    rights: dict[str, str] = {}
    for side, key, value, _ in records:
        table = lefts if side == "left" else rights
        if value is None:
            table.pop(key, None)
        else:
            table[key] = value
    out = {}
    for key, value in lefts.items():
        other = rights.get(fk(value) or "")
        if other is not None or kind == "left":
            out[key] = pair(value, other)
    return out


RECORDS = st.lists(st.one_of(
    st.tuples(st.just("left"), st.sampled_from(["k1", "k2", "k3"]),
              st.one_of(st.none(), st.sampled_from(["A|1", "A|2", "B|1", "C|1"])), st.integers(0, 100)),
    st.tuples(st.just("right"), st.sampled_from(["A", "B", "C"]),
              st.one_of(st.none(), st.sampled_from(["x", "y"])), st.integers(0, 100)),
), max_size=25)


class TestProperties:
    @settings(max_examples=60, deadline=None)
    @given(records=RECORDS, kind=st.sampled_from(["inner", "left"]))
    def test_the_result_table_is_the_join_of_the_final_tables(self, records: list[Any], kind: str) -> None:
        """Whatever the order of updates (foreign keys changing, either side deleted), the
        result table the changelog leaves is the join recomputed from both final tables: every
        old match retracted. (Foreign keys are never None here: Kafka's inner join drops a
        record with a None foreign key without retracting anything, see TestKafkaSequence.)"""
        b, left, right = tables()
        (left.join if kind == "inner" else left.left_join)(right, fk, pair).to_stream().to("out", OUT)
        with TopologyTestDriver(b.build()) as d:
            inputs = {t: d.create_input_topic(t, Serdes.String(), Serdes.String()) for t in ("left", "right")}
            out = d.create_output_topic("out", Serdes.String(), Serdes.String())
            for side, key, value, ts in records:
                inputs[side].pipe_input(key, value, ts)
            got = {k: v for k, v in out.read_key_values_to_map().items() if v is not None}
        assert got == _final(records, kind)


@pytest.mark.spark
class TestStreamingFkJoin:
    def test_micro_batches_and_restart(self, spark: Any, tmp_path: Any) -> None:
        """On a streaming query (one micro-batch per appended file), the three stages keep their
        state across micro-batches and a restart from the checkpoint: a right update reaches
        every subscriber, a changed foreign key retracts the old match (left join: the old
        key's joiner(left, None), then the new match), a left delete is a tombstone."""
        from streamsdsl.runtime.streaming import start_streaming
        from streamsdsl.testing.files import FileTopic
        from tests._support import Collect

        topic = FileTopic(str(tmp_path / "in"))
        cp = str(tmp_path / "checkpoint")
        s = Serdes.String()
        b, left, right = tables()
        left.left_join(right, fk, pair).to_stream().to("out", OUT)
        topology = b.build()

        def run() -> list[tuple[Any, Any, int]]:
            out = Collect()
            q, _, _ = start_streaming(topology, lambda n: topic.read_stream(spark, n.topics), out,
                                      checkpoint_location=cp)
            q.processAllAvailable()
            q.stop()
            return [(k, v, ts) for _, k, v, ts in out.records]

        topic.append("right", [("A", "ra", 1)], s, s)
        topic.append("left", [("k1", "A|1", 10), ("k2", "A|2", 11)], s, s)
        assert sorted(run()) == [("k1", "A|1+ra", 10), ("k2", "A|2+ra", 11)]

        topic.append("right", [("A", "rb", 20)], s, s)
        topic.append("left", [("k1", "B|1", 30), ("k2", None, 31)], s, s)
        assert run() == [("k1", "A|1+rb", 20), ("k2", "A|2+rb", 20),
                         ("k1", "B|1+null", 30), ("k1", "B|1+null", 30), ("k2", None, 31), ("k2", None, 31)]


class TestCheckpoint:
    def test_the_join_is_a_stateful_operator_of_the_fingerprint(self) -> None:
        """A foreign-key join keeps state without a result store: the checkpoint's fingerprint
        lists it (by its subscription store), so a topology that drops it cannot reuse the state."""
        from streamsdsl.runtime.fingerprint import diff, topology_fingerprint

        b, left, right = tables()
        left.join(right, fk, pair).to_stream().to("out", OUT)
        ops = topology_fingerprint(b.build()).operators
        assert [(op["kind"], op["store"], op["inputs"]) for op in ops] == [
            ("TableSourceNode", "left-STATE-STORE-0000000000", 0), ("TableSourceNode", "right-STATE-STORE-0000000003", 0),
            ("ForeignKeyJoinNode", "KTABLE-FK-JOIN-SUBSCRIPTION-STATE-STORE-0000000010", 2)]
        plain, _, _ = tables()
        assert diff(topology_fingerprint(b.build()), topology_fingerprint(plain.build()))
