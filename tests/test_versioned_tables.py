"""Versioned tables (``Stores.persistent_versioned_key_value_store``, KIP-889, KIP-914) and the
stream–table join with a grace period (``Joined.with_grace_period``, KIP-923): the API and its
validation, describe() against Kafka Streams' own, Kafka's test scenarios (KStreamKTableJoinTest's
grace-period cases, KIP-889's example), the versioned source's changelog, and a property test of
the join against the model `grace_join_reference_run`."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamsdsl import (
    Consumed,
    InvalidArgumentError,
    Joined,
    JoinWindows,
    Materialized,
    Produced,
    Serdes,
    Stores,
    StreamsBuilder,
    Suppressed,
    TestRecord,
    TopologyError,
)
from streamsdsl.errors import NotYetImplementedError
from streamsdsl.semantics.versioned import grace_join_reference_run

R = TestRecord
INT_STR = Consumed.with_serdes(Serdes.Integer(), Serdes.String())
OUT = Produced.with_serdes(Serdes.Integer(), Serdes.String())


def joiner(value: Any, table_value: Any) -> str:
    """Kafka's test joiner ``v1 + "+" + v2`` (Java renders null as "null")."""
    return f"{value}+{'null' if table_value is None else table_value}"


def versioned(name: str = "V-grace", history: Any = timedelta(minutes=5)) -> Materialized:
    return Materialized.as_(Stores.persistent_versioned_key_value_store(name, history))


def grace_join(grace: Any = 2, *, left: bool = False, history: Any = timedelta(minutes=5)) -> Any:
    """KStreamKTableJoinTest.makeJoin: a stream joined with a versioned table, grace ``grace``."""
    b = StreamsBuilder()
    stream = b.stream("streamTopic", INT_STR)
    table = b.table("tableTopic2", INT_STR, versioned(history=history))
    joined = Joined.with_grace_period(grace).with_name("Grace")
    (stream.left_join if left else stream.join)(table, joiner, joined=joined).to("out", OUT)
    return b.build()


