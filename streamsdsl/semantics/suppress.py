"""``KTable#suppress``: ``until_window_closes`` (final results) and ``until_time_limit``.

Kafka Streams' rules (``KAFKA_STREAMS_SEMANTICS.md`` §5.6;
``KI/suppress/KTableSuppressProcessorSupplier.java``,
``S/internals/InMemoryTimeOrderedKeyValueChangeBuffer.java``, ``S/internals/BufferKey.java``):

- The suppress node keeps its **own stream time**: the max timestamp of the records it has
  received (a record dropped upstream as late never reaches it).
- Each update is buffered under its key, replacing the key's previous update (value and record
  context: the emitted record carries the **latest** value and timestamp) but keeping the key's
  **buffer time**: the window end (``until_window_closes``) or the timestamp of the key's first
  buffered record (``until_time_limit``).
- After each record, buffered records are emitted while ``buffer_time <= stream_time - delay``,
  in (buffer time, serialized key) order. The delay is the grace period for time windows, gap +
  grace for session windows, the time limit for ``until_time_limit``.
- ``until_window_closes`` drops tombstones (``new is None``) instead of emitting them;
  ``until_time_limit`` emits them.
- ``until_time_limit`` with ``max_records``: after the time-based evictions, while more than
  ``max_records`` are buffered, the first in that order is emitted early (``emit_early_when_full``)
  or a `SuppressBufferFullError` is raised (``shut_down_when_full``: Kafka's StreamsException
  "buffer exceeded its max capacity").

Per-key operator
----------------
One operator keyed by the (unwindowed) record key holds one `SuppressState` per key: its
buffered windows (or its one buffered record). `suppress_step` buffers an update;
`suppress_close` emits what stream time has released, in Kafka's order within the key; an
operator calls it after each record and from an event-time timer at
`suppress_timer_threshold` ``+ 1``. `suppress_reference_run` reproduces Kafka's order over a
whole input: its evictions interleave keys in (buffer time, serialized key) order, which a
per-key operator reproduces only within a key (for docs/differences.md: the same records, each
at the same stream time, but different keys' final results released by one record may come
out in another order, and in streaming in the micro-batch whose watermark releases them).
``max_records`` is a cross-key bound; a per-key operator cannot enforce it exactly (not modelled
per key). ``max_bytes`` is not modelled.

Examples
--------
>>> spec = Suppression.until_window_closes(grace=0)
>>> run = suppress_reference_run([("a", (0, 10), Change(1), 3), ("a", (0, 10), Change(2), 5),
...                               ("b", (10, 20), Change(1), 12)], spec)
>>> [(o.key, o.window, o.change.new, o.timestamp) for o in run]
[('a', (0, 10), 2, 5)]
"""

from __future__ import annotations

import operator
from typing import Any, ClassVar, Iterable, Literal, Sequence

import attrs

from streamsdsl._validation import duration_field
from streamsdsl.errors import InvalidArgumentError, StreamsDslError
from streamsdsl.semantics.aggregation import AggFunctions
from streamsdsl.semantics.changes import ChangeBuffer
from streamsdsl.semantics.tables import Change, key_bytes
from streamsdsl.semantics.windowing import KeyState, WindowAgg, WindowStep, Windowing, WindowingRules

__all__ = [
    "Emitted", "FinalResultsRelease", "FinalResultsWindowing", "SuppressBufferFullError", "SuppressState", "Suppressed",
    "Suppression", "TimeLimitBuffer", "final_results_release", "suppress_close", "suppress_reference_run",
    "suppress_step", "suppress_timer_threshold", "time_limit_release",
]


class SuppressBufferFullError(StreamsDslError, RuntimeError):
    """A ``shut_down_when_full`` suppression buffer exceeded its capacity."""


def _positive_records(inst: Any, attribute: attrs.Attribute[Any], value: int | None) -> None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
        raise InvalidArgumentError(f"'max_records' must be an int >= 0 or None for unbounded (got {value!r}).")


