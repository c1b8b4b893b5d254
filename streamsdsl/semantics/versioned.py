"""Versioned tables (KIP-889, KIP-914) and the stream–table join's grace buffer (KIP-923).

Kafka Streams' rules (``S/internals/RocksDBVersionedStore.java``, ``KI/KTableSource.java``,
``KI/KStreamKTableJoinProcessor.java``, ``S/internals/RocksDBTimeOrderedKeyValueBuffer.java``):

- A **versioned store** keeps every version of a key: a value (or a tombstone, ``None``) valid
  from its timestamp until the next version's. The store's *stream time* is the largest
  timestamp put into it (over all keys). A put whose timestamp is older than stream time minus
  the history retention is refused (``PUT_RETURN_CODE_NOT_PUT``); a put at a timestamp a version
  already has replaces that version. A put is the key's *latest* when its timestamp is at least
  the newest version's (tombstones included).
- ``get(key, as_of)``: the version valid at ``as_of`` (``None`` for a tombstone or no version).
  When ``as_of`` is older than stream time minus the history retention, only the latest version
  is returned, if it is old enough; else ``None``.
- A **versioned table source** forwards every record its store took, the out-of-order ones too
  (with ``is_latest`` false: a table–table join, a ``group_by`` and a foreign-key join skip them);
  a refused record is not forwarded, and counted as dropped (the store's ``droppedRecordsSensor``).
  A versioned store has no record cache, so a tombstone of an absent key is forwarded.
- A **stream–table join** reads a versioned table as of the stream record's timestamp.
- **Grace period** (`GraceBuffer`): a stream record (not dropped) whose timestamp is older than
  the buffer's stream time (the largest timestamp buffered) minus the grace period joins at
  once. Otherwise it is buffered, and then every buffered record with ``ts <= buffer time -
  grace`` is joined, in (timestamp, serialized key, arrival) order. Kafka's buffer cannot hold a
  null key (its left join then fails with a ``NullPointerException``); here the left join joins
  a null-key record at once.

Examples
--------
>>> h = VersionHistory()
>>> h, code, t = versioned_put(h, "a", 10, store_time=-1, retention=100)
>>> h, code, t = versioned_put(h, "b", 20, store_time=t, retention=100)
>>> h, code, t = versioned_put(h, "z", 15, store_time=t, retention=100)   # out of order
>>> code
'not-latest'
>>> [versioned_get(h, at, t, 100) for at in (5, 12, 15, 25)]
[None, TableValue(value='a', ts=10), TableValue(value='z', ts=15), TableValue(value='b', ts=20)]
"""

from __future__ import annotations

import bisect
from typing import Any, Callable, Iterable

import attrs

from streamsdsl.semantics.joiners import for_key
from streamsdsl.semantics.tables import DROP_NULL_KEY, Output, TableValue

__all__ = [
    "LATEST", "NOT_LATEST", "NOT_PUT", "BufferedRecord", "GraceBuffer", "VersionHistory", "VersionedSourceStep",
    "NOT_FORWARDED", "grace_join_reference_run", "grace_step", "versioned_get", "versioned_put",
    "versioned_source_step",
]

#: What a put did (Kafka's put return codes): the key's latest version, an older one, refused.
LATEST = "latest"
NOT_LATEST = "not-latest"
NOT_PUT = "not-put"

#: No timestamp seen yet (Kafka's ``ConsumerRecord.NO_TIMESTAMP``).
NO_TIME = -1


@attrs.frozen
class VersionHistory:
    """One key's versions, oldest first: ``(timestamp, value)`` pairs, ``value`` ``None`` for a
    tombstone. Versions no lookup can reach any more are pruned as stream time advances."""

    versions: tuple[tuple[int, Any], ...] = ()

    def latest(self) -> TableValue | None:
        """The key's current value (``None``: absent or deleted): Kafka's ``get(key)``."""
        if not self.versions or self.versions[-1][1] is None:
            return None
        ts, value = self.versions[-1]
        return TableValue(value, ts)

    def to_plain(self) -> list[list[Any]]:
        return [[ts, value] for ts, value in self.versions]

    @classmethod
    def from_plain(cls, plain: Iterable[Any] | None) -> VersionHistory:
        return cls(tuple((int(ts), value) for ts, value in plain or ()))


