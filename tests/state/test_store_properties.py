"""Property tests: each store equals a naive model over random operation sequences.

The models hold every entry in a plain dict or list and sort by the serialized bytes when asked;
they apply Kafka's rules literally (an expired put is dropped, a read skips what has expired).
Keys are drawn from a few bytes or characters, so that keys prefix one another, bytes >= 0x80
appear (unsigned order) and writes collide. A "reopen" step opens a new store on the same
backend, which must go on exactly; after every step the backend must hold exactly the model's
live entries (expired ones are deleted, not only hidden).
"""

from __future__ import annotations

import struct
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamsdsl.state import MemoryBackend, Stores, ValueAndTimestamp, open_store
from streamsdsl.values.serdes import PlanSerde, Serdes
from streamsdsl.values.windows import SessionWindow, Windowed

BYTES_KEYS = st.lists(st.sampled_from([0x00, 0x01, 0x7F, 0x80, 0xFF]), max_size=3).map(bytes)
STRING_KEYS = st.text(alphabet="a\x00é", max_size=3)
LONG_KEYS = st.integers(min_value=-2, max_value=2) | st.sampled_from([2**31, -(2**40)])
VALUES = st.none() | st.integers(min_value=0, max_value=9)
TIMES = st.integers(min_value=-5, max_value=70)

#: (key serde, its keys): bytes, text and numbers whose byte order is not their order.
KEY_KINDS = [(Serdes.Bytes(), BYTES_KEYS), (Serdes.String(), STRING_KEYS), (Serdes.Long(), LONG_KEYS)]
KEY_IDS = ["bytes", "string", "long"]
MANY = settings(max_examples=150, deadline=None)


def bounded(serde: PlanSerde, key: Any, key_from: Any, key_to: Any) -> bool:
    """Whether ``key`` lies in [key_from, key_to] by serialized bytes (None: unbounded)."""
    data = serde.serialize(key)
    return ((key_from is None or data >= serde.serialize(key_from))
            and (key_to is None or data <= serde.serialize(key_to)))


def kv_ops(keys: st.SearchStrategy[Any], values: st.SearchStrategy[Any]) -> st.SearchStrategy[list[tuple[Any, ...]]]:
    """Random key-value store operations."""
    optional = st.none() | keys
    return st.lists(st.one_of(
        st.tuples(st.just("put"), keys, values),
        st.tuples(st.just("put_if_absent"), keys, values),
        st.tuples(st.just("put_all"), st.lists(st.tuples(keys, values), max_size=4)),
        st.tuples(st.just("delete"), keys),
        st.tuples(st.just("get"), keys),
        st.tuples(st.just("range"), optional, optional, st.booleans()),
        st.tuples(st.just("all"), st.booleans()),
        st.tuples(st.just("prefix"), keys),
        st.tuples(st.just("count")),
        st.tuples(st.just("reopen")),
    ), max_size=40)


