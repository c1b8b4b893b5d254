"""Option objects of the DSL, named as in Kafka Streams (pure Python)."""

from __future__ import annotations

import enum
import functools
from typing import Any, Callable, Generic, Self, TypeVar

import attrs

from streamsdsl._validation import validate_name
from streamsdsl.errors import InvalidArgumentError, InvalidTypeError
from streamsdsl.state.builders import KeyValueBytesStoreSupplier, VersionedBytesStoreSupplier
from streamsdsl.values.serdes import PlanSerde, Serde, check_serde

__all__ = ["Consumed", "DeserializationHandler", "Grouped", "Materialized", "Named", "Produced", "Repartitioned",
           "TableJoined"]


def _serde_field(arg: str) -> Any:
    return attrs.field(default=None, converter=lambda v: check_serde(v, arg))


def _name_field() -> Any:
    return attrs.field(default=None, converter=lambda v: None if v is None else validate_name(v))


@attrs.frozen
class _SerdesAndName:
    """Options naming a processor and the serdes of its keys and values (JSON when not given)."""

    key_serde: PlanSerde | None = _serde_field("key_serde")
    value_serde: PlanSerde | None = _serde_field("value_serde")
    name: str | None = _name_field()

    @classmethod
    def with_serdes(cls, key_serde: Serde | None, value_serde: Serde | None) -> Self:
        """Options with these serdes (a serde of your own is wrapped in a `CustomSerde`)."""
        return cls(key_serde, value_serde)

    @classmethod
    def as_(cls, name: str) -> Self:
        """Options with this processor name."""
        return cls(name=name)

    def with_name(self, name: str) -> Self:
        """A copy with this processor name."""
        return attrs.evolve(self, name=name)


@attrs.frozen
class Consumed(_SerdesAndName):
    """How a source topic is read: key and value serdes (JSON when not given).

    Examples
    --------
    >>> from streamsdsl import Serdes
    >>> Consumed.with_serdes(Serdes.String(), Serdes.Long())
    Consumed(key_serde=Serdes.String(), value_serde=Serdes.Long(), name=None)
    """


@attrs.frozen
class Produced(_SerdesAndName):
    """How a sink topic is written: key and value serdes (JSON when not given)."""


@attrs.frozen
class Grouped(_SerdesAndName):
    """How a stream is grouped: serdes of the grouped records and an optional name."""


def _store_supplier(value: Any) -> Any:
    if value is None or isinstance(value, (KeyValueBytesStoreSupplier, VersionedBytesStoreSupplier)):
        return value
    raise InvalidTypeError(
        f"'supplier' of Materialized must be a key-value store supplier from Stores, e.g. "
        f"Stores.persistent_versioned_key_value_store('rates', timedelta(hours=1)) "
        f"(got {type(value).__name__}: {value!r})."
    )


@attrs.frozen
class Materialized:
    """How a table's or an aggregation's state store is named and which serdes its key/value use.

    ``Materialized.as_(name)`` names the store; ``Materialized.as_(supplier)`` takes the store's
    name from a supplier of `Stores`: a versioned one
    (``Stores.persistent_versioned_key_value_store(name, history_retention)``) makes a table
    source keep its history (KIP-889, ``docs/tables.md``).

    Examples
    --------
    >>> from streamsdsl.state.builders import Stores
    >>> m = Materialized.as_(Stores.persistent_versioned_key_value_store("rates", 60_000))
    >>> m.store_name, m.history_retention_ms
    ('rates', 60000)
    >>> Materialized.as_("counts").history_retention_ms is None
    True
    """

    store_name: str | None = _name_field()
    key_serde: PlanSerde | None = _serde_field("key_serde")
    value_serde: PlanSerde | None = _serde_field("value_serde")
    #: The store supplier given to `as_` (``None``: a store name or nothing was given).
    supplier: KeyValueBytesStoreSupplier | VersionedBytesStoreSupplier | None = attrs.field(
        default=None, kw_only=True, converter=_store_supplier)

    @classmethod
    def as_(cls, store: str | KeyValueBytesStoreSupplier | VersionedBytesStoreSupplier) -> Materialized:
        """Name the store (a ``str``), or take name and kind from a store supplier of `Stores`."""
        if isinstance(store, (KeyValueBytesStoreSupplier, VersionedBytesStoreSupplier)):
            return cls(store.name, supplier=store)
        if not isinstance(store, str):
            _store_supplier(store)
        return cls(store)

    @classmethod
    def with_serdes(cls, key_serde: Serde | None, value_serde: Serde | None) -> Materialized:
        return cls(None, key_serde, value_serde)

    def with_key_serde(self, key_serde: Serde) -> Materialized:
        return attrs.evolve(self, key_serde=key_serde)

    def with_value_serde(self, value_serde: Serde) -> Materialized:
        return attrs.evolve(self, value_serde=value_serde)

    @property
    def history_retention_ms(self) -> int | None:
        """The history retention of a versioned store supplier (ms), else ``None``."""
        return self.supplier.history_retention_ms if isinstance(self.supplier, VersionedBytesStoreSupplier) else None


