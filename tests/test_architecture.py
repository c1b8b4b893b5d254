"""Structural guarantees: immutable stages and nodes, a lowering rule per node type, strict layers."""

from __future__ import annotations

import subprocess
import sys

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
    def test_every_node_type_has_a_rule(self, spark: object) -> None:
        """Each concrete IR node type is registered with the lowering dispatcher."""
        from streamsdsl.compiler.lower import lower

        missing = [t.__name__ for t in ir.NODE_TYPES if lower.dispatch(t) is lower.dispatch(ir.Node)]
        assert missing == []
        declared = {c for c in vars(ir).values() if isinstance(c, type) and issubclass(c, ir.Node) and c is not ir.Node}
        assert declared == set(ir.NODE_TYPES)

    @pytest.mark.parametrize("handler, reads", [("log_and_fail", 1), ("log_and_continue", 2)])
    def test_streaming_count_reads_its_source_once(self, spark: object, handler: str, reads: int) -> None:
        """A streaming count() over Python steps is one aggregation over one read of the source
        (dropped records are counted by the same aggregation); only with log_and_continue, where
        skipped records travel as control rows, does a second branch forward them."""
        from pyspark.sql import functions as F

        from streamsdsl.compiler import STREAMING, compile_topology

        b = StreamsBuilder()
        b.stream("in").filter(lambda k, v: v is not None).group_by(lambda k, v: v).count().to_stream().to("out")
        def source(node: object) -> object:
            return spark.readStream.format("rate").load().select(  # type: ignore[attr-defined]
                F.lit(None).cast("binary").alias("key"), F.lit(None).cast("binary").alias("value"),
                F.lit("in").alias("topic"), F.lit(0).alias("partition"), F.col("value").alias("offset"),
                F.col("value").alias("timestamp"),
                F.array().cast("array<struct<key:string,value:binary>>").alias("headers"),
            )

        compiled = compile_topology(b.build(), source, mode=STREAMING, deserialization_handler=handler)
        plan = compiled.output._jdf.queryExecution().analyzed().toString()  # type: ignore[union-attr]
        assert plan.count("StreamingRelation") == reads

    def test_unknown_node_raises(self, spark: object) -> None:
        """A node type without a rule raises OperationNotDefinedError naming it."""
        from streamsdsl.compiler.lower import LoweringContext, lower
        from streamsdsl.errors import OperationNotDefinedError

        @attrs.frozen
        class Strange(ir.Node):
            pass

        with pytest.raises(OperationNotDefinedError, match="No lowering rule for IR node type Strange"):
            lower(Strange("x", ()), LoweringContext("replay", lambda n: None))  # type: ignore[arg-type,return-value]


class TestLayers:
    @pytest.mark.parametrize(
        "module",
        ["streamsdsl", "streamsdsl.dsl.api", "streamsdsl.ir", "streamsdsl.ir.topology", "streamsdsl.semantics",
         "streamsdsl.semantics.reference", "streamsdsl.dsl.windows", "streamsdsl.dsl.serdes", "streamsdsl.dsl.options"],
    )
    def test_no_pyspark_import(self, module: str) -> None:
        """The API, the IR and the semantics core import no pyspark (checked in a fresh interpreter)."""
        code = f"import sys, {module}; print(sorted(m for m in sys.modules if m.split('.')[0] in ('pyspark', 'py4j')))"
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
        assert out.strip() == "[]"

    @pytest.mark.parametrize(
        ("module", "forbidden"),
        [
            ("streamsdsl/ir/nodes.py", ("streamsdsl.dsl.api", "streamsdsl.compiler", "pyspark")),
            ("streamsdsl/ir/topology.py", ("streamsdsl.dsl.api", "pyspark")),
            ("streamsdsl/semantics/session.py", ("streamsdsl.dsl.api", "streamsdsl.compiler", "pyspark")),
            ("streamsdsl/semantics/changes.py", ("streamsdsl.dsl.api", "streamsdsl.compiler", "pyspark")),
            ("streamsdsl/dsl/api.py", ("streamsdsl.compiler", "pyspark")),
        ],
    )
    def test_module_level_imports(self, module: str, forbidden: tuple[str, ...]) -> None:
        """Layering by module-level imports (type-checking-only and lazy imports excluded)."""
        import ast
        from pathlib import Path

        tree = ast.parse((Path(__file__).parents[1] / module).read_text())
        imported = []
        for stmt in tree.body:
            if isinstance(stmt, ast.Import):
                imported += [a.name for a in stmt.names]
            elif isinstance(stmt, ast.ImportFrom) and stmt.module:
                imported.append(stmt.module)
        bad = [m for m in imported if any(m == f or m.startswith(f + ".") for f in forbidden)]
        assert bad == []
