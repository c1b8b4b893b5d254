"""The compiler: Topology IR → Spark DataFrame operations (with I/O and the runtime, the only
layers that import pyspark).

`compile_topology` (`streamsdsl.compiler.plan`) lowers a topology with the `Lowering` of its
`PlanMode` (`streamsdsl.compiler.lowering`, `streamsdsl.compiler.modes`); the stateful rules
are in `streamsdsl.compiler.aggregations`, the processor in `streamsdsl.compiler.processors`,
the private column names in `streamsdsl.compiler.columns` (importable without pyspark). The
names below load their module (and pyspark) on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from streamsdsl._lazy import lazy_getattr

if TYPE_CHECKING:
    from streamsdsl.compiler.lowering import Lowering, PlanMode
    from streamsdsl.compiler.plan import CompiledSink, CompiledTopology, CompileOptions, compile_topology

__all__ = ["CompileOptions", "CompiledSink", "CompiledTopology", "Lowering", "PlanMode", "compile_topology"]

_HOME = {
    "CompileOptions": "streamsdsl.compiler.plan",
    "CompiledSink": "streamsdsl.compiler.plan",
    "CompiledTopology": "streamsdsl.compiler.plan",
    "compile_topology": "streamsdsl.compiler.plan",
    "Lowering": "streamsdsl.compiler.lowering",
    "PlanMode": "streamsdsl.compiler.lowering",
}


__getattr__ = lazy_getattr("streamsdsl.compiler", _HOME)
