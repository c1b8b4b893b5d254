"""Read-only views of a state store in the `TopologyTestDriver`, as Kafka Streams'
``getKeyValueStore`` / ``getWindowStore`` / ``getSessionStore`` (and
``getTimestampedKeyValueStore`` / ``getTimestampedWindowStore``, whose values are
`ValueAndTimestamp`) return them: an aggregation's store, a table's (a source table or
``to_table()`` with a store, a materialized table–table join: each key's current value) and a
stream–stream join's two window stores (each side's buffered records).

A view is live: each call first runs the records piped since the driver's previous run, then
reads the state the stateful operator left (the same state the next run starts from). Methods
that return several entries return a list (Kafka returns an iterator to close), in Kafka's order:
by key, then by window start.

What a store holds is the operator's state: a windowed store holds the windows that records can
still update or read (Kafka's store may keep closed windows longer, up to its retention period).
"""

from __future__ import annotations

from typing import Any, Callable, Iterable

import attrs

from streamsdsl.values.keyvalue import KeyValue, ValueAndTimestamp
from streamsdsl.values.windows import SessionWindow, TimeWindow, Windowed
from streamsdsl.errors import InvalidArgumentError

__all__ = ["KeyValue", "ReadOnlyKeyValueStore", "ReadOnlySessionStore", "ReadOnlyWindowStore", "StoreEntry",
           "ValueAndTimestamp", "join_window_entries"]


@attrs.frozen
class StoreEntry:
    """One stored aggregate: the key, its window (``start``/``end``; 0/0 when unwindowed), the
    value and the timestamp Kafka stores with it."""

    key: Any
    start: int
    end: int
    value: Any
    timestamp: int


def _ordered(entries: list[StoreEntry]) -> list[StoreEntry]:
    """Kafka's iteration order: by key (where keys compare), then window start."""
    try:
        return sorted(entries, key=lambda e: (e.key, e.start))
    except TypeError:  # keys of different types: keep the order they were stored in
        return sorted(entries, key=lambda e: e.start)


def _millis(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidArgumentError(f"'{name}' must be a time in epoch milliseconds (an int) (got {value!r}).")
    return value


def join_window_entries(states: Iterable[tuple[Any, Iterable[tuple[int, Any]]]], size_ms: int) -> list[StoreEntry]:
    """A stream–stream join's window store (one side's): each buffered record of each key as an
    entry whose window starts at the record's timestamp and lasts the join window's size
    (``before + after``), as Kafka Streams' join stores hold them. ``states``: per key, the
    side's ``(timestamp, value)`` records in arrival order (duplicates kept)."""
    return [StoreEntry(key, ts, ts + size_ms, value, ts) for key, records in states for ts, value in records]


@attrs.frozen
class _Store:
    name: str
    _read: Callable[[], list[StoreEntry]] = attrs.field(repr=False)
    #: Values come with their timestamps (`ValueAndTimestamp`), as Kafka's timestamped stores.
    timestamped: bool = attrs.field(default=False, kw_only=True)

    def _entries(self) -> list[StoreEntry]:
        return _ordered(self._read())

    def _value(self, entry: StoreEntry) -> Any:
        return ValueAndTimestamp(entry.value, entry.timestamp) if self.timestamped else entry.value

    def approximate_num_entries(self) -> int:
        """How many entries the store holds."""
        return len(self._read())


@attrs.frozen
class ReadOnlyKeyValueStore(_Store):
    """An unwindowed aggregation's or a table's store: the latest value per key (Kafka Streams'
    ``ReadOnlyKeyValueStore``; timestamps are dropped, as the driver's facade does, unless the
    view is timestamped: then each value is a `ValueAndTimestamp`)."""

    def get(self, key: Any) -> Any:
        """The key's value, or None."""
        for e in self._read():
            if e.key == key:
                return self._value(e)
        return None

    def all(self) -> list[Any]:
        """Every ``KeyValue(key, value)``, by key."""
        return [KeyValue(e.key, self._value(e)) for e in self._entries()]

    def range(self, from_key: Any, to_key: Any) -> list[Any]:
        """``KeyValue``s with ``from_key <= key <= to_key``, by key."""
        return [kv for kv in self.all() if from_key <= kv.key <= to_key]


@attrs.frozen
class ReadOnlyWindowStore(_Store):
    """A time- or sliding-window aggregation's store, or a stream–stream join's (Kafka Streams'
    ``ReadOnlyWindowStore``; values are `ValueAndTimestamp` if the view is timestamped)."""

    def fetch(self, key: Any, time_from: int, time_to: int | None = None) -> Any:
        """``fetch(key, start)``: the value of the key's window starting at ``start`` (or None);
        ``fetch(key, time_from, time_to)``: ``KeyValue(start, value)`` for the key's windows
        starting in ``[time_from, time_to]``, by start."""
        time_from = _millis(time_from, "time_from")
        if time_to is None:
            for e in self._entries():
                if e.key == key and e.start == time_from:
                    return self._value(e)
            return None
        time_to = _millis(time_to, "time_to")
        return [KeyValue(e.start, self._value(e)) for e in self._entries()
                if e.key == key and time_from <= e.start <= time_to]

    def fetch_all(self, time_from: int, time_to: int) -> list[Any]:
        """``KeyValue(Windowed(key, window), value)`` for windows starting in ``[time_from, time_to]``."""
        time_from, time_to = _millis(time_from, "time_from"), _millis(time_to, "time_to")
        return [kv for kv in self.all() if time_from <= kv.key.window.start <= time_to]

    def all(self) -> list[Any]:
        """Every ``KeyValue(Windowed(key, TimeWindow(start, end)), value)``, by key and start."""
        return [KeyValue(Windowed(e.key, TimeWindow(e.start, e.end)), self._value(e)) for e in self._entries()]


@attrs.frozen
class ReadOnlySessionStore(_Store):
    """A session-window aggregation's store (Kafka Streams' ``ReadOnlySessionStore``)."""

    def fetch(self, key: Any) -> list[Any]:
        """The key's sessions as ``KeyValue(Windowed(key, SessionWindow(start, end)), value)``."""
        return [KeyValue(Windowed(e.key, SessionWindow(e.start, e.end)), e.value) for e in self._entries()
                if e.key == key]

    def find_sessions(self, key: Any, earliest_session_end_time: int, latest_session_start_time: int) -> list[Any]:
        """The key's sessions that end at or after ``earliest_session_end_time`` and start at or
        before ``latest_session_start_time``."""
        earliest = _millis(earliest_session_end_time, "earliest_session_end_time")
        latest = _millis(latest_session_start_time, "latest_session_start_time")
        return [kv for kv in self.fetch(key) if kv.key.window.end >= earliest and kv.key.window.start <= latest]

    def fetch_session(self, key: Any, session_start_time: int, session_end_time: int) -> Any:
        """The value of the key's session ``[start, end]``, or None."""
        for kv in self.fetch(key):
            if (kv.key.window.start, kv.key.window.end) == (session_start_time, session_end_time):
                return kv.value
        return None
