"""What IR nodes describe themselves into (`DescriptionBuilder`): Kafka Streams' description
nodes and their edges; and what `streamsdsl.ir.topology.Topology.describe` returns
(`TopologyDescription`): the sub-topologies as data, rendered as Kafka's text or as a Mermaid
flowchart (`TopologyDescription.to_mermaid`)."""

from __future__ import annotations

from typing import Iterable

import attrs

from streamsdsl.errors import TopologyError

__all__ = ["DescribedNode", "DescriptionBuilder", "Subtopology", "TopologyDescription", "java_hash_set_order"]


def java_hash_set_order(names: tuple[str, ...], *, copied: bool = False) -> tuple[str, ...]:
    """``names`` in the iteration order of a Java ``HashSet`` built from them in this order (Kafka
    Streams' describe() lists a processor's stores from one, and a source's topics from a copy,
    ``new HashSet<>(topics)``, when ``copied``): by bucket of the spread ``String.hashCode``, then
    insertion order. The table has 16 buckets, doubled whenever it holds more than 3/4 of that
    (a copy is sized for its collection up front)."""
    buckets = 16
    while len(names) > buckets * 3 // 4 or (copied and int(len(names) / 0.75) + 1 > buckets):
        buckets *= 2

    def bucket(s: str) -> int:
        h = 0
        for unit in s.encode("utf-16-be").hex(" ", 2).split():
            h = (31 * h + int(unit, 16)) & 0xFFFFFFFF
        return (h ^ (h >> 16)) & (buckets - 1)

    return tuple(sorted(names, key=bucket))


@attrs.frozen
class _DNode:
    """A node as Kafka Streams' TopologyDescription shows it."""

    name: str
    kind: str  # Source | Processor | Sink
    #: A source's topics, a sink's one topic; a processor's stores.
    names: tuple[str, ...]
    successors: tuple[str, ...]
    predecessors: tuple[str, ...]
    #: List the predecessors in the order given (Kafka sorts them by sub-tree size *when linked*,
    #: which puts a join's JOINTHIS before JOINOTHER at its merge node).
    predecessors_in_order: bool = False
    #: A source's topic pattern (then ``names`` is empty).
    pattern: str | None = None
    #: A node of a global store (its source and its processor), a sub-topology of its own.
    global_store: bool = False

    @property
    def detail(self) -> str:
        """``topics: [a, b]`` / ``topics: orders-.*`` / ``stores: [s]`` / ``topic: t``, as Kafka prints it."""
        return _detail(self.kind, self.names, self.pattern)


def _detail(kind: str, names: tuple[str, ...], pattern: str | None = None) -> str:
    if pattern is not None:  # Kafka prints Pattern.toString(), without brackets
        return f"topics: {pattern}"
    if kind == "Source":
        return f"topics: [{', '.join(names)}]"
    if kind == "Sink":
        return f"topic: {names[0]}"
    return f"stores: [{', '.join(names)}]"


class DescriptionBuilder:
    """What IR nodes describe themselves into: Kafka Streams' description nodes and their edges.

    Mirrors the ``InternalTopologyBuilder`` calls a Kafka ``GraphNode`` makes: ``add_source``,
    ``add_processor`` and ``add_sink``, each naming its predecessors (description names).
    """

    def __init__(self) -> None:
        self._entries: dict[str, tuple[str, tuple[str, ...]]] = {}  # name -> (kind, names), in order
        self._succ: dict[str, list[str]] = {}
        self._pred: dict[str, list[str]] = {}
        self._in_order: set[str] = set()
        self._patterns: dict[str, str] = {}
        self._global: set[str] = set()

    def _add(self, name: str, kind: str, names: Iterable[str], predecessors: Iterable[str]) -> None:
        if name in self._entries:
            raise TopologyError(f"Two description nodes are named {name!r}; processor names must be unique.")
        self._entries[name] = (kind, tuple(names))
        self._succ[name] = []
        self._pred[name] = []
        for p in predecessors:
            self._succ[p].append(name)
            self._pred[name].append(p)

    def add_source(self, name: str, topics: Iterable[str], *, pattern: str | None = None) -> None:
        """A source reading ``topics`` (listed as Kafka lists them: from a Java ``HashSet``), or
        the topics ``pattern`` matches (``topics`` empty)."""
        self._add(name, "Source", java_hash_set_order(tuple(topics), copied=True), ())
        if pattern is not None:
            self._patterns[name] = pattern

    def add_processor(self, name: str, stores: Iterable[str], predecessors: Iterable[str], *,
                      predecessors_in_order: bool = False) -> None:
        """A processor connected to ``stores``, fed by ``predecessors`` (listed in that order
        with ``predecessors_in_order``, else Kafka's sub-tree size order)."""
        self._add(name, "Processor", stores, predecessors)
        if predecessors_in_order:
            self._in_order.add(name)

    def add_global_store(self, source: str, topic: str, processor: str, store: str) -> None:
        """A global store (Kafka Streams' ``addGlobalStore``): ``source`` reading ``topic``, feeding
        ``processor``, which keeps ``store``; ``describe()`` shows them as a sub-topology of their
        own "for global store (will not generate tasks)"."""
        self.add_source(source, (topic,))
        self.add_processor(processor, (store,), (source,))
        self._global.update((source, processor))

    def add_sink(self, name: str, topic: str, predecessors: Iterable[str]) -> None:
        """A sink writing ``topic``, fed by ``predecessors``."""
        self._add(name, "Sink", (topic,), predecessors)

    def build(self) -> list[_DNode]:
        """The description nodes, in the order they were added."""
        return [
            _DNode(name, kind, names, tuple(self._succ[name]), tuple(self._pred[name]), name in self._in_order,
                   self._patterns.get(name), name in self._global)
            for name, (kind, names) in self._entries.items()
        ]


