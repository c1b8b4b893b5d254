"""`compile_topology`: a Topology → one Spark DataFrame (the plan) for all its sinks.

`compile_topology` lowers, bottom-up, every node a sink depends on, with the `Lowering` of the
plan mode, and binds each sink: keys and values are serialized with the sink's serdes. All sinks
(and, with ``log_and_continue``, the dead-letter records) are unioned into one DataFrame —
column `SINK_INDEX` tells which — so a whole topology runs as one Spark query.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import attrs
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from streamsdsl import ir
from streamsdsl.compiler.columns import FINAL_KEY_ORDER, OUTPUT_POSITION, SINK_INDEX, SOURCE_POSITION
from streamsdsl.compiler.frame import Frame, KeyCodec
from streamsdsl.compiler.lowering import Lowering, PlanMode, RawSource, reused_columns
from streamsdsl.compiler.jvm_operator import OperatorChoice, OperatorChoices
from streamsdsl.compiler.carry import sink_paths
from streamsdsl.compiler.modes import ReplayCarry, ReplayLowering, lowering_for
from streamsdsl.compiler.user_processors import ProcessorClock
from streamsdsl.compiler.serde_exprs import RecordContext, key_as_json, serialize_key, serialize_value
from streamsdsl.dsl.options import DeserializationHandler
from streamsdsl.jvm import Operator
from streamsdsl.semantics.kernels import FlushPolicy
from streamsdsl.values.serdes import CustomSerde, PlanSerde, SessionWindowedSerde, TimeWindowedSerde

if TYPE_CHECKING:
    from streamsdsl.ir.topology import Topology

__all__ = ["UNREAD_SINK", "CompileOptions", "CompiledSink", "CompiledTopology", "compile_topology"]

#: The `SINK_INDEX` of the output part that runs a processor no sink reads (it holds no row).
UNREAD_SINK = -2


@attrs.frozen
class CompiledSink:
    """A sink bound to its serialized output and the serdes it writes with."""

    index: int
    node: ir.SinkNode
    key_codec: KeyCodec
    key_serde: PlanSerde
    value_serde: PlanSerde

    @property
    def topic(self) -> str:
        return self.node.topic

    def key_deserializer(self) -> PlanSerde | SessionWindowedSerde | TimeWindowedSerde:
        """What a consumer needs to read this sink's keys (windowed layouts included)."""
        return self.key_codec.with_serde(self.key_serde).reader()  # type: ignore[no-any-return]


@attrs.frozen
class CompiledTopology:
    """The Spark side of a topology: one output DataFrame for all sinks and the sinks' metadata
    (the plan's metrics are observations, see `streamsdsl.compiler.columns`)."""

    topology: Topology
    mode: PlanMode
    frames: dict[str, Frame]
    sinks: tuple[CompiledSink, ...]
    output: DataFrame | None
    persisted: tuple[DataFrame, ...] = ()
    #: Whether the output holds dead-letter records (``log_and_continue``).
    dead_letters: bool = False
    #: Replay: the lowering, whose carried states the driver collects after the run.
    replay: ReplayLowering | None = None
    #: Which operator runs each stateful node, and why.
    operators: dict[str, OperatorChoice] = attrs.field(factory=dict)
    #: Streaming: the drop points counted by the jar's counters rather than observed, by
    #: observation name (``io.streamsdsl.jvm.DropCounter``; `streamsdsl.runtime.metrics.drain_counters`).
    counters: dict[str, Any] = attrs.field(factory=dict)

    def release(self) -> None:
        """Unpersist what a replay cached."""
        for df in self.persisted:
            df.unpersist()

    def sink_for_topic(self, topic: str) -> CompiledSink | None:
        return next((s for s in self.sinks if s.topic == topic), None)


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
    if isinstance(value, CustomSerde):
        return {type(value.inner).__module__}
    if isinstance(value, tuple):
        return set().union(*(_user_modules(v) for v in value)) if value else set()
    if attrs.has(type(value)):
        return set().union(*(_user_modules(getattr(value, f.name)) for f in attrs.fields(type(value))))
    return set()


