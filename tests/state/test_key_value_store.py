"""KeyValueStore and TimestampedKeyValueStore: Kafka's KeyValueStore, method by method.

Orders are the serialized key bytes' (RocksDB's); ranges include both ends; None values delete;
iterators are snapshots, context managers, and refuse to be read once closed.
"""

from __future__ import annotations

from typing import Any

import pytest

from streamsdsl.errors import InvalidArgumentError, InvalidTypeError, SerializationError
from streamsdsl.state import (
    InvalidStateStoreError,
    KeyValue,
    KeyValueStore,
    MemoryBackend,
    NoSuchElementError,
    Stores,
    TimestampedKeyValueStore,
    ValueAndTimestamp,
    open_store,
)
from streamsdsl.values.serdes import Serde, Serdes


def kv_store(key_serde: Serde | None = Serdes.String(), value_serde: Serde | None = Serdes.Long(),
             *keys: Any) -> tuple[KeyValueStore[Any, Any], MemoryBackend]:
    """A key-value store named "kv" on a new MemoryBackend, holding each of ``keys`` with value 1, 2, ..."""
    backend = MemoryBackend()
    store = open_store(Stores.key_value_store_builder(Stores.in_memory_key_value_store("kv"), key_serde, value_serde),
                       backend)
    for i, key in enumerate(keys, 1):
        store.put(key, i)
    return store, backend


def keys(iterator: Any) -> list[Any]:
    """The keys an iterator yields (it is closed after)."""
    with iterator as entries:
        return [kv.key for kv in entries]


class Nothing:
    """A user's serde that writes None for the value "nothing"."""

    def serialize(self, value: Any) -> bytes | None:
        return None if value == "nothing" else value.encode()

    def deserialize(self, data: bytes) -> Any:
        return data.decode()


class TestPointOperations:
    def test_get_put_and_none_deletes(self) -> None:
        """put sets, get reads (None when absent), put(key, None) deletes as in Kafka."""
        store, backend = kv_store(Serdes.String(), Serdes.Long(), "a")
        store.put("a", 5)
        assert (store.get("a"), store.get("b"), backend.count()) == (5, None, 1)
        store.put("a", None)
        assert (store.get("a"), backend.count()) == (None, 0)

    def test_a_value_the_serde_writes_as_none_deletes(self) -> None:
        """Kafka: 'if the serialized bytes are also null it is interpreted as deletes'."""
        store, _ = kv_store(Serdes.String(), Nothing())
        store.put("a", "x")
        store.put("a", "nothing")
        assert store.get("a") is None

    def test_put_if_absent(self) -> None:
        """put_if_absent writes only an absent key and returns the value the key had."""
        store, _ = kv_store(Serdes.String(), Serdes.Long(), "a")
        assert store.put_if_absent("a", 10) == 1 and store.get("a") == 1
        assert store.put_if_absent("b", 20) is None and store.get("b") == 20
        assert store.put_if_absent("c", None) is None and store.get("c") is None

    def test_delete_returns_the_old_value(self) -> None:
        """delete removes the key and returns its value; None when there was none."""
        store, backend = kv_store(Serdes.String(), Serdes.Long(), "a")
        assert (store.delete("a"), store.delete("a"), backend.count()) == (1, None, 0)

    def test_put_all_takes_key_values_and_pairs(self) -> None:
        """put_all writes KeyValues and (key, value) pairs in order; a None value deletes."""
        store, _ = kv_store(Serdes.String(), Serdes.Long(), "a")
        store.put_all([KeyValue("b", 2), ("c", 3), ("a", None), ("c", 4)])
        assert [tuple(kv) for kv in store.all()] == [("b", 2), ("c", 4)]

    def test_put_all_writes_nothing_when_an_entry_is_bad(self) -> None:
        """Every entry is checked and serialized before the first write."""
        store, backend = kv_store(Serdes.String(), Serdes.Long())
        with pytest.raises(InvalidTypeError) as info:
            store.put_all([("a", 1), ("b", 2, 3)])
        assert info.value.args == ("'entries[1]' must be a KeyValue(key, value) or a (key, value) pair "
                                   "(got tuple: ('b', 2, 3)).",)
        with pytest.raises(SerializationError):
            store.put_all([("a", 1), ("b", "two")])
        with pytest.raises(InvalidArgumentError):
            store.put_all([("a", 1), (None, 2)])
        assert backend.count() == 0

    def test_values_are_bytes_in_the_backend(self) -> None:
        """The backend holds the serdes' bytes; None serdes mean JSON."""
        store, backend = kv_store(None, None)
        store.put({"id": 1}, ["x", 2])
        assert list(backend.scan()) == [(b'{"id":1}', b'["x",2]')]
        assert store.get({"id": 1}) == ["x", 2]

    def test_approximate_num_entries_is_exact(self) -> None:
        """approximate_num_entries counts the entries."""
        store, _ = kv_store(Serdes.String(), Serdes.Long(), "a", "b", "c")
        store.delete("b")
        assert store.approximate_num_entries() == 2


