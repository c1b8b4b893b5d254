"""What every state store shares: Kafka's ``StateStore`` life cycle (`StateStore`), the
iterators (`KeyValueIterator`, `WindowStoreIterator`), the errors of a closed store or iterator,
and the key and time checks. The stores themselves are in `streamsdsl.state.stores`."""

from __future__ import annotations

import struct
import weakref
from collections.abc import Callable, Iterable, Iterator
from typing import Any, ClassVar, Generic, TypeVar

from streamsdsl._validation import epoch_millis
from streamsdsl.errors import InvalidArgumentError, InvalidTypeError, StreamsDslError
from streamsdsl.state.backends import StoreBackend
from streamsdsl.values.keyvalue import KeyValue
from streamsdsl.values.serdes import DEFAULT_SERDE, PlanSerde, Serde, check_serde

__all__ = ["InvalidStateStoreError", "KeyValueIterator", "NoSuchElementError", "StateStore", "WindowStoreIterator"]

K = TypeVar("K")
V = TypeVar("V")

#: A timestamp as Kafka writes it: 8 bytes, big-endian, signed.
LONG = struct.Struct(">q")
LONG_MAX = 2**63 - 1
#: Kafka's ``ConsumerRecord.NO_TIMESTAMP``: the stream time of a store nothing was put in yet.
NO_TIMESTAMP = -1
_END = object()


class InvalidStateStoreError(StreamsDslError, RuntimeError):
    """A store or an iterator was used after it was closed (Kafka's
    ``InvalidStateStoreException`` / ``IllegalStateException``)."""


class NoSuchElementError(StreamsDslError, LookupError):
    """``peek_next_key()`` of an iterator that has no next entry (Kafka's ``NoSuchElementException``)."""


def got(value: Any) -> str:
    """How messages show a wrong value: its type and repr."""
    return f"got {type(value).__name__}: {value!r}"


def after(key: bytes) -> bytes:
    """The key right after ``key`` in byte order: the exclusive upper bound that includes ``key``."""
    return key + b"\x00"


def prefix_end(prefix: bytes) -> bytes | None:
    """The first key after every key starting with ``prefix`` (None: no such key, unbounded)."""
    stripped = prefix.rstrip(b"\xff")
    return stripped[:-1] + bytes([stripped[-1] + 1]) if stripped else None


def time_arg(value: Any, arg: str) -> int:
    """A time bound of a query: any int of epoch milliseconds."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidTypeError(f"'{arg}' must be an int (epoch milliseconds) ({got(value)}).")
    return value


def put_time(value: Any, arg: str) -> int:
    """A window's start or end written to a store: epoch milliseconds, 0 to 2**63 - 1."""
    if epoch_millis(value, arg) > LONG_MAX:
        raise InvalidArgumentError(f"'{arg}' must be <= {LONG_MAX} ms (got {value}).")
    return value


class KeyValueIterator(Generic[K, V]):
    """An iterator of `KeyValue` over a snapshot of a store (Kafka's ``KeyValueIterator``).

    Use it in a ``with`` block (or call `close`); ``has_next()`` and ``peek_next_key()`` look
    ahead without consuming. Entries are deserialized as they are read.
    """

    def __init__(self, store: StateStore, entries: Iterator[Any], decode: Callable[[Any], KeyValue]) -> None:
        self._store_name = store.name
        self._entries = entries
        self._decode = decode
        self._next: KeyValue | None = None
        self._open = True
        store._iterators.add(self)

    def has_next(self) -> bool:
        """Whether another entry follows."""
        if not self._open:
            raise InvalidStateStoreError(
                f"The iterator over state store {self._store_name!r} is closed: read an iterator before you "
                "close it (a with block closes it at the block's end)."
            )
        if self._next is None:
            raw = next(self._entries, _END)
            if raw is _END:
                return False
            self._next = self._decode(raw)
        return True

    def peek_next_key(self) -> K:
        """The key of the next entry, which stays next."""
        if not self.has_next():
            raise NoSuchElementError(
                f"The iterator over state store {self._store_name!r} has no next entry: "
                "check has_next() before peek_next_key()."
            )
        assert self._next is not None
        return self._next.key  # type: ignore[no-any-return]

    def __next__(self) -> KeyValue:
        if not self.has_next():
            raise StopIteration
        entry, self._next = self._next, None
        assert entry is not None
        return entry

    def __iter__(self) -> KeyValueIterator[K, V]:
        return self

    def close(self) -> None:
        """Release the iterator; reading it afterwards raises `InvalidStateStoreError`."""
        self._open, self._next, self._entries = False, None, iter(())

    def __enter__(self) -> KeyValueIterator[K, V]:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class WindowStoreIterator(KeyValueIterator[int, V]):
    """One key's windows: `KeyValue` (window start, value) (Kafka's ``WindowStoreIterator``)."""