class TestVersionedStoreApi:
    def test_supplier(self) -> None:
        """The supplier holds its history retention and segment interval in ms (Kafka's default
        segment interval when none is given), and refuses a negative retention or a segment
        interval that is not positive, naming the argument and the unit."""
        s = Stores.persistent_versioned_key_value_store("rates", timedelta(hours=2))
        assert (s.name, s.history_retention_ms, s.segment_interval_ms, s.persistent) == (
            "rates", 7_200_000, 300_000, True)
        assert Stores.persistent_versioned_key_value_store("r", 10, 5).segment_interval_ms == 5
        assert Stores.persistent_versioned_key_value_store("r", 0).segment_interval_ms == 2_000
        with pytest.raises(InvalidArgumentError) as e:
            Stores.persistent_versioned_key_value_store("r", -1)
        assert e.value.args[0] == ("'history_retention' must be >= 0 ms (got -1). Pass how long old versions stay "
                                   "readable, e.g. timedelta(hours=1).")
        with pytest.raises(InvalidArgumentError) as e:
            Stores.persistent_versioned_key_value_store("r", 10, 0)
        assert e.value.args[0] == ("'segment_interval' must be > 0 ms (got 0). Pass a positive interval, or leave it "
                                   "out for Kafka's default.")

    def test_materialized_takes_a_supplier(self) -> None:
        """``Materialized.as_(supplier)`` names the store after the supplier; a table source
        materialized so is versioned; an aggregation refuses a versioned store."""
        m = versioned("rates", 60_000)
        assert (m.store_name, m.history_retention_ms) == ("rates", 60_000)
        assert Materialized.as_(Stores.in_memory_key_value_store("plain")).history_retention_ms is None
        b = StreamsBuilder()
        with pytest.raises(InvalidArgumentError) as e:
            b.stream("s").group_by_key().count(materialized=versioned("counts"))
        assert e.value.args[0].startswith("A versioned store ('counts') can materialize a table source only")

    def test_grace_needs_a_versioned_table(self) -> None:
        """KStreamKTableJoinTest.shouldFailIfTableIsNotVersioned (and ...ButMaterializationIsInherited):
        Kafka's message, when the join is written."""
        b = StreamsBuilder()
        stream = b.stream("topic")
        for table in (b.table("topic2"), b.table("topic3", materialized=Materialized.as_("tableB")).filter(
                lambda k, v: True)):
            with pytest.raises(InvalidArgumentError) as e:
                stream.join(table, joiner, joined=Joined.with_grace_period(6))
            assert e.value.args[0].startswith("KTable must be versioned to use a grace period in a stream table join.")

    def test_versioned_table_through_a_filter(self) -> None:
        """KStreamKTableJoinTest.shouldNotFailIfTableIsVersionedButMaterializationIsInherited."""
        b = StreamsBuilder()
        table = b.table("topic2", materialized=versioned("tableB")).filter(lambda k, v: True)
        b.stream("topic").join(table, joiner, joined=Joined.with_grace_period(6).with_name("first-join")).to("out-one")
        assert b.build().node("first-join").stores == ("first-join-Buffer", "tableB")

    def test_grace_longer_than_history(self) -> None:
        """KStreamKTableJoinTest.shouldFailIfGracePeriodIsLongerThanHistoryRetention (and the
        inherited store): Kafka's message, then both durations in ms."""
        b = StreamsBuilder()
        with pytest.raises(InvalidArgumentError) as e:
            b.stream("topic").join(b.table("topic2", materialized=versioned("tableB")), joiner,
                                   joined=Joined.with_grace_period(timedelta(minutes=6)))
        assert e.value.args[0] == (
            "History retention must be at least grace period (grace 360000 ms > history retention 300000 ms of store "
            "'tableB'). Shorten the grace period or keep a longer history.")
        table = b.table("topic3", materialized=versioned("V-grace", 0)).filter(lambda k, v: True)
        with pytest.raises(InvalidArgumentError, match="^History retention must be at least grace period "
                                                       r"\(grace 6 ms > history retention 0 ms"):
            b.stream("topic4").join(table, joiner, joined=Joined.with_grace_period(6))

    def test_joined_options(self) -> None:
        """A negative grace is refused with its unit; ``Joined`` belongs to stream–table joins."""
        with pytest.raises(InvalidArgumentError) as e:
            Joined.with_grace_period(-5)
        assert e.value.args[0].startswith("'grace' must be >= 0 ms (got -5).")
        b = StreamsBuilder()
        with pytest.raises(InvalidArgumentError, match="'joined' belongs to a stream-table join"):
            b.stream("a").join(b.stream("b"), joiner, JoinWindows.of_time_difference_with_no_grace(5),
                               joined=Joined.with_grace_period(1))

    def test_what_a_versioned_table_refuses(self) -> None:
        """``suppress`` is refused as Kafka refuses it; ``group_by`` and table–table joins (where
        Kafka skips out-of-order updates) are not implemented yet for a versioned table."""
        b = StreamsBuilder()
        table = b.table("t", materialized=versioned("v"))
        with pytest.raises(TopologyError) as e:
            table.suppress(Suppressed.until_window_closes(Suppressed.BufferConfig.unbounded()))
        assert e.value.args[0] == "suppress() is only supported for non-versioned KTables"
        with pytest.raises(NotYetImplementedError, match="the row Versioned tables"):
            table.group_by(lambda k, v: (v, k))
        with pytest.raises(NotYetImplementedError, match="the row Versioned tables"):
            b.table("u").left_join(table.map_values(str), joiner)

    def test_describe(self) -> None:
        """describe() as Kafka Streams 4.0 prints it (compared with its output): the join is
        connected to its buffer ``<name>-Buffer`` and to the table's store, in Kafka's HashSet
        order."""
        assert grace_join().describe() == (
            "Topologies:\n"
            "   Sub-topology: 0\n"
            "    Source: KSTREAM-SOURCE-0000000000 (topics: [streamTopic])\n"
            "      --> Grace\n"
            "    Processor: Grace (stores: [Grace-Buffer, V-grace])\n"
            "      --> KSTREAM-SINK-0000000004\n"
            "      <-- KSTREAM-SOURCE-0000000000\n"
            "    Source: KSTREAM-SOURCE-0000000001 (topics: [tableTopic2])\n"
            "      --> KTABLE-SOURCE-0000000002\n"
            "    Sink: KSTREAM-SINK-0000000004 (topic: out)\n"
            "      <-- Grace\n"
            "    Processor: KTABLE-SOURCE-0000000002 (stores: [V-grace])\n"
            "      --> none\n"
            "      <-- KSTREAM-SOURCE-0000000001\n"
            "\n"
        )
        b = StreamsBuilder()
        orders = b.stream("orders", INT_STR)
        rates = b.table("rates", INT_STR, versioned("rates-store"))
        orders.left_join(rates.filter(lambda k, v: v is not None), joiner,
                         joined=Joined.as_("j").grace_period(timedelta(seconds=1))).to("out")
        orders.join(rates, joiner).to("out2")
        assert "    Processor: j (stores: [rates-store, j-Buffer])\n" in b.build().describe()
        assert "    Processor: KSTREAM-JOIN-0000000006 (stores: [rates-store])\n" in b.build().describe()


