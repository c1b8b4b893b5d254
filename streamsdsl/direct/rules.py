"""Every IR node type's step rule in the direct engine, in one table, as the compiler's
(`streamsdsl.compiler.rules.RULES`): `streamsdsl.direct.engine.Run` dispatches on it. A rule is
``(node, parents, run) -> Step``, ``parents`` the encodings (`Typed`) of the node's parents in
order; a node type without a row here has no step, and the architecture test says so."""

from __future__ import annotations

from typing import Callable

from streamsdsl import ir
from streamsdsl.direct import processors, stateful, steps
from streamsdsl.direct.steps import Step

__all__ = ["RULES", "rule_for"]

#: node type -> rule ``(node, parents, run) -> Step``.
RULES: dict[type[ir.Node], Callable[..., Step]] = {
    ir.SourceNode: steps._source,
    ir.SinkNode: steps._sink,
    ir.FilterNode: steps._filter,
    ir.MapValuesNode: steps._map_values,
    ir.MapNode: steps._map,
    ir.FlatMapNode: steps._flat_map,
    ir.FlatMapValuesNode: steps._flat_map_values,
    ir.SelectKeyNode: steps._select_key,
    ir.PeekNode: steps._peek,
    ir.ForeachNode: steps._foreach,
    ir.MergeNode: steps._merge,
    ir.RepartitionNode: steps._repartition,
    ir.TableToStreamNode: steps._table_to_stream,
    ir.TableFilterNode: steps._table_filter,
    ir.TableMapValuesNode: steps._table_map_values,
    ir.BranchNode: steps._pass,
    ir.BranchChildNode: steps._branch_child,
    ir.TableSourceNode: stateful._table,
    ir.StreamToTableNode: stateful._table,
    ir.StreamTableJoinNode: stateful._stream_table_join,
    ir.GlobalTableSourceNode: stateful._table,
    ir.GlobalTableJoinNode: stateful._global_table_join,
    ir.AggregateNode: stateful._aggregate,
    ir.SessionAggregateNode: stateful._aggregate,
    ir.TimeWindowAggregateNode: stateful._aggregate,
    ir.CogroupAggregateNode: stateful._cogroup,
    ir.TableGroupByNode: stateful._table_group_by,
    ir.GroupedTableAggregateNode: stateful._grouped_aggregate,
    ir.StreamStreamJoinNode: stateful._stream_stream_join,
    ir.TableTableJoinNode: stateful._table_table_join,
    ir.ForeignKeyJoinNode: stateful._fk_join,
    ir.SuppressNode: stateful._suppress,
    ir.ProcessNode: processors._process,
}


def rule_for(node_type: type[ir.Node]) -> Callable[..., Step] | None:
    """The rule of ``node_type`` (None: the direct engine has no step for it). Exact types only:
    a subclass of a node type is a node of its own, which needs a rule of its own."""
    return RULES.get(node_type)
