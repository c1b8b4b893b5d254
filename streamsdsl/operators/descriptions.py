"""One description per stateful IR node, derived once from the node and its parents' key and
value encodings: what its operator holds, reads and returns, and the checks (with their
messages) a topology must pass before it runs. The Spark compiler's rules
(`streamsdsl.compiler`) and the direct engine's steps (`streamsdsl.direct`) both read it, so
neither derives a serde, a function or an error message of its own.

`description_of(node, ports, topology)` builds the description of ``node`` from ``ports``, its
parents' encodings in order (anything with a ``key`` `KeyCodec` and a ``value`` serde: the
compiler's ``Frame``, the direct engine's ``Typed``), through one table (`DESCRIPTIONS`).

Examples
--------
>>> from streamsdsl import ir
>>> from streamsdsl.values.serdes import Serdes
>>> count = ir.AggregateNode("KSTREAM-AGGREGATE-0000000001", ("in",), agg=ir.CountAgg(), store="store")
>>> d = description_of(count, [Encoding(KeyCodec(Serdes.String()), Serdes.String())], None)
>>> d.value, d.key.windowed, d.functions[0].aggregator("k", "v", 1)
(Serdes.Long(), False, 2)
"""

from __future__ import annotations

from typing import Any, Callable, Protocol, Sequence

import attrs

from streamsdsl import ir
from streamsdsl.errors import InvalidTypeError, OperationNotDefinedError
from streamsdsl.operators.codecs import KeyCodec
from streamsdsl.semantics.joiners import Joiner
from streamsdsl.operators.functions import (
    AnyWindows,
    agg_functions,
    agg_value_serde,
    cogroup_value_serde,
    filtered_table_sides,
    final_results_delay,
    function_names,
    grouped_functions,
    grouped_value_serde,
    joiner_of,
    key_codec,
    windowing_of,
)
from streamsdsl.semantics.aggregation import AggFunctions
from streamsdsl.semantics.grouped_table import GroupedTableFunctions
from streamsdsl.semantics.kernels import FlushPolicy
from streamsdsl.semantics.stream_stream import StreamJoinSpec
from streamsdsl.semantics.stream_table import StreamTableJoin
from streamsdsl.semantics.suppress import FinalResultsWindowing, TimeLimitBuffer
from streamsdsl.semantics.fk_join import FkJoinSpec
from streamsdsl.semantics.table_table import TableJoinSpec
from streamsdsl.semantics.windowing import Windowing
from streamsdsl.values.serdes import DEFAULT_SERDE, PlanSerde
from streamsdsl.state.builders import StoreBuilder

__all__ = [
    "DESCRIPTIONS", "MERGE_WINDOWED", "AggregateDescription", "Encoding", "FkJoinDescription", "GlobalTableJoinDescription",
    "GroupedAggregateDescription", "Port",
    "ProcessDescription", "StreamJoinDescription", "StreamTableJoinDescription", "SuppressDescription", "TableDescription",
    "TableGroupByDescription", "TableJoinDescription", "description_of", "keep_latest", "merged_encoding",
    "regrouped", "selected_key", "versioned_retention",
]


class Port(Protocol):
    """How a parent's records are encoded: its key layout and its value serde."""

    @property
    def key(self) -> KeyCodec: ...

    @property
    def value(self) -> PlanSerde: ...


@attrs.frozen
class Encoding:
    """A `Port` of its own (the encodings after a step, without the host's data)."""

    key: KeyCodec
    value: PlanSerde


def regrouped(port: Port, key_serde: PlanSerde | None, value_serde: PlanSerde | None) -> Encoding:
    """The encodings after ``Grouped.with_serdes`` / ``Repartitioned.with_serdes``: a plain key
    re-encoded with ``key_serde`` (a windowed key keeps its layout), the value with ``value_serde``."""
    key, value = port.key, port.value
    if key_serde is not None and key_serde != key.serde and not key.windowed:
        key = KeyCodec(key_serde)
    if value_serde is not None and value_serde != value:
        value = value_serde
    return Encoding(key, value)


