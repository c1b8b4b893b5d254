"""The topology IR (pure Python, no pyspark): frozen, validated nodes and the immutable `Topology`.

``from streamsdsl import ir`` gives the node types (``ir.SourceNode``, ...); the DAG and its
``describe()`` are in `streamsdsl.ir.topology`.
"""

from streamsdsl.ir.nodes import *  # noqa: F403 - the node types are this package's namespace
from streamsdsl.ir.nodes import __all__ as _nodes_all
from streamsdsl.ir.topology import Topology

__all__ = [*_nodes_all, "Topology"]
