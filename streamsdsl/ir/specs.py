"""What IR nodes hold of the user's code: `UserFn` (a Python callable), `ColumnFn` (a pyspark
Column, compiled natively) and the aggregation specs built from them (no pyspark here: a
Column is only recognised, never imported)."""

from __future__ import annotations

from typing import Any, Callable

import attrs

from streamsdsl._validation import fn_name, instance_of, is_spark_column, require_callable, shape_params
from streamsdsl.errors import InvalidArgumentError, InvalidTypeError

__all__ = ["AggSpec", "AggregateAgg", "ColumnFn", "CountAgg", "Fn", "GroupedTableAgg", "ReduceAgg", "UserFn"]


# --- user functions --------------------------------------------------------------------------


def _is_callable(inst: UserFn, attribute: attrs.Attribute[Any], value: Any) -> None:
    require_callable(value, attribute.name, inst.shape)


@attrs.frozen(repr=False)
class UserFn:
    """A user-supplied Python callable; ``shape`` is its signature, as messages show it and as the
    engines call it: where a DSL method accepts two (Kafka's ``ValueMapper`` and
    ``ValueMapperWithKey``, ``ValueJoiner`` and ``ValueJoinerWithKey``), the one the function has."""

    fn: Callable[..., Any] = attrs.field(eq=False, validator=_is_callable)
    shape: str = attrs.field(validator=instance_of(str))

    @property
    def takes_key(self) -> bool:
        """Whether the function's first parameter is the record's key (read-only: a ``*WithKey``
        function receives it and cannot change it).

        Examples
        --------
        >>> UserFn(lambda k, v: v, "(key, value) -> value").takes_key, UserFn(len, "(value) -> value").takes_key
        (True, False)
        """
        params = shape_params(self.shape)
        return bool(params) and params[0] == "key"

    def __repr__(self) -> str:
        return f"{fn_name(self.fn)}{self.shape}"


def _is_column(inst: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if not is_spark_column(value):
        raise InvalidTypeError(f"'{attribute.name}' must be a pyspark Column (got {type(value).__name__}: {value!r}).")


@attrs.frozen(repr=False)
class ColumnFn:
    """A pyspark Column expression over the record columns ``key``, ``value``, ``timestamp``."""

    column: Any = attrs.field(eq=False, validator=_is_column)

    def __repr__(self) -> str:
        return fn_name(self.column)


Fn = UserFn | ColumnFn

_fn = instance_of(UserFn, ColumnFn)
_user_fn = instance_of(UserFn, hint="This step runs a Python callable; pyspark Columns are not accepted here.")
_optional_user_fn = instance_of(UserFn, optional=True)

# --- aggregation functions -------------------------------------------------------------------


@attrs.frozen
class CountAgg:
    """``count()``: initializer 0, aggregator ``agg + 1``, merger ``a1 + a2``."""


@attrs.frozen
class ReduceAgg:
    """``reduce(reducer)``: null initializer; the first value starts the aggregate."""

    reducer: Fn = attrs.field(validator=_fn)


def _initializer_matches_aggregator(inst: AggregateAgg, attribute: attrs.Attribute[Any], value: Any) -> None:
    if isinstance(inst.aggregator, ColumnFn) and (value is not None or inst.merger is not None):
        raise InvalidArgumentError(
            "'initializer' and 'merger' must be None when 'aggregator' is a pyspark aggregate Column; "
            "the Column defines the whole aggregation."
        )
    if isinstance(inst.aggregator, UserFn) and value is None:
        raise InvalidArgumentError(
            "'initializer' is required when 'aggregator' is a Python callable: it makes the first aggregate."
        )


@attrs.frozen
class AggregateAgg:
    """``aggregate(initializer, aggregator[, merger])``: a Python initializer and aggregator, or
    a pyspark aggregate Column alone (initializer and merger None)."""

    initializer: UserFn | None = attrs.field(validator=[_optional_user_fn, _initializer_matches_aggregator])
    aggregator: Fn = attrs.field(validator=_fn)
    merger: UserFn | None = attrs.field(default=None, validator=_optional_user_fn)


AggSpec = CountAgg | ReduceAgg | AggregateAgg


def _grouped_table_fns(inst: GroupedTableAgg, attribute: attrs.Attribute[Any], value: Any) -> None:
    given = {"initializer": inst.initializer, "adder": inst.adder, "subtractor": value}
    needed = {"count": (), "reduce": ("adder", "subtractor"), "aggregate": ("initializer", "adder", "subtractor")}
    wanted = needed[inst.kind]
    missing = [a for a in wanted if given[a] is None]
    extra = [a for a, f in given.items() if f is not None and a not in wanted]
    if missing or extra:
        raise InvalidArgumentError(
            f"A KGroupedTable {inst.kind}() takes {', '.join(wanted) or 'no functions'}"
            f"{f'; missing: {missing}' if missing else ''}{f'; not allowed: {extra}' if extra else ''}."
        )


def _grouped_table_kind(inst: GroupedTableAgg, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value not in ("count", "reduce", "aggregate"):
        raise InvalidArgumentError(f"'kind' must be 'count', 'reduce' or 'aggregate' (got {value!r}).")


@attrs.frozen
class GroupedTableAgg:
    """A ``KGroupedTable`` aggregation: ``count`` (no functions), ``reduce`` (``adder(agg, value)``,
    ``subtractor(agg, value)``) or ``aggregate`` (``initializer()``, ``adder(key, value, agg)``,
    ``subtractor(key, value, agg)``)."""

    kind: str = attrs.field(validator=_grouped_table_kind)
    initializer: UserFn | None = attrs.field(default=None, validator=_optional_user_fn)
    adder: UserFn | None = attrs.field(default=None, validator=_optional_user_fn)
    subtractor: UserFn | None = attrs.field(default=None, validator=[_optional_user_fn, _grouped_table_fns])
