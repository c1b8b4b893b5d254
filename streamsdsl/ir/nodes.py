"""The topology IR: frozen, validated nodes forming a DAG (pure Python, no pyspark).

Every node has a unique ``name`` (Kafka Streams style, e.g. ``KSTREAM-FILTER-0000000001``) and
the names of its ``parents``. User functions are held as `UserFn` (a Python callable) or
`ColumnFn` (a pyspark Column, compiled natively); the IR never looks inside either. Serdes are
`PlanSerde` instances (a user's own serde arrives wrapped in a `CustomSerde`).

Every field is validated when a node is constructed, however it is constructed: names follow
Kafka Streams' rule, functions, serdes and windows have their exact allowed types, and the
cross-field rules (a session aggregation has a merger, a cogroup has one aggregator per input)
hold. Each node also renders its own part of ``Topology.describe()`` (`Node.describe_into`).
"""

from __future__ import annotations

import inspect
import sys
import re
from typing import TYPE_CHECKING, Any, ClassVar

import attrs

from streamsdsl._validation import instance_of, is_name, is_topic, names_tuple, source_pattern, tuple_of
from streamsdsl.values.joins import JoinWindows
from streamsdsl.values.serdes import PlanSerde
from streamsdsl.values.windows import EmitStrategy, SessionWindows, SlidingWindows, TimeWindows
from streamsdsl.errors import InvalidArgumentError, InvalidTypeError

from streamsdsl.ir.specs import AggSpec, AggregateAgg, ColumnFn, CountAgg, Fn, GroupedTableAgg, ReduceAgg, UserFn
from streamsdsl.ir.specs import _fn, _optional_user_fn, _user_fn

from streamsdsl.ir.description import java_hash_set_order

if TYPE_CHECKING:
    from streamsdsl.ir.description import DescriptionBuilder

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
    "ForeachNode",
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
    "TableSourceNode",
    "StreamToTableNode",
    "TableTableJoinNode",
    "StreamTableJoinNode",
    "StreamStreamJoinNode",
    "BranchNode",
    "BranchChildNode",
    "GroupedTableAgg",
    "TableGroupByNode",
    "GroupedTableAggregateNode",
    "SuppressNode",
    "Fn",
    "AggSpec",
]

# --- nodes -----------------------------------------------------------------------------------


_names = names_tuple()


def _parents(inst: Node, attribute: attrs.Attribute[Any], value: Any) -> None:
    _names(inst, attribute, value)
    if inst.arity is not None and len(value) != inst.arity:
        raise InvalidArgumentError(
            f"'parents' of a {type(inst).__name__} must name exactly {inst.arity} node(s) (got {value!r})."
        )


_serde = instance_of(PlanSerde, optional=True, hint="Wrap a serde of your own with CustomSerde(serde).")


def _serde_field() -> Any:
    return attrs.field(kw_only=True, default=None, validator=_serde)


@attrs.frozen
class Node:
    """Base of every IR node: a Kafka-legal ``name`` and the names of its ``parents``."""

    name: str = attrs.field(validator=is_name)
    parents: tuple[str, ...] = attrs.field(validator=_parents)

    #: How many parents the node has (None: any number, checked by the node itself).
    arity: ClassVar[int | None] = None

    @property
    def stores(self) -> tuple[str, ...]:
        return ()

    def describe_into(self, builder: DescriptionBuilder) -> None:
        """Add this node's part of ``describe()`` (Kafka's ``GraphNode.writeToTopology``):
        by default one processor with this node's stores, fed by its parents."""
        builder.add_processor(self.name, self.stores, self.parents)


@attrs.frozen
class UnaryNode(Node):
    """A node with exactly one parent."""

    arity = 1


class _OneStore:
    """Mixin of a node whose state is held in one store, its ``store`` field."""

    __slots__ = ()
    store: str

    @property
    def stores(self) -> tuple[str, ...]:
        return (self.store,)