@attrs.frozen
class Suppression:
    """What a suppress node does: ``mode`` ``"until_window_closes"`` (``window_kind`` ``"time"`` or
    ``"session"``) or ``"until_time_limit"``; ``delay`` (ms) as in the module docs;
    ``max_records`` (``None``: unbounded) and ``on_full`` (``"emit_early"`` / ``"shut_down"``).

    Examples
    --------
    >>> Suppression.until_window_closes(grace=10, session_gap=5).delay
    15
    >>> Suppression.until_time_limit(-1)
    Traceback (most recent call last):
    ...
    streamsdsl.errors.InvalidArgumentError: 'time_limit' must be >= 0 ms (got -1). Use 0 to emit on the next record.
    """

    mode: Literal["until_window_closes", "until_time_limit"]
    delay: int = duration_field("time_limit", positive=False, fix="Use 0 to emit on the next record.")
    window_kind: Literal["time", "session"] | None = None
    max_records: int | None = attrs.field(default=None, validator=_positive_records)
    on_full: Literal["emit_early", "shut_down"] = "emit_early"

    @classmethod
    def until_window_closes(cls, grace: int, *, session_gap: int | None = None) -> Suppression:
        """Final results of a time-windowed (``session_gap`` None) or session-windowed table."""
        if session_gap is None:
            return cls("until_window_closes", grace, "time")
        return cls("until_window_closes", grace + session_gap, "session")

    @classmethod
    def until_time_limit(cls, time_limit: int, *, max_records: int | None = None,
                         shut_down_when_full: bool = False) -> Suppression:
        return cls("until_time_limit", time_limit, None, max_records, "shut_down" if shut_down_when_full else "emit_early")

    @property
    def drops_tombstones(self) -> bool:
        return self.mode == "until_window_closes"


#: Kafka-style alias (``Suppressed.untilWindowCloses`` ...): the same spec type.
Suppressed = Suppression


@attrs.frozen
class Emitted:
    """One record a suppress node forwards: key, window bounds (``None`` unwindowed), change, ts."""

    key: Any
    window: tuple[int, int] | None
    change: Change
    timestamp: int


@attrs.frozen
class SuppressState:
    """One key's buffered updates, as ``(start, end, new, old, ts, buffer_time)`` tuples
    (``start``/``end`` ``None`` for an unwindowed table), oldest buffer time first."""

    entries: tuple[tuple[Any, ...], ...] = ()

    def to_plain(self) -> list[list[Any]]:
        return [list(e) for e in self.entries]

    @classmethod
    def from_plain(cls, plain: Sequence[Sequence[Any]] | None) -> SuppressState:
        return cls(tuple(tuple(e) for e in plain or ()))


def _window_key(spec: Suppression, key: Any, window: tuple[int, int] | None) -> bytes:
    """The serialized (windowed) key that breaks buffer-time ties."""
    kb = key_bytes(key)
    if window is None:
        return kb
    start, end = window
    if spec.window_kind == "session":
        return kb + end.to_bytes(8, "big", signed=True) + start.to_bytes(8, "big", signed=True)
    return kb + start.to_bytes(8, "big", signed=True)


def suppress_step(spec: Suppression, state: SuppressState | None, window: tuple[int, int] | None, change: Change,
                  ts: int) -> SuppressState:
    """Buffer one update of one key (the caller advances stream time, then `suppress_close`)."""
    entries = list((state or SuppressState()).entries)
    bounds = None if window is None else (window[0], window[1])
    if spec.mode == "until_window_closes" and bounds is None:
        raise InvalidArgumentError("until_window_closes suppresses a windowed table: the update needs its window.")
    for i, e in enumerate(entries):
        if (e[0], e[1]) == (bounds or (None, None)):
            entries[i] = (e[0], e[1], change.new, change.old, ts, e[5])
            return SuppressState(tuple(entries))
    buffer_time = bounds[1] if spec.mode == "until_window_closes" and bounds else ts
    start, end = bounds or (None, None)
    entries.append((start, end, change.new, change.old, ts, buffer_time))
    entries.sort(key=operator.itemgetter(5))
    return SuppressState(tuple(entries))


