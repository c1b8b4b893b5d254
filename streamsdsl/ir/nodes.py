"""The topology IR: frozen, validated nodes forming a DAG (pure Python, no pyspark).

Every node has a unique ``name`` (Kafka Streams style, e.g. ``KSTREAM-FILTER-0000000001``) and
the names of its ``parents``. User functions are held as `UserFn` (a Python callable) or
`ColumnFn` (a pyspark Column, compiled natively); the IR never looks inside either.
"""

from __future__ import annotations

from typing import Any, Callable

import attrs

from streamsdsl._validation import fn_name
from streamsdsl.dsl.serdes import Serde
from streamsdsl.dsl.windows import EmitStrategy, SessionWindows, SlidingWindows, TimeWindows

__all__ = [
    "UserFn",
    "ColumnFn",
    "CountAgg",
    "ReduceAgg",
    "AggregateAgg",
    "Node",
    "SourceNode",
    "FilterNode",
    "MapValuesNode",
    "MapNode",
    "FlatMapNode",
    "FlatMapValuesNode",
    "SelectKeyNode",
    "PeekNode",
    "MergeNode",
    "RepartitionNode",
    "SinkNode",
    "AggregateNode",
    "SessionAggregateNode",
    "TimeWindowAggregateNode",
    "CogroupAggregateNode",
    "TableToStreamNode",
    "TableFilterNode",
    "TableMapValuesNode",
    "Fn",
    "AggSpec",
    "NODE_TYPES",
]

# --- user functions --------------------------------------------------------------------------


@attrs.frozen(repr=False)
class UserFn:
    """A user-supplied Python callable; ``shape`` documents its signature for messages."""

    fn: Callable[..., Any] = attrs.field(eq=False)
    shape: str

    def __repr__(self) -> str:
        return f"{fn_name(self.fn)}{self.shape}"


@attrs.frozen(repr=False)
class ColumnFn:
    """A pyspark Column expression over the record columns ``key``, ``value``, ``timestamp``."""

    column: Any = attrs.field(eq=False)

    def __repr__(self) -> str:
        return fn_name(self.column)


Fn = UserFn | ColumnFn

# --- aggregation functions -------------------------------------------------------------------


@attrs.frozen
class CountAgg:
    """``count()``: initializer 0, aggregator ``agg + 1``, merger ``a1 + a2``."""


@attrs.frozen
class ReduceAgg:
    """``reduce(reducer)``: null initializer; the first value starts the aggregate."""

    reducer: Fn


@attrs.frozen
class AggregateAgg:
    """``aggregate(initializer, aggregator[, merger])``."""

    initializer: UserFn | None
    aggregator: Fn
    merger: UserFn | None = None


AggSpec = CountAgg | ReduceAgg | AggregateAgg

# --- nodes -----------------------------------------------------------------------------------


@attrs.frozen
class Node:
    """Base of every IR node."""

    name: str
    parents: tuple[str, ...]

    #: Kafka Streams' kind shown by describe(): "Source", "Processor" or "Sink".
    kind = "Processor"

    @property
    def stores(self) -> tuple[str, ...]:
        return ()


@attrs.frozen
class SourceNode(Node):
    """Reads ``topics``; keys and values are deserialized with the given serdes."""

    topics: tuple[str, ...] = ()
    key_serde: Serde | None = None
    value_serde: Serde | None = None
    kind = "Source"


@attrs.frozen
class FilterNode(Node):
    """``filter`` / ``filter_not``: keep records whose predicate is true (false when ``negate``)."""

    predicate: Fn = attrs.field(kw_only=True)
    negate: bool = attrs.field(kw_only=True, default=False)


@attrs.frozen
class MapValuesNode(Node):
    """``map_values``: value → new value (key unchanged)."""

    mapper: Fn = attrs.field(kw_only=True)


@attrs.frozen
class MapNode(Node):
    """``map``: (key, value) → (new key, new value)."""

    mapper: UserFn = attrs.field(kw_only=True)


@attrs.frozen
class FlatMapNode(Node):
    """``flat_map``: (key, value) → iterable of (key, value)."""

    mapper: UserFn = attrs.field(kw_only=True)


@attrs.frozen
class FlatMapValuesNode(Node):
    """``flat_map_values``: value → iterable of values."""

    mapper: UserFn = attrs.field(kw_only=True)


@attrs.frozen
class SelectKeyNode(Node):
    """``select_key`` / the key selector of ``group_by``: (key, value) → new key."""

    selector: Fn = attrs.field(kw_only=True)