class TestOrder:
    def test_all_in_key_bytes_order(self) -> None:
        """String keys come in UTF-8 byte order: upper case first, a prefix before its extensions, é last."""
        store, _ = kv_store(Serdes.String(), Serdes.Long(), "b", "é", "ab", "a", "B")
        assert keys(store.all()) == ["B", "a", "ab", "b", "é"]
        assert keys(store.reverse_all()) == ["é", "b", "ab", "a", "B"]

    def test_long_keys_order_by_their_bytes_not_their_value(self) -> None:
        """Kafka's javadoc warning: Serdes.Long() puts negative numbers after positive ones."""
        store, _ = kv_store(Serdes.Long(), Serdes.Long(), 1, -1, 0, 2**40)
        assert keys(store.all()) == [0, 1, 2**40, -1]


class TestRange:
    def test_range_includes_both_ends(self) -> None:
        """range(from, to) holds from <= key <= to, in order; reverse_range the reverse."""
        store, _ = kv_store(Serdes.String(), Serdes.Long(), "a", "b", "c", "d")
        assert keys(store.range("b", "c")) == ["b", "c"]
        assert keys(store.reverse_range("b", "c")) == ["c", "b"]
        assert keys(store.range("b", "b")) == ["b"]
        assert keys(store.range("bb", "cc")) == ["c"]

    def test_none_bounds_are_unbounded(self) -> None:
        """A None bound leaves its side open."""
        store, _ = kv_store(Serdes.String(), Serdes.Long(), "a", "b", "c")
        assert keys(store.range(None, "b")) == ["a", "b"]
        assert keys(store.range("b", None)) == ["b", "c"]
        assert keys(store.reverse_range(None, None)) == ["c", "b", "a"]

    def test_to_key_includes_only_itself_not_its_extensions(self) -> None:
        """The upper bound is inclusive of the key, not of the keys it prefixes."""
        store, _ = kv_store(Serdes.String(), Serdes.Long(), "a", "ab", "a\x00", "b")
        assert keys(store.range(None, "a")) == ["a"]
        assert keys(store.range("a", "a\x00")) == ["a", "a\x00"]

    def test_from_after_to_is_empty(self) -> None:
        """A range whose from_key's bytes come after to_key's is empty (Kafka logs a warning)."""
        store, _ = kv_store(Serdes.Long(), Serdes.Long(), -1, 1)
        assert keys(store.range(-1, 1)) == []
        assert keys(store.range(1, -1)) == [1, -1]

    def test_prefix_scan_with_a_string_prefix(self) -> None:
        """Kafka's javadoc example: String keys 1, 11, 13, 2 and the prefix "1" find 1, 11, 13."""
        store, _ = kv_store(Serdes.String(), Serdes.Long(), "2", "13", "1", "11")
        assert keys(store.prefix_scan("1", Serdes.String())) == ["1", "11", "13"]
        assert keys(store.prefix_scan("", Serdes.String())) == ["1", "11", "13", "2"]
        assert keys(store.prefix_scan("3", Serdes.String())) == []

    def test_prefix_scan_with_an_integer_prefix(self) -> None:
        """Kafka's javadoc example: Integer keys 1, 2, 11, 13 and the prefix 1 find only 1."""
        store, _ = kv_store(Serdes.Integer(), Serdes.Long(), 1, 2, 11, 13)
        assert keys(store.prefix_scan(1, Serdes.Integer())) == [1]

    def test_prefix_scan_of_ff_bytes_is_unbounded_above(self) -> None:
        """A prefix of 0xff bytes has no next key: the scan runs to the end."""
        store, _ = kv_store(Serdes.Bytes(), Serdes.Long(), b"\xff", b"\xff\xff\x01", b"\xfe\xff", b"\xff\x00")
        assert keys(store.prefix_scan(b"\xff", Serdes.Bytes())) == [b"\xff", b"\xff\x00", b"\xff\xff\x01"]
        assert keys(store.prefix_scan(b"\xfe", Serdes.Bytes())) == [b"\xfe\xff"]

    def test_prefix_scan_with_a_json_prefix_serde(self) -> None:
        """A None prefix serde is JSON: the prefix is a JSON text's bytes (here a list's opening)."""
        store, _ = kv_store(None, Serdes.Long(), ["a", 1], ["a", 2], ["b", 1])
        assert keys(store.prefix_scan("a", None)) == []
        assert keys(store.prefix_scan(["a", 1], None)) == [["a", 1]]


