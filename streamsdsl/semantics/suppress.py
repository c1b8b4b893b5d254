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
from typing import Any, Iterable, Literal, Sequence

import attrs

from streamsdsl._validation import duration_field
from streamsdsl.errors import InvalidArgumentError, StreamsDslError
from streamsdsl.semantics.tables import Change, key_bytes

__all__ = [
    "Emitted", "SuppressBufferFullError", "SuppressState", "Suppressed", "Suppression", "suppress_close", "suppress_reference_run",
    "suppress_step", "suppress_timer_threshold",
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