@pytest.fixture()
def open_driver(run_driver: Any, engine: str, request: pytest.FixtureRequest) -> Any:
    """A TopologyTestDriver of a topology on the test's host (`tests/conftest.py`, HOSTS)."""
    from streamsdsl.runtime.driver import TopologyTestDriver

    spark = request.getfixturevalue("spark") if engine != "direct" else None
    return lambda topology: TopologyTestDriver(topology, engine=engine, spark=spark)


def _drive(d: Any, steps: list[tuple[str, list[tuple[int, Any, int]]]]) -> list[list[tuple[Any, Any, int]]]:
    """Pipe each step's records (``("stream" | "table", [(key, value, ts), ...])``) and read the
    output after it."""
    names = {"stream": "streamTopic", "table": "tableTopic2"}
    topics = {side: d.create_input_topic(names[side], Serdes.Integer(), Serdes.String())
              for side in {s for s, _ in steps}}
    out = d.create_output_topic("out", Serdes.Integer(), Serdes.String())
    got = []
    for side, records in steps:
        for key, value, ts in records:
            topics[side].pipe_input(key, value, ts)
        got.append([(r.key, r.value, r.timestamp) for r in out.read_records_to_list()])
    return got


def table_at_0(prefix: str) -> tuple[str, list[tuple[int, Any, int]]]:
    """KStreamKTableJoinTest.pushToTableNonRandom: keys 0..3, timestamp 0."""
    return "table", [(i, f"{prefix}{i}", 0) for i in range(4)]


def stream_records(prefix: str, n: int = 4) -> tuple[str, list[tuple[int, Any, int]]]:
    """KStreamKTableJoinTest.pushToStream: key i at timestamp i."""
    return "stream", [(i, f"{prefix}{i}", i) for i in range(n)]