@attrs.frozen
class SourceNode(Node):
    """Reads ``topics``, or the topics ``pattern`` matches in full (``stream(Pattern)``; no ``topics``)."""

    topics: tuple[str, ...] = attrs.field(validator=names_tuple(0, topics=True))
    key_serde: PlanSerde | None = attrs.field(default=None, validator=_serde)
    value_serde: PlanSerde | None = attrs.field(default=None, validator=_serde)
    pattern: re.Pattern[str] | None = attrs.field(default=None, kw_only=True, validator=source_pattern)
    arity = 0

    def reads(self, topic: str) -> bool:
        """Whether this source reads ``topic`` (a pattern matches in full, as Kafka's consumer)."""
        return topic in self.topics if self.pattern is None else self.pattern.fullmatch(topic) is not None

    def describe_into(self, builder: DescriptionBuilder) -> None:
        builder.add_source(self.name, self.topics, pattern=None if self.pattern is None else self.pattern.pattern)


@attrs.frozen
class _PredicateNode(UnaryNode):
    """A one-parent node testing each record with ``predicate`` (negated when ``negate``)."""

    predicate: Fn = attrs.field(kw_only=True, validator=_fn)
    negate: bool = attrs.field(kw_only=True, default=False, validator=instance_of(bool))


@attrs.frozen
class _ValueMapperNode(UnaryNode):
    """A one-parent node mapping each value with ``mapper`` (a Python callable or a Column)."""

    mapper: Fn = attrs.field(kw_only=True, validator=_fn)


@attrs.frozen
class FilterNode(_PredicateNode):
    """``filter`` / ``filter_not``: keep records whose predicate is true (false when ``negate``)."""


@attrs.frozen
class MapValuesNode(_ValueMapperNode):
    """``map_values``: value → new value (key unchanged)."""


@attrs.frozen
class _PythonMapperNode(UnaryNode):
    """A one-parent node whose ``mapper`` is a Python callable."""

    mapper: UserFn = attrs.field(kw_only=True, validator=_user_fn)


@attrs.frozen
class MapNode(_PythonMapperNode):
    """``map``: (key, value) → (new key, new value)."""


@attrs.frozen
class FlatMapNode(_PythonMapperNode):
    """``flat_map``: (key, value) → iterable of (key, value)."""


@attrs.frozen
class FlatMapValuesNode(_PythonMapperNode):
    """``flat_map_values``: value → iterable of values."""


@attrs.frozen
class SelectKeyNode(UnaryNode):
    """``select_key`` / the key selector of ``group_by``: (key, value) → new key."""

    selector: Fn = attrs.field(kw_only=True, validator=_fn)


@attrs.frozen
class PeekNode(UnaryNode):
    """``peek``: call an action for each record, forward it unchanged."""

    action: UserFn = attrs.field(kw_only=True, validator=_user_fn)


@attrs.frozen
class ForeachNode(UnaryNode):
    """``foreach`` / ``print``: call an action for each record; a terminal step (it forwards
    nothing and runs even though no sink reads it, `Topology.runs_unread`)."""

    action: UserFn = attrs.field(kw_only=True, validator=_user_fn)


@attrs.frozen
class MergeNode(Node):
    """``merge``: the union of two streams."""

    arity = 2


def _positive_partitions(inst: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value <= 0):
        raise InvalidArgumentError(f"'partitions' must be None or an int > 0 (got {value!r}).")


@attrs.frozen
class RepartitionNode(UnaryNode):
    """A key change before grouping, or ``KStream.repartition``: Kafka Streams writes through
    ``topic``; Spark shuffles.

    ``name`` is the repartition source; describe() also shows the filter and sink nodes.
    ``partitions``: ``Repartitioned.with_number_of_partitions`` (None: Spark's default shuffle).
    """

    topic: str = attrs.field(kw_only=True, validator=is_topic)
    filter_name: str = attrs.field(kw_only=True, validator=is_name)
    sink_name: str = attrs.field(kw_only=True, validator=is_name)
    key_serde: PlanSerde | None = _serde_field()
    value_serde: PlanSerde | None = _serde_field()
    partitions: int | None = attrs.field(kw_only=True, default=None, validator=_positive_partitions)

    def describe_into(self, builder: DescriptionBuilder) -> None:
        builder.add_processor(self.filter_name, (), self.parents)
        builder.add_sink(self.sink_name, self.topic, (self.filter_name,))
        builder.add_source(self.name, (self.topic,))


@attrs.frozen
class SinkNode(UnaryNode):
    """``to``: serialize and write to ``topic``."""

    topic: str = attrs.field(kw_only=True, validator=is_topic)
    key_serde: PlanSerde | None = _serde_field()
    value_serde: PlanSerde | None = _serde_field()

    def describe_into(self, builder: DescriptionBuilder) -> None:
        builder.add_sink(self.name, self.topic, self.parents)


