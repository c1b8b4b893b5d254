"""Grouped stages: a grouped stream (`KGroupedStream`) and its windowed forms
(`SessionWindowedKStream`, `TimeWindowedKStream`), one class per legal state. Their
``count``, ``reduce`` and ``aggregate`` add one aggregation node (after a repartition when the
key was changed) and return a `KTable`. Stages are immutable, as every DSL stage.

`streamsdsl.dsl.api` re-exports the public stages; the cogroup stages (`streamsdsl.dsl.cogroup`)
build on these (a grouped stream starts a cogroup through the builder: `StreamsBuilder._cogroup`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, ClassVar, Mapping, TypeVar, overload

import attrs

from streamsdsl import ir
from streamsdsl._validation import REQUIRED, is_spark_column, require_arguments
from streamsdsl.dsl import hints
from streamsdsl.dsl.stage import NameArg, _fn, _materialized, _Stage, _user_fn
from streamsdsl.dsl.table import KTable
from streamsdsl.dsl.options import Grouped, Materialized, resolve_name
from streamsdsl.dsl.repartition import repartitioned_source
from streamsdsl.values.windows import EmitStrategy, SessionWindows, SlidingWindows, TimeWindows
from streamsdsl.errors import InvalidArgumentError, InvalidTypeError

if TYPE_CHECKING:
    from streamsdsl.dsl.cogroup import CogroupedKStream

__all__ = ["KGroupedStream", "SessionWindowedKStream", "TimeWindowedKStream"]

_S = TypeVar("_S")
_T = TypeVar("_T")

#: The shapes of the user functions the aggregations take (their parameter lists are checked).
_INITIALIZER = "() -> aggregate"
_AGGREGATOR = "(key, value, aggregate) -> aggregate"
_MERGER = "(key, aggregate1, aggregate2) -> aggregate"
_REDUCER = "(aggregate, value) -> aggregate"

#: Example arguments for the messages of calls that left an argument out.
_E_INITIALIZER = "lambda: 0"
_E_AGGREGATOR = "lambda key, value, agg: agg + 1"
_E_MERGER = "lambda key, agg1, agg2: agg1 + agg2"


def _check_aggregate(**given: Any) -> None:
    """Name the argument an ``aggregate(...)`` call left out; ``given`` in signature order."""
    shapes = {
        "initializer": (_INITIALIZER, _E_INITIALIZER),
        "aggregator": (_AGGREGATOR, _E_AGGREGATOR),
        "merger": (_MERGER, _E_MERGER),
    }
    example = f"aggregate({', '.join(shapes[arg][1] for arg in given)})"
    require_arguments("aggregate", example, *((arg, value, shapes[arg][0]) for arg, value in given.items()))


@attrs.frozen
class _Grouped(_Stage):
    repartition_required: bool
    grouped: Grouped

    #: The IR node an aggregation of this stage adds.
    _node_type: ClassVar[type[ir.AggregateNode]] = ir.AggregateNode
    _hints: ClassVar[Mapping[str, str]] = hints.GROUPED

    def _windowing(self) -> dict[str, Any]:
        """The aggregation node's window fields (``windows``, ``emit``); none when unwindowed."""
        return {}

    def _aggregate(self, spec: ir.AggSpec, prefix: str, name: NameArg, materialized: Materialized | None) -> KTable:
        materialized = _materialized(materialized)
        user_name = resolve_name(name)
        if isinstance(spec, ir.CountAgg):
            self._builder._burn_index_for_materialized_count(materialized, prefix)
        store = self._builder._store_name(materialized, prefix)
        node_name = self._builder._processor_name(user_name, prefix)
        parent = self._source_for_aggregation(store)
        windowing = self._windowing()
        self._add(
            self._node_type(
                node_name,
                (parent,),
                agg=spec,
                store=store,
                key_serde=(materialized and materialized.key_serde) or self.grouped.key_serde,
                value_serde=materialized and materialized.value_serde,
                **windowing,
            )
        )
        return KTable(self._builder, node_name, windowing.get("windows"))

    def _reduce(self, reducer: Any, name: NameArg, materialized: Materialized | None, *, column_ok: bool) -> KTable:
        require_arguments("reduce", "reduce(lambda agg, value: agg + value)", ("reducer", reducer, _REDUCER))
        spec = ir.ReduceAgg(_fn(reducer, "reducer", _REDUCER, column_ok=column_ok))
        return self._aggregate(spec, "KSTREAM-REDUCE-", name, materialized)

    def _source_for_aggregation(self, store: str) -> str:
        """The parent of the aggregation: a repartition node first when the key was changed.

        Names follow Kafka Streams (KStreamImpl.createRepartitionedSource): three indices are
        burned (sink, filter, source); generated names are kept when the topic prefix is itself
        a generated name, else the nodes are ``<topic>-filter``, ``-sink`` and ``-source``.
        """
        if not self.repartition_required:
            return self.node_name
        return repartitioned_source(self._builder, self.node_name, self.grouped.name or store,
                                    key_serde=self.grouped.key_serde, value_serde=self.grouped.value_serde)


