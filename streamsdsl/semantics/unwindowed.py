"""Unwindowed aggregation: the per-record rule of ``KStreamAggregate`` (and of an
unwindowed cogroup's per-input aggregate processors).

The key's one aggregate is held as a single stored "window" ``[0, 0]`` that never closes, so
the same record step, record cache and operator serve windowed and unwindowed aggregations.
"""

from __future__ import annotations

from typing import Any, ClassVar, Iterable

import attrs

from streamsdsl.semantics.aggregation import AggFunctions
from streamsdsl.semantics.windowing import NEVER, WindowAgg, WindowStep, WindowingRules

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

    def close_threshold(self, window: WindowAgg) -> int:
        return NEVER

    def expiry_threshold(self, window: WindowAgg) -> int:
        return NEVER

    def final_order(self, window: WindowAgg) -> tuple[int, ...]:
        return ()