class TestIterators:
    def test_has_next_peek_and_next(self) -> None:
        """has_next and peek_next_key look ahead without consuming; next consumes."""
        store, _ = kv_store(Serdes.String(), Serdes.Long(), "a", "b")
        with store.all() as it:
            assert it.has_next() and it.peek_next_key() == "a" and it.peek_next_key() == "a"
            assert next(it) == KeyValue("a", 1)
            assert it.peek_next_key() == "b" and next(it) == KeyValue("b", 2)
            assert not it.has_next()
            with pytest.raises(StopIteration):
                next(it)
            with pytest.raises(NoSuchElementError) as info:
                it.peek_next_key()
        assert info.value.args == ("The iterator over state store 'kv' has no next entry: check has_next() before "
                                   "peek_next_key().",)

    def test_a_with_block_closes_the_iterator(self) -> None:
        """After its with block, reading an iterator raises with the fix."""
        store, _ = kv_store(Serdes.String(), Serdes.Long(), "a", "b")
        with store.range("a", "b") as it:
            next(it)
        with pytest.raises(InvalidStateStoreError) as info:
            it.has_next()
        assert info.value.args == ("The iterator over state store 'kv' is closed: read an iterator before you close "
                                   "it (a with block closes it at the block's end).",)
        with pytest.raises(InvalidStateStoreError):
            next(it)
        it.close()  # closing twice is fine

    def test_iterators_are_snapshots(self) -> None:
        """Writes after an iterator is made do not show in it, as with RocksDB's iterators."""
        store, _ = kv_store(Serdes.String(), Serdes.Long(), "a", "b", "c")
        with store.all() as it:
            assert next(it) == KeyValue("a", 1)
            store.delete("b")
            store.put("c", 30)
            store.put("bb", 4)
            assert list(it) == [KeyValue("b", 2), KeyValue("c", 3)]
        assert [tuple(kv) for kv in store.all()] == [("a", 1), ("bb", 4), ("c", 30)]

    def test_deleting_every_key_while_iterating(self) -> None:
        """A loop may delete what it reads (a purge)."""
        store, backend = kv_store(Serdes.String(), Serdes.Long(), "a", "b", "c")
        with store.all() as it:
            for kv in it:
                store.delete(kv.key)
        assert backend.count() == 0