def _emit(spec: Suppression, key: Any, e: tuple[Any, ...]) -> Emitted | None:
    if e[2] is None and spec.drops_tombstones:
        return None
    return Emitted(key, None if e[0] is None else (e[0], e[1]), Change(e[2], e[3]), e[4])


def suppress_close(spec: Suppression, state: SuppressState, key: Any, stream_time: int) -> tuple[SuppressState, list[Emitted]]:
    """Release one key's buffered updates whose buffer time ``<= stream_time - delay``, in
    (buffer time, serialized key) order; tombstones are dropped for final results."""
    expiry = stream_time - spec.delay
    released = [e for e in state.entries if e[5] <= expiry]
    if not released:
        return state, []
    released.sort(key=lambda e: (e[5], _window_key(spec, key, None if e[0] is None else (e[0], e[1]))))
    kept = tuple(e for e in state.entries if e[5] > expiry)
    return SuppressState(kept), [x for x in (_emit(spec, key, e) for e in released) if x is not None]


def suppress_timer_threshold(spec: Suppression, state: SuppressState) -> int | None:
    """The key's next release happens at the first stream time greater than this."""
    return min(e[5] for e in state.entries) + spec.delay - 1 if state.entries else None


def suppress_reference_run(records: Iterable[tuple[Any, tuple[int, int] | None, Change, int]],
                           spec: Suppression) -> list[Emitted]:
    """Run ``(key, window, change, ts)`` updates (a table's changelog, in order) through a
    suppress node as Kafka Streams does: one buffer over all keys, evicted after each record.

    Raises
    ------
    SuppressBufferFullError
        When a ``shut_down_when_full`` buffer holds more than ``max_records`` records.
    """
    states: dict[Any, SuppressState] = {}
    stream_time = -1
    out: list[Emitted] = []
    for key, window, change, ts in records:
        stream_time = max(stream_time, ts)
        states[key] = suppress_step(spec, states.get(key), window, change, ts)
        expiry = stream_time - spec.delay
        order = sorted(
            ((e[5], _window_key(spec, k, None if e[0] is None else (e[0], e[1])), k, e)
             for k, st in states.items() for e in st.entries),
            key=operator.itemgetter(0, 1),
        )
        released = [x for x in order if x[0] <= expiry]
        if spec.max_records is not None:
            over = len(order) - len(released) - spec.max_records
            if over > 0:
                if spec.on_full == "shut_down":
                    raise SuppressBufferFullError(
                        f"Suppress buffer exceeded its max capacity: {len(order) - len(released)} records buffered, "
                        f"max_records={spec.max_records}. Use emit_early_when_full or a larger buffer.")
                released = order[:len(released) + over]
        gone: dict[Any, list[tuple[Any, ...]]] = {}
        for _, _, k, e in released:
            emitted = _emit(spec, k, e)
            if emitted is not None:
                out.append(emitted)
            gone.setdefault(k, []).append(e)
        for k, entries in gone.items():
            left = tuple(e for e in states[k].entries if e not in entries)
            if left:
                states[k] = SuppressState(left)
            else:
                del states[k]
    return out


# --- final results folded into a session / sliding aggregation -----------------------------------