def selected_key(node: ir.SelectKeyNode, topology: Any) -> KeyCodec:
    """How a Python key selector's result is held: with the key serde of the repartition it
    feeds when that is its one child (``group_by(selector, Grouped.with_serdes(...))``,
    ``select_key(...).repartition(Repartitioned.with_serdes(...))``: Kafka Streams writes the
    selected key to the repartition topic with that serde, so any key the serde can write may
    be selected), else JSON (`DEFAULT_SERDE`)."""
    children = topology.children(node.name) if topology is not None else ()
    if len(children) == 1:
        child = topology.node(children[0])
        if isinstance(child, ir.RepartitionNode) and child.key_serde is not None:
            return KeyCodec(child.key_serde)
    return KeyCodec(DEFAULT_SERDE)


#: Why two streams cannot be merged (a key of one would not be a key of the other).
MERGE_WINDOWED = "merge: cannot merge a windowed stream with a non-windowed one."


def merged_encoding(node: ir.MergeNode, left: Port, right: Port) -> Encoding:
    """The encodings of ``left.merge(right)``: each side's where both agree, else the default serde."""
    if left.key.windowed != right.key.windowed:
        raise InvalidTypeError(MERGE_WINDOWED)
    key = left.key if left.key == right.key else KeyCodec(DEFAULT_SERDE)
    return Encoding(key, left.value if left.value == right.value else DEFAULT_SERDE)


def _plain_keys(node: ir.Node, what: str, ports: Sequence[Port]) -> None:
    if any(p.key.windowed for p in ports):
        raise InvalidTypeError(f"{node.name}: a {what} join needs plain (not windowed) keys on both sides.")


# --- aggregations -----------------------------------------------------------------------------------


@attrs.frozen
class AggregateDescription:
    """An aggregation (``count`` / ``reduce`` / ``aggregate``, windowed or not) or a cogroup.

    ``key_serde`` is the grouping key's serde the operator holds keys in (after
    ``Grouped.with_serdes``; a cogroup's own or its first input's), ``key`` the output key
    layout around it, ``value`` the serde of the aggregates. ``functions`` are Kafka Streams'
    functions per input (none where ``column`` is a pyspark Column aggregation, which only
    Spark evaluates)."""

    node: ir.AggregateNode | ir.CogroupAggregateNode
    key_serde: PlanSerde
    key: KeyCodec
    value: PlanSerde
    #: Each input's value serde.
    inputs: tuple[PlanSerde, ...]
    windows: AnyWindows | None
    emit_on_close: bool
    functions: tuple[AggFunctions, ...]
    #: How errors name the initializer, aggregator and merger (e.g. "reducer" for reduce()).
    function_names: tuple[str, str, str]
    column: ir.ColumnFn | None = None
    #: Idle close (emit on close only): ms of wall-clock time without a record of a key after
    #: which its open windows close (``None``: Kafka's close alone).
    idle_close_ms: int | None = None

    @property
    def name(self) -> str:
        return self.node.name

    @property
    def cogroup(self) -> bool:
        return isinstance(self.node, ir.CogroupAggregateNode)

    def windowing(self, flush: FlushPolicy, final_results: int | None = None) -> Windowing:
        """The window rule of the operator under ``flush``: with Kafka's record cache (flushed per
        record) a session aggregation that emits on update finds what the cache holds;
        ``final_results`` (a delay in ms): the aggregation and its ``suppress(until_window_closes)``
        as one operator."""
        cached = flush is FlushPolicy.PER_RECORD
        if final_results is not None:
            return FinalResultsWindowing(windowing_of(self.windows, cached=cached), final_results, cached=cached)
        return windowing_of(self.windows, cached=cached and not self.emit_on_close)


def _aggregate(node: ir.AggregateNode, ports: Sequence[Port], topology: Any) -> AggregateDescription:
    grouped = regrouped(ports[0], node.key_serde, None)
    agg = node.agg
    fn = getattr(agg, "reducer", None) or getattr(agg, "aggregator", None)
    column = fn if isinstance(fn, ir.ColumnFn) else None
    windows = getattr(node, "windows", None)
    emit = getattr(node, "emit", None)
    return AggregateDescription(
        node, grouped.key.serde, key_codec(grouped.key.serde, windows), agg_value_serde(node, grouped.value),
        (grouped.value,), windows, emit is not None and emit.emits_on_close,
        () if column is not None else (agg_functions(agg),), function_names(agg), column,
        None if emit is None else emit.idle_close_ms)


