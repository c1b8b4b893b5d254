"""Windowed stream-stream join: Kafka's KStreamKStreamJoinTest, KStreamKStreamLeftJoinTest and
KStreamKStreamOuterJoinTest scenarios (TopologyTestDriver output, in order), and properties of
the per-key steps against the reference run."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from streamsdsl.errors import InvalidArgumentError
from streamsdsl.semantics.stream_stream import JoinWindowsSpec, StreamJoinSpec, StreamJoinState, stream_join_close
from streamsdsl.semantics.stream_stream import stream_join_operator_step, stream_join_reference_run
from streamsdsl.semantics.tables import Output
from tests.semantics._kafka import tostring_joiner

KEYS = [0, 1, 2, 3]
L, R = "left", "right"


class Driver:
    """Pipes records one batch at a time and returns what each batch forwarded (Kafka's
    ``checkAndClearProcessResult``), re-running the reference over everything piped so far."""

    def __init__(self, kind: str, windows: JoinWindowsSpec) -> None:
        self.spec = StreamJoinSpec(kind, windows)  # type: ignore[arg-type]
        self.records: list[tuple[str, Any, Any, int]] = []
        self.seen = 0

    def pipe(self, *records: tuple[str, Any, Any, int]) -> list[tuple[Any, Any, int]]:
        self.records += records
        out = stream_join_reference_run(self.records, self.spec, tostring_joiner).outputs
        new, self.seen = out[self.seen:], len(out)
        return [(o.key, o.value, o.timestamp) for o in new]


class TestInnerJoin:
    def test_join(self) -> None:
        """KStreamKStreamJoinTest.testJoin (all timestamps 0, window 100 ms)."""
        d = Driver("inner", JoinWindowsSpec.of_time_difference_and_grace(100, 0))
        assert d.pipe(*[(L, k, f"A{k}", 0) for k in KEYS[:2]]) == []
        assert d.pipe(*[(R, k, f"a{k}", 0) for k in KEYS[:2]]) == [(0, "A0+a0", 0), (1, "A1+a1", 0)]
        assert d.pipe(*[(L, k, f"B{k}", 0) for k in KEYS[:3]]) == [(0, "B0+a0", 0), (1, "B1+a1", 0)]
        assert d.pipe(*[(R, k, f"b{k}", 0) for k in KEYS]) == [
            (0, "A0+b0", 0), (0, "B0+b0", 0), (1, "A1+b1", 0), (1, "B1+b1", 0), (2, "B2+b2", 0)]
        assert d.pipe(*[(L, k, f"C{k}", 0) for k in KEYS]) == [
            (0, "C0+a0", 0), (0, "C0+b0", 0), (1, "C1+a1", 0), (1, "C1+b1", 0), (2, "C2+b2", 0), (3, "C3+b3", 0)]

    def test_window_bounds_are_inclusive_and_ts_is_max(self) -> None:
        """KStreamKStreamJoinTest.testWindowing (upper/lower bound part): a right record at
        t' joins left records in [t' - after, t' + before], both ends inclusive, ts = max."""
        d = Driver("inner", JoinWindowsSpec.of_time_difference_and_grace(100, 1000))
        d.pipe(*[(L, k, f"A{k}", 1000) for k in KEYS])
        assert d.pipe(*[(R, k, f"b{k}", 1100 + k) for k in KEYS]) == [(0, "A0+b0", 1100)]
        assert d.pipe(*[(R, k, f"c{k}", 900 - k) for k in KEYS]) == [(0, "A0+c0", 1000)]
        assert d.pipe((R, 1, "d1", 899)) == []

    def test_null_key_and_value_are_dropped(self) -> None:
        """StreamStreamJoinUtil.skipRecord: an inner join drops and counts null keys and values."""
        spec = StreamJoinSpec("inner", JoinWindowsSpec.of_time_difference_with_no_grace(10))
        run = stream_join_reference_run([(L, None, "A", 0), (R, 0, None, 0)], spec, tostring_joiner)
        assert run.outputs == [] and run.dropped == ["null_key", "null_value"]