@attrs.frozen
class FinalResultsWindowing(WindowingRules):
    """A windowed aggregation followed by ``suppress(until_window_closes)``, as one operator.

    The aggregation's windows are ``inner``'s; a window "closes" (`close_threshold`) when Kafka's
    suppress node releases it: at the first stream time ``>= end + delay`` (``delay``: gap +
    grace for sessions, grace for sliding windows). That is 1 ms of stream time before the
    aggregation stops accepting records for it (``end + delay < stream time``): at exactly
    ``end + delay`` a record can still update a released window, or merge a released session
    into a larger one. Kafka's suppress then releases the re-written window again at once (its
    buffer time is past), and drops the tombstone of a merged-away session. ``KeyState.finals``
    holds the windows whose current value has been released; `record_step` takes a window out
    of it when a record writes it again.

    What one record releases, in Kafka's order, is `final_results_release`.

    Examples
    --------
    >>> from streamsdsl.semantics.session import SessionWindowing
    >>> w = FinalResultsWindowing(SessionWindowing(gap=5, grace=0), delay=5)
    >>> w.close_threshold(WindowAgg(0, 3, 2, 3)), w.expiry_threshold(WindowAgg(0, 3, 2, 3))
    (7, 8)
    """

    inner: Windowing
    delay: int
    #: Whether the aggregation's store has Kafka's record cache (emit on update, the default
    #: ``statestore.cache.max.bytes``): the suppress node then receives, per record, each
    #: window's last write once (the cache's flush), not every write (`final_results_release`).
    cached: bool = True

    #: The operator needs the stream time before each record (`final_results_release`).
    stream_time_before: ClassVar[bool] = True

    @property
    def drops_null_values(self) -> bool:  # type: ignore[override]
        return self.inner.drops_null_values

    @property
    def reads_store_time(self) -> bool:
        """The aggregation's step reads its store's time (uncached sessions): a suppress after it
        changes nothing about what the store returns."""
        return bool(getattr(self.inner, "reads_store_time", False))

    def step(self, windows: Iterable[WindowAgg], key: Any, value: Any, ts: int, stream_time: int,
             fns: AggFunctions, *, store_time: int | None = None) -> WindowStep:
        if store_time is not None and self.reads_store_time:
            return self.inner.step(windows, key, value, ts, stream_time, fns, store_time=store_time)  # type: ignore[call-arg]
        return self.inner.step(windows, key, value, ts, stream_time, fns)

    def close_threshold(self, window: WindowAgg) -> int:
        """Released at the first stream time greater than this (``end <= stream_time - delay``)."""
        return window.end + self.delay - 1

    def expiry_threshold(self, window: WindowAgg) -> int:
        return self.inner.expiry_threshold(window)

    def final_order(self, window: WindowAgg) -> tuple[int, ...]:
        """Kafka's eviction order is (buffer time = end, serialized windowed key): the record
        key comes right after the end (a key has one window per end)."""
        return (window.end,)


@attrs.frozen
class FinalResultsRelease:
    """What a suppress node downstream of one key's aggregation releases around one record.

    ``passed``: windows released because stream time passed their threshold, with the value
    they had then: before the record (by other keys' records) or right after the record's
    first write raised stream time; each comes out with the first record whose stream time
    passes its threshold, in (end, key) order with every other key's. ``immediate``: windows
    the record wrote after they had been released, released again at once, in write order,
    after ``passed``."""

    passed: tuple[WindowAgg, ...] = ()
    immediate: tuple[WindowAgg, ...] = ()


