"""suppress(until_window_closes / until_time_limit): Kafka's SuppressScenarioTest scenarios fed
with the windowed counts' raw output (as the test asserts it), and per-key properties."""

from __future__ import annotations

from typing import Any

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamsdsl.semantics.aggregation import AggFunctions
from streamsdsl.semantics.changes import ChangeBuffer
from streamsdsl.semantics.reference import reference_run
from streamsdsl.semantics.session import SessionWindowing
from streamsdsl.semantics.sliding import SlidingWindowing
from streamsdsl.semantics.suppress import FinalResultsRelease, FinalResultsWindowing, SuppressBufferFullError, Suppression, SuppressState
from streamsdsl.semantics.suppress import TimeLimitBuffer, final_results_release, suppress_close, time_limit_release
from streamsdsl.semantics.suppress import suppress_reference_run, suppress_step, suppress_timer_threshold
from streamsdsl.semantics.tables import Change
from streamsdsl.semantics.timewindow import TimeWindowing
from streamsdsl.semantics.windowing import KeyState, WindowAgg, advance_stream_time, record_step

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


def _folded_run(inner: Any, delay: int, records: list[tuple[str, Any, int]],
                fns: AggFunctions, *, cached: bool = False) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """One aggregation operator with suppress folded in (`FinalResultsWindowing`) over
    ``(key, value, ts)`` records, placed as the test driver's plan places them: a released
    window with its threshold goes out with the first record whose stream time passes it, in
    (end, key) order; an immediate release with its own record, after those. Also returns the
    aggregation's changelog as Kafka forwards it to a suppress node without a cache (per record:
    tombstones of deleted windows with ts = their end, then the puts). ``cached``: Kafka's
    record cache between them, flushed after each record (each window's last write once, in
    the order last written; no tombstone of a window that was not in the store)."""
    windowing = FinalResultsWindowing(inner, delay, cached=cached)
    times: list[int] = []
    stream_time = -1
    for _, value, ts in records:
        stream_time = advance_stream_time(windowing, stream_time, ts, value)
        times.append(stream_time)
    placed: dict[int, list[tuple[Any, ...]]] = {}

    def place(key: str, w: WindowAgg) -> None:
        at = next((j for j, t in enumerate(times) if t > windowing.close_threshold(w)), None)
        if at is not None:
            placed.setdefault(at, []).append((1, w.end, key, w.start, w.agg, w.ts))

    states: dict[str, KeyState] = {}
    changelog: list[tuple[Any, ...]] = []
    before_time = -1
    for i, (key, value, ts) in enumerate(records):
        before = states.get(key, KeyState())
        step = record_step(windowing, before, key, value, ts, times[i], fns)
        if cached:
            buffer = ChangeBuffer(w.bounds for w in before.windows)
            step.write_to(buffer)
            changelog += [(key, b, Change(None if w is None else w.agg), b[1] if w is None else w.ts)
                          for b, w in buffer.flush()]
        else:
            changelog += [(key, w.bounds, Change(None), w.end) for w in step.deletes]
            changelog += [(key, w.bounds, Change(w.agg), w.ts) for w in step.puts]
        release = final_results_release(windowing, before, step, before_time, times[i])
        for w in release.passed:
            place(key, w)
        for n, w in enumerate(release.immediate):
            placed.setdefault(i, []).append((2, n, key, w.start, w.agg, w.ts))
        states[key] = step.state
        before_time = times[i]
    for key, state in states.items():
        for w in state.open_windows():
            place(key, w)
    out = [(key, start, agg, ts) for i in sorted(placed) for _, _, key, start, agg, ts in sorted(placed[i])]
    return out, changelog


def _concat(k: str, v: str, a: str) -> str:
    return a + v


CONCAT = AggFunctions(lambda: "", _concat, lambda k, a, b: a + "|" + b)
folded_records = st.lists(st.tuples(st.sampled_from(["a", "b", "c"]), st.integers(0, 40)), min_size=1, max_size=16)


