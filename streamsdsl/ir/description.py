"""What IR nodes describe themselves into (`DescriptionBuilder`): Kafka Streams' description
nodes and their edges, which `streamsdsl.ir.topology.Topology.describe` renders."""

from __future__ import annotations

from typing import Iterable

import attrs

from streamsdsl.errors import TopologyError

__all__ = ["DescriptionBuilder"]


@attrs.frozen
class _DNode:
    """A node as Kafka Streams' TopologyDescription shows it."""

    name: str
    kind: str  # Source | Processor | Sink
    detail: str  # topics / stores / topic
    successors: tuple[str, ...]
    predecessors: tuple[str, ...]
    #: List the predecessors in the order given (Kafka sorts them by sub-tree size *when linked*,
    #: which puts a join's JOINTHIS before JOINOTHER at its merge node).
    predecessors_in_order: bool = False


class DescriptionBuilder:
    """What IR nodes describe themselves into: Kafka Streams' description nodes and their edges.

    Mirrors the ``InternalTopologyBuilder`` calls a Kafka ``GraphNode`` makes: ``add_source``,
    ``add_processor`` and ``add_sink``, each naming its predecessors (description names).
    """

    def __init__(self) -> None:
        self._entries: dict[str, tuple[str, str]] = {}  # name -> (kind, detail), in order added
        self._succ: dict[str, list[str]] = {}
        self._pred: dict[str, list[str]] = {}
        self._in_order: set[str] = set()

    def _add(self, name: str, kind: str, detail: str, predecessors: Iterable[str]) -> None:
        if name in self._entries:
            raise TopologyError(f"Two description nodes are named {name!r}; processor names must be unique.")
        self._entries[name] = (kind, detail)
        self._succ[name] = []
        self._pred[name] = []
        for p in predecessors:
            self._succ[p].append(name)
            self._pred[name].append(p)

    def add_source(self, name: str, topics: Iterable[str]) -> None:
        """A source reading ``topics``."""
        self._add(name, "Source", f"topics: [{', '.join(topics)}]", ())

    def add_processor(self, name: str, stores: Iterable[str], predecessors: Iterable[str], *,
                      predecessors_in_order: bool = False) -> None:
        """A processor connected to ``stores``, fed by ``predecessors`` (listed in that order
        with ``predecessors_in_order``, else Kafka's sub-tree size order)."""
        self._add(name, "Processor", f"stores: [{', '.join(stores)}]", predecessors)
        if predecessors_in_order:
            self._in_order.add(name)

    def add_sink(self, name: str, topic: str, predecessors: Iterable[str]) -> None:
        """A sink writing ``topic``, fed by ``predecessors``."""
        self._add(name, "Sink", f"topic: {topic}", predecessors)

    def build(self) -> list[_DNode]:
        """The description nodes, in the order they were added."""
        return [
            _DNode(name, kind, detail, tuple(self._succ[name]), tuple(self._pred[name]), name in self._in_order)
            for name, (kind, detail) in self._entries.items()
        ]
