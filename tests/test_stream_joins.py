"""Windowed stream-stream joins: JoinWindows / StreamJoined and the errors when written,
describe() as Kafka Streams prints it, the TopologyTestDriver (Kafka's KStreamKStreamJoinTest,
KStreamKStreamLeftJoinTest and KStreamKStreamOuterJoinTest scenarios, one read per pipe step)
and a streaming query restarted from its checkpoint."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from streamsdsl import (
    Consumed,
    InvalidArgumentError,
    InvalidTypeError,
    JoinWindows,
    Joiners,
    Produced,
    Serdes,
    StreamJoined,
    StreamsBuilder,
    TestRecord,
    TopologyError,
)
from streamsdsl.semantics.stream_stream import JoinWindowsSpec, StreamJoinSpec, stream_join_reference_run

R = TestRecord
INT_STR = Consumed.with_serdes(Serdes.Integer(), Serdes.String())
OUT = Produced.with_serdes(Serdes.Integer(), Serdes.String())
W100 = JoinWindows.of_time_difference_and_grace(100, 0)


def joiner(value: Any, other: Any) -> str:
    """Kafka's ``MockValueJoiner.TOSTRING_JOINER``: ``v1 + "+" + v2`` (Java renders null as "null")."""
    return f"{'null' if value is None else value}+{'null' if other is None else other}"


def _describe(kind: str, **kwargs: Any) -> str:
    b = StreamsBuilder()
    getattr(b.stream("left"), kind)(b.stream("right"), joiner, W100, **kwargs).filter(lambda k, v: True).to("out")
    return b.build().describe()


def _expected(this: str, other: str, this_stores: str, other_stores: str) -> str:
    """Kafka's description of ``left.<join>(right, ...).filter(...).to("out")`` (unnamed)."""
    return (
        "Topologies:\n"
        "   Sub-topology: 0\n"
        "    Source: KSTREAM-SOURCE-0000000000 (topics: [left])\n"
        "      --> KSTREAM-WINDOWED-0000000002\n"
        "    Source: KSTREAM-SOURCE-0000000001 (topics: [right])\n"
        "      --> KSTREAM-WINDOWED-0000000003\n"
        f"    Processor: KSTREAM-WINDOWED-0000000002 (stores: [{this}-store])\n"
        f"      --> {this}\n"
        "      <-- KSTREAM-SOURCE-0000000000\n"
        f"    Processor: KSTREAM-WINDOWED-0000000003 (stores: [{other}-store])\n"
        f"      --> {other}\n"
        "      <-- KSTREAM-SOURCE-0000000001\n"
        + "".join(sorted((  # equal sub-tree sizes: by name
            f"    Processor: {other} (stores: [{other_stores}])\n"
            "      --> KSTREAM-MERGE-0000000006\n"
            "      <-- KSTREAM-WINDOWED-0000000003\n",
            f"    Processor: {this} (stores: [{this_stores}])\n"
            "      --> KSTREAM-MERGE-0000000006\n"
            "      <-- KSTREAM-WINDOWED-0000000002\n")))
        + "    Processor: KSTREAM-MERGE-0000000006 (stores: [])\n"
        "      --> KSTREAM-FILTER-0000000007\n"
        f"      <-- {this}, {other}\n"
        "    Processor: KSTREAM-FILTER-0000000007 (stores: [])\n"
        "      --> KSTREAM-SINK-0000000008\n"
        "      <-- KSTREAM-MERGE-0000000006\n"
        "    Sink: KSTREAM-SINK-0000000008 (topic: out)\n"
        "      <-- KSTREAM-FILTER-0000000007\n\n"
    )


