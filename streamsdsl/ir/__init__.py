"""The topology IR (pure Python, no pyspark): frozen, validated nodes and the immutable `Topology`.

``from streamsdsl import ir`` gives the node types (``ir.SourceNode``, ...); the DAG and its
``describe()`` are in `streamsdsl.ir.topology`.
"""

from streamsdsl.ir.nodes import *  # noqa: F403 - the node types are this package's namespace
from streamsdsl.ir.nodes import __all__ as _nodes_all
from streamsdsl.ir.nodes import concrete_node_types
from streamsdsl.ir.fk_join import ForeignKeyJoinNode
from streamsdsl.ir.global_tables import GlobalTableJoinNode, GlobalTableSourceNode
from streamsdsl.ir.processors import ProcessNode
from streamsdsl.ir.topology import Topology

#: Every concrete node type (of every module of this package), discovered; the compiler and the
#: direct engine must have a rule for each.
NODE_TYPES = concrete_node_types()

__all__ = [*_nodes_all, "ForeignKeyJoinNode", "GlobalTableJoinNode", "GlobalTableSourceNode", "NODE_TYPES", "ProcessNode",
           "Topology"]
