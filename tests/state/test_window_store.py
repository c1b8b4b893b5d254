"""WindowStore: Kafka's WindowStore, method by method, with its retention and duplicates rules.

Time ranges apply to window starts and include both ends; one key's windows come by start,
several keys' by (start, key bytes, sequence number); the backend holds Kafka's WindowKeySchema
layout; expired windows are gone from reads and from the backend.
"""

from __future__ import annotations

from typing import Any

import pytest

from streamsdsl.errors import InvalidArgumentError, InvalidTypeError
from streamsdsl.state import (
    InvalidStateStoreError,
    KeyValue,
    MemoryBackend,
    Stores,
    WindowStore,
    WindowStoreIterator,
    open_store,
)
from streamsdsl.values.serdes import Serdes
from streamsdsl.values.windows import TimeWindow, Windowed


def window_store(retention: int = 1_000, size: int = 10, duplicates: bool = False,
                 backend: MemoryBackend | None = None) -> tuple[WindowStore[Any, Any], MemoryBackend]:
    """A window store "w" of String keys and Long values on ``backend`` (a new one by default)."""
    backend = MemoryBackend() if backend is None else backend
    supplier = Stores.in_memory_window_store("w", retention, size, duplicates)
    return open_store(Stores.window_store_builder(supplier, Serdes.String(), Serdes.Long()), backend), backend


def entries(iterator: Any) -> list[tuple[Any, ...]]:
    """An iterator's entries as (key, start, value), or (start, value) for one key's; closed after."""
    with iterator as it:
        return [(kv.key.key, kv.key.window.start, kv.value) if isinstance(kv.key, Windowed) else tuple(kv)
                for kv in it]


def stored(backend: MemoryBackend) -> list[bytes]:
    """The backend's keys, without the store's bookkeeping record."""
    return [key for key, _ in backend.scan() if key]


class TestFetch:
    def test_kafkas_javadoc_example(self) -> None:
        """Windows of A at 10, 15, 20, 25: fetch("A", 10, 20) gives the first three, oldest first."""
        store, _ = window_store()
        for start in (25, 10, 20, 15):
            store.put("A", start, start)
        with store.fetch("A", 10, 20) as it:
            assert isinstance(it, WindowStoreIterator)
            assert list(it) == [KeyValue(10, 10), KeyValue(15, 15), KeyValue(20, 20)]
        assert entries(store.backward_fetch("A", 10, 20)) == [(20, 20), (15, 15), (10, 10)]
        assert entries(store.fetch("A", 11, 14)) == [] and entries(store.fetch("A", 20, 10)) == []
        assert entries(store.fetch("A", -5, 10)) == [(10, 10)]

    def test_fetch_one_window(self) -> None:
        """fetch(key, time) is the value of the key's window starting exactly at time."""
        store, _ = window_store()
        store.put("A", 1, 10)
        assert (store.fetch("A", 10), store.fetch("A", 11), store.fetch("B", 10), store.fetch("A", -1)) == (
            1, None, None, None)

    def test_one_key_only_not_the_keys_it_prefixes(self) -> None:
        """fetch(key, ...) skips keys whose bytes start with the key's (they sort among its windows)."""
        store, _ = window_store()
        store.put("a", 1, 0)
        store.put("a\x00", 2, 0)
        store.put("a\x00\x00\x00\x00\x00\x00\x00", 3, 0)
        store.put("a", 4, 5)
        assert entries(store.fetch("a", 0, 100)) == [(0, 1), (5, 4)]
        assert entries(store.fetch("a\x00", 0, 100)) == [(0, 2)]

    def test_key_range_order_is_start_then_key_bytes(self) -> None:
        """fetch(key_from, key_to, ...) and fetch_all order by window start, then key bytes (as
        Kafka's in-memory store); backward_* is the exact reverse."""
        store, _ = window_store()
        for key, start in (("b", 0), ("a", 5), ("ab", 0), ("c", 0), ("a", 0), ("é", 5), ("B", 5)):
            store.put(key, start, start)
        assert entries(store.fetch("a", "b", 0, 10)) == [("a", 0, 0), ("ab", 0, 0), ("b", 0, 0), ("a", 5, 5)]
        assert entries(store.backward_fetch("a", "b", 0, 10)) == [("a", 5, 5), ("b", 0, 0), ("ab", 0, 0), ("a", 0, 0)]
        assert entries(store.fetch_all(5, 5)) == [("B", 5, 5), ("a", 5, 5), ("é", 5, 5)]
        assert entries(store.backward_fetch_all(0, 0))[:2] == [("c", 0, 0), ("b", 0, 0)]
        everything = entries(store.all())
        assert everything == [("a", 0, 0), ("ab", 0, 0), ("b", 0, 0), ("c", 0, 0), ("B", 5, 5), ("a", 5, 5),
                              ("é", 5, 5)]
        assert entries(store.backward_all()) == everything[::-1]

    def test_key_range_bounds(self) -> None:
        """Key bounds include both ends, None leaves a side open, from after to is empty."""
        store, _ = window_store()
        for key in ("a", "b", "c"):
            store.put(key, 1, 0)
        assert [e[0] for e in entries(store.fetch(None, "b", 0, 0))] == ["a", "b"]
        assert [e[0] for e in entries(store.fetch("b", None, 0, 0))] == ["b", "c"]
        assert entries(store.fetch("c", "a", 0, 0)) == []
        assert entries(store.fetch("a", "c", 1, 0)) == []

    def test_windowed_keys_end_a_window_size_later(self) -> None:
        """A fetched window is TimeWindow(start, start + window size)."""
        store, _ = window_store(size=60)
        store.put("k", 7, 120)
        with store.all() as it:
            assert list(it) == [KeyValue(Windowed("k", TimeWindow(120, 180)), 7)]

    def test_none_deletes(self) -> None:
        """put(key, None, start) deletes that window (a store without duplicates)."""
        store, backend = window_store()
        store.put("k", 1, 0)
        store.put("k", 2, 10)
        store.put("k", None, 0)
        assert entries(store.fetch("k", 0, 10)) == [(10, 2)] and len(stored(backend)) == 1

    def test_backend_layout_is_kafkas_window_key_schema(self) -> None:
        """Key bytes, start (8 bytes, big-endian), sequence number (4 bytes, 0 without duplicates);
        the value is the value serde's bytes."""
        store, backend = window_store()
        store.put("k", 5, 258)
        assert [(k, v) for k, v in backend.scan() if k] == [
            (b"k" + b"\x00" * 6 + b"\x01\x02" + b"\x00" * 4, b"\x00" * 7 + b"\x05")]