Windows = SessionWindows | TimeWindows | SlidingWindows


def _merger_matches(owner: str, merger: UserFn | None, windows: Windows | None) -> None:
    """Sessions merge, so a session aggregation needs a merger; nothing else takes one."""
    if isinstance(windows, SessionWindows) and merger is None:
        raise InvalidArgumentError(
            f"{owner} over SessionWindows needs a 'merger' (key, aggregate1, aggregate2) -> aggregate: "
            "sessions bridged by a record are merged."
        )
    if not isinstance(windows, SessionWindows) and merger is not None:
        raise InvalidArgumentError(
            f"{owner} {'without windows' if windows is None else f'over {type(windows).__name__}'} takes no "
            "'merger' (only sessions merge); pass merger=None."
        )


def _agg_fits_node(inst: AggregateNode, attribute: attrs.Attribute[Any], value: AggSpec) -> None:
    windows = getattr(inst, "windows", None)
    owner = f"The aggregation of {type(inst).__name__}"
    if isinstance(value, AggregateAgg):
        _merger_matches(owner, value.merger, windows)
    if windows is not None:
        fns = [value.reducer] if isinstance(value, ReduceAgg) else []
        fns += [value.aggregator] if isinstance(value, AggregateAgg) else []
        if any(isinstance(f, ColumnFn) for f in fns):
            raise InvalidTypeError(
                f"{owner} takes Python callables only: windowed aggregations do not compile pyspark Columns."
            )


@attrs.frozen
class AggregateNode(_OneStore, UnaryNode):
    """An unwindowed aggregation of a grouped stream into a KTable held in ``store``."""

    agg: AggSpec = attrs.field(kw_only=True, validator=[instance_of(CountAgg, ReduceAgg, AggregateAgg), _agg_fits_node])
    store: str = attrs.field(kw_only=True, validator=is_name)
    key_serde: PlanSerde | None = _serde_field()
    value_serde: PlanSerde | None = _serde_field()


_emit = instance_of(EmitStrategy)


@attrs.frozen
class SessionAggregateNode(AggregateNode):
    """A session-windowed aggregation (KIP-94) with an emit strategy (KIP-825)."""

    windows: SessionWindows = attrs.field(kw_only=True, validator=instance_of(SessionWindows))
    emit: EmitStrategy = attrs.field(kw_only=True, validator=_emit)


@attrs.frozen
class TimeWindowAggregateNode(AggregateNode):
    """A time-windowed aggregation: ``TimeWindows`` (tumbling/hopping) or ``SlidingWindows``,
    with an emit strategy (KIP-825)."""

    windows: TimeWindows | SlidingWindows = attrs.field(kw_only=True, validator=instance_of(TimeWindows, SlidingWindows))
    emit: EmitStrategy = attrs.field(kw_only=True, validator=_emit)


def _one_aggregator_per_input(inst: CogroupAggregateNode, attribute: attrs.Attribute[Any], value: Any) -> None:
    if not len(inst.parents) == len(inst.agg_names) == len(value) >= 1:
        raise InvalidArgumentError(
            f"A cogroup needs one aggregator and one agg name per input, and at least one input "
            f"(got {len(inst.parents)} parents, {len(inst.agg_names)} agg_names, {len(value)} aggregators)."
        )


def _cogroup_merger(inst: CogroupAggregateNode, attribute: attrs.Attribute[Any], value: UserFn | None) -> None:
    _merger_matches("A cogroup", value, inst.windows)


def _emit_needs_windows(inst: CogroupAggregateNode, attribute: attrs.Attribute[Any], value: EmitStrategy) -> None:
    if inst.windows is None and value.emits_on_close:
        raise InvalidArgumentError(
            "'emit' can be on_window_close() only for a windowed cogroup: an unwindowed table never closes."
        )


