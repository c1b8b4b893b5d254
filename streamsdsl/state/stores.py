"""The state stores a processor uses: Kafka Streams' ``KeyValueStore``,
``TimestampedKeyValueStore``, ``WindowStore`` and ``SessionStore`` (snake_case), over a
`StoreBackend`.

A store serializes keys and values with its builder's serdes (``None``: JSON) and keeps the
bytes in its backend, a sorted map of bytes to bytes (`streamsdsl.state.backends`); `open_store`
makes the store a builder describes over a backend. Semantics follow Kafka Streams:

- **Keys** are never ``None`` (Kafka throws ``NullPointerException``; here
  `InvalidArgumentError`). A value that is ``None``, or that its serde writes as ``None``,
  deletes (``put(key, None)``), as in Kafka.
- **Key-value order**: the serialized key bytes, unsigned and lexicographic, as Kafka's RocksDB
  store iterates (its in-memory store orders ``Bytes`` the same way). So ``Serdes.Long()`` keys
  put ``-1`` after ``1``, and a range whose ``from_key`` serializes after its ``to_key`` is empty.
  Ranges include both ends; ``None`` leaves a side unbounded.
- **Window stores** hold each value under Kafka's ``WindowKeySchema`` layout: key bytes, window
  start (8 bytes, big-endian), sequence number (4 bytes; 0 unless the store retains
  duplicates, where each put takes the next one, wrapping at 2**31 as in Kafka). One key's
  windows come by start (and, among duplicates, in put order); several keys' (``fetch`` of a
  key range, ``fetch_all``, ``all``) by (start, key bytes, sequence number): Kafka's in-memory
  window store's order and its javadoc's "from beginning to end of time" (Kafka's RocksDB store
  orders by time segment, then key bytes). The ``backward_*`` methods return the exact reverse.
  ``fetch(key, time)`` of a store that retains duplicates raises, naming ``fetch(key, time,
  time)`` (Kafka's in-memory store returns null there, its RocksDB store the value of the
  store's last put if that put was to this window).
- **Session stores** use Kafka's ``SessionKeySchema`` layout: key bytes, end (8 bytes), start
  (8 bytes). One key's sessions come by (end, start); several keys' by (key bytes, end, start),
  the order of Kafka's RocksDB session store within a segment (Kafka's in-memory store orders
  by end, then key, then start descending).
- **Retention**: a window store's stream time is the largest window start put, a session
  store's the largest session end put (a put that deletes counts too; a ``None`` put into a
  store that retains duplicates is ignored altogether, as Kafka's RocksDB store does). A window
  whose start, or a session whose end, is ``<= stream time - retention`` has expired: a put of it
  is dropped, no read returns it, and it is deleted from the backend (once the oldest entry
  expires, all expired entries go in one pass). The stream time and the last sequence number
  are a record of the backend too, under the empty key (no entry has it: every entry's key ends
  in its window), read at each call: a store opened again on the same backend (after a
  restart) goes on exactly, and a backend rolled back by its host rolls them back too.
- **Iterators** are Python iterators of `KeyValue`, context managers that close them, with
  Kafka's ``has_next()``, ``peek_next_key()`` and ``close()``. An iterator reads a snapshot of the
  store taken when it is made: later writes do not show in it (as a RocksDB iterator; Kafka's
  in-memory store copies the keys but reads values late). Closing a store closes its iterators;
  reading a closed store or iterator raises `InvalidStateStoreError`.

Examples
--------
>>> from streamsdsl.state.backends import MemoryBackend
>>> from streamsdsl.state.builders import Stores
>>> from streamsdsl.values.serdes import Serdes
>>> store = open_store(Stores.key_value_store_builder(
...     Stores.in_memory_key_value_store("counts"), Serdes.String(), Serdes.Long()), MemoryBackend())
>>> store.put("b", 2); store.put("a", 1); store.put("ab", 3)
>>> with store.range("a", "ab") as entries:
...     list(entries)
[KeyValue(key='a', value=1), KeyValue(key='ab', value=3)]
>>> store.put_if_absent("a", 10), store.delete("b"), store.approximate_num_entries()
(1, 2, 2)
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Generic

from streamsdsl.errors import InvalidArgumentError, InvalidTypeError
from streamsdsl.state.backends import StoreBackend
from streamsdsl.state.base import (
    LONG,
    LONG_MAX,
    InvalidStateStoreError,
    K,
    KeyValueIterator,
    NoSuchElementError,
    StateStore,
    V,
    WindowStoreIterator,
    after,
    got,
    prefix_end,
    time_arg,
)
from streamsdsl.state.builders import KeyValueBytesStoreSupplier, StoreBuilder
from streamsdsl.state.windowed import SessionStore, WindowStore
from streamsdsl.values.keyvalue import KeyValue, ValueAndTimestamp
from streamsdsl.values.serdes import DEFAULT_SERDE, Serde, check_serde

__all__ = [
    "InvalidStateStoreError", "KeyValueIterator", "KeyValueStore", "NoSuchElementError", "SessionStore", "StateStore",
    "TimestampedKeyValueStore", "WindowStore", "WindowStoreIterator", "open_store",
]


class KeyValueStore(StateStore, Generic[K, V]):
    """A key-value store (Kafka's ``KeyValueStore``): one value per key, in key-bytes order.

    Examples
    --------
    >>> from streamsdsl.state.backends import MemoryBackend
    >>> from streamsdsl.state.builders import Stores
    >>> from streamsdsl.values.serdes import Serdes
    >>> supplier = Stores.in_memory_key_value_store("ids")
    >>> store = KeyValueStore(supplier, MemoryBackend(), Serdes.String(), Serdes.String())
    >>> store.put_all([("user-1", "ann"), KeyValue("user-2", "bob"), ("item-9", "pen")])
    >>> [kv.key for kv in store.prefix_scan("user-", Serdes.String())]
    ['user-1', 'user-2']
    >>> store.put("user-1", None); store.get("user-1") is None
    True
    """

    _supplier_type = KeyValueBytesStoreSupplier

    def _encode(self, value: Any) -> bytes | None:
        return self._value_serde.serialize(value)

    def _decode(self, data: bytes) -> Any:
        return self._value_serde.deserialize(data)

    def _entry(self, raw: tuple[bytes, bytes]) -> KeyValue:
        return KeyValue(self._key_serde.deserialize(raw[0]), self._decode(raw[1]))

    def _write(self, key: bytes, value: bytes | None) -> None:
        if value is None:
            self._backend.delete(key)
        else:
            self._backend.put(key, value)

    def get(self, key: K) -> V | None:
        """The key's value, or ``None``."""
        self._check_open()
        data = self._backend.get(self._bytes(key, "key"))
        return None if data is None else self._decode(data)  # type: ignore[no-any-return]

    def put(self, key: K, value: V | None) -> None:
        """Set the key's value; ``None`` deletes the key."""
        self._check_open()
        self._write(self._bytes(key, "key"), self._encode(value))

    def put_if_absent(self, key: K, value: V | None) -> V | None:
        """Set the key's value unless it has one; returns the value it had (``None`` if it had none)."""
        self._check_open()
        key_bytes, value_bytes = self._bytes(key, "key"), self._encode(value)
        old = self._backend.get(key_bytes)
        if old is None:
            self._write(key_bytes, value_bytes)
            return None
        return self._decode(old)  # type: ignore[no-any-return]

    def put_all(self, entries: Iterable[KeyValue | tuple[K, V | None]]) -> None:
        """Put each ``KeyValue(key, value)`` or ``(key, value)`` pair, in order (``None`` values
        delete). Every entry is serialized before the first is written, so a bad entry writes none."""
        self._check_open()
        if not isinstance(entries, Iterable):
            raise InvalidTypeError(f"'entries' must be an iterable of KeyValue(key, value) ({got(entries)}).")
        writes = []
        for i, entry in enumerate(entries):
            if not isinstance(entry, tuple) or len(entry) != 2:
                raise InvalidTypeError(
                    f"'entries[{i}]' must be a KeyValue(key, value) or a (key, value) pair ({got(entry)})."
                )
            writes.append((self._bytes(entry[0], f"entries[{i}].key"), self._encode(entry[1])))
        for key_bytes, value_bytes in writes:
            self._write(key_bytes, value_bytes)

    def delete(self, key: K) -> V | None:
        """Delete the key; returns the value it had (``None`` if it had none)."""
        self._check_open()
        key_bytes = self._bytes(key, "key")
        old = self._backend.get(key_bytes)
        if old is None:
            return None
        self._backend.delete(key_bytes)
        return self._decode(old)  # type: ignore[no-any-return]

    def range(self, from_key: K | None, to_key: K | None) -> KeyValueIterator[K, V]:
        """The entries with ``from_key <= key <= to_key`` in key-bytes order (``None``: unbounded;
        empty when ``from_key``'s bytes come after ``to_key``'s)."""
        return self._range(from_key, to_key, reverse=False)

    def reverse_range(self, from_key: K | None, to_key: K | None) -> KeyValueIterator[K, V]:
        """`range` in reverse order: from ``to_key`` down to ``from_key``."""
        return self._range(from_key, to_key, reverse=True)

    def all(self) -> KeyValueIterator[K, V]:
        """Every entry, in key-bytes order."""
        return self._range(None, None, reverse=False)

    def reverse_all(self) -> KeyValueIterator[K, V]:
        """Every entry, in reverse key-bytes order."""
        return self._range(None, None, reverse=True)

    def _range(self, from_key: Any, to_key: Any, reverse: bool) -> KeyValueIterator[K, V]:
        self._check_open()
        lower = None if from_key is None else self._bytes(from_key, "from_key")
        upper = None if to_key is None else self._bytes(to_key, "to_key")
        if lower is not None and upper is not None and lower > upper:
            return self._iterator((), self._entry)  # type: ignore[no-any-return]
        scan = self._backend.scan(lower, None if upper is None else after(upper), reverse)
        return self._iterator(scan, self._entry)  # type: ignore[no-any-return]

    def prefix_scan(self, prefix: Any, prefix_key_serde: Serde | None) -> KeyValueIterator[K, V]:
        """The entries whose key bytes start with ``prefix_key_serde.serialize(prefix)``, in key-bytes
        order (``None`` serde: JSON). As in Kafka, this is a prefix of bytes: with
        ``Serdes.String()`` the prefix ``"1"`` finds ``"1"``, ``"11"`` and ``"13"``, with
        ``Serdes.Integer()`` the prefix ``1`` finds only ``1``."""
        self._check_open()
        serde = check_serde(prefix_key_serde, "prefix_key_serde") or DEFAULT_SERDE
        start = self._bytes(prefix, "prefix", serde)
        return self._iterator(self._backend.scan(start, prefix_end(start)), self._entry)  # type: ignore[no-any-return]

    def approximate_num_entries(self) -> int:
        """How many entries the store holds (exact here)."""
        self._check_open()
        return self._backend.count()


class TimestampedKeyValueStore(KeyValueStore[K, ValueAndTimestamp]):
    """A key-value store whose values are `ValueAndTimestamp` (Kafka's
    ``TimestampedKeyValueStore``). The backend holds the timestamp (8 bytes, big-endian) followed
    by the value's bytes, as Kafka's ``ValueAndTimestampSerializer`` writes them; a
    ``ValueAndTimestamp`` whose value is ``None`` deletes, as ``None`` does.

    Examples
    --------
    >>> from streamsdsl.state.backends import MemoryBackend
    >>> from streamsdsl.state.builders import Stores
    >>> from streamsdsl.values.serdes import Serdes
    >>> backend = MemoryBackend()
    >>> store = TimestampedKeyValueStore(Stores.persistent_timestamped_key_value_store("last"), backend,
    ...                                  Serdes.String(), Serdes.String())
    >>> store.put("k", ValueAndTimestamp("v", 5)); store.get("k")
    ValueAndTimestamp(value='v', timestamp=5)
    >>> backend.get(b"k")
    b'\\x00\\x00\\x00\\x00\\x00\\x00\\x00\\x05v'
    """

    def _encode(self, value: Any) -> bytes | None:
        if value is None:
            return None
        if not isinstance(value, ValueAndTimestamp):
            raise InvalidTypeError(
                f"A timestamped store's values are ValueAndTimestamp(value, timestamp) ({got(value)}). "
                "Pass ValueAndTimestamp(value, record.timestamp), or None to delete."
            )
        timestamp = time_arg(value.timestamp, "timestamp")
        if not -LONG_MAX - 1 <= timestamp <= LONG_MAX:
            raise InvalidArgumentError(f"'timestamp' must fit in 8 bytes, -2**63 to 2**63 - 1 ms (got {timestamp}).")
        data = self._value_serde.serialize(value.value)
        return None if data is None else LONG.pack(timestamp) + data

    def _decode(self, data: bytes) -> Any:
        return ValueAndTimestamp(self._value_serde.deserialize(data[8:]), LONG.unpack_from(data)[0])




#: The store class of each builder kind.
_STORES: dict[str, type[StateStore]] = {
    "key-value": KeyValueStore,
    "timestamped-key-value": TimestampedKeyValueStore,
    "window": WindowStore,
    "session": SessionStore,
}


def open_store(builder: StoreBuilder, backend: StoreBackend) -> Any:
    """The store ``builder`` describes, over ``backend`` (a new `MemoryBackend`, or a host's
    backend holding the store's entries from before: the store goes on from them).

    Examples
    --------
    >>> from streamsdsl.state.backends import MemoryBackend
    >>> from streamsdsl.state.builders import Stores
    >>> open_store(Stores.session_store_builder(Stores.persistent_session_store("s", 10), None, None),
    ...            MemoryBackend())
    SessionStore('s')
    """
    if not isinstance(builder, StoreBuilder):
        raise InvalidTypeError(
            f"'builder' must be a StoreBuilder ({got(builder)}). Make one with Stores.key_value_store_builder, "
            "Stores.timestamped_key_value_store_builder, Stores.window_store_builder or Stores.session_store_builder."
        )
    return _STORES[builder.kind](builder.supplier, backend, builder.key_serde, builder.value_serde)