class TestRetention:
    def test_expired_windows_are_gone(self) -> None:
        """Stream time is the largest start put; a window with start <= stream time - retention
        is neither returned nor kept, and a put of one is dropped."""
        store, backend = window_store(retention=100)
        for start in (0, 50, 60):
            store.put("k", start, start)
        store.put("other", 150, 150)  # stream time 150: starts <= 50 expire
        assert entries(store.fetch("k", 0, 200)) == [(60, 60)]
        assert (store.fetch("k", 50), store.fetch("k", 60)) == (None, 60)
        assert [e[1] for e in entries(store.all())] == [60, 150]
        assert len(stored(backend)) == 2
        store.put("k", 40, 40)  # expired: dropped
        store.put("k", 51, 51)  # live
        assert entries(store.fetch("k", 0, 200)) == [(51, 51), (60, 60)]

    def test_a_delete_moves_stream_time(self) -> None:
        """A put of None advances stream time too (Kafka updates it before looking at the value)."""
        store, backend = window_store(retention=10)
        store.put("k", 1, 0)
        store.put("x", None, 10)
        assert entries(store.fetch("k", 0, 10)) == [] and stored(backend) == []

    def test_retention_zero_keeps_nothing(self) -> None:
        """With a retention of 0 ms every window has expired as soon as stream time reaches it."""
        store, backend = window_store(retention=0, size=0)
        store.put("k", 1, 5)
        assert (store.fetch("k", 5), stored(backend)) == (None, [])

    def test_stream_time_survives_reopening(self) -> None:
        """The stream time is in the backend: a store opened again on it still drops expired puts."""
        store, backend = window_store(retention=100)
        store.put("k", 1, 500)
        store.put("k", None, 500)
        again, _ = window_store(retention=100, backend=backend)
        again.put("k", 2, 400)  # 400 <= 500 - 100: expired
        again.put("k", 3, 401)
        assert entries(again.fetch("k", 0, 1000)) == [(401, 3)]


