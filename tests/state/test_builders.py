"""Stores, the store suppliers and StoreBuilder: valid by construction, immutable, Kafka's defaults.

Each invalid value must fail with the exact exception type and message; the `Stores` factories
are only the friendly spelling of the constructors.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any, Callable

import attrs
import pytest

from streamsdsl.errors import InvalidArgumentError, InvalidTypeError, StreamsDslError
from streamsdsl.state import (
    KeyValueBytesStoreSupplier,
    SessionBytesStoreSupplier,
    StoreBuilder,
    Stores,
)
from streamsdsl.values.serdes import CustomSerde, Serdes, WindowedSerdes

RETENTION_FIX = "Pass how long the store keeps each window, e.g. timedelta(days=1)."
SIZE_FIX = "Pass the size of the windows the store holds, e.g. timedelta(minutes=5) (TimeWindows.size_ms)."
SESSION_FIX = ("Pass how long the store keeps a session after it ends, e.g. timedelta(hours=1) "
               "(at least the session windows' gap plus grace).")
DUPLICATES_HINT = ("Pass True to keep every value put for a key and window (as a stream-stream join's stores do), "
                   "False to keep the last one.")


class Upper:
    """A user's serde."""

    def serialize(self, value: Any) -> bytes:
        return str(value).upper().encode()

    def deserialize(self, data: bytes) -> Any:
        return data.decode()


class TestSuppliers:
    def test_key_value_factories(self) -> None:
        """The three key-value factories differ in the persistent and timestamped flags only."""
        assert Stores.persistent_key_value_store("a") == KeyValueBytesStoreSupplier("a", persistent=True)
        assert Stores.in_memory_key_value_store("a") == KeyValueBytesStoreSupplier("a", persistent=False)
        assert Stores.persistent_timestamped_key_value_store("a") == KeyValueBytesStoreSupplier(
            "a", persistent=True, timestamped=True)

    def test_window_factories_take_int_ms_or_timedelta(self) -> None:
        """Durations are int milliseconds or timedelta, held as int milliseconds."""
        supplier = Stores.persistent_window_store("w", timedelta(days=1), timedelta(minutes=5), True)
        assert (supplier.name, supplier.retention_period_ms, supplier.window_size_ms, supplier.retain_duplicates,
                supplier.persistent) == ("w", 86_400_000, 300_000, True, True)
        memory = Stores.in_memory_window_store("w", 100, 100, False)
        assert (memory.retention_period_ms, memory.window_size_ms, memory.persistent) == (100, 100, False)

    def test_session_factories(self) -> None:
        """A session supplier holds its retention period in ms."""
        assert Stores.persistent_session_store("s", timedelta(seconds=3)) == SessionBytesStoreSupplier("s", 3000)
        assert Stores.in_memory_session_store("s", 0).persistent is False

    def test_zero_durations_are_valid(self) -> None:
        """Kafka accepts a retention period and a window size of 0 ms."""
        assert Stores.in_memory_window_store("w", 0, 0, False).retention_period_ms == 0
        assert Stores.in_memory_session_store("s", 0).retention_period_ms == 0


INVALID: list[tuple[Callable[[], Any], type[StreamsDslError], str]] = [
    (lambda: Stores.persistent_key_value_store(""), InvalidArgumentError,
     "'name' must not be empty. Pass a name such as 'orders-count'."),
    (lambda: Stores.in_memory_key_value_store("a b"), InvalidArgumentError,
     "'name' 'a b' contains an illegal character; legal characters are ASCII letters, digits, '.', '_' and '-'."),
    (lambda: Stores.persistent_session_store(5, 10), InvalidTypeError, "'name' must be a str (got int: 5)."),
    (lambda: Stores.persistent_window_store("w", -1, 0, False), InvalidArgumentError,
     f"'retention_period' must be >= 0 ms (got -1). {RETENTION_FIX}"),
    (lambda: Stores.persistent_window_store("w", 10, -5, False), InvalidArgumentError,
     f"'window_size' must be >= 0 ms (got -5). {SIZE_FIX}"),
    (lambda: Stores.persistent_window_store("w", 10, timedelta(minutes=1), False), InvalidArgumentError,
     "'retention_period' must be >= 'window_size' (got 10 ms < 60000 ms): a window store keeps each window at "
     "least as long as it lasts."),
    (lambda: Stores.in_memory_window_store("w", "1d", 0, False), InvalidTypeError,
     "'retention_period' must be an int (milliseconds) or a datetime.timedelta (got str: '1d')."),
    (lambda: Stores.in_memory_window_store("w", 10, 5, 1), InvalidTypeError,
     f"'retain_duplicates' must be bool (got int: 1). {DUPLICATES_HINT}"),
    (lambda: Stores.persistent_session_store("s", -1), InvalidArgumentError,
     f"'retention_period' must be >= 0 ms (got -1). {SESSION_FIX}"),
    (lambda: Stores.in_memory_session_store("s", timedelta(microseconds=1500)), InvalidArgumentError,
     "'retention_period' must be a whole number of milliseconds (got datetime.timedelta(microseconds=1500)). "
     "Round the timedelta to milliseconds."),
    (lambda: KeyValueBytesStoreSupplier("a", persistent="yes"), InvalidTypeError,
     "'persistent' must be bool (got str: 'yes'). Use Stores.persistent_* for True, Stores.in_memory_* for False."),
]


