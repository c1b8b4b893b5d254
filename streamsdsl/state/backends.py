"""Where a state store keeps its entries: a sorted map of bytes to bytes.

A typed store (`streamsdsl.state.stores`) serializes its keys and values and hands the bytes to
a `StoreBackend`; the host of a task chooses the backend: `MemoryBackend` in the direct engine
and in tests, one over Spark's state on Spark. The protocol is small on purpose, so that any
keyed byte storage can serve it: point reads and writes, a count, and a range scan in key
order.

**Order.** Keys are ordered as unsigned bytes, lexicographically (Python's ``bytes`` order; the
order of Kafka's ``Bytes`` and of RocksDB's default comparator): ``b"a" < b"ab" < b"b" <
b"\\x80"``.

**Scans.** ``scan(lower, upper, reverse)`` returns the entries with ``lower <= key < upper``
(``None``: unbounded on that side), in ascending key order, or descending with ``reverse``. The
result is a snapshot: it holds the entries as they were when ``scan`` was called, and writes
made while it is consumed neither show in it nor break it (RocksDB's iterators read a snapshot
too). Every bound a store needs is half-open: ``key <= k`` is ``upper = k + b"\\x00"``, the
next key after ``k``.

Examples
--------
>>> backend = MemoryBackend()
>>> for key in (b"b", b"a", b"ab", b"\\x80"):
...     backend.put(key, key.upper())
>>> list(backend.scan())
[(b'a', b'A'), (b'ab', b'AB'), (b'b', b'B'), (b'\\x80', b'\\x80')]
>>> list(backend.scan(b"a", b"b", reverse=True))
[(b'ab', b'AB'), (b'a', b'A')]
>>> backend.delete(b"a"); backend.get(b"a"), backend.count()
(None, 3)
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator
from typing import Protocol, runtime_checkable

from streamsdsl.errors import InvalidTypeError

__all__ = ["MemoryBackend", "StoreBackend"]


@runtime_checkable
class StoreBackend(Protocol):
    """A sorted map of ``bytes`` keys to ``bytes`` values, the storage under one state store of
    one task (see the module's documentation for the order and the scans' snapshot rule)."""

    def get(self, key: bytes) -> bytes | None:
        """The value stored under ``key``, or ``None``."""
        ...

    def put(self, key: bytes, value: bytes) -> None:
        """Store ``value`` under ``key``, replacing any value there (a value is never ``None``:
        deletes go through `delete`)."""
        ...

    def delete(self, key: bytes) -> None:
        """Remove ``key`` and its value; nothing happens if it is absent."""
        ...

    def scan(self, lower: bytes | None = None, upper: bytes | None = None,
             reverse: bool = False) -> Iterator[tuple[bytes, bytes]]:
        """The ``(key, value)`` entries with ``lower <= key < upper`` (``None``: unbounded), in
        unsigned-lexicographic key order (descending if ``reverse``), as a snapshot taken now."""
        ...

    def count(self) -> int:
        """How many entries the backend holds."""
        ...


class MemoryBackend:
    """A `StoreBackend` in memory: a dict for the values and a sorted list of the keys, searched
    with `bisect` (a put of a new key and a delete cost one list insertion or removal).

    Examples
    --------
    >>> backend = MemoryBackend()
    >>> backend.put(b"k", b"v"); backend.put(b"k", b"w")
    >>> backend.get(b"k"), backend.count(), backend
    (b'w', 1, MemoryBackend(1 entries))
    >>> backend.put("k", b"v")
    Traceback (most recent call last):
    ...
    streamsdsl.errors.InvalidTypeError: A store backend holds bytes keys and bytes values (got str key 'k' and bytes value). Serialize them with the store's serdes first.
    """

    __slots__ = ("_values", "_keys")

    def __init__(self) -> None:
        self._values: dict[bytes, bytes] = {}
        self._keys: list[bytes] = []

    def get(self, key: bytes) -> bytes | None:
        return self._values.get(key)

    def put(self, key: bytes, value: bytes) -> None:
        if type(key) is not bytes or type(value) is not bytes:
            raise InvalidTypeError(
                f"A store backend holds bytes keys and bytes values (got {type(key).__name__} key {key!r} and "
                f"{type(value).__name__} value). Serialize them with the store's serdes first."
            )
        if key not in self._values:
            bisect.insort(self._keys, key)
        self._values[key] = value

    def delete(self, key: bytes) -> None:
        if self._values.pop(key, None) is not None:
            del self._keys[bisect.bisect_left(self._keys, key)]

    def scan(self, lower: bytes | None = None, upper: bytes | None = None,
             reverse: bool = False) -> Iterator[tuple[bytes, bytes]]:
        keys = self._keys
        lo = 0 if lower is None else bisect.bisect_left(keys, lower)
        hi = len(keys) if upper is None else bisect.bisect_left(keys, upper)
        values = self._values
        entries = [(k, values[k]) for k in keys[lo:hi]]
        if reverse:
            entries.reverse()
        return iter(entries)

    def count(self) -> int:
        return len(self._keys)

    def __repr__(self) -> str:
        return f"MemoryBackend({len(self._keys)} entries)"