class TestDuplicates:
    def test_every_put_is_kept_in_put_order(self) -> None:
        """With retain_duplicates each put is a new entry; fetch returns them in put order."""
        store, backend = window_store(duplicates=True)
        for value in (3, 1, 2):
            store.put("k", value, 0)
        store.put("k", 9, 10)
        assert entries(store.fetch("k", 0, 0)) == [(0, 3), (0, 1), (0, 2)]
        assert entries(store.backward_fetch("k", 0, 10)) == [(10, 9), (0, 2), (0, 1), (0, 3)]
        assert entries(store.fetch_all(0, 0)) == [("k", 0, 3), ("k", 0, 1), ("k", 0, 2)]
        assert [k[-4:] for k in stored(backend)] == [b"\x00\x00\x00\x01", b"\x00\x00\x00\x02", b"\x00\x00\x00\x03",
                                                     b"\x00\x00\x00\x04"]

    def test_none_is_ignored(self) -> None:
        """A None put into a store that retains duplicates changes nothing, not even stream time."""
        store, _ = window_store(retention=10, duplicates=True)
        store.put("k", 1, 0)
        store.put("k", None, 0)
        store.put("k", None, 100)
        assert entries(store.fetch("k", 0, 0)) == [(0, 1)]

    def test_sequence_numbers_survive_reopening(self) -> None:
        """The last sequence number is in the backend: puts after reopening overwrite no duplicate."""
        store, backend = window_store(duplicates=True)
        store.put("k", 1, 0)
        again, _ = window_store(duplicates=True, backend=backend)
        again.put("k", 2, 0)
        assert entries(again.fetch("k", 0, 0)) == [(0, 1), (0, 2)]

    def test_fetch_of_one_window_is_refused(self) -> None:
        """fetch(key, time) has no single value to return: the message names fetch(key, time, time)."""
        store, _ = window_store(duplicates=True)
        with pytest.raises(InvalidArgumentError) as info:
            store.fetch("k", 0)
        assert info.value.args == (
            "WindowStore.fetch(key, time) reads one value, and the store 'w' retains duplicates, so it may hold "
            "several for a key and window: use fetch(key, time, time), which returns each of them in put order.",)


class TestErrors:
    def test_wrong_number_of_arguments(self) -> None:
        """fetch and backward_fetch name their forms."""
        store, _ = window_store()
        with pytest.raises(InvalidTypeError) as info:
            store.fetch("k")
        assert info.value.args == ("WindowStore.fetch() takes (key, time), (key, time_from, time_to) or (key_from, "
                                   "key_to, time_from, time_to) (got 1 argument).",)
        with pytest.raises(InvalidTypeError) as info:
            store.backward_fetch("k", 0)
        assert info.value.args == ("WindowStore.backward_fetch() takes (key, time_from, time_to) or (key_from, "
                                   "key_to, time_from, time_to) (got 2 arguments).",)

    def test_times_are_checked(self) -> None:
        """A window start is >= 0 epoch ms; time bounds are ints."""
        store, _ = window_store()
        with pytest.raises(InvalidArgumentError) as info:
            store.put("k", 1, -1)
        assert info.value.args == ("'window_start_timestamp' must be >= 0 ms (got -1).",)
        with pytest.raises(InvalidArgumentError) as info:
            store.put("k", 1, 2**63)
        assert info.value.args == ("'window_start_timestamp' must be <= 9223372036854775807 ms "
                                   "(got 9223372036854775808).",)
        with pytest.raises(InvalidTypeError) as info:
            store.fetch("k", 0, "10")
        assert info.value.args == ("'time_to' must be an int (epoch milliseconds) (got str: '10').",)
        with pytest.raises(InvalidTypeError) as info:
            store.fetch_all(True, 10)
        assert info.value.args == ("'time_from' must be an int (epoch milliseconds) (got bool: True).",)

    def test_null_key(self) -> None:
        """A window's key is never None."""
        store, _ = window_store()
        with pytest.raises(InvalidArgumentError, match="^'key' must not be None: "):
            store.put(None, 1, 0)
        with pytest.raises(InvalidArgumentError, match="^'key' must not be None: "):
            store.fetch(None, 0, 1)

    def test_closed(self) -> None:
        """A closed window store refuses every call and closes its iterators."""
        store, _ = window_store()
        store.put("k", 1, 0)
        it = store.fetch("k", 0, 0)
        store.close()
        for call in (lambda: store.put("k", 1, 0), lambda: store.fetch("k", 0), lambda: store.fetch_all(0, 1),
                     lambda: store.all(), lambda: store.backward_fetch("k", "k", 0, 1)):
            with pytest.raises(InvalidStateStoreError, match="^State store 'w' is closed: "):
                call()
        with pytest.raises(InvalidStateStoreError, match="^The iterator over state store 'w' is closed: "):
            next(it)

    def test_attributes(self) -> None:
        """A window store exposes its retention, window size, duplicates rule and name."""
        store, _ = window_store(retention=100, size=10, duplicates=True)
        assert (store.name, store.retention_ms, store.window_size_ms, store.retain_duplicates, store.persistent(),
                repr(store)) == ("w", 100, 10, True, False, "WindowStore('w')")
