"""What every window kind shares: the stored window, the outcome of one record, the
`Windowing` protocol, and the one record step that every operator and the reference use.

A key's state is its stored windows (`WindowAgg`) plus the starts of those already emitted as
final (`KeyState`). A windowing strategy — `SessionWindowing`, `TimeWindowing`,
`SlidingWindowing` or `Unwindowed` — applies one record with ``step`` and returns the new
windows plus the store operations Kafka Streams performs (deletes of merged-away windows, then
puts). `record_step` wraps ``step`` with the close rule: after a record, windows whose close
threshold stream time has passed are final (each emitted on close exactly once).

What is *forwarded* is decided by the emit strategy: on update the store operations pass
through a `ChangeBuffer` (Kafka's record cache); on close each window is forwarded once, at
the first stream time greater than its ``close_threshold``, ordered by ``final_order``.

Examples
--------
>>> from streamsdsl.semantics.aggregation import AggFunctions
>>> from streamsdsl.semantics.timewindow import TimeWindowing
>>> count = AggFunctions(lambda: 0, lambda k, v, a: a + 1)
>>> w = TimeWindowing(size=10, advance=10, grace=0)
>>> s = record_step(w, KeyState(), "k", "v", 3, 3, count)
>>> s.puts, s.closed
((WindowAgg(start=0, end=10, agg=1, ts=3),), ())
>>> record_step(w, s.state, "k", "v", 12, 12, count).closed
(WindowAgg(start=0, end=10, agg=1, ts=3),)
"""

from __future__ import annotations

import operator
from typing import Any, ClassVar, Iterable, Protocol

import attrs

from streamsdsl.semantics.aggregation import AggFunctions
from streamsdsl.semantics.changes import ChangeBuffer

__all__ = [
    "NEVER", "CloseStep", "FoldFailed", "FoldStep", "KeyState", "RecordStep", "WindowAgg", "WindowStep", "Windowing",
    "WindowingRules", "advance_stream_time", "close_step", "fold_records", "idle_close_step", "record_step",
]

#: Sort key of stored windows by start (faster than the attrs-generated ordering).
BY_START = operator.attrgetter("start")

#: `RecordStep.write_to` without a key: the cache's keys are window bounds.
_BOUNDS_ONLY: Any = object()

#: A threshold no stream time reaches: the window never closes (unwindowed aggregation).
NEVER = 2**62


@attrs.frozen(order=True)
class WindowAgg:
    """One stored window of one key: start, end (ms), aggregate, and the timestamp its records
    are forwarded with (max record timestamp for time windows, the end for sessions)."""

    start: int
    end: int
    agg: Any = attrs.field(order=False, eq=True)
    ts: int = attrs.field(order=False)

    @property
    def bounds(self) -> tuple[int, int]:
        return (self.start, self.end)


@attrs.frozen
class WindowStep:
    """The store operations one record causes for one key.

    ``windows``: the key's stored windows afterwards (ascending start; sessions in Kafka's
    (end, start) order); ``deletes``: windows
    merged away (sessions), in Kafka's order; ``puts``: the store writes in Kafka's order
    (a ``None`` aggregate is a delete written as a put, as Kafka's ``put(key, null)``);
    ``dropped``: how many times the record counts in ``dropped-records-total``.
    """

    windows: tuple[WindowAgg, ...]
    puts: tuple[WindowAgg, ...] = ()
    deletes: tuple[WindowAgg, ...] = ()
    dropped: int = 0


class Windowing(Protocol):
    """A window kind's per-record rule (Kafka's ``process``) and its close and expiry rules.

    ``drops_null_values``: a record with a null value is dropped before it advances stream time.
    """

    drops_null_values: ClassVar[bool]

    def step(self, windows: Iterable[WindowAgg], key: Any, value: Any, ts: int, stream_time: int,
             fns: AggFunctions) -> WindowStep:
        """Apply one record (``stream_time`` already includes ``ts``) to one key's windows."""
        ...

    def close_threshold(self, window: WindowAgg) -> int:
        """The window is final at the first stream time greater than this."""
        ...

    def expiry_threshold(self, window: WindowAgg) -> int:
        """The window can leave the state at the first stream time greater than this."""
        ...

    def final_order(self, window: WindowAgg) -> tuple[int, ...]:
        """Sort key of on-close records within one stream-time step (before the record key)."""
        ...

    @property
    def uncached_store_time_unit(self) -> int | None:
        """See `WindowingRules.uncached_store_time_unit`."""
        ...