class TestLeftJoin:
    def test_left_join_duplicates(self) -> None:
        """KStreamKStreamLeftJoinTest.testLeftJoinDuplicates."""
        d = Driver("left", JoinWindowsSpec.of_time_difference_and_grace(100, 10))
        assert d.pipe((L, 0, "A0", 0), (L, 0, "A0-0", 0), (R, 1, "a0", 111), (R, 2, "dummy", 500)) == [
            (0, "A0+null", 0), (0, "A0-0+null", 0)]
        assert d.pipe((L, 2, "A2", 1000), (L, 2, "A2-0", 1000), (R, 2, "a2", 1001)) == [
            (2, "A2+a2", 1001), (2, "A2-0+a2", 1001)]
        assert d.pipe((R, 3, "a3", 315)) == []

    @pytest.mark.parametrize("by", [L, R])
    def test_left_expired_non_joined_records_are_emitted(self, by: str) -> None:
        """KStreamKStreamLeftJoinTest.testLeftExpiredNonJoinedRecordsAreEmittedByTheLeftProcessor
        and ...ByTheRightProcessor."""
        d = Driver("left", JoinWindowsSpec.of_time_difference_and_grace(100, 0))
        assert d.pipe((L, 0, "A0", 1), (L, 1, "A1", 2), (L, 0, "A0-0", 3)) == []
        assert d.pipe((R, 1, "a1", 3)) == [(1, "A1+a1", 3)]
        assert d.pipe((by, 2, "dummy", 401)) == [(0, "A0+null", 1), (0, "A0-0+null", 3)]
        other = R if by == L else L
        ts = 401 if by == L else 402
        assert d.pipe((other, 2, "dummy", ts)) == [(2, "dummy+dummy", ts)]

    @pytest.mark.parametrize("by", [L, R])
    def test_right_non_joined_records_are_never_emitted(self, by: str) -> None:
        """KStreamKStreamLeftJoinTest.testRightNonJoinedRecordsAreNeverEmittedByTheLeftProcessor
        and ...ByTheRightProcessor."""
        d = Driver("left", JoinWindowsSpec.of_time_difference_and_grace(100, 0))
        assert d.pipe((R, 0, "A0", 1), (R, 1, "A1", 2), (R, 0, "A0-0", 3)) == []
        assert d.pipe((L, 1, "a1", 3)) == [(1, "a1+A1", 3)]
        assert d.pipe((by, 2, "dummy", 401)) == []
        other = R if by == L else L
        assert d.pipe((other, 2, "dummy", 402)) == [(2, "dummy+dummy", 402)]

    def test_left_joined_records_with_zero_after_are_emitted(self) -> None:
        """KStreamKStreamLeftJoinTest.testLeftJoinedRecordsWithZeroAfterAreEmitted
        (ofTimeDifferenceWithNoGrace(100).after(0))."""
        d = Driver("left", JoinWindowsSpec(100, 0, 0))
        assert d.pipe(*[(L, k, f"A{k}", 1000 + i) for i, k in enumerate(KEYS)]) == [
            (0, "A0+null", 1000), (1, "A1+null", 1001), (2, "A2+null", 1002)]
        assert d.pipe(*[(R, k, f"a{k}", 999) for k in KEYS]) == [(k, f"A{k}+a{k}", 1000 + k) for k in KEYS]
        assert d.pipe(*[(R, k, f"b{k}", 1000) for k in KEYS]) == [(k, f"A{k}+b{k}", 1000 + k) for k in KEYS]
        assert d.pipe(*[(R, k, f"c{k}", 1001) for k in KEYS]) == [(k, f"A{k}+c{k}", 1000 + k) for k in KEYS[1:]]
        assert d.pipe(*[(R, k, f"d{k}", 1002) for k in KEYS]) == [(k, f"A{k}+d{k}", 1000 + k) for k in KEYS[2:]]
        assert d.pipe(*[(R, k, f"e{k}", 1003) for k in KEYS]) == [(3, "A3+e3", 1003)]
        assert d.pipe(*[(R, k, f"f{k}", 1100) for k in KEYS]) == []

    def test_left_join_duplicates_with_spurious_result_fix_disabled_old_api(self) -> None:
        """KStreamKStreamLeftJoinTest.testLeftJoinDuplicatesWithSpuriousResultFixDisabledOldApi
        (JoinWindows.of(100).grace(10)): non-joined results are eager."""
        d = Driver("left", JoinWindowsSpec(100, 100, 10, spurious_result_fix=False))
        assert d.pipe((L, 0, "A0", 0), (L, 0, "A0-0", 0), (R, 0, "a0", 0)) == [
            (0, "A0+null", 0), (0, "A0-0+null", 0), (0, "A0+a0", 0), (0, "A0-0+a0", 0)]

    def test_null_key_with_value_is_null_joined_at_once(self) -> None:
        """KStreamKStreamJoin.process (KIP-962): a left record with a null key and a value is
        forwarded as a null-join; a right one is dropped."""
        spec = StreamJoinSpec("left", JoinWindowsSpec.of_time_difference_with_no_grace(10))
        run = stream_join_reference_run([(L, None, "A", 5), (R, None, "b", 6)], spec, tostring_joiner)
        assert run.outputs == [Output(None, "A+null", 5)] and run.dropped == ["null_key"]