@attrs.frozen
class PeekNode(Node):
    """``peek``: call an action for each record, forward it unchanged."""

    action: UserFn = attrs.field(kw_only=True)


@attrs.frozen
class MergeNode(Node):
    """``merge``: the union of two streams."""


@attrs.frozen
class RepartitionNode(Node):
    """A key change before grouping: Kafka Streams writes through ``topic``; Spark shuffles.

    ``name`` is the repartition source; describe() also shows the filter and sink nodes.
    """

    topic: str = attrs.field(kw_only=True)
    filter_name: str = attrs.field(kw_only=True)
    sink_name: str = attrs.field(kw_only=True)
    key_serde: Serde | None = attrs.field(kw_only=True, default=None)
    value_serde: Serde | None = attrs.field(kw_only=True, default=None)


@attrs.frozen
class SinkNode(Node):
    """``to``: serialize and write to ``topic``."""

    topic: str = attrs.field(kw_only=True)
    key_serde: Serde | None = attrs.field(kw_only=True, default=None)
    value_serde: Serde | None = attrs.field(kw_only=True, default=None)
    kind = "Sink"


@attrs.frozen
class AggregateNode(Node):
    """An unwindowed aggregation of a grouped stream into a KTable held in ``store``."""

    agg: AggSpec = attrs.field(kw_only=True)
    store: str = attrs.field(kw_only=True)
    key_serde: Serde | None = attrs.field(kw_only=True, default=None)
    value_serde: Serde | None = attrs.field(kw_only=True, default=None)

    @property
    def stores(self) -> tuple[str, ...]:
        return (self.store,)


@attrs.frozen
class SessionAggregateNode(AggregateNode):
    """A session-windowed aggregation (KIP-94) with an emit strategy (KIP-825)."""

    windows: SessionWindows = attrs.field(kw_only=True)
    emit: EmitStrategy = attrs.field(kw_only=True)


@attrs.frozen
class TimeWindowAggregateNode(AggregateNode):
    """A time-windowed aggregation: ``TimeWindows`` (tumbling/hopping) or ``SlidingWindows``,
    with an emit strategy (KIP-825)."""

    windows: TimeWindows | SlidingWindows = attrs.field(kw_only=True)
    emit: EmitStrategy = attrs.field(kw_only=True)


@attrs.frozen
class CogroupAggregateNode(Node):
    """KIP-150 cogroup: one aggregation over several grouped streams, one store.

    ``parents[i]`` feeds ``aggregators[i]``; describe() shows one ``agg_names[i]`` processor
    per input and this node (``name``) as the ``-cogroup-merge`` node. ``windows`` is None
    (unwindowed) or ``SessionWindows`` (then ``merger`` is set).
    """

    agg_names: tuple[str, ...] = attrs.field(kw_only=True)
    aggregators: tuple[UserFn, ...] = attrs.field(kw_only=True)
    initializer: UserFn = attrs.field(kw_only=True)
    store: str = attrs.field(kw_only=True)
    merger: UserFn | None = attrs.field(kw_only=True, default=None)
    windows: Any = attrs.field(kw_only=True, default=None)
    emit: EmitStrategy = attrs.field(kw_only=True, factory=EmitStrategy.on_window_update)
    key_serde: Serde | None = attrs.field(kw_only=True, default=None)
    value_serde: Serde | None = attrs.field(kw_only=True, default=None)

    @property
    def stores(self) -> tuple[str, ...]:
        return (self.store,)


@attrs.frozen
class TableToStreamNode(Node):
    """``KTable.to_stream``: the table's changelog as a stream."""


@attrs.frozen
class TableFilterNode(Node):
    """``KTable.filter``: a record that fails the predicate becomes a tombstone."""

    predicate: Fn = attrs.field(kw_only=True)
    negate: bool = attrs.field(kw_only=True, default=False)


@attrs.frozen
class TableMapValuesNode(Node):
    """``KTable.map_values``: tombstones stay tombstones; other values are mapped."""

    mapper: Fn = attrs.field(kw_only=True)


#: Every concrete node type; the compiler must have a lowering rule for each.
NODE_TYPES: tuple[type[Node], ...] = (
    SourceNode,
    FilterNode,
    MapValuesNode,
    MapNode,
    FlatMapNode,
    FlatMapValuesNode,
    SelectKeyNode,
    PeekNode,
    MergeNode,
    RepartitionNode,
    SinkNode,
    AggregateNode,
    SessionAggregateNode,
    CogroupAggregateNode,
    TableToStreamNode,
    TableFilterNode,
    TableMapValuesNode,
    TimeWindowAggregateNode,
)
