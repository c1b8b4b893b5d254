"""The one serializer: a streamsdsl `Topology` (its IR) as the JSON spec the Kafka Streams
oracle (``oracle/java``) builds the same topology from.

A spec is ``{"nodes": [...]}``, the IR nodes in topological order, each a dict with ``type``,
``name``, ``parents`` and its fields; user functions are named by their entry in the menu
(`oracle.menu`), processors by theirs (`oracle.processors`). A topology with state stores added
by ``add_state_store`` has ``"stores"`` too: each store builder's name, kind, supplier, serdes and
options. The DSL's store names and serdes are left out: the oracle's Kafka Streams topology reads
string keys, holds a key a function made as JSON (``JsonKeySerde.java``, as streamsdsl does),
has one serde for string and long values (``ValueSerde.java``), and the comparison reads
records as values, not bytes.
"""

from __future__ import annotations

import functools
import re
from typing import Any

from streamsdsl import ir
from streamsdsl.ir.topology import Topology
from streamsdsl.values.joins import JoinWindows
from streamsdsl.values.windows import SessionWindows, SlidingWindows, TimeWindows

from oracle.menu import by_callable
from oracle.processors import MenuProcessor

__all__ = ["UnsupportedNodeError", "topology_spec"]


class UnsupportedNodeError(ValueError):
    """A node the oracle cannot build in Kafka Streams (no rule in `node_spec`)."""


def topology_spec(topology: Topology) -> dict[str, Any]:
    """The spec of ``topology``: every node, parents before children, and its state stores."""
    spec: dict[str, Any] = {"nodes": [_node(n) for n in topology.topological_order()]}
    if topology.state_stores:
        spec["stores"] = [_store(b) for b in topology.state_stores]
    return spec


def _serde(serde: Any) -> str:
    if serde is None or serde.name not in ("String", "Long"):
        raise UnsupportedNodeError(f"{serde!r}: the oracle's stores have String and Long serdes only.")
    return str(serde.name)


def _store(builder: Any) -> dict[str, Any]:
    """A store builder (`streamsdsl.state.StoreBuilder`) as the oracle's ``addStateStore`` reads it."""
    supplier = builder.supplier
    return {"name": builder.name, "kind": builder.kind, "persistent": supplier.persistent,
            "retention": getattr(supplier, "retention_period_ms", None),
            "window_size": getattr(supplier, "window_size_ms", None),
            "retain_duplicates": bool(getattr(supplier, "retain_duplicates", False)),
            "key_serde": _serde(builder.key_serde), "value_serde": _serde(builder.value_serde),
            "caching": builder.caching_enabled, "logging": builder.logging_enabled}


def _node(node: ir.Node) -> dict[str, Any]:
    return {"name": node.name, "parents": list(node.parents), **node_spec(node)}


def _fn(fn: ir.Fn | None) -> str | None:
    if fn is None:
        return None
    if not isinstance(fn, ir.UserFn):
        raise UnsupportedNodeError(f"{fn!r} is a pyspark Column: the oracle names Python functions of its menu only.")
    return by_callable(fn.fn).name


def _windows(windows: SessionWindows | TimeWindows | SlidingWindows | None) -> dict[str, Any] | None:
    if windows is None:
        return None
    if isinstance(windows, SessionWindows):
        return {"kind": "session", "gap": windows.inactivity_gap_ms, "grace": windows.grace_period_ms}
    if isinstance(windows, TimeWindows):
        return {"kind": "time", "size": windows.size_ms, "advance": windows.advance_ms,
                "grace": windows.grace_period_ms}
    return {"kind": "sliding", "difference": windows.time_difference_ms, "grace": windows.grace_period_ms}


def _join_windows(windows: JoinWindows) -> dict[str, int]:
    return {"before": windows.before_ms, "after": windows.after_ms, "grace": windows.grace_ms}


def _agg(agg: ir.AggSpec) -> dict[str, Any]:
    if isinstance(agg, ir.CountAgg):
        return {"kind": "count"}
    if isinstance(agg, ir.ReduceAgg):
        return {"kind": "reduce", "reducer": _fn(agg.reducer)}
    return {"kind": "aggregate", "initializer": _fn(agg.initializer), "aggregator": _fn(agg.aggregator),
            "merger": _fn(agg.merger)}


@functools.singledispatch
def node_spec(node: ir.Node) -> dict[str, Any]:
    """The fields of ``node`` in the spec (``type`` and what the oracle needs to build it)."""
    raise UnsupportedNodeError(f"The oracle has no rule for {type(node).__name__} ({node.name}).")


@node_spec.register
def _(node: ir.SourceNode) -> dict[str, Any]:
    if node.pattern is not None:  # Kafka Streams' stream(Pattern): Java compiles the same text
        return {"type": "source", "pattern": node.pattern.pattern}
    return {"type": "source", "topics": list(node.topics)}


@node_spec.register
def _(node: ir.TableSourceNode) -> dict[str, Any]:
    return {"type": "table_source", "topic": node.topics[0], "materialized": node.materialized,
            "history": node.history_retention_ms}


@node_spec.register
def _(node: ir.GlobalTableSourceNode) -> dict[str, Any]:
    return {"type": "global_table_source", "topic": node.topics[0]}


@node_spec.register
def _(node: ir.GlobalTableJoinNode) -> dict[str, Any]:
    return {"type": "global_table_join", "kind": node.kind, "key_selector": _fn(node.key_selector),
            "joiner": _fn(node.joiner)}


