"""Session windows (KIP-94): the per-record rule of ``KStreamSessionWindowAggregate``.

Sessions are ``[start, end]`` with both ends inclusive; a stored session's forwarding
timestamp is its end.
"""

from __future__ import annotations

import operator
from bisect import insort, insort_right
from typing import Any, ClassVar, Iterable

import attrs

from streamsdsl.semantics.aggregation import AggFunctions
from streamsdsl.semantics.windowing import FoldFailed, FoldStep, KeyState, WindowAgg, WindowStep, WindowingRules

__all__ = ["SessionWindowing"]

#: Kafka's iteration order of a key's sessions: (end, start).
_END_START = operator.attrgetter("end", "start")
#: The same order of ``(end, start, agg)`` tuples (`SessionWindowing.fold_cached`).
_END_AND_START = operator.itemgetter(0, 1)


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
    #: Whether the store has Kafka's record cache (emit on update with a cache, the default): the
    #: cache still holds a session whose end equals the close time (stream time - gap - grace),
    #: so a record within the gap merges into it. Without the cache (emit on close, or
    #: ``statestore.cache.max.bytes = 0``) the RocksDB store's retention (gap + grace) hides a
    #: session once ``end < store time - gap - grace + 1``
    #: (``AbstractRocksDBSegmentedBytesStore``), the store time being the largest session end
    #: written before the record, i.e. the stream time before it (``store_time`` of `step`): a
    #: record within the gap of a hidden session starts a new one, and the hidden session is
    #: emitted on close when stream time passes it.
    cached: bool = attrs.field(default=True, kw_only=True)

    drops_null_values: ClassVar[bool] = False
    store_time_expires_windows: ClassVar[bool] = True

    @property
    def reads_store_time(self) -> bool:
        """Whether `step` reads the stream time before the record (``store_time``): without the cache."""
        return not self.cached

    #: The replay plan gives the processor the stream time before each record where this is true.
    stream_time_before = reads_store_time

    def step(self, windows: Iterable[WindowAgg], key: Any, value: Any, ts: int, stream_time: int,
             fns: AggFunctions, *, store_time: int | None = None) -> WindowStep:
        """KStreamSessionWindowAggregate.process: find every session with ``end >= ts - gap`` and
        ``start <= ts + gap`` that is not closed; fold them, in (end, start) order, into
        ``initializer()`` with the merger; drop the record if the merged session is closed;
        otherwise delete the merged sessions (unless the result is the same ``[ts, ts]``
        window), apply the aggregator and put the merged session (ts = its end). A ``None``
        aggregate (a reduce whose first value is ``None``) deletes the merged session, as Kafka's
        ``put(session, null)`` does: no session is stored, none is emitted on close. Without the
        cache a put replaces a hidden session of the same bounds, as Kafka's store does."""
        current = list(windows)
        if len(current) > 1:
            current.sort(key=_END_START)
        gap = self.gap
        closing = stream_time - self.grace - gap
        # end >= ts - gap and end >= closing (without the cache: end > store time - grace - gap),
        # start <= ts + gap
        if self.cached or store_time is None:
            visible = closing
        else:
            visible = max(closing, store_time - self.grace - gap + 1)
        lowest_end, highest_start = max(ts - gap, visible), ts + gap
        # in (end, start) order the sessions with end >= lowest_end are a suffix
        first = len(current)
        while first and current[first - 1].end >= lowest_end:
            first -= 1
        kept = current[:first]
        found = []
        for s in current[first:]:
            (found if s.start <= highest_start else kept).append(s)
        agg = fns.initializer()
        start = end = ts
        merger = fns.merger
        for s in found:
            if merger is not None:
                agg = merger(key, agg, s.agg)
            if s.start < start:
                start = s.start
            if s.end > end:
                end = s.end
        if end < closing:
            return WindowStep(tuple(current), dropped=1)
        put = WindowAgg(start, end, fns.aggregator(key, value, agg), end)
        deletes = tuple(found) if (start != ts or end != ts) else ()
        if visible > closing:
            # the put overwrites a hidden session of the same bounds (the store's key is the
            # key, end and start): one session stays, the new one
            kept = [s for s in kept if s.start != start or s.end != end]
        # a None aggregate is Kafka's put(session, null): the session is deleted, not stored
        if put.agg is not None:
            # kept stays in (end, start) order: put goes after every session with a key <= its
            # own, where a stable sort of [*kept, put] places it
            insort_right(kept, put, key=_END_START)
        return WindowStep(tuple(kept), (put,), deletes)

    def fold_cached(self, windows: Iterable[WindowAgg], key: Any, records: Iterable[tuple[Any, int, int, Any]],
                    stream_time: int, fns: Any) -> FoldStep:
        """One key's records of a micro-batch under the record cache, as `step` (through
        `streamsdsl.semantics.windowing.record_step`) applies them one by one: the same sessions
        found, merged in (end, start) order, the same user calls in the same order (initializer,
        merger per found session, aggregator), the same drops, and the writes compacted as the
        cache holds them (`streamsdsl.semantics.windowing.fold_records`, ``compact``).

        The key's sessions are held as ``(end, start, agg)`` tuples in one sorted list for the
        whole batch (bounds are unique under the cache, so tuples order as (end, start)); a
        session expires at the first stream time past ``end + gap + grace`` (record_step's
        expiry), a window object is built only for what the cache forwards and what stays.

        Examples
        --------
        >>> count = AggFunctions(lambda: 0, lambda k, v, a: a + 1, lambda k, a, b: a + b)
        >>> f = SessionWindowing(gap=5, grace=0).fold_cached((), "k", [("v", 10, 0, "r0"), ("v", 14, 0, "r1")], -1,
        ...                                                  [count])
        >>> f.writes
        {(10, 10): (None, 'r1'), (10, 14): (WindowAgg(start=10, end=14, agg=2, ts=14), 'r1')}
        """
        assert self.cached, "without the cache every write is forwarded: fold_records"
        sessions = sorted([(w.end, w.start, w.agg) for w in windows], key=_END_AND_START)
        gap, grace = self.gap, self.grace
        dirty: dict[tuple[int, int], Any] = {}
        pop = dirty.pop
        dropped: list[tuple[int, int]] = []
        i = -1
        try:
            for i, (value, ts, source, context) in enumerate(records):
                if ts > stream_time:
                    stream_time = ts
                closing = stream_time - grace - gap
                if sessions and sessions[0][0] < closing:  # expired: stream time past end + gap + grace
                    n = 1
                    while n < len(sessions) and sessions[n][0] < closing:
                        n += 1
                    del sessions[:n]
                lowest_end = ts - gap if ts - gap > closing else closing
                highest_start = ts + gap
                first = len(sessions)
                while first and sessions[first - 1][0] >= lowest_end:
                    first -= 1
                f = fns[source]
                agg = f.initializer()
                start = end = ts
                found: list[tuple[int, int, Any]] = []
                if first < len(sessions):
                    merger = f.merger
                    kept = []
                    for s in sessions[first:]:
                        if s[1] <= highest_start:
                            found.append(s)
                            if merger is not None:
                                agg = merger(key, agg, s[2])
                            if s[1] < start:
                                start = s[1]
                            if s[0] > end:
                                end = s[0]
                        else:
                            kept.append(s)
                    if found:
                        sessions[first:] = kept
                if not found and ts < closing:  # (a found session ends at or after the close)
                    dropped.append((i, 1))
                    continue
                agg = f.aggregator(key, value, agg)
                if start != ts or end != ts:
                    for s in found:
                        pop((s[1], s[0]), None)
                        dirty[(s[1], s[0])] = (None, context)
                bounds = (start, end)
                pop(bounds, None)
                if agg is None:  # Kafka's put(session, null): a delete
                    dirty[bounds] = (None, context)
                else:
                    dirty[bounds] = (agg, context)
                    insort(sessions, (end, start, agg), key=_END_AND_START)
        except Exception as exc:  # noqa: BLE001 - a user function's: re-raised with the record's index
            raise FoldFailed(i) from exc
        closing = stream_time - grace - gap
        stays = tuple([WindowAgg(start, end, agg, end) for end, start, agg in sessions if end >= closing])
        writes = {b: (None if a is None else WindowAgg(b[0], b[1], a, b[1]), c) for b, (a, c) in dirty.items()}
        return FoldStep(KeyState(stays), stream_time, tuple(dropped), writes)

    def close_threshold(self, window: WindowAgg) -> int:
        """A session ``[s, e]`` is final once ``e < stream_time - grace - gap``."""
        return window.end + self.gap + self.grace

    def final_order(self, window: WindowAgg) -> tuple[int, ...]:
        return (window.end, window.start)