_T = TypeVar("_T")


class _either(Generic[_T]):
    """A ``with_*`` method callable on an instance (a copy with the option set) or on the class
    (the defaults with the option set): ``Repartitioned.with_number_of_partitions(4)`` and
    ``Repartitioned.as_("x").with_number_of_partitions(4)`` alike."""

    def __init__(self, fn: Callable[..., _T]) -> None:
        self.fn = fn
        functools.update_wrapper(self, fn)  # type: ignore[arg-type]

    def __get__(self, obj: Any, owner: type) -> Callable[..., _T]:
        return functools.partial(self.fn, owner() if obj is None else obj)


def _partitions(inst: Any, attribute: Any, value: Any) -> None:
    if value is None:
        return
    if not isinstance(value, int) or isinstance(value, bool):
        raise InvalidTypeError(f"'number_of_partitions' must be an int (got {type(value).__name__}: {value!r}).")
    if value <= 0:
        raise InvalidArgumentError(f"'number_of_partitions' must be > 0 (got {value}): the repartition writes to "
                                   "that many partitions.")


@attrs.frozen
class Repartitioned:
    """How `KStream.repartition` repartitions (Kafka Streams' ``Repartitioned``): the name of the
    operation (``<name>-repartition`` is its topic), the serdes the records are written with, and
    the number of partitions (on Spark: the number of partitions the records are shuffled into,
    by key). Every ``with_*`` works on the class or on an instance (Kafka's static
    ``Repartitioned.numberOfPartitions(n)`` is ``Repartitioned.with_number_of_partitions(n)``).

    Examples
    --------
    >>> Repartitioned.as_("by-user").with_number_of_partitions(4)
    Repartitioned(name='by-user', key_serde=None, value_serde=None, number_of_partitions=4)
    >>> Repartitioned.with_number_of_partitions(0)
    Traceback (most recent call last):
    ...
    streamsdsl.errors.InvalidArgumentError: 'number_of_partitions' must be > 0 (got 0): the repartition writes to that many partitions.
    """

    name: str | None = _name_field()
    key_serde: PlanSerde | None = _serde_field("key_serde")
    value_serde: PlanSerde | None = _serde_field("value_serde")
    number_of_partitions: int | None = attrs.field(default=None, validator=_partitions)

    @classmethod
    def as_(cls, name: str) -> Repartitioned:
        """Name the repartition: its topic is ``<name>-repartition``, its processors
        ``<name>-repartition-sink`` / ``-filter`` / ``-source``."""
        return cls(name=name)

    @classmethod
    def with_serdes(cls, key_serde: Serde | None, value_serde: Serde | None) -> Repartitioned:
        """Write the records with these serdes (Kafka Streams' ``Repartitioned.with``)."""
        return cls(key_serde=key_serde, value_serde=value_serde)

    @_either
    def with_name(self, name: str) -> Repartitioned:
        """A copy with this name (see `as_`)."""
        return attrs.evolve(self, name=name)

    @_either
    def with_number_of_partitions(self, number_of_partitions: int) -> Repartitioned:
        """A copy repartitioning into ``number_of_partitions`` partitions (> 0)."""
        return attrs.evolve(self, number_of_partitions=number_of_partitions)

    @_either
    def with_key_serde(self, key_serde: Serde) -> Repartitioned:
        """A copy writing keys with ``key_serde``."""
        return attrs.evolve(self, key_serde=key_serde)

    @_either
    def with_value_serde(self, value_serde: Serde) -> Repartitioned:
        """A copy writing values with ``value_serde``."""
        return attrs.evolve(self, value_serde=value_serde)