class TestGraceJoinKafka:
    def test_delay_join_by_grace_period(self, open_driver: Any) -> None:
        """KStreamKTableJoinTest.shouldDelayJoinByGracePeriod: a stream record waits until the
        buffer's stream time passes its timestamp plus 2 ms; then it joins the table as it is by
        then; a record older than that joins at once; released records come out by (timestamp,
        key, arrival)."""
        with open_driver(grace_join()) as d:
            got = _drive(d, [table_at_0("Y"), stream_records("X"), table_at_0("YY"), stream_records("X"),
                             ("stream", [(5, "test", 7)]), table_at_0("YYY")])
        assert got == [
            [],
            [(0, "X0+Y0", 0), (1, "X1+Y1", 1)],
            [],
            [(0, "X0+YY0", 0), (1, "X1+YY1", 1)],
            [(2, "X2+YY2", 2), (2, "X2+YY2", 2), (3, "X3+YY3", 3), (3, "X3+YY3", 3)],
            [],
        ]

    def test_late_joins_with_grace_period(self, open_driver: Any) -> None:
        """KStreamKTableJoinTest.shouldHandleLateJoinsWithGracePeriod: a record older than the
        buffer's time minus the grace period joins at once and releases nothing."""
        with open_driver(grace_join()) as d:
            got = _drive(d, [table_at_0("Y"), stream_records("X"), stream_records("X", 1)])
        assert got == [[], [(0, "X0+Y0", 0), (1, "X1+Y1", 1)], [(0, "X0+Y0", 0)]]

    def test_late_table_update_within_grace(self, open_driver: Any) -> None:
        """KIP-923's point: a table update that arrives after the stream record, older than it and
        within the grace period, is what the record joins; the left join keeps a record without a
        version (``null``), and a record with a null value is dropped (and counted)."""
        with open_driver(grace_join(5, left=True)) as d:
            got = _drive(d, [("table", [(1, "old", 0)]), ("stream", [(1, "a", 10), (2, "b", 11)]),
                             ("table", [(1, "late", 8), (2, "late2", 12)]), ("stream", [(1, None, 14)]),
                             ("stream", [(3, "c", 16)])])
            dropped = d.metrics()["dropped-records-total"]
        assert got == [[], [], [], [], [(1, "a+late", 10), (2, "b+null", 11)]]
        assert dropped == 1.0


    def test_grace_join_in_a_streaming_query(self, spark: Any) -> None:
        """The same scenario as a streaming query (a micro-batch per piped record): the buffer
        follows the watermark and an event-time timer releases a key's records once it passes
        their timestamp plus the grace period; Kafka's records come out, those released together
        per key (docs/differences.md)."""
        from streamsdsl.runtime.driver import TopologyTestDriver

        with TopologyTestDriver(grace_join(), engine="streaming", spark=spark) as d:
            got = _drive(d, [table_at_0("Y"), stream_records("X"), table_at_0("YY"), stream_records("X"),
                             ("stream", [(5, "test", 7)]), table_at_0("YYY")])
        assert got[:4] == [[], [(0, "X0+Y0", 0), (1, "X1+Y1", 1)], [], [(0, "X0+YY0", 0), (1, "X1+YY1", 1)]]
        assert sorted(got[4]) == [(2, "X2+YY2", 2), (2, "X2+YY2", 2), (3, "X3+YY3", 3), (3, "X3+YY3", 3)]
        assert got[5] == []


#: AbstractJoinIntegrationTest's input: (left stream | right table, value, timestamp), key 0.
JOIN_INPUT = [("left", None, 1), ("right", None, 2), ("left", "A", 3), ("right", "a", 4), ("left", "B", 5),
              ("right", "b", 6), ("left", None, 7), ("right", None, 8), ("left", "C", 9), ("right", "c", 10),
              ("right", None, 11), ("left", None, 12), ("right", None, 13), ("right", "d", 7), ("left", "D", 6),
              ("left", None, 2), ("right", None, 3), ("right", "e", 14), ("left", "E", 15), ("left", None, 10),
              ("right", None, 9), ("left", "F", 4), ("right", "f", 3)]
#: StreamTableJoinWithGraceIntegrationTest's expected output after each input record (index: value, ts).
JOIN_EXPECTED = {
    "inner": {8: ("B-a", 5), 14: ("D-b", 6), 21: ("F-a", 4)},
    "left": {4: ("A-null", 3), 8: ("B-a", 5), 14: ("D-b", 6), 18: ("C-null", 9), 21: ("F-a", 4)},
}


class TestStreamTableJoinWithGraceIntegration:
    @pytest.mark.parametrize("kind", ["inner", "left"])
    def test_with_versioned_store(self, open_driver: Any, kind: str) -> None:
        """StreamTableJoinWithGraceIntegrationTest.testInnerWithVersionedStore / testLeftWithVersionedStore:
        Kafka's join-integration input (out-of-order records, tombstones, null values) through a
        join with a 2 ms grace period against a table versioned for 5 minutes; the output after
        each input record."""
        b = StreamsBuilder()
        strings = Consumed.with_serdes(Serdes.Long(), Serdes.String())
        left = b.stream("left", strings)
        table = b.table("right", strings, versioned("table-store"))
        joined = Joined.with_grace_period(2).with_name("Grace")
        def dash(value: Any, table_value: Any) -> str:
            return f"{value}-{'null' if table_value is None else table_value}"

        join = left.join if kind == "inner" else left.left_join
        join(table, dash, joined=joined).to("out", Produced.with_serdes(Serdes.Long(), Serdes.String()))
        with open_driver(b.build()) as d:
            topics = {t: d.create_input_topic(t, Serdes.Long(), Serdes.String()) for t in ("left", "right")}
            out = d.create_output_topic("out", Serdes.Long(), Serdes.String())
            got = {}
            for i, (topic, value, ts) in enumerate(JOIN_INPUT):
                topics[topic].pipe_input(0, value, ts)
                records = [(r.value, r.timestamp) for r in out.read_records_to_list()]
                if records:
                    got[i] = records[0] if len(records) == 1 else records
        assert got == JOIN_EXPECTED[kind]


