"""Unwindowed aggregation: the per-record rule of ``KStreamAggregate`` (and of an
unwindowed cogroup's per-input aggregate processors).

The key's one aggregate is held as a single stored "window" ``[0, 0]`` that never closes, so
the same record step, record cache and operator serve windowed and unwindowed aggregations.
"""

from __future__ import annotations

from typing import Any, ClassVar, Iterable

import attrs

from streamsdsl.semantics.aggregation import AggFunctions
from streamsdsl.semantics.windowing import NEVER, FoldFailed, FoldStep, KeyState, WindowAgg, WindowStep
from streamsdsl.semantics.windowing import WindowingRules

__all__ = ["Unwindowed"]


@attrs.frozen
class Unwindowed(WindowingRules):
    """One aggregate per key: a null value is dropped (and counted); otherwise
    ``agg = aggregator(key, value, agg or initializer())`` with ts = max(record ts, previous ts).

    Examples
    --------
    >>> from streamsdsl.semantics.aggregation import AggFunctions
    >>> count = AggFunctions(lambda: 0, lambda k, v, a: a + 1)
    >>> s = Unwindowed().step((), "k", "v", 7, 7, count)
    >>> s.puts
    (WindowAgg(start=0, end=0, agg=1, ts=7),)
    >>> Unwindowed().step(s.windows, "k", None, 9, 9, count).dropped
    1
    """

    #: Kafka's ``KStreamAggregate`` skips a null value first, before anything else.
    drops_null_values: ClassVar[bool] = True

    def step(self, windows: Iterable[WindowAgg], key: Any, value: Any, ts: int, stream_time: int,
             fns: AggFunctions) -> WindowStep:
        current = tuple(windows)
        if value is None:
            return WindowStep(current, dropped=1)
        old = current[0] if current else None
        agg = fns.aggregator(key, value, fns.initializer() if old is None else old.agg)
        put = WindowAgg(0, 0, agg, ts if old is None else max(ts, old.ts))
        return WindowStep((put,), (put,))

    def fold_cached(self, windows: Iterable[WindowAgg], key: Any, records: Iterable[tuple[Any, int, int, Any]],
                    stream_time: int, fns: Any) -> FoldStep:
        """One key's records of a micro-batch under the record cache, as `step` (through
        `streamsdsl.semantics.windowing.record_step`) applies them one by one: the same user
        calls, a null value dropped before it advances stream time, the one write the cache
        holds at the end (`streamsdsl.semantics.windowing.fold_records`, ``compact``). A
        ``None`` aggregate stays the key's aggregate (the next record's aggregator gets it) and
        is written as a delete, as `step` does.

        Examples
        --------
        >>> count = AggFunctions(lambda: 0, lambda k, v, a: a + 1)
        >>> f = Unwindowed().fold_cached((), "k", [("v", 7, 0, "r0"), (None, 9, 0, "r1"), ("v", 5, 0, "r2")], -1,
        ...                              [count])
        >>> f.writes, f.dropped, f.stream_time
        ({(0, 0): (WindowAgg(start=0, end=0, agg=2, ts=7), 'r2')}, ((1, 1),), 7)
        """
        current = tuple(windows)
        have = bool(current)
        agg, at = (current[0].agg, current[0].ts) if have else (None, -1)
        written: Any = None
        dropped: list[tuple[int, int]] = []
        i = -1
        try:
            for i, (value, ts, source, context) in enumerate(records):
                if value is None:  # dropped before anything else, stream time included
                    dropped.append((i, 1))
                    continue
                if ts > stream_time:
                    stream_time = ts
                f = fns[source]
                agg = f.aggregator(key, value, agg if have else f.initializer())
                at = ts if not have or ts > at else at
                have = True
                written = context, agg
        except Exception as exc:  # noqa: BLE001 - a user function's: re-raised with the record's index
            raise FoldFailed(i) from exc
        window = WindowAgg(0, 0, agg, at) if have else None
        writes = {} if written is None else {(0, 0): (None if agg is None else window, written[0])}
        return FoldStep(KeyState(() if window is None else (window,)), stream_time, tuple(dropped), writes)

    def close_threshold(self, window: WindowAgg) -> int:
        return NEVER

    def expiry_threshold(self, window: WindowAgg) -> int:
        return NEVER

    def final_order(self, window: WindowAgg) -> tuple[int, ...]:
        return ()