def check_key_value_store(serde: PlanSerde, ops: list[tuple[Any, ...]], timestamped: bool) -> None:
    """Run ``ops`` on a (timestamped) key-value store and on a dict of serialized key -> (key, value)."""
    builder = (Stores.timestamped_key_value_store_builder if timestamped else Stores.key_value_store_builder)(
        Stores.in_memory_key_value_store("kv"), serde, Serdes.Long())
    backend = MemoryBackend()
    store = open_store(builder, backend)
    model: dict[bytes, tuple[Any, Any]] = {}

    def absent(value: Any) -> bool:
        return value is None or (timestamped and value.value is None)

    def write(key: Any, value: Any) -> None:
        if absent(value):
            model.pop(serde.serialize(key), None)
        else:
            model[serde.serialize(key)] = (key, value)

    def ordered(keep: Any, reverse: bool = False) -> list[tuple[Any, Any]]:
        return [model[k] for k in sorted(model, reverse=reverse) if keep(k)]

    for op, *args in ops:
        if op == "put":
            store.put(*args)
            write(*args)
        elif op == "put_if_absent":
            before = model.get(serde.serialize(args[0]), (None, None))[1]
            assert store.put_if_absent(*args) == before
            if before is None:
                write(*args)
        elif op == "put_all":
            store.put_all(args[0])
            for key, value in args[0]:
                write(key, value)
        elif op == "delete":
            assert store.delete(args[0]) == model.pop(serde.serialize(args[0]), (None, None))[1]
        elif op == "get":
            assert store.get(args[0]) == model.get(serde.serialize(args[0]), (None, None))[1]
        elif op == "range":
            key_from, key_to, reverse = args
            method = store.reverse_range if reverse else store.range
            with method(key_from, key_to) as it:
                assert [tuple(kv) for kv in it] == ordered(
                    lambda k: bounded(serde, model[k][0], key_from, key_to), reverse)
        elif op == "all":
            with (store.reverse_all() if args[0] else store.all()) as it:
                assert [tuple(kv) for kv in it] == ordered(lambda k: True, args[0])
        elif op == "prefix":
            prefix = serde.serialize(args[0])
            with store.prefix_scan(args[0], serde) as it:
                assert [tuple(kv) for kv in it] == ordered(lambda k: k.startswith(prefix))
        elif op == "count":
            assert store.approximate_num_entries() == len(model)
        else:
            store = open_store(builder, backend)
        assert backend.count() == len(model)


class TestKeyValueStoreEqualsADict:
    @pytest.mark.parametrize("serde, keys", KEY_KINDS, ids=KEY_IDS)
    @MANY
    @given(data=st.data())
    def test_key_value_store(self, serde: PlanSerde, keys: st.SearchStrategy[Any], data: st.DataObject) -> None:
        """Every KeyValueStore method equals the dict model, orders by serialized bytes included."""
        check_key_value_store(serde, data.draw(kv_ops(keys, VALUES)), timestamped=False)

    @pytest.mark.parametrize("serde, keys", KEY_KINDS[:2], ids=KEY_IDS[:2])
    @MANY
    @given(data=st.data())
    def test_timestamped_key_value_store(self, serde: PlanSerde, keys: st.SearchStrategy[Any],
                                         data: st.DataObject) -> None:
        """The same with ValueAndTimestamp values, a None value inside one deleting too."""
        stamped = st.none() | st.builds(ValueAndTimestamp, VALUES, st.integers(min_value=-(2**63), max_value=2**63 - 1))
        check_key_value_store(serde, data.draw(kv_ops(keys, stamped)), timestamped=True)


def window_ops(keys: st.SearchStrategy[Any]) -> st.SearchStrategy[list[tuple[Any, ...]]]:
    """Random window store operations."""
    optional = st.none() | keys
    return st.lists(st.one_of(
        st.tuples(st.just("put"), keys, VALUES, st.integers(min_value=0, max_value=60)),
        st.tuples(st.just("fetch_one"), keys, TIMES),
        st.tuples(st.just("fetch_key"), keys, TIMES, TIMES, st.booleans()),
        st.tuples(st.just("fetch_range"), optional, optional, TIMES, TIMES, st.booleans()),
        st.tuples(st.just("fetch_all"), TIMES, TIMES, st.booleans()),
        st.tuples(st.just("all"), st.booleans()),
        st.tuples(st.just("reopen")),
    ), max_size=40)