class WindowingRules:
    """Base of the window kinds: their close and expiry thresholds (a window closes, or expires, at
    the first stream time greater than its threshold)."""

    #: In a cogroup whose inputs keep their own stream times, whether Kafka's record cache still
    #: returns a window that a faster input's stream time has expired, so that a slower input's
    #: record adds to it (`record_step`'s ``expiry_time``): time and sliding windows, which are
    #: only ever put. Without the cache Kafka's store hides it (its retention follows the
    #: fastest input).
    cache_keeps_expired_windows: ClassVar[bool] = False

    #: In a cogroup whose inputs keep their own stream times, whether a window leaves the state
    #: once the store's time, the greatest of the inputs' stream times, has expired it, for
    #: every key and every input (`record_step`'s ``expiry_time`` and ``stream_time_before``):
    #: sessions, whose closed session is final (docs/differences.md, Session windows). Kafka's
    #: uncached store hides such a session from a slower input's record, as streamsdsl does;
    #: Kafka's record cache still merges it and forwards no tombstone for it (the store it asks
    #: for the old value has expired it).
    store_time_expires_windows: ClassVar[bool] = False

    @property
    def uncached_store_time_unit(self) -> int | None:
        """In a cogroup without the record cache, whose inputs keep their own stream times:
        Kafka's one window store for all inputs keeps a time of its own, the greatest of the
        inputs' stream times rounded down to a multiple of this unit (for time windows the
        advance: the greatest window start put). Its fetch hides a window whose
        `expiry_threshold` that time passes, from every input and key, and a slower input's
        record starts the window again from the initializer (`record_step`'s ``expiry_time``).
        ``None``: the window kind keeps expiring by each input's own stream time."""
        return None

    def close_threshold(self, window: WindowAgg) -> int:
        raise NotImplementedError

    def expiry_threshold(self, window: WindowAgg) -> int:
        """By default no record reads a closed window again: it leaves the state when it closes
        (sliding windows stay readable longer)."""
        return self.close_threshold(window)


def advance_stream_time(windowing: Windowing, stream_time: int, ts: int, value: Any) -> int:
    """Stream time after a record: the max timestamp seen, unless the window kind drops a
    null-value record before it advances stream time (sliding windows)."""
    if value is None and windowing.drops_null_values:
        return stream_time
    return max(stream_time, ts)


@attrs.frozen
class KeyState:
    """One key's state: its stored windows and the starts of those already final (sliding
    windows stay readable after they close, until they expire).

    With idle close (`idle_close_step`) also: ``floor``, the key's own stream time after its
    windows were closed idle (-1: none; the key's records are judged, and its windows closed,
    by the later of it and the operator's stream time), and ``last_record_at``, the wall-clock
    time (ms) its last record reached the aggregation (-1: not kept; a host's per-key timer reads
    it, while whether to close is the aggregation's, `AggregateKernel.close_idle`)."""

    windows: tuple[WindowAgg, ...] = ()
    finals: frozenset[int] = frozenset()
    floor: int = -1
    last_record_at: int = -1

    def open_windows(self) -> list[WindowAgg]:
        return [w for w in self.windows if w.start not in self.finals]

    def timer_thresholds(self, windowing: Windowing) -> list[int]:
        """When each stored window next needs attention: its close, or (final) its expiry."""
        thresholds = (windowing.expiry_threshold(w) if w.start in self.finals else windowing.close_threshold(w)
                      for w in self.windows)
        return [t for t in thresholds if t < NEVER]


@attrs.frozen
class CloseStep:
    """What stream time does to a key's state: ``closed`` became final now, in ``final_order``
    (each is emitted on close exactly once); ``state`` is what stays."""

    closed: tuple[WindowAgg, ...]
    state: KeyState


def close_step(windowing: Windowing, state: KeyState, stream_time: int, *, expiry_time: int | None = None) -> CloseStep:
    """Advance a key's state to ``stream_time``: close, and drop expired windows (those whose
    expiry threshold ``expiry_time``, by default ``stream_time``, has passed).

    Examples
    --------
    >>> from streamsdsl.semantics.timewindow import TimeWindowing
    >>> w = TimeWindowing(size=10, advance=10, grace=0)
    >>> close_step(w, KeyState((WindowAgg(0, 10, 1, 3), WindowAgg(10, 20, 1, 12))), 10).closed
    (WindowAgg(start=0, end=10, agg=1, ts=3),)
    """
    finals = state.finals
    closed: list[WindowAgg] = []
    kept: list[WindowAgg] = []
    close, expiry = windowing.close_threshold, windowing.expiry_threshold
    expire_at = stream_time if expiry_time is None else expiry_time
    for w in state.windows:
        if stream_time > close(w) and w.start not in finals:
            closed.append(w)
        if expire_at <= expiry(w):
            kept.append(w)
    if not closed and len(kept) == len(state.windows):
        return CloseStep((), state)  # the common case: nothing closed, nothing expired
    if closed:
        closed.sort(key=windowing.final_order)
        done = finals | {w.start for w in closed}
        finals = frozenset(w.start for w in kept if w.start in done)
    elif finals:
        finals = frozenset(w.start for w in kept if w.start in finals)
    return CloseStep(tuple(closed), KeyState(tuple(kept), finals, state.floor, state.last_record_at))