def _agg_spec_unwindowed(initializer: Any, aggregator: Any) -> ir.AggregateAgg:
    if is_spark_column(aggregator):
        if initializer is not None:
            raise InvalidArgumentError(
                "'initializer' must be None when 'aggregator' is a pyspark aggregate Column "
                "(e.g. aggregate(None, F.sum('value'))); the Column defines the whole aggregation."
            )
        return ir.AggregateAgg(None, ir.ColumnFn(aggregator))
    return ir.AggregateAgg(
        _user_fn(initializer, "initializer", _INITIALIZER),
        _user_fn(aggregator, "aggregator", _AGGREGATOR, column_ok=True),
    )


@attrs.frozen
class KGroupedStream(_Grouped):
    """A grouped stream: aggregate it, or window it with `windowed_by`."""

    _hints: ClassVar[Mapping[str, str]] = hints.GROUPED_STREAM

    def count(self, *, name: NameArg = None, materialized: Materialized | None = None) -> KTable:
        """Count records per key (null keys and null values are skipped and counted as dropped)."""
        return self._aggregate(ir.CountAgg(), "KSTREAM-AGGREGATE-", name, materialized)

    def reduce(
        self,
        reducer: Callable[[Any, Any], Any] | Any = REQUIRED,
        *,
        name: NameArg = None,
        materialized: Materialized | None = None,
    ) -> KTable:
        """Combine values per key with ``reducer(aggregate, value)`` (or a pyspark aggregate Column)."""
        return self._reduce(reducer, name, materialized, column_ok=True)

    def aggregate(
        self,
        initializer: Callable[[], Any] | None = REQUIRED,
        aggregator: Callable[[Any, Any, Any], Any] | Any = REQUIRED,
        *,
        name: NameArg = None,
        materialized: Materialized | None = None,
    ) -> KTable:
        """Fold values per key: ``aggregator(key, value, aggregate)`` starting from ``initializer()``.

        ``aggregator`` may instead be a pyspark aggregate Column (``F.sum("value")``), with
        ``initializer=None``; it then compiles to a native Spark aggregation.
        """
        _check_aggregate(initializer=initializer, aggregator=aggregator)
        return self._aggregate(_agg_spec_unwindowed(initializer, aggregator), "KSTREAM-AGGREGATE-", name, materialized)

    def cogroup(self, aggregator: Callable[[Any, Any, Any], Any] = REQUIRED) -> CogroupedKStream:
        """Start a cogroup (KIP-150): this stream with ``aggregator(key, value, aggregate)``.

        Add more grouped streams with `CogroupedKStream.cogroup`, each with its own
        aggregator and value type, then ``aggregate(initializer)`` them into one table held in
        one state store.
        """
        require_arguments("cogroup", f"cogroup({_E_AGGREGATOR})", ("aggregator", aggregator, _AGGREGATOR))
        return self._builder._cogroup(((self, _user_fn(aggregator, "aggregator", _AGGREGATOR)),))

    @overload
    def windowed_by(self, windows: SessionWindows) -> SessionWindowedKStream: ...

    @overload
    def windowed_by(self, windows: TimeWindows | SlidingWindows) -> TimeWindowedKStream: ...

    def windowed_by(
        self, windows: SessionWindows | TimeWindows | SlidingWindows
    ) -> SessionWindowedKStream | TimeWindowedKStream:
        """Window the grouped stream: ``SessionWindows`` gives a `SessionWindowedKStream`;
        ``TimeWindows`` or ``SlidingWindows`` give a `TimeWindowedKStream`."""
        stage = _stage_for(windows, SessionWindowedKStream, TimeWindowedKStream)
        return stage(self._builder, self.node_name, self.repartition_required, self.grouped,
                     EmitStrategy.on_window_update(), windows=windows)


def _stage_for(windows: Any, session_stage: type[_S], time_stage: type[_T]) -> type[_S] | type[_T]:
    """The windowed stage class for ``windows`` (a clear error for anything else)."""
    if isinstance(windows, SessionWindows):
        return session_stage
    if isinstance(windows, (TimeWindows, SlidingWindows)):
        return time_stage
    raise InvalidTypeError(
        f"'windows' must be SessionWindows, TimeWindows or SlidingWindows (got {type(windows).__name__}: "
        f"{windows!r}). Use SessionWindows.with_gap(gap) or TimeWindows.of_size_with_no_grace(size)."
    )


