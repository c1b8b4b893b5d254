"""The immutable `Topology` and its Kafka-Streams-style ``describe()`` (pure Python)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterable

import attrs

from streamsdsl.ir import nodes as ir
from streamsdsl.errors import TopologyError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["Topology"]


@attrs.frozen
class _DNode:
    """A node as Kafka Streams' TopologyDescription shows it."""

    name: str
    kind: str  # Source | Processor | Sink
    detail: str  # topics / stores / topic
    successors: tuple[str, ...]
    predecessors: tuple[str, ...]


@attrs.frozen
class Topology:
    """An immutable DAG of IR nodes, in the order they were added.

    Build one with `StreamsBuilder`; print it with `describe`; run
    it with `TopologyTestDriver` (tests) or on a Kafka-backed streaming query.
    """

    nodes: tuple[ir.Node, ...]
    _by_name: dict[str, ir.Node] = attrs.field(init=False, repr=False, eq=False)
    _children: dict[str, tuple[str, ...]] = attrs.field(init=False, repr=False, eq=False)

    def __attrs_post_init__(self) -> None:
        by_name = {n.name: n for n in self.nodes}
        children: dict[str, list[str]] = {n.name: [] for n in self.nodes}
        for n in self.nodes:
            for p in n.parents:
                if p not in by_name:
                    raise TopologyError(f"Node {n.name} refers to unknown parent {p}.")
                children[p].append(n.name)
        object.__setattr__(self, "_by_name", by_name)
        object.__setattr__(self, "_children", {k: tuple(v) for k, v in children.items()})

    # -- graph queries ---------------------------------------------------------------------
    def node(self, name: str) -> ir.Node:
        return self._by_name[name]

    def children(self, name: str) -> tuple[str, ...]:
        return self._children[name]

    @property
    def sources(self) -> tuple[ir.SourceNode, ...]:
        return tuple(n for n in self.nodes if isinstance(n, ir.SourceNode))

    @property
    def sinks(self) -> tuple[ir.SinkNode, ...]:
        return tuple(n for n in self.nodes if isinstance(n, ir.SinkNode))

    @property
    def source_topics(self) -> tuple[str, ...]:
        return tuple(t for s in self.sources for t in s.topics)

    @property
    def sink_topics(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(s.topic for s in self.sinks))

    @property
    def store_names(self) -> tuple[str, ...]:
        return tuple(s for n in self.nodes for s in n.stores)

    def topological_order(self) -> tuple[ir.Node, ...]:
        """Nodes ordered parents-first (insertion order already is; checked here)."""
        seen: set[str] = set()
        for n in self.nodes:
            if any(p not in seen for p in n.parents):
                raise TopologyError(f"Node {n.name} appears before one of its parents.")
            seen.add(n.name)
        return self.nodes

    # -- describe ----------------------------------------------------------------------------
    def _description_nodes(self) -> list[_DNode]:
        """Expand IR nodes into Kafka Streams' description nodes (repartitions become 3 nodes)."""
        succ: dict[str, list[str]] = {}
        pred: dict[str, list[str]] = {}
        kinds: dict[str, tuple[str, str]] = {}
        order: list[str] = []

        def add(name: str, kind: str, detail: str) -> None:
            kinds[name] = (kind, detail)
            succ.setdefault(name, [])
            pred.setdefault(name, [])
            order.append(name)

        def link(a: str, b: str) -> None:
            succ[a].append(b)
            pred[b].append(a)

        # The description name a child edge leaves from / arrives at, per IR node.
        out_name: dict[str, str] = {}
        for n in self.nodes:
            if isinstance(n, ir.SourceNode):
                add(n.name, "Source", f"topics: [{', '.join(n.topics)}]")
                out_name[n.name] = n.name
            elif isinstance(n, ir.SinkNode):
                add(n.name, "Sink", f"topic: {n.topic}")
                link(out_name[n.parents[0]], n.name)
            elif isinstance(n, ir.RepartitionNode):
                f, s, src = n.filter_name, n.sink_name, n.name
                add(f, "Processor", "stores: []")
                add(s, "Sink", f"topic: {n.topic}")
                add(src, "Source", f"topics: [{n.topic}]")
                link(out_name[n.parents[0]], f)
                link(f, s)
                out_name[n.name] = src
            elif isinstance(n, ir.CogroupAggregateNode):
                for agg_name, p in zip(n.agg_names, n.parents):
                    add(agg_name, "Processor", f"stores: [{n.store}]")
                    link(out_name[p], agg_name)
                add(n.name, "Processor", "stores: []")
                for agg_name in n.agg_names:
                    link(agg_name, n.name)
                out_name[n.name] = n.name
            else:
                add(n.name, "Processor", f"stores: [{', '.join(n.stores)}]")
                for p in n.parents:
                    link(out_name[p], n.name)
                out_name[n.name] = n.name
        return [
            _DNode(name, kinds[name][0], kinds[name][1], tuple(succ[name]), tuple(pred[name])) for name in order
        ]

    def describe(self) -> str:
        """Render the topology exactly as Kafka Streams' ``Topology.describe().toString()``.

        Nodes connected by edges or by a shared state store form one sub-topology; a
        repartition topic starts a new one. Within a sub-topology nodes are ordered as Kafka
        Streams orders them: by the size of the sub-tree below them (largest first), then name.
        """
        dnodes = self._description_nodes()
        by = {d.name: d for d in dnodes}
        index = {d.name: i for i, d in enumerate(dnodes)}

        # union-find over edges and shared stores
        parent = {d.name: d.name for d in dnodes}

        def find(x: str) -> str:
            while parent[x] != x:
                parent[x] = parent[parent[x]]
                x = parent[x]
            return x

        def union(a: str, b: str) -> None:
            ra, rb = find(a), find(b)
            if ra != rb:
                if index[ra] < index[rb]:
                    parent[rb] = ra
                else:
                    parent[ra] = rb

        for d in dnodes:
            for s in d.successors:
                union(d.name, s)
        store_owner: dict[str, str] = {}
        for n in self.nodes:
            for st in n.stores:
                if st in store_owner:
                    union(store_owner[st], n.name)
                store_owner.setdefault(st, n.name)

        size_cache: dict[str, int] = {}

        def size(name: str) -> int:
            if name not in size_cache:
                size_cache[name] = 1 + sum(size(s) for s in by[name].successors)
            return size_cache[name]

        def sort_key(name: str) -> tuple[int, str]:
            return (-size(name), name)

        groups: dict[str, list[str]] = {}
        for d in dnodes:
            groups.setdefault(find(d.name), []).append(d.name)
        ordered_groups = sorted(groups.values(), key=lambda g: min(index[x] for x in g))

        def names(xs: Iterable[str]) -> str:
            xs = sorted(xs, key=sort_key)
            return ", ".join(xs) if xs else "none"

        out = ["Topologies:\n "]
        for gid, members in enumerate(ordered_groups):
            out.append(f"  Sub-topology: {gid}\n")
            for name in sorted(members, key=sort_key):
                d = by[name]
                if d.kind == "Source":
                    text = f"Source: {d.name} ({d.detail})\n      --> {names(d.successors)}"
                elif d.kind == "Sink":
                    text = f"Sink: {d.name} ({d.detail})\n      <-- {names(d.predecessors)}"
                else:
                    text = (
                        f"Processor: {d.name} ({d.detail})\n      --> {names(d.successors)}"
                        f"\n      <-- {names(d.predecessors)}"
                    )
                out.append(f"    {text}\n")
            out.append("\n")
        return "".join(out)

    def __str__(self) -> str:
        return self.describe()

    # -- Spark ---------------------------------------------------------------------------------
    def explain(self, spark: SparkSession | None = None, *, mode: str = "formatted") -> str:
        """The Spark plan(s) this topology compiles to, one per sink, as a string (also printed).

        Sources are bound to empty in-memory DataFrames of the record schema, so no broker is
        needed; ``mode`` is passed to ``DataFrame.explain`` ("simple", "extended", "formatted").
        """
        from streamsdsl.compiler import explain_topology

        text = explain_topology(self, spark, mode=mode)
        print(text)
        return text

    def _repr_args(self) -> Any:  # pragma: no cover - debugging aid
        return [n.name for n in self.nodes]