def _prune(versions: list[tuple[int, Any]], store_time: int, retention: int) -> tuple[tuple[int, Any], ...]:
    """Drop the versions no lookup reaches: those replaced by a later version at or before the
    oldest readable time (``store_time - retention``)."""
    horizon = store_time - retention
    keep_from = 0
    for i in range(1, len(versions)):
        if versions[i][0] <= horizon:
            keep_from = i
    return tuple(versions[keep_from:])


def versioned_put(history: VersionHistory, value: Any, ts: int, *, store_time: int,
                  retention: int) -> tuple[VersionHistory, str, int]:
    """Put ``value`` (``None``: a tombstone) at ``ts``: the new history, `LATEST` / `NOT_LATEST` /
    `NOT_PUT`, and the store's stream time after the put (``store_time``: before it)."""
    if ts < store_time - retention:
        return history, NOT_PUT, store_time
    store_time = max(store_time, ts)
    versions = list(history.versions)
    stamps = [v[0] for v in versions]
    i = bisect.bisect_left(stamps, ts)
    code = LATEST if i >= len(versions) - (1 if versions and stamps[-1] == ts else 0) else NOT_LATEST
    if i < len(versions) and stamps[i] == ts:
        versions[i] = (ts, value)
    else:
        versions.insert(i, (ts, value))
    return VersionHistory(_prune(versions, store_time, retention)), code, store_time


def versioned_get(history: VersionHistory | None, as_of: int, store_time: int, retention: int) -> TableValue | None:
    """The key's version valid at ``as_of`` (``None``: none, or a tombstone): Kafka's
    ``VersionedKeyValueStore.get(key, asOfTimestamp)``."""
    if history is None or not history.versions:
        return None
    if as_of < store_time - retention:
        latest = history.latest()
        return latest if latest is not None and latest.ts <= as_of else None
    i = bisect.bisect_right([v[0] for v in history.versions], as_of)
    if i == 0:
        return None
    ts, value = history.versions[i - 1]
    return None if value is None else TableValue(value, ts)


@attrs.frozen
class VersionedSourceStep:
    """What one record does to a versioned table source: the key's history and the store's
    stream time after it, whether it is forwarded (``None``: not), and whether it is the key's
    latest version; ``dropped`` for a null key."""

    history: VersionHistory
    store_time: int
    forwarded: Any
    is_latest: bool
    dropped: str | None = None


_NOT_FORWARDED = object()


def versioned_source_step(history: VersionHistory | None, key: Any, value: Any, ts: int, *, store_time: int,
                          retention: int) -> VersionedSourceStep:
    """Apply one record to a versioned table source (``KTableSource.process`` over a versioned
    store). ``forwarded`` is the record's value (``None``: a tombstone) or `NOT_FORWARDED`.

    Examples
    --------
    >>> s = versioned_source_step(None, "k", None, 5, store_time=-1, retention=10)
    >>> s.forwarded is None, s.is_latest      # a tombstone of an absent key is forwarded
    (True, True)
    >>> versioned_source_step(s.history, "k", "old", 1, store_time=20, retention=10).forwarded is NOT_FORWARDED
    True
    """
    history = history or VersionHistory()
    if key is None:
        return VersionedSourceStep(history, store_time, NOT_FORWARDED, False, DROP_NULL_KEY)
    history, code, store_time = versioned_put(history, value, ts, store_time=store_time, retention=retention)
    if code == NOT_PUT:
        return VersionedSourceStep(history, store_time, NOT_FORWARDED, False)
    return VersionedSourceStep(history, store_time, value, code == LATEST)


NOT_FORWARDED: Any = _NOT_FORWARDED


# --- the grace buffer ---------------------------------------------------------------------------------