def _needed(topology: Topology) -> set[str]:
    """The nodes some sink, some user processor or some named store depends on: only they are
    lowered (and only they run; `Topology.runs_unread`: a processor runs for its stores and
    punctuators, a named store for its queries, even when nothing reads their output)."""
    return topology.ancestors(*(s.name for s in topology.sinks), *topology.runs_unread())


def _unread_processors(topology: Topology, lowering: Lowering) -> list[DataFrame]:
    """For each node that runs unread (`Topology.runs_unread`) and whose output reaches no sink:
    a part of the output that runs it and holds no row (its filter is false for every row, which
    Spark cannot know beforehand)."""
    out = []
    for node in topology.nodes:
        if node.name in topology.runs_unread() and sink_paths(topology, node.name) == 0:
            frame = lowering.frames[node.name]
            df = frame.df.filter(F.col(SOURCE_POSITION) < F.lit(-1))
            out.append(df.select(F.lit(UNREAD_SINK).alias(SINK_INDEX), F.lit(None).cast("binary").alias("key"),
                                 F.lit(None).cast("binary").alias("value"), "timestamp", "headers", SOURCE_POSITION,
                                 OUTPUT_POSITION, FINAL_KEY_ORDER))
    return out


def _sink_columns(node: ir.SinkNode, index: int, key: KeyCodec, value: PlanSerde, key_serde: PlanSerde,
                  value_serde: PlanSerde) -> list[Column]:
    """A sink's output columns: its index, the serialized key and value, the order columns."""
    context = RecordContext(node.name, F.col(SOURCE_POSITION), key_as_json(F.col("key"), None if key.windowed else key.serde))
    return [
        F.lit(index).alias(SINK_INDEX),
        serialize_key(F.col("key"), key, key_serde, context).alias("key"),
        serialize_value(F.col("value"), value, value_serde, context).alias("value"),
        F.col("timestamp"), F.col("headers"), F.col(SOURCE_POSITION), F.col(OUTPUT_POSITION), F.col(FINAL_KEY_ORDER),
    ]


@attrs.frozen
class CompileOptions:
    """How `compile_topology` lowers a topology, passed in as data.

    ``mode``: `PlanMode.STREAMING` (watermarks, timers, net change per micro-batch) or
    `PlanMode.REPLAY` (the test driver's batch run over recorded input, per-record stream time).
    ``operator``: ``streamsdsl.operator`` (``auto``/``jvm``/``python``; ``None``: its default),
    which operator runs the built-in aggregations. ``deserialization_handler``: Kafka Streams'
    ``log_and_fail`` (a record that cannot be deserialized fails the query, naming topic,
    partition and offset) or ``log_and_continue`` (it is skipped, counted in
    ``dropped-records-total`` and becomes a dead-letter record of the output). ``carry`` (replay):
    what the previous run of the test driver handed on (`ReplayCarry`). ``flush``: when an
    aggregation forwards its store writes (replay: ``statestore.cache.max.bytes``). In streaming mode
    ``carry`` is the state a backfill ended with (`streamsdsl.runtime.backfill`): the query's
    stateful operators start from it (``transformWithState``'s initial state,
    `StreamingLowering.initial_state`)."""

    mode: PlanMode = attrs.field(default=PlanMode.STREAMING, converter=PlanMode)
    operator: Operator | None = attrs.field(default=None, converter=attrs.converters.optional(Operator))
    deserialization_handler: DeserializationHandler = attrs.field(
        default=DeserializationHandler.LOG_AND_FAIL, converter=DeserializationHandler.parse)
    carry: ReplayCarry | None = None
    flush: FlushPolicy = FlushPolicy.PER_RECORD
    #: Replay: how many source positions the run spans (None: a few): a run over more than
    #: `scan.SCAN_BLOCK` computes stream time per block of positions, in parallel.
    positions: int | None = None
    #: Streaming: drop points (observation names) to observe with ``observe`` although the jar's
    #: counters could count them (`compile_topology` sets it for a point the plan holds twice).
    observed_points: frozenset[str] = attrs.field(default=frozenset(), converter=frozenset)
    #: What a user processor's ``context.application_id()`` returns (None: the test driver's default).
    application_id: str | None = None
    #: Replay: the test driver's clock for the user processors (`ProcessorClock`).
    processor_clock: ProcessorClock | None = None
    #: Streaming: the query's checkpoint location, under which an idle-close aggregation keeps
    #: the markers that tell its tasks when it last had a record (`streamsdsl.compiler.idle_channel`).
    checkpoint_location: str | None = None


