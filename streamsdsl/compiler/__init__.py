"""The compiler: Topology IR → Spark DataFrame operations (the only layer besides I/O that
imports pyspark).

`compile_topology` lowers every node bottom-up with `lower`
and binds each sink: keys and values are serialized with the sink's serdes into
`RAW_SINK_DDL` rows. All sinks are unioned into one DataFrame (column
``_sink`` tells which), so a whole topology runs as one Spark query.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

import attrs
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from streamsdsl import ir
from streamsdsl.compiler.frame import CTL_TYPE, Frame, KeyCodec
from streamsdsl.compiler.lower import REPLAY, STREAMING, LoweringContext, lower
from streamsdsl.compiler.serde_exprs import serialize_key, serialize_value
from streamsdsl.records import RAW_RECORD_DDL
from streamsdsl.dsl.serdes import Serde, SessionWindowedSerde, TimeWindowedSerde

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from streamsdsl.ir.topology import Topology

__all__ = ["CompiledSink", "CompiledTopology", "REPLAY", "STREAMING", "compile_topology", "explain_topology"]


@attrs.frozen
class CompiledSink:
    """A sink bound to its serialized output and the serdes it writes with."""

    index: int
    node: ir.SinkNode
    key_codec: KeyCodec
    key_serde: Serde
    value_serde: Serde

    @property
    def topic(self) -> str:
        return self.node.topic

    def key_deserializer(self) -> Serde | SessionWindowedSerde | TimeWindowedSerde:
        """What a consumer needs to read this sink's keys (windowed layouts included)."""
        return self.key_codec.with_serde(self.key_serde).reader()  # type: ignore[no-any-return]


@attrs.frozen
class CompiledTopology:
    """The Spark side of a topology: one output DataFrame for all sinks, plus sink metadata."""

    topology: Topology
    mode: str
    frames: dict[str, Frame]
    sinks: tuple[CompiledSink, ...]
    output: DataFrame | None
    persisted: tuple[DataFrame, ...] = ()

    def release(self) -> None:
        """Unpersist what the run cached (replay mode)."""
        for df in self.persisted:
            df.unpersist()

    def sink_for_topic(self, topic: str) -> CompiledSink | None:
        for s in self.sinks:
            if s.topic == topic:
                return s
        return None


def _ship_user_code_by_value(topology: Topology) -> None:
    """Make user functions defined in scripts and test modules usable on Spark's workers.

    cloudpickle pickles a module-level function by reference (module + name), which fails on
    a worker that cannot import that module (a script, a test file). Modules that are not
    installed packages are registered to be pickled by value instead.
    """
    import sys
    import sysconfig

    from pyspark import cloudpickle

    installed = tuple(
        p for p in {sysconfig.get_paths()[k] for k in ("stdlib", "platstdlib", "purelib", "platlib")} if p
    )
    modules: set[str] = set()
    for node in topology.nodes:
        modules |= _user_modules(node)
    for name in modules:
        module = sys.modules.get(name)
        path = getattr(module, "__file__", None)
        if (
            module is None
            or not path
            or name == "__main__"
            or name.split(".")[0] == "streamsdsl"
            or path.startswith(installed)
            or "site-packages" in path
        ):
            continue
        try:
            cloudpickle.register_pickle_by_value(module)
        except ValueError:  # already registered / not a module object
            pass


def _user_modules(value: object) -> set[str]:
    """Modules of the user functions held (at any depth) by an IR node."""
    if isinstance(value, ir.UserFn):
        module = getattr(value.fn, "__module__", None)
        return {module} if module else set()
    if isinstance(value, tuple):
        return set().union(*(_user_modules(v) for v in value)) if value else set()
    if attrs.has(type(value)):
        return set().union(*(_user_modules(getattr(value, f.name)) for f in attrs.fields(type(value))))
    return set()


DESERIALIZATION_HANDLERS = ("log_and_fail", "log_and_continue")


def compile_topology(
    topology: Topology,
    raw_source: Callable[[ir.SourceNode], DataFrame],
    *,
    mode: str = STREAMING,
    deserialization_handler: str = "log_and_fail",
) -> CompiledTopology:
    """Lower ``topology``; ``raw_source(node)`` returns the raw record DataFrame of a source.

    ``mode`` is ``"streaming"`` (watermarks, timers, net change per micro-batch) or ``"replay"``
    (a batch run over recorded input with per-record stream time, used by the test driver).
    ``deserialization_handler`` is Kafka Streams' ``log_and_fail`` (a record that cannot be
    deserialized fails the query, naming topic, partition and offset) or ``log_and_continue``
    (it is skipped, counted in ``dropped-records-total`` and handed to the dead-letter topic).
    """
    if deserialization_handler not in DESERIALIZATION_HANDLERS:
        from streamsdsl.errors import InvalidArgumentError

        raise InvalidArgumentError(
            f"'default.deserialization.exception.handler' must be one of {list(DESERIALIZATION_HANDLERS)} "
            f"(got {deserialization_handler!r})."
        )
    _ship_user_code_by_value(topology)
    ctx = LoweringContext(mode, raw_source, deserialization_handler)
    for node in topology.topological_order():
        ctx.frames[node.name] = lower(node, ctx)
    sinks: list[CompiledSink] = []
    outputs: list[DataFrame] = []
    for i, node in enumerate(topology.sinks):
        frame = ctx.frames[node.name]
        key_serde = node.key_serde or frame.key.serde
        value_serde = node.value_serde or frame.value
        sinks.append(CompiledSink(i, node, frame.key, key_serde, value_serde))
        outputs.append(
            frame.df.select(
                F.lit(i).alias("_sink"),
                serialize_key(F.col("key"), frame.key, key_serde).alias("key"),
                serialize_value(F.col("value"), frame.value, value_serde).alias("value"),
                "timestamp", "headers", "_seq", "_ord", "_okey",
                F.col("_ctl").cast(CTL_TYPE).alias("_ctl"),
            )
        )
    output = None
    for df in outputs:
        output = df if output is None else output.unionByName(df)
    return CompiledTopology(topology, mode, dict(ctx.frames), tuple(sinks), output, tuple(ctx.persisted))


def explain_topology(topology: Topology, spark: SparkSession | None = None, *, mode: str = "formatted") -> str:
    """The Spark streaming plan of ``topology``, as ``DataFrame.explain`` prints it.

    Sources are bound to an empty file stream of the raw record schema, so no broker is needed
    and nothing runs; the plan is the one a Kafka-backed run executes (watermarks,
    ``TransformWithStateInPySpark`` operators, Arrow steps, native expressions).
    """
    import contextlib
    import io
    import tempfile

    from streamsdsl.runtime.session import get_session

    spark = spark or get_session()
    empty_dir = tempfile.mkdtemp(prefix="streamsdsl-explain-")

    def raw_source(node: ir.SourceNode) -> DataFrame:
        stream = spark.readStream.schema(RAW_RECORD_DDL).parquet(empty_dir)
        return stream.filter(F.col("topic").isin(list(node.topics)))

    compiled = compile_topology(topology, raw_source, mode=STREAMING)
    if compiled.output is None:
        return "(the topology has no sinks: nothing to run)"
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        compiled.output.explain(mode=mode)
    return buf.getvalue()