def idle_close_step(windowing: Windowing, state: KeyState, stream_time: int) -> CloseStep:
    """Close every open window of a key that has been idle (streamsdsl's idle close, not Kafka's):
    the key's stream time (its ``floor``) moves to the first time past every open window's close
    threshold, as if stream time had passed them all; they are ``closed`` in ``final_order``, and
    what that time expires leaves the state. A later record of the key is judged by that time:
    one for a window closed here is late.

    Examples
    --------
    >>> from streamsdsl.semantics.timewindow import TimeWindowing
    >>> w = TimeWindowing(size=10, advance=10, grace=5)
    >>> step = idle_close_step(w, KeyState((WindowAgg(0, 10, 1, 3), WindowAgg(10, 20, 1, 12))), 12)
    >>> step.closed
    (WindowAgg(start=0, end=10, agg=1, ts=3), WindowAgg(start=10, end=20, agg=1, ts=12))
    >>> step.state.floor, step.state.windows
    (25, ())
    """
    open_windows = state.open_windows()
    if not open_windows:
        return CloseStep((), state)
    close = windowing.close_threshold
    floor = max(state.floor, stream_time, max(close(w) for w in open_windows) + 1)
    step = close_step(windowing, attrs.evolve(state, floor=floor), floor)
    return step


@attrs.frozen
class RecordStep:
    """One record applied to one key: the new state, the store operations, the drop count and
    the windows the record's stream time closed."""

    state: KeyState
    puts: tuple[WindowAgg, ...]
    deletes: tuple[WindowAgg, ...]
    dropped: int
    closed: tuple[WindowAgg, ...]

    def write_to(self, buffer: ChangeBuffer, key: Any = _BOUNDS_ONLY) -> None:
        """Record the store operations in a record cache (deletes first, then puts; a put of a
        ``None`` aggregate is a delete, as Kafka's ``put(key, null)``). The cache's keys are the
        window bounds, or ``(key, bounds)`` when ``key`` is given (one cache over many keys)."""
        def at(w: WindowAgg) -> Any:
            return w.bounds if key is _BOUNDS_ONLY else (key, w.bounds)
        for w in self.deletes:
            buffer.delete(at(w))
        for w in self.puts:
            if w.agg is None:
                buffer.delete(at(w))
            else:
                buffer.put(at(w), w)


def record_step(windowing: Windowing, state: KeyState, key: Any, value: Any, ts: int, stream_time: int,
                fns: AggFunctions, *, stream_time_before: int | None = None,
                expiry_time: int | None = None) -> RecordStep:
    """Apply one record to one key's state (``stream_time`` already includes the record, see
    `advance_stream_time`), then close what that stream time closes.

    The step does not see windows that ``stream_time`` has expired: an operator advances a key's
    state only when the key has a record or a timer, while Kafka's store stops returning a
    window once stream time passes its retention, whatever the key. An expired window that is
    not final yet still closes (and is emitted on close) below. ``stream_time_before``: the
    stream time before the record, for a window kind whose ``reads_store_time`` says its step
    reads it (uncached sessions: what Kafka's store still returns). ``expiry_time``: the stream
    time windows expire by, when it is not ``stream_time``: a cogroup whose inputs each keep
    their own stream time (Kafka's one aggregate processor per input over one shared store)
    passes the least of them for time and sliding windows with the record cache, so that a
    window leaves the state only once no input can write it any more (a record of a slower
    input still finds, and adds to, a window that a faster input's stream time has closed:
    Kafka's cache keeps it), and the greatest of them for sessions, the store's time, by which
    a closed session is final (`WindowingRules.store_time_expires_windows`; the cogroup passes
    the greatest of the stream times before the record as ``stream_time_before`` too).

    Examples
    --------
    >>> from streamsdsl.semantics.timewindow import TimeWindowing
    >>> count = AggFunctions(lambda: 0, lambda k, v, a: a + 1)
    >>> w = TimeWindowing(size=10, advance=10, grace=0)
    >>> s = record_step(w, KeyState(), "k", "v", 3, 3, count)
    >>> s = record_step(w, s.state, "k", "v", 12, 12, count, expiry_time=3)   # [0, 10) closed, kept
    >>> record_step(w, s.state, "k", "v", 5, 5, count, expiry_time=5).puts   # the slower input's record
    (WindowAgg(start=0, end=10, agg=2, ts=5),)
    """
    windows = state.windows
    expiry = windowing.expiry_threshold
    expire_at = stream_time if expiry_time is None else expiry_time
    expired = [w for w in windows if expire_at > expiry(w)]
    if expired:
        windows = tuple([w for w in windows if expire_at <= expiry(w)])
    if stream_time_before is not None and getattr(windowing, "reads_store_time", False):
        step = windowing.step(windows, key, value, ts, stream_time, fns, store_time=stream_time_before)  # type: ignore[call-arg]
    else:
        step = windowing.step(windows, key, value, ts, stream_time, fns)
    finals = state.finals
    if finals and (step.puts or step.deletes):
        # a window written again is not final any more (only a suppressed table's windows are
        # written after they were released: `streamsdsl.semantics.suppress.FinalResultsWindowing`)
        finals = finals - {w.start for w in step.puts} - {w.start for w in step.deletes}
    close = windowing.close_threshold
    for w in step.windows:
        if (stream_time > close(w) and w.start not in finals) or expire_at > expiry(w):
            break
    else:  # the common case (`close_step`'s): nothing closes, nothing expires
        if not expired:
            return RecordStep(KeyState(step.windows, finals, state.floor, state.last_record_at), step.puts,
                              step.deletes, step.dropped, ())
    closed = close_step(windowing, KeyState((*expired, *step.windows), finals, state.floor, state.last_record_at),
                        stream_time, expiry_time=expiry_time)
    return RecordStep(closed.state, step.puts, step.deletes, step.dropped, closed.closed)