def compile_topology(topology: Topology, raw_source: RawSource, options: CompileOptions | None = None) -> CompiledTopology:
    """Lower ``topology`` with ``options`` (`CompileOptions`); ``raw_source(node)`` returns the
    raw record DataFrame of a source. The result names the operator of each stateful node
    (`CompiledTopology.operators`)."""
    options = options or CompileOptions()
    compiled, lowering = _compile(topology, raw_source, options)
    twice = _counted_twice(compiled, lowering)
    if twice:
        # a drop point the plan holds twice (two readers of its frame): its counter would count
        # each record twice, where an observation of it counts it once
        compiled, _ = _compile(topology, raw_source, attrs.evolve(options, observed_points=twice))
    return compiled


def _counted_twice(compiled: CompiledTopology, lowering: Lowering) -> frozenset[str]:
    """The drop points whose counter appears more than once in ``compiled``'s plan."""
    if compiled.output is None or not lowering.counters:
        return frozenset()
    plan = compiled.output._jdf.queryExecution().analyzed().toString()
    return frozenset(name for name, (udf_name, _) in lowering.counters.items() if plan.count(f"{udf_name}(") > 1)


def _compile(topology: Topology, raw_source: RawSource, options: CompileOptions) -> tuple[CompiledTopology, Lowering]:
    handler = options.deserialization_handler
    choices = OperatorChoices(options.operator)
    if options.mode is PlanMode.REPLAY:
        lowering: Lowering = ReplayLowering(raw_source, handler, options.carry or ReplayCarry(), choices=choices,
                                            positions=options.positions)
    else:
        lowering = lowering_for(options.mode)(raw_source, handler, choices)
        if options.carry is not None:
            lowering.initial = options.carry  # type: ignore[attr-defined]
    lowering.flush = options.flush
    lowering.observed_points = options.observed_points
    lowering.topology = topology  # rules that read a parent's IR node (suppress folds into its aggregation)
    lowering.application_id = options.application_id
    lowering.processor_clock = options.processor_clock
    lowering.checkpoint_location = options.checkpoint_location
    _ship_user_code_by_value(topology)
    needed = _needed(topology)
    for node in topology.topological_order():
        if node.name in needed and node.name not in lowering.frames:  # a processor's rule lowers its sources first
            lowering.frames[node.name] = lowering.lower(node)
    sinks: list[CompiledSink] = []
    outputs: list[DataFrame] = []
    for i, node in enumerate(topology.sinks):
        frame = lowering.frames[node.name]
        key_serde = node.key_serde or frame.key.serde
        value_serde = node.value_serde or frame.value
        sinks.append(CompiledSink(i, node, frame.key, key_serde, value_serde))
        outputs.append(frame.df.select(*reused_columns(
            ("sink", node, i, frame.key, frame.value, key_serde, value_serde),
            lambda: _sink_columns(node, i, frame.key, frame.value, key_serde, value_serde))))
    outputs.extend(lowering.dead_letters)
    outputs.extend(_unread_processors(topology, lowering))
    output = None
    for df in outputs:
        output = df if output is None else output.unionByName(df)
    counters = {name: counter.counted() for name, (_, counter) in lowering.counters.items()}
    return CompiledTopology(topology, lowering.mode, dict(lowering.frames), tuple(sinks), output,
                            tuple(lowering.persisted), bool(lowering.dead_letters),
                            lowering if isinstance(lowering, ReplayLowering) else None, dict(choices.by_node),
                            counters), lowering
