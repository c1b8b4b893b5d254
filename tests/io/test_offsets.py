"""Offset arithmetic of the Kafka source (`streamsdsl.io.offsets`): no broker, no Spark."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamsdsl.io import KafkaOptionError
from streamsdsl.io.offsets import (
    EARLIEST,
    LATEST,
    OffsetRange,
    allocate_rate_limit,
    batch_end,
    fill_sentinels,
    offsets_from_json,
    offsets_to_json,
    plan_ranges,
    requested_offsets,
)


class TestCheckpointJson:
    """``{"topic": {"0": 23}}`` <-> ``{("topic", 0): 23}``."""

    def test_from_json_makes_integer_partitions_and_offsets(self) -> None:
        """String partition ids and offsets become ints; every topic is kept."""
        assert offsets_from_json({"a": {"0": 23, "10": "7"}, "b": {"1": 0}}) == {
            ("a", 0): 23,
            ("a", 10): 7,
            ("b", 1): 0,
        }

    def test_from_json_of_nothing_is_empty(self) -> None:
        """``None`` (no offsets yet) and ``{}`` give no positions."""
        assert offsets_from_json(None) == {}
        assert offsets_from_json({}) == {}

    def test_to_json_sorts_topics_and_partitions_numerically(self) -> None:
        """Topics by name, partitions by number (10 after 2), ids as strings."""
        out = offsets_to_json({("t", 10): 1, ("a", 0): 5, ("t", 2): 3})
        assert out == {"a": {"0": 5}, "t": {"2": 3, "10": 1}}
        assert list(out) == ["a", "t"]
        assert list(out["t"]) == ["2", "10"]

    @settings(max_examples=200, deadline=None)
    @given(
        st.dictionaries(
            st.tuples(st.text(min_size=1, max_size=5), st.integers(0, 1_000)),
            st.integers(0, 2**63 - 1),
            max_size=12,
        )
    )
    def test_round_trip(self, offsets: dict[tuple[str, int], int]) -> None:
        """Any positions survive to_json then from_json unchanged."""
        assert offsets_from_json(offsets_to_json(offsets)) == offsets


TPS = [("a", 0), ("a", 1), ("b", 0)]


class TestRequestedOffsets:
    """What a ``startingOffsets``/``endingOffsets`` value asks for, before the broker is asked."""

    def test_earliest_keyword(self) -> None:
        """``"earliest"`` asks for the earliest offset of every partition."""
        assert requested_offsets("earliest", TPS, "startingOffsets", default=LATEST) == {
            ("a", 0): EARLIEST,
            ("a", 1): EARLIEST,
            ("b", 0): EARLIEST,
        }

    def test_latest_keyword(self) -> None:
        """``"latest"`` asks for the end of every partition."""
        assert requested_offsets("latest", TPS, "endingOffsets", default=LATEST) == dict.fromkeys(TPS, LATEST)

    def test_json_offsets_sentinels_and_default(self) -> None:
        """Explicit offsets and sentinels are kept; a topic the JSON does not name gets the default."""
        spec = {"a": {"0": 5, "1": LATEST}}
        assert requested_offsets(spec, TPS, "startingOffsets", default=EARLIEST) == {
            ("a", 0): 5,
            ("a", 1): LATEST,
            ("b", 0): EARLIEST,
        }
        assert requested_offsets(spec, TPS, "endingOffsets", default=LATEST)[("b", 0)] == LATEST

    def test_order_follows_the_partitions(self) -> None:
        """The result lists the partitions in the broker's order, whatever the JSON's order."""
        spec = {"b": {"0": 1}, "a": {"1": 2, "0": 3}}
        assert list(requested_offsets(spec, TPS, "startingOffsets", default=EARLIEST)) == TPS

    def test_no_partitions(self) -> None:
        """No partitions on the broker (topics not created yet): nothing is asked for."""
        assert requested_offsets("earliest", [], "startingOffsets", default=EARLIEST) == {}

    def test_unknown_partition(self) -> None:
        """A partition the topic does not have is named in the error."""
        with pytest.raises(KafkaOptionError) as info:
            requested_offsets({"a": {"0": 1, "1": 1, "7": 2}}, TPS, "startingOffsets", default=EARLIEST)
        assert info.value.args == ("option 'startingOffsets' names partitions that do not exist: a-7.",)

    def test_missing_partition(self) -> None:
        """A named topic must list all its partitions; the missing ones are named."""
        with pytest.raises(KafkaOptionError) as info:
            requested_offsets({"a": {"1": 4}}, TPS, "endingOffsets", default=LATEST)
        assert info.value.args == (
            "option 'endingOffsets' must give an offset for every partition of the topics it names; "
            "missing: a-0. Use -2 for earliest or -1 for latest.",
        )


class TestFillSentinels:
    """Sentinels replaced by the broker's offsets."""

    def test_replaces_sentinels_keeps_offsets(self) -> None:
        """EARLIEST takes the earliest offset, LATEST the end, an explicit offset stays."""
        wanted = {("t", 0): EARLIEST, ("t", 1): LATEST, ("t", 2): 4}
        out = fill_sentinels(wanted, earliest={("t", 0): 3}, latest={("t", 1): 9})
        assert out == {("t", 0): 3, ("t", 1): 9, ("t", 2): 4}

    def test_explicit_zero_is_not_a_sentinel(self) -> None:
        """Offset 0 is an offset, not a request for the broker's value."""
        assert fill_sentinels({("t", 0): 0}, earliest={("t", 0): 5}, latest={("t", 0): 8}) == {("t", 0): 0}


