"""Session windows (KIP-94): the per-record rule of ``KStreamSessionWindowAggregate``.

Sessions are ``[start, end]`` with both ends inclusive; a stored session's forwarding
timestamp is its end.
"""

from __future__ import annotations

import operator
from typing import Any, ClassVar, Iterable

import attrs

from streamsdsl.semantics.aggregation import AggFunctions
from streamsdsl.semantics.windowing import WindowAgg, WindowStep, WindowingRules

__all__ = ["SessionWindowing"]

#: Kafka's iteration order of a key's sessions: (end, start).
_END_START = operator.attrgetter("end", "start")


@attrs.frozen
class SessionWindowing(WindowingRules):
    """Session windows with an inactivity gap and a grace period, both in ms.

    Examples
    --------
    >>> from streamsdsl.semantics.aggregation import AggFunctions
    >>> count = AggFunctions(lambda: 0, lambda k, v, a: a + 1, lambda k, a, b: a + b)
    >>> w = SessionWindowing(gap=5, grace=0)
    >>> s1 = w.step((), "k", "v", 10, 10, count)
    >>> s2 = w.step(s1.windows, "k", "v", 14, 14, count)
    >>> s2.puts, s2.deletes
    ((WindowAgg(start=10, end=14, agg=2, ts=14),), (WindowAgg(start=10, end=10, agg=1, ts=10),))
    """

    gap: int
    grace: int

    drops_null_values: ClassVar[bool] = False

    def step(self, windows: Iterable[WindowAgg], key: Any, value: Any, ts: int, stream_time: int,
             fns: AggFunctions) -> WindowStep:
        """KStreamSessionWindowAggregate.process: find every session with ``end >= ts - gap`` and
        ``start <= ts + gap`` that is not closed; fold them, in (end, start) order, into
        ``initializer()`` with the merger; drop the record if the merged session is closed;
        otherwise delete the merged sessions (unless the result is the same ``[ts, ts]``
        window), apply the aggregator and put the merged session (ts = its end)."""
        current = sorted(windows, key=_END_START)
        closing = stream_time - self.grace - self.gap
        found = [s for s in current if s.end >= ts - self.gap and s.start <= ts + self.gap and s.end >= closing]
        agg = fns.initializer()
        start, end = ts, ts
        for s in found:
            agg = fns.merger(key, agg, s.agg) if fns.merger is not None else agg
            start, end = min(start, s.start), max(end, s.end)
        if end < closing:
            return WindowStep(tuple(current), dropped=1)
        merged = {id(s) for s in found}
        put = WindowAgg(start, end, fns.aggregator(key, value, agg), end)
        kept = [s for s in current if id(s) not in merged]
        deletes = tuple(found) if (start, end) != (ts, ts) else ()
        return WindowStep(tuple(sorted([*kept, put], key=_END_START)), (put,), deletes)

    def close_threshold(self, window: WindowAgg) -> int:
        """A session ``[s, e]`` is final once ``e < stream_time - grace - gap``."""
        return window.end + self.gap + self.grace

    def expiry_threshold(self, window: WindowAgg) -> int:
        """No record merges into a closed session: it leaves the state when it closes."""
        return self.close_threshold(window)

    def final_order(self, window: WindowAgg) -> tuple[int, ...]:
        return (window.end, window.start)
