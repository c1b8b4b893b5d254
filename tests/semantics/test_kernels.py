"""The aggregation kernel's record cache over one input record (`InputRecordCache`): Kafka's
TopologyTestDriver flushes the cache once per record its task processes, so several records
that one input record sends to an aggregation forward each window's last value once; and a
key's records of a micro-batch folded together (`AggregateKernel.process_batch`) as they are
applied one by one."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamsdsl.semantics.aggregation import AggFunctions
from streamsdsl.semantics.kernels import AggregateKernel, FlushPolicy, InputRecordCache, Out
from streamsdsl.semantics.session import SessionWindowing
from streamsdsl.semantics.sliding import SlidingWindowing
from streamsdsl.semantics.timewindow import TimeWindowing, window_starts
from streamsdsl.semantics.unwindowed import Unwindowed
from streamsdsl.semantics.windowing import FoldFailed

COUNT = AggFunctions(lambda: 0, lambda k, v, a: a + 1, lambda k, a, b: a + b)


def _input_record(kernel: AggregateKernel, records: list[tuple[Any, int]], context: Any = "h") -> list[tuple[Out, Any]]:
    cache = InputRecordCache()
    for key, ts in records:
        assert kernel.process(key, "v", ts, cache=cache, context=context).outputs == ()
    return kernel.flush_cache(cache)


class TestInputRecordCache:
    def test_last_value_per_window_in_last_write_order_across_keys(self) -> None:
        """Writes a, b, a of one input record: b's count, then a's last count (a was written last)."""
        kernel = AggregateKernel(Unwindowed(), COUNT)
        assert _input_record(kernel, [("a", 1), ("b", 2), ("a", 3)]) == [
            (Out("b", None, None, 1, 2), "h"), (Out("a", None, None, 2, 3), "h")]
        assert _input_record(kernel, [("a", 4)], "i") == [(Out("a", None, None, 3, 4), "i")]

    def test_hopping_windows_each_once(self) -> None:
        """Three records at 7 into hopping windows [0, 10) and [5, 15): each window once, with 3."""
        kernel = AggregateKernel(TimeWindowing(size=10, advance=5, grace=0), COUNT)
        assert [o for o, _ in _input_record(kernel, [("k", 7)] * 3)] == [Out("k", 0, 10, 3, 7), Out("k", 5, 15, 3, 7)]

    def test_session_merged_within_the_record_leaves_no_tombstone(self) -> None:
        """Sessions [0, 0] and [4, 4] written and merged into [0, 4] by a record at 2 within one
        input record: only [0, 4] is forwarded (the others never reached the store); a session
        forwarded before and merged away later gets its tombstone."""
        kernel = AggregateKernel(SessionWindowing(gap=3, grace=10), COUNT)
        assert [o for o, _ in _input_record(kernel, [("k", 0), ("k", 4), ("k", 2)])] == [Out("k", 0, 4, 3, 4)]
        assert [o for o, _ in _input_record(kernel, [("k", 6), ("k", 7)])] == [
            Out("k", 0, 4, None, 4), Out("k", 0, 7, 5, 7)]

    def test_no_cache_and_on_close_forward_at_once(self) -> None:
        """Without a cache (statestore.cache.max.bytes = 0) every write is forwarded by the record
        that made it; the input record's cache stays empty."""
        kernel = AggregateKernel(Unwindowed(), COUNT, flush=FlushPolicy.EVERY_WRITE)
        cache = InputRecordCache()
        assert [kernel.process("a", "v", t, cache=cache).outputs for t in (1, 2)] == [
            (Out("a", None, None, 1, 1),), (Out("a", None, None, 2, 2),)]
        assert kernel.flush_cache(cache) == []


