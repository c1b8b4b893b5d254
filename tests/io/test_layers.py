"""Import boundaries inside ``streamsdsl.io``: only the Spark-facing modules import pyspark."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

IO_DIR = Path(__file__).parents[2] / "streamsdsl" / "io"
#: The modules that may import pyspark at module level.
SPARK_MODULES = {"source.py", "sink.py", "partition_reader.py"}


def _module_level_imports(path: Path) -> list[str]:
    """Top-level modules imported by ``path`` outside functions and ``if TYPE_CHECKING``."""
    imported: list[str] = []
    for stmt in ast.parse(path.read_text()).body:
        nodes = stmt.body + stmt.handlers[0].body if isinstance(stmt, ast.Try) else [stmt]
        for node in nodes:
            if isinstance(node, ast.Import):
                imported += [a.name.split(".")[0] for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                imported.append(node.module.split(".")[0])
    return imported


class TestLayers:
    """Which io modules may import pyspark and confluent_kafka."""

    @pytest.mark.parametrize("module", sorted(p.name for p in IO_DIR.glob("*.py")))
    def test_module_level_imports(self, module: str) -> None:
        """No io module imports confluent_kafka at module level; only the Spark-facing ones import pyspark."""
        imported = set(_module_level_imports(IO_DIR / module))
        assert "confluent_kafka" not in imported
        assert ("pyspark" in imported) <= (module in SPARK_MODULES)

    @pytest.mark.parametrize(
        "module", ["streamsdsl.io", "streamsdsl.io.errors", "streamsdsl.io.options", "streamsdsl.io.offsets"]
    )
    def test_pure_modules_load_no_spark(self, module: str) -> None:
        """The package, errors, options and offsets load no pyspark and no confluent_kafka (fresh interpreter)."""
        code = (
            f"import sys, {module}; "
            "print(sorted({m.split('.')[0] for m in sys.modules} & {'pyspark', 'py4j', 'confluent_kafka'}))"
        )
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
        assert out.strip() == "[]"

    def test_public_names_load_the_source(self) -> None:
        """``SOURCE_NAME``, ``KafkaDataSource`` and ``register`` load from ``streamsdsl.io.source`` on use."""
        import streamsdsl.io as io
        from streamsdsl.io import source

        assert (io.SOURCE_NAME, io.KafkaDataSource, io.register) == (
            "streamsdsl-kafka",
            source.KafkaDataSource,
            source.register,
        )
        with pytest.raises(AttributeError, match="module 'streamsdsl.io' has no attribute 'nope'"):
            io.nope  # noqa: B018
