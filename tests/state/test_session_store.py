"""SessionStore: Kafka's SessionStore, method by method, with its retention rule.

find_sessions returns the sessions that overlap [earliest end, latest start] (end >= the first,
start <= the second); one key's sessions come by (end, start), several keys' by (key bytes, end,
start); the backend holds Kafka's SessionKeySchema layout.
"""

from __future__ import annotations

from typing import Any

import pytest

from streamsdsl.errors import InvalidArgumentError, InvalidTypeError
from streamsdsl.state import InvalidStateStoreError, KeyValue, MemoryBackend, SessionStore, Stores, open_store
from streamsdsl.values.serdes import Serdes
from streamsdsl.values.windows import SessionWindow, TimeWindow, Windowed


def session_store(retention: int = 1_000, backend: MemoryBackend | None = None
                  ) -> tuple[SessionStore[Any, Any], MemoryBackend]:
    """A session store "s" of String keys and Long aggregates on ``backend`` (a new one by default)."""
    backend = MemoryBackend() if backend is None else backend
    builder = Stores.session_store_builder(Stores.persistent_session_store("s", retention), Serdes.String(),
                                           Serdes.Long())
    return open_store(builder, backend), backend


def session(key: str, start: int, end: int) -> Windowed:
    """The windowed key of a session."""
    return Windowed(key, SessionWindow(start, end))


def found(iterator: Any) -> list[tuple[str, int, int]]:
    """An iterator's sessions as (key, start, end); closed after."""
    with iterator as it:
        return [(kv.key.key, kv.key.window.start, kv.key.window.end) for kv in it]


def stored(backend: MemoryBackend) -> list[bytes]:
    """The backend's keys, without the store's bookkeeping record."""
    return [key for key, _ in backend.scan() if key]


class TestFindSessions:
    def test_overlapping_sessions(self) -> None:
        """find_sessions(key, earliest_end, latest_start) has the sessions with end >= earliest_end
        and start <= latest_start, both bounds inclusive."""
        store, _ = session_store()
        for start, end in ((30, 40), (0, 5), (10, 20)):
            store.put(session("k", start, end), end - start)
        assert found(store.find_sessions("k", 5, 30)) == [("k", 0, 5), ("k", 10, 20), ("k", 30, 40)]
        assert found(store.find_sessions("k", 6, 29)) == [("k", 10, 20)]
        assert found(store.find_sessions("k", 20, 10)) == [("k", 10, 20)]
        assert found(store.find_sessions("k", 41, 100)) == [] and found(store.find_sessions("k", 0, -1)) == []
        assert found(store.backward_find_sessions("k", 5, 30)) == [("k", 30, 40), ("k", 10, 20), ("k", 0, 5)]
        with store.find_sessions("k", 0, 5) as it:
            assert list(it) == [KeyValue(session("k", 0, 5), 5)]

    def test_one_key_by_end_then_start(self) -> None:
        """One key's sessions come by end, then start (sessions sharing an end by start ascending)."""
        store, _ = session_store()
        for start, end in ((5, 10), (0, 10), (0, 3), (7, 7)):
            store.put(session("k", start, end), 1)
        assert found(store.fetch("k")) == [("k", 0, 3), ("k", 7, 7), ("k", 0, 10), ("k", 5, 10)]
        assert found(store.backward_fetch("k")) == [("k", 5, 10), ("k", 0, 10), ("k", 7, 7), ("k", 0, 3)]

    def test_one_key_only_not_the_keys_it_prefixes(self) -> None:
        """fetch(key) skips the keys whose bytes start with the key's."""
        store, _ = session_store()
        store.put(session("a", 0, 0), 1)
        store.put(session("a\x00", 0, 0), 2)
        store.put(session("ab", 0, 0), 3)
        assert found(store.fetch("a")) == [("a", 0, 0)] and found(store.find_sessions("a", 0, 0)) == [("a", 0, 0)]
        assert found(store.fetch("\xff")) == []

    def test_key_ranges_by_key_bytes_then_end_then_start(self) -> None:
        """Several keys' sessions come by key bytes, then end, then start; None bounds are open."""
        store, _ = session_store()
        for key, start, end in (("b", 0, 5), ("a", 8, 9), ("ab", 0, 1), ("a", 0, 5), ("c", 0, 5), ("B", 0, 0)):
            store.put(session(key, start, end), 1)
        assert found(store.fetch("a", "b")) == [("a", 0, 5), ("a", 8, 9), ("ab", 0, 1), ("b", 0, 5)]
        assert found(store.backward_fetch("a", "b")) == [("b", 0, 5), ("ab", 0, 1), ("a", 8, 9), ("a", 0, 5)]
        assert found(store.fetch(None, "a")) == [("B", 0, 0), ("a", 0, 5), ("a", 8, 9)]
        assert [s[0] for s in found(store.fetch(None, None))] == ["B", "a", "a", "ab", "b", "c"]
        assert found(store.fetch("b", "a")) == []
        assert found(store.find_sessions("a", "c", 5, 0)) == [("a", 0, 5), ("b", 0, 5), ("c", 0, 5)]
        assert found(store.backward_find_sessions(None, "ab", 1, 8)) == [("ab", 0, 1), ("a", 8, 9), ("a", 0, 5)]


