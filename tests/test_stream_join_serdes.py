"""Windowed stream-stream joins of two streams whose value serdes differ (issue 24 item 7): a
``Serdes.String()`` stream joined with a ``Serdes.Long()`` stream, in both orders, by join(),
left_join() and outer_join(), through the TopologyTestDriver on the Spark plan.

The operator's input carries each side's value in its own field (``l`` / ``r``) of its own
type; an expression choosing between the two fields made Spark coerce the string to BIGINT
(CAST_INVALID_INPUT). The scenario covers matches, the null-joins of held records (KIP-633:
emitted once stream time passes ``ts + after + grace``), null-key records with a value (joined
with null at once on an outer side, KIP-962, else dropped), a null value (dropped), a late match
of a record whose null-join was already emitted, and the join state (both value types) carried
across the driver's runs (one read per step).
"""

from __future__ import annotations

import inspect
from typing import Any

import pytest

from streamsdsl import Consumed, JoinWindows, Produced, Serdes, StreamsBuilder, TestRecord

R = TestRecord
STRINGS = Consumed.with_serdes(Serdes.Integer(), Serdes.String())
LONGS = Consumed.with_serdes(Serdes.Integer(), Serdes.Long())
OUT = Produced.with_serdes(Serdes.Integer(), Serdes.String())
W100 = JoinWindows.of_time_difference_and_grace(100, 0)

#: The records piped per step, as (topic, key, value, timestamp): topic "s" is the String
#: stream, "n" the Long stream.
STEPS: tuple[tuple[tuple[str, Any, Any, int], ...], ...] = (
    # 0 matches; 1 (s) and 2 (n) wait for a match; null keys with a value on both sides; a null value
    (("s", 0, "A0", 10), ("n", 0, 100, 20), ("s", 1, "A1", 30), ("n", 2, 102, 40), ("s", None, "AN", 50),
     ("n", None, 109, 60), ("s", 3, None, 70)),
    # stream time 200 passes 30 + 100 and 40 + 100: the held records of keys 1 and 2 come out,
    # (timestamp, right before left, key) order, before A4 is joined; 4 then matches
    (("s", 4, "A4", 200), ("n", 4, 104, 210)),
    # a late n record still joins A1 (buffered, carried from step 1); 6 (n) waits, and comes
    # out when A5 moves stream time past 300 + 100
    (("n", 1, 101, 120), ("n", 6, 106, 300), ("s", 5, "A5", 401)),
)


def joiner(value: Any, other: Any) -> str:
    """The issue's joiner: both values rendered into one string (``None`` for no match)."""
    return f"{value}+{other}"


def _driver(topology: Any, spark: Any) -> Any:
    """A TopologyTestDriver on the Spark plan (``engine="spark"`` once the driver takes one)."""
    from streamsdsl.runtime.driver import TopologyTestDriver

    if "engine" in inspect.signature(TopologyTestDriver).parameters:
        return TopologyTestDriver(topology, spark=spark, engine="spark")
    return TopologyTestDriver(topology, spark=spark)


def _run(spark: Any, kind: str, this: str) -> tuple[list[list[TestRecord]], float]:
    """``<this>.<kind>(<other>, joiner, W100)`` with ``this`` the String stream ("s") or the
    Long stream ("n"): the records read after each step of `STEPS`, and the dropped records."""
    b = StreamsBuilder()
    s, n = b.stream("s", STRINGS), b.stream("n", LONGS)
    left, right = (s, n) if this == "s" else (n, s)
    getattr(left, kind)(right, joiner, W100).to("out", OUT)
    with _driver(b.build(), spark) as d:
        inputs = {"s": d.create_input_topic("s", Serdes.Integer(), Serdes.String()),
                  "n": d.create_input_topic("n", Serdes.Integer(), Serdes.Long())}
        out = d.create_output_topic("out", Serdes.Integer(), Serdes.String())
        reads = []
        for step in STEPS:
            for topic, k, v, ts in step:
                inputs[topic].pipe_input(k, v, ts)
            reads.append(out.read_records_to_list())
        return reads, d.metrics()["dropped-records-total"]


@pytest.mark.spark
class TestStringJoinLong:
    """The String stream joined with the Long stream (String values on the left of the joiner)."""

    def test_join(self, spark: Any) -> None:
        """Inner join: only the matches, each at the later timestamp; both null keys and the
        null value are dropped."""
        assert _run(spark, "join", "s") == (
            [[R(0, "A0+100", 20)], [R(4, "A4+104", 210)], [R(1, "A1+101", 120)]], 3.0)

    def test_left_join(self, spark: Any) -> None:
        """Left join: the String side's null key is joined with None at once, its unmatched A1
        comes out once stream time passes 130 (the Long side's 102 and 106 do not); the Long
        side's null key and the null value are dropped."""
        assert _run(spark, "left_join", "s") == (
            [[R(0, "A0+100", 20), R(None, "AN+None", 50)],
             [R(1, "A1+None", 30), R(4, "A4+104", 210)],
             [R(1, "A1+101", 120)]], 2.0)

    def test_outer_join(self, spark: Any) -> None:
        """Outer join (the failing case of the issue): both null keys joined with None at once,
        the unmatched records of both sides (A1, 102, 106) emitted once their window closes;
        only the null value is dropped."""
        assert _run(spark, "outer_join", "s") == (
            [[R(0, "A0+100", 20), R(None, "AN+None", 50), R(None, "None+109", 60)],
             [R(1, "A1+None", 30), R(2, "None+102", 40), R(4, "A4+104", 210)],
             [R(1, "A1+101", 120), R(6, "None+106", 300)]], 1.0)


@pytest.mark.spark
class TestLongJoinString:
    """The Long stream joined with the String stream (Long values on the left of the joiner)."""

    def test_join(self, spark: Any) -> None:
        """Inner join: the same matches, the Long value first."""
        assert _run(spark, "join", "n") == (
            [[R(0, "100+A0", 20)], [R(4, "104+A4", 210)], [R(1, "101+A1", 120)]], 3.0)

    def test_left_join(self, spark: Any) -> None:
        """Left join with the Long stream as the outer side: its null key (109) is joined with
        None at once, its unmatched 102 and 106 come out once their window closes; the String
        side's null key and the null value are dropped."""
        assert _run(spark, "left_join", "n") == (
            [[R(0, "100+A0", 20), R(None, "109+None", 60)],
             [R(2, "102+None", 40), R(4, "104+A4", 210)],
             [R(1, "101+A1", 120), R(6, "106+None", 300)]], 2.0)

    def test_outer_join(self, spark: Any) -> None:
        """Outer join, mirrored: both null keys joined with None at once, held records of both
        sides in timestamp order; only the null value is dropped."""
        assert _run(spark, "outer_join", "n") == (
            [[R(0, "100+A0", 20), R(None, "None+AN", 50), R(None, "109+None", 60)],
             [R(1, "None+A1", 30), R(2, "102+None", 40), R(4, "104+A4", 210)],
             [R(1, "101+A1", 120), R(6, "106+None", 300)]], 1.0)