class TestValidation:
    @pytest.mark.parametrize("build, error, message", INVALID)
    def test_invalid_values_fail_at_construction(self, build: Callable[[], Any], error: type[StreamsDslError],
                                                 message: str) -> None:
        """Every invalid supplier fails when it is built, naming the argument, the unit and the fix."""
        with pytest.raises(error) as info:
            build()
        assert info.value.args == (message,)

    def test_builder_takes_only_its_kind_of_supplier(self) -> None:
        """A window builder refuses a key-value supplier, and so on, naming the factories to use."""
        with pytest.raises(InvalidTypeError) as info:
            Stores.window_store_builder(Stores.persistent_key_value_store("a"), None, None)  # type: ignore[arg-type]
        assert info.value.args == (
            "'supplier' of a window store builder must be a WindowBytesStoreSupplier (got KeyValueBytesStoreSupplier). "
            "Use Stores.persistent_window_store(name, retention_period, window_size, retain_duplicates) or "
            "Stores.in_memory_window_store(...).",)
        with pytest.raises(InvalidTypeError) as info:
            Stores.key_value_store_builder(Stores.persistent_session_store("s", 1), None, None)  # type: ignore[arg-type]
        assert info.value.args == (
            "'supplier' of a key-value store builder must be a KeyValueBytesStoreSupplier (got "
            "SessionBytesStoreSupplier). Use Stores.persistent_key_value_store(name) or "
            "Stores.in_memory_key_value_store(name).",)
        with pytest.raises(InvalidTypeError) as info:
            Stores.session_store_builder("s", None, None)  # type: ignore[arg-type]
        assert info.value.args == (
            "'supplier' of a session store builder must be a SessionBytesStoreSupplier (got str). Use "
            "Stores.persistent_session_store(name, retention_period) or Stores.in_memory_session_store(...).",)

    def test_unknown_kind(self) -> None:
        """A builder's kind is one of the four."""
        with pytest.raises(InvalidArgumentError) as info:
            StoreBuilder("list", Stores.persistent_key_value_store("a"), None, None)
        assert info.value.args == ("'kind' of a store builder must be 'key-value', 'timestamped-key-value', "
                                   "'window' or 'session' (got 'list').",)

    def test_serdes_are_checked(self) -> None:
        """A serde class instead of an instance, or a windowed serde, is refused with the fix."""
        supplier = Stores.persistent_key_value_store("a")
        with pytest.raises(InvalidTypeError) as info:
            Stores.key_value_store_builder(supplier, Upper, None)
        assert info.value.args == ("'key_serde' must be a serde instance, not the class Upper: pass Upper().",)
        windowed = WindowedSerdes.session_windowed_serde_from(Serdes.String())
        with pytest.raises(InvalidTypeError) as info:
            Stores.session_store_builder(Stores.persistent_session_store("s", 1), windowed, None)
        assert info.value.args == (
            f"'key_serde' takes the serde of the key itself (e.g. Serdes.String()), not {windowed!r}: windowed keys "
            "are written in Kafka Streams' windowed layout automatically.",)
        with pytest.raises(InvalidTypeError) as info:
            Stores.key_value_store_builder(supplier, None, 5)
        assert info.value.args == (
            "'value_serde' must be a Serde such as Serdes.String(), or an object with serialize(value) and "
            "deserialize(data) methods (got int: 5).",)

    def test_logging_config_is_a_dict_of_str(self) -> None:
        """with_logging_enabled takes a dict of str to str, and says how to write one."""
        builder = Stores.key_value_store_builder(Stores.persistent_key_value_store("a"), None, None)
        with pytest.raises(InvalidTypeError) as info:
            builder.with_logging_enabled({"retention.ms": 86_400_000})  # type: ignore[dict-item]
        assert info.value.args == (
            "'config' must be a dict of str to str, the changelog topic's configs (got the entry 'retention.ms': "
            "86400000). Write each value as a str, e.g. {'retention.ms': '86400000'}.",)
        with pytest.raises(InvalidTypeError) as info:
            builder.with_logging_enabled(["retention.ms"])  # type: ignore[arg-type]
        assert info.value.args == (
            "'config' must be a dict of str to str, the changelog topic's configs (got list: ['retention.ms']). "
            "Pass e.g. {'retention.ms': '86400000'}, or nothing.",)