class TestOuterJoin:
    def test_outer_join_duplicates(self) -> None:
        """KStreamKStreamOuterJoinTest.testOuterJoinDuplicates: held records come out ordered
        (ts, right before left, key)."""
        d = Driver("outer", JoinWindowsSpec.of_time_difference_and_grace(100, 10))
        assert d.pipe((L, 0, "A0", 0), (L, 0, "A0-0", 0), (R, 1, "a1", 0), (R, 1, "a1-0", 0), (R, 1, "a0", 111)) == [
            (1, "null+a1", 0), (1, "null+a1-0", 0), (0, "A0+null", 0), (0, "A0-0+null", 0)]
        assert d.pipe((L, 2, "A2", 200), (L, 2, "A2-0", 200), (R, 2, "a2", 201), (R, 2, "a2-0", 201)) == [
            (2, "A2+a2", 201), (2, "A2-0+a2", 201), (2, "A2+a2-0", 201), (2, "A2-0+a2-0", 201)]
        assert d.pipe((R, 3, "a3", 315)) == [(1, "null+a0", 111)]

    def test_outer_join_duplicates_with_fix_disabled_old_api(self) -> None:
        """KStreamKStreamOuterJoinTest.testOuterJoinDuplicatesWithFixDisabledOldApi."""
        d = Driver("outer", JoinWindowsSpec(100, 100, 10, spurious_result_fix=False))
        assert d.pipe((L, 0, "A0", 0), (L, 0, "A0-0", 0), (R, 0, "a0", 0), (R, 1, "b1", 0)) == [
            (0, "A0+null", 0), (0, "A0-0+null", 0), (0, "A0+a0", 0), (0, "A0-0+a0", 0), (1, "null+b1", 0)]

    @pytest.mark.parametrize("by", [L, R])
    def test_left_expired_non_joined_records_are_emitted(self, by: str) -> None:
        """KStreamKStreamOuterJoinTest.testLeftExpiredNonJoinedRecordsAreEmittedByTheLeftProcessor
        and ...ByTheRightProcessor."""
        d = Driver("outer", JoinWindowsSpec.of_time_difference_and_grace(100, 0))
        assert d.pipe((L, 0, "A0", 1), (L, 1, "A1", 2), (L, 0, "A0-0", 3)) == []
        assert d.pipe((R, 1, "a1", 3)) == [(1, "A1+a1", 3)]
        assert d.pipe((by, 2, "dummy", 401)) == [(0, "A0+null", 1), (0, "A0-0+null", 3)]

    def test_right_expired_non_joined_records_are_emitted_by_the_left_processor(self) -> None:
        """KStreamKStreamOuterJoinTest.testRightExpiredNonJoinedRecordsAreEmittedByTheLeftProcessor."""
        d = Driver("outer", JoinWindowsSpec.of_time_difference_with_no_grace(100))
        assert d.pipe((R, 0, "A0", 1), (R, 1, "A1", 2), (R, 0, "A0-0", 3)) == []
        assert d.pipe((L, 1, "a1", 3)) == [(1, "a1+A1", 3)]
        assert d.pipe((L, 2, "dummy", 401)) == [(0, "null+A0", 1), (0, "null+A0-0", 3)]
        assert d.pipe((R, 2, "dummy", 402)) == [(2, "dummy+dummy", 402)]

    def test_min_time_skip_delays_emission(self) -> None:
        """KStreamKStreamJoin.emitNonJoinedOuterRecords (code-derived): the scan leaves
        ``min_time`` at the last record it looked at, so a held record that expires meanwhile
        waits until that later time has expired too (ported as is)."""
        d = Driver("outer", JoinWindowsSpec.of_time_difference_with_no_grace(10))
        assert d.pipe((L, 1, "L1", 39), (L, 2, "L2", 40), (R, 3, "R3", 45), (L, 4, "L4", 48)) == []
        assert d.pipe((R, 9, "x", 50)) == [(1, "L1+null", 39)]  # stops at L4@48 (both sides open)
        assert d.pipe((R, 9, "y", 51)) == []                    # L2@40 expired, but 48 + 10 >= 51
        assert d.pipe((R, 9, "z", 59)) == [(2, "L2+null", 40), (3, "null+R3", 45), (4, "L4+null", 48)]


