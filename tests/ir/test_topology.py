"""A Topology is a valid DAG by construction: unique names, parents before children."""

from __future__ import annotations

import pytest

from streamsdsl import ir
from streamsdsl.errors import TopologyError
from streamsdsl.ir.topology import DescriptionBuilder, Topology


def source(name: str = "s") -> ir.SourceNode:
    return ir.SourceNode(name, (), (f"{name}-topic",))


def to_stream(name: str, parent: str) -> ir.TableToStreamNode:
    return ir.TableToStreamNode(name, (parent,))


class TestTopologyValidation:
    def test_duplicate_names(self) -> None:
        """Two nodes cannot share a name."""
        with pytest.raises(TopologyError) as exc:
            Topology((source(), to_stream("s", "s")))
        assert str(exc.value) == "Two nodes are named 's'; node names must be unique."

    def test_unknown_parent(self) -> None:
        """A parent must be a node of the topology."""
        with pytest.raises(TopologyError) as exc:
            Topology((source(), to_stream("x", "nope")))
        assert str(exc.value) == "Node x refers to unknown parent nope."

    def test_parent_after_child(self) -> None:
        """Nodes are in topological order: a parent comes before its children."""
        with pytest.raises(TopologyError) as exc:
            Topology((to_stream("x", "s"), source()))
        assert str(exc.value) == "Node x appears before one of its parents."

    def test_nodes_must_be_a_tuple_of_nodes(self) -> None:
        """The node sequence is a tuple of IR nodes."""
        with pytest.raises(TopologyError) as exc:
            Topology([source()])  # type: ignore[arg-type]
        assert str(exc.value) == "'nodes' must be a tuple of IR nodes (got list)."

    def test_graph_queries(self) -> None:
        """children / node / topological_order reflect the construction order."""
        topo = Topology((source(), to_stream("x", "s"), to_stream("y", "s")))
        assert topo.children("s") == ("x", "y")
        assert topo.node("x").parents == ("s",)
        assert [n.name for n in topo.topological_order()] == ["s", "x", "y"]

    def test_no_compiler_entry_point(self) -> None:
        """The IR offers no explain(): compiling belongs to the layers above it."""
        assert not hasattr(Topology, "explain")


class TestDescriptionBuilder:
    def test_duplicate_description_names(self) -> None:
        """Two description nodes cannot share a name (e.g. a repartition's generated names)."""
        builder = DescriptionBuilder()
        builder.add_source("s", ("t",))
        with pytest.raises(TopologyError) as exc:
            builder.add_processor("s", (), ())
        assert str(exc.value) == "Two description nodes are named 's'; processor names must be unique."
