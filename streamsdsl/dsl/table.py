"""The changelog table stage, `KTable`: stateless table steps, grouping, ``suppress`` and the
table–table joins (built in `streamsdsl.dsl.grouped_table` and `streamsdsl.dsl.table_joins`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, ClassVar, Mapping

import attrs

from streamsdsl import ir
from streamsdsl._validation import REQUIRED
from streamsdsl.dsl import hints
from streamsdsl.dsl.grouped_table import KGroupedTable, group_table, suppress_table
from streamsdsl.dsl.options import Grouped, Materialized, TableJoined, resolve_name
from streamsdsl.dsl.stage import VALUE_MAPPER, NameArg, TableStage, _fn
from streamsdsl.dsl.fk_joins import join_dispatch
from streamsdsl.dsl.table_joins import table_join
from streamsdsl.errors import NotYetImplementedError, TopologyError

if TYPE_CHECKING:
    from streamsdsl.dsl.stream import KStream
    from streamsdsl.dsl.suppress import Suppressed

__all__ = ["KTable"]


@attrs.frozen
class KTable(TableStage):
    """A changelog table (Kafka Streams' ``KTable``): the latest value per key.

    ``windows`` is the window specification of a windowed table (its keys are `Windowed`),
    None for a table keyed by plain keys.
    """

    _hints: ClassVar[Mapping[str, str]] = hints.TABLE

    def _child(self, node: ir.Node) -> KTable:
        self._add(node)
        return KTable(self._builder, node.name, self.windows)

    def to_stream(self, *, name: NameArg = None) -> KStream:
        """The table's changelog as a `KStream` (tombstones included, value ``None``)."""
        node_name = self._builder._processor_name(resolve_name(name), "KTABLE-TOSTREAM-")
        self._add(ir.TableToStreamNode(node_name, (self.node_name,)))
        return self._builder._stream(node_name)

    def _refuse_versioned(self, what: str, *others: Any) -> None:
        """KIP-914's rules for ``group_by`` and table–table joins over a versioned table (skip its
        out-of-order updates) are not implemented: refuse such a table."""
        for table in (self, *others):
            if isinstance(table, KTable) and table._builder._versioned_store(table.node_name) is not None:
                raise NotYetImplementedError(
                    f"{what} of a versioned table is not implemented yet (Kafka Streams skips the table's out-of-order "
                    "updates there, KIP-914): see docs/differences.md, \"Not yet implemented\", the row Versioned "
                    "tables. Materialize the table with Materialized.as_(name) instead.")

    def filter(self, predicate: Callable[[Any, Any], bool] | Any, *, name: NameArg = None) -> KTable:
        """Keep rows passing ``predicate(key, value)``; a failing row is forwarded as a tombstone."""
        fn = _fn(predicate, "predicate", "(key, value) -> bool", column_ok=True)
        node_name = self._builder._processor_name(resolve_name(name), "KTABLE-FILTER-")
        return self._child(ir.TableFilterNode(node_name, (self.node_name,), predicate=fn))

    def filter_not(self, predicate: Callable[[Any, Any], bool] | Any, *, name: NameArg = None) -> KTable:
        """Keep rows failing ``predicate(key, value)``; the others become tombstones."""
        fn = _fn(predicate, "predicate", "(key, value) -> bool", column_ok=True)
        node_name = self._builder._processor_name(resolve_name(name), "KTABLE-FILTER-")
        return self._child(ir.TableFilterNode(node_name, (self.node_name,), predicate=fn, negate=True))

    def map_values(self, mapper: Callable[[Any], Any] | Callable[[Any, Any], Any] | Any, *,
                   name: NameArg = None) -> KTable:
        """Map each non-null value with ``mapper(value)`` or ``mapper(key, value)`` (Kafka's
        ``ValueMapperWithKey``: the key is read-only); tombstones stay tombstones."""
        fn = _fn(mapper, "mapper", VALUE_MAPPER, column_ok=True)
        node_name = self._builder._processor_name(resolve_name(name), "KTABLE-MAPVALUES-")
        return self._child(ir.TableMapValuesNode(node_name, (self.node_name,), mapper=fn))

    def group_by(self, selector: Callable[[Any, Any], Any] = REQUIRED, grouped: Grouped | None = None, *,
                 name: NameArg = None) -> KGroupedTable:
        """Re-key the table with ``selector(key, value) -> (new_key, new_value)`` (a pair or
        `KeyValue`; a ``None`` result, key or value is dropped) for ``count``/``reduce``/``aggregate``."""
        self._refuse_versioned("group_by()")
        return group_table(self, selector, grouped, name)

    def suppress(self, suppressed: Suppressed = REQUIRED) -> KTable:
        """Keep updates back: ``Suppressed.until_window_closes(Suppressed.BufferConfig.unbounded())``
        forwards one final result per window of a windowed aggregation's table."""
        if self._builder._versioned_store(self.node_name) is not None:  # KTableImpl.suppress
            raise TopologyError("suppress() is only supported for non-versioned KTables")
        return suppress_table(self, suppressed)

    def join(self, other: KTable, *args: Callable[..., Any], foreign_key_extractor: Callable[..., Any] | None = None,
             joiner: Callable[..., Any] | None = None, table_joined: TableJoined | None = None, name: NameArg = None,
             materialized: Materialized | None = None) -> KTable:
        """A table–table join (Kafka Streams' ``KTable#join``).

        ``join(other, joiner)``: on every update of either table, ``joiner(value, other_value)``
        for the key while both tables have a value, and a delete (``None``) when a joined key
        loses a side; timestamp = the later of both sides'.

        ``join(other, foreign_key_extractor, joiner)`` (or ``foreign_key_extractor=``): a
        foreign-key join (KIP-213), keyed by this table's keys: each row joins the row of
        ``other`` whose key is ``foreign_key_extractor(value)`` (or ``(key, value)``); a changed
        foreign key retracts the old match. ``table_joined``: `TableJoined` (its name names the
        join's processors). See docs/joins.md.
        """
        self._refuse_versioned("a table-table join", other)
        return join_dispatch(self, other, args, foreign_key_extractor, joiner, table_joined, name, materialized,
                             "inner")

    def left_join(self, other: KTable, *args: Callable[..., Any],
                  foreign_key_extractor: Callable[..., Any] | None = None, joiner: Callable[..., Any] | None = None,
                  table_joined: TableJoined | None = None, name: NameArg = None,
                  materialized: Materialized | None = None) -> KTable:
        """Like `join`, but every key of this table has a result: ``joiner(value, None)`` while
        the other table has no value for it (for a foreign-key join: no row for its foreign key,
        or the foreign key is ``None``)."""
        self._refuse_versioned("a table-table join", other)
        return join_dispatch(self, other, args, foreign_key_extractor, joiner, table_joined, name, materialized,
                             "left")

    def outer_join(self, other: KTable, joiner: Callable[[Any, Any], Any] = REQUIRED, *, name: NameArg = None,
                   materialized: Materialized | None = None) -> KTable:
        """Like `join`, but every key of either table has a result, the missing side ``None``."""
        self._refuse_versioned("a table-table join", other)
        return table_join(self, other, joiner, name, materialized, "outer")