@attrs.frozen
class DescribedNode:
    """One node of a `Subtopology`: a source, a processor or a sink, as Kafka Streams'
    ``TopologyDescription.Node`` shows it.

    ``topics`` are what a source reads or the one topic a sink writes (empty for a processor);
    ``pattern`` the topic pattern a source reads instead (Kafka's ``Source.topicPattern()``);
    ``stores`` the state stores a processor is connected to. ``successors`` and
    ``predecessors`` are node names in the order ``describe()`` lists them.
    """

    name: str
    kind: str
    topics: tuple[str, ...]
    stores: tuple[str, ...]
    successors: tuple[str, ...]
    predecessors: tuple[str, ...]
    pattern: str | None = None

    def __str__(self) -> str:
        detail = _detail(self.kind, self.stores if self.kind == "Processor" else self.topics, self.pattern)
        succ = f"\n      --> {', '.join(self.successors) or 'none'}"
        pred = f"\n      <-- {', '.join(self.predecessors) or 'none'}"
        return f"{self.kind}: {self.name} ({detail})" + ("" if self.kind == "Sink" else succ) + (
            "" if self.kind == "Source" else pred
        )


@attrs.frozen
class Subtopology:
    """Nodes connected by edges or by a shared store, in ``describe()`` order; ``global_store``:
    a global table's source and processor (Kafka's ``GlobalStore`` description: no tasks)."""

    id: int
    nodes: tuple[DescribedNode, ...]
    global_store: bool = False

    @property
    def title(self) -> str:
        """``Sub-topology: 1`` or ``Sub-topology: 1 for global store (will not generate tasks)``."""
        return f"Sub-topology: {self.id}" + (" for global store (will not generate tasks)" if self.global_store else "")


