"""suppress(until_window_closes / until_time_limit): Kafka's SuppressScenarioTest scenarios fed
with the windowed counts' raw output (as the test asserts it), and per-key properties."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamsdsl.semantics.aggregation import AggFunctions
from streamsdsl.semantics.reference import reference_run
from streamsdsl.semantics.session import SessionWindowing
from streamsdsl.semantics.suppress import SuppressBufferFullError, Suppression, SuppressState, suppress_close
from streamsdsl.semantics.suppress import suppress_reference_run, suppress_step, suppress_timer_threshold
from streamsdsl.semantics.tables import Change
from streamsdsl.semantics.timewindow import TimeWindowing

COUNT = AggFunctions(lambda: 0, lambda k, v, a: a + 1, lambda k, a, b: a + b)


def raw(rows: list[tuple[str, int, int, Any, int]]) -> list[tuple[Any, tuple[int, int], Change, int]]:
    """``[key@start/end]`` rows of output-raw as suppress input."""
    return [(k, (s, e), Change(v), ts) for k, s, e, v, ts in rows]


def shown(out: list[Any]) -> list[tuple[str, Any, int]]:
    return [(f"[{o.key}@{o.window[0]}/{o.window[1]}]", o.change.new, o.timestamp) for o in out]


class TestUntilWindowCloses:
    def test_final_results_for_time_windows_with_large_jump(self) -> None:
        """SuppressScenarioTest.shouldSupportFinalResultsForTimeWindowsWithLargeJump
        (TimeWindows.ofSizeAndGrace(2, 2)): raw output in, final results out."""
        updates = raw([("k1", 0, 2, 1, 0), ("k1", 0, 2, 2, 1), ("k1", 2, 4, 1, 2), ("k1", 0, 2, 3, 1),
                       ("k1", 2, 4, 2, 3), ("k1", 0, 2, 4, 1), ("k1", 4, 6, 1, 4), ("k1", 30, 32, 1, 30)])
        out = suppress_reference_run(updates, Suppression.until_window_closes(grace=2))
        assert shown(out) == [("[k1@0/2]", 4, 1), ("[k1@2/4]", 2, 3), ("[k1@4/6]", 1, 4)]

    def test_final_results_for_time_windows_end_to_end(self) -> None:
        """The same scenario through the windowed count's reference run (raw output first)."""
        inputs = [("k1", "v1", t) for t in (0, 1, 2, 0, 3, 0, 4, 0, 30)]
        counts = reference_run(inputs, TimeWindowing(size=2, advance=2, grace=2), COUNT).outputs
        assert [(f"[{o.key}@{o.start}/{o.end}]", o.value, o.timestamp) for o in counts] == [
            ("[k1@0/2]", 1, 0), ("[k1@0/2]", 2, 1), ("[k1@2/4]", 1, 2), ("[k1@0/2]", 3, 1), ("[k1@2/4]", 2, 3),
            ("[k1@0/2]", 4, 1), ("[k1@4/6]", 1, 4), ("[k1@30/32]", 1, 30)]
        out = suppress_reference_run([(o.key, (o.start, o.end), Change(o.value), o.timestamp) for o in counts],
                                     Suppression.until_window_closes(grace=2))
        assert shown(out) == [("[k1@0/2]", 4, 1), ("[k1@2/4]", 2, 3), ("[k1@4/6]", 1, 4)]

    def test_final_results_for_session_windows(self) -> None:
        """SuppressScenarioTest.shouldSupportFinalResultsForSessionWindows
        (ofInactivityGapWithNoGrace(5), caching disabled): the raw output as the test asserts
        it in; tombstones of merged sessions are dropped, one final result per session."""
        updates = raw([("k1", 0, 0, 1, 0), ("k1", 0, 0, None, 0), ("k1", 0, 5, 2, 5), ("k1", 0, 5, None, 5),
                       ("k1", 0, 5, 3, 5), ("k2", 11, 11, 1, 11), ("k1", 30, 30, 1, 30)])
        out = suppress_reference_run(updates, Suppression.until_window_closes(grace=0, session_gap=5))
        assert shown(out) == [("[k1@0/5]", 3, 5), ("[k2@11/11]", 1, 11)]

    def test_session_windows_end_to_end(self) -> None:
        """The same input through the session count's reference run (record cache flushed per
        record: the tombstone + update of one window collapse) gives the same final results."""
        inputs = [("k1", "v1", 0), ("k1", "v1", 5), ("k1", "v1", 1), ("k2", "v1", 11), ("k1", "v1", 5),
                  ("k1", "v1", 30)]
        counts = reference_run(inputs, SessionWindowing(gap=5, grace=0), COUNT).outputs
        out = suppress_reference_run([(o.key, (o.start, o.end), Change(o.value), o.timestamp) for o in counts],
                                     Suppression.until_window_closes(grace=0, session_gap=5))
        assert shown(out) == [("[k1@0/5]", 3, 5), ("[k2@11/11]", 1, 11)]


