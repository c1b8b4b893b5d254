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

    def test_every_node_type_has_a_direct_engine_rule(self) -> None:
        """The direct engine dispatches through a rule table too: each concrete IR node type has a
        rule of its own there (`streamsdsl.direct.rules.RULES`), and nothing else does."""
        from streamsdsl.direct.rules import RULES

        assert [t.__name__ for t in ir.NODE_TYPES if t not in RULES] == []
        assert [t.__name__ for t in RULES if t not in ir.NODE_TYPES] == []

    def test_every_stateful_node_type_has_one_description(self) -> None:
        """The node types whose operators hold state are described once
        (`streamsdsl.operators.descriptions`), for the compiler and the direct engine alike."""
        from streamsdsl.operators.descriptions import DESCRIPTIONS

        stateless = {ir.SourceNode, ir.SinkNode, ir.FilterNode, ir.MapValuesNode, ir.MapNode, ir.FlatMapNode,
                     ir.FlatMapValuesNode, ir.SelectKeyNode, ir.PeekNode, ir.ForeachNode, ir.MergeNode, ir.RepartitionNode,
                     ir.TableToStreamNode, ir.TableFilterNode, ir.TableMapValuesNode, ir.BranchNode,
                     ir.BranchChildNode}
        assert sorted(t.__name__ for t in ir.NODE_TYPES - stateless) == sorted(t.__name__ for t in DESCRIPTIONS)

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


_ABOVE_SEMANTICS = ("streamsdsl.values", "streamsdsl.dsl", "streamsdsl.ir", "streamsdsl.compiler", "streamsdsl.runtime",
                    "streamsdsl.io", "streamsdsl.direct", "streamsdsl.operators", "pyspark")

#: What each layer may not import, anywhere in its modules (lazy imports and imports under
#: ``if TYPE_CHECKING:`` included). From the bottom: errors and validation; the semantics core;
#: value objects; the IR; the user API; what each node's operator runs (`streamsdsl.operators`:
#: key codecs, functions, serdes); the direct engine; the compiler and I/O; the runtime.
LAYER_RULES = {
    "streamsdsl/errors.py": ("streamsdsl._validation", "streamsdsl.semantics", *_ABOVE_SEMANTICS),
    "streamsdsl/_validation.py": ("streamsdsl.semantics", *_ABOVE_SEMANTICS),
    "streamsdsl/semantics": _ABOVE_SEMANTICS,
    "streamsdsl/values": _ABOVE_SEMANTICS[1:],
    "streamsdsl/ir": ("streamsdsl.dsl", "streamsdsl.compiler", "streamsdsl.runtime", "streamsdsl.io",
                      "streamsdsl.direct", "streamsdsl.operators", "pyspark"),
    "streamsdsl/dsl": ("streamsdsl.compiler", "streamsdsl.runtime", "streamsdsl.io", "streamsdsl.direct",
                       "streamsdsl.operators", "pyspark"),
    "streamsdsl/operators": ("streamsdsl.dsl.api", "streamsdsl.compiler", "streamsdsl.runtime", "streamsdsl.io",
                             "streamsdsl.direct", "pyspark"),
    "streamsdsl/direct": ("streamsdsl.dsl.api", "streamsdsl.compiler", "streamsdsl.runtime", "streamsdsl.io",
                          "pyspark"),
    "streamsdsl/compiler": ("streamsdsl.runtime", "streamsdsl.io", "streamsdsl.direct"),
    # the plan's metrics are the base of the lowering, below its rules and modes
    "streamsdsl/compiler/metrics.py": ("streamsdsl.compiler.lowering", "streamsdsl.compiler.rules",
                                       "streamsdsl.compiler.modes", "streamsdsl.runtime", "streamsdsl.io",
                                       "streamsdsl.direct"),
    # describe()'s data and renderings know no node: each node describes itself into them
    "streamsdsl/ir/description.py": ("streamsdsl.ir.nodes", "streamsdsl.ir.topology", "streamsdsl.ir.specs",
                                     "streamsdsl.values", "streamsdsl.dsl", "pyspark"),
    "streamsdsl/io": ("streamsdsl.dsl.api", "streamsdsl.ir", "streamsdsl.compiler", "streamsdsl.runtime",
                      "streamsdsl.direct"),
    # the Processor API's state stores: pure Python over the value objects, below the IR and every host
    # the Processor API and its kernel: below the IR and every host, above the stores
    "streamsdsl/processor": ("streamsdsl.ir", "streamsdsl.dsl", "streamsdsl.compiler", "streamsdsl.runtime",
                             "streamsdsl.direct", "streamsdsl.io", "streamsdsl.operators", "pyspark"),
    "streamsdsl/state": ("streamsdsl.ir", "streamsdsl.dsl", "streamsdsl.compiler", "streamsdsl.runtime",
                         "streamsdsl.direct", "streamsdsl.io", "streamsdsl.processor", "streamsdsl.operators",
                         "pyspark"),
}