@attrs.frozen
class CogroupAggregateNode(_OneStore, Node):
    """KIP-150 cogroup: one aggregation over several grouped streams, one store.

    ``parents[i]`` feeds ``aggregators[i]``; describe() shows one ``agg_names[i]`` processor
    per input and this node (``name``) as the ``-cogroup-merge`` node. ``windows`` is None
    (unwindowed), ``SessionWindows`` (then ``merger`` is set), ``TimeWindows`` or
    ``SlidingWindows``.
    """

    agg_names: tuple[str, ...] = attrs.field(kw_only=True, validator=names_tuple(1))
    aggregators: tuple[UserFn, ...] = attrs.field(kw_only=True, validator=[tuple_of(UserFn), _one_aggregator_per_input])
    initializer: UserFn = attrs.field(kw_only=True, validator=_user_fn)
    store: str = attrs.field(kw_only=True, validator=is_name)
    merger: UserFn | None = attrs.field(kw_only=True, default=None, validator=[_optional_user_fn, _cogroup_merger])
    windows: Windows | None = attrs.field(
        kw_only=True, default=None, validator=instance_of(SessionWindows, TimeWindows, SlidingWindows, optional=True)
    )
    emit: EmitStrategy = attrs.field(
        kw_only=True, factory=EmitStrategy.on_window_update, validator=[_emit, _emit_needs_windows]
    )
    key_serde: PlanSerde | None = _serde_field()
    value_serde: PlanSerde | None = _serde_field()

    def describe_into(self, builder: DescriptionBuilder) -> None:
        for agg_name, parent in zip(self.agg_names, self.parents):
            builder.add_processor(agg_name, self.stores, (parent,))
        builder.add_processor(self.name, (), self.agg_names)


@attrs.frozen
class TableToStreamNode(UnaryNode):
    """``KTable.to_stream``: the table's changelog as a stream."""



@attrs.frozen
class TableFilterNode(_PredicateNode):
    """``KTable.filter``: a record that fails the predicate becomes a tombstone."""


@attrs.frozen
class TableMapValuesNode(_ValueMapperNode):
    """``KTable.map_values``: tombstones stay tombstones; other values are mapped."""


def _one_topic(inst: TableSourceNode, attribute: attrs.Attribute[Any], value: tuple[str, ...]) -> None:
    if len(value) != 1:
        raise InvalidArgumentError(f"A table source reads exactly one topic (got {list(value)!r}).")


def _optional_ms(inst: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 0):
        raise InvalidArgumentError(f"'{attribute.name}' must be None or an int >= 0 ms (got {value!r}).")


def _versioned_is_materialized(node: Any) -> None:
    if node.history_retention_ms is not None and not node.materialized:
        raise InvalidArgumentError(f"{node.name}: a versioned table (history_retention_ms) is always materialized.")


@attrs.frozen
class TableSourceNode(SourceNode):
    """``StreamsBuilder.table(topic)``: a source (``source_name``) feeding the ``KTABLE-SOURCE``
    processor (``name``), which keeps the latest value per key in ``store``.

    ``materialized``: the store exists (a store name was given, or a join reads the table; Kafka
    Streams' ``KTableSource.materialize()``); only then describe() lists it, and a tombstone for
    an absent key is not forwarded (the store's record cache).
    """

    source_name: str = attrs.field(kw_only=True, validator=is_name)
    store: str = attrs.field(kw_only=True, validator=is_name)
    materialized: bool = attrs.field(kw_only=True, default=False, validator=instance_of(bool))
    #: A versioned store's history retention (ms; KIP-889); ``None``: the store keeps the latest value only.
    history_retention_ms: int | None = attrs.field(kw_only=True, default=None, validator=_optional_ms)

    def __attrs_post_init__(self) -> None:
        _one_topic(self, attrs.fields(type(self)).topics, self.topics)
        _versioned_is_materialized(self)

    @property
    def stores(self) -> tuple[str, ...]:
        return (self.store,) if self.materialized else ()

    def describe_into(self, builder: DescriptionBuilder) -> None:
        builder.add_source(self.source_name, self.topics)
        builder.add_processor(self.name, self.stores, (self.source_name,))


@attrs.frozen
class StreamToTableNode(UnaryNode):
    """``KStream.to_table``: the latest value per key in ``store`` (``materialized`` as for
    `TableSourceNode`)."""

    store: str = attrs.field(kw_only=True, validator=is_name)
    materialized: bool = attrs.field(kw_only=True, default=False, validator=instance_of(bool))
    #: As `TableSourceNode.history_retention_ms`.
    history_retention_ms: int | None = attrs.field(kw_only=True, default=None, validator=_optional_ms)

    def __attrs_post_init__(self) -> None:
        _versioned_is_materialized(self)

    @property
    def stores(self) -> tuple[str, ...]:
        return (self.store,) if self.materialized else ()