class TestVersionedJoin:
    @pytest.mark.streaming_host
    def test_join_as_of_the_stream_record(self, open_driver: Any) -> None:
        """KIP-889's motivating example: the out-of-order a2 joins b0, the version valid at its
        timestamp, not the latest b3 (no grace period)."""
        b = StreamsBuilder()
        b.stream("streamTopic", INT_STR).join(b.table("tableTopic2", INT_STR, versioned()), joiner).to("out", OUT)
        with open_driver(b.build()) as d:
            got = _drive(d, [("table", [(0, "b0", 0)]), ("stream", [(0, "a1", 1)]), ("table", [(0, "b3", 3)]),
                             ("stream", [(0, "a4", 4), (0, "a2", 2)])])
        assert got == [[], [(0, "a1+b0", 1)], [], [(0, "a4+b3", 4), (0, "a2+b0", 2)]]

    def test_joiner_with_key(self, open_driver: Any) -> None:
        """A joiner of three arguments gets the record's key too (Kafka's ``ValueJoinerWithKey``),
        also when the grace buffer releases the record."""
        b = StreamsBuilder()
        table = b.table("tableTopic2", INT_STR, versioned())
        b.stream("streamTopic", INT_STR).left_join(table, lambda k, v, t: f"{k}:{v}+{t}",
                                                   joined=Joined.with_grace_period(1)).to("out", OUT)
        with open_driver(b.build()) as d:
            got = _drive(d, [("table", [(4, "t", 0)]), ("stream", [(4, "s", 1), (5, "u", 2)])])
        assert got == [[], [(4, "4:s+t", 1)]]

    def test_history_retention(self, open_driver: Any) -> None:
        """Past the history retention (10 ms behind the store's stream time, over all keys) a
        lookup sees only the latest version, if it is old enough (s19 sees v5, s3 nothing); a table
        update older than that is refused; a tombstone ends a version."""
        b = StreamsBuilder()
        table = b.table("tableTopic2", INT_STR, versioned("v", 10))
        b.stream("streamTopic", INT_STR).left_join(table, joiner).to("out", OUT)
        with open_driver(b.build()) as d:
            got = _drive(d, [("table", [(1, "v0", 0), (1, "v5", 5), (2, "w", 30)]),
                             ("stream", [(1, "s3", 3), (1, "s19", 19), (1, "s20", 20)]),
                             ("table", [(1, "refused", 15), (1, "v25", 25), (1, None, 27)]),
                             ("stream", [(1, "s26", 26), (1, "s28", 28), (1, "s21", 21)])])
        assert got == [[], [(1, "s3+null", 3), (1, "s19+v5", 19), (1, "s20+v5", 20)], [],
                       [(1, "s26+v25", 26), (1, "s28+null", 28), (1, "s21+v5", 21)]]


class TestVersionedSource:
    def test_changelog(self, open_driver: Any) -> None:
        """A versioned table forwards every record its store takes: out-of-order updates too, and
        a tombstone of an absent key (a versioned store has no record cache); an update older
        than the history retention is not forwarded, and counted as dropped (Kafka's store counts
        it). The store reads the latest versions."""
        b = StreamsBuilder()
        b.table("tableTopic2", INT_STR, versioned("v", 10)).to_stream().to("out", OUT)
        with open_driver(b.build()) as d:
            got = _drive(d, [("table", [(1, "a", 10), (1, "older", 5), (2, None, 12), (1, "b", 30), (1, "expired", 19),
                                        (1, "kept", 20), (3, "c", 21)])])
            store = d.get_key_value_store("v")
            latest = {k: store.get(k) for k in (1, 2, 3)}
            dropped = d.metrics()["dropped-records-total"]
        assert dropped == 1.0
        assert got == [[(1, "a", 10), (1, "older", 5), (2, None, 12), (1, "b", 30), (1, "kept", 20), (3, "c", 21)]]
        assert latest == {1: "b", 2: None, 3: "c"}