class TestAllocateRateLimit:
    """Admission control: ``maxOffsetsPerTrigger`` shared by backlog, largest remainder first."""

    def test_rate_limit_allocation_is_exact(self) -> None:
        """Largest-remainder sharing: exactly ``limit`` offsets, never past a partition's end."""
        start = {("t", 0): 0, ("t", 1): 5, ("t", 2): 0}
        end = {("t", 0): 10, ("t", 1): 6, ("t", 2): 3}
        assert allocate_rate_limit(start, end, 5) == {("t", 0): 4, ("t", 1): 5, ("t", 2): 1}
        assert allocate_rate_limit(start, end, 100) == end
        assert allocate_rate_limit(start, end, 1) == {("t", 0): 1, ("t", 1): 5, ("t", 2): 0}

    def test_backlog_equal_to_limit_is_read_whole(self) -> None:
        """A backlog of exactly ``limit`` is not cut."""
        start = {("t", 0): 2, ("t", 1): 0}
        end = {("t", 0): 5, ("t", 1): 3}
        assert allocate_rate_limit(start, end, 6) == end

    def test_ties_go_to_the_first_partitions(self) -> None:
        """Equal remainders: the left-over offsets go in topic, partition order."""
        start = {("b", 0): 0, ("a", 1): 0, ("a", 0): 0}
        end = {("b", 0): 1, ("a", 1): 1, ("a", 0): 1}
        assert allocate_rate_limit(start, end, 2) == {("b", 0): 0, ("a", 1): 1, ("a", 0): 1}

    def test_partition_without_start_has_no_backlog(self) -> None:
        """A partition missing from ``start`` stays at its end and takes no share."""
        start = {("t", 0): 0}
        end = {("t", 0): 10, ("t", 1): 4}
        assert allocate_rate_limit(start, end, 3) == {("t", 0): 3, ("t", 1): 4}

    def test_offsets_beyond_float_precision(self) -> None:
        """Offsets above 2**53 are shared exactly (float shares lost 157 offsets here)."""
        backlogs = [1_164_115_433_906_158_533, 2_175_216_119_781_798_973, 8_711_387_064_946_514_084]
        limit = 12_050_718_618_634_471_583
        start = {("t", p): 0 for p in range(3)}
        end = {("t", p): n for p, n in enumerate(backlogs)}
        out = allocate_rate_limit(start, end, limit)
        assert sum(out.values()) == limit
        assert out == {
            ("t", 0): 1_164_115_433_906_158_532,
            ("t", 1): 2_175_216_119_781_798_972,
            ("t", 2): 8_711_387_064_946_514_079,
        }

    @settings(max_examples=500, deadline=None)
    @given(
        st.lists(
            st.tuples(st.integers(0, 2**62), st.integers(0, 2**62)),
            min_size=1,
            max_size=8,
        ),
        st.integers(1, 2**62),
    )
    def test_allocation_properties(self, ranges: list[tuple[int, int]], limit: int) -> None:
        """Never above the limit or a partition's backlog; sums to min(limit, total backlog)."""
        start = {("t", p): first for p, (first, _n) in enumerate(ranges)}
        end = {("t", p): first + n for p, (first, n) in enumerate(ranges)}
        out = allocate_rate_limit(start, end, limit)
        taken = {tp: out[tp] - start[tp] for tp in end}
        assert set(out) == set(end)
        assert all(0 <= taken[tp] <= end[tp] - start[tp] for tp in end)
        assert sum(taken.values()) <= limit
        assert sum(taken.values()) == min(limit, sum(n for _first, n in ranges))