class TestJoinWindows:
    def test_constructors(self) -> None:
        """of_time_difference_* set before = after; before()/after() return a changed copy;
        durations are int ms or timedelta."""
        w = JoinWindows.of_time_difference_with_no_grace(timedelta(seconds=1))
        assert (w.before_ms, w.after_ms, w.grace_ms) == (1000, 1000, 0)
        assert w.after(0) == JoinWindows(1000, 0, 0) and w == JoinWindows(1000, 1000, 0)
        assert JoinWindows.of_time_difference_and_grace(5, 7).before(-3) == JoinWindows(-3, 5, 7)
        assert W100.spec == JoinWindowsSpec(100, 100, 0, spurious_result_fix=True)

    def test_validation(self) -> None:
        """Negative differences, negative grace and an empty window fail at construction, with
        the argument, the unit (ms) and the fix in the message."""
        with pytest.raises(InvalidArgumentError) as e:
            JoinWindows.of_time_difference_with_no_grace(-1)
        assert e.value.args == ("'time_difference' must be >= 0 ms (got -1). Use 0 to join records with equal "
                                "timestamps only, e.g. JoinWindows.of_time_difference_with_no_grace(0).",)
        with pytest.raises(InvalidArgumentError) as e:
            JoinWindows.of_time_difference_and_grace(10, -5)
        assert e.value.args == ("'grace' must be >= 0 ms (got -5). Use JoinWindows.of_time_difference_with_no_grace"
                                "(time_difference) to keep no record after its window.",)
        with pytest.raises(InvalidArgumentError) as e:
            JoinWindows.of_time_difference_with_no_grace(10).after(-11)
        assert e.value.args == ("'before' + 'after' must be >= 0 ms (got 10 + -11 = -1): the join window "
                                "[t - before, t + after] would be empty. Use e.g. "
                                "JoinWindows.of_time_difference_with_no_grace(100).after(0).",)
        with pytest.raises(InvalidTypeError, match="'time_difference'"):
            JoinWindows.of_time_difference_with_no_grace("5")

    def test_stream_joined(self) -> None:
        """StreamJoined holds serdes and names; a bad serde or name fails at construction."""
        sj = StreamJoined.with_serdes(Serdes.Integer(), Serdes.String(), Serdes.Long()).with_name("n").with_store_name("s")
        assert (sj.key_serde, sj.value_serde, sj.other_value_serde, sj.name, sj.store_name) == (
            Serdes.Integer(), Serdes.String(), Serdes.Long(), "n", "s")
        with pytest.raises(InvalidTypeError, match="'other_value_serde' must be a Serde"):
            StreamJoined.with_serdes(None, None, 3)  # type: ignore[arg-type]
        with pytest.raises(InvalidArgumentError, match="'name' 'a b' contains an illegal character"):
            StreamJoined().with_name("a b")


