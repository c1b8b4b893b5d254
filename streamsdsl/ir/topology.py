"""The immutable `Topology` (a DAG of IR nodes) and its Kafka-Streams-style ``describe()``.

Pure Python: this module knows only the IR. Each node writes its own part of the description
into a `DescriptionBuilder` (`Node.describe_into`, Kafka's ``GraphNode.writeToTopology``);
`Topology.describe` groups the description nodes into sub-topologies and renders them exactly
as Kafka Streams' ``TopologyDescription`` does. Compiling and running a topology belong to the
compiler and runtime layers.
"""

from __future__ import annotations

import re

import attrs

from streamsdsl.errors import NotYetAttributes, TopologyError
from streamsdsl.ir import nodes as ir
from streamsdsl.ir.fk_join import ForeignKeyJoinNode
from streamsdsl.ir.processors import ProcessNode
from streamsdsl.records import GENERATED_STORE_NAME
from streamsdsl.state.builders import StoreBuilder
from streamsdsl.ir.description import DescribedNode, DescriptionBuilder, Subtopology, TopologyDescription, _DNode

__all__ = ["DescriptionBuilder", "Topology", "TopologyDescription"]


def _is_node_tuple(inst: Topology, attribute: attrs.Attribute[tuple[ir.Node, ...]], value: object) -> None:
    if not isinstance(value, tuple) or not all(isinstance(n, ir.Node) for n in value):
        raise TopologyError(f"'nodes' must be a tuple of IR nodes (got {type(value).__name__}).")


def _is_store_tuple(inst: Topology, attribute: attrs.Attribute[tuple[StoreBuilder, ...]], value: object) -> None:
    if not isinstance(value, tuple) or not all(isinstance(b, StoreBuilder) for b in value):
        raise TopologyError(f"'state_stores' must be a tuple of StoreBuilders (got {value!r}).")
    names = [b.name for b in value]
    if len(set(names)) != len(names):
        raise TopologyError(f"'state_stores' must have distinct names (got {names}).")