class TestBatchEnd:
    """The end offsets of the next micro-batch."""

    def test_without_limit_reads_to_the_broker_end(self) -> None:
        """No limit: every partition up to the broker's end offset."""
        start = {("t", 0): 1, ("t", 1): 0}
        assert batch_end(start, {("t", 0): 4, ("t", 1): 2}, None) == {("t", 0): 4, ("t", 1): 2}

    def test_end_never_before_start(self) -> None:
        """A broker end below the query's position (a re-created topic) keeps the position."""
        assert batch_end({("t", 0): 9}, {("t", 0): 7}, None) == {("t", 0): 9}

    def test_vanished_partition_keeps_its_position(self) -> None:
        """A partition gone from the broker stays in the offsets, at its start."""
        start = {("t", 0): 1, ("gone", 0): 7}
        assert batch_end(start, {("t", 0): 3}, 10) == {("t", 0): 3, ("gone", 0): 7}

    def test_limit_shared_with_a_new_partition(self) -> None:
        """A partition new to the query (started at its earliest offset) shares the limit."""
        start = {("t", 0): 5, ("t", 1): 0, ("t", 2): 2}
        latest = {("t", 0): 3, ("t", 1): 8, ("t", 2): 6}
        assert batch_end(start, latest, 6) == {("t", 0): 5, ("t", 1): 4, ("t", 2): 4}

    def test_partition_without_start_begins_at_zero(self) -> None:
        """A partition of ``latest`` with no start counts from offset 0 (its end is its latest)."""
        assert batch_end({}, {("t", 0): 4}, None) == {("t", 0): 4}


class TestPlanRanges:
    """One offset range per partition with offsets to read."""

    def test_ranges_in_end_order_skipping_empty(self) -> None:
        """Partitions with nothing new get no range; the others keep the order of ``end``."""
        start = {("a", 0): 0, ("a", 1): 4, ("b", 0): 2}
        end = {("b", 0): 5, ("a", 1): 4, ("a", 0): 3}
        assert plan_ranges(start, end) == [OffsetRange("b", 0, 2, 5), OffsetRange("a", 0, 0, 3)]

    def test_nothing_to_read(self) -> None:
        """No new offsets anywhere: no ranges."""
        assert plan_ranges({("a", 0): 3}, {("a", 0): 3}) == []

    def test_range_fields(self) -> None:
        """A range is ``(topic, partition, start, end)`` with ``end`` exclusive."""
        (r,) = plan_ranges({("a", 2): 10}, {("a", 2): 12})
        assert (r.topic, r.partition, r.start, r.end) == ("a", 2, 10, 12)
