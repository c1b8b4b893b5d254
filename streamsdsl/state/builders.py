"""What a state store is, before it exists: Kafka Streams' ``Stores``, its suppliers and
``StoreBuilder`` (``org.apache.kafka.streams.state``), snake_case.

A *supplier* names a store and says how it keeps its bytes (persistent or in memory, a window
store's retention and window size, whether it retains duplicates); a *builder* adds the serdes
of its keys and values and the logging and caching flags. ``StreamsBuilder.add_state_store``
takes a builder; a processor opens the store by name (``context.get_state_store(name)``).

Every value here is frozen and valid by construction: names follow Kafka's rule
(`streamsdsl._validation.validate_name`), durations are an ``int`` of milliseconds or a
``timedelta`` (held as int ms), and a builder only takes the supplier of its kind. ``with_*``
returns a new builder.

What the flags mean on Spark:

- **logging**: Kafka Streams backs a store with a changelog topic unless logging is disabled.
  Here a store's state is always checkpointed by Spark with the query's other state, which is
  what restores it after a restart; ``with_logging_disabled()`` is accepted and changes nothing
  (the store is still checkpointed), and the topic configs of ``with_logging_enabled(config)``
  are kept but no changelog topic is written.
- **caching**: Kafka Streams' record cache holds writes back and forwards only the latest value
  per key when it flushes. A processor's store has no record cache here: a write is visible to
  the next read at once, and since a processor forwards records itself (``context.forward``),
  caching changes nothing a processor or its children see. ``with_caching_enabled()`` is
  accepted and changes nothing.
- **persistent / in memory**: both kinds keep their entries in the host's backend (Spark's
  state store on Spark, memory in the direct engine) and behave alike; ``persistent()`` reports
  what the supplier asked for.

Examples
--------
>>> from datetime import timedelta
>>> from streamsdsl.values.serdes import Serdes
>>> builder = Stores.key_value_store_builder(
...     Stores.persistent_key_value_store("seen"), Serdes.String(), Serdes.Long())
>>> builder.name, builder.kind, builder.logging_enabled, builder.caching_enabled
('seen', 'key-value', True, False)
>>> builder.with_caching_enabled().caching_enabled, builder.caching_enabled
(True, False)
>>> Stores.persistent_window_store("counts", timedelta(hours=1), 60_000, False).retention_period_ms
3600000
>>> Stores.in_memory_window_store("counts", 10, 60_000, False)
Traceback (most recent call last):
...
streamsdsl.errors.InvalidArgumentError: 'retention_period' must be >= 'window_size' (got 10 ms < 60000 ms): a window store keeps each window at least as long as it lasts.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Union

import attrs

from streamsdsl._validation import Duration, duration_field, instance_of, is_name, one_of
from streamsdsl.errors import InvalidArgumentError, InvalidTypeError
from streamsdsl.values.serdes import PlanSerde, Serde, check_serde

__all__ = [
    "KeyValueBytesStoreSupplier", "SessionBytesStoreSupplier", "StoreBuilder", "StoreSupplier", "Stores",
    "VersionedBytesStoreSupplier", "WindowBytesStoreSupplier", "default_segment_interval_ms",
]

_PERSISTENT_HINT = "Use Stores.persistent_* for True, Stores.in_memory_* for False."


def _bool_field(hint: str, **kwargs: Any) -> Any:
    return attrs.field(validator=instance_of(bool, hint=hint), **kwargs)


@attrs.frozen
class KeyValueBytesStoreSupplier:
    """A key-value store's name and kind (Kafka's ``KeyValueBytesStoreSupplier``).

    Made by `Stores.persistent_key_value_store`, `Stores.in_memory_key_value_store` and
    `Stores.persistent_timestamped_key_value_store`. ``timestamped`` records which factory made it:
    either kind serves `Stores.key_value_store_builder` and `Stores.timestamped_key_value_store_builder`
    (Kafka adapts one to the other too); the builder decides what the store holds.
    """

    name: str = attrs.field(validator=is_name)
    persistent: bool = _bool_field(_PERSISTENT_HINT, kw_only=True, default=True)
    timestamped: bool = _bool_field("Use Stores.persistent_timestamped_key_value_store for True.",
                                    kw_only=True, default=False)


@attrs.frozen
class WindowBytesStoreSupplier:
    """A window store's name, retention period, window size and duplicates rule (Kafka's
    ``WindowBytesStoreSupplier``).

    ``retention_period_ms`` is how long (in stream time: the largest window start put) the store
    keeps a window after its start; ``window_size_ms`` is the size of the windows it holds (a
    fetched window ends at ``start + window_size_ms``); with ``retain_duplicates`` every value
    put is kept, as a stream-stream join's stores keep each record.

    Examples
    --------
    >>> WindowBytesStoreSupplier("w", -1, 0, False)
    Traceback (most recent call last):
    ...
    streamsdsl.errors.InvalidArgumentError: 'retention_period' must be >= 0 ms (got -1). Pass how long the store keeps each window, e.g. timedelta(days=1).
    """

    name: str = attrs.field(validator=is_name)
    retention_period_ms: int = duration_field(
        "retention_period", positive=False, fix="Pass how long the store keeps each window, e.g. timedelta(days=1)."
    )
    window_size_ms: int = duration_field(
        "window_size", positive=False,
        fix="Pass the size of the windows the store holds, e.g. timedelta(minutes=5) (TimeWindows.size_ms).",
    )
    retain_duplicates: bool = _bool_field(
        "Pass True to keep every value put for a key and window (as a stream-stream join's stores do), "
        "False to keep the last one."
    )
    persistent: bool = _bool_field(_PERSISTENT_HINT, kw_only=True, default=True)

    def __attrs_post_init__(self) -> None:
        if self.retention_period_ms < self.window_size_ms:
            raise InvalidArgumentError(
                f"'retention_period' must be >= 'window_size' (got {self.retention_period_ms} ms < "
                f"{self.window_size_ms} ms): a window store keeps each window at least as long as it lasts."
            )


@attrs.frozen
class SessionBytesStoreSupplier:
    """A session store's name and retention period (Kafka's ``SessionBytesStoreSupplier``):
    the store keeps a session while its end is within ``retention_period_ms`` of stream time (the
    largest session end put)."""

    name: str = attrs.field(validator=is_name)
    retention_period_ms: int = duration_field(
        "retention_period", positive=False,
        fix="Pass how long the store keeps a session after it ends, e.g. timedelta(hours=1) "
            "(at least the session windows' gap plus grace).",
    )
    persistent: bool = _bool_field(_PERSISTENT_HINT, kw_only=True, default=True)


def default_segment_interval_ms(history_retention_ms: int) -> int:
    """Kafka's default segment interval of a versioned store
    (``RocksDbVersionedKeyValueBytesStoreSupplier.defaultSegmentInterval``)."""
    if history_retention_ms <= 60_000:
        return max(history_retention_ms // 3, 2_000)
    if history_retention_ms <= 300_000:
        return max(history_retention_ms // 5, 20_000)
    if history_retention_ms <= 3_600_000:
        return max(history_retention_ms // 12, 60_000)
    return max(history_retention_ms // 24, 300_000)


@attrs.frozen
class VersionedBytesStoreSupplier:
    """A versioned key-value store (Kafka's ``VersionedBytesStoreSupplier``, KIP-889): every
    version of a key's value is kept, each valid from its timestamp to the next version's, for
    ``history_retention_ms`` of the store's stream time (the largest timestamp put).

    A put older than the store's stream time minus the history retention is refused; a lookup
    ``as of`` a time older than that sees only the latest version (if it is old enough). The
    segment interval is how Kafka's RocksDB store groups old versions; it is kept and reported,
    and changes no result here. Made by `Stores.persistent_versioned_key_value_store`; a table
    source uses it through ``Materialized.as_(supplier)`` (see ``docs/tables.md``).

    Examples
    --------
    >>> s = Stores.persistent_versioned_key_value_store("rates", 60_000)
    >>> s.name, s.history_retention_ms, s.segment_interval_ms
    ('rates', 60000, 20000)
    >>> Stores.persistent_versioned_key_value_store("rates", -1)
    Traceback (most recent call last):
    ...
    streamsdsl.errors.InvalidArgumentError: 'history_retention' must be >= 0 ms (got -1). Pass how long old versions stay readable, e.g. timedelta(hours=1).
    """

    name: str = attrs.field(validator=is_name)
    history_retention_ms: int = duration_field(
        "history_retention", positive=False, fix="Pass how long old versions stay readable, e.g. timedelta(hours=1)."
    )
    segment_interval_ms: int = duration_field(
        "segment_interval", positive=True, fix="Pass a positive interval, or leave it out for Kafka's default.",
        default=attrs.Factory(lambda self: default_segment_interval_ms(self.history_retention_ms), takes_self=True),
    )
    persistent: bool = attrs.field(default=True, init=False)


StoreSupplier = Union[KeyValueBytesStoreSupplier, WindowBytesStoreSupplier, SessionBytesStoreSupplier]

#: The builder kinds, each with the supplier type it takes and the factories that make one.
_SUPPLIERS: dict[str, tuple[type, str]] = {
    "key-value": (KeyValueBytesStoreSupplier,
                  "Stores.persistent_key_value_store(name) or Stores.in_memory_key_value_store(name)"),
    "timestamped-key-value": (KeyValueBytesStoreSupplier,
                              "Stores.persistent_timestamped_key_value_store(name) or "
                              "Stores.in_memory_key_value_store(name)"),
    "window": (WindowBytesStoreSupplier,
               "Stores.persistent_window_store(name, retention_period, window_size, retain_duplicates) or "
               "Stores.in_memory_window_store(...)"),
    "session": (SessionBytesStoreSupplier,
                "Stores.persistent_session_store(name, retention_period) or Stores.in_memory_session_store(...)"),
}


def _supplier_fits_kind(inst: StoreBuilder, attribute: attrs.Attribute[Any], value: Any) -> None:
    expected, factories = _SUPPLIERS[inst.kind]
    if not isinstance(value, expected):
        raise InvalidTypeError(
            f"'supplier' of a {inst.kind} store builder must be a {expected.__name__} "
            f"(got {type(value).__name__}). Use {factories}."
        )


def _serde_field(arg: str) -> Any:
    return attrs.field(converter=lambda v: check_serde(v, arg))


def _topic_config(value: Any) -> tuple[tuple[str, str], ...]:
    """``with_logging_enabled``'s config: a mapping of str to str, held as a tuple of pairs."""
    if value is None:
        return ()
    if isinstance(value, tuple) and all(isinstance(p, tuple) and len(p) == 2 for p in value):
        value = dict(value)
    if not isinstance(value, Mapping):
        raise InvalidTypeError(
            f"'config' must be a dict of str to str, the changelog topic's configs (got "
            f"{type(value).__name__}: {value!r}). Pass e.g. {{'retention.ms': '86400000'}}, or nothing."
        )
    for name, setting in value.items():
        if not isinstance(name, str) or not isinstance(setting, str):
            raise InvalidTypeError(
                f"'config' must be a dict of str to str, the changelog topic's configs (got the entry "
                f"{name!r}: {setting!r}). Write each value as a str, e.g. {{'retention.ms': '86400000'}}."
            )
    return tuple(value.items())


@attrs.frozen
class StoreBuilder:
    """A state store ready to be added to a topology (Kafka's ``StoreBuilder``): its supplier, the
    serdes of its keys and values (``None``: JSON, the project's default), and the logging and
    caching flags (Kafka's defaults: logging enabled, caching disabled; what they mean on Spark is
    in the module's documentation).

    ``kind`` is ``"key-value"``, ``"timestamped-key-value"`` (values are `ValueAndTimestamp`),
    ``"window"`` or ``"session"``; make a builder with the `Stores` factory of its kind.

    Examples
    --------
    >>> b = Stores.session_store_builder(Stores.in_memory_session_store("sessions", 3_600_000), None, None)
    >>> b.name, b.kind, b.persistent, b.key_serde
    ('sessions', 'session', False, None)
    >>> b.with_logging_enabled({"retention.ms": "86400000"}).logging_config
    (('retention.ms', '86400000'),)
    >>> b.with_logging_disabled().logging_enabled
    False
    """

    KINDS: ClassVar[tuple[str, ...]] = tuple(_SUPPLIERS)

    kind: str = attrs.field(validator=one_of(tuple(_SUPPLIERS), "store builder"))
    supplier: StoreSupplier = attrs.field(validator=_supplier_fits_kind)
    key_serde: PlanSerde | None = _serde_field("key_serde")
    value_serde: PlanSerde | None = _serde_field("value_serde")
    logging_enabled: bool = _bool_field("Use with_logging_enabled() or with_logging_disabled().",
                                        kw_only=True, default=True)
    #: The changelog topic configs given to `with_logging_enabled`, as (name, value) pairs.
    logging_config: tuple[tuple[str, str], ...] = attrs.field(kw_only=True, default=(), converter=_topic_config)
    caching_enabled: bool = _bool_field("Use with_caching_enabled() or with_caching_disabled().",
                                        kw_only=True, default=False)

    @property
    def name(self) -> str:
        """The store's name (its supplier's)."""
        return self.supplier.name

    @property
    def persistent(self) -> bool:
        """Whether the supplier asked for a persistent store (both kinds behave alike here)."""
        return self.supplier.persistent

    def with_logging_enabled(self, config: Mapping[str, str] | None = None) -> StoreBuilder:
        """A copy with logging enabled and these changelog topic configs (kept, not applied: the
        store is checkpointed by Spark, and no changelog topic is written)."""
        return attrs.evolve(self, logging_enabled=True, logging_config=config)

    def with_logging_disabled(self) -> StoreBuilder:
        """A copy with logging disabled (accepted; the store is still checkpointed by Spark)."""
        return attrs.evolve(self, logging_enabled=False, logging_config=())

    def with_caching_enabled(self) -> StoreBuilder:
        """A copy with caching enabled (accepted; a processor's writes are visible at once either way)."""
        return attrs.evolve(self, caching_enabled=True)

    def with_caching_disabled(self) -> StoreBuilder:
        """A copy with caching disabled (the default)."""
        return attrs.evolve(self, caching_enabled=False)


class Stores:
    """Factories of store suppliers and builders, named as Kafka Streams' ``Stores``.

    Durations are an ``int`` of milliseconds or a ``timedelta``. Serdes are streamsdsl serdes
    (``Serdes.String()``, ``Serdes.Long()``, your own `Serde`); ``None`` means JSON.
    """

    @staticmethod
    def persistent_key_value_store(name: str) -> KeyValueBytesStoreSupplier:
        """A persistent key-value store named ``name``."""
        return KeyValueBytesStoreSupplier(name, persistent=True)

    @staticmethod
    def in_memory_key_value_store(name: str) -> KeyValueBytesStoreSupplier:
        """An in-memory key-value store named ``name``."""
        return KeyValueBytesStoreSupplier(name, persistent=False)

    @staticmethod
    def persistent_timestamped_key_value_store(name: str) -> KeyValueBytesStoreSupplier:
        """A persistent key-value store for `Stores.timestamped_key_value_store_builder`."""
        return KeyValueBytesStoreSupplier(name, persistent=True, timestamped=True)

    @staticmethod
    def persistent_versioned_key_value_store(name: str, history_retention: Duration,
                                             segment_interval: Duration | None = None) -> VersionedBytesStoreSupplier:
        """A persistent versioned key-value store (KIP-889) keeping old versions for
        ``history_retention`` of stream time; ``segment_interval`` (``> 0``; Kafka's default
        when left out) is how Kafka's store groups them. Materialize a table with it:
        ``builder.table(topic, materialized=Materialized.as_(supplier))``."""
        if segment_interval is None:
            return VersionedBytesStoreSupplier(name, history_retention)
        return VersionedBytesStoreSupplier(name, history_retention, segment_interval)

    @staticmethod
    def persistent_window_store(name: str, retention_period: Duration, window_size: Duration,
                                retain_duplicates: bool) -> WindowBytesStoreSupplier:
        """A persistent window store: windows of ``window_size`` kept for ``retention_period``
        (``>= window_size``) of stream time; with ``retain_duplicates`` every value put is kept."""
        return WindowBytesStoreSupplier(name, retention_period, window_size, retain_duplicates, persistent=True)

    @staticmethod
    def in_memory_window_store(name: str, retention_period: Duration, window_size: Duration,
                               retain_duplicates: bool) -> WindowBytesStoreSupplier:
        """An in-memory window store (see `persistent_window_store`)."""
        return WindowBytesStoreSupplier(name, retention_period, window_size, retain_duplicates, persistent=False)

    @staticmethod
    def persistent_session_store(name: str, retention_period: Duration) -> SessionBytesStoreSupplier:
        """A persistent session store keeping each session for ``retention_period`` after its end."""
        return SessionBytesStoreSupplier(name, retention_period, persistent=True)

    @staticmethod
    def in_memory_session_store(name: str, retention_period: Duration) -> SessionBytesStoreSupplier:
        """An in-memory session store (see `persistent_session_store`)."""
        return SessionBytesStoreSupplier(name, retention_period, persistent=False)

    @staticmethod
    def key_value_store_builder(supplier: KeyValueBytesStoreSupplier, key_serde: Serde | None,
                                value_serde: Serde | None) -> StoreBuilder:
        """A builder of a `KeyValueStore` over ``supplier``'s store."""
        return StoreBuilder("key-value", supplier, key_serde, value_serde)

    @staticmethod
    def timestamped_key_value_store_builder(supplier: KeyValueBytesStoreSupplier, key_serde: Serde | None,
                                            value_serde: Serde | None) -> StoreBuilder:
        """A builder of a `TimestampedKeyValueStore`: its values are `ValueAndTimestamp` (the value
        serde writes the value; the timestamp goes before it, 8 bytes big-endian, as in Kafka)."""
        return StoreBuilder("timestamped-key-value", supplier, key_serde, value_serde)

    @staticmethod
    def window_store_builder(supplier: WindowBytesStoreSupplier, key_serde: Serde | None,
                             value_serde: Serde | None) -> StoreBuilder:
        """A builder of a `WindowStore`; ``key_serde`` is the serde of the plain key (the window
        is added to it in Kafka's layout)."""
        return StoreBuilder("window", supplier, key_serde, value_serde)

    @staticmethod
    def session_store_builder(supplier: SessionBytesStoreSupplier, key_serde: Serde | None,
                              value_serde: Serde | None) -> StoreBuilder:
        """A builder of a `SessionStore`; ``key_serde`` is the serde of the plain key."""
        return StoreBuilder("session", supplier, key_serde, value_serde)
