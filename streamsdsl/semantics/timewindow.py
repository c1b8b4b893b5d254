"""Time windows (tumbling / hopping): the per-record rule of ``KStreamWindowAggregate``.

A key's state is its list of stored windows (`WindowAgg`). A windowing strategy — `TimeWindowing`
here, `streamsdsl.semantics.sliding.SlidingWindowing` for sliding windows — applies one record
with ``step`` and returns the new list plus the store writes Kafka Streams performs. What is
*forwarded* is decided by the emit strategy: on update the writes pass through a
`ChangeBuffer` (Kafka's record cache); on close each window is forwarded once, at the first
stream time greater than its ``close_threshold``.

Time windows are ``[start, end)``: start inclusive, end exclusive.
"""

from __future__ import annotations

from typing import Any, ClassVar, Iterable, Protocol

import attrs

from streamsdsl.semantics.aggregation import AggFunctions
from streamsdsl.dsl.windows import window_starts

__all__ = ["CloseStep", "TimeWindowing", "WindowAgg", "WindowStep", "Windowing", "close_step", "window_starts"]


@attrs.frozen(order=True)
class WindowAgg:
    """One window of one key in the store: start, end (ms), aggregate, max record timestamp."""

    start: int
    end: int
    agg: Any = attrs.field(order=False, eq=True)
    ts: int = attrs.field(order=False)


@attrs.frozen
class WindowStep:
    """The outcome of one record for one key.

    ``windows``: the key's stored windows afterwards, ascending start; ``puts``: the store
    writes in Kafka's order (each is forwarded in update mode with ts = ``WindowAgg.ts``);
    ``dropped``: how many times the record counts in ``dropped-records-total`` (once per window
    it was too late for).
    """

    windows: tuple[WindowAgg, ...]
    puts: tuple[WindowAgg, ...]
    dropped: int = 0


class Windowing(Protocol):
    """A windowing strategy of the stateful time-window operator. ``drops_null_values``: a
    record with a null value is dropped before it advances stream time (sliding windows)."""

    drops_null_values: ClassVar[bool]

    def step(self, windows: Iterable[WindowAgg], key: Any, value: Any, ts: int, stream_time: int,
             fns: AggFunctions) -> WindowStep: ...

    def close_threshold(self, window: WindowAgg) -> int: ...

    def is_closed(self, window: WindowAgg, stream_time: int) -> bool: ...

    def expiry_threshold(self, window: WindowAgg) -> int: ...

    def is_expired(self, window: WindowAgg, stream_time: int) -> bool: ...


@attrs.frozen
class TimeWindowing:
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

    def step(self, windows: Iterable[WindowAgg], key: Any, value: Any, ts: int, stream_time: int,
             fns: AggFunctions) -> WindowStep:
        """Apply one record (``stream_time`` already includes ``ts``) to a key's windows.

        For each window containing ``ts``: if ``end > stream_time - grace`` fetch its aggregate
        (``initializer()`` if there is none), apply the aggregator, set ``ts = max(record ts,
        stored ts)`` and put it; otherwise the record is dropped for that window and counted.
        """
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
            by_start[start] = put
            puts.append(put)
        return WindowStep(tuple(sorted(by_start.values())), tuple(puts), dropped)

    def close_threshold(self, window: WindowAgg) -> int:
        """``[s, e)`` closes when stream time reaches ``e + grace``: at the first stream time
        greater than ``e + grace - 1``."""
        return window.end + self.grace - 1

    def is_closed(self, window: WindowAgg, stream_time: int) -> bool:
        return stream_time > self.close_threshold(window)

    def expiry_threshold(self, window: WindowAgg) -> int:
        """No record reads a closed time window again: it leaves the state when it closes."""
        return self.close_threshold(window)

    def is_expired(self, window: WindowAgg, stream_time: int) -> bool:
        return self.is_closed(window, stream_time)


@attrs.frozen
class CloseStep:
    """What stream time does to a key's windows: ``closed`` became final now (each is emitted
    on close exactly once), ``kept`` stay in the state (open, or final but still read by later
    records), ``finals`` are the starts of the kept windows that are already final."""

    closed: tuple[WindowAgg, ...]
    kept: tuple[WindowAgg, ...]
    finals: frozenset[int]

    def timer_thresholds(self, windowing: Windowing) -> list[int]:
        """When each kept window next needs attention: its close, or (final) its expiry."""
        return [windowing.expiry_threshold(w) if w.start in self.finals else windowing.close_threshold(w)
                for w in self.kept]


def close_step(windowing: Windowing, windows: Iterable[WindowAgg], stream_time: int,
               finals: Iterable[int] = ()) -> CloseStep:
    """Advance a key's windows to ``stream_time``; ``finals`` are the starts already final.

    Examples
    --------
    >>> w = TimeWindowing(size=10, advance=10, grace=0)
    >>> close_step(w, [WindowAgg(0, 10, 1, 3), WindowAgg(10, 20, 1, 12)], 10).closed
    (WindowAgg(start=0, end=10, agg=1, ts=3),)
    """
    done = set(finals)
    closed: list[WindowAgg] = []
    kept: list[WindowAgg] = []
    for w in sorted(windows):
        if windowing.is_closed(w, stream_time) and w.start not in done:
            closed.append(w)
            done.add(w.start)
        if not windowing.is_expired(w, stream_time):
            kept.append(w)
    return CloseStep(tuple(closed), tuple(kept), frozenset(w.start for w in kept if w.start in done))