def final_results_release(windowing: FinalResultsWindowing, before: KeyState,
                          step: WindowStep | Any | Sequence[WindowStep | Any], stream_time_before: int,
                          stream_time: int) -> FinalResultsRelease:
    """Kafka's suppress node applied to what one record of one key forwards.

    ``step`` may be a sequence of steps: the records of this key that one input record caused
    (a ``flat_map_values`` before the aggregation, a join with several matches), which Kafka's
    record cache forwards together at the input record's flush; ``before`` and
    ``stream_time_before`` are then those before the first, ``stream_time`` the one after the last.

    ``before`` is the key's state before the record (``finals``: the windows whose current
    value was released), ``step`` the record's store operations (``deletes``, then ``puts``, in
    Kafka's write order; what of them reaches the suppress node is `_forwarded_writes`: with
    the record cache, each window's last write once), ``stream_time_before``/``stream_time`` the stream time before
    and after the record (all keys'). The suppress node's own stream time is the max timestamp
    it was forwarded: it passes ``stream_time_before`` at the first forwarded update that
    carries a later timestamp, and it evicts after every forwarded record, all keys' windows
    whose ``end <= stream time - delay`` ("KTableSuppressProcessor.enforceConstraints").
    A tombstone (a merged-away session, a ``None`` aggregate) replaces the buffered update of
    its window and is dropped when evicted.

    Examples
    --------
    Gap 5, grace 0: ``[0,0]`` was released when another key's record took stream time to 5;
    this key's record at 5 merges it into ``[0,5]`` (pending until stream time 10):

    >>> from streamsdsl.semantics.session import SessionWindowing
    >>> w = FinalResultsWindowing(SessionWindowing(gap=5, grace=0), delay=5)
    >>> merged = WindowStep((WindowAgg(0, 5, 2, 5),), (WindowAgg(0, 5, 2, 5),), (WindowAgg(0, 0, 1, 0),))
    >>> final_results_release(w, KeyState((WindowAgg(0, 0, 1, 0),)), merged, 5, 5)
    FinalResultsRelease(passed=(WindowAgg(start=0, end=0, agg=1, ts=0),), immediate=())

    Had this record itself taken stream time from 4 to 5, ``[0,0]`` would never be released:

    >>> final_results_release(w, KeyState((WindowAgg(0, 0, 1, 0),)), merged, 4, 5)
    FinalResultsRelease(passed=(), immediate=())
    """
    writes = _forwarded_writes(windowing, before, step)
    threshold = windowing.close_threshold
    current = {w.start: w for w in before.windows}
    released = set(before.finals)

    def evict(now: int) -> list[WindowAgg]:
        out = [w for s, w in current.items() if s not in released and threshold(w) < now]
        if len(out) > 1:
            out.sort(key=lambda w: (w.end, w.start))
        released.update(w.start for w in out)
        return out

    suppress_time = stream_time_before
    passed = evict(suppress_time)  # released by the records between this key's previous one and this one
    immediate: list[WindowAgg] = []
    for w, deleted in writes:
        if deleted:  # tombstones: they carry the old end, never a later time
            current.pop(w.start, None)
            released.discard(w.start)
            continue
        released.discard(w.start)
        if w.agg is None:
            current.pop(w.start, None)
        else:
            current[w.start] = w
        if w.ts > suppress_time:
            suppress_time = w.ts
            passed += evict(suppress_time)
        else:
            immediate += evict(suppress_time)
    if stream_time > suppress_time:  # not reached by a write (no such record: kept for safety)
        passed += evict(stream_time)
    return FinalResultsRelease(tuple(passed), tuple(immediate))


def _forwarded_writes(windowing: FinalResultsWindowing, before: KeyState,
                      step: WindowStep | Any | Sequence[WindowStep | Any]) -> list[tuple[WindowAgg, bool]]:
    """What the aggregation forwards to the suppress node for one record: ``(window, deleted)``
    pairs in forwarding order (``deleted``: ``step.deletes``' tombstones, which never carry a
    later time; a put of a ``None`` aggregate is a put).

    Without the record cache, every store write: the deletes, then the puts. With it (Kafka's
    TopologyTestDriver flushes the cache after each record), each window's last write once, in
    the order the windows were last written, and no tombstone of a window that had not reached
    the store before (`streamsdsl.semantics.changes.ChangeBuffer`): a sliding window the record
    writes twice (its previous record's right window that is also its own left window) reaches
    the suppress node once, with its last value.
    """
    steps = step if isinstance(step, (list, tuple)) else (step,)
    writes = [write for one in steps for write in (*((w, True) for w in one.deletes), *((w, False) for w in one.puts))]
    if not windowing.cached:
        return writes
    buffer = ChangeBuffer(w.bounds for w in before.windows)
    last: dict[tuple[int, int], tuple[WindowAgg, bool]] = {}
    for w, deleted in writes:
        if deleted or w.agg is None:
            buffer.delete(w.bounds)
        else:
            buffer.put(w.bounds, w)
        last[w.bounds] = (w, deleted)
    return [last[bounds] for bounds, _ in buffer.flush()]