class TestWindowStoreEqualsAList:
    @pytest.mark.parametrize("serde, keys", KEY_KINDS[:2], ids=KEY_IDS[:2])
    @MANY
    @given(data=st.data(), duplicates=st.booleans(), size=st.integers(min_value=0, max_value=10),
           extra=st.integers(min_value=0, max_value=30))
    def test_window_store(self, serde: PlanSerde, keys: st.SearchStrategy[Any], data: st.DataObject,
                          duplicates: bool, size: int, extra: int) -> None:
        """Every WindowStore method equals a list of (key bytes, start, seq, key, value), with Kafka's
        retention (stream time = largest start put) and duplicates rules applied literally."""
        retention = size + extra
        builder = Stores.window_store_builder(Stores.in_memory_window_store("w", retention, size, duplicates),
                                              serde, Serdes.Long())
        backend = MemoryBackend()
        store = open_store(builder, backend)
        entries: list[tuple[bytes, int, int, Any, Any]] = []
        observed, seq = -1, 0

        def live(keep: Any, order: Any, reverse: bool) -> list[tuple[bytes, int, int, Any, Any]]:
            alive = [e for e in entries if e[1] > observed - retention and keep(e)]
            return sorted(alive, key=order, reverse=reverse)

        for op, *args in data.draw(window_ops(keys)):
            if op == "put":
                key, value, start = args
                store.put(key, value, start)
                if value is None and duplicates:
                    continue
                observed = max(observed, start)
                if start <= observed - retention:
                    continue
                key_bytes = serde.serialize(key)
                if not duplicates:
                    entries = [e for e in entries if (e[0], e[1]) != (key_bytes, start)]
                if value is not None:
                    seq += duplicates
                    entries.append((key_bytes, start, seq if duplicates else 0, key, value))
            elif op == "fetch_one":
                key, time = args
                if duplicates:
                    continue
                expected = [e[4] for e in live(lambda e: (e[0], e[1]) == (serde.serialize(key), time), None, False)]
                assert store.fetch(key, time) == (expected[0] if expected else None)
            elif op == "fetch_key":
                key, time_from, time_to, reverse = args
                method = store.backward_fetch if reverse else store.fetch
                with method(key, time_from, time_to) as it:
                    assert [tuple(kv) for kv in it] == [(e[1], e[4]) for e in live(
                        lambda e: e[0] == serde.serialize(key) and time_from <= e[1] <= time_to,
                        lambda e: (e[1], e[2]), reverse)]
            elif op in ("fetch_range", "fetch_all", "all"):
                if op == "fetch_range":
                    key_from, key_to, time_from, time_to, reverse = args
                    it = (store.backward_fetch if reverse else store.fetch)(key_from, key_to, time_from, time_to)
                elif op == "fetch_all":
                    key_from = key_to = None
                    time_from, time_to, reverse = args
                    it = (store.backward_fetch_all if reverse else store.fetch_all)(time_from, time_to)
                else:
                    key_from = key_to = time_from = time_to = None
                    reverse = args[0]
                    it = store.backward_all() if reverse else store.all()

                def keep(e: tuple[bytes, int, int, Any, Any]) -> bool:
                    return (bounded(serde, e[3], key_from, key_to)
                            and (time_from is None or time_from <= e[1]) and (time_to is None or e[1] <= time_to))

                with it:
                    assert [(kv.key.key, kv.key.window.start, kv.key.window.end, kv.value) for kv in it] == [
                        (e[3], e[1], e[1] + size, e[4]) for e in live(keep, lambda e: (e[1], e[0], e[2]), reverse)]
            else:
                store = open_store(builder, backend)
            held = {k for k, _ in backend.scan() if k}
            assert held == {e[0] + struct.pack(">qi", e[1], e[2]) for e in live(lambda e: True, None, False)}


def session_ops(keys: st.SearchStrategy[Any]) -> st.SearchStrategy[list[tuple[Any, ...]]]:
    """Random session store operations (sessions start at 0 to 40 and last 0 to 10 ms)."""
    optional = st.none() | keys
    sessions = st.builds(lambda key, start, length: Windowed(key, SessionWindow(start, start + length)),
                         keys, st.integers(min_value=0, max_value=40), st.integers(min_value=0, max_value=10))
    return st.lists(st.one_of(
        st.tuples(st.just("put"), sessions, VALUES),
        st.tuples(st.just("remove"), sessions),
        st.tuples(st.just("fetch_session"), sessions),
        st.tuples(st.just("find"), keys, TIMES, TIMES, st.booleans()),
        st.tuples(st.just("find_range"), optional, optional, TIMES, TIMES, st.booleans()),
        st.tuples(st.just("fetch"), keys, st.booleans()),
        st.tuples(st.just("fetch_range"), optional, optional, st.booleans()),
        st.tuples(st.just("reopen")),
    ), max_size=40)


