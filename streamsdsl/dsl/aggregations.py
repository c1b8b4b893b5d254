"""Built-in aggregations: ``Aggregations.count()``, ``sum``, ``min`` and ``max`` of a number
(the value itself, or a numeric field of a JSON object value).

They are ordinary Kafka-Streams-style ``(initializer, aggregator[, merger])`` functions, so they
run anywhere a Python aggregation runs, and the compiler recognises them: a topology that uses
only built-in aggregations (``count()``, ``reduce(operator.add)``, ``reduce(max)``,
``reduce(min)`` on Long / Integer / Double values, or these helpers) runs them on the JVM
operator, at Spark's own speed (see the *Built-in aggregations* docs page).

A record without a number (a null value, a value that is not a JSON object, a missing field,
a field that is not a number of the declared ``value_type``) leaves the aggregate unchanged; it
still counts as a record of its window (its timestamp is the window's, it is forwarded).

Examples
--------
>>> total = Aggregations.sum("amount")
>>> init, add = total
>>> add("k", {"amount": 2.5}, add("k", {"amount": 1}, init()))
3.5
>>> add("k", {"other": 1}, 3.5), add("k", None, 3.5)
(3.5, 3.5)
>>> Aggregations.max("amount", value_type=int).aggregator("k", {"amount": 7}, None)
7
>>> Aggregations.sum("amount", value_type=bool)
Traceback (most recent call last):
...
streamsdsl.errors.InvalidTypeError: 'value_type' must be int or float (got bool)...
"""

from __future__ import annotations

from typing import Any, Iterator

import attrs

from streamsdsl.errors import InvalidArgumentError, InvalidTypeError

__all__ = ["Aggregations", "BuiltinAggregation", "BuiltinAggregator", "BuiltinInitializer", "BuiltinMerger"]

_OPS = ("count", "sum", "min", "max")


def _value_type(inst: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value not in (int, float):
        name = getattr(value, "__name__", repr(value))
        raise InvalidTypeError(
            f"'value_type' must be int or float (got {name}): the aggregate is a 64-bit integer (int, "
            "Serdes.Long()) or a double (float, Serdes.Double())."
        )


def _field(inst: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value is None:
        return
    if not isinstance(value, str):
        raise InvalidTypeError(f"'field' must be a str naming a field of a JSON object value, or None for the "
                               f"value itself (got {type(value).__name__}: {value!r}).")
    if not value:
        raise InvalidArgumentError("'field' must not be empty: name a field of the JSON object value, e.g. 'amount'.")


def _op(inst: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value not in _OPS:
        raise InvalidArgumentError(f"'op' must be one of {', '.join(_OPS)} (got {value!r}).")


@attrs.frozen
class BuiltinInitializer:
    """``initializer()``: 0 for count and sum, None for min and max (no value yet)."""

    op: str = attrs.field(validator=_op)
    value_type: type = attrs.field(default=int, validator=_value_type)

    @property
    def zero(self) -> bool:
        return self.op in ("count", "sum")

    def __call__(self) -> Any:
        return self.value_type(0) if self.zero else None


@attrs.frozen
class BuiltinAggregator:
    """``aggregator(key, value, aggregate)`` of a built-in aggregation."""

    op: str = attrs.field(validator=_op)
    field: str | None = attrs.field(default=None, validator=_field)
    value_type: type = attrs.field(default=int, validator=_value_type)

    def number(self, value: Any) -> Any:
        """The record's number, or None when it has none of ``value_type``."""
        if self.field is not None:
            value = value.get(self.field) if isinstance(value, dict) else None
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return None
        if self.value_type is int:
            return value if isinstance(value, int) else None
        return float(value)

    def __call__(self, key: Any, value: Any, aggregate: Any) -> Any:
        if self.op == "count":
            return aggregate + 1
        x = self.number(value)
        if x is None:
            return aggregate
        if self.op == "sum":
            return aggregate + x
        if aggregate is None:
            return x
        return min(aggregate, x) if self.op == "min" else max(aggregate, x)


@attrs.frozen
class BuiltinMerger:
    """``merger(key, agg1, agg2)`` of session windows: sum for count and sum; min / max skip None."""

    op: str = attrs.field(validator=_op)
    value_type: type = attrs.field(default=int, validator=_value_type)

    def __call__(self, key: Any, agg1: Any, agg2: Any) -> Any:
        if self.op in ("count", "sum"):
            return agg1 + agg2
        if agg1 is None:
            return agg2
        if agg2 is None:
            return agg1
        return min(agg1, agg2) if self.op == "min" else max(agg1, agg2)


@attrs.frozen
class BuiltinAggregation:
    """A built-in aggregation's functions. Unpack it into ``aggregate``:
    ``grouped.aggregate(*agg)`` gives ``(initializer, aggregator)``; session windows also need
    the merger: ``session_windowed.aggregate(*agg.with_merger())``; a cogroup takes
    ``agg.aggregator`` per stream and ``agg.initializer`` in ``aggregate``."""

    initializer: BuiltinInitializer
    aggregator: BuiltinAggregator
    merger: BuiltinMerger

    def __iter__(self) -> Iterator[Any]:
        return iter((self.initializer, self.aggregator))

    def with_merger(self) -> tuple[BuiltinInitializer, BuiltinAggregator, BuiltinMerger]:
        """``(initializer, aggregator, merger)``: the arguments of a session-windowed ``aggregate``."""
        return (self.initializer, self.aggregator, self.merger)

    @property
    def value_type(self) -> type:
        return self.aggregator.value_type


def _make(op: str, field: str | None, value_type: type) -> BuiltinAggregation:
    return BuiltinAggregation(BuiltinInitializer(op, value_type), BuiltinAggregator(op, field, value_type),
                              BuiltinMerger(op, value_type))


class Aggregations:
    """Factories of the built-in aggregations (compiled to the JVM operator when it is loaded).

    ``field`` names a numeric field of a JSON object value (``Serdes.Json()``, the default);
    ``None`` aggregates the value itself (a Long, Integer or Double value). ``value_type`` is
    ``int`` (a 64-bit integer aggregate, written with ``Serdes.Long()``) or ``float`` (a double,
    ``Serdes.Double()``): the aggregate's default value serde follows it.
    """

    @staticmethod
    def count() -> BuiltinAggregation:
        """Count records (as ``count()``, but usable in ``aggregate`` and ``cogroup``)."""
        return _make("count", None, int)

    @staticmethod
    def sum(field: str | None = None, *, value_type: type = float) -> BuiltinAggregation:
        """Sum of the numbers (0 before the first)."""
        return _make("sum", field, value_type)

    @staticmethod
    def min(field: str | None = None, *, value_type: type = float) -> BuiltinAggregation:
        """Smallest number (None before the first)."""
        return _make("min", field, value_type)

    @staticmethod
    def max(field: str | None = None, *, value_type: type = float) -> BuiltinAggregation:
        """Largest number (None before the first)."""
        return _make("max", field, value_type)