def _emit(strategy: Any) -> EmitStrategy:
    if not isinstance(strategy, EmitStrategy):
        raise InvalidTypeError(
            f"'strategy' must be an EmitStrategy such as EmitStrategy.on_window_close() "
            f"(got {type(strategy).__name__}: {strategy!r})."
        )
    return strategy


@attrs.frozen
class _WindowedGrouped(_Grouped):
    """What the windowed grouped stages share: the emit strategy and how an aggregation node
    is added (the node type comes from the subclass)."""

    _hints: ClassVar[Mapping[str, str]] = hints.WINDOWED_GROUPED

    emit: EmitStrategy

    def emit_strategy(self, strategy: EmitStrategy) -> Any:
        """A copy of this stage that forwards results with ``strategy`` (KIP-825)."""
        return attrs.evolve(self, emit=_emit(strategy))

    def _windowing(self) -> dict[str, Any]:
        return {"windows": self.windows, "emit": self.emit}  # type: ignore[attr-defined]

    def _user_aggregate(self, name: NameArg, materialized: Materialized | None, **fns: Any) -> KTable:
        """Aggregate with the ``initializer``, ``aggregator`` and (sessions) ``merger`` given to
        ``aggregate``, in its signature order."""
        _check_aggregate(**fns)
        merger = _user_fn(fns["merger"], "merger", _MERGER) if "merger" in fns else None
        initializer = _user_fn(fns["initializer"], "initializer", _INITIALIZER)
        spec = ir.AggregateAgg(initializer, _user_fn(fns["aggregator"], "aggregator", _AGGREGATOR), merger)
        return self._aggregate(spec, "KSTREAM-AGGREGATE-", name, materialized)

    def count(self, *, name: NameArg = None, materialized: Materialized | None = None) -> KTable:
        """Count records per window."""
        return self._aggregate(ir.CountAgg(), "KSTREAM-AGGREGATE-", name, materialized)

    def reduce(
        self,
        reducer: Callable[[Any, Any], Any] = REQUIRED,
        *,
        name: NameArg = None,
        materialized: Materialized | None = None,
    ) -> KTable:
        """Combine values per window with ``reducer(aggregate, value)``."""
        return self._reduce(reducer, name, materialized, column_ok=False)


@attrs.frozen
class SessionWindowedKStream(_WindowedGrouped):
    """A grouped stream windowed by `SessionWindows` (KIP-94); ``count``, ``reduce`` and
    ``aggregate(initializer, aggregator, merger)`` per session."""

    windows: SessionWindows = attrs.field(kw_only=True)

    _node_type = ir.SessionAggregateNode

    def aggregate(
        self,
        initializer: Callable[[], Any] = REQUIRED,
        aggregator: Callable[[Any, Any, Any], Any] = REQUIRED,
        merger: Callable[[Any, Any, Any], Any] = REQUIRED,
        *,
        name: NameArg = None,
        materialized: Materialized | None = None,
    ) -> KTable:
        """Fold values per session; ``merger(key, agg1, agg2)`` combines sessions that merge."""
        return self._user_aggregate(name, materialized, initializer=initializer, aggregator=aggregator, merger=merger)


@attrs.frozen
class TimeWindowedKStream(_WindowedGrouped):
    """A grouped stream windowed by `TimeWindows` (tumbling/hopping) or `SlidingWindows`;
    ``count``, ``reduce`` and ``aggregate(initializer, aggregator)`` per window.

    Examples
    --------
    >>> from streamsdsl import StreamsBuilder, TimeWindows
    >>> b = StreamsBuilder()
    >>> table = b.stream("in").group_by_key().windowed_by(TimeWindows.of_size_with_no_grace(1000)).count()
    >>> print(b.build().describe().splitlines()[4])
        Processor: KSTREAM-AGGREGATE-0000000002 (stores: [KSTREAM-AGGREGATE-STATE-STORE-0000000001])
    """

    windows: TimeWindows | SlidingWindows = attrs.field(kw_only=True)

    _node_type = ir.TimeWindowAggregateNode

    def aggregate(
        self,
        initializer: Callable[[], Any] = REQUIRED,
        aggregator: Callable[[Any, Any, Any], Any] = REQUIRED,
        *,
        name: NameArg = None,
        materialized: Materialized | None = None,
    ) -> KTable:
        """Fold values per window: ``aggregator(key, value, aggregate)`` starting from ``initializer()``."""
        return self._user_aggregate(name, materialized, initializer=initializer, aggregator=aggregator)


# KGroupedStream.cogroup starts a cogroup stage; that module builds on the stages above.