class TestStreamJoinApi:
    def test_errors_when_written(self) -> None:
        """A stream-stream join needs JoinWindows, a joiner of two arguments, a StreamJoined, one
        builder; outer_join() takes no KTable (a re-keyed side is repartitioned:
        tests/test_repartition_joins.py)."""
        b = StreamsBuilder()
        left, right = b.stream("l"), b.stream("r")
        with pytest.raises(InvalidArgumentError) as e:
            left.join(right, joiner)
        assert e.value.args == (
            "'windows' is required: a stream-stream join() joins records whose timestamps are close; say how close "
            "with e.g. join(other, joiner, JoinWindows.of_time_difference_with_no_grace(timedelta(seconds=5))).",)
        with pytest.raises(InvalidTypeError, match=r"'windows' must be a JoinWindows, e.g. JoinWindows\."):
            left.left_join(right, joiner, 100)
        with pytest.raises(InvalidTypeError, match=r"'joiner' must accept 2 positional arguments \(value, other_value\)"):
            left.outer_join(right, lambda v: v, W100)
        with pytest.raises(InvalidTypeError, match="outer_join.. needs joiner"):
            left.outer_join(right)
        with pytest.raises(InvalidTypeError, match="'stream_joined' must be a StreamJoined"):
            left.join(right, joiner, W100, stream_joined=INT_STR)
        with pytest.raises(InvalidTypeError) as e:
            left.outer_join(b.table("t"), joiner, W100)  # type: ignore[arg-type]
        assert e.value.args == ("outer_join() joins two KStreams; a KStream cannot be outer-joined with a KTable. Use "
                                "left_join(table, joiner) for a stream-table join, or pass a KStream and JoinWindows.",)
        with pytest.raises(TopologyError, match="different StreamsBuilder"):
            left.join(StreamsBuilder().stream("x"), joiner, W100)

    def test_describe_join(self) -> None:
        """KStreamKStreamJoinTest's expected topology: WINDOWED nodes own their side's store,
        JOINTHIS / JOINOTHER read the other side's, KSTREAM-MERGE gets JOINTHIS first; five
        indexes are used, so the next processor is 7."""
        assert _describe("join") == _expected(
            "KSTREAM-JOINTHIS-0000000004", "KSTREAM-JOINOTHER-0000000005",
            "KSTREAM-JOINOTHER-0000000005-store", "KSTREAM-JOINTHIS-0000000004-store")

    def test_describe_left_join(self) -> None:
        """A left join: JOINTHIS and OUTEROTHER (KStreamImplJoin: leftOuter), and the shared
        outer store KSTREAM-OUTERSHARED-<JOINTHIS index>-store on both join processors (listed in
        Java HashSet order)."""
        assert _describe("left_join") == _expected(
            "KSTREAM-JOINTHIS-0000000004", "KSTREAM-OUTEROTHER-0000000005",
            "KSTREAM-OUTEROTHER-0000000005-store, KSTREAM-OUTERSHARED-0000000004-store",
            "KSTREAM-JOINTHIS-0000000004-store, KSTREAM-OUTERSHARED-0000000004-store")

    def test_describe_outer_join(self) -> None:
        """An outer join: OUTERTHIS and OUTEROTHER, the shared store numbered after OUTERTHIS."""
        assert _describe("outer_join") == _expected(
            "KSTREAM-OUTERTHIS-0000000004", "KSTREAM-OUTEROTHER-0000000005",
            "KSTREAM-OUTEROTHER-0000000005-store, KSTREAM-OUTERSHARED-0000000004-store",
            "KSTREAM-OUTERTHIS-0000000004-store, KSTREAM-OUTERSHARED-0000000004-store")

    def test_named_join(self) -> None:
        """StreamJoinedTest / StreamsBuilderTest: a name gives <name>-this-windowed,
        -outer-other-join, -merge ...; the stores keep their generated names unless a store name
        is given (<store>-this-join-store, <store>-outer-other-join-store, <store>-left-shared-join-store)."""
        b = StreamsBuilder()
        b.stream("a").left_join(b.stream("b"), joiner, W100, stream_joined=StreamJoined().with_name("op")).to("o")
        b.stream("c").outer_join(b.stream("d"), joiner, W100, name="op2",
                                 stream_joined=StreamJoined().with_store_name("st")).to("o2")
        topology = b.build()
        node = topology.node("op-merge")
        assert (node.this_windowed, node.other_windowed, node.join_this, node.join_other) == (
            "op-this-windowed", "op-other-windowed", "op-this-join", "op-outer-other-join")
        assert node.stores == ("KSTREAM-JOINTHIS-0000000004-store", "KSTREAM-OUTEROTHER-0000000005-store",
                               "KSTREAM-OUTERSHARED-0000000004-store")
        outer = topology.node("op2-merge")
        assert (outer.join_this, outer.join_other) == ("op2-outer-this-join", "op2-outer-other-join")
        assert outer.stores == ("st-outer-this-join-store", "st-outer-other-join-store", "st-outer-shared-join-store")
        assert "Sink: KSTREAM-SINK-0000000015 (topic: o2)\n      <-- op2-merge\n" in topology.describe()


def _topology() -> Any:
    """The three joins of ``left`` and ``right`` (window 100 ms, no grace), and an outer join
    of ``left2`` and ``right2`` (grace 10 ms), each to its own topic."""
    b = StreamsBuilder()
    left, right = b.stream("left", INT_STR), b.stream("right", INT_STR)
    left.join(right, joiner, W100).to("inner", OUT)
    left.left_join(right, joiner, W100).to("left-out", OUT)
    left.outer_join(right, joiner, W100).to("outer", OUT)
    b.stream("left2", INT_STR).outer_join(
        b.stream("right2", INT_STR), joiner, JoinWindows.of_time_difference_and_grace(100, 10)).to("outer2", OUT)
    return b.build()