@attrs.frozen
class Named:
    """A processor name: ``Named.as_("my-filter")`` (or pass ``name=`` to any operation)."""

    name: str = attrs.field(converter=validate_name)

    @classmethod
    def as_(cls, name: str) -> Named:
        return cls(name)


def _partitioner(value: Any) -> Any:
    if value is not None and not callable(value):
        raise InvalidTypeError(
            f"a TableJoined partitioner must be a callable (topic, key, value, num_partitions) -> partition "
            f"(got {type(value).__name__}: {value!r})."
        )
    return value


@attrs.frozen
class TableJoined:
    """Options of a foreign-key join (Kafka Streams' ``TableJoined``): the name its processors,
    store and internal topics derive from, and the partitioners of its subscription and response
    records.

    On Spark there are no internal topics: the join's three stages run as stateful operators
    whose state Spark's shuffle places by key, so the partitioners are accepted (code written for
    Kafka Streams keeps working) and change nothing; the results do not depend on them in Kafka
    Streams either.

    Examples
    --------
    >>> TableJoined.as_("orders-by-customer")
    TableJoined(partitioner=None, other_partitioner=None, name='orders-by-customer')
    """

    partitioner: Any = attrs.field(default=None, converter=_partitioner)
    other_partitioner: Any = attrs.field(default=None, converter=_partitioner)
    name: str | None = _name_field()

    @classmethod
    def with_(cls, partitioner: Any = None, other_partitioner: Any = None) -> TableJoined:
        """Options with these partitioners (``TableJoined.with``; accepted, no effect on Spark)."""
        return cls(partitioner, other_partitioner)

    @classmethod
    def as_(cls, name: str) -> TableJoined:
        """Options with this name (the join's processors are ``<name>-subscription-...``)."""
        return cls(name=name)

    def with_name(self, name: str) -> TableJoined:
        return attrs.evolve(self, name=name)

    def with_partitioner(self, partitioner: Any) -> TableJoined:
        return attrs.evolve(self, partitioner=partitioner)

    def with_other_partitioner(self, other_partitioner: Any) -> TableJoined:
        return attrs.evolve(self, other_partitioner=other_partitioner)


def check_option(value: Any, cls: type, arg: str) -> Any:
    if value is None or isinstance(value, cls):
        return value
    raise InvalidTypeError(
        f"'{arg}' must be a {cls.__name__} such as {cls.__name__}.with_serdes(...) "
        f"(got {type(value).__name__}: {value!r})."
    )


def resolve_name(name: str | Named | None, *others: str | None) -> str | None:
    """The user-given processor name from ``name=`` (str or Named) or an options object."""
    if isinstance(name, Named):
        return name.name
    if name is not None:
        return validate_name(name)
    for other in others:
        if other is not None:
            return other
    return None


class DeserializationHandler(enum.StrEnum):
    """What happens to a record whose key or value cannot be deserialized
    (``default.deserialization.exception.handler``).

    ``LOG_AND_FAIL`` (the default) fails the query, naming topic, partition and offset;
    ``LOG_AND_CONTINUE`` skips the record, counts it in ``dropped-records-total``, logs its
    coordinates and writes it to the dead-letter topic when one is configured.

    Examples
    --------
    >>> DeserializationHandler.parse("LogAndContinueExceptionHandler")
    <DeserializationHandler.LOG_AND_CONTINUE: 'log_and_continue'>
    """

    LOG_AND_FAIL = "log_and_fail"
    LOG_AND_CONTINUE = "log_and_continue"

    @classmethod
    def parse(cls, value: Any, key: str = "default.deserialization.exception.handler") -> DeserializationHandler:
        """Accept the enum, its value, or Kafka Streams' class names (short or qualified)."""
        if isinstance(value, cls):
            return value
        text = str(value).strip().lower().rsplit(".", 1)[-1]
        found = {"log_and_fail": cls.LOG_AND_FAIL, "logandfailexceptionhandler": cls.LOG_AND_FAIL,
                 "log_and_continue": cls.LOG_AND_CONTINUE,
                 "logandcontinueexceptionhandler": cls.LOG_AND_CONTINUE}.get(text)
        if found is None:
            raise InvalidArgumentError(f"'{key}' must be 'log_and_fail' or 'log_and_continue' (got {value!r}).")
        return found