#: The packages and top-level modules whose import graph must have no cycle.
_UNITS = ("streamsdsl.semantics", "streamsdsl.values", "streamsdsl.ir", "streamsdsl.dsl", "streamsdsl.compiler",
          "streamsdsl.direct", "streamsdsl.runtime", "streamsdsl.io", "streamsdsl.testing", "streamsdsl.state",
          "streamsdsl.processor")


def _unit(module: str) -> str | None:
    """The package or top-level module ``module`` belongs to (None: not streamsdsl's)."""
    parts = module.split(".")
    if parts[0] != "streamsdsl" or len(parts) == 1:
        return None
    unit = ".".join(parts[:2])
    return unit


def _module_of(path: Path, root: Path) -> str:
    rel = path.relative_to(root).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _imports(path: Path) -> list[str]:
    """Every module a file imports, at any depth (lazy and ``TYPE_CHECKING`` imports included)."""
    tree = ast.parse(path.read_text())
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.append(node.module)
            found += [f"{node.module}.{a.name}" for a in node.names]
    return found


def _unit_graph(root: Path) -> dict[str, set[str]]:
    """Package / top-level module → the packages and top-level modules it imports."""
    graph: dict[str, set[str]] = {}
    for f in sorted((root / "streamsdsl").rglob("*.py")):
        here = _unit(_module_of(f, root))
        if here is None:
            continue
        for m in _imports(f):
            there = _unit(m)
            if there is not None and there != here and there in _known_units(root):
                graph.setdefault(here, set()).add(there)
    return graph