@pytest.mark.spark
class TestStreamJoinDriver:
    @pytest.mark.every_host  # the JVM operator's replay: carried state, placed held records, drops
    def test_kafka_scenarios(self, spark: Any) -> None:
        """One read per pipe step (each run processes only the new records, the join state and
        Kafka's stream time carried over):

        - KStreamKStreamLeftJoinTest / OuterJoinTest.testLeftExpiredNonJoinedRecordsAreEmittedByTheLeftProcessor
          (steps 1-4): a non-joined left record comes out only once stream time passes its
          window + grace (KIP-633), as a null-join with its own timestamp, triggered by another key;
        - KStreamKStreamJoinTest.testJoin/testWindowing: matches in both directions, ts = max;
        - an outer join's unmatched right record (null+c4), emitted by a left record of another key;
        - a later record still joins a record whose null-join was already emitted (left and outer);
        - null keys: joined with null on an outer side (KIP-962), else dropped; null values dropped;
        - KStreamKStreamOuterJoinTest.testOuterJoinDuplicates (left2/right2, grace 10): held records
          of several keys come out ordered (timestamp, right before left, key).
        """
        from streamsdsl.runtime.driver import TopologyTestDriver

        with TopologyTestDriver(_topology()) as d:
            i, s = Serdes.Integer(), Serdes.String()
            left, right = d.create_input_topic("left", i, s), d.create_input_topic("right", i, s)
            left2, right2 = d.create_input_topic("left2", i, s), d.create_input_topic("right2", i, s)
            outs = {t: d.create_output_topic(t, i, s) for t in ("inner", "left-out", "outer", "outer2")}

            def read() -> tuple[list[Any], ...]:
                return tuple(outs[t].read_records_to_list() for t in ("inner", "left-out", "outer", "outer2"))

            for k, v, ts in ((0, "A0", 1), (1, "A1", 2), (0, "A0-0", 3)):
                left.pipe_input(k, v, ts)
            for k, v, ts in ((0, "A0", 0), (0, "A0-0", 0)):
                left2.pipe_input(k, v, ts)
            for k, v, ts in ((1, "a1", 0), (1, "a1-0", 0), (1, "a0", 111)):
                right2.pipe_input(k, v, ts)
            assert read() == ([], [], [], [R(1, "null+a1", 0), R(1, "null+a1-0", 0), R(0, "A0+null", 0),
                                           R(0, "A0-0+null", 0)])

            right.pipe_input(1, "a1", 3)
            for k, v, ts in ((2, "A2", 200), (2, "A2-0", 200)):
                left2.pipe_input(k, v, ts)
            for k, v, ts in ((2, "a2", 201), (2, "a2-0", 201)):
                right2.pipe_input(k, v, ts)
            assert read() == ([R(1, "A1+a1", 3)], [R(1, "A1+a1", 3)], [R(1, "A1+a1", 3)], [
                R(2, "A2+a2", 201), R(2, "A2-0+a2", 201), R(2, "A2+a2-0", 201), R(2, "A2-0+a2-0", 201)])

            left.pipe_input(2, "dummy", 401)
            right2.pipe_input(3, "a3", 315)
            expired = [R(0, "A0+null", 1), R(0, "A0-0+null", 3)]
            assert read() == ([], expired, expired, [R(1, "null+a0", 111)])

            right.pipe_input(2, "dummy", 402)
            assert read() == ([R(2, "dummy+dummy", 402)],) * 3 + ([],)

            for side, k, v, ts in (("r", 3, "b3", 500), ("l", 3, "B3", 550), ("r", 4, "c4", 560), ("l", 5, "z", 700)):
                (left if side == "l" else right).pipe_input(k, v, ts)
            assert read() == ([R(3, "B3+b3", 550)], [R(3, "B3+b3", 550)], [R(3, "B3+b3", 550), R(4, "null+c4", 560)],
                              [])

            left.pipe_input(None, "n", 701)
            right.pipe_input(None, "m", 702)
            left.pipe_input(6, None, 703)
            left.pipe_input(4, "late", 470)  # out of order: c4 is null-joined already, and still buffered
            assert read() == ([R(4, "late+c4", 560)], [R(None, "n+null", 701), R(4, "late+c4", 560)],
                              [R(None, "n+null", 701), R(None, "null+m", 702), R(4, "late+c4", 560)], [])

            right.pipe_input(8, "q", 1000)
            assert read() == ([], [R(5, "z+null", 700)], [R(5, "z+null", 700)], [])
            # dropped: inner 3 (two null keys, a null value), left 2, outer 1
            assert d.metrics()["dropped-records-total"] == 6.0

    def test_matches_the_reference_per_key(self, spark: Any) -> None:
        """Out-of-order and duplicate records with grace, one run: per key, the driver forwards
        exactly the reference's records (Kafka's TopologyTestDriver order within each key)."""
        from streamsdsl.runtime.driver import TopologyTestDriver

        records = [("l", 1, "A", 100), ("r", 2, "b", 130), ("l", 2, "B", 90), ("r", 1, "a", 260), ("l", 3, "C", 300),
                   ("r", 3, "c", 180), ("l", 1, "A2", 250), ("r", 2, "b2", 170), ("l", 4, "D", 420),
                   ("r", 3, "c2", 320), ("r", 5, "e", 700), ("l", 2, "B3", 130)]
        windows = JoinWindows.of_time_difference_and_grace(50, 40)
        b = StreamsBuilder()
        b.stream("l", INT_STR).outer_join(b.stream("r", INT_STR), joiner, windows).to("o", OUT)
        with TopologyTestDriver(b.build()) as d:
            topics = {t: d.create_input_topic(t, Serdes.Integer(), Serdes.String()) for t in ("l", "r")}
            for side, k, v, ts in records:
                topics[side].pipe_input(k, v, ts)
            got = [(r.key, r.value, r.timestamp) for r in
                   d.create_output_topic("o", Serdes.Integer(), Serdes.String()).read_records_to_list()]
        spec = StreamJoinSpec("outer", windows.spec)
        ref = stream_join_reference_run([("left" if s == "l" else "right", k, v, ts) for s, k, v, ts in records], spec,
                                        joiner).outputs
        expected = [(o.key, o.value, o.timestamp) for o in ref]
        assert len(got) == len(expected) > 6
        for key in {k for k, _, _ in expected}:
            assert [g for g in got if g[0] == key] == [e for e in expected if e[0] == key]

    def test_joiner_error_and_explain(self, spark: Any, operator: str) -> None:
        """A joiner that raises fails the read with a UserFunctionError naming the join, the
        function and the record, on either operator (the JVM operator's joiner runs over the
        matched pairs, a batch at a time); the records before it keep their output. explain()
        names the operator, and how the joiner runs."""
        from streamsdsl import explain
        from streamsdsl.errors import UserFunctionError
        from streamsdsl.runtime.driver import TopologyTestDriver

        def failing(value: Any, other: Any) -> str:
            return f"{value}+{other}" if other != "bad" else str(1 // 0)

        b = StreamsBuilder()
        b.stream("l", INT_STR).join(b.stream("r", INT_STR), failing, W100).to("out", OUT)
        topology = b.build()
        operators = explain(topology, spark, mode="simple").split("== streamsdsl operators ==")[1]
        assert operators.strip() == {
            "python": "KSTREAM-MERGE-0000000006: Python operator (stream-stream join, inner; streamsdsl.operator=python)",
            "jvm": "KSTREAM-MERGE-0000000006: JVM operator (stream-stream join, inner; Python joiner per Arrow batch)",
        }[operator]
        b = StreamsBuilder()
        b.stream("l", INT_STR).outer_join(b.stream("r", INT_STR), Joiners.pair(), W100).to("out")
        if operator == "jvm":  # a built-in joiner needs no Python
            assert explain(b.build(), spark, mode="simple").endswith(
                "KSTREAM-MERGE-0000000006: JVM operator (stream-stream join, outer; Joiners.pair() as Spark columns)\n")
        with TopologyTestDriver(topology, spark=spark) as d:
            left = d.create_input_topic("l", Serdes.Integer(), Serdes.String())
            right = d.create_input_topic("r", Serdes.Integer(), Serdes.String())
            out = d.create_output_topic("out", Serdes.Integer(), Serdes.String())
            left.pipe_input(1, "A", 1)
            right.pipe_input(1, "good", 2)
            right.pipe_input(1, "bad", 3)
            with pytest.raises(UserFunctionError) as caught:
                out.read_records_to_list()
            assert str(caught.value) == ("KSTREAM-MERGE-0000000006: the joiner raised ZeroDivisionError: integer "
                                         "division or modulo by zero (record at topic r partition 0 offset 1, key 1)")
            assert out.read_records_to_list() == [R(1, "A+good", 2)]


@pytest.mark.spark
class TestStreamingStreamJoin:
    def test_micro_batches_timers_and_restart(self, spark: Any, tmp_path: Any, operator: str) -> None:
        """On a streaming query (one file per micro-batch): matches across micro-batches in both
        directions; a non-joined left record is emitted by its event-time timer once the global
        watermark (the largest timestamp of either input, as Kafka's stream time) passes its
        window, and a record of the other side arriving after that is too late to join, as in a
        Kafka task that processed the first side's records before the other's arrived; after a
        restart from the checkpoint the buffered and held records are still there. Both operators
        forward the same records; a restart on the other operator is refused with the fix."""
        from streamsdsl.jvm import CheckpointOperatorError
        from streamsdsl.runtime.streaming import start_streaming
        from streamsdsl.testing.files import FileTopic
        from tests._support import Collect

        topic = FileTopic(str(tmp_path / "in"))
        cp = str(tmp_path / "checkpoint")
        i, s = Serdes.Integer(), Serdes.String()
        b = StreamsBuilder()
        b.stream("left", INT_STR).left_join(b.stream("right", INT_STR), joiner, W100).to("out", OUT)
        topology = b.build()

        def run(*files: tuple[str, list[tuple[Any, Any, int]]], on: str = operator) -> list[tuple[Any, Any, int]]:
            for name, records in files:
                topic.append(name, records, i, s)
            out = Collect()
            q, _, _ = start_streaming(topology, lambda n: topic.read_stream(spark, n.topics), out,
                                      checkpoint_location=cp, operator=on)
            q.processAllAvailable()
            q.stop()
            return [(k, v, ts) for _, k, v, ts in out.records]

        # the 3rd file moves the watermark to 1010: A2's and x's windows close (x's match, y at
        # 500 in the 4th file, comes too late); a left record with a None key is joined with
        # None at once (KIP-962), a right one dropped
        assert run(("left", [(1, "A1", 10), (2, "A2", 20), (None, "n", 30)]),
                   ("right", [(1, "a1", 50), (3, "a3", 60), (None, "m", 40)]),
                   ("left", [(9, "x", 500), (5, "B5", 1000), (6, "C6", 1010)]), ("right", [(9, "y", 500)])) == [
            (None, "n+null", 30), (1, "A1+a1", 50), (9, "x+null", 500), (2, "A2+null", 20)]
        # restarted: B5 is still buffered (and held), C6 held until the watermark passes 1110
        # (z's file moves it to 2000)
        assert run(("right", [(5, "b5", 1050)]), ("left", [(9, "z", 2000)]), ("right", [(9, "w", 2000)])) == [
            (5, "B5+b5", 1050), (6, "C6+null", 1010), (9, "z+w", 2000)]
        other = "python" if operator == "jvm" else "jvm"
        with pytest.raises(CheckpointOperatorError, match=f"set streamsdsl.operator to '{operator}'"):
            run(on=other)