class TestFinalResultsFold:
    """The aggregation with suppress(until_window_closes) folded in releases exactly what Kafka's
    suppress node releases from the aggregation's changelog: the same records, in the same
    order (also between keys), under the same input record."""

    @settings(max_examples=400, deadline=None)
    @given(folded_records, st.integers(1, 8), st.integers(0, 6), st.booleans())
    def test_sessions(self, rows: list[tuple[str, int]], gap: int, grace: int, cached: bool) -> None:
        records = [(k, str(i % 10), ts) for i, (k, ts) in enumerate(rows)]
        out, changelog = _folded_run(SessionWindowing(gap, grace, cached=cached), gap + grace, records, CONCAT,
                                     cached=cached)
        expected = suppress_reference_run(changelog, Suppression.until_window_closes(grace, session_gap=gap))
        assert out == [(o.key, o.window[0], o.change.new, o.timestamp) for o in expected]  # type: ignore[index]

    @settings(max_examples=400, deadline=None)
    @given(folded_records, st.integers(1, 8), st.integers(0, 6), st.booleans())
    def test_sliding_windows(self, rows: list[tuple[str, int]], difference: int, grace: int, cached: bool) -> None:
        records = [(k, str(i % 10), ts) for i, (k, ts) in enumerate(rows)]
        out, changelog = _folded_run(SlidingWindowing(difference, grace), grace, records, CONCAT, cached=cached)
        expected = suppress_reference_run(changelog, Suppression.until_window_closes(grace))
        assert out == [(o.key, o.window[0], o.change.new, o.timestamp) for o in expected]  # type: ignore[index]

    def test_released_session_merged_at_its_threshold(self) -> None:
        """Gap 5, grace 0: b@5 takes stream time to 5 and releases [a@0/0]; a@5 then still
        merges it (end 0 is not < close time 0) into [a@0/5], released again at 10. Had a@5
        come first, [a@0/0] would never be released (its tombstone replaces it)."""
        first = _folded_run(SessionWindowing(5, 0), 5, [("a", "1", 0), ("b", "2", 5), ("a", "3", 5),
                                                         ("c", "4", 10)], CONCAT)[0]
        assert first == [("a", 0, "1", 0), ("a", 0, "|1" + "3", 5), ("b", 5, "2", 5)]
        second = _folded_run(SessionWindowing(5, 0), 5, [("a", "1", 0), ("a", "3", 5), ("b", "2", 5),
                                                          ("c", "4", 10)], CONCAT)[0]
        assert second == [("a", 0, "|13", 5), ("b", 5, "2", 5)]

    def test_sliding_window_released_then_written_again(self) -> None:
        """Difference 5, grace 0: a@16 raises stream time with its first write ([12,17]); the
        suppress node then releases [11,16] with its old value, and a@16's next write releases
        it again at once with the new one."""
        out = _folded_run(SlidingWindowing(5, 0), 0, [("a", "1", 10), ("a", "2", 11), ("a", "3", 12),
                                                       ("a", "4", 16)], CONCAT)[0]
        assert [(s, agg) for _, s, agg, _ in out if s == 11] == [(11, "23"), (11, "234")]

    def test_sliding_window_written_twice_by_one_record(self) -> None:
        """Oracle case 67bb539ac621 (difference 5, grace 0, count): the record at 26 writes
        [21,26] twice, as the previous record's right window and as its own left window. Without
        the record cache the suppress node receives both writes and releases [21,26] twice;
        with it (Kafka's default), the cache's flush forwards the window once, released once."""
        count = AggFunctions(lambda: 0, lambda k, v, a: a + 1)
        records = [("all", "ab", 19), ("all", "ab", 20), ("all", "yy", 26)]
        uncached = _folded_run(SlidingWindowing(5, 0), 0, records, count)[0]
        assert uncached == [("all", 14, 1, 19), ("all", 15, 2, 20), ("all", 20, 1, 20), ("all", 21, 1, 26),
                            ("all", 21, 1, 26)]
        cached = _folded_run(SlidingWindowing(5, 0), 0, records, count, cached=True)[0]
        assert cached == [("all", 14, 1, 19), ("all", 15, 2, 20), ("all", 20, 1, 20), ("all", 21, 1, 26)]

    def test_uncached_session_store_time_with_suppress(self) -> None:
        """Oracle case ab493706a6e2 (gap 2, grace 0, no cache, suppress folded in): key yy has
        [28, 28]; (yy, 30) comes after another key's record at 30 raised the store's time to 30.
        Kafka's session store then hides [28, 28] (its end is below 30 - 2 - 0 + 1) and the
        record starts [30, 30], as without the suppress; with the store's time still at 28 it
        merges into [28, 30]. The folded operator reads the store's time as the aggregation does."""
        concat = AggFunctions(lambda: "", lambda k, v, a: a + v, lambda k, a, b: a + "|" + b)
        windowing = FinalResultsWindowing(SessionWindowing(2, 0, cached=False), 2, cached=False)
        first = record_step(windowing, KeyState(), "yy", "b", 28, 28, concat, stream_time_before=-1)
        assert first.puts == (WindowAgg(28, 28, "b", 28),)
        hidden = record_step(windowing, first.state, "yy", "a", 30, 30, concat, stream_time_before=30)
        assert (hidden.puts, hidden.deletes) == ((WindowAgg(30, 30, "a", 30),), ())
        seen = record_step(windowing, first.state, "yy", "a", 30, 30, concat, stream_time_before=28)
        assert (seen.puts, seen.deletes) == ((WindowAgg(28, 30, "|ba", 30),), (WindowAgg(28, 28, "b", 28),))

    def test_one_input_records_writes_released_once(self) -> None:
        """Oracle case e5a630e8b794 (difference 5, grace 0, reduce): one input record 'x y' at
        45 reaches the aggregation as three records ('x', ' ', 'y': a flat_map_values before it).
        With the cache, the suppress node receives [40,45] once, at the input record's flush,
        with its last value: `final_results_release` of the three steps together."""
        reduce = AggFunctions(lambda: None, lambda k, v, a: v if a is None else a + v)
        windowing = FinalResultsWindowing(SlidingWindowing(5, 0), 0)
        state, steps = KeyState(), []
        for value in ("x", " ", "y"):
            step = record_step(windowing, state, "b", value, 45, 45, reduce)
            steps.append(step)
            state = step.state
        release = final_results_release(windowing, KeyState(), steps, -1, 45)
        assert release == FinalResultsRelease(passed=(WindowAgg(40, 45, "x y", 45),))
        uncached = attrs.evolve(windowing, cached=False)
        first = final_results_release(uncached, KeyState(), steps[0], -1, 45)
        assert first == FinalResultsRelease(passed=(WindowAgg(40, 45, "x", 45),))
        assert final_results_release(uncached, steps[0].state, steps[1], 45, 45) == \
            FinalResultsRelease(immediate=(WindowAgg(40, 45, "x ", 45),))