def _cogroup(node: ir.CogroupAggregateNode, ports: Sequence[Port], topology: Any) -> AggregateDescription:
    if any(p.key.windowed for p in ports):
        raise InvalidTypeError(f"{node.name}: cannot cogroup a windowed stream.")
    key_serde = node.key_serde or ports[0].key.serde
    merger = node.merger.fn if node.merger is not None else None
    return AggregateDescription(
        node, key_serde, key_codec(key_serde, node.windows), cogroup_value_serde(node), tuple(p.value for p in ports),
        node.windows, node.windows is not None and node.emit.emits_on_close,
        tuple(AggFunctions(node.initializer.fn, a.fn, merger) for a in node.aggregators), function_names(None),
        idle_close_ms=node.emit.idle_close_ms if node.windows is not None else None)


def keep_latest(key: Any, value: Any, aggregate: Any) -> Any:
    """``suppress(until_time_limit)``'s aggregator: a key's buffered update is its latest value."""
    return value


def _no_initial() -> Any:
    return None


@attrs.frozen
class SuppressDescription:
    """``suppress``: ``until_time_limit`` buffers a plain table's updates per key
    (`TimeLimitBuffer`, keeping the latest, `keep_latest`); ``until_window_closes`` folds into
    the windowed aggregation it follows (``aggregation``), released ``delay`` ms after a
    window's end (``None``: at the aggregation's close)."""

    node: ir.SuppressNode
    key: KeyCodec
    value: PlanSerde
    aggregation: ir.TimeWindowAggregateNode | ir.SessionAggregateNode | None = None
    delay: int | None = None

    @property
    def name(self) -> str:
        return self.node.name

    @property
    def time_limit(self) -> bool:
        return self.node.mode == "until_time_limit"

    def buffer(self) -> TimeLimitBuffer:
        """``until_time_limit``'s rule."""
        return TimeLimitBuffer(self.node.time_limit)

    @property
    def functions(self) -> AggFunctions:
        """``until_time_limit``'s functions: no initial value, the latest update kept."""
        return AggFunctions(_no_initial, keep_latest)


def _suppress(node: ir.SuppressNode, ports: Sequence[Port], topology: Any) -> SuppressDescription:
    table = ports[0]
    if node.mode == "until_time_limit":
        if table.key.windowed:
            raise OperationNotDefinedError(
                f"{node.name}: suppress(until_time_limit) of a windowed table is not implemented yet; for one result "
                "per window use suppress(Suppressed.until_window_closes(Suppressed.BufferConfig.unbounded())).")
        return SuppressDescription(node, KeyCodec(table.key.serde), table.value)
    aggregation = topology.node(node.parents[0])
    if not isinstance(aggregation, (ir.TimeWindowAggregateNode, ir.SessionAggregateNode)) \
            or aggregation.emit.emits_on_close:
        raise OperationNotDefinedError(
            f"{node.name}: suppress(until_window_closes) is implemented right after a windowed aggregation "
            "that emits on update.")
    return SuppressDescription(node, table.key, table.value, aggregation, final_results_delay(aggregation.windows))


# --- tables and joins -------------------------------------------------------------------------------


@attrs.frozen
class TableDescription:
    """A table: from a topic (``StreamsBuilder.table``) or a stream (``to_table()``); with a store
    (``materialized``) its changelog leaves out a tombstone of an absent key."""

    node: ir.TableSourceNode | ir.StreamToTableNode | ir.GlobalTableSourceNode
    key: KeyCodec
    value: PlanSerde
    materialized: bool

    @property
    def history_retention_ms(self) -> int | None:
        """A versioned table's history retention (ms), ``None`` for a table of latest values."""
        return self.node.history_retention_ms


