"""A grouped table (`KGroupedTable`, from ``KTable.group_by``) and ``KTable.suppress``.

``table.group_by(selector)`` re-keys every change of a table; ``count``, ``reduce`` and
``aggregate`` then keep one aggregate per new key, subtracting a row's old value from its old
group before adding its new value to its new group (Kafka Streams' ``KGroupedTable``,
``KAFKA_STREAMS_SEMANTICS.md`` §5.5). Names follow Kafka Streams (``KTableImpl.groupBy``,
``KGroupedTableImpl.doAggregate``, ``KTableImpl.suppress``); the stages are immutable.

Examples
--------
>>> from streamsdsl import StreamsBuilder
>>> b = StreamsBuilder()
>>> counts = b.table("users").group_by(lambda user, region: (region, user)).count()
>>> print(b.build().describe(), end="")
Topologies:
   Sub-topology: 0
    Source: KSTREAM-SOURCE-0000000001 (topics: [users])
      --> KTABLE-SOURCE-0000000002
    Processor: KTABLE-SOURCE-0000000002 (stores: [users-STATE-STORE-0000000000])
      --> KTABLE-SELECT-0000000003
      <-- KSTREAM-SOURCE-0000000001
    Processor: KTABLE-SELECT-0000000003 (stores: [])
      --> KSTREAM-SINK-0000000005
      <-- KTABLE-SOURCE-0000000002
    Sink: KSTREAM-SINK-0000000005 (topic: KTABLE-AGGREGATE-STATE-STORE-0000000004-repartition)
      <-- KTABLE-SELECT-0000000003
<BLANKLINE>
  Sub-topology: 1
    Source: KSTREAM-SOURCE-0000000006 (topics: [KTABLE-AGGREGATE-STATE-STORE-0000000004-repartition])
      --> KTABLE-AGGREGATE-0000000007
    Processor: KTABLE-AGGREGATE-0000000007 (stores: [KTABLE-AGGREGATE-STATE-STORE-0000000004])
      --> none
      <-- KSTREAM-SOURCE-0000000006
<BLANKLINE>
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

import attrs

from streamsdsl import ir
from streamsdsl._validation import REQUIRED, require_arguments, validate_name
from streamsdsl.dsl.stage import NameArg, _materialized, _Stage, _user_fn
from streamsdsl.dsl.options import Grouped, Materialized, check_option, resolve_name
from streamsdsl.dsl.suppress import Suppressed
from streamsdsl.errors import InvalidTypeError, OperationNotDefinedError, TopologyError

if TYPE_CHECKING:
    from streamsdsl.dsl.table import KTable

__all__ = ["KGroupedTable", "group_table", "suppress_table"]

_SELECTOR = "(key, value) -> (key, value)"
_INITIALIZER = "() -> aggregate"
_ADDER = "(key, value, aggregate) -> aggregate"
_REDUCER = "(aggregate, value) -> aggregate"


def group_table(table: KTable, selector: Any, grouped: Grouped | None, name: NameArg) -> KGroupedTable:
    """``KTable.group_by``: a ``KTABLE-SELECT`` node, and the table's source materialized (the
    grouping needs each row's old value, as Kafka's ``enableSendingOldValues``). Of a windowed
    table (a windowed aggregation's) the selector receives each row's `Windowed` key; a window
    merged away (sessions) arrives as a tombstone and leaves its group."""
    require_arguments("group_by", "group_by(lambda key, value: (value, key))", ("selector", selector, _SELECTOR))
    grouped = check_option(grouped, Grouped, "grouped") or Grouped()
    user_name = resolve_name(name, grouped.name)
    grouped = attrs.evolve(grouped, name=user_name)
    fn = _user_fn(selector, "selector", _SELECTOR)
    builder = table._builder
    node_name = builder._processor_name(user_name, "KTABLE-SELECT-")
    try:
        builder._materialize(table.node_name)
    except TopologyError:
        pass  # a table without a store of its own: the grouping keeps the old values itself
    builder._add(ir.TableGroupByNode(node_name, (table.node_name,), selector=fn, key_serde=grouped.key_serde,
                                     value_serde=grouped.value_serde))
    return KGroupedTable(builder, node_name, grouped)


@attrs.frozen
class KGroupedTable(_Stage):
    """A re-keyed table (Kafka Streams' ``KGroupedTable``): aggregate it with `count`, `reduce`
    or `aggregate`, each returning a `KTable` of one aggregate per new key."""

    grouped: Grouped

    def count(self, *, name: NameArg = None, materialized: Materialized | None = None) -> KTable:
        """The number of rows per new key: +1 for a row that joins the group, -1 for one that
        leaves it (a group counted down to 0 stays, at 0)."""
        return self._aggregate(ir.GroupedTableAgg("count"), "KTABLE-AGGREGATE-", name, materialized)

    def reduce(self, adder: Callable[[Any, Any], Any] = REQUIRED, subtractor: Callable[[Any, Any], Any] = REQUIRED,
               *, name: NameArg = None, materialized: Materialized | None = None) -> KTable:
        """``adder(aggregate, value)`` for a row joining the group (its first value starts the
        aggregate), ``subtractor(aggregate, value)`` for a row's old value leaving it."""
        require_arguments("reduce", "reduce(lambda agg, value: agg + value, lambda agg, value: agg - value)",
                          ("adder", adder, _REDUCER), ("subtractor", subtractor, _REDUCER))
        agg = ir.GroupedTableAgg("reduce", adder=_user_fn(adder, "adder", _REDUCER),
                                 subtractor=_user_fn(subtractor, "subtractor", _REDUCER))
        return self._aggregate(agg, "KTABLE-REDUCE-", name, materialized)

    def aggregate(self, initializer: Callable[[], Any] = REQUIRED, adder: Callable[[Any, Any, Any], Any] = REQUIRED,
                  subtractor: Callable[[Any, Any, Any], Any] = REQUIRED, *, name: NameArg = None,
                  materialized: Materialized | None = None) -> KTable:
        """``initializer()`` starts a group's aggregate; ``adder(key, value, aggregate)`` adds a
        row's new value, ``subtractor(key, value, aggregate)`` removes its old value."""
        require_arguments("aggregate", "aggregate(lambda: 0, lambda key, value, agg: agg + value, "
                                       "lambda key, value, agg: agg - value)",
                          ("initializer", initializer, _INITIALIZER), ("adder", adder, _ADDER),
                          ("subtractor", subtractor, _ADDER))
        agg = ir.GroupedTableAgg("aggregate", _user_fn(initializer, "initializer", _INITIALIZER),
                                 _user_fn(adder, "adder", _ADDER), _user_fn(subtractor, "subtractor", _ADDER))
        return self._aggregate(agg, "KTABLE-AGGREGATE-", name, materialized)

    def _aggregate(self, agg: ir.GroupedTableAgg, prefix: str, name: NameArg,
                   materialized: Materialized | None) -> KTable:
        # Kafka's order: the store name (MaterializedInternal), then sink, source and the
        # aggregate (KGroupedTableImpl.doAggregate); a given name burns an index for each too.
        materialized = _materialized(materialized)
        user_name = resolve_name(name)
        builder = self._builder
        store = builder._store_name(materialized, "KTABLE-AGGREGATE-")
        sink = builder._processor_name(None if user_name is None else validate_name(f"{user_name}-sink"),
                                       "KSTREAM-SINK-")
        source = builder._processor_name(None if user_name is None else validate_name(f"{user_name}-source"),
                                         "KSTREAM-SOURCE-")
        node_name = builder._processor_name(user_name, prefix)
        builder._add(ir.GroupedTableAggregateNode(
            node_name, (self.node_name,), agg=agg, store=store, topic=f"{self.grouped.name or store}-repartition",
            sink_name=sink, source_name=source, key_serde=(materialized and materialized.key_serde) or
            self.grouped.key_serde, value_serde=materialized and materialized.value_serde,
        ))
        return builder._table(node_name)


def suppress_table(table: KTable, suppressed: Any) -> KTable:
    """``KTable.suppress``: a ``KTABLE-SUPPRESS`` node with its buffer store."""
    require_arguments("suppress", "suppress(Suppressed.until_window_closes(Suppressed.BufferConfig.unbounded()))",
                      ("suppressed", suppressed, "Suppressed"))
    if not isinstance(suppressed, Suppressed):
        raise InvalidTypeError(
            f"'suppressed' must be a Suppressed such as Suppressed.until_window_closes("
            f"Suppressed.BufferConfig.unbounded()) (got {type(suppressed).__name__}: {suppressed!r}).")
    windows = table.windows
    if suppressed.mode == "until_time_limit":
        if windows is not None:
            raise OperationNotDefinedError(
                "suppress(Suppressed.until_time_limit(...)) of a windowed table is not implemented yet; one final "
                "result per window is suppress(Suppressed.until_window_closes(Suppressed.BufferConfig.unbounded())).")
        return _suppress_node(table, suppressed)
    if windows is None:
        raise InvalidTypeError(
            "suppress(Suppressed.until_window_closes(...)) needs a windowed KTable (the result of a windowed "
            "count/reduce/aggregate): a table of plain keys has no window to close. Write e.g. "
            "group_by_key().windowed_by(TimeWindows.of_size_and_grace(size, grace)).count().suppress(...).")
    parent = table._builder._nodes[table.node_name]
    if not isinstance(parent, (ir.TimeWindowAggregateNode, ir.SessionAggregateNode)):
        raise OperationNotDefinedError(
            "suppress(until_window_closes) must directly follow the windowed count/reduce/aggregate "
            f"(it follows {parent.name}): call suppress() on the aggregation's KTable, then filter/map_values.")
    if parent.emit.emits_on_close:
        raise OperationNotDefinedError(
            f"{parent.name} already emits on window close (one final result per window); suppress() adds nothing: "
            "remove it, or aggregate with the default EmitStrategy.on_window_update().")
    return _suppress_node(table, suppressed)


def _suppress_node(table: KTable, suppressed: Suppressed) -> KTable:
    """The ``KTABLE-SUPPRESS`` node (Kafka's ``KTableImpl.suppress`` names) and its table."""
    builder = table._builder
    if suppressed.name is not None:
        name, store = suppressed.name, validate_name(f"{suppressed.name}-store")
    else:
        name = builder._new_name("KTABLE-SUPPRESS-")
        store = builder._new_name("KTABLE-SUPPRESS-STATE-STORE-")
    builder._add(ir.SuppressNode(name, (table.node_name,), mode=suppressed.mode, time_limit=suppressed.time_limit,
                                 store=store))
    return builder._table(name, table.windows)
