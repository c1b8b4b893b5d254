"""Cogroup stages (KIP-150): several grouped streams, each with its own aggregator, aggregated
into one table by one stateful operator. Stages are immutable, as every DSL stage."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, ClassVar, Mapping, overload

import attrs

from streamsdsl import ir
from streamsdsl._validation import REQUIRED, require_arguments, validate_name
from streamsdsl.dsl import hints
from streamsdsl.dsl.stage import NameArg, _Hinted, _materialized, _user_fn
from streamsdsl.dsl.table import KTable
from streamsdsl.dsl.grouped import (
    _AGGREGATOR,
    _E_AGGREGATOR,
    _INITIALIZER,
    _MERGER,
    KGroupedStream,
    _check_aggregate,
    _emit,
    _stage_for,
)
from streamsdsl.dsl.options import Materialized, resolve_name
from streamsdsl.errors import InvalidTypeError, TopologyError
from streamsdsl.values.windows import EmitStrategy, SessionWindows, SlidingWindows, TimeWindows

if TYPE_CHECKING:
    from streamsdsl.dsl.api import StreamsBuilder

__all__ = ["CogroupedKStream", "SessionWindowedCogroupedKStream", "TimeWindowedCogroupedKStream"]

def _suffixed(name: NameArg, suffix: str) -> str | None:
    base = resolve_name(name)
    if base is None:
        return None
    return validate_name(base + suffix, "name")


def _build_cogroup(
    builder: StreamsBuilder,
    groups: tuple[tuple[KGroupedStream, ir.UserFn], ...],
    *,
    windows: SessionWindows | TimeWindows | SlidingWindows | None = None,
    emit: EmitStrategy | None = None,
    name: NameArg = None,
    materialized: Materialized | None = None,
    **fns: Any,
) -> KTable:
    """Add the cogroup's nodes in Kafka Streams' naming order: store, repartitions, one
    ``-cogroup-agg-<i>`` per input, ``-cogroup-merge``. ``fns`` are the ``initializer`` and
    (sessions) ``merger`` given to ``aggregate``, in its signature order."""
    _check_aggregate(**fns)
    merger = _user_fn(fns["merger"], "merger", _MERGER) if "merger" in fns else None
    initializer = _user_fn(fns["initializer"], "initializer", _INITIALIZER)
    materialized = _materialized(materialized)
    store = builder._store_name(materialized, "COGROUPKSTREAM-AGGREGATE-")
    parents = tuple(g._source_for_aggregation(store) for g, _ in groups)
    agg_names = tuple(
        builder._processor_name(_suffixed(name, f"-cogroup-agg-{i}"), "COGROUPKSTREAM-AGGREGATE-")
        for i in range(len(groups))
    )
    merge_name = builder._processor_name(_suffixed(name, "-cogroup-merge"), "COGROUPKSTREAM-MERGE-")
    key_serde = (materialized and materialized.key_serde) or next(
        (g.grouped.key_serde for g, _ in groups if g.grouped.key_serde is not None), None
    )
    builder._add(
        ir.CogroupAggregateNode(
            merge_name,
            parents,
            agg_names=agg_names,
            aggregators=tuple(fn for _, fn in groups),
            initializer=initializer,
            store=store,
            merger=merger,
            windows=windows,
            emit=emit or EmitStrategy.on_window_update(),
            key_serde=key_serde,
            value_serde=materialized and materialized.value_serde,
        )
    )
    return KTable(builder, merge_name, windows=windows)


@attrs.frozen
class CogroupedKStream(_Hinted):
    """Several grouped streams, each with its own aggregator, to be aggregated together (KIP-150).

    Immutable: `cogroup` returns a new stage and leaves this one unchanged.

    Examples
    --------
    >>> from streamsdsl import StreamsBuilder
    >>> b = StreamsBuilder()
    >>> clicks = b.stream("clicks").group_by_key()
    >>> views = b.stream("views").group_by_key()
    >>> table = clicks.cogroup(lambda k, v, a: a + 1).cogroup(views, lambda k, v, a: a + 10).aggregate(lambda: 0)
    >>> print(b.build().describe().splitlines()[6])
        Processor: COGROUPKSTREAM-AGGREGATE-0000000003 (stores: [COGROUPKSTREAM-AGGREGATE-STATE-STORE-0000000002])
    """

    _hints: ClassVar[Mapping[str, str]] = hints.COGROUPED

    _builder: StreamsBuilder = attrs.field(alias="builder", eq=False, repr=False)
    groups: tuple[tuple[KGroupedStream, ir.UserFn], ...]

    def cogroup(
        self, grouped_stream: KGroupedStream = REQUIRED, aggregator: Callable[[Any, Any, Any], Any] = REQUIRED
    ) -> CogroupedKStream:
        """A new stage that also aggregates ``grouped_stream`` with ``aggregator(key, value, aggregate)``."""
        require_arguments(
            "cogroup",
            f"cogroup(builder.stream('views').group_by_key(), {_E_AGGREGATOR})",
            ("grouped_stream", grouped_stream, "KGroupedStream"),
            ("aggregator", aggregator, _AGGREGATOR),
        )
        if not isinstance(grouped_stream, KGroupedStream):
            raise InvalidTypeError(
                f"'grouped_stream' must be a KGroupedStream, e.g. builder.stream('t').group_by_key() "
                f"(got {type(grouped_stream).__name__})."
            )
        if grouped_stream._builder is not self._builder:
            raise TopologyError("'grouped_stream' belongs to a different StreamsBuilder; cogroup streams of one builder.")
        for existing, _ in self.groups:
            if existing == grouped_stream:
                raise TopologyError(
                    f"The grouped stream of {grouped_stream.node_name} is already part of this cogroup; "
                    "each grouped stream can be cogrouped once (combine its logic into one aggregator)."
                )
        aggregator_fn = _user_fn(aggregator, "aggregator", _AGGREGATOR)
        return attrs.evolve(self, groups=(*self.groups, (grouped_stream, aggregator_fn)))

    def aggregate(
        self, initializer: Callable[[], Any] = REQUIRED, *, name: NameArg = None, materialized: Materialized | None = None
    ) -> KTable:
        """Aggregate all cogrouped streams into one table; ``initializer()`` runs only for a key
        that has no aggregate yet. Null keys and null values are skipped and counted."""
        return _build_cogroup(self._builder, self.groups, name=name, materialized=materialized, initializer=initializer)

    @overload
    def windowed_by(self, windows: SessionWindows) -> SessionWindowedCogroupedKStream: ...

    @overload
    def windowed_by(self, windows: TimeWindows | SlidingWindows) -> TimeWindowedCogroupedKStream: ...

    def windowed_by(
        self, windows: SessionWindows | TimeWindows | SlidingWindows
    ) -> SessionWindowedCogroupedKStream | TimeWindowedCogroupedKStream:
        """Window the cogroup: ``SessionWindows`` gives a `SessionWindowedCogroupedKStream`
        (``aggregate(initializer, merger)``), ``TimeWindows`` / ``SlidingWindows`` a
        `TimeWindowedCogroupedKStream` (``aggregate(initializer)``)."""
        stage = _stage_for(windows, SessionWindowedCogroupedKStream, TimeWindowedCogroupedKStream)
        return stage(self._builder, self.groups, windows, EmitStrategy.on_window_update())


@attrs.frozen
class SessionWindowedCogroupedKStream(_Hinted):
    """A cogroup windowed by `SessionWindows`; ``aggregate(initializer, merger)``."""

    _hints: ClassVar[Mapping[str, str]] = hints.WINDOWED_COGROUPED

    _builder: StreamsBuilder = attrs.field(alias="builder", eq=False, repr=False)
    groups: tuple[tuple[KGroupedStream, ir.UserFn], ...]
    windows: SessionWindows
    emit: EmitStrategy

    def emit_strategy(self, strategy: EmitStrategy) -> SessionWindowedCogroupedKStream:
        """A copy forwarding results with ``strategy`` (beyond Kafka Streams, which only
        offers on-update for cogroup)."""
        return attrs.evolve(self, emit=_emit(strategy))

    def aggregate(
        self,
        initializer: Callable[[], Any] = REQUIRED,
        merger: Callable[[Any, Any, Any], Any] = REQUIRED,
        *,
        name: NameArg = None,
        materialized: Materialized | None = None,
    ) -> KTable:
        """Aggregate per session; ``merger(key, agg1, agg2)`` combines sessions that merge."""
        return _build_cogroup(self._builder, self.groups, windows=self.windows, emit=self.emit, name=name,
                              materialized=materialized, initializer=initializer, merger=merger)


@attrs.frozen
class TimeWindowedCogroupedKStream(_Hinted):
    """A cogroup windowed by `TimeWindows` or `SlidingWindows`; ``aggregate(initializer)``."""

    _hints: ClassVar[Mapping[str, str]] = hints.WINDOWED_COGROUPED

    _builder: StreamsBuilder = attrs.field(alias="builder", eq=False, repr=False)
    groups: tuple[tuple[KGroupedStream, ir.UserFn], ...]
    windows: TimeWindows | SlidingWindows
    emit: EmitStrategy

    def emit_strategy(self, strategy: EmitStrategy) -> TimeWindowedCogroupedKStream:
        """A copy forwarding results with ``strategy`` (beyond Kafka Streams, which only
        offers on-update for cogroup)."""
        return attrs.evolve(self, emit=_emit(strategy))

    def aggregate(
        self, initializer: Callable[[], Any] = REQUIRED, *, name: NameArg = None, materialized: Materialized | None = None
    ) -> KTable:
        """Aggregate per window; ``initializer()`` runs only for a window without an aggregate."""
        return _build_cogroup(self._builder, self.groups, windows=self.windows, emit=self.emit, name=name,
                              materialized=materialized, initializer=initializer)