class TopologyDescription(str):
    """What `Topology.describe` returns: the text of Kafka Streams'
    ``Topology.describe().toString()`` (this object *is* that string) and the description as
    data (`subtopologies`, `repartition_topics`), which `to_mermaid` draws.

    Examples
    --------
    >>> from streamsdsl import StreamsBuilder
    >>> b = StreamsBuilder()
    >>> b.stream("in").group_by(lambda k, v: v).count().to_stream().to("out")
    >>> d = b.build().describe()
    >>> [len(s.nodes) for s in d.subtopologies], d.repartition_topics
    ([4, 4], ('KSTREAM-AGGREGATE-STATE-STORE-0000000002-repartition',))
    """

    subtopologies: tuple[Subtopology, ...]
    repartition_topics: tuple[str, ...]

    def __new__(cls, subtopologies: Iterable[Subtopology], repartition_topics: Iterable[str] = ()
                ) -> TopologyDescription:
        subs = tuple(subtopologies)
        out = ["Topologies:\n "]
        for sub in subs:
            out.append(f"  {sub.title}\n")
            out.extend(f"    {node}\n" for node in sub.nodes)
            if not sub.global_store:  # Kafka's GlobalStore.toString ends without the blank line
                out.append("\n")
        self = super().__new__(cls, "".join(out))
        self.subtopologies = subs
        self.repartition_topics = tuple(repartition_topics)
        return self

    def __reduce__(self) -> tuple[object, ...]:
        return (TopologyDescription, (self.subtopologies, self.repartition_topics))

    def to_mermaid(self) -> str:
        """The topology as a Mermaid ``flowchart``: one box per sub-topology holding its
        sources, processors and sinks (rounded: sources and sinks) and its state stores
        (cylinders, dotted lines to the processors using them); topics outside the boxes
        (parallelograms; a repartition topic is a hexagon linking two sub-topologies).

        Deterministic: node ids (``n0``, ``t0``, ``s0``...) are numbered in ``describe()``
        order, topics and stores by first appearance.

        Examples
        --------
        >>> from streamsdsl import StreamsBuilder
        >>> b = StreamsBuilder()
        >>> b.stream("in").filter(lambda k, v: v).to("out")
        >>> print(b.build().describe().to_mermaid())
        flowchart TB
            subgraph sub0["Sub-topology: 0"]
                n0(["KSTREAM-SOURCE-0000000000"])
                n1["KSTREAM-FILTER-0000000001"]
                n2(["KSTREAM-SINK-0000000002"])
            end
            t0[/"in"/]
            t1[/"out"/]
            t0 --> n0
            n0 --> n1
            n1 --> n2
            n2 --> t1
            classDef topic fill:#e8f0fe,stroke:#4063d8
            class t0,t1 topic
        """
        ids = {n.name: f"n{i}" for i, n in enumerate(n for s in self.subtopologies for n in s.nodes)}
        topics: dict[str, str] = {}
        stores: dict[str, str] = {}
        for sub in self.subtopologies:
            for node in sub.nodes:
                for t in _read_topics(node):
                    topics.setdefault(t, f"t{len(topics)}")
                for st in node.stores:
                    stores.setdefault(st, f"s{len(stores)}")
        lines = ["flowchart TB"]
        seen_stores: set[str] = set()
        for sub in self.subtopologies:
            lines.append(f'    subgraph sub{sub.id}["{_mermaid_text(sub.title)}"]')
            for node in sub.nodes:
                label = _mermaid_text(node.name)
                shape = f'["{label}"]' if node.kind == "Processor" else f'(["{label}"])'
                lines.append(f"        {ids[node.name]}{shape}")
            for node in sub.nodes:
                for st in node.stores:
                    if st not in seen_stores:
                        seen_stores.add(st)
                        lines.append(f'        {stores[st]}[("{_mermaid_text(st)}")]')
            lines.append("    end")
        for t, tid in topics.items():
            shape = '{{"%s"}}' if t in self.repartition_topics else '[/"%s"/]'
            lines.append(f"    {tid}{shape % _mermaid_text(t)}")
        for sub in self.subtopologies:
            for node in sub.nodes:
                nid = ids[node.name]
                if node.kind == "Source":
                    lines.extend(f"    {topics[t]} --> {nid}" for t in _read_topics(node))
                lines.extend(f"    {nid} --> {ids[s]}" for s in node.successors)
                if node.kind == "Sink":
                    lines.append(f"    {nid} --> {topics[node.topics[0]]}")
                lines.extend(f"    {nid} -.- {stores[st]}" for st in node.stores)
        plain = [tid for t, tid in topics.items() if t not in self.repartition_topics]
        internal = [tid for t, tid in topics.items() if t in self.repartition_topics]
        for cls, members, style in (
            ("topic", plain, "fill:#e8f0fe,stroke:#4063d8"),
            ("repartition", internal, "fill:#fff4e0,stroke:#c77c00"),
            ("store", list(stores.values()), "fill:#eaf6ea,stroke:#2e7d32"),
        ):
            if members:
                lines.append(f"    classDef {cls} {style}")
                lines.append(f"    class {','.join(members)} {cls}")
        return "\n".join(lines)


def _read_topics(node: DescribedNode) -> tuple[str, ...]:
    """A node's topics in a drawing: a source's pattern is drawn as one topic."""
    return node.topics if node.pattern is None else (node.pattern,)


def _mermaid_text(name: str) -> str:
    """``name`` inside a double-quoted Mermaid label (quotes and ``#`` as entity codes)."""
    return name.replace("#", "#35;").replace('"', "#quot;")