def versioned_retention(topology: Any, table: str) -> int | None:
    """The history retention (ms) of the versioned store the table ``table`` reads through (a
    versioned table source, then stateless table steps), ``None`` when it is not versioned."""
    node = topology.node(table)
    while isinstance(node, (ir.TableFilterNode, ir.TableMapValuesNode)):
        node = topology.node(node.parents[0])
    if isinstance(node, (ir.TableSourceNode, ir.StreamToTableNode)):
        return node.history_retention_ms
    return None


def _table_source(node: ir.TableSourceNode, ports: Sequence[Port], topology: Any) -> TableDescription:
    return TableDescription(node, KeyCodec(node.key_serde or DEFAULT_SERDE), node.value_serde or DEFAULT_SERDE,
                            node.materialized)


def _global_table_source(node: ir.GlobalTableSourceNode, ports: Sequence[Port], topology: Any) -> TableDescription:
    return TableDescription(node, KeyCodec(node.key_serde or DEFAULT_SERDE), node.value_serde or DEFAULT_SERDE, True)


@attrs.frozen
class GlobalTableJoinDescription:
    """A stream–global-table join: the output keeps the stream's key (``key``, any codec: the
    stream is not re-keyed); the table is looked up by the key selector's result held in the
    table's key serde (``table_key``); results in the default serde."""

    node: ir.GlobalTableJoinNode
    key: KeyCodec
    stream_value: PlanSerde
    table_key: PlanSerde
    table_value: PlanSerde
    value: PlanSerde = DEFAULT_SERDE

    @property
    def spec(self) -> StreamTableJoin:
        return StreamTableJoin(self.node.kind)  # type: ignore[arg-type]

    @property
    def key_selector(self) -> Callable[[Any, Any], Any]:
        return self.node.key_selector.fn

    @property
    def joiner(self) -> Joiner:
        return joiner_of(self.node.joiner)


def _global_table_join(node: ir.GlobalTableJoinNode, ports: Sequence[Port], topology: Any) -> GlobalTableJoinDescription:
    stream, table = ports
    return GlobalTableJoinDescription(node, stream.key, stream.value, table.key.serde, table.value)


def _stream_to_table(node: ir.StreamToTableNode, ports: Sequence[Port], topology: Any) -> TableDescription:
    if ports[0].key.windowed:
        raise InvalidTypeError(f"{node.name}: to_table() of a windowed stream is not supported.")
    return TableDescription(node, ports[0].key, ports[0].value, node.materialized)


@attrs.frozen
class StreamTableJoinDescription:
    """A stream–table join: keys held in the stream's key serde, results in the default serde."""

    node: ir.StreamTableJoinNode
    key_serde: PlanSerde
    stream_value: PlanSerde
    table_value: PlanSerde
    value: PlanSerde = DEFAULT_SERDE
    #: The table's history retention (ms) when it is versioned: lookups as of the stream
    #: record's timestamp (KIP-914); ``None``: the latest value.
    history_retention_ms: int | None = None

    @property
    def key(self) -> KeyCodec:
        return KeyCodec(self.key_serde)

    @property
    def grace_ms(self) -> int | None:
        """``Joined.with_grace_period`` (ms), ``None`` without a grace buffer."""
        return self.node.grace_ms

    @property
    def spec(self) -> StreamTableJoin:
        return StreamTableJoin(self.node.kind)  # type: ignore[arg-type]

    @property
    def joiner(self) -> Joiner:
        return joiner_of(self.node.joiner)


def _stream_table_join(node: ir.StreamTableJoinNode, ports: Sequence[Port], topology: Any) -> StreamTableJoinDescription:
    stream, table = ports
    _plain_keys(node, "stream-table", ports)
    return StreamTableJoinDescription(node, stream.key.serde, stream.value, table.value,
                                      history_retention_ms=None if topology is None else versioned_retention(topology, node.parents[1]))


