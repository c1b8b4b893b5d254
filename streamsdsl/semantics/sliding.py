"""Sliding windows (KIP-450): the per-record rule of ``KStreamSlidingWindowAggregate``.

Kafka Streams' sliding windows are record-driven. Each record at ``t`` has a *left window*
``[t - d, t]`` and, once a later record falls into it, a *right window* ``[t + 1, t + 1 + d]``
(``d`` is the time difference). Records with ``t < d`` ("early" records) share the window
``[0, d]``, because window starts are never negative. Windows are ``[start, end]`` with **both
ends inclusive** and ``end = start + d``.

A key's state is its list of stored windows (`WindowAgg`). `SlidingWindowing.step` applies one
record and returns the new list plus the store writes Kafka Streams performs, in Kafka's order.
What is *forwarded* is decided by the emit strategy, as for `TimeWindowing`.

Source: ``KI/KStreamSlidingWindowAggregate.java`` and
``KI/AbstractKStreamTimeWindowAggregateProcessor.java`` (``KI/`` as in
``KAFKA_STREAMS_SEMANTICS.md``). These were read in the 3.x emit-strategy version, the one
that has ``emitRangeUpperBound``. Below, ``closeTime = streamTime - grace``.

- **Drop rule.** A record is dropped whole, and counted once, when ``t + d < closeTime``.
  Otherwise each window it would write is checked separately (``updateWindowAndForward``): if
  ``end < closeTime`` that write is skipped and counted once. A record can therefore count
  several times.
- **Close rule.** No write ever reaches a window with ``end < closeTime``. The current record's
  new right window is written without a check, but its end ``t + 1 + d`` is always greater than
  ``closeTime``. So ``[s, e]`` is final once ``streamTime > e + grace``. Emit-on-close forwards
  the store's windows with ``start`` in ``[lower, closeTime - d - 1]`` (that is,
  ``end < closeTime``), ordered by (start, key). ``lower`` is 0 on the first emit and
  ``max(0, lastEmit - d)`` after that. The value is the stored aggregate and ts is the window's
  max record ts. The check runs after each record, but *not* after a record dropped whole or
  an early record (``t < d``): ``process`` returns before ``maybeForwardFinalResult``. Such
  records therefore only delay emission until the next record that is processed.
- **Closed windows are still read.** For a new left window, Kafka copies the aggregate of the
  latest window whose end is before ``t``. It also needs that window's max timestamp (the
  previous record) to create the previous record's right window. Both reads may hit a window
  that is already closed. In Kafka's ``testJoin``, ``A@10`` closes at stream time 12 and
  ``A@15`` then builds ``[5,15] = "0+1+1"`` from it. Kafka keeps such windows because the
  default store retention is ``2d + grace`` (``SlidingWindowedKStreamImpl``). So a key's
  windows must be kept until they expire (stream time past `SlidingWindowing.expiry_threshold`,
  ``end + grace + 2d``), not just until they close. If closed windows are pruned when they close,
  ``step`` silently builds different windows.
- **Partly late records** (``t < closeTime <= t + d``: some of their windows are closed) are
  ported exactly, quirks included. Such a record can make a later window hold a record outside
  ``[start, end]``. With only on-time records, every window is the exact fold of its records.
"""

from __future__ import annotations

from typing import Any, ClassVar, Iterable

import attrs

from streamsdsl.semantics.aggregation import AggFunctions
from streamsdsl.semantics.windowing import BY_START, WindowAgg, WindowStep, WindowingRules

__all__ = ["SlidingWindowing"]

# Kafka's ValueAndTimestamp: (aggregate, max record timestamp), or None where Kafka has null
# (ValueAndTimestamp.make(null, ts) returns null).
_VaT = tuple[Any, int] | None


def _vat(agg: Any, ts: int) -> _VaT:
    """``ValueAndTimestamp.make``: ``None`` when the aggregate is ``None``."""
    return None if agg is None else (agg, ts)


