"""The pure-Python session core on its own (no Spark): unit and property tests."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from streamsdsl.semantics.aggregation import AggFunctions
from streamsdsl.semantics.changes import ChangeBuffer
from streamsdsl.semantics.reference import reference_run
from streamsdsl.semantics.session import SessionWindowing
from streamsdsl.semantics.windowing import KeyState, WindowAgg, close_step, record_step

COUNT = AggFunctions(lambda: 0, lambda k, v, a: a + 1, lambda k, a, b: a + b)


def S(start: int, end: int, agg: object) -> WindowAgg:  # noqa: N802
    """A stored session (forwarded with ts = its end)."""
    return WindowAgg(start, end, agg, end)


class TestSessionStep:
    def test_bridge_merges_in_end_start_order(self) -> None:
        """A bridging record deletes both sessions (in (end, start) order) and puts the union."""
        step = SessionWindowing(5, 100).step((S(10, 10, 1), S(0, 0, 1)), "k", "v", 5, 10, COUNT)
        assert step.deletes == (S(0, 0, 1), S(10, 10, 1))
        assert step.puts == (S(0, 10, 3),)
        assert step.windows == (S(0, 10, 3),)

    def test_same_window_no_delete(self) -> None:
        """A [ts, ts] result replaces the same window without a delete."""
        step = SessionWindowing(5, 0).step((S(7, 7, 1),), "k", "v", 7, 7, COUNT)
        assert step.deletes == () and step.puts == (S(7, 7, 2),)

    def test_late_drop_leaves_state(self) -> None:
        """A merged window ending before close time drops the record and changes nothing."""
        sessions = (S(20, 20, 1),)
        step = SessionWindowing(5, 0).step(sessions, "k", "v", 3, 20, COUNT)
        assert step.dropped == 1 and step.windows == sessions and step.puts == ()

    def test_close_step_splits_in_end_start_order(self) -> None:
        """close_step returns the closed sessions in (end, start) order and keeps the open one."""
        state = KeyState((S(0, 3, 1), S(1, 9, 1), S(12, 12, 1)))
        close = close_step(SessionWindowing(5, 2), state, 19)
        assert close.closed == (S(0, 3, 1), S(1, 9, 1)) and close.state.windows == (S(12, 12, 1),)


class TestChangeBuffer:
    def test_cache_flush_rules(self) -> None:
        """Last value per key, deletes only for flushed keys, last-write order."""
        buf = ChangeBuffer(flushed=["old"])
        buf.put("x", 1)
        buf.delete("old")
        buf.put("x", 2)
        buf.put("new", 1)
        buf.delete("new")
        assert buf.flush() == [("old", None), ("x", 2)]
        buf.delete("x")
        assert buf.flush() == [("x", None)]


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.tuples(st.sampled_from("abc"), st.integers(0, 100)), max_size=40),
    st.integers(1, 15),
    st.integers(0, 15),
)
def test_sessions_never_overlap_within_gap(records: list[tuple[str, int]], gap: int, grace: int) -> None:
    """After any input, a key's open sessions are separated by more than the gap, and every
    accepted record is counted in exactly one session (open, or closed and final)."""
    windowing = SessionWindowing(gap, grace)
    state: dict[str, KeyState] = {}
    final_total = 0
    accepted = 0
    stream_time = -1
    for k, ts in records:
        stream_time = max(stream_time, ts)
        step = record_step(windowing, state.get(k, KeyState()), k, None, ts, stream_time, COUNT)
        accepted += 1 - step.dropped
        state[k] = step.state
        final_total += sum(s.agg for s in step.closed)
        for key in state:
            if key != k:
                close = close_step(windowing, state[key], stream_time)
                state[key] = close.state
                final_total += sum(s.agg for s in close.closed)
        for key in state:
            ordered = sorted(state[key].windows, key=lambda s: s.start)
            for s1, s2 in zip(ordered, ordered[1:]):
                assert s2.start - s1.end > gap
    total = sum(s.agg for ks in state.values() for s in ks.windows)
    assert total + final_total == accepted


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from("ab"), st.integers(0, 50)), max_size=30), st.integers(1, 10), st.integers(0, 10))
def test_on_close_emits_each_session_once_and_final_value_matches_update_stream(
    records: list[tuple[str, int]], gap: int, grace: int
) -> None:
    """Each on-close session is emitted once, and equals the last update-mode value of that
    window (so the two strategies agree on every session that closes)."""
    inputs = [(k, "v", ts) for k, ts in records]
    windowing = SessionWindowing(gap, grace)
    on_close = reference_run(inputs, windowing, COUNT, emit_on_close=True).outputs
    updates = reference_run(inputs, windowing, COUNT).outputs
    windows = [(o.key, o.start, o.end) for o in on_close]
    assert len(windows) == len(set(windows))
    last: dict[tuple[str, int | None, int | None], object] = {}
    for o in updates:
        last[(o.key, o.start, o.end)] = o.value
    for o in on_close:
        assert last[(o.key, o.start, o.end)] == o.value