@attrs.frozen
class FoldStep:
    """What one key's records of one micro-batch do together (`fold_records`, a window kind's
    ``fold_cached``): exactly what `record_step` applied to each of them in turn does.

    ``state`` and ``stream_time``: after the last record; ``dropped``: ``(record index, count)``
    per dropped record; ``writes``: the store writes, either compacted as Kafka's record cache
    holds them (``compact``: window bounds → ``(window or None for a delete, context of the
    last write)``, in the order last written) or every write in order (``(record index,
    bounds, window or None for a delete)``; a put of a ``None`` aggregate is the put itself)."""

    state: KeyState
    stream_time: int
    dropped: tuple[tuple[int, int], ...]
    writes: Any


class FoldFailed(Exception):
    """A user function raised while a fold applied record ``index`` (the function's exception
    is the ``__cause__``)."""

    def __init__(self, index: int) -> None:
        super().__init__(index)
        self.index = index


def fold_records(windowing: Windowing, state: KeyState, key: Any, records: Iterable[tuple[Any, int, int, Any]],
                 stream_time: int, fns: Any, *, compact: bool) -> FoldStep:
    """Apply one key's records in order, as `record_step` per record does, with one stream time
    over the inputs: ``records`` are ``(value, timestamp, input, context)``, ``fns`` the
    functions per input, ``stream_time`` the stream time before the first record. The writes
    are collected as `FoldStep` says (``compact``: as the record cache holds them).

    The generic fold of every window kind; a kind with a ``fold_cached(windows, key, records,
    stream_time, fns)`` method (sessions) applies a key's records under the record cache itself,
    without a state object per record, to the same result (a property test holds them equal).

    Examples
    --------
    >>> from streamsdsl.semantics.timewindow import TimeWindowing
    >>> count = AggFunctions(lambda: 0, lambda k, v, a: a + 1)
    >>> w = TimeWindowing(size=10, advance=10, grace=0)
    >>> f = fold_records(w, KeyState(), "k", [("v", 3, 0, "r0"), ("v", 5, 0, "r1")], -1, [count], compact=True)
    >>> f.writes, f.stream_time
    ({(0, 10): (WindowAgg(start=0, end=10, agg=2, ts=5), 'r1')}, 5)
    """
    dropped: list[tuple[int, int]] = []
    dirty: dict[tuple[int, int], tuple[WindowAgg | None, Any]] = {}
    log: list[tuple[int, tuple[int, int], WindowAgg | None]] = []
    i = -1
    try:
        for i, (value, ts, source, context) in enumerate(records):
            before = stream_time
            stream_time = advance_stream_time(windowing, stream_time, ts, value)
            step = record_step(windowing, state, key, value, ts, stream_time, fns[source], stream_time_before=before)
            state = step.state
            if step.dropped:
                dropped.append((i, step.dropped))
            if compact:
                for w in step.deletes:
                    dirty.pop(w.bounds, None)
                    dirty[w.bounds] = (None, context)
                for w in step.puts:
                    dirty.pop(w.bounds, None)
                    dirty[w.bounds] = (None if w.agg is None else w, context)
            else:
                log.extend((i, w.bounds, None) for w in step.deletes)
                log.extend((i, w.bounds, w) for w in step.puts)
    except Exception as exc:  # noqa: BLE001 - a user function's: re-raised with the record's index
        raise FoldFailed(i) from exc
    return FoldStep(state, stream_time, tuple(dropped), dirty if compact else log)