@node_spec.register
def _(node: ir.FilterNode) -> dict[str, Any]:
    return {"type": "filter", "predicate": _fn(node.predicate), "negate": node.negate}


#: The steps whose spec is their type and one function: node class → (type, the function's field).
_ONE_FUNCTION_STEPS: dict[type, tuple[str, str]] = {
    ir.MapValuesNode: ("map_values", "mapper"),
    ir.MapNode: ("map", "mapper"),
    ir.FlatMapNode: ("flat_map", "mapper"),
    ir.FlatMapValuesNode: ("flat_map_values", "mapper"),
    ir.SelectKeyNode: ("select_key", "selector"),
}


def _one_function_step(node: ir.Node) -> dict[str, Any]:
    kind, field = _ONE_FUNCTION_STEPS[type(node)]
    return {"type": kind, field: _fn(getattr(node, field))}


for _step in _ONE_FUNCTION_STEPS:
    node_spec.register(_step, _one_function_step)


@node_spec.register
def _(node: ir.MergeNode) -> dict[str, Any]:
    return {"type": "merge"}


@node_spec.register
def _(node: ir.RepartitionNode) -> dict[str, Any]:
    return {"type": "repartition", "topic": node.topic}


@node_spec.register
def _(node: ir.SinkNode) -> dict[str, Any]:
    return {"type": "sink", "topic": node.topic}


@node_spec.register
def _(node: ir.AggregateNode) -> dict[str, Any]:
    windows = getattr(node, "windows", None)
    emit = getattr(node, "emit", None)
    return {"type": "aggregate", "agg": _agg(node.agg), "windows": _windows(windows),
            "emit_on_close": bool(emit is not None and emit.emits_on_close)}


@node_spec.register
def _(node: ir.CogroupAggregateNode) -> dict[str, Any]:
    return {"type": "cogroup", "aggregators": [_fn(a) for a in node.aggregators],
            "initializer": _fn(node.initializer), "merger": _fn(node.merger), "windows": _windows(node.windows),
            "emit_on_close": node.emit.emits_on_close}


@node_spec.register
def _(node: ir.TableToStreamNode) -> dict[str, Any]:
    return {"type": "to_stream"}


@node_spec.register
def _(node: ir.TableFilterNode) -> dict[str, Any]:
    return {"type": "table_filter", "predicate": _fn(node.predicate), "negate": node.negate}


@node_spec.register
def _(node: ir.TableMapValuesNode) -> dict[str, Any]:
    return {"type": "table_map_values", "mapper": _fn(node.mapper)}


@node_spec.register
def _(node: ir.StreamToTableNode) -> dict[str, Any]:
    return {"type": "to_table", "materialized": node.materialized, "history": node.history_retention_ms}


@node_spec.register
def _(node: ir.StreamTableJoinNode) -> dict[str, Any]:
    return {"type": "stream_table_join", "joiner": _fn(node.joiner), "kind": node.kind, "grace": node.grace_ms}


@node_spec.register
def _(node: ir.StreamStreamJoinNode) -> dict[str, Any]:
    return {"type": "stream_stream_join", "joiner": _fn(node.joiner), "kind": node.kind,
            "windows": _join_windows(node.windows)}


@node_spec.register
def _(node: ir.TableTableJoinNode) -> dict[str, Any]:
    return {"type": "table_table_join", "joiner": _fn(node.joiner), "kind": node.kind,
            "materialized": node.store is not None}


@node_spec.register
def _(node: ir.ForeignKeyJoinNode) -> dict[str, Any]:
    return {"type": "fk_join", "extractor": _fn(node.extractor), "joiner": _fn(node.joiner), "kind": node.kind,
            "materialized": node.materialized}


@node_spec.register
def _(node: ir.BranchNode) -> dict[str, Any]:
    return {"type": "split"}


@node_spec.register
def _(node: ir.BranchChildNode) -> dict[str, Any]:
    return {"type": "branch", "predicate": None if node.default else _fn(node.predicates[-1]),
            "default": node.default}


@node_spec.register
def _(node: ir.TableGroupByNode) -> dict[str, Any]:
    return {"type": "table_group_by", "selector": _fn(node.selector)}


@node_spec.register
def _(node: ir.GroupedTableAggregateNode) -> dict[str, Any]:
    agg = node.agg
    return {"type": "table_aggregate", "kind": agg.kind, "initializer": _fn(agg.initializer),
            "adder": _fn(agg.adder), "subtractor": _fn(agg.subtractor)}


@node_spec.register
def _(node: ir.SuppressNode) -> dict[str, Any]:
    return {"type": "suppress", "mode": node.mode, "time_limit": node.time_limit}


#: The name Kafka Streams (and streamsdsl) give a processor the user did not name.
_DEFAULT_PROCESS_NAME = re.compile(r"KSTREAM-PROCESS(?:OR|VALUES)-\d{10}")


@node_spec.register
def _(node: ir.ProcessNode) -> dict[str, Any]:
    supplier = node.supplier.fn
    if not isinstance(supplier, MenuProcessor):
        raise UnsupportedNodeError(
            f"{node.name}'s supplier {supplier!r} is not a processor of the oracle's menu (oracle/processors.py): "
            "the oracle can only name processors that exist in both languages.")
    return {"type": "process", "values": node.fixed_key, "named": not _DEFAULT_PROCESS_NAME.fullmatch(node.name),
            "processor": supplier.name, "params": dict(supplier.params), "stores": list(node.store_names)}
