"""Time windows (tumbling / hopping): the per-record rule of ``KStreamWindowAggregate``.

Time windows are ``[start, end)``: start inclusive, end exclusive; window starts are the
multiples of ``advance`` (``advance == size``: tumbling).
"""

from __future__ import annotations

from typing import Any, ClassVar, Iterable

import attrs

from streamsdsl.semantics.aggregation import AggFunctions
from streamsdsl.semantics.windowing import BY_START, WindowAgg, WindowStep, WindowingRules

__all__ = ["TimeWindowing", "window_starts"]


def window_starts(timestamp: int, size: int, advance: int) -> range:
    """Starts of the time windows containing ``timestamp``, ascending (Kafka's
    ``TimeWindows.windowsFor``: ``start <= timestamp < start + size``, ``start >= 0``).

    Examples
    --------
    >>> list(window_starts(12, 10, 5))
    [5, 10]
    """
    first = (max(0, timestamp - size + advance) // advance) * advance
    return range(first, timestamp + 1, advance)


@attrs.frozen
class TimeWindowing(WindowingRules):
    """Tumbling (``advance == size``) or hopping windows with a grace period, all in ms.

    Examples
    --------
    >>> from streamsdsl.semantics.aggregation import AggFunctions
    >>> count = AggFunctions(lambda: 0, lambda k, v, a: a + 1)
    >>> w = TimeWindowing(size=10, advance=5, grace=0)
    >>> step = w.step((), "k", "v", 12, 12, count)
    >>> step.puts
    (WindowAgg(start=5, end=15, agg=1, ts=12), WindowAgg(start=10, end=20, agg=1, ts=12))
    >>> w.step(step.windows, "k", "v", 4, 15, count).dropped   # [0, 10) closed at stream time 15
    1
    """

    size: int
    advance: int
    grace: int

    drops_null_values: ClassVar[bool] = False
    cache_keeps_expired_windows: ClassVar[bool] = True

    def step(self, windows: Iterable[WindowAgg], key: Any, value: Any, ts: int, stream_time: int,
             fns: AggFunctions) -> WindowStep:
        """For each window containing ``ts``: if ``end > stream_time - grace`` fetch its aggregate
        (``initializer()`` if there is none), apply the aggregator, set ``ts = max(record ts,
        stored ts)`` and put it (a ``None`` aggregate deletes the window, as Kafka's
        ``put(window, null)``); otherwise the record is dropped for that window and counted."""
        by_start = {w.start: w for w in windows}
        close_time = stream_time - self.grace
        puts: list[WindowAgg] = []
        dropped = 0
        for start in window_starts(ts, self.size, self.advance):
            end = start + self.size
            if end <= close_time:
                dropped += 1
                continue
            old = by_start.get(start)
            agg = fns.aggregator(key, value, fns.initializer() if old is None else old.agg)
            put = WindowAgg(start, end, agg, ts if old is None else max(ts, old.ts))
            if agg is None:  # Kafka's put(window, null): the window is deleted, not stored
                by_start.pop(start, None)
            else:
                by_start[start] = put
            puts.append(put)
        return WindowStep(tuple(sorted(by_start.values(), key=BY_START)), tuple(puts), (), dropped)

    @property
    def uncached_store_time_unit(self) -> int:
        """The advance: Kafka's window store keeps the greatest window start put, the last
        window of the latest record's. It hides ``[s, e)`` once ``s < time - (size + grace) +
        1``, i.e. once the time passes ``e + grace - 1``, the window's `expiry_threshold`."""
        return self.advance

    def close_threshold(self, window: WindowAgg) -> int:
        """``[s, e)`` closes when stream time reaches ``e + grace``."""
        return window.end + self.grace - 1

    def final_order(self, window: WindowAgg) -> tuple[int, ...]:
        return (window.start,)