@attrs.frozen
class BufferedRecord:
    """A stream record waiting in the grace buffer: its key, value, timestamp, the serialized
    key (the order among equal timestamps), the arrival number and what the host carries along
    (headers, source position)."""

    key: Any
    value: Any
    ts: int
    key_order: bytes
    seq: int
    extra: Any = None

    @property
    def order(self) -> tuple[int, bytes, int]:
        return (self.ts, self.key_order, self.seq)


@attrs.frozen
class GraceBuffer:
    """The grace buffer of one join processor (all keys of a task): its stream time (the largest
    timestamp buffered), the records waiting in (timestamp, key bytes, arrival) order, and the
    next arrival number."""

    time: int = NO_TIME
    records: tuple[BufferedRecord, ...] = ()
    seq: int = 0


def grace_step(buffer: GraceBuffer, grace: int, key: Any, value: Any, ts: int, key_order: bytes,
               extra: Any = None) -> tuple[GraceBuffer, list[BufferedRecord]]:
    """A stream record that passed the join's drop checks: the buffer after it and the records to
    join now, in order (the record itself first when it is too old to buffer).

    Examples
    --------
    >>> b, now = grace_step(GraceBuffer(), 2, "k", "x", 5, b"k")
    >>> now, b.time
    ([], 5)
    >>> b, now = grace_step(b, 2, "k", "y", 7, b"k")
    >>> [(r.value, r.ts) for r in now]
    [('x', 5)]
    >>> b, now = grace_step(b, 2, "k", "old", 1, b"k")      # older than 7 - 2: at once
    >>> [(r.value, r.ts) for r in now]
    [('old', 1)]
    """
    record = BufferedRecord(key, value, ts, key_order, buffer.seq, extra)
    if buffer.time - grace > ts:
        return buffer, [record]
    time = max(buffer.time, ts)
    waiting = sorted((*buffer.records, record), key=lambda r: r.order)
    horizon = time - grace
    released = [r for r in waiting if r.ts <= horizon]
    kept = tuple(r for r in waiting if r.ts > horizon)
    return GraceBuffer(time, kept, buffer.seq + 1), released


def grace_join_reference_run(records: Iterable[tuple[str, Any, Any, int]], *, kind: str, grace: int | None,
                             retention: int, joiner: Callable[..., Any],
                             key_order: Callable[[Any], bytes] = lambda k: repr(k).encode()) -> list[Output]:
    """Run ``(side, key, value, ts)`` records (``"stream"`` / ``"table"``) through a stream–table
    join against a versioned table (``grace`` ``None``: no buffer), as Kafka Streams does: the
    joined records in order. The model the property tests compare the engines with.

    Examples
    --------
    >>> run = [("table", "k", "b0", 0), ("stream", "k", "a1", 1), ("table", "k", "b3", 3),
    ...        ("stream", "k", "a4", 4), ("stream", "k", "a2", 2)]
    >>> [o.value for o in grace_join_reference_run(run, kind="inner", grace=None, retention=10,
    ...                                            joiner=lambda a, b: a + "+" + b)]
    ['a1+b0', 'a4+b3', 'a2+b0']
    """
    histories: dict[Any, VersionHistory] = {}
    store_time = NO_TIME
    buffer = GraceBuffer()
    out: list[Output] = []

    def join(r: BufferedRecord) -> None:
        found = versioned_get(histories.get(r.key), r.ts, store_time, retention) if r.key is not None else None
        if found is None and kind != "left":
            return
        out.append(Output(r.key, for_key(joiner, r.key)(r.value, None if found is None else found.value), r.ts))

    for side, key, value, ts in records:
        if side == "table":
            if key is None:
                continue
            histories[key], _, store_time = versioned_put(histories.get(key, VersionHistory()), value, ts,
                                                          store_time=store_time, retention=retention)
            continue
        if value is None or (key is None and kind != "left"):
            continue
        if grace is None or key is None:
            join(BufferedRecord(key, value, ts, b"", 0))
            continue
        buffer, now = grace_step(buffer, grace, key, value, ts, key_order(key))
        for r in now:
            join(r)
    return out