class TestSessionStoreEqualsADict:
    @pytest.mark.parametrize("serde, keys", KEY_KINDS[:2], ids=KEY_IDS[:2])
    @MANY
    @given(data=st.data(), retention=st.integers(min_value=0, max_value=30))
    def test_session_store(self, serde: PlanSerde, keys: st.SearchStrategy[Any], data: st.DataObject,
                           retention: int) -> None:
        """Every SessionStore method equals a dict of (key bytes, end, start) -> (key, value), with
        Kafka's retention (stream time = largest session end put) applied literally."""
        builder = Stores.session_store_builder(Stores.in_memory_session_store("s", retention), serde, Serdes.Long())
        backend = MemoryBackend()
        store = open_store(builder, backend)
        model: dict[tuple[bytes, int, int], tuple[Any, Any]] = {}
        observed = -1

        def found(keep: Any, by_key: bool, reverse: bool) -> list[tuple[Any, int, int, Any]]:
            ids = sorted((i for i in model if i[1] > observed - retention and keep(i, model[i][0])),
                         key=lambda i: i if by_key else i[1:], reverse=reverse)
            return [(model[i][0], i[2], i[1], model[i][1]) for i in ids]

        def read(iterator: Any) -> list[tuple[Any, int, int, Any]]:
            with iterator as it:
                return [(kv.key.key, kv.key.window.start, kv.key.window.end, kv.value) for kv in it]

        for op, *args in data.draw(session_ops(keys)):
            if op in ("put", "remove", "fetch_session"):
                windowed = args[0]
                at = (serde.serialize(windowed.key), windowed.window.end, windowed.window.start)
                if op == "put":
                    store.put(windowed, args[1])
                    observed = max(observed, windowed.window.end)
                    if windowed.window.end > observed - retention:
                        if args[1] is None:
                            model.pop(at, None)
                        else:
                            model[at] = (windowed.key, args[1])
                elif op == "remove":
                    store.remove(windowed)
                    model.pop(at, None)
                else:
                    expected = model.get(at, (None, None))[1] if at[1] > observed - retention else None
                    assert store.fetch_session(windowed.key, windowed.window.start, windowed.window.end) == expected
            elif op == "find":
                key, earliest_end, latest_start, reverse = args
                method = store.backward_find_sessions if reverse else store.find_sessions
                assert read(method(key, earliest_end, latest_start)) == found(
                    lambda i, k: i[0] == serde.serialize(key) and i[1] >= earliest_end and i[2] <= latest_start,
                    False, reverse)
            elif op == "find_range":
                key_from, key_to, earliest_end, latest_start, reverse = args
                method = store.backward_find_sessions if reverse else store.find_sessions
                assert read(method(key_from, key_to, earliest_end, latest_start)) == found(
                    lambda i, k: bounded(serde, k, key_from, key_to) and i[1] >= earliest_end and i[2] <= latest_start,
                    True, reverse)
            elif op == "fetch":
                key, reverse = args
                assert read((store.backward_fetch if reverse else store.fetch)(key)) == found(
                    lambda i, k: i[0] == serde.serialize(key), False, reverse)
            elif op == "fetch_range":
                key_from, key_to, reverse = args
                assert read((store.backward_fetch if reverse else store.fetch)(key_from, key_to)) == found(
                    lambda i, k: bounded(serde, k, key_from, key_to), True, reverse)
            else:
                store = open_store(builder, backend)
            held = {k for k, _ in backend.scan() if k}
            assert held == {i[0] + struct.pack(">qq", i[1], i[2]) for i in model if i[1] > observed - retention}