class TestUntilTimeLimit:
    def test_work_before_join_right_eviction_order(self) -> None:
        """SuppressScenarioTest.shouldWorkBeforeJoinRight (first part): untilTimeLimit(10):
        B@0 and A@0 are released by the tick at 10, ordered by (buffer time, key): A then B."""
        spec = Suppression.until_time_limit(10)
        out = suppress_reference_run([("B", None, Change("1"), 0), ("A", None, Change("1"), 0),
                                      ("tick", None, Change("tick"), 10)], spec)
        assert [(o.key, o.change.new, o.timestamp) for o in out] == [("A", "1", 0), ("B", "1", 0)]

    def test_buffer_time_is_the_first_record_and_tombstones_are_forwarded(self) -> None:
        """InMemoryTimeOrderedKeyValueChangeBuffer: a later update keeps the key's first buffer
        time but carries the latest value and timestamp; until_time_limit forwards tombstones."""
        out = suppress_reference_run([("A", None, Change("1"), 0), ("A", None, Change(None, "1"), 8),
                                      ("x", None, Change("x"), 10)], Suppression.until_time_limit(10))
        assert [(o.key, o.change.new, o.timestamp) for o in out] == [("A", None, 8)]

    def test_emit_early_when_full_and_shut_down_when_full(self) -> None:
        """maxRecords: emit early in (buffer time, key) order, or fail (shutDownWhenFull)."""
        recs = [("A", None, Change(1), 0), ("B", None, Change(2), 1), ("C", None, Change(3), 2)]
        early = suppress_reference_run(recs, Suppression.until_time_limit(100, max_records=2))
        assert [(o.key, o.timestamp) for o in early] == [("A", 0)]
        with pytest.raises(SuppressBufferFullError, match="max capacity"):
            suppress_reference_run(recs, Suppression.until_time_limit(100, max_records=2, shut_down_when_full=True))


class TestPerKey:
    @settings(max_examples=300, deadline=None)
    @given(st.lists(st.tuples(st.sampled_from(["a", "b", "c"]), st.integers(0, 5), st.one_of(st.none(), st.integers()),
                              st.integers(0, 60)), max_size=30), st.integers(0, 10))
    def test_per_key_close_releases_the_reference_records(self, rows: list[tuple[str, int, Any, int]],
                                                          grace: int) -> None:
        """A per-key operator (suppress_step, then suppress_close at the shared stream time)
        releases the same records, each under the same record, as the reference; only the
        order between keys released by one record may differ (it follows the key order there)."""
        spec = Suppression.until_window_closes(grace=grace)
        updates = [(k, (w * 10, w * 10 + 10), Change(v), ts) for k, w, v, ts in rows]
        expected = suppress_reference_run(updates, spec)
        states: dict[str, SuppressState] = {}
        stream_time = -1
        actual = []
        for key, window, change, ts in updates:
            stream_time = max(stream_time, ts)
            states[key] = suppress_step(spec, states.get(key), window, change, ts)
            released = []
            for k in sorted(states):
                states[k], out = suppress_close(spec, states[k], k, stream_time)
                released += out
            released.sort(key=lambda o: (o.window[1], o.key, o.window[0]))
            actual += released
        assert actual == expected
        for k, state in states.items():
            threshold = suppress_timer_threshold(spec, state)
            assert threshold is None or threshold >= stream_time
            assert SuppressState.from_plain(state.to_plain()) == state