@attrs.frozen
class TableJoinDescription:
    """A table–table join: keys held in the left table's key serde; ``filtered_sides``: the sides
    whose table reaches the join through a ``KTable.filter``."""

    node: ir.TableTableJoinNode
    key_serde: PlanSerde
    value: PlanSerde
    left_value: PlanSerde
    right_value: PlanSerde
    filtered_sides: frozenset[str]

    @property
    def key(self) -> KeyCodec:
        return KeyCodec(self.key_serde)

    @property
    def materialized(self) -> bool:
        return self.node.store is not None

    @property
    def joiner(self) -> Joiner:
        return joiner_of(self.node.joiner)

    def spec(self, flush: FlushPolicy) -> TableJoinSpec:
        """The join's rule under ``flush`` (a materialized result behind Kafka's record cache)."""
        return TableJoinSpec(self.node.kind, send_old_values=False, materialized=self.materialized,  # type: ignore[arg-type]
                             cached=flush is FlushPolicy.PER_RECORD, filtered_sides=self.filtered_sides)


def _table_table_join(node: ir.TableTableJoinNode, ports: Sequence[Port], topology: Any) -> TableJoinDescription:
    left, right = ports
    _plain_keys(node, "table-table", ports)
    return TableJoinDescription(node, left.key.serde, node.value_serde or DEFAULT_SERDE, left.value, right.value,
                                filtered_table_sides(topology, node))


@attrs.frozen
class FkJoinDescription:
    """A foreign-key table–table join: this table's keys in its key serde (the result's keys),
    the foreign keys in the other table's key serde; ``filtered_sides``: the tables read through
    a ``KTable.filter``."""

    node: ir.ForeignKeyJoinNode
    key_serde: PlanSerde
    foreign_key_serde: PlanSerde
    value: PlanSerde
    left_value: PlanSerde
    right_value: PlanSerde
    filtered_sides: frozenset[str]

    @property
    def key(self) -> KeyCodec:
        return KeyCodec(self.key_serde)

    @property
    def foreign_key(self) -> KeyCodec:
        return KeyCodec(self.foreign_key_serde)

    @property
    def materialized(self) -> bool:
        return self.node.materialized

    @property
    def joiner(self) -> Joiner:
        return joiner_of(self.node.joiner)

    @property
    def extractor(self) -> Callable[[Any, Any], Any]:
        """The foreign-key extractor as ``(key, value) -> foreign key``, whichever form was given."""
        fn = self.node.extractor.fn
        if self.node.extractor.takes_key:
            return fn  # type: ignore[no-any-return]
        return lambda key, value: fn(value)

    def spec(self, flush: FlushPolicy) -> FkJoinSpec:
        """The join's rule under ``flush`` (a materialized result behind Kafka's record cache)."""
        return FkJoinSpec(self.node.kind, materialized=self.materialized,  # type: ignore[arg-type]
                          cached=flush is FlushPolicy.PER_RECORD, filtered_sides=self.filtered_sides)


def _fk_join(node: ir.ForeignKeyJoinNode, ports: Sequence[Port], topology: Any) -> FkJoinDescription:
    left, right = ports
    _plain_keys(node, "foreign-key", ports)
    return FkJoinDescription(node, left.key.serde, right.key.serde, node.value_serde or DEFAULT_SERDE, left.value,
                             right.value, filtered_table_sides(topology, node))


@attrs.frozen
class StreamJoinDescription:
    """A windowed stream–stream join: keys and each side's values held in the join's serdes
    (``StreamJoined.with_serdes``, else the sides'), results in the default serde."""

    node: ir.StreamStreamJoinNode
    key_serde: PlanSerde
    left_value: PlanSerde
    right_value: PlanSerde
    value: PlanSerde = DEFAULT_SERDE

    @property
    def key(self) -> KeyCodec:
        return KeyCodec(self.key_serde)

    @property
    def spec(self) -> StreamJoinSpec:
        return StreamJoinSpec(self.node.kind, self.node.windows.spec)  # type: ignore[arg-type]

    @property
    def joiner(self) -> Joiner:
        return joiner_of(self.node.joiner)


def _stream_stream_join(node: ir.StreamStreamJoinNode, ports: Sequence[Port], topology: Any) -> StreamJoinDescription:
    this, other = ports
    _plain_keys(node, "stream-stream", ports)
    return StreamJoinDescription(node, node.key_serde or this.key.serde, node.value_serde or this.value,
                                 node.other_value_serde or other.value)


# --- grouped tables -----------------------------------------------------------------------------------