class TestSpecs:
    def test_join_windows_validation(self) -> None:
        """JoinWindows rejects a negative difference and a negative grace, with units."""
        with pytest.raises(InvalidArgumentError, match=r"'time_difference' must be >= 0 ms \(got -1\)"):
            JoinWindowsSpec.of_time_difference_with_no_grace(-1)
        with pytest.raises(InvalidArgumentError, match=r"'grace' must be >= 0 ms \(got -5\)"):
            JoinWindowsSpec(1, 1, -5)
        assert JoinWindowsSpec(-5, 10, 0).size == 5

    def test_state_round_trips_as_plain_values(self) -> None:
        """A key's join state is plain lists (one state value per key)."""
        state = StreamJoinState(((1, "a"),), ((2, {"x": 1}),), ((1, "left", "a"),))
        assert StreamJoinState.from_plain(state.to_plain()) == state


# --- properties ---------------------------------------------------------------------------------

def pair(left: Any, right: Any) -> tuple[Any, Any]:
    return (left, right)


@st.composite
def join_inputs(draw: Any, *, max_lateness: int | None = None) -> tuple[JoinWindowsSpec, list[tuple[str, Any, Any, int]]]:
    before = draw(st.integers(0, 20))
    after = draw(st.integers(0 if before else 1, 20))
    grace = draw(st.integers(0, 15))
    n = draw(st.integers(0, 25))
    records = []
    stream_time = -1
    for i in range(n):
        side = draw(st.sampled_from([L, R]))
        key = draw(st.one_of(st.sampled_from([0, 1, 2]), st.just(None))) if draw(st.integers(0, 9)) == 0 \
            else draw(st.sampled_from([0, 1, 2]))
        value = None if draw(st.integers(0, 14)) == 0 else f"{side[0]}{i}"
        ts = draw(st.integers(0, 120))
        if max_lateness is not None and key is not None and value is not None:
            ts = max(ts, stream_time - min(grace, max_lateness))
        stream_time = max(stream_time, ts)
        records.append((side, key, value, ts))
    return JoinWindowsSpec(before, after, grace), records


def brute_force_inner(windows: JoinWindowsSpec, records: list[tuple[str, Any, Any, int]]) -> list[Output]:
    """Nested loop: each record joins the earlier other-side records of its key in its window
    (clamped at 0), in (timestamp, arrival) order."""
    out = []
    for i, (side, key, value, ts) in enumerate(records):
        if key is None or value is None:
            continue
        before, after = (windows.before, windows.after) if side == L else (windows.after, windows.before)
        lo, hi = max(0, ts - before), max(0, ts + after)
        earlier = [(t, v) for s, k, v, t in records[:i] if s != side and k == key and v is not None and lo <= t <= hi]
        for t, v in sorted(earlier, key=lambda r: r[0]):
            out.append(Output(key, pair(value, v) if side == L else pair(v, value), max(ts, t)))
    return out


def per_key_operator(spec: StreamJoinSpec, records: list[tuple[str, Any, Any, int]], *, exact_store_time: bool,
                     flush_at: int | None = None) -> list[Output]:
    """A per-key operator: one state per key, `stream_join_operator_step` per record, and (at
    the end) `stream_join_close` on every key as a timer at ``flush_at`` would."""
    states: dict[Any, StreamJoinState] = {}
    store_time = {L: -1, R: -1}
    stream_time = -1
    out: list[Output] = []
    for side, key, value, ts in records:
        stream_time = max(stream_time, ts)
        other = store_time[R if side == L else L] if exact_store_time else None
        step = stream_join_operator_step(spec, states.get(key), side, key, value, ts, stream_time, pair,
                                         other_store_time=other)
        out.extend(step.outputs)
        if key is not None and value is not None:
            states[key] = step.state  # type: ignore[assignment]
            store_time[side] = max(store_time[side], ts)
    if flush_at is not None:
        for key, state in states.items():
            out.extend(stream_join_close(spec, state, key, flush_at, pair).outputs)
    return out


FLUSH = 10**6


def with_flush(records: list[tuple[str, Any, Any, int]]) -> list[tuple[str, Any, Any, int]]:
    """A last record far in the future on a key of its own: every held record expires."""
    return [*records, (L, "flush", "flush", FLUSH)]


