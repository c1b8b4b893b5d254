"""Window and session stores: Kafka Streams' ``WindowStore`` and ``SessionStore`` over a
`StoreBackend` (the layouts, orders and retention rules are in `streamsdsl.state.stores`' documentation)."""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import Callable, Any, ClassVar, Generic

from streamsdsl.errors import InvalidArgumentError, InvalidTypeError
from streamsdsl.state.backends import StoreBackend
from streamsdsl.state.base import (
    LONG,
    LONG_MAX,
    NO_TIMESTAMP,
    KeyValueIterator,
    K,
    StateStore,
    V,
    WindowStoreIterator,
    arity_error,
    got,
    prefix_end,
    put_time,
    time_arg,
)
from streamsdsl.state.builders import SessionBytesStoreSupplier, WindowBytesStoreSupplier
from streamsdsl.values.keyvalue import KeyValue
from streamsdsl.values.serdes import Serde
from streamsdsl.values.windows import SessionWindow, TimeWindow, Windowed

__all__ = ["SessionStore", "WindowStore"]

#: A window store entry's key suffix: window start, sequence number.
_WINDOW_SUFFIX = struct.Struct(">qi")
#: A session store entry's key suffix: session end, session start.
_SESSION_SUFFIX = struct.Struct(">qq")
#: The bookkeeping record of window stores (stream time, last sequence number, earliest start
#: held) and session stores (stream time, earliest end held), under the empty key.
_WINDOW_META = struct.Struct(">qiq")
_SESSION_META = struct.Struct(">qq")
_META_KEY = b""


