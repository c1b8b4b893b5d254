"""``explain``: the Spark plan a topology compiles to."""

from __future__ import annotations

import contextlib
import io
import tempfile
from typing import TYPE_CHECKING

from streamsdsl.errors import TopologyError
from streamsdsl.ir.topology import Topology

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from streamsdsl import ir

__all__ = ["explain"]


def explain(topology: Topology, spark: SparkSession | None = None, *, mode: str = "formatted",
            operator: str | None = None) -> str:
    """The Spark streaming plan of ``topology`` as ``DataFrame.explain`` prints it (also printed),
    followed by the operator each aggregation runs on (``== streamsdsl operators ==``: ``JVM
    operator``, ``Python operator`` with the reason, or ``Spark native aggregation``).

    Sources are bound to an empty file stream of the raw record schema in a temporary directory
    (removed before returning), so no broker is needed and nothing runs; the plan is the one a
    Kafka-backed run executes (watermarks, ``TransformWithStateInPySpark`` operators, Arrow steps,
    native expressions). ``mode`` is passed to ``DataFrame.explain`` ("simple", "extended",
    "formatted"); ``operator`` is the ``streamsdsl.operator`` choice (``auto``, ``jvm``, ``python``;
    None: its default).

    Without ``spark`` the active SparkSession is used; ``explain`` never starts or reconfigures
    a session, so with none active it raises `TopologyError` saying how to get one.

    Examples
    --------
    >>> from streamsdsl import StreamsBuilder
    >>> from streamsdsl.runtime.session import get_session
    >>> b = StreamsBuilder()
    >>> b.stream("in").to("out")
    >>> text = explain(b.build(), get_session(), mode="simple")
    == Physical Plan ==
    ...
    """
    from pyspark.sql import SparkSession

    from streamsdsl.compiler import compile_topology
    from streamsdsl.compiler.plan import CompileOptions
    from streamsdsl.records import RAW_RECORD_DDL
    from streamsdsl.runtime.topics import reads_topic

    if not isinstance(topology, Topology):
        raise TopologyError(f"'topology' must be a Topology from StreamsBuilder.build() (got {type(topology).__name__}).")
    session = spark or SparkSession.getActiveSession()
    if session is None:
        raise TopologyError(
            "explain() needs a SparkSession and none is active: pass one, explain(topology, spark), or create one "
            "first (streamsdsl.runtime.session.get_session() builds a local session with the settings streamsdsl needs)."
        )
    with tempfile.TemporaryDirectory(prefix="streamsdsl-explain-") as empty_dir:

        def raw_source(node: ir.SourceNode) -> DataFrame:
            stream = session.readStream.schema(RAW_RECORD_DDL).parquet(empty_dir)
            return stream.filter(reads_topic(node))

        compiled = compile_topology(topology, raw_source, CompileOptions(operator=operator,
                                                                           checkpoint_location=empty_dir))
        operators = compiled.operators
        if compiled.output is None:
            text = "(the topology has no sinks: nothing to run)\n"
        else:
            buf = io.StringIO()
            with contextlib.redirect_stdout(buf):
                compiled.output.explain(mode=mode)
            text = buf.getvalue()
        if operators:
            lines = "".join(f"{node}: {how}\n" for node, how in operators.items())
            text = f"{text.rstrip()}\n\n== streamsdsl operators ==\n{lines}"
    print(text, end="")
    return text
