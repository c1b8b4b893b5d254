"""The aggregation kernel's record cache over one input record (`InputRecordCache`): Kafka's
TopologyTestDriver flushes the cache once per record its task processes, so several records
that one input record sends to an aggregation forward each window's last value once."""

from __future__ import annotations

from typing import Any

from streamsdsl.semantics.aggregation import AggFunctions
from streamsdsl.semantics.kernels import AggregateKernel, FlushPolicy, InputRecordCache, Out
from streamsdsl.semantics.session import SessionWindowing
from streamsdsl.semantics.timewindow import TimeWindowing
from streamsdsl.semantics.unwindowed import Unwindowed

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

    def test_the_record_that_moves_the_store_time_still_finds_the_session(self) -> None:
        """Gap 10, grace 0, no cache: a at 0 then a at 10: the store time before the second
        record is 0, so [0, 0] (ending at the new close time 0) is still found and merged."""
        kernel = AggregateKernel(SessionWindowing(gap=10, grace=0, cached=False), COUNT, flush=FlushPolicy.EVERY_WRITE)
        out = [(o.start, o.end, o.value) for ts in (0, 10) for o in kernel.process("a", "v", ts).outputs]
        assert out == [(0, 0, 1), (0, 0, None), (0, 10, 2)]