def _events() -> Any:
    record = st.tuples(st.sampled_from(["stream", "table"]), st.sampled_from([1, 2, 3, None]),
                       st.sampled_from(["a", "b", None]), st.integers(0, 30))
    return st.lists(record, max_size=18)


class TestGraceJoinProperties:
    @settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(events=_events(), kind=st.sampled_from(["inner", "left"]), history=st.sampled_from([0, 5, 20]),
           grace=st.sampled_from([None, 0, 3, 5]))
    def test_join_as_of_timestamp_matches_the_model(self, events: list[tuple[str, Any, Any, int]], kind: str,
                                                    history: int, grace: int | None) -> None:
        """The direct engine's join against a versioned table, with or without a grace period,
        gives the model's records in the model's order (`grace_join_reference_run`: each stream
        record joined, when the buffer releases it, with the version valid at its timestamp)."""
        from streamsdsl.runtime.driver import TopologyTestDriver

        grace = None if grace is None or grace > history else grace
        b = StreamsBuilder()
        stream = b.stream("streamTopic", INT_STR)
        table = b.table("tableTopic2", INT_STR, versioned("v", history))
        joined = None if grace is None else Joined.with_grace_period(grace)
        (stream.join if kind == "inner" else stream.left_join)(table, joiner, joined=joined).to("out", OUT)
        with TopologyTestDriver(b.build(), engine="direct") as d:
            topics = {"stream": d.create_input_topic("streamTopic", Serdes.Integer(), Serdes.String()),
                      "table": d.create_input_topic("tableTopic2", Serdes.Integer(), Serdes.String())}
            for side, key, value, ts in events:
                topics[side].pipe_input(key, value, ts)
            out = d.create_output_topic("out", Serdes.Integer(), Serdes.String())
            got = [(r.key, r.value, r.timestamp) for r in out.read_records_to_list()]
        expected = grace_join_reference_run(events, kind=kind, grace=grace, retention=history, joiner=joiner,
                                            key_order=Serdes.Integer().serialize)
        assert got == [(o.key, o.value, o.timestamp) for o in expected]


@pytest.mark.spark_engine("the Spark plan against the direct engine")
class TestEnginesAgree:
    def test_spark_replay_matches_direct(self, spark: Any) -> None:
        """One run of mixed keys, out-of-order table updates, expired puts, tombstones, null keys
        and values through a left grace join and an inner join without grace: the Spark plan's
        records are the direct engine's, in the same order, also across runs (the buffer and the
        store times carried)."""
        from streamsdsl.runtime.driver import TopologyTestDriver

        b = StreamsBuilder()
        stream = b.stream("streamTopic", INT_STR)
        table = b.table("tableTopic2", INT_STR, versioned("v", 6))
        stream.left_join(table, joiner, joined=Joined.with_grace_period(3)).to("out", OUT)
        stream.join(table.map_values(str.upper), joiner).to("out2", OUT)
        steps = [("table", [(1, "a", 2), (2, "b", 4), (1, "c", 9)]),
                 ("stream", [(1, "s", 5), (2, "t", 6), (None, "n", 6), (3, None, 7), (1, "u", 8)]),
                 ("table", [(1, "late", 6), (2, "old", 1), (3, None, 10), (2, "e", 12)]),
                 ("stream", [(2, "v", 4), (1, "w", 13), (3, "x", 11), (2, "y", 14)])]
        runs = {}
        for engine in ("direct", "spark"):
            with TopologyTestDriver(b.build(), engine=engine, spark=spark if engine == "spark" else None) as d:
                got = _drive(d, steps)
                other = d.create_output_topic("out2", Serdes.Integer(), Serdes.String()).read_records_to_list()
                runs[engine] = (got, [(r.key, r.value, r.timestamp) for r in other],
                                d.metrics()["dropped-records-total"])
        assert runs["spark"] == runs["direct"]