class TestSessionsWithoutTheCache:
    """Kafka's uncached session store (emit on close, or statestore.cache.max.bytes 0) hides a
    session once ``end < store time - gap - grace + 1``, the store time being the largest session
    end written before the record; the record cache still holds it."""

    def test_a_session_ending_at_the_close_time_is_hidden_once_the_store_time_is_there(self) -> None:
        """Gap 2, grace 0, emit on close: z at 17, a at 19 (store time 19), z at 19: [z 17, 17]
        ends at the close time 17 and is hidden, so z at 19 starts [19, 19]; [17, 17] is emitted
        on close when stream time passes 19. With the cache the record merges into [17, 19]."""
        def run(cached: bool) -> list[tuple[Any, ...]]:
            kernel = AggregateKernel(SessionWindowing(gap=2, grace=0, cached=cached), COUNT, emit_on_close=not cached)
            out = []
            for key, ts in (("z", 17), ("a", 19), ("z", 19), ("b", 22)):
                out += [(o.key, o.start, o.end, o.value) for o in kernel.process(key, "v", ts).outputs]
            return out

        assert run(cached=False) == [("z", 17, 17, 1), ("a", 19, 19, 1), ("z", 19, 19, 1)]
        assert run(cached=True) == [("z", 17, 17, 1), ("a", 19, 19, 1), ("z", 17, 17, None), ("z", 17, 19, 2),
                                    ("b", 22, 22, 1)]

    def test_a_session_started_again_with_the_bounds_of_a_hidden_one_replaces_it(self) -> None:
        """Oracle case 78ba5d55ed19: gap 2, grace 5, emit on close: c at 12, then c at 5 twice
        (store time 12 hides [5, 5] from the second: 5 < 12 - 7 + 1), then c at 33. The second
        record's [5, 5] overwrites the first in Kafka's store (its key is key, end and start):
        one [5, 5] is emitted on close, not two."""
        kernel = AggregateKernel(SessionWindowing(gap=2, grace=5, cached=False), COUNT, emit_on_close=True)
        out = [(o.start, o.end, o.value) for ts in (12, 5, 5, 33) for o in kernel.process("c", "v", ts).outputs]
        assert out == [(5, 5, 1), (12, 12, 1)]

    def test_the_record_that_moves_the_store_time_still_finds_the_session(self) -> None:
        """Gap 10, grace 0, no cache: a at 0 then a at 10: the store time before the second
        record is 0, so [0, 0] (ending at the new close time 0) is still found and merged."""
        kernel = AggregateKernel(SessionWindowing(gap=10, grace=0, cached=False), COUNT, flush=FlushPolicy.EVERY_WRITE)
        out = [(o.start, o.end, o.value) for ts in (0, 10) for o in kernel.process("a", "v", ts).outputs]
        assert out == [(0, 0, 1), (0, 0, None), (0, 10, 2)]