class TestLifeCycle:
    def test_name_persistent_open_flush_close(self) -> None:
        """A store reports its name and kind; after close every call raises, open iterators are closed."""
        backend = MemoryBackend()
        store = open_store(Stores.key_value_store_builder(Stores.persistent_key_value_store("seen"), None, None),
                           backend)
        store.put("a", 1)
        assert (store.name, store.persistent(), store.is_open(), repr(store)) == ("seen", True, True,
                                                                               "KeyValueStore('seen')")
        it = store.all()
        store.flush()
        store.close()
        assert not store.is_open()
        with pytest.raises(InvalidStateStoreError) as info:
            store.get("a")
        assert info.value.args == ("State store 'seen' is closed: a processor may use its stores from its init() "
                                   "until its close(), not after.",)
        for call in (lambda: store.put("a", 2), lambda: store.all(), lambda: store.approximate_num_entries(),
                     lambda: store.prefix_scan("a", None), lambda: store.delete("a")):
            with pytest.raises(InvalidStateStoreError):
                call()
        with pytest.raises(InvalidStateStoreError):
            it.has_next()
        assert backend.get(b'"a"') == b"1"  # the backend keeps the entries

    def test_a_store_opened_again_reads_the_backend(self) -> None:
        """A key-value store holds nothing of its own: a new one over the same backend sees every entry."""
        store, backend = kv_store(Serdes.String(), Serdes.Long(), "a", "b")
        again = KeyValueStore(Stores.persistent_key_value_store("kv"), backend, Serdes.String(), Serdes.Long())
        assert [tuple(kv) for kv in again.all()] == [("a", 1), ("b", 2)]


class TestErrors:
    def test_null_keys_are_refused(self) -> None:
        """A None key fails with the fix (Kafka: NullPointerException)."""
        store, _ = kv_store()
        message = ("'key' must not be None: a state store holds no null key (Kafka Streams refuses one too). Leave "
                   "records with a null key out before the store, e.g. if record.key is not None: ...")
        for call in (lambda: store.get(None), lambda: store.put(None, 1), lambda: store.delete(None),
                     lambda: store.put_if_absent(None, 1)):
            with pytest.raises(InvalidArgumentError) as info:
                call()
            assert info.value.args == (message,)
        with pytest.raises(InvalidArgumentError) as info:
            store.prefix_scan(None, Serdes.String())
        assert info.value.args == (message.replace("'key'", "'prefix'"),)

    def test_a_key_serialized_to_none_is_refused(self) -> None:
        """A user's key serde that writes None for a key leaves the store no bytes to hold it under."""
        store, _ = kv_store(Nothing(), Serdes.Long())
        with pytest.raises(InvalidArgumentError) as info:
            store.put("nothing", 1)
        assert info.value.args == ("'key' 'nothing' serializes to None with CustomSerde(Nothing): a state store "
                                   "needs bytes for each key. Make the serde's serialize() return bytes for every "
                                   "key.",)

    def test_wrong_value_type_is_the_serdes_error(self) -> None:
        """A value the serde cannot write raises the serde's SerializationError, and writes nothing."""
        store, backend = kv_store(Serdes.String(), Serdes.Long())
        with pytest.raises(SerializationError) as info:
            store.put("a", "one")
        assert info.value.args == ("Serdes.Long() cannot serialize str 'one': expected int",)
        assert backend.count() == 0

    def test_constructor_arguments_are_checked(self) -> None:
        """A store needs a supplier of its kind and a StoreBackend; open_store needs a StoreBuilder."""
        with pytest.raises(InvalidTypeError) as info:
            KeyValueStore(Stores.persistent_session_store("s", 1), MemoryBackend())  # type: ignore[arg-type]
        assert info.value.args == (
            "'supplier' of a KeyValueStore must be a KeyValueBytesStoreSupplier (got SessionBytesStoreSupplier: "
            "SessionBytesStoreSupplier(name='s', retention_period_ms=1, persistent=True)). Make the store with "
            "open_store(builder, backend).",)
        with pytest.raises(InvalidTypeError) as info:
            KeyValueStore(Stores.persistent_key_value_store("kv"), {})  # type: ignore[arg-type]
        assert info.value.args == ("'backend' must be a StoreBackend, with get, put, delete, scan and count (got "
                                   "dict: {}). Use MemoryBackend() outside a host.",)
        with pytest.raises(InvalidTypeError) as info:
            open_store(Stores.persistent_key_value_store("kv"), MemoryBackend())  # type: ignore[arg-type]
        assert info.value.args == (
            "'builder' must be a StoreBuilder (got KeyValueBytesStoreSupplier: KeyValueBytesStoreSupplier(name='kv', "
            "persistent=True, timestamped=False)). Make one with Stores.key_value_store_builder, "
            "Stores.timestamped_key_value_store_builder, Stores.window_store_builder or "
            "Stores.session_store_builder.",)