class TestPointOperations:
    def test_fetch_session_put_remove(self) -> None:
        """fetch_session reads exactly one session; put(None) and remove delete it."""
        store, backend = session_store()
        store.put(session("k", 0, 5), 1)
        store.put(session("k", 7, 9), 2)
        assert (store.fetch_session("k", 0, 5), store.fetch_session("k", 0, 6), store.fetch_session("j", 0, 5),
                store.fetch_session("k", 5, 0)) == (1, None, None, None)
        store.put(session("k", 0, 5), None)
        store.remove(session("k", 7, 9))
        store.remove(session("k", 100, 200))
        assert stored(backend) == []

    def test_backend_layout_is_kafkas_session_key_schema(self) -> None:
        """Key bytes, end (8 bytes, big-endian), start (8 bytes); the value is the serde's bytes."""
        store, backend = session_store()
        store.put(session("k", 1, 258), 5)
        assert [(k, v) for k, v in backend.scan() if k] == [
            (b"k" + b"\x00" * 6 + b"\x01\x02" + b"\x00" * 7 + b"\x01", b"\x00" * 7 + b"\x05")]

    def test_any_window_kind_is_a_session(self) -> None:
        """As Kafka's put(Windowed<K>, agg), a Windowed of any window is stored as a session."""
        store, _ = session_store()
        store.put(Windowed("k", TimeWindow(0, 10)), 1)
        assert found(store.fetch("k")) == [("k", 0, 10)]


class TestRetention:
    def test_expired_sessions_are_gone(self) -> None:
        """Stream time is the largest session end put; a session with end <= stream time - retention
        is neither returned nor kept, and a put of one is dropped."""
        store, backend = session_store(retention=10)
        store.put(session("k", 0, 5), 1)
        store.put(session("k", 12, 20), 2)
        store.put(session("j", 25, 30), 3)  # stream time 30: ends <= 20 expire
        assert found(store.fetch(None, None)) == [("j", 25, 30)]
        assert (store.fetch_session("k", 12, 20), len(stored(backend))) == (None, 1)
        store.put(session("k", 0, 20), 4)  # expired: dropped
        store.put(session("k", 0, 21), 5)
        assert found(store.find_sessions("k", 0, 100)) == [("k", 0, 21)]

    def test_remove_does_not_move_stream_time(self) -> None:
        """remove deletes without advancing stream time; put(None) advances it."""
        store, _ = session_store(retention=10)
        store.put(session("k", 0, 5), 1)
        store.remove(session("x", 0, 100))
        assert store.fetch_session("k", 0, 5) == 1
        store.put(session("x", 0, 100), None)
        assert store.fetch_session("k", 0, 5) is None

    def test_stream_time_survives_reopening(self) -> None:
        """A store opened again on the backend keeps dropping the sessions that expired before."""
        store, backend = session_store(retention=10)
        store.put(session("k", 0, 50), 1)
        again, _ = session_store(retention=10, backend=backend)
        again.put(session("j", 0, 40), 2)
        assert found(again.fetch(None, None)) == [("k", 0, 50)]


class TestErrors:
    def test_arguments(self) -> None:
        """A session is a Windowed; the methods name their forms; a key is never None."""
        store, _ = session_store()
        with pytest.raises(InvalidTypeError) as info:
            store.put(("k", 0, 5), 1)  # type: ignore[arg-type]
        assert info.value.args == ("'windowed' must be a Windowed(key, SessionWindow(start, end)) (got tuple: "
                                   "('k', 0, 5)).",)
        with pytest.raises(InvalidTypeError) as info:
            store.find_sessions("k", 0)
        assert info.value.args == (
            "SessionStore.find_sessions() takes (key, earliest_session_end_time, latest_session_start_time) or "
            "(key_from, key_to, earliest_session_end_time, latest_session_start_time) (got 2 arguments).",)
        with pytest.raises(InvalidTypeError) as info:
            store.backward_fetch()
        assert info.value.args == ("SessionStore.backward_fetch() takes (key) or (key_from, key_to) (got 0 "
                                   "arguments).",)
        with pytest.raises(InvalidTypeError) as info:
            store.find_sessions("k", "0", 1)
        assert info.value.args == ("'earliest_session_end_time' must be an int (epoch milliseconds) (got str: '0').",)
        with pytest.raises(InvalidArgumentError, match="^'key' must not be None: "):
            store.put(session(None, 0, 1), 1)  # type: ignore[arg-type]
        with pytest.raises(InvalidArgumentError, match="^'key' must not be None: "):
            store.fetch(None)

    def test_closed(self) -> None:
        """A closed session store refuses every call and closes its iterators."""
        store, _ = session_store()
        store.put(session("k", 0, 1), 1)
        it = store.fetch("k")
        store.close()
        for call in (lambda: store.put(session("k", 0, 1), 1), lambda: store.remove(session("k", 0, 1)),
                     lambda: store.fetch_session("k", 0, 1), lambda: store.find_sessions("k", 0, 1),
                     lambda: store.fetch("a", "b")):
            with pytest.raises(InvalidStateStoreError, match="^State store 's' is closed: "):
                call()
        with pytest.raises(InvalidStateStoreError, match="^The iterator over state store 's' is closed: "):
            it.peek_next_key()

    def test_attributes(self) -> None:
        """A session store exposes its name and retention."""
        store, _ = session_store(retention=77)
        assert (store.name, store.retention_ms, store.persistent(), repr(store)) == ("s", 77, True,
                                                                                     "SessionStore('s')")