class TestCogroupStreamTimePerInput:
    """A cogroup's inputs each keep their own stream time (Kafka's one aggregate processor per
    input) over one store and one record cache: with the cache, a time window leaves the state
    only once every input's stream time has passed its end + grace, so a record on time for its
    own input still finds the window (Kafka's cache still returns it)."""

    def test_a_window_another_input_closed_keeps_its_aggregate(self) -> None:
        """Oracle case 197bb19b1746: hopping windows of 5 ms advancing by 2, grace 0, each input
        adds its value's length. "other" writes "yy" at 45 ([42, 47), [44, 49): 2), then "x" at 53
        (its stream time closes both); "in" (stream time 47) writes None at 47: [44, 49) is open
        for "in" and keeps its 2 (Kafka's store still holds it); [46, 51) starts from 0."""
        add_length = AggFunctions(lambda: 0, lambda k, v, a: a + len(v or ""))
        kernel = AggregateKernel(TimeWindowing(size=5, advance=2, grace=0), [add_length, add_length],
                                 per_input_time=True)
        out = [(o.start, o.end, o.value, o.timestamp) for source, value, ts in ((1, "yy", 45), (1, "x", 53), (0, None, 47))
               for o in kernel.process("b", value, ts, source).outputs]
        assert out == [(42, 47, 2, 45), (44, 49, 2, 45), (50, 55, 1, 53), (52, 57, 1, 53), (44, 49, 2, 47),
                       (46, 51, 0, 47)]
        assert kernel.stream_times == [47, 53]
        assert [w.bounds for w in kernel.states["b"].windows] == [(44, 49), (46, 51), (50, 55), (52, 57)]

    def test_without_the_cache_the_store_hides_it(self) -> None:
        """The same records without the record cache (statestore.cache.max.bytes 0): Kafka's
        store hides [44, 49) once its time (the fastest input's) is past the window's retention,
        so "in"'s record starts it again from the initializer, as it does here."""
        add_length = AggFunctions(lambda: 0, lambda k, v, a: a + len(v or ""))
        kernel = AggregateKernel(TimeWindowing(size=5, advance=2, grace=0), [add_length, add_length],
                                 per_input_time=True, flush=FlushPolicy.EVERY_WRITE)
        out = [(o.start, o.value) for source, value, ts in ((1, "yy", 45), (1, "x", 53), (0, None, 47))
               for o in kernel.process("b", value, ts, source).outputs]
        assert out[-2:] == [(44, 0), (46, 0)]

    @pytest.mark.parametrize(("grace", "first"), [(5, (0, 1, 7)), (6, (0, 2, 9))])
    def test_without_the_cache_the_store_time_is_the_greatest_window_start_put(
            self, grace: int, first: tuple[int, int, int]) -> None:
        """Oracle case 2851cd2fc7c6: hopping windows of 10 ms advancing by 3. "other" counts a
        at 9; "in" counts c at 17, whose windows start at 9, 12 and 15: the store's time is 15,
        not 17. "other"'s record of a at 7 is on time for "other" (stream time 9). With grace
        5, [0, 10) is hidden (0 < 15 - 15 + 1) for key a too and starts again: 1 at 7; with
        grace 6 it is not (0 >= 15 - 16 + 1), although the greatest stream time, 17, is past its
        close: 2 at 9. [3, 13) and [6, 16) are kept either way."""
        kernel = AggregateKernel(TimeWindowing(size=10, advance=3, grace=grace), [COUNT, COUNT], per_input_time=True,
                                 flush=FlushPolicy.EVERY_WRITE)
        for source, key, ts in ((1, "a", 9), (0, "c", 17)):
            kernel.process(key, "v", ts, source)
        out = [(o.start, o.value, o.timestamp) for o in kernel.process("a", "v", 7, 1).outputs]
        assert out == [first, (3, 2, 9), (6, 2, 9)]

    def test_a_window_leaves_the_state_once_every_input_passed_it(self) -> None:
        """Tumbling windows of 10 ms, grace 0: [0, 10) stays while "in"'s stream time is 5; a
        record of "in" at 12 expires it (both inputs' stream times are past 10)."""
        kernel = AggregateKernel(TimeWindowing(size=10, advance=10, grace=0), [COUNT, COUNT], per_input_time=True)
        for source, ts in ((0, 5), (1, 3), (1, 20)):
            kernel.process("k", "v", ts, source)
        assert [w.bounds for w in kernel.states["k"].windows] == [(0, 10), (20, 30)]
        kernel.process("k", "v", 12, 0)
        assert [w.bounds for w in kernel.states["k"].windows] == [(10, 20), (20, 30)]



#: The oracle's "append" aggregator and "concat_bar" merger over the initializer "".
APPEND = AggFunctions(lambda: "", lambda k, v, a: a + ("-" if v is None else v), lambda k, a, b: a + "|" + b)