@attrs.frozen
class Topology(NotYetAttributes):
    """An immutable DAG of IR nodes, parents before children, in the order they were added.

    Build one with `StreamsBuilder`; print it with `describe`; run it with
    ``TopologyTestDriver`` (tests) or ``KafkaStreams`` (a Kafka-backed streaming query).
    """

    nodes: tuple[ir.Node, ...] = attrs.field(validator=_is_node_tuple)
    #: The stores added for processors (``StreamsBuilder.add_state_store``), in the order added.
    state_stores: tuple[StoreBuilder, ...] = attrs.field(default=(), validator=_is_store_tuple)
    _by_name: dict[str, ir.Node] = attrs.field(init=False, repr=False, eq=False)
    _children: dict[str, tuple[str, ...]] = attrs.field(init=False, repr=False, eq=False)

    def __attrs_post_init__(self) -> None:
        by_name: dict[str, ir.Node] = {}
        children: dict[str, list[str]] = {}
        for n in self.nodes:
            if n.name in by_name:
                raise TopologyError(f"Two nodes are named {n.name!r}; node names must be unique.")
            for p in n.parents:
                if p not in by_name:
                    known = any(m.name == p for m in self.nodes)
                    raise TopologyError(
                        f"Node {n.name} appears before one of its parents." if known
                        else f"Node {n.name} refers to unknown parent {p}."
                    )
                children[p].append(n.name)
            by_name[n.name] = n
            children[n.name] = []
        object.__setattr__(self, "_by_name", by_name)
        object.__setattr__(self, "_children", {k: tuple(v) for k, v in children.items()})

    def with_idle_close(self, idle_close_ms: int | None) -> Topology:
        """This topology with ``idle_close_ms`` as the idle close of every aggregation that emits
        on window close and sets none itself (the application's and the test driver's
        ``streamsdsl.window.idle.close.ms``; ``None``: unchanged)."""
        if idle_close_ms is None:
            return self
        nodes = tuple(attrs.evolve(n, emit=emit.with_default_idle_close(idle_close_ms))  # type: ignore[misc]
                      if (emit := getattr(n, "emit", None)) is not None and emit.emits_on_close else n
                      for n in self.nodes)
        return attrs.evolve(self, nodes=nodes)

    @property
    def idle_closes(self) -> dict[str, int]:
        """The idle close (ms) of each aggregation of this topology that has one
        (`with_idle_close`), by node name, in topological order."""
        return {n.name: ms for n in self.nodes
                if (ms := getattr(getattr(n, "emit", None), "idle_close_ms", None)) is not None}

    @property
    def closes_idle(self) -> bool:
        """Whether an aggregation of this topology has idle close (`with_idle_close`)."""
        return bool(self.idle_closes)

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
        """The topics the sources name (not those a source's pattern matches: see `sources_reading`)."""
        return tuple(t for s in self.sources for t in s.topics)

    @property
    def source_patterns(self) -> tuple[re.Pattern[str], ...]:
        """The topic patterns of the sources that read one (``builder.stream(re.compile(...))``)."""
        return tuple(s.pattern for s in self.sources if s.pattern is not None)

    def sources_reading(self, topic: str) -> tuple[ir.SourceNode, ...]:
        """The sources that read ``topic``: the one naming it, or those whose pattern matches it
        (more than one only for two patterns matching it, which Kafka Streams refuses at run time)."""
        return tuple(s for s in self.sources if s.reads(topic))

    def upstream_topics(self, name: str) -> tuple[str, ...]:
        """The source topics whose records reach node ``name`` (itself included if a source)."""
        seen: set[str] = set()
        todo = [name]
        topics: list[str] = []
        while todo:
            node = self._by_name[todo.pop()]
            if node.name in seen:
                continue
            seen.add(node.name)
            if isinstance(node, ir.SourceNode):
                topics.extend(node.topics)
            todo.extend(node.parents)
        return tuple(t for t in self.source_topics if t in topics)

    @property
    def sink_topics(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(s.topic for s in self.sinks))

    @property
    def store_names(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys([*(s for n in self.nodes for s in n.stores), *(b.name for b in self.state_stores)]))

    def ancestors(self, *names: str) -> set[str]:
        """``names`` and every node they depend on (their parents, at any depth)."""
        seen: set[str] = set()
        todo = list(names)
        while todo:
            name = todo.pop()
            if name not in seen:
                seen.add(name)
                todo.extend(self.node(name).parents)
        return seen

    def runs_unread(self) -> tuple[str, ...]:
        """The nodes that run even when no sink reads them, as in Kafka Streams: a user processor
        (for its stores and punctuators), a ``foreach`` / ``print`` (for its action) and a node
        holding a named store (``Materialized.as_``: a queryable store; a generated store name is
        not queryable)."""
        out = []
        for n in self.nodes:
            own = (n.store if isinstance(n, (ir.AggregateNode, ir.CogroupAggregateNode, ir.GroupedTableAggregateNode,
                                             ir.TableTableJoinNode))
                   else n.store if isinstance(n, (ir.TableSourceNode, ir.StreamToTableNode, ForeignKeyJoinNode))
                   and n.materialized
                   else None)
            named = own is not None and not GENERATED_STORE_NAME.search(own)
            if named or isinstance(n, (ProcessNode, ir.ForeachNode)):
                out.append(n.name)
        return tuple(out)

    def state_store(self, name: str) -> StoreBuilder | None:
        """The store added for processors under ``name`` (None: no such store)."""
        return next((b for b in self.state_stores if b.name == name), None)

    def topological_order(self) -> tuple[ir.Node, ...]:
        """Nodes ordered parents-first (the construction order, checked when the topology is built)."""
        return self.nodes

    # -- describe ----------------------------------------------------------------------------
    def _description_nodes(self) -> list[_DNode]:
        """Expand IR nodes into Kafka Streams' description nodes (a repartition becomes 3 nodes)."""
        builder = DescriptionBuilder()
        for n in self.nodes:
            n.describe_into(builder)
        return builder.build()

    def describe(self) -> TopologyDescription:
        """The topology as Kafka Streams' ``Topology.describe()`` shows it: a
        `TopologyDescription`, which is the text of ``Topology.describe().toString()``, exactly,
        and holds the sub-topologies as data (``to_mermaid()`` draws them).

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
        for d in dnodes:  # the processors connected to one store (Kafka's ``connectProcessorAndStateStores``)
            for st in d.names if d.kind == "Processor" else ():
                if st in store_owner:
                    union(store_owner[st], d.name)
                store_owner.setdefault(st, d.name)

        groups: dict[str, list[str]] = {}
        for d in dnodes:
            groups.setdefault(find(d.name), []).append(d.name)
        ordered_groups = sorted(groups.values(), key=lambda g: min(index[x] for x in g))
        size: dict[str, int] = {}
        linked: dict[str, tuple[list[str], list[str]]] = {}
        for members in ordered_groups:
            _link(by, members, size, linked)

        def sort_key(name: str) -> tuple[int, str]:
            return (-size[name], name)

        def described(name: str) -> DescribedNode:
            d = by[name]
            successors, predecessors = linked[name]
            return DescribedNode(
                name=d.name,
                kind=d.kind,
                topics=() if d.kind == "Processor" else d.names,
                stores=d.names if d.kind == "Processor" else (),
                successors=tuple(successors),
                predecessors=d.predecessors if d.predecessors_in_order else tuple(predecessors),
                pattern=d.pattern,
            )

        repartition = tuple(t for n in self.nodes for t in (
            (n.topic,) if isinstance(n, ir.RepartitionNode) else n.topics if isinstance(n, ForeignKeyJoinNode) else ()))
        return TopologyDescription(
            (
                Subtopology(gid, tuple(described(name) for name in sorted(members, key=sort_key)),
                            any(by[name].global_store for name in members))
                for gid, members in enumerate(ordered_groups)
            ),
            repartition,
        )

    def __str__(self) -> str:
        return str(self.describe())


def _java_string_hash(s: str) -> int:
    h = 0
    for unit in s.encode("utf-16-be").hex(" ", 2).split():
        h = (31 * h + int(unit, 16)) & 0xFFFFFFFF
    return h


def _java_hash_map_order(names: list[str]) -> list[str]:
    """``names`` in the iteration order of a Java ``HashMap`` they were put into in this order:
    by bucket of the spread ``String.hashCode`` (capacity 16, doubled past 3/4 full), then
    insertion order."""
    capacity = 16
    while len(names) > capacity * 3 // 4:
        capacity *= 2

    def bucket(name: str) -> int:
        h = _java_string_hash(name)
        return (h ^ (h >> 16)) & (capacity - 1)

    return sorted(names, key=bucket)


def _link(by: dict[str, _DNode], members: list[str], size: dict[str, int],
          linked: dict[str, tuple[list[str], list[str]]]) -> None:
    """Link one sub-topology's description nodes as Kafka Streams' ``describeSubtopology`` does:
    nodes in ``HashMap`` order, each connected to its predecessors in turn; successor and
    predecessor sets are ``TreeSet``s ordered by sub-tree size (largest first), then name, **as
    the sizes are when an element is inserted** (sizes grow as later nodes are linked, and the
    sets are not re-sorted). Fills ``size`` (final sub-tree sizes) and ``linked``."""
    for name in members:
        size[name] = 1
        linked[name] = ([], [])

    def insert(into: list[str], name: str) -> None:
        key = (-size[name], name)
        at = next((i for i, other in enumerate(into) if (-size[other], other) > key), len(into))
        into.insert(at, name)

    def grow(name: str, delta: int) -> None:
        size[name] += delta
        for p in linked[name][1]:
            grow(p, delta)

    for name in _java_hash_map_order(members):
        for p in by[name].predecessors:
            insert(linked[name][1], p)
            insert(linked[p][0], name)
            grow(p, size[name])