class TestTimeLimitOperator:
    """The keyed until_time_limit operator (`time_limit_release`, releases placed as the test
    driver's plan places them) forwards exactly what Kafka's suppress node forwards, in order."""

    @settings(max_examples=400, deadline=None)
    @given(st.lists(st.tuples(st.sampled_from(["a", "b", "c"]), st.one_of(st.none(), st.integers(0, 9)),
                              st.integers(0, 30)), min_size=1, max_size=16), st.integers(0, 8))
    def test_time_limit(self, rows: list[tuple[str, Any, int]], limit: int) -> None:
        buffer = TimeLimitBuffer(limit)
        times, stream_time = [], -1
        for _, _, ts in rows:
            stream_time = max(stream_time, ts)
            times.append(stream_time)
        placed: dict[int, list[tuple[Any, ...]]] = {}

        def place(key: str, w: WindowAgg) -> None:
            at = next((j for j, t in enumerate(times) if t > buffer.close_threshold(w)), None)
            if at is not None:
                placed.setdefault(at, []).append((1, w.end, key, w.agg, w.ts))

        states: dict[str, KeyState] = {}
        for i, (key, value, ts) in enumerate(rows):
            states[key], release = time_limit_release(buffer, states.get(key, KeyState()), value, ts,
                                                      times[i - 1] if i else -1, times[i])
            for w in release.passed:
                place(key, w)
            for n, w in enumerate(release.immediate):
                placed.setdefault(i, []).append((2, n, key, w.agg, w.ts))
        for key, state in states.items():
            for w in state.windows:
                place(key, w)
        out = [(key, agg, ts) for i in sorted(placed) for _, _, key, agg, ts in sorted(placed[i])]
        expected = suppress_reference_run([(k, None, Change(v), ts) for k, v, ts in rows],
                                          Suppression.until_time_limit(limit))
        assert out == [(o.key, o.change.new, o.timestamp) for o in expected]