class TestCogroupSessionsCloseByTheStoreTime:
    """A session-windowed cogroup: its inputs keep their own stream times (what is late is each
    input's own), but share one store, whose time is the fastest input's. A session that time
    has closed (end + gap + grace passed) is final for every input and every key: Kafka's
    uncached store hides it, and streamsdsl does not merge it whatever the cache (Kafka's record
    cache merges it without a tombstone: docs/differences.md, Session windows)."""

    @staticmethod
    def _run(records: tuple[tuple[int, str, Any, int], ...], flush: FlushPolicy) -> list[tuple[Any, ...]]:
        kernel = AggregateKernel(SessionWindowing(gap=2, grace=5, cached=flush is FlushPolicy.PER_RECORD),
                                 [APPEND, APPEND], per_input_time=True, flush=flush)
        return [(o.key, o.start, o.end, o.value, o.timestamp) for source, key, value, ts in records
                for o in kernel.process(key, value, ts, source).outputs]

    def test_a_session_the_faster_input_closed_is_final_for_the_slower_one(self) -> None:
        """Oracle case 234cb66c1139: gap 2, grace 5; "in" writes x at 6 and ab at 14 (its stream
        time closes [6, 6]: 6 + 7 < 14); "other" (stream time 4) writes None at 4, on time for
        itself and within [6, 6]'s gap: it starts [4, 4], with no tombstone for [6, 6]."""
        records = ((0, "a", "x", 6), (0, "a", "ab", 14), (1, "a", None, 4))
        expected = [("a", 6, 6, "x", 6), ("a", 14, 14, "ab", 14), ("a", 4, 4, "-", 4)]
        assert self._run(records, FlushPolicy.PER_RECORD) == expected
        assert self._run(records, FlushPolicy.EVERY_WRITE) == expected

    def test_whichever_key_moved_the_store_time(self) -> None:
        """The same with "in"'s record at 14 for key b: the store's time closes a's [6, 6] too
        (before, a's session stayed until a record of a expired it, and "other"'s record merged
        it into [4, 6] with a tombstone for [6, 6], which Kafka Streams never forwards)."""
        records = ((0, "a", "x", 6), (0, "b", "ab", 14), (1, "a", None, 4))
        expected = [("a", 6, 6, "x", 6), ("b", 14, 14, "ab", 14), ("a", 4, 4, "-", 4)]
        assert self._run(records, FlushPolicy.PER_RECORD) == expected
        assert self._run(records, FlushPolicy.EVERY_WRITE) == expected

    def test_at_the_close_time_the_cache_still_merges(self) -> None:
        """The store's time 13 is [6, 6]'s end + gap + grace: not closed, so with the cache
        "other"'s record merges it (its tombstone, then [4, 6]), as for one input; without the
        cache Kafka's store hides it already (6 < 13 - 7 + 1, the store time being the greatest
        of the inputs' stream times before the record), so the record starts [4, 4]."""
        records = ((0, "a", "x", 6), (0, "b", "ab", 13), (1, "a", None, 4))
        assert self._run(records, FlushPolicy.PER_RECORD)[2:] == [("a", 6, 6, None, 6), ("a", 4, 6, "|x-", 6)]
        assert self._run(records, FlushPolicy.EVERY_WRITE)[2:] == [("a", 4, 4, "-", 4)]

    def test_lateness_stays_each_inputs_own(self) -> None:
        """"other"'s record at 4 is late for neither store nor itself; "in"'s record at 4 after
        its own 14 is late (4 + 7 < 14) and dropped."""
        kernel = AggregateKernel(SessionWindowing(gap=2, grace=5), [APPEND, APPEND], per_input_time=True)
        steps = [kernel.process("a", v, ts, source) for source, v, ts in ((0, "ab", 14), (1, "x", 4), (0, "y", 4))]
        assert [(s.dropped, [(o.start, o.end, o.value) for o in s.outputs]) for s in steps] == [
            (0, [(14, 14, "ab")]), (0, [(4, 4, "x")]), (1, [])]

@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 2), st.sampled_from("ab"), st.integers(0, 40)), min_size=1, max_size=25),
       st.sampled_from([(10, 10), (10, 5), (5, 2)]), st.integers(0, 6))
def test_cogroup_window_counts_every_record_its_input_accepts(records: list[tuple[int, str, int]],
                                                             size_advance: tuple[int, int], grace: int) -> None:
    """Three cogrouped inputs, each with its own stream time, counting: every forwarded window
    holds exactly the records that reached it on time for their own input, whichever other
    input's stream time has passed the window (no window restarts from the initializer)."""
    size, advance = size_advance
    kernel = AggregateKernel(TimeWindowing(size=size, advance=advance, grace=grace), [COUNT] * 3, per_input_time=True)
    times = [-1] * 3
    accepted: dict[tuple[str, int], int] = {}
    for source, key, ts in records:
        times[source] = max(times[source], ts)
        for start in window_starts(ts, size, advance):
            if start + size > times[source] - grace:
                accepted[(key, start)] = accepted.get((key, start), 0) + 1
        for o in kernel.process(key, "v", ts, source).outputs:
            assert o.value == accepted[(o.key, o.start)]