# --- until_time_limit: one buffered update per key ---------------------------------------------


@attrs.frozen
class TimeLimitBuffer(WindowingRules):
    """``suppress(until_time_limit(limit))`` as a keyed operator's rule: a key's buffered update
    is one `WindowAgg` with ``start == end ==`` its buffer time (the timestamp of the first
    update buffered since the key's last release), ``agg`` the latest value (``None``: a
    tombstone, which is forwarded) and ``ts`` the latest timestamp. It is released at the first
    stream time ``>= buffer time + limit`` (`close_threshold` + 1) and leaves the state then.
    What one record releases is `time_limit_release`.

    Examples
    --------
    >>> TimeLimitBuffer(limit=10).close_threshold(WindowAgg(3, 3, "v", 5))
    12
    """

    limit: int

    drops_null_values: ClassVar[bool] = False
    #: The operator needs the stream time before each record (`time_limit_release`).
    stream_time_before: ClassVar[bool] = True

    def step(self, windows: Iterable[WindowAgg], key: Any, value: Any, ts: int, stream_time: int,
             fns: AggFunctions) -> WindowStep:
        raise NotImplementedError("a suppression buffer is not an aggregation: use time_limit_release")

    def close_threshold(self, window: WindowAgg) -> int:
        return window.end + self.limit - 1

    def final_order(self, window: WindowAgg) -> tuple[int, ...]:
        return (window.end,)


def time_limit_release(buffer: TimeLimitBuffer, state: KeyState, value: Any, ts: int, stream_time_before: int,
                       stream_time: int) -> tuple[KeyState, FinalResultsRelease]:
    """Kafka's suppress node (``until_time_limit``) applied to one update of one key.

    First, a buffered update whose threshold stream time passed before this record (another
    key's record) is released (``passed``). Then the update is buffered: it replaces the key's
    buffered update but keeps its buffer time, or starts a new one with buffer time ``ts``.
    Last, the suppress node evicts at ``stream_time``: the update is released, ``passed`` if this
    record raised stream time (it comes out with every other key's release, in (buffer time,
    key) order), ``immediate`` otherwise.

    Examples
    --------
    >>> b = TimeLimitBuffer(limit=2)
    >>> state, out = time_limit_release(b, KeyState(), "v1", 0, -1, 0)
    >>> state, out = time_limit_release(b, state, "v2", 1, 1, 1)   # keeps buffer time 0
    >>> state.windows, out
    ((WindowAgg(start=0, end=0, agg='v2', ts=1),), FinalResultsRelease(passed=(), immediate=()))
    >>> time_limit_release(b, state, "v3", 2, 1, 2)[1]              # 0 <= 2 - 2: released with v3
    FinalResultsRelease(passed=(WindowAgg(start=0, end=0, agg='v3', ts=2),), immediate=())
    """
    threshold = buffer.close_threshold(state.windows[0]) if state.windows else None
    passed: tuple[WindowAgg, ...] = ()
    buffer_time = ts
    if threshold is not None and threshold < stream_time_before:
        passed = state.windows
    elif state.windows:
        buffer_time = state.windows[0].start
    entry = WindowAgg(buffer_time, buffer_time, value, ts)
    if buffer.close_threshold(entry) >= stream_time:
        return KeyState((entry,)), FinalResultsRelease(passed)
    if stream_time > stream_time_before:
        return KeyState(), FinalResultsRelease((*passed, entry))
    return KeyState(), FinalResultsRelease(passed, (entry,))
