"""The bottom of the DSL: what every stage is, and the checks of the user's functions.

The stage modules import downward only (a test keeps it so)::

    stage ← repartition ← joins, table_joins, grouped_table ← table ← grouped ← cogroup ← stream ← api

A stage makes a stage of a module above its own through the builder (`StreamsBuilder._stream`,
``_table``, ``_cogroup``): `streamsdsl.dsl.api`, the top, is the one module that knows every
stage class, as Kafka Streams' ``InternalStreamsBuilder`` is. Type checks across modules test
the bases below (`StreamStage`, `TableStage`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar, Mapping, Sequence

import attrs

from streamsdsl import ir
from streamsdsl._validation import is_spark_column, require_callable
from streamsdsl.dsl.options import Materialized, Named, check_option
from streamsdsl.errors import InvalidArgumentError, StageMethodError, not_yet
from streamsdsl.values.windows import SessionWindows, SlidingWindows, TimeWindows

if TYPE_CHECKING:
    from streamsdsl.dsl.api import StreamsBuilder

__all__ = ["NameArg", "StreamStage", "TableStage"]

NameArg = str | Named | None


def _user_fn(value: Any, arg: str, shape: str | Sequence[str], *, column_ok: bool = False) -> ir.UserFn:
    """A user function, checked when the topology is written: callable, with ``shape``'s arity,
    or that of one of several shapes (the first it fits is kept: `UserFn.takes_key`) —
    ``column_ok``: the message says a pyspark Column would do too."""
    return ir.UserFn(value, require_callable(value, arg, shape, column_ok=column_ok, check_arity=True))


#: Kafka's ``ValueMapper`` / ``ValueMapperWithKey`` overloads (the key is read-only).
VALUE_MAPPER = ("(value) -> value", "(key, value) -> value")
#: ``flat_map_values``' ``ValueMapper`` / ``ValueMapperWithKey`` returning an iterable.
VALUES_MAPPER = ("(value) -> iterable of values", "(key, value) -> iterable of values")


def joiner_shapes(other: str) -> tuple[str, str]:
    """Kafka's ``ValueJoiner`` / ``ValueJoinerWithKey`` overloads, ``other`` naming the right value."""
    return f"(value, {other}) -> value", f"(key, value, {other}) -> value"


def _fn(value: Any, arg: str, shape: str | Sequence[str], *, column_ok: bool = False) -> ir.Fn:
    """A user function or, where ``column_ok``, a pyspark Column."""
    if column_ok and is_spark_column(value):
        return ir.ColumnFn(value)
    return _user_fn(value, arg, shape, column_ok=column_ok)


def _materialized(materialized: Materialized | None, *, versioned: bool = False) -> Materialized | None:
    """``materialized`` checked; a versioned store supplier only where ``versioned`` (a table
    source: ``builder.table``, ``to_table``), as Kafka Streams materializes only KTables with one."""
    materialized = check_option(materialized, Materialized, "materialized")
    if not versioned and materialized is not None and materialized.history_retention_ms is not None:
        raise InvalidArgumentError(
            f"A versioned store ({materialized.store_name!r}) can materialize a table source only (builder.table(..., "
            "materialized=...) or to_table(materialized=...)); aggregations and other tables keep their latest value "
            "per key: pass Materialized.as_(name) here.")
    return materialized


class _Hinted:
    """Base of every stage: a method that only other stages have is answered with a
    `StageMethodError` (an ``AttributeError``) saying where it exists (each stage class's
    ``_hints``, from `streamsdsl.dsl.hints`, read along the class's MRO); a method that is not
    there yet raises the not-yet error naming its row in the docs; any other missing attribute
    keeps Python's usual ``AttributeError``."""

    __slots__ = ()

    #: {method of another stage: where it exists and what to write}
    _hints: ClassVar[Mapping[str, str]] = {}

    if not TYPE_CHECKING:  # type checkers keep reporting a missing method as an error

        def __getattr__(self, name: str) -> Any:
            stage = type(self)
            if name.startswith("__"):
                raise AttributeError(f"'{stage.__name__}' object has no attribute '{name}'", name=name, obj=self)
            for owner in stage.__mro__:
                error = not_yet(owner.__name__, name)
                if error is not None:
                    raise error
            hint = next((klass.__dict__["_hints"][name] for klass in stage.__mro__
                         if name in klass.__dict__.get("_hints", {})), None)
            if hint is None:
                raise AttributeError(f"'{stage.__name__}' object has no attribute '{name}'", name=name, obj=self)
            raise StageMethodError(f"{stage.__name__} has no '{name}': {hint}", name=name, obj=self)


@attrs.frozen
class _Stage(_Hinted):
    _builder: StreamsBuilder = attrs.field(alias="builder", eq=False, repr=False)
    node_name: str

    def _add(self, node: ir.Node) -> None:
        self._builder._add(node)


@attrs.frozen
class StreamStage(_Stage):
    """What every `KStream` is: the base the type checks of the modules below
    `streamsdsl.dsl.stream` test (``repartition_required``: a key-changing step came before)."""

    repartition_required: bool = False


@attrs.frozen
class TableStage(_Stage):
    """What every `KTable` is: the base the type checks of the modules below
    `streamsdsl.dsl.table` test (``windows``: the window specification of a windowed table, whose
    keys are `Windowed`; None for plain keys)."""

    windows: SessionWindows | TimeWindows | SlidingWindows | None = None