@attrs.frozen
class TableGroupByDescription:
    """``KTable.group_by``: each update re-keyed by the selector, held in ``Grouped``'s serdes
    (else the default serde)."""

    node: ir.TableGroupByNode
    key_serde: PlanSerde
    value: PlanSerde

    @property
    def key(self) -> KeyCodec:
        return KeyCodec(self.key_serde)


def _table_group_by(node: ir.TableGroupByNode, ports: Sequence[Port], topology: Any) -> TableGroupByDescription:
    return TableGroupByDescription(node, node.key_serde or DEFAULT_SERDE, node.value_serde or DEFAULT_SERDE)


@attrs.frozen
class GroupedAggregateDescription:
    """A grouped table's aggregation: the old value subtracted, the new one added, per group."""

    node: ir.GroupedTableAggregateNode
    #: The group's serde the operator holds keys in (``Materialized``'s, else the grouping's).
    key_serde: PlanSerde
    value: PlanSerde
    #: The encodings of the re-keyed changes it reads.
    input: Encoding
    functions: GroupedTableFunctions

    @property
    def key(self) -> KeyCodec:
        return KeyCodec(self.key_serde)


def _grouped_aggregate(node: ir.GroupedTableAggregateNode, ports: Sequence[Port],
                       topology: Any) -> GroupedAggregateDescription:
    grouped = ports[0]
    return GroupedAggregateDescription(node, node.key_serde or grouped.key.serde, grouped_value_serde(node, grouped.value),
                                       Encoding(grouped.key, grouped.value), grouped_functions(node.agg))


#: Stateful node type → its description ``(node, ports, topology) -> description``.
# --- user processors -------------------------------------------------------------------------------


@attrs.frozen
class ProcessDescription:
    """A user processor (``process`` / ``process_values``): the supplier, the stores it is
    connected to (their builders, in the order named), its children (what ``forward(record,
    child)`` may name) and how its output is held: a ``process`` re-keys, so keys and values
    are JSON, as a mapper's; a ``process_values`` keeps the parent's key encoding."""

    node: ir.ProcessNode
    stores: tuple[StoreBuilder, ...]
    children: tuple[str, ...]
    key: KeyCodec
    value: PlanSerde = DEFAULT_SERDE

    @property
    def supplier(self) -> Callable[[], Any]:
        return self.node.supplier.fn


def _process(node: ir.ProcessNode, ports: Sequence[Port], topology: Any) -> ProcessDescription:
    stores = tuple(topology.state_store(name) for name in node.store_names)
    key = ports[0].key if node.fixed_key else KeyCodec(DEFAULT_SERDE)
    return ProcessDescription(node, stores, tuple(topology.children(node.name)), key)


DESCRIPTIONS: dict[type[ir.Node], Callable[..., Any]] = {
    ir.AggregateNode: _aggregate,
    ir.SessionAggregateNode: _aggregate,
    ir.TimeWindowAggregateNode: _aggregate,
    ir.CogroupAggregateNode: _cogroup,
    ir.SuppressNode: _suppress,
    ir.TableSourceNode: _table_source,
    ir.StreamToTableNode: _stream_to_table,
    ir.StreamTableJoinNode: _stream_table_join,
    ir.GlobalTableSourceNode: _global_table_source,
    ir.GlobalTableJoinNode: _global_table_join,
    ir.TableTableJoinNode: _table_table_join,
    ir.ForeignKeyJoinNode: _fk_join,
    ir.StreamStreamJoinNode: _stream_stream_join,
    ir.TableGroupByNode: _table_group_by,
    ir.GroupedTableAggregateNode: _grouped_aggregate,
    ir.ProcessNode: _process,
}


def description_of(node: ir.Node, ports: Sequence[Port], topology: Any) -> Any:
    """The description of the stateful ``node`` whose parents are encoded as ``ports`` (in the
    order of ``node.parents``); raises what the node's checks raise. ``topology``: the
    `streamsdsl.ir.topology.Topology` it belongs to (a suppress reads its aggregation, a
    table–table join its sides' steps)."""
    return DESCRIPTIONS[type(node)](node, ports, topology)
