"""Every IR node type's lowering rule, in one table: the `Lowering` of each plan mode dispatches
on it (`streamsdsl.compiler.modes`). No rule is registered by an import's side effect: a node
type without a row here has no rule, and the architecture test says so."""

from __future__ import annotations

from typing import Any, Callable

from streamsdsl import ir
from streamsdsl.compiler import aggregations, global_tables, grouped_tables, joins, lowering, stream_joins, suppress
from streamsdsl.compiler import table_joins
from streamsdsl.compiler import fk_joins, user_processors

__all__ = ["RULES"]

#: node type -> rule ``(lowering, node) -> Frame``.
RULES: dict[type[ir.Node], Callable[..., Any]] = {
    ir.SourceNode: lowering._source,
    ir.SinkNode: lowering._sink,
    ir.FilterNode: lowering._filter,
    ir.MapValuesNode: lowering._map_values,
    ir.MapNode: lowering._map,
    ir.FlatMapNode: lowering._flat_map,
    ir.FlatMapValuesNode: lowering._flat_map_values,
    ir.SelectKeyNode: lowering._select_key,
    ir.PeekNode: lowering._peek,
    ir.ForeachNode: lowering._foreach,
    ir.MergeNode: lowering._merge,
    ir.RepartitionNode: lowering._repartition,
    ir.TableToStreamNode: lowering._table_to_stream,
    ir.TableFilterNode: lowering._table_filter,
    ir.TableMapValuesNode: lowering._table_map_values,
    ir.TableSourceNode: joins._table_source,
    ir.StreamToTableNode: joins._stream_to_table,
    ir.StreamTableJoinNode: joins._stream_table_join,
    ir.GlobalTableSourceNode: global_tables._global_table_source,
    ir.GlobalTableJoinNode: global_tables._global_table_join,
    ir.BranchNode: joins._branch,
    ir.BranchChildNode: joins._branch_child,
    ir.AggregateNode: aggregations._aggregate,
    ir.SessionAggregateNode: aggregations._aggregate,
    ir.TimeWindowAggregateNode: aggregations._aggregate,
    ir.CogroupAggregateNode: aggregations._cogroup,
    ir.TableGroupByNode: grouped_tables._table_group_by,
    ir.GroupedTableAggregateNode: grouped_tables._grouped_table_aggregate,
    ir.StreamStreamJoinNode: stream_joins._stream_stream_join,
    ir.TableTableJoinNode: table_joins._table_table_join,
    ir.ForeignKeyJoinNode: fk_joins._fk_join,
    ir.SuppressNode: suppress._suppress,
    ir.ProcessNode: user_processors._process,
}