class _TimedStore(StateStore):
    """A store with a stream time and a retention period. Its bookkeeping (the stream time, the
    last sequence number, the smallest time an entry may have) is a record of the backend, read
    at the start of each call and written when it changes: the store object holds nothing the
    backend does not, so it stays right when a host rolls its backend back or opens the store
    again. Subclasses name the entry layout."""

    retention_ms: int
    _suffix: ClassVar[struct.Struct]
    #: Called for each put that is dropped because its window or session has expired and that
    #: Kafka Streams counts in ``dropped-records-total`` ("Skipping record for expired
    #: segment"); the host sets it (None: not counted).
    on_expired: Callable[[], None] | None = None

    def __init__(self, supplier: Any, backend: StoreBackend, key_serde: Serde | None = None,
                 value_serde: Serde | None = None) -> None:
        super().__init__(supplier, backend, key_serde, value_serde)
        self.retention_ms = supplier.retention_period_ms
        self._persistent = bool(supplier.persistent)
        self._check_open()

    def _expired_put(self, time: int) -> None:
        """A put at ``time`` (at or before the cut-off) is dropped; count it as Kafka does: an
        in-memory store counts every such put, a persistent one (RocksDB, in segments of
        ``max(retention / 2, 60 s)``) only a put into a segment older than the oldest live one."""
        if self.on_expired is None:
            return
        if self._persistent:
            segment = max(self.retention_ms // 2, 60_000)
            if time // segment >= (self._observed - self.retention_ms) // segment:
                return
        self.on_expired()

    def _check_open(self) -> None:
        """Every call starts here: refuse a closed store, then read the bookkeeping record."""
        super()._check_open()
        saved = self._backend.get(_META_KEY)
        self._saved = saved
        self._observed, self._seq, self._earliest = (NO_TIMESTAMP, 0, LONG_MAX) if saved is None else self._load(saved)

    def _load(self, saved: bytes) -> tuple[int, int, int]:
        raise NotImplementedError

    def _dump(self) -> bytes:
        raise NotImplementedError

    def _save(self) -> None:
        data = self._dump()
        if data != self._saved:
            self._backend.put(_META_KEY, data)
            self._saved = data

    @property
    def _cutoff(self) -> int:
        """Entries whose time (window start, session end) is at most this have expired."""
        return self._observed - self.retention_ms

    def _advance(self, time: int) -> None:
        """Raise the stream time to ``time``; delete what expires, if the oldest entry does."""
        if time <= self._observed:
            return
        self._observed = time
        if self._earliest > self._cutoff:
            return
        earliest = LONG_MAX
        width = self._suffix.size
        for key, _ in self._backend.scan():
            if len(key) < width:
                continue
            entry_time = LONG.unpack_from(key, len(key) - width)[0]
            if entry_time <= self._cutoff:
                self._backend.delete(key)
            else:
                earliest = min(earliest, entry_time)
        self._earliest = earliest

    def _entries(self, lower: bytes | None, key_to: bytes | None) -> Iterator[tuple[bytes, int, int, bytes]]:
        """Every entry of the keys in [lower, key_to] (None: unbounded): (key bytes, the two
        suffix numbers, value bytes), in no useful order (callers sort)."""
        width = self._suffix.size
        for key, value in self._backend.scan(lower, None):
            if len(key) < width:
                continue
            key_bytes = key[:-width]
            if (lower is None or key_bytes >= lower) and (key_to is None or key_bytes <= key_to):
                first, second = self._suffix.unpack_from(key, len(key) - width)
                yield key_bytes, first, second, value


class WindowStore(_TimedStore, Generic[K, V]):
    """A window store (Kafka's ``WindowStore``): values per key and window start, kept for the
    retention period; windows are ``TimeWindow(start, start + window_size_ms)``.

    ``fetch`` has Kafka's three forms: ``fetch(key, time)`` (the value of the key's window
    starting at ``time``), ``fetch(key, time_from, time_to)`` (a `WindowStoreIterator` of
    ``KeyValue(start, value)``) and ``fetch(key_from, key_to, time_from, time_to)`` (an iterator of
    ``KeyValue(Windowed(key, window), value)``). Time ranges apply to window starts and include
    both ends.

    Examples
    --------
    >>> from streamsdsl.state.backends import MemoryBackend
    >>> from streamsdsl.state.builders import Stores
    >>> store = WindowStore(Stores.in_memory_window_store("w", 100, 10, False), MemoryBackend())
    >>> for start in (10, 15, 20, 25):
    ...     store.put("A", start * 2, start)
    >>> list(store.fetch("A", 10, 20))
    [KeyValue(key=10, value=20), KeyValue(key=15, value=30), KeyValue(key=20, value=40)]
    >>> store.fetch("A", 25), store.fetch("A", 26)
    (50, None)
    >>> next(store.backward_fetch("A", "A", 0, 100))
    KeyValue(key=Windowed(key='A', window=TimeWindow(start=25, end=35)), value=50)
    """

    _supplier_type = WindowBytesStoreSupplier
    _suffix = _WINDOW_SUFFIX
    _FETCH_FORMS = "(key, time), (key, time_from, time_to) or (key_from, key_to, time_from, time_to)"

    def __init__(self, supplier: WindowBytesStoreSupplier, backend: StoreBackend, key_serde: Serde | None = None,
                 value_serde: Serde | None = None) -> None:
        super().__init__(supplier, backend, key_serde, value_serde)
        self.window_size_ms: int = supplier.window_size_ms
        self.retain_duplicates: bool = supplier.retain_duplicates

    def _load(self, saved: bytes) -> tuple[int, int, int]:
        return _WINDOW_META.unpack(saved)  # type: ignore[return-value]

    def _dump(self) -> bytes:
        return _WINDOW_META.pack(self._observed, self._seq, self._earliest)

    def put(self, key: K, value: V | None, window_start_timestamp: int) -> None:
        """Put the value of the key's window starting at ``window_start_timestamp``. ``None``
        deletes it (ignored by a store that retains duplicates); the put of an expired window is
        dropped."""
        self._check_open()
        key_bytes = self._bytes(key, "key")
        start = put_time(window_start_timestamp, "window_start_timestamp")
        data = self._value_serde.serialize(value)
        if data is None and self.retain_duplicates:
            return
        self._advance(start)
        if start > self._cutoff:
            if data is None:
                self._backend.delete(key_bytes + _WINDOW_SUFFIX.pack(start, 0))
            else:
                if self.retain_duplicates:
                    self._seq = (self._seq + 1) & 0x7FFFFFFF
                self._backend.put(key_bytes + _WINDOW_SUFFIX.pack(start, self._seq), data)
                self._earliest = min(self._earliest, start)
        else:
            self._expired_put(start)
        self._save()

    def fetch(self, *args: Any) -> Any:
        """``fetch(key, time)``, ``fetch(key, time_from, time_to)`` or
        ``fetch(key_from, key_to, time_from, time_to)`` (see the class documentation)."""
        if len(args) == 2:
            return self._fetch_one(*args)
        if len(args) == 3:
            return self._fetch_key(*args, reverse=False)
        if len(args) == 4:
            return self._fetch_range(*args, reverse=False)
        raise arity_error("WindowStore.fetch", self._FETCH_FORMS, args)

    def backward_fetch(self, *args: Any) -> Any:
        """``backward_fetch(key, time_from, time_to)`` or ``backward_fetch(key_from, key_to,
        time_from, time_to)``: `fetch` in reverse order."""
        if len(args) == 3:
            return self._fetch_key(*args, reverse=True)
        if len(args) == 4:
            return self._fetch_range(*args, reverse=True)
        raise arity_error("WindowStore.backward_fetch", "(key, time_from, time_to) or (key_from, key_to, time_from, "
                     "time_to)", args)

    def fetch_all(self, time_from: int, time_to: int) -> KeyValueIterator[Windowed, V]:
        """Every key's windows starting from ``time_from`` to ``time_to``, by (start, key bytes)."""
        return self._windowed(None, None, time_arg(time_from, "time_from"), time_arg(time_to, "time_to"), reverse=False)

    def backward_fetch_all(self, time_from: int, time_to: int) -> KeyValueIterator[Windowed, V]:
        """`fetch_all` in reverse order."""
        return self._windowed(None, None, time_arg(time_from, "time_from"), time_arg(time_to, "time_to"), reverse=True)

    def all(self) -> KeyValueIterator[Windowed, V]:
        """Every window the store holds, by (start, key bytes)."""
        return self._windowed(None, None, 0, LONG_MAX, reverse=False)

    def backward_all(self) -> KeyValueIterator[Windowed, V]:
        """`all` in reverse order."""
        return self._windowed(None, None, 0, LONG_MAX, reverse=True)

    def _fetch_one(self, key: Any, time: Any) -> Any:
        self._check_open()
        key_bytes, time = self._bytes(key, "key"), time_arg(time, "time")
        if self.retain_duplicates:
            raise InvalidArgumentError(
                f"WindowStore.fetch(key, time) reads one value, and the store {self._name!r} retains duplicates, "
                "so it may hold several for a key and window: use fetch(key, time, time), which returns each of "
                "them in put order."
            )
        if not self._cutoff < time <= LONG_MAX:
            return None
        data = self._backend.get(key_bytes + _WINDOW_SUFFIX.pack(time, 0))
        return None if data is None else self._value_serde.deserialize(data)

    def _fetch_key(self, key: Any, time_from: Any, time_to: Any, *, reverse: bool) -> WindowStoreIterator[V]:
        self._check_open()
        key_bytes = self._bytes(key, "key")
        low = max(time_arg(time_from, "time_from"), self._cutoff + 1, 0)
        high = min(time_arg(time_to, "time_to"), LONG_MAX - 1)
        if high < low:
            return self._iterator((), self._start_and_value, WindowStoreIterator)  # type: ignore[no-any-return]
        width = len(key_bytes) + _WINDOW_SUFFIX.size
        scan = self._backend.scan(key_bytes + LONG.pack(low), key_bytes + LONG.pack(high + 1), reverse)
        entries = (entry for entry in scan if len(entry[0]) == width)  # other keys that start with this one
        return self._iterator(entries, self._start_and_value, WindowStoreIterator)  # type: ignore[no-any-return]

    def _start_and_value(self, raw: tuple[bytes, bytes]) -> KeyValue:
        key, value = raw
        return KeyValue(LONG.unpack_from(key, len(key) - _WINDOW_SUFFIX.size)[0], self._value_serde.deserialize(value))

    def _fetch_range(self, key_from: Any, key_to: Any, time_from: Any, time_to: Any, *,
                     reverse: bool) -> KeyValueIterator[Windowed, V]:
        return self._windowed(key_from, key_to, time_arg(time_from, "time_from"), time_arg(time_to, "time_to"),
                              reverse=reverse)

    def _windowed(self, key_from: Any, key_to: Any, time_from: int, time_to: int, *,
                  reverse: bool) -> KeyValueIterator[Windowed, V]:
        self._check_open()
        lower, upper, empty = self._key_range(key_from, key_to)
        low = max(time_from, self._cutoff + 1)
        found = [] if empty or time_to < low else sorted(
            ((start, key_bytes, seq, value) for key_bytes, start, seq, value in self._entries(lower, upper)
             if low <= start <= time_to),
            key=lambda entry: entry[:3], reverse=reverse,
        )
        return self._iterator(found, self._windowed_entry)  # type: ignore[no-any-return]

    def _windowed_entry(self, raw: tuple[int, bytes, int, bytes]) -> KeyValue:
        start, key_bytes, _, value = raw
        window = TimeWindow(start, start + self.window_size_ms)
        return KeyValue(Windowed(self._key_serde.deserialize(key_bytes), window), self._value_serde.deserialize(value))


class SessionStore(_TimedStore, Generic[K, V]):
    """A session store (Kafka's ``SessionStore``): an aggregate per key and session
    ``SessionWindow(start, end)``, kept for the retention period after the session's end.

    Examples
    --------
    >>> from streamsdsl.state.backends import MemoryBackend
    >>> from streamsdsl.state.builders import Stores
    >>> store = SessionStore(Stores.in_memory_session_store("s", 1_000), MemoryBackend())
    >>> for start, end in ((0, 5), (10, 20), (30, 40)):
    ...     store.put(Windowed("k", SessionWindow(start, end)), end - start)
    >>> [kv.key.window for kv in store.find_sessions("k", 6, 30)]
    [SessionWindow(start=10, end=20), SessionWindow(start=30, end=40)]
    >>> store.fetch_session("k", 10, 20), store.fetch_session("k", 10, 21)
    (10, None)
    """

    _supplier_type = SessionBytesStoreSupplier
    _suffix = _SESSION_SUFFIX

    def _load(self, saved: bytes) -> tuple[int, int, int]:
        observed, earliest = _SESSION_META.unpack(saved)
        return observed, 0, earliest

    def _dump(self) -> bytes:
        return _SESSION_META.pack(self._observed, self._earliest)

    def _session_key(self, windowed: Any) -> bytes:
        if not isinstance(windowed, Windowed):
            raise InvalidTypeError(
                f"'windowed' must be a Windowed(key, SessionWindow(start, end)) ({got(windowed)})."
            )
        end = put_time(windowed.window.end, "end")
        return self._bytes(windowed.key, "key") + _SESSION_SUFFIX.pack(end, windowed.window.start)

    def put(self, windowed: Windowed, aggregate: V | None) -> None:
        """Put the aggregate of a session, ``Windowed(key, SessionWindow(start, end))``; ``None``
        removes it; the put of an expired session is dropped."""
        self._check_open()
        store_key = self._session_key(windowed)
        data = self._value_serde.serialize(aggregate)
        end = windowed.window.end
        self._advance(end)
        if end > self._cutoff:
            if data is None:
                self._backend.delete(store_key)
            else:
                self._backend.put(store_key, data)
                self._earliest = min(self._earliest, end)
        else:
            self._expired_put(end)
        self._save()

    def remove(self, windowed: Windowed) -> None:
        """Remove a session (the stream time does not move)."""
        self._check_open()
        self._backend.delete(self._session_key(windowed))

    def fetch_session(self, key: K, session_start_time: int, session_end_time: int) -> V | None:
        """The aggregate of the key's session with exactly this start and end, or ``None``."""
        self._check_open()
        key_bytes = self._bytes(key, "key")
        start, end = time_arg(session_start_time, "session_start_time"), time_arg(session_end_time, "session_end_time")
        if not (self._cutoff < end <= LONG_MAX and 0 <= start <= end):
            return None
        data = self._backend.get(key_bytes + _SESSION_SUFFIX.pack(end, start))
        return None if data is None else self._value_serde.deserialize(data)  # type: ignore[no-any-return]

    def find_sessions(self, *args: Any) -> KeyValueIterator[Windowed, V]:
        """``find_sessions(key, earliest_session_end_time, latest_session_start_time)`` or
        ``find_sessions(key_from, key_to, earliest_session_end_time, latest_session_start_time)``:
        the sessions with ``end >= earliest_session_end_time`` and ``start <=
        latest_session_start_time`` (those that overlap that interval), by (key bytes, end, start)."""
        return self._find("find_sessions", args, reverse=False)

    def backward_find_sessions(self, *args: Any) -> KeyValueIterator[Windowed, V]:
        """`find_sessions` in reverse order."""
        return self._find("backward_find_sessions", args, reverse=True)

    def fetch(self, *args: Any) -> KeyValueIterator[Windowed, V]:
        """``fetch(key)``: the key's sessions, by (end, start); ``fetch(key_from, key_to)``: the
        sessions of the keys in that range (``None``: unbounded), by (key bytes, end, start)."""
        return self._fetch("fetch", args, reverse=False)

    def backward_fetch(self, *args: Any) -> KeyValueIterator[Windowed, V]:
        """`fetch` in reverse order."""
        return self._fetch("backward_fetch", args, reverse=True)

    def _find(self, method: str, args: tuple[Any, ...], *, reverse: bool) -> KeyValueIterator[Windowed, V]:
        if len(args) == 3:
            return self._sessions_of(args[0], time_arg(args[1], "earliest_session_end_time"),
                                     time_arg(args[2], "latest_session_start_time"), reverse=reverse)
        if len(args) == 4:
            return self._sessions(args[0], args[1], time_arg(args[2], "earliest_session_end_time"),
                                  time_arg(args[3], "latest_session_start_time"), reverse=reverse)
        raise arity_error(f"SessionStore.{method}", "(key, earliest_session_end_time, latest_session_start_time) or "
                     "(key_from, key_to, earliest_session_end_time, latest_session_start_time)", args)

    def _fetch(self, method: str, args: tuple[Any, ...], *, reverse: bool) -> KeyValueIterator[Windowed, V]:
        if len(args) == 1:
            return self._sessions_of(args[0], 0, LONG_MAX, reverse=reverse)
        if len(args) == 2:
            return self._sessions(args[0], args[1], 0, LONG_MAX, reverse=reverse)
        raise arity_error(f"SessionStore.{method}", "(key) or (key_from, key_to)", args)

    def _sessions_of(self, key: Any, earliest_end: int, latest_start: int, *,
                     reverse: bool) -> KeyValueIterator[Windowed, V]:
        """One key's sessions: a scan of the entries that start with its bytes."""
        self._check_open()
        key_bytes = self._bytes(key, "key")
        low = max(earliest_end, self._cutoff + 1, 0)
        if low > LONG_MAX:
            return self._iterator((), self._session_entry)  # type: ignore[no-any-return]
        width = len(key_bytes) + _SESSION_SUFFIX.size
        scan = self._backend.scan(key_bytes + LONG.pack(low), prefix_end(key_bytes), reverse)
        entries = ((key_bytes, *_SESSION_SUFFIX.unpack_from(k, len(key_bytes)), v) for k, v in scan if len(k) == width)
        found = (entry for entry in entries if entry[2] <= latest_start)
        return self._iterator(found, self._session_entry)  # type: ignore[no-any-return]

    def _sessions(self, key_from: Any, key_to: Any, earliest_end: int, latest_start: int, *,
                  reverse: bool) -> KeyValueIterator[Windowed, V]:
        self._check_open()
        lower, upper, empty = self._key_range(key_from, key_to)
        low = max(earliest_end, self._cutoff + 1)
        found = [] if empty else sorted(
            (entry for entry in self._entries(lower, upper) if entry[1] >= low and entry[2] <= latest_start),
            key=lambda entry: entry[:3], reverse=reverse,
        )
        return self._iterator(found, self._session_entry)  # type: ignore[no-any-return]

    def _session_entry(self, raw: tuple[bytes, int, int, bytes]) -> KeyValue:
        key_bytes, end, start, value = raw
        return KeyValue(Windowed(self._key_serde.deserialize(key_bytes), SessionWindow(start, end)),
                        self._value_serde.deserialize(value))