def without_flush_key(outputs: list[Output]) -> list[Output]:
    return [o for o in outputs if o.key != "flush"]


class TestProperties:
    @settings(max_examples=300, deadline=None)
    @given(join_inputs())
    def test_inner_join_equals_nested_loop_within_retention(self, case: Any) -> None:
        """With every timestamp inside one retention period (no buffer cut-off applies), the
        inner join is exactly the nested loop over the window, in Kafka's output order."""
        windows, records = case
        records = [(s, k, v, t % max(1, windows.retention)) for s, k, v, t in records]
        spec = StreamJoinSpec("inner", windows)
        assert stream_join_reference_run(records, spec, pair).outputs == brute_force_inner(windows, records)

    @settings(max_examples=300, deadline=None)
    @given(join_inputs())
    def test_per_key_operator_inner_join_is_exact(self, case: Any) -> None:
        """Inner join: the per-key operator (exact store times, as the replay plan computes
        them) forwards exactly the reference run's records in the same order."""
        windows, records = case
        spec = StreamJoinSpec("inner", windows)
        assert per_key_operator(spec, records, exact_store_time=True) == stream_join_reference_run(
            records, spec, pair).outputs

    @settings(max_examples=400, deadline=None)
    @given(join_inputs(max_lateness=10**9), st.sampled_from(["left", "outer"]))
    # Found by hypothesis: a null-key record moves stream time to 115 before the right record at
    # 115; the left record at 119 must still read it (the right store's time is 115, not 119),
    # and the close before it must not drop it from the buffer either.
    @example((JoinWindowsSpec(4, 0, 0), [(L, None, None, 115), (R, 1, "r6", 115), (L, 1, "l11", 119)]), "left")
    def test_per_key_operator_matches_reference_multiset(self, case: Any, kind: str) -> None:
        """Left/outer join, no record later than the grace period: the per-key operator plus
        its close steps produce the same multiset of records as Kafka's order (reference run),
        once a last far-future record has expired every held record."""
        windows, records = case
        spec = StreamJoinSpec(kind, windows)  # type: ignore[arg-type]
        records = with_flush(records)
        expected = without_flush_key(stream_join_reference_run(records, spec, pair).outputs)
        actual = without_flush_key(per_key_operator(spec, records, exact_store_time=True, flush_at=FLUSH))
        assert Counter(map(repr, actual)) == Counter(map(repr, expected))

    @settings(max_examples=200, deadline=None)
    @given(join_inputs(max_lateness=10**9), st.sampled_from(["left", "outer"]))
    def test_per_key_operator_with_stream_time_cutoff_within_retention(self, case: Any, kind: str) -> None:
        """The streaming operator passes stream time as the buffer cut-off time: within one
        retention period (and with the final flush) it still produces Kafka's multiset."""
        windows, records = case
        records = [(s, k, v, t % max(1, windows.retention)) for s, k, v, t in records]
        records = [(s, k, v, max(t, max((r[3] for r in records[:i]), default=0) - windows.grace))
                   for i, (s, k, v, t) in enumerate(records)]
        spec = StreamJoinSpec(kind, windows)  # type: ignore[arg-type]
        records = with_flush(records)
        expected = without_flush_key(stream_join_reference_run(records, spec, pair).outputs)
        actual = without_flush_key(per_key_operator(spec, records, exact_store_time=False, flush_at=FLUSH))
        assert Counter(map(repr, actual)) == Counter(map(repr, expected))

    @settings(max_examples=300, deadline=None)
    @given(join_inputs(max_lateness=10**9))
    def test_inner_subset_of_left_subset_of_outer(self, case: Any) -> None:
        """Matched pairs are the same in all three joins; as multisets inner ⊆ left ⊆ outer
        (no record later than grace, every held record flushed at the end)."""
        windows, records = case
        records = with_flush(records)
        runs = {k: Counter(map(repr, without_flush_key(stream_join_reference_run(
            records, StreamJoinSpec(k, windows), pair).outputs))) for k in ("inner", "left", "outer")}  # type: ignore[arg-type]

        def matched(c: Counter[str]) -> Counter[str]:
            return Counter({r: n for r, n in c.items() if "None" not in r.split("value=")[1].split("timestamp")[0]})

        assert matched(runs["inner"]) == matched(runs["left"]) == matched(runs["outer"])
        assert runs["inner"] <= runs["left"] <= runs["outer"]