def _calls(log: list[tuple[Any, ...]]) -> tuple[AggFunctions, AggFunctions]:
    """Two inputs' functions that log every call (to hold a fold to the same calls, in order);
    the aggregator returns ``None`` for value ``"n"`` (a reduce whose first value is null)."""
    def init() -> str:
        log.append(("init",))
        return ""

    def agg(source: int) -> Any:
        def aggregator(k: Any, v: Any, a: Any) -> Any:
            log.append(("agg", source, k, v, a))
            return None if v == "n" else (a or "") + (v or "-")
        return aggregator

    def merge(k: Any, a: Any, b: Any) -> str:
        log.append(("merge", k, a, b))
        return (a or "") + "|" + (b or "")
    return AggFunctions(init, agg(0), merge), AggFunctions(init, agg(1), merge)


WINDOWINGS = {
    "session": lambda cached: SessionWindowing(gap=4, grace=3, cached=cached),
    "tumbling": lambda cached: TimeWindowing(size=10, advance=10, grace=3),
    "hopping": lambda cached: TimeWindowing(size=10, advance=5, grace=0),
    "sliding": lambda cached: SlidingWindowing(time_difference=5, grace=2),
    "unwindowed": lambda cached: Unwindowed(),
}


class TestProcessBatch:
    """``AggregateKernel.process_batch`` (the streaming host's path: a key's records of one
    micro-batch together, one record cache, one clock from the watermark) against ``process``
    per record: the same user calls in the same order, drops, forwarded records with their
    writing record, state and stream time, for every window kind and both flush policies."""

    @settings(max_examples=150, deadline=None)
    @given(kind=st.sampled_from(sorted(WINDOWINGS)), flush=st.sampled_from(list(FlushPolicy)),
           inputs=st.integers(1, 2),
           batches=st.lists(st.tuples(st.integers(-1, 30), st.lists(st.tuples(
               st.sampled_from("ab"), st.sampled_from(["x", "yy", None, "n"]), st.integers(0, 40), st.integers(0, 1)),
               max_size=12)), min_size=1, max_size=4))
    def test_a_keys_records_folded_equal_them_one_by_one(self, kind: str, flush: FlushPolicy, inputs: int,
                                                         batches: list[tuple[int, list[tuple[str, Any, int, int]]]]
                                                         ) -> None:
        windowing = WINDOWINGS[kind](flush is FlushPolicy.PER_RECORD)
        logs: tuple[list[Any], list[Any]] = ([], [])
        runs = []
        for log, batched in zip(logs, (False, True)):
            kernel = AggregateKernel(windowing, _calls(log)[:inputs], flush=flush)
            out: list[Any] = []
            for watermark, records in batches:
                for key in "ab":
                    mine = [(v, ts, source % inputs, n) for n, (k, v, ts, source) in enumerate(records) if k == key]
                    kernel.stream_times = [watermark]
                    cache = InputRecordCache()
                    if batched:
                        step = kernel.process_batch(key, mine, cache=cache)
                        events = [((i, 1), ("out", mine[i][3], o)) for i, o in step.outputs]
                        events += [((i, 0), ("drop", mine[i][3], n, reason)) for i, n, reason in step.dropped]
                        out += [e for _, e in sorted(events, key=lambda e: e[0])]  # a record's drop first
                    else:
                        for v, ts, source, n in mine:
                            s = kernel.process(key, v, ts, source, cache=cache, context=n)
                            out += [("drop", n, s.dropped, s.reason)] if s.dropped else []
                            out += [("out", n, o) for o in s.outputs]
                    out += [("flush", n, o, o.timestamp, o.window) for o, n in kernel.flush_cache(cache)]
                    out.append(("time", kernel.stream_times, dict(kernel.states)))
            runs.append(out)
        assert runs[1] == runs[0]
        assert logs[1] == logs[0]

    def test_a_failing_function_names_its_record(self) -> None:
        """The user's exception leaves the fold as `FoldFailed` with the record's index, the
        records before it applied."""
        def agg(k: Any, v: Any, a: int) -> int:
            if v == "bad":
                raise ValueError("bad value")
            return a + 1

        for windowing in (SessionWindowing(gap=4, grace=0), TimeWindowing(size=10, advance=10, grace=0)):
            kernel = AggregateKernel(windowing, AggFunctions(lambda: 0, agg, lambda k, a, b: a + b))
            with pytest.raises(FoldFailed) as failed:
                kernel.process_batch("k", [("v", 1, 0, None), ("bad", 2, 0, None)], cache=InputRecordCache())
            assert failed.value.index == 1
            assert isinstance(failed.value.__cause__, ValueError)