@attrs.define
class _Store:
    """One key's window store while one record is applied (mutable; private to `step`)."""

    d: int
    close_time: int
    key: Any
    value: Any
    ts: int
    fns: AggFunctions
    by_start: dict[int, WindowAgg]
    puts: list[WindowAgg] = attrs.Factory(list)
    dropped: int = 0

    def fetch(self, lo: int, hi: int) -> list[WindowAgg]:
        """Windows with ``lo <= start <= hi``, ascending start (``WindowStore.fetch``)."""
        return sorted((w for w in self.by_start.values() if lo <= w.start <= hi), key=BY_START)

    def put(self, start: int, agg: Any, ts: int) -> None:
        """Write (and, in update mode, forward) one window. A ``None`` aggregate deletes it, as
        Kafka's ``put(key, null)`` does."""
        window = WindowAgg(start, start + self.d, agg, ts)
        self.puts.append(window)
        if agg is None:
            self.by_start.pop(start, None)
        else:
            self.by_start[start] = window

    def update(self, start: int, vat: _VaT) -> None:
        """``updateWindowAndForward``: aggregate the record into the window unless it is closed."""
        if start + self.d < self.close_time:
            self.dropped += 1
            return
        old = None if vat is None else vat[0]
        new = self.fns.aggregator(self.key, self.value, old)
        self.put(start, new, self.ts if vat is None else max(self.ts, vat[1]))

    def update_stored(self, window: WindowAgg) -> None:
        self.update(window.start, (window.agg, window.ts))

    def create_previous_right(self, start: int) -> None:
        """``createPreviousRecordRightWindow``: a new window seeded with ``initializer()``."""
        self.update(start, _vat(self.fns.initializer(), self.ts))

    def create_current_right(self, right: WindowAgg) -> None:
        """``createCurrentRecordRightWindow``: copy ``right`` to ``[t+1, t+1+d]`` unchanged.
        There is no close check (it is never needed) and the aggregator is not applied."""
        self.put(self.ts + 1, right.agg, right.ts)


def _right_window_not_empty(right: WindowAgg | None, ts: int) -> bool:
    """``rightWindowIsNotEmpty``: ``right`` holds a record later than ``ts``."""
    return right is not None and right.ts > ts


@attrs.define
class _Scan:
    """What a scan of a key's existing windows found (the local variables of Kafka's
    ``processReverse``)."""

    start_times: set[int] = attrs.Factory(set)
    left: WindowAgg | None = None
    right: WindowAgg | None = None
    left_created: bool = False
    right_created: bool = False
    previous_ts: int | None = None

    def create_windows(self, store: _Store) -> None:
        """``createWindows``: write, in this order, the previous record's right window (if it is
        missing and contains ``t``), ``t``'s left window (if missing; seeded with ``left``'s
        aggregate when the previous record lies in it), and ``t``'s right window (if missing and
        non-empty)."""
        ts, d = store.ts, store.d
        if self.previous_ts is not None:
            start = self.previous_ts + 1
            if start not in self.start_times and start + d >= ts:
                store.create_previous_right(start)
        if not self.left_created:
            if self.previous_ts is not None and ts - d <= self.previous_ts:
                assert self.left is not None
                seed = _vat(self.left.agg, ts)
            else:
                seed = _vat(store.fns.initializer(), ts)
            store.update(ts - d, seed)
        if not self.right_created and _right_window_not_empty(self.right, ts):
            assert self.right is not None
            store.create_current_right(self.right)


def _process_reverse(store: _Store) -> None:
    """``processReverse``: the path Kafka takes with its built-in stores (all of them support
    ``backwardFetch``). Windows are visited from the highest start down, starting at
    ``t + 1`` and going no lower than ``t - 2d``."""
    ts, d = store.ts, store.d
    scan = _Scan()
    for w in reversed(store.fetch(max(0, ts - 2 * d), ts + 1)):
        scan.start_times.add(w.start)
        end = w.start + d
        if w.start == ts + 1:
            scan.right_created = True
        elif end > ts:
            if scan.right is None:
                scan.right = w
            store.update_stored(w)
        elif end == ts:
            scan.left_created = True
            store.update_stored(w)
            if w.ts < ts:
                scan.previous_ts = w.ts
            else:
                return  # a record at ts was here before: every window already exists
        else:
            scan.left, scan.previous_ts = w, w.ts
            break
    scan.create_windows(store)


def _process_early(store: _Store) -> None:
    """``processEarly`` (``0 <= t < d``): ``[0, d]`` takes the place of ``t``'s left window.

    Writes happen in this order. First, existing windows that start in ``(0, t]`` are updated.
    Then ``t``'s right window is written if it is missing and not empty; if no other window
    gives its content, the content comes from ``[0, d]``. Next comes the previous record's right
    window, if it is missing. Last, ``[0, d]`` is updated or created.
    """
    ts = store.ts
    start_times: set[int] = set()
    combined: WindowAgg | None = None
    right: WindowAgg | None = None
    right_created = False
    previous_ts: int | None = None
    for w in store.fetch(0, ts + 1):
        start_times.add(w.start)
        if w.start == 0:
            combined = w
            if w.ts < ts:
                previous_ts = w.ts
        elif w.start <= ts:
            right = w
            store.update_stored(w)
        else:  # w.start == ts + 1
            right_created = True
    if right is None and combined is not None and combined.ts > ts:
        right = combined
    if not right_created and _right_window_not_empty(right, ts):
        assert right is not None
        store.create_current_right(right)
    if previous_ts is not None and previous_ts + 1 not in start_times:
        store.create_previous_right(previous_ts + 1)
    if combined is None:
        store.update(0, _vat(store.fns.initializer(), ts))
    else:
        store.update_stored(combined)