class TestBuilder:
    def test_kinds_serdes_and_kafka_defaults(self) -> None:
        """Each factory makes its kind; logging is enabled and caching disabled by default, as in
        Kafka; a user's serde is wrapped; None (JSON) stays None."""
        kv = Stores.key_value_store_builder(Stores.in_memory_key_value_store("kv"), Serdes.String(), Upper())
        assert (kv.kind, kv.name, kv.persistent, kv.key_serde, kv.logging_enabled, kv.logging_config,
                kv.caching_enabled) == ("key-value", "kv", False, Serdes.String(), True, (), False)
        assert isinstance(kv.value_serde, CustomSerde)
        ts = Stores.timestamped_key_value_store_builder(Stores.persistent_timestamped_key_value_store("t"), None, None)
        window = Stores.window_store_builder(Stores.persistent_window_store("w", 10, 5, False), None, None)
        session = Stores.session_store_builder(Stores.persistent_session_store("s", 10), None, None)
        assert [(b.kind, b.name, b.key_serde, b.value_serde) for b in (ts, window, session)] == [
            ("timestamped-key-value", "t", None, None), ("window", "w", None, None), ("session", "s", None, None)]
        assert StoreBuilder.KINDS == ("key-value", "timestamped-key-value", "window", "session")

    def test_either_key_value_supplier_serves_either_builder(self) -> None:
        """As Kafka adapts one to the other, a plain supplier serves the timestamped builder and back."""
        plain = Stores.timestamped_key_value_store_builder(Stores.persistent_key_value_store("a"), None, None)
        stamped = Stores.key_value_store_builder(Stores.persistent_timestamped_key_value_store("b"), None, None)
        assert (plain.kind, stamped.kind) == ("timestamped-key-value", "key-value")

    def test_with_methods_return_new_builders(self) -> None:
        """with_* returns a new builder and leaves the one it is called on unchanged."""
        builder = Stores.key_value_store_builder(Stores.persistent_key_value_store("a"), None, None)
        logged = builder.with_logging_enabled({"cleanup.policy": "compact", "retention.ms": "100"})
        assert logged.logging_config == (("cleanup.policy", "compact"), ("retention.ms", "100"))
        unlogged = logged.with_logging_disabled()
        assert (unlogged.logging_enabled, unlogged.logging_config) == (False, ())
        assert logged.with_logging_enabled().logging_config == ()
        cached = builder.with_caching_enabled()
        assert (cached.caching_enabled, cached.with_caching_disabled().caching_enabled) == (True, False)
        assert builder == Stores.key_value_store_builder(Stores.persistent_key_value_store("a"), None, None)
        assert (builder.logging_enabled, builder.caching_enabled) == (True, False)

    def test_builders_and_suppliers_are_frozen_and_hashable(self) -> None:
        """No field of a builder or supplier can be reassigned; both hash (a topology may key on them)."""
        builder = Stores.window_store_builder(Stores.persistent_window_store("w", 10, 5, False), None, None)
        with pytest.raises(attrs.exceptions.FrozenInstanceError):
            builder.caching_enabled = True  # type: ignore[misc]
        with pytest.raises(attrs.exceptions.FrozenInstanceError):
            builder.supplier.retention_period_ms = 1  # type: ignore[misc]
        assert hash(builder.with_logging_enabled({"a": "b"})) == hash(builder.with_logging_enabled({"a": "b"}))