def _known_units(root: Path) -> set[str]:
    units = {f"streamsdsl.{p.name}" for p in (root / "streamsdsl").iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    units |= {f"streamsdsl.{p.stem}" for p in (root / "streamsdsl").glob("*.py") if p.stem != "__init__"}
    return units


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every cycle's members (strongly connected components of more than one unit)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            members = []
            while True:
                w = stack.pop()
                on.discard(w)
                members.append(w)
                if w == v:
                    break
            if len(members) > 1:
                out.append(sorted(members))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


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

    def test_no_import_cycle_between_packages_and_top_level_modules(self) -> None:
        """The import graph of streamsdsl's packages and top-level modules (every import, at any
        depth) has no cycle."""
        root = Path(__file__).parents[1]
        graph = _unit_graph(root)
        assert "streamsdsl.ir" in graph and "streamsdsl.values" in graph["streamsdsl.ir"]
        assert _cycles(graph) == []

    def test_cycle_finder_finds_a_cycle(self) -> None:
        """The cycle check itself: a two-unit cycle and a three-unit cycle are found."""
        assert _cycles({"a": {"b"}, "b": {"a"}, "c": {"d"}, "d": {"e"}, "e": {"c"}}) == [["a", "b"], ["c", "d", "e"]]
        assert _cycles({"a": {"b"}, "b": {"c"}}) == []

    def test_no_module_over_700_lines(self) -> None:
        """Every module of the package has at most 700 lines."""
        root = Path(__file__).parents[1]
        long = {str(f.relative_to(root)): n for f in (root / "streamsdsl").rglob("*.py")
                if (n := len(f.read_text().splitlines())) > 700}
        assert long == {}

    def test_the_direct_engine_runs_without_pyspark(self) -> None:
        """A topology runs on the test driver's direct engine with no pyspark or py4j module loaded."""
        code = ("import sys\nfrom streamsdsl import StreamsBuilder, TopologyTestDriver\nb = StreamsBuilder()\n"
                "b.stream('in').group_by_key().count().to_stream().to('out')\n"
                "with TopologyTestDriver(b.build(), engine='direct') as d:\n"
                "    d.create_input_topic('in').pipe_input('k', 'v', 1)\n"
                "    assert d.create_output_topic('out').read_key_values_to_list() == [('k', 1)]\n"
                "print(sorted(m for m in sys.modules if m.split('.')[0] in ('pyspark', 'py4j')))")
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
        assert out.strip() == "[]"

    def test_topology_has_no_explain_back_door(self) -> None:
        """The IR's Topology does not reach into the compiler: explain() lives in the runtime."""
        from streamsdsl.ir.topology import Topology

        assert not hasattr(Topology, "explain")


def _module_imports(path: Path) -> tuple[set[str], set[str]]:
    """The streamsdsl modules a file imports when it is loaded (module level, outside ``if
    TYPE_CHECKING:``), and those it imports inside functions or classes (late imports). ``from
    package import name`` counts as ``package.name`` when that is a module, else ``package``."""
    root = Path(__file__).parents[1]
    modules = {_module_of(f, root) for f in (root / "streamsdsl").rglob("*.py")}

    def targets(node: ast.Import | ast.ImportFrom) -> set[str]:
        if isinstance(node, ast.Import):
            return {a.name for a in node.names if a.name in modules}
        if not node.module:
            return set()
        subs = {f"{node.module}.{a.name}" for a in node.names} & modules
        return subs | ({node.module} & modules if len(subs) < len(node.names) else set())

    loaded: set[str] = set()
    late: set[str] = set()

    def visit(body: list[ast.stmt], type_only: bool) -> None:
        for node in body:
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                if not type_only:
                    loaded.update(targets(node))
            elif isinstance(node, ast.If):
                checking = isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"
                visit(node.body, type_only or checking)
                visit(node.orelse, type_only)
            elif isinstance(node, (ast.Try, ast.With)):
                visit(node.body, type_only)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                late.update(m for inner in ast.walk(node) if isinstance(inner, (ast.Import, ast.ImportFrom))
                            for m in targets(inner))

    visit(ast.parse(path.read_text()).body, False)
    return loaded, late


class TestDslLayers:
    """The DSL's stage modules import downward only (`streamsdsl.dsl.stage`): a stage makes the
    stages above its module through the builder, and no module imports late to dodge a cycle."""

    _DSL = Path(__file__).parents[1] / "streamsdsl" / "dsl"

    def test_no_late_imports(self) -> None:
        """No DSL module imports a streamsdsl module inside a function or class."""
        late = {f.name: sorted(_module_imports(f)[1]) for f in sorted(self._DSL.glob("*.py"))}
        assert {name: mods for name, mods in late.items() if mods} == {}

    def test_no_import_cycle_between_dsl_modules(self) -> None:
        """The DSL modules' load-time import graph (type-only imports aside) has no cycle, and
        `streamsdsl.dsl.api` (the builder) is its top: no DSL module imports it at load time."""
        root = Path(__file__).parents[1]
        graph = {_module_of(f, root): {m for m in _module_imports(f)[0] if m.startswith("streamsdsl.dsl.")}
                 for f in sorted(self._DSL.glob("*.py"))}
        assert "streamsdsl.dsl.table" in graph["streamsdsl.dsl.stream"]
        assert _cycles(graph) == []
        assert sorted(m for m, deps in graph.items() if "streamsdsl.dsl.api" in deps) == []

    def test_the_import_reader_sees_late_and_type_only_imports(self, tmp_path: Path) -> None:
        """The reader itself: a late import and a ``TYPE_CHECKING`` import are told apart from a
        load-time one."""
        f = tmp_path / "m.py"
        f.write_text("from typing import TYPE_CHECKING\nfrom streamsdsl.dsl import stage\n"
                     "if TYPE_CHECKING:\n    from streamsdsl.dsl.api import StreamsBuilder\n"
                     "def f():\n    from streamsdsl.dsl.table import KTable\n")
        assert _module_imports(f) == ({"streamsdsl.dsl.stage"}, {"streamsdsl.dsl.table"})
