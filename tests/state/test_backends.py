"""MemoryBackend: a sorted bytes map with half-open, snapshot scans in unsigned byte order."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streamsdsl.errors import InvalidTypeError
from streamsdsl.state import MemoryBackend, StoreBackend


def filled(*keys: bytes) -> MemoryBackend:
    """A backend holding each key with its upper-cased bytes as value."""
    backend = MemoryBackend()
    for key in keys:
        backend.put(key, key.upper())
    return backend


class TestMemoryBackend:
    def test_is_a_store_backend(self) -> None:
        """MemoryBackend satisfies the StoreBackend protocol."""
        assert isinstance(MemoryBackend(), StoreBackend)
        assert not isinstance(object(), StoreBackend)

    def test_get_put_delete_count(self) -> None:
        """A put replaces, a delete of an absent key does nothing, count counts keys."""
        backend = filled(b"a", b"b")
        backend.put(b"a", b"x")
        backend.delete(b"zz")
        assert (backend.get(b"a"), backend.get(b"zz"), backend.count()) == (b"x", None, 2)
        backend.delete(b"a")
        assert (backend.get(b"a"), backend.count(), list(backend.scan())) == (None, 1, [(b"b", b"B")])

    def test_order_is_unsigned_lexicographic(self) -> None:
        """Bytes order: a prefix first, bytes >= 0x80 after ASCII (unsigned, as Kafka's Bytes and RocksDB)."""
        backend = filled(b"\xff", b"b", b"", b"a\x00", b"a", b"\x80", b"ab")
        assert [k for k, _ in backend.scan()] == [b"", b"a", b"a\x00", b"ab", b"b", b"\x80", b"\xff"]
        assert [k for k, _ in backend.scan(reverse=True)] == [b"\xff", b"\x80", b"b", b"ab", b"a\x00", b"a", b""]

    def test_bounds_are_half_open(self) -> None:
        """scan(lower, upper) holds lower <= key < upper; None is unbounded; an empty or inverted range is empty."""
        backend = filled(b"a", b"ab", b"b", b"c")
        assert [k for k, _ in backend.scan(b"ab", b"c")] == [b"ab", b"b"]
        assert [k for k, _ in backend.scan(b"ab", b"c", reverse=True)] == [b"b", b"ab"]
        assert [k for k, _ in backend.scan(None, b"b")] == [b"a", b"ab"]
        assert [k for k, _ in backend.scan(b"b", None)] == [b"b", b"c"]
        assert [k for k, _ in backend.scan(b"b", b"b\x00")] == [b"b"]
        assert list(backend.scan(b"b", b"b")) == [] and list(backend.scan(b"c", b"a")) == []

    def test_scan_is_a_snapshot(self) -> None:
        """Writes made while a scan is read neither show in it nor break it."""
        backend = filled(b"a", b"b", b"c")
        scan = backend.scan()
        assert next(scan) == (b"a", b"A")
        backend.delete(b"b")
        backend.put(b"c", b"changed")
        backend.put(b"bb", b"new")
        assert list(scan) == [(b"b", b"B"), (b"c", b"C")]
        assert list(backend.scan()) == [(b"a", b"A"), (b"bb", b"new"), (b"c", b"changed")]

    def test_holds_bytes_only(self) -> None:
        """A key or value that is not bytes is refused (a bytearray would be mutable)."""
        with pytest.raises(InvalidTypeError) as info:
            MemoryBackend().put(b"k", bytearray(b"v"))  # type: ignore[arg-type]
        assert info.value.args == ("A store backend holds bytes keys and bytes values (got bytes key b'k' and "
                                   "bytearray value). Serialize them with the store's serdes first.",)

    @given(st.lists(st.tuples(st.booleans(), st.binary(max_size=3))), st.none() | st.binary(max_size=3),
           st.none() | st.binary(max_size=3), st.booleans())
    def test_equals_a_sorted_dict(self, ops: list[tuple[bool, bytes]], lower: bytes | None, upper: bytes | None,
                                  reverse: bool) -> None:
        """After random puts and deletes, a scan equals a plain dict's items, filtered and sorted."""
        backend, model = MemoryBackend(), {}
        for is_put, key in ops:
            if is_put:
                backend.put(key, key + b"!")
                model[key] = key + b"!"
            else:
                backend.delete(key)
                model.pop(key, None)
        expected = sorted((k, v) for k, v in model.items()
                          if (lower is None or k >= lower) and (upper is None or k < upper))
        assert list(backend.scan(lower, upper, reverse)) == (expected[::-1] if reverse else expected)
        assert backend.count() == len(model)
