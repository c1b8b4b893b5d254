"""The pure-Python session core on its own (no Spark): unit and property tests."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from streamsdsl import ir
from streamsdsl.semantics.aggregation import agg_functions
from streamsdsl.semantics.changes import ChangeBuffer
from streamsdsl.semantics.reference import session_aggregate_reference
from streamsdsl.semantics.session import Session, closed_sessions, session_step

COUNT = agg_functions(ir.CountAgg())


class TestSessionStep:
    def test_bridge_merges_in_end_start_order(self) -> None:
        """A bridging record deletes both sessions (in (end, start) order) and puts the union."""
        sessions = (Session(0, 0, 1), Session(10, 10, 1))
        step = session_step(sessions, "k", "v", 5, 10, 5, 100, COUNT)
        assert step.deleted == (Session(0, 0, 1), Session(10, 10, 1))
        assert step.put == Session(10, 0, 3)
        assert step.sessions == (Session(10, 0, 3),)

    def test_same_window_no_delete(self) -> None:
        """A [ts, ts] result replaces the same window without a delete."""
        step = session_step((Session(7, 7, 1),), "k", "v", 7, 7, 5, 0, COUNT)
        assert step.deleted == () and step.put == Session(7, 7, 2)

    def test_late_drop_leaves_state(self) -> None:
        """A merged window ending before close time drops the record and changes nothing."""
        sessions = (Session(20, 20, 1),)
        step = session_step(sessions, "k", "v", 3, 20, 5, 0, COUNT)
        assert step.dropped == "late" and step.sessions == sessions and step.put is None

    def test_closed_sessions_split(self) -> None:
        """closed_sessions returns (closed in (end, start) order, still open)."""
        closed, still_open = closed_sessions([Session(9, 1, 1), Session(3, 0, 1), Session(12, 12, 1)], 19, 5, 2)
        assert closed == [Session(3, 0, 1), Session(9, 1, 1)] and still_open == [Session(12, 12, 1)]


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
    state: dict[str, list[Session]] = {}
    final_total = 0
    accepted = 0
    stream_time = -1
    for k, ts in records:
        stream_time = max(stream_time, ts)
        step = session_step(state.get(k, []), k, None, ts, stream_time, gap, grace, COUNT)
        if not step.dropped:
            accepted += 1
            state[k] = list(step.sessions)
        for key in state:
            closed, state[key] = closed_sessions(state[key], stream_time, gap, grace)
            final_total += sum(s.agg for s in closed)
        for key in state:
            ordered = sorted(state[key], key=lambda s: s.start)
            for s1, s2 in zip(ordered, ordered[1:]):
                assert s2.start - s1.end > gap
    total = sum(s.agg for ss in state.values() for s in ss)
    assert total + final_total == accepted


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from("ab"), st.integers(0, 50)), max_size=30), st.integers(1, 10), st.integers(0, 10))
def test_on_close_emits_each_session_once_and_final_value_matches_update_stream(
    records: list[tuple[str, int]], gap: int, grace: int
) -> None:
    """Each on-close session is emitted once, and equals the last update-mode value of that
    window (so the two strategies agree on every session that closes)."""
    inputs = [(k, "v", ts) for k, ts in records]
    on_close = session_aggregate_reference(inputs, gap, grace, COUNT, emit_on_close=True).outputs
    updates = session_aggregate_reference(inputs, gap, grace, COUNT).outputs
    windows = [(o.key, o.start, o.end) for o in on_close]
    assert len(windows) == len(set(windows))
    last: dict[tuple[str, int | None, int | None], object] = {}
    for o in updates:
        last[(o.key, o.start, o.end)] = o.value
    for o in on_close:
        assert last[(o.key, o.start, o.end)] == o.value