def timestamped() -> tuple[TimestampedKeyValueStore[Any], MemoryBackend]:
    """A timestamped store of String keys and String values on a new MemoryBackend."""
    backend = MemoryBackend()
    builder = Stores.timestamped_key_value_store_builder(Stores.persistent_timestamped_key_value_store("ts"),
                                                         Serdes.String(), Serdes.String())
    return open_store(builder, backend), backend


class TestTimestamped:
    def test_values_are_value_and_timestamp(self) -> None:
        """get, put_if_absent, delete and the iterators give ValueAndTimestamp."""
        store, _ = timestamped()
        store.put("b", ValueAndTimestamp("x", 7))
        assert store.put_if_absent("a", ValueAndTimestamp("y", 3)) is None
        assert store.put_if_absent("a", ValueAndTimestamp("z", 4)) == ValueAndTimestamp("y", 3)
        assert list(store.all()) == [KeyValue("a", ValueAndTimestamp("y", 3)), KeyValue("b", ValueAndTimestamp("x", 7))]
        assert store.delete("b") == ValueAndTimestamp("x", 7)

    def test_backend_layout_is_kafkas(self) -> None:
        """The backend holds the timestamp (8 bytes, big-endian, signed) then the value's bytes,
        as Kafka's ValueAndTimestampSerializer."""
        store, backend = timestamped()
        store.put("k", ValueAndTimestamp("v", 258))
        store.put("n", ValueAndTimestamp("", -1))
        assert list(backend.scan()) == [(b"k", b"\x00\x00\x00\x00\x00\x00\x01\x02v"), (b"n", b"\xff" * 8)]
        assert store.get("n") == ValueAndTimestamp("", -1)

    def test_none_and_a_none_value_delete(self) -> None:
        """put(key, None) and put(key, ValueAndTimestamp(None, ts)) delete (Kafka's make() returns null)."""
        store, backend = timestamped()
        store.put_all([("a", ValueAndTimestamp("x", 1)), ("b", ValueAndTimestamp("y", 2))])
        store.put("a", None)
        store.put("b", ValueAndTimestamp(None, 5))
        assert backend.count() == 0

    def test_plain_values_are_refused(self) -> None:
        """A value that is not a ValueAndTimestamp fails with the fix; so does a timestamp that is not an int."""
        store, _ = timestamped()
        with pytest.raises(InvalidTypeError) as info:
            store.put("a", "v")
        assert info.value.args == ("A timestamped store's values are ValueAndTimestamp(value, timestamp) (got str: "
                                   "'v'). Pass ValueAndTimestamp(value, record.timestamp), or None to delete.",)
        with pytest.raises(InvalidTypeError) as info:
            store.put("a", ValueAndTimestamp("v", 1.5))
        assert info.value.args == ("'timestamp' must be an int (epoch milliseconds) (got float: 1.5).",)
        with pytest.raises(InvalidArgumentError) as info:
            store.put("a", ValueAndTimestamp("v", 2**63))
        assert info.value.args == ("'timestamp' must fit in 8 bytes, -2**63 to 2**63 - 1 ms (got 9223372036854775808).",)
