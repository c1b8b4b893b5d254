"""Time windows (tumbling / hopping): the per-record rule of ``KStreamWindowAggregate``.

Time windows are ``[start, end)``: start inclusive, end exclusive; window starts are the
multiples of ``advance`` (``advance == size``: tumbling).
"""

from __future__ import annotations

from typing import Any, ClassVar, Iterable

import attrs

from streamsdsl.semantics.aggregation import AggFunctions
from streamsdsl.semantics.windowing import BY_START, FoldFailed, FoldStep, KeyState, WindowAgg, WindowStep
from streamsdsl.semantics.windowing import WindowingRules

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

    def fold_cached(self, windows: Iterable[WindowAgg], key: Any, records: Iterable[tuple[Any, int, int, Any]],
                    stream_time: int, fns: Any) -> FoldStep:
        """One key's records of a micro-batch under the record cache, as `step` (through
        `streamsdsl.semantics.windowing.record_step`) applies them one by one: the same windows
        per record, the same user calls in the same order, the same drops (one per window the
        record is too late for), the writes compacted as the cache holds them
        (`streamsdsl.semantics.windowing.fold_records`, ``compact``). The key's windows are one
        dict of start → ``(aggregate, timestamp)`` for the batch; a window leaves it at the
        first stream time past ``end + grace - 1`` (record_step's expiry).

        Examples
        --------
        >>> count = AggFunctions(lambda: 0, lambda k, v, a: a + 1)
        >>> f = TimeWindowing(size=10, advance=5, grace=0).fold_cached((), "k", [("v", 7, 0, "r0"), ("v", 12, 0, "r1")],
        ...                                                            -1, [count])
        >>> [(bounds, w.agg, w.ts, context) for bounds, (w, context) in f.writes.items()]
        [((0, 10), 1, 7, 'r0'), ((5, 15), 2, 12, 'r1'), ((10, 20), 1, 12, 'r1')]
        """
        size, advance, grace = self.size, self.advance, self.grace
        held = {w.start: (w.agg, w.ts) for w in windows}
        dirty: dict[tuple[int, int], Any] = {}
        pop = dirty.pop
        dropped: list[tuple[int, int]] = []
        expired_before = stream_time  # the stream time the held windows were last expired by
        i = -1
        try:
            for i, (value, ts, source, context) in enumerate(records):
                if ts > stream_time:
                    stream_time = ts
                if stream_time > expired_before and held:  # expired: stream time at end + grace or later
                    horizon = stream_time - grace - size
                    for start in [s for s in held if s <= horizon]:
                        del held[start]
                    expired_before = stream_time
                f = fns[source]
                close_time = stream_time - grace
                late = 0
                first = (max(0, ts - size + advance) // advance) * advance
                for start in range(first, ts + 1, advance):
                    end = start + size
                    if end <= close_time:
                        late += 1
                        continue
                    old = held.get(start)
                    if old is None:
                        agg, at = f.aggregator(key, value, f.initializer()), ts
                    else:
                        agg, at = f.aggregator(key, value, old[0]), ts if ts > old[1] else old[1]
                    bounds = (start, end)
                    pop(bounds, None)
                    if agg is None:  # Kafka's put(window, null): a delete
                        held.pop(start, None)
                        dirty[bounds] = (None, context)
                    else:
                        held[start] = (agg, at)
                        dirty[bounds] = ((agg, at), context)
                if late:
                    dropped.append((i, late))
        except Exception as exc:  # noqa: BLE001 - a user function's: re-raised with the record's index
            raise FoldFailed(i) from exc
        horizon = stream_time - grace - size
        stays = tuple([WindowAgg(s, s + size, agg, at) for s, (agg, at) in sorted(held.items()) if s > horizon])
        writes = {b: (None if v is None else WindowAgg(b[0], b[1], v[0], v[1]), c) for b, (v, c) in dirty.items()}
        return FoldStep(KeyState(stays), stream_time, tuple(dropped), writes)

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