class StateStore:
    """What every store has (Kafka's ``StateStore``): a name, ``persistent()``, ``is_open()``,
    ``flush()`` and ``close()``; and, inside, its supplier's settings, its backend, its serdes
    (``None``: JSON) and its open iterators. Make a store with `streamsdsl.state.open_store`."""

    _supplier_type: ClassVar[type]

    def __init__(self, supplier: Any, backend: StoreBackend, key_serde: Serde | None = None,
                 value_serde: Serde | None = None) -> None:
        if not isinstance(supplier, self._supplier_type):
            raise InvalidTypeError(
                f"'supplier' of a {type(self).__name__} must be a {self._supplier_type.__name__} ({got(supplier)}). "
                "Make the store with open_store(builder, backend)."
            )
        if not isinstance(backend, StoreBackend):
            raise InvalidTypeError(
                f"'backend' must be a StoreBackend, with get, put, delete, scan and count ({got(backend)}). "
                "Use MemoryBackend() outside a host."
            )
        self._name: str = supplier.name
        self._persistent: bool = supplier.persistent
        self._backend = backend
        self._key_serde: PlanSerde = check_serde(key_serde, "key_serde") or DEFAULT_SERDE
        self._value_serde: PlanSerde = check_serde(value_serde, "value_serde") or DEFAULT_SERDE
        self._open = True
        self._iterators: weakref.WeakSet[KeyValueIterator[Any, Any]] = weakref.WeakSet()

    @property
    def name(self) -> str:
        """The store's name."""
        return self._name

    def persistent(self) -> bool:
        """Whether the store's supplier asked for a persistent store."""
        return self._persistent

    def is_open(self) -> bool:
        """Whether the store may be used (until `close`)."""
        return self._open

    def flush(self) -> None:
        """Nothing to do: every write is in the backend already."""

    def close(self) -> None:
        """Close the store and its open iterators (the backend keeps the entries)."""
        for iterator in list(self._iterators):
            iterator.close()
        self._open = False

    def _check_open(self) -> None:
        """Every call of a store starts here: a closed store refuses it."""
        if not self._open:
            raise InvalidStateStoreError(
                f"State store {self._name!r} is closed: a processor may use its stores from its init() until "
                "its close(), not after."
            )

    def _bytes(self, value: Any, arg: str, serde: PlanSerde | None = None) -> bytes:
        """A key's bytes (never None)."""
        if value is None:
            raise InvalidArgumentError(
                f"'{arg}' must not be None: a state store holds no null key (Kafka Streams refuses one too). "
                "Leave records with a null key out before the store, e.g. if record.key is not None: ..."
            )
        serde = serde or self._key_serde
        data = serde.serialize(value)
        if data is None:
            raise InvalidArgumentError(
                f"'{arg}' {value!r} serializes to None with {serde!r}: a state store needs bytes for each key. "
                "Make the serde's serialize() return bytes for every key."
            )
        return data

    def _iterator(self, entries: Iterable[Any], decode: Callable[[Any], KeyValue],
                  cls: type[KeyValueIterator[Any, Any]] = KeyValueIterator) -> Any:
        return cls(self, iter(entries), decode)

    def _key_range(self, key_from: Any, key_to: Any) -> tuple[bytes | None, bytes | None, bool]:
        """The bytes of a key range's bounds (None: unbounded) and whether it is empty (from > to)."""
        lower = None if key_from is None else self._bytes(key_from, "key_from")
        upper = None if key_to is None else self._bytes(key_to, "key_to")
        return lower, upper, lower is not None and upper is not None and lower > upper

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._name!r})"



def arity_error(method: str, forms: str, args: tuple[Any, ...]) -> InvalidTypeError:
    return InvalidTypeError(f"{method}() takes {forms} (got {len(args)} argument{'s' if len(args) != 1 else ''}).")