def _table_join_kind(inst: TableTableJoinNode, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value not in ("inner", "left", "outer"):
        raise InvalidArgumentError(f"'kind' of a table-table join must be 'inner', 'left' or 'outer' (got {value!r}).")


def _join_other_name(inst: TableTableJoinNode, attribute: attrs.Attribute[Any], value: Any) -> None:
    is_name(inst, attribute, value)
    names = (inst.name, inst.join_this, value)
    if len(set(names)) != len(names):
        raise InvalidArgumentError(
            f"A table-table join's merge, join-this and join-other processors need three names (got {names!r})."
        )


def _optional_store(inst: TableTableJoinNode, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value is not None:
        is_name(inst, attribute, value)


@attrs.frozen
class TableTableJoinNode(Node):
    """``KTable.join`` / ``left_join`` / ``outer_join`` with a KTable: ``parents`` are (this,
    other); ``name`` is the ``KTABLE-MERGE`` processor, whose output is the joined table.

    describe() shows Kafka Streams' three processors (``KTableKTableJoinNode``): ``join_this``,
    fed by this table and connected to ``other_stores`` (where the other table's values are
    read), ``join_other``, fed by the other table and connected to ``this_stores``, and the
    merge, connected to ``store`` when the result is materialized (``None``: it is not).
    ``value_serde``: the result's value serde (``Materialized.with_value_serde``)."""

    joiner: UserFn = attrs.field(kw_only=True, validator=_user_fn)
    kind: str = attrs.field(kw_only=True, validator=_table_join_kind)
    join_this: str = attrs.field(kw_only=True, validator=is_name)
    join_other: str = attrs.field(kw_only=True, validator=_join_other_name)
    this_stores: tuple[str, ...] = attrs.field(kw_only=True, validator=names_tuple(1))
    other_stores: tuple[str, ...] = attrs.field(kw_only=True, validator=names_tuple(1))
    store: str | None = attrs.field(kw_only=True, default=None, validator=_optional_store)
    value_serde: PlanSerde | None = _serde_field()
    arity = 2

    @property
    def stores(self) -> tuple[str, ...]:
        """The result's store if materialized, else the stores its values are computed from
        (Kafka Streams' ``KTableKTableJoinMerger`` view: both sides' stores)."""
        if self.store is not None:
            return (self.store,)
        return tuple(dict.fromkeys((*self.this_stores, *self.other_stores)))

    def describe_into(self, builder: DescriptionBuilder) -> None:
        builder.add_processor(self.join_this, java_hash_set_order(self.other_stores), self.parents[:1])
        builder.add_processor(self.join_other, java_hash_set_order(self.this_stores), self.parents[1:])
        builder.add_processor(self.name, () if self.store is None else (self.store,), (self.join_this, self.join_other))


def _join_kind(inst: StreamTableJoinNode, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value not in ("inner", "left"):
        raise InvalidArgumentError(f"'kind' of a stream-table join must be 'inner' or 'left' (got {value!r}).")


@attrs.frozen
class StreamTableJoinNode(Node):
    """``KStream.join`` / ``left_join`` with a KTable: ``parents`` are (stream, table).

    describe() shows one processor fed by the stream only, connected to ``table_stores``, where
    the table's values are read (Kafka Streams' ``KSTREAM-JOIN`` / ``KSTREAM-LEFTJOIN``): the
    table's store, or both tables' stores of a table-table join result without a store."""

    joiner: UserFn = attrs.field(kw_only=True, validator=_user_fn)
    kind: str = attrs.field(kw_only=True, validator=_join_kind)
    table_stores: tuple[str, ...] = attrs.field(kw_only=True, validator=names_tuple(1))
    #: ``Joined.with_grace_period`` (ms; KIP-923): stream records wait in ``buffer_store`` (listed
    #: first in `stores`, as Kafka connects it) until the buffer's time passes their timestamp + grace.
    grace_ms: int | None = attrs.field(kw_only=True, default=None, validator=_optional_ms)
    buffer_store: str | None = attrs.field(kw_only=True, default=None)
    arity = 2

    def __attrs_post_init__(self) -> None:
        if (self.grace_ms is None) != (self.buffer_store is None):
            raise InvalidArgumentError(f"{self.name}: a grace period and a buffer store go together "
                                       f"(got grace_ms={self.grace_ms!r}, buffer_store={self.buffer_store!r}).")
        if self.buffer_store is not None:
            is_name(self, attrs.fields(type(self)).buffer_store, self.buffer_store)

    @property
    def stores(self) -> tuple[str, ...]:
        return self.table_stores if self.buffer_store is None else (self.buffer_store, *self.table_stores)

    def describe_into(self, builder: DescriptionBuilder) -> None:
        builder.add_processor(self.name, java_hash_set_order(self.stores), self.parents[:1])


def _stream_join_kind(inst: StreamStreamJoinNode, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value not in ("inner", "left", "outer"):
        raise InvalidArgumentError(f"'kind' of a stream-stream join must be 'inner', 'left' or 'outer' (got {value!r}).")


def _outer_store(inst: StreamStreamJoinNode, attribute: attrs.Attribute[Any], value: Any) -> None:
    if (value is None) != (inst.kind == "inner"):
        raise InvalidArgumentError(
            f"'outer_store' is the shared store of a left/outer stream-stream join: required for kind 'left' and "
            f"'outer', None for 'inner' (got kind {inst.kind!r}, outer_store {value!r}).")
    if value is not None:
        is_name(inst, attribute, value)


@attrs.frozen
class StreamStreamJoinNode(Node):
    """``KStream.join`` / ``left_join`` / ``outer_join`` with a KStream and `JoinWindows`:
    ``parents`` are (this, other); the node's ``name`` is the join's merge processor.

    describe() shows Kafka Streams' five processors (``KStreamImplJoin``): each side's
    ``KSTREAM-WINDOWED`` node holding that side's store, the ``JOINTHIS`` / ``JOINOTHER`` (or
    ``OUTERTHIS`` / ``OUTEROTHER``) processors reading the other side's store (and the shared
    outer store of a left/outer join), and ``KSTREAM-MERGE``."""

    joiner: UserFn = attrs.field(kw_only=True, validator=_user_fn)
    kind: str = attrs.field(kw_only=True, validator=_stream_join_kind)
    windows: JoinWindows = attrs.field(kw_only=True, validator=instance_of(JoinWindows))
    this_windowed: str = attrs.field(kw_only=True, validator=is_name)
    other_windowed: str = attrs.field(kw_only=True, validator=is_name)
    join_this: str = attrs.field(kw_only=True, validator=is_name)
    join_other: str = attrs.field(kw_only=True, validator=is_name)
    this_store: str = attrs.field(kw_only=True, validator=is_name)
    other_store: str = attrs.field(kw_only=True, validator=is_name)
    outer_store: str | None = attrs.field(kw_only=True, default=None, validator=_outer_store)
    key_serde: PlanSerde | None = _serde_field()
    value_serde: PlanSerde | None = _serde_field()
    other_value_serde: PlanSerde | None = _serde_field()
    arity = 2

    @property
    def stores(self) -> tuple[str, ...]:
        return (self.this_store, self.other_store) + ((self.outer_store,) if self.outer_store else ())

    def describe_into(self, builder: DescriptionBuilder) -> None:
        shared = (self.outer_store,) if self.outer_store else ()
        builder.add_processor(self.this_windowed, (self.this_store,), self.parents[:1])
        builder.add_processor(self.other_windowed, (self.other_store,), self.parents[1:])
        builder.add_processor(self.join_this, java_hash_set_order((self.other_store, *shared)), (self.this_windowed,))
        builder.add_processor(self.join_other, java_hash_set_order((self.this_store, *shared)), (self.other_windowed,))
        builder.add_processor(self.name, (), (self.join_this, self.join_other), predecessors_in_order=True)


@attrs.frozen
class BranchNode(UnaryNode):
    """``KStream.split()``: the splitter (``KSTREAM-BRANCH``); its children are the branches."""



def _default_branch(inst: BranchChildNode, attribute: attrs.Attribute[Any], value: bool) -> None:
    if not value and not inst.predicates:
        raise InvalidArgumentError("A branch that is not the default branch needs its predicate.")


@attrs.frozen
class BranchChildNode(UnaryNode):
    """One branch of a split: a record goes to the first branch whose predicate holds.

    ``predicates`` are the split's predicates up to this branch's own (the last one); the
    default branch (``default``) holds all of them and takes the records none matches."""

    predicates: tuple[UserFn, ...] = attrs.field(kw_only=True, validator=tuple_of(UserFn))
    default: bool = attrs.field(kw_only=True, default=False, validator=[instance_of(bool), _default_branch])

# --- grouped tables and suppress (KTable.group_by, KTable.suppress) -------------------------------


@attrs.frozen
class TableGroupByNode(UnaryNode):
    """``KTable.group_by(selector)``: re-keys each change of the table (Kafka Streams'
    ``KTABLE-SELECT`` / ``KTableRepartitionMap``); its child is a `GroupedTableAggregateNode`."""

    selector: UserFn = attrs.field(kw_only=True, validator=_user_fn)
    #: The serdes of the re-keyed records (``Grouped.with_serdes``; Kafka's repartition topic).
    key_serde: PlanSerde | None = _serde_field()
    value_serde: PlanSerde | None = _serde_field()


def _distinct_names(inst: GroupedTableAggregateNode, attribute: attrs.Attribute[Any], value: Any) -> None:
    if inst.sink_name == inst.source_name or inst.source_name == inst.name:
        raise InvalidArgumentError("The repartition sink, repartition source and aggregate of a KGroupedTable "
                                   f"need three different names (got {inst.sink_name!r}, {inst.source_name!r}, "
                                   f"{inst.name!r}).")


@attrs.frozen
class GroupedTableAggregateNode(_OneStore, UnaryNode):
    """``KGroupedTable.count`` / ``reduce`` / ``aggregate``: describe() shows the repartition sink
    ``sink_name`` writing ``topic`` (fed by the ``KTABLE-SELECT`` parent), the source
    ``source_name`` reading it, and this node (``KTABLE-AGGREGATE`` / ``KTABLE-REDUCE``) with
    ``store``. ``key_serde`` / ``value_serde``: the store's (``Materialized``)."""

    agg: GroupedTableAgg = attrs.field(kw_only=True, validator=instance_of(GroupedTableAgg))
    store: str = attrs.field(kw_only=True, validator=is_name)
    topic: str = attrs.field(kw_only=True, validator=is_topic)
    sink_name: str = attrs.field(kw_only=True, validator=is_name)
    source_name: str = attrs.field(kw_only=True, validator=[is_name, _distinct_names])
    key_serde: PlanSerde | None = _serde_field()
    value_serde: PlanSerde | None = _serde_field()

    def describe_into(self, builder: DescriptionBuilder) -> None:
        builder.add_sink(self.sink_name, self.topic, self.parents)
        builder.add_source(self.source_name, (self.topic,))
        builder.add_processor(self.name, self.stores, (self.source_name,))


def _suppress_mode(inst: SuppressNode, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value not in ("until_window_closes", "until_time_limit"):
        raise InvalidArgumentError(f"'mode' must be 'until_window_closes' or 'until_time_limit' (got {value!r}).")


def _suppress_limit(inst: SuppressNode, attribute: attrs.Attribute[Any], value: Any) -> None:
    if inst.mode == "until_window_closes" and value is not None:
        raise InvalidArgumentError("'time_limit' must be None for until_window_closes (the window's end and "
                                   f"grace decide; got {value!r}).")
    if inst.mode == "until_time_limit" and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
        raise InvalidArgumentError(f"'time_limit' must be >= 0 ms for until_time_limit (got {value!r}).")


@attrs.frozen
class SuppressNode(_OneStore, UnaryNode):
    """``KTable.suppress(suppressed)`` (``KTABLE-SUPPRESS``, buffer store ``store``): ``mode``
    ``until_window_closes`` (final results of a windowed table) or ``until_time_limit``
    (``time_limit`` ms)."""

    mode: str = attrs.field(kw_only=True, validator=_suppress_mode)
    time_limit: int | None = attrs.field(kw_only=True, default=None, validator=_suppress_limit)
    store: str = attrs.field(kw_only=True, validator=is_name)


def concrete_node_types() -> frozenset[type[Node]]:
    """Every concrete `Node` subclass of the IR's modules, at any depth (ibis' ``ALL_OPERATIONS``):
    the public ones, not abstract, as their module holds them (not a class attrs replaced)."""
    found: set[type[Node]] = set()
    pending: list[type[Node]] = [Node]
    while pending:
        for sub in pending.pop().__subclasses__():
            pending.append(sub)
            if (sub.__module__.startswith("streamsdsl.ir.") and not sub.__name__.startswith("_")
                    and sub is not UnaryNode and not inspect.isabstract(sub)
                    and vars(sys.modules[sub.__module__]).get(sub.__name__) is sub):
                found.add(sub)
    return frozenset(found)
