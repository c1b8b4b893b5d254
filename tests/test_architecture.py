"""Structural guarantees: immutable stages and nodes, a lowering rule per node type, strict layers."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import attrs
import pytest

from streamsdsl import ir
from streamsdsl.dsl.api import StreamsBuilder


class TestImmutability:
    def test_nodes_are_frozen(self) -> None:
        """IR nodes cannot be mutated."""
        node = ir.SourceNode("s", (), ("t",))
        with pytest.raises(attrs.exceptions.FrozenInstanceError):
            node.name = "x"  # type: ignore[misc]

    def test_stage_reuse_gives_independent_branches(self) -> None:
        """Calling a method twice on one stage gives two branches; the stage is unchanged."""
        b = StreamsBuilder()
        s = b.stream("in")
        a = s.filter(lambda k, v: True)
        c = s.filter(lambda k, v: False)
        assert a.node_name != c.node_name
        assert s.node_name == "KSTREAM-SOURCE-0000000000"
        topo = b.build()
        assert topo.children("KSTREAM-SOURCE-0000000000") == ("KSTREAM-FILTER-0000000001", "KSTREAM-FILTER-0000000002")

    def test_emit_strategy_returns_new_stage(self) -> None:
        """emit_strategy() does not change the stage it is called on (unlike Kafka's field setter)."""
        from streamsdsl import EmitStrategy, SessionWindows

        w = StreamsBuilder().stream("in").group_by_key().windowed_by(SessionWindows.with_gap(5))
        closing = w.emit_strategy(EmitStrategy.on_window_close())
        assert w.emit == EmitStrategy.on_window_update()
        assert closing.emit == EmitStrategy.on_window_close()

    def test_topology_is_a_snapshot(self) -> None:
        """build() freezes what exists; later calls on the builder do not change it."""
        b = StreamsBuilder()
        s = b.stream("in")
        topo = b.build()
        s.to("out")
        assert len(topo.nodes) == 1 and len(b.build().nodes) == 2


class TestLowering:
    def test_every_node_type_has_a_rule(self) -> None:
        """Each concrete IR node type has a lowering rule of its own, in both plan modes."""
        from streamsdsl.compiler.modes import ReplayLowering, StreamingLowering

        for mode in (StreamingLowering, ReplayLowering):
            assert [t.__name__ for t in ir.NODE_TYPES if not mode.has_rule(t)] == []

    @pytest.mark.parametrize("handler, reads", [("log_and_fail", 1), ("log_and_continue", 2)])
    def test_streaming_count_reads_its_source_once(self, spark: object, handler: str, reads: int) -> None:
        """A streaming count() over Python steps is one aggregation over one read of the source
        (dropped records are counted by observe(), not by a second branch); only with
        log_and_continue does a dead-letter branch read the source a second time."""
        from pyspark.sql import functions as F

        from streamsdsl.compiler import PlanMode, compile_topology
        from streamsdsl.compiler.plan import CompileOptions

        b = StreamsBuilder()
        b.stream("in").filter(lambda k, v: v is not None).group_by(lambda k, v: v).count().to_stream().to("out")

        def source(node: object) -> object:
            return spark.readStream.format("rate").load().select(  # type: ignore[attr-defined]
                F.lit(None).cast("binary").alias("key"), F.lit(None).cast("binary").alias("value"),
                F.lit("in").alias("topic"), F.lit(0).alias("partition"), F.col("value").alias("offset"),
                F.col("value").alias("timestamp"),
                F.array().cast("array<struct<key:string,value:binary>>").alias("headers"),
            )

        compiled = compile_topology(b.build(), source, CompileOptions(PlanMode.STREAMING, deserialization_handler=handler))
        plan = compiled.output._jdf.queryExecution().analyzed().toString()  # type: ignore[union-attr]
        assert plan.count("StreamingRelation") == reads

    def test_unknown_node_raises(self, spark: object) -> None:
        """A node type without a rule raises OperationNotDefinedError naming it."""
        from streamsdsl.compiler.modes import ReplayLowering
        from streamsdsl.errors import OperationNotDefinedError

        @attrs.frozen
        class Strange(ir.Node):
            pass

        with pytest.raises(OperationNotDefinedError, match="No lowering rule for IR node type Strange"):
            ReplayLowering(lambda n: None).lower(Strange("x", ()))  # type: ignore[arg-type,return-value]


#: What each layer may not import, anywhere in its modules (lazy imports included; imports
#: under ``if TYPE_CHECKING:`` are annotations only and do not count).
LAYER_RULES = {
    "streamsdsl/semantics": ("streamsdsl.dsl", "streamsdsl.ir", "streamsdsl.compiler", "streamsdsl.runtime",
                             "streamsdsl.io", "pyspark"),
    "streamsdsl/ir": ("streamsdsl.dsl.api", "streamsdsl.dsl.options", "streamsdsl.compiler", "streamsdsl.runtime",
                      "streamsdsl.io", "pyspark"),
    "streamsdsl/dsl": ("streamsdsl.compiler", "streamsdsl.runtime", "streamsdsl.io", "pyspark"),
    "streamsdsl/compiler": ("streamsdsl.runtime", "streamsdsl.io"),
    "streamsdsl/io": ("streamsdsl.dsl.api", "streamsdsl.ir", "streamsdsl.compiler", "streamsdsl.runtime"),
    "streamsdsl/errors.py": ("streamsdsl.dsl", "streamsdsl.ir", "streamsdsl.compiler", "streamsdsl.runtime",
                             "streamsdsl.io", "pyspark"),
    "streamsdsl/_validation.py": ("streamsdsl.dsl", "streamsdsl.ir", "streamsdsl.compiler", "streamsdsl.runtime",
                                  "streamsdsl.io", "pyspark"),
}


def _imports(path: Path) -> list[str]:
    """Every module a file imports, at any depth, except under ``if TYPE_CHECKING:``."""
    tree = ast.parse(path.read_text())
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            skipped |= {id(n) for stmt in node.body for n in ast.walk(stmt)}
    found: list[str] = []
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.append(node.module)
            found += [f"{node.module}.{a.name}" for a in node.names]
    return found


class TestLayers:
    @pytest.mark.parametrize(
        "module",
        ["streamsdsl", "streamsdsl.dsl.api", "streamsdsl.ir", "streamsdsl.ir.topology", "streamsdsl.semantics",
         "streamsdsl.semantics.reference", "streamsdsl.values.windows", "streamsdsl.values.serdes", "streamsdsl.dsl.options"],
    )
    def test_no_pyspark_import(self, module: str) -> None:
        """The API, the IR and the semantics core import no pyspark (checked in a fresh interpreter)."""
        code = f"import sys, {module}; print(sorted(m for m in sys.modules if m.split('.')[0] in ('pyspark', 'py4j')))"
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
        assert out.strip() == "[]"

    @pytest.mark.parametrize("layer", sorted(LAYER_RULES))
    def test_layer_imports(self, layer: str) -> None:
        """No module of a layer imports a layer above it, lazily or not."""
        root = Path(__file__).parents[1]
        files = [root / layer] if layer.endswith(".py") else sorted((root / layer).rglob("*.py"))
        assert files
        forbidden = LAYER_RULES[layer]
        bad = sorted({f"{f.relative_to(root)}: {m}" for f in files for m in _imports(f)
                      if any(m == x or m.startswith(x + ".") for x in forbidden)})
        assert bad == []

    def test_topology_has_no_explain_back_door(self) -> None:
        """The IR's Topology does not reach into the compiler: explain() lives in the runtime."""
        from streamsdsl.ir.topology import Topology

        assert not hasattr(Topology, "explain")