@attrs.frozen
class SlidingWindowing(WindowingRules):
    """Sliding windows with time difference ``d`` and a grace period, both in ms (KIP-450).

    A record's windows are found as Kafka's built-in stores find them (``processReverse``,
    windows in descending start); Kafka's forward-iterator path (``processInOrder``, for custom
    stores without ``backwardFetch``) writes the same windows in the opposite order, and no
    streamsdsl store takes it.

    Examples
    --------
    >>> from streamsdsl.semantics.aggregation import AggFunctions
    >>> concat = AggFunctions(lambda: "0", lambda k, v, a: f"{a}+{v}")
    >>> w = SlidingWindowing(time_difference=10, grace=5)
    >>> s1 = w.step((), "A", "1", 10, 10, concat)
    >>> s1.puts
    (WindowAgg(start=0, end=10, agg='0+1', ts=10),)
    >>> s2 = w.step(s1.windows, "A", "2", 14, 14, concat)   # A@10's right window, then A@14's left
    >>> s2.puts
    (WindowAgg(start=11, end=21, agg='0+2', ts=14), WindowAgg(start=4, end=14, agg='0+1+2', ts=14))
    >>> w.close_threshold(s2.windows[0])   # closed from stream time 16 on
    15
    >>> w.step(s2.windows, "A", "3", 0, 16, concat).dropped   # 0 + 10 < 16 - 5: dropped whole
    1
    """

    time_difference: int
    grace: int

    drops_null_values: ClassVar[bool] = True
    cache_keeps_expired_windows: ClassVar[bool] = True

    def step(self, windows: Iterable[WindowAgg], key: Any, value: Any, ts: int, stream_time: int,
             fns: AggFunctions) -> WindowStep:
        """Apply one record (``stream_time`` already includes ``ts``) to one key's windows.

        The record is dropped whole (``dropped=1``, nothing written) if ``ts + d < stream_time
        - grace``, or if ``value is None``. For a ``None`` value Kafka drops the record before
        it advances stream time, so the caller should not advance stream time for it. Otherwise,
        early records (``ts < d``) follow ``processEarly`` and all others follow
        ``processReverse``. ``dropped`` counts each write that was
        skipped because its window was closed.

        Only windows with start in ``[max(0, ts - 2d), ts + 1]`` are read; the rest are
        returned unchanged. Windows that are closed but not expired (see `expiry_threshold`) must be
        passed in, because Kafka still reads them.
        """
        by_start = {w.start: w for w in windows}
        d = self.time_difference
        close_time = stream_time - self.grace
        if value is None or ts + d < close_time:
            return WindowStep(tuple(sorted(by_start.values(), key=BY_START)), dropped=1)
        store = _Store(d, close_time, key, value, ts, fns, by_start)
        if ts < d:
            _process_early(store)
        else:
            _process_reverse(store)
        return WindowStep(tuple(sorted(store.by_start.values(), key=BY_START)), tuple(store.puts), dropped=store.dropped)

    def close_threshold(self, window: WindowAgg) -> int:
        """``[s, e]`` closes when stream time first exceeds ``e + grace``. From then on
        ``e < closeTime``: no write reaches it and emit-on-close forwards it."""
        return window.end + self.grace


    def expiry_threshold(self, window: WindowAgg) -> int:
        """The window can leave the state when stream time first exceeds ``e + grace + 2d``.

        Up to then, a record Kafka accepts can still read it: a record at ``t`` is dropped whole
        unless ``t >= closeTime - d``, and it reads the windows that start in ``[t - 2d, t + 1]``,
        so the lowest window read ends at ``closeTime - 2d = streamTime - grace - 2d``. Read as
        the previous record's window, it gives the aggregate copied into ``t``'s left window
        and the previous record's ts (the start of its right window); a closed window read so
        changes only the drop count (the previous record's right window and ``t``'s left
        window are then closed writes, skipped and counted). Kafka keeps such windows readable:
        its record cache returns every window it holds, and so does the store of an emit-on-close
        aggregation (checked with the oracle). Without the cache, on update, Kafka's store hides
        a window once ``start <= storeTime - (2d + grace)``, storeTime being the largest window
        start written across keys (between ``streamTime - d`` and ``streamTime``): a record can
        then count fewer skipped writes than here (not modelled: the store time is not tracked).

        Pruning at this threshold keeps every write, value and drop count identical to never
        pruning.
        """
        return window.end + self.grace + 2 * self.time_difference

    def final_order(self, window: WindowAgg) -> tuple[int, ...]:
        return (window.start,)
