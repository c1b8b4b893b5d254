"""Lowering of the stateful nodes: aggregations of every window kind, and cogroup (KIP-150).

count and Column aggregations without windows run on Spark's own aggregation; built-in
aggregations (count, numeric reduce(operator.add | max | min), `Aggregations`) run on the JVM
operator (`streamsdsl.compiler.jvm_operator`) when it is loaded; everything else runs on the
Python stateful processor (`streamsdsl.compiler.processors`) around the semantics core.
Records a processor cannot take (null keys) are counted and left out before it; the drops and
emit-final records it reports are counted with ``observe()`` and removed right after it.
"""

from __future__ import annotations

import attrs
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import StructType, _parse_datatype_string

from streamsdsl import ir
from streamsdsl.records import GENERATED_STORE_NAME
from streamsdsl.compiler.event_time import stateful_downstream, transform_with_state
from streamsdsl.compiler.columns import CARRIED_STATE, CLOSE_THRESHOLD, DROPPED, EMIT_FINAL, EVENT_METRIC, EVENT_VALUE
from streamsdsl.compiler.columns import FINAL_KEY_ORDER, FRAME_COLUMNS, HEADERS_TYPE, INPUT_INDEX, OUTPUT_POSITION
from streamsdsl.compiler.columns import DROPPED_NULL_VALUE, POSITION_TYPE, SOURCE_POSITION
from streamsdsl.compiler.jvm_operator import Backend
from streamsdsl.compiler.frame import Frame
from streamsdsl.compiler.idle_channel import channel_directory
from streamsdsl.compiler import jvm_operator
from streamsdsl.compiler.jvm_operator import JvmAggregate
from streamsdsl.compiler.lowering import Lowering, PlanMode, regroup
from streamsdsl.compiler.processors import OUTPUT_FIELDS, AggregateConfig, AggregateInput, ReplayAggregateProcessor
from streamsdsl.compiler.operator_input import operator_rows, records_by_key
from streamsdsl.compiler.processors import state_schema, windows_type
from streamsdsl.compiler.serde_exprs import convert_column
from streamsdsl.values.windows import SessionWindows, SlidingWindows, TimeWindows
from streamsdsl.errors import OperationNotDefinedError, TopologyError
from streamsdsl.semantics.kernels import FlushPolicy
from streamsdsl.operators.descriptions import AggregateDescription, description_of
from streamsdsl.operators.functions import agg_functions

__all__: list[str] = []


def _window_kind(windows: SessionWindows | TimeWindows | SlidingWindows | None) -> str:
    """How explain() names a window kind."""
    if windows is None:
        return "unwindowed"
    if isinstance(windows, SessionWindows):
        return "session windows"
    if isinstance(windows, SlidingWindows):
        return "sliding windows"
    return "tumbling windows" if windows.advance_ms == windows.size_ms else "hopping windows"


def _output_schema(key_type: str, value_type: str, fields: tuple[str, ...]) -> StructType:
    """The processor's output schema: the frame columns plus its event (and replay) columns."""
    types = {"key": key_type, "value": value_type, "timestamp": "bigint", "headers": HEADERS_TYPE,
             SOURCE_POSITION: "bigint", OUTPUT_POSITION: POSITION_TYPE, FINAL_KEY_ORDER: "string",
             EVENT_METRIC: "string", EVENT_VALUE: "double", CLOSE_THRESHOLD: "bigint",
             CARRIED_STATE: windows_type(value_type)}
    return _parse_datatype_string(", ".join(f"{f} {types[f]}" for f in fields))


def _run_processor(lowering: Lowering, node: str, inp: DataFrame, config: AggregateConfig,
                   jvm: JvmAggregate | None = None) -> DataFrame:
    """Run the stateful processor (the JVM operator with ``jvm``, else the Python one) over
    ``inp`` (null keys counted and left out first) and return its records; its metric events are
    counted and removed right after it."""
    names = config.input_names or (node,)
    if len(names) > 1:  # a cogroup: each input's aggregate processor counts its own drops
        for i, name in enumerate(names):
            inp = lowering.drop_counted(inp, name, F.col("key").isNotNull() | (F.col(INPUT_INDEX) != i))
    else:
        inp = lowering.drop_counted(inp, names[0], F.col("key").isNotNull())
    inp = lowering.operator_input(inp, config, INPUT_INDEX if config.cogroup and not config.emit_on_close else None)
    initial = lowering.initial_state(inp.sparkSession, node, config.key.serde.spark_type,
                                     windows_type(config.value_out.spark_type))
    if lowering.initial_stream_time(node) >= 0:
        config = attrs.evolve(config, stream_time_floor=lowering.initial_stream_time(node))
    if jvm is not None:
        replay = lowering.mode is PlanMode.REPLAY
        fields = ReplayAggregateProcessor.fields if replay else OUTPUT_FIELDS
        schema = _output_schema(config.key.spark_type, config.value_out.spark_type, fields)
        out = jvm_operator.apply_jvm(inp, config, jvm, schema, replay=replay, event_time_out=not replay and
                                     stateful_downstream(lowering.topology, node), initial_state=initial)
    else:
        processor = lowering.processor(config, state_schema(config.value_out.spark_type))
        schema = _output_schema(config.key.spark_type, config.value_out.spark_type, processor.fields)
        packed = records_by_key(operator_rows(inp), pack=lowering.mode is PlanMode.STREAMING)
        time_mode = "ProcessingTime" if config.idle_close_ms is not None else "EventTime"
        out = transform_with_state(lowering.mode is PlanMode.STREAMING, lowering.topology, node, packed.groupBy("key"),
                                   processor, schema, time_mode,
                                   initial_state=None if initial is None else initial.groupBy("key"))
    out = lowering.after_processor(out, inp, config)
    metric, count = F.col(EVENT_METRIC), F.col(EVENT_VALUE)
    final_latency = F.when(metric == EMIT_FINAL, count)
    if len(names) > 1:  # drop events carry their input's index (`DROPPED`)
        out = lowering.observe(out, node, "output", dropped=F.lit(None).cast("double"), final_latency=final_latency)
        index = F.coalesce(F.get(F.col(OUTPUT_POSITION), 0), F.lit(0))
        for i, name in enumerate(names):
            out = lowering.observe(out, name, "output", dropped=F.when((metric == DROPPED) & (index == i), count))
            out = lowering.observe(out, name, "null-value",
                                   dropped=F.when((metric == DROPPED_NULL_VALUE) & (index == i), count))
    else:
        out = lowering.observe(out, node, "output", dropped=F.when(metric == DROPPED, count),
                               final_latency=final_latency)
        out = lowering.observe(out, node, "null-value", dropped=F.when(metric == DROPPED_NULL_VALUE, count))
    return out.filter(metric.isNull()).select(*FRAME_COLUMNS)


def _operator_columns(df: DataFrame, *extra: str) -> DataFrame:
    """The frame columns a processor reads (every input column costs a conversion per record)."""
    return df.select("key", "value", "timestamp", "headers", SOURCE_POSITION, OUTPUT_POSITION, *extra)


def _aggregate(self: Lowering, node: ir.AggregateNode, final_results: int | None = None) -> Frame:
    """Unwindowed (and, through the subclasses' fields, windowed) aggregation of one stream.

    ``final_results`` (a delay in ms): the aggregation followed by ``suppress(until_window_closes)``
    as one operator (`streamsdsl.semantics.suppress.FinalResultsWindowing`), on the Python
    operator: the JVM operator does not implement the suppress node's release rule."""
    d: AggregateDescription = description_of(node, [self.parent(node)], self.topology)
    frame = regroup(self.parent(node), node.key_serde, None)
    value_out = d.value
    windows = d.windows
    if windows is None:
        native = _native_column(node.agg)
        if native is not None and self.flush is FlushPolicy.EVERY_WRITE and not self.native_per_record:
            if not isinstance(node.agg, ir.CountAgg):
                raise OperationNotDefinedError(
                    f"{node.name}: a pyspark Column aggregation with statestore.cache.max.bytes = 0 on a streaming "
                    "query: Spark's own aggregation forwards the latest value per key and micro-batch, not every "
                    "write. Leave statestore.cache.max.bytes unset, or aggregate with Python functions.")
            native = None  # count() on the operator, which forwards every write
        if native is not None and self.mode is PlanMode.STREAMING and stateful_downstream(self.topology, node.name):
            native = None  # on the operator, which passes its event time on to the stateful operators below
        if native is not None and getattr(self, "initial", None) is not None:
            native = None  # continuing a backfill: on the operator, which starts from the backfill's state
        if (native is not None and self.mode is PlanMode.STREAMING and isinstance(node.agg, ir.CountAgg)
                and not GENERATED_STORE_NAME.search(node.store)):
            native = None  # a named store is queryable (KafkaStreams.store): on the operator, whose state it reads
        if native is not None:
            valid = F.col("key").isNotNull() & F.col("value").isNotNull()
            df = self.drop_counted(frame.df, node.name, valid)
            self.choices.record(node.name, Backend.NATIVE)
            out = self.native_aggregate(node.name, df, native, value_out.spark_type,
                                        per_source_record=not _repartitioned(self, node, 0))
            return Frame(out, frame.key, value_out, is_table=True)
    # (a Column aggregation has no Python functions: it reaches here only where Spark's own
    # aggregation cannot run it, and agg_functions says so)
    functions = d.functions[0] if d.functions else agg_functions(node.agg)
    idle = _check_idle_close(self, d)
    config = AggregateConfig(
        node.name, d.key, value_out, d.windowing(self.flush, final_results),
        (AggregateInput(frame.value, functions, _repartitioned(self, node, 0)),),
        emit_on_close=final_results is not None or d.emit_on_close,
        function_names=d.function_names, flush=self.flush, state_name=node.store, idle_close_ms=d.idle_close_ms,
        **_idle_clock(self, node, d.idle_close_ms),  # type: ignore[arg-type]
        **_idle_channel(self, node, d.idle_close_ms),  # type: ignore[arg-type]
    )
    form = jvm_operator.builtin_form(node.agg, (frame.value,), value_out, frame.key.serde,
                                     isinstance(windows, SessionWindows))
    if idle is not None:
        form = idle
    elif final_results is not None:
        form = "suppress(until_window_closes) folded in: the JVM operator does not implement its release rule"
    elif self.flush is FlushPolicy.EVERY_WRITE and not isinstance(form, str):
        form = "statestore.cache.max.bytes=0: the JVM operator forwards through its record cache"
    jvm = self.choices.choose(node.name, form, frame.df.sparkSession, _window_kind(windows))
    df = _operator_columns(frame.df)
    if jvm is not None:
        df = jvm_operator.prepare_input(df, jvm)
    out = _run_processor(self, node.name, df, config, jvm)
    return Frame(out, config.key, value_out, is_table=True)




def _check_idle_close(self: Lowering, d: AggregateDescription) -> str | None:
    """Why an idle-close aggregation runs on the Python operator, if it must: in the test
    driver's replay (the JVM operator's replay has no idle close), or streaming with a stateful
    operator below, whose watermark the operator's output event time carries, which Spark's Java
    API names only in event-time mode."""
    if d.idle_close_ms is None:
        return None
    if self.mode is not PlanMode.STREAMING:
        return f"idle close ({d.idle_close_ms} ms) in the test driver's replay runs on the Python operator"
    if stateful_downstream(self.topology, d.name):
        return (f"idle close ({d.idle_close_ms} ms) with a stateful operator below runs on the Python operator's "
                "processing-time timers")
    return None


def _idle_clock(self: Lowering, node: ir.Node, idle_close_ms: int | None) -> dict[str, object]:
    """The replay's wall clock for an idle-close aggregation (`AggregateConfig.wall_clock`,
    ``idle_at``, ``idle_last_input_at``): the driver's clock, and in an
    ``advance_wall_clock_time`` run where what the idle close emits goes (the advance's position,
    the node's place in the topology) and the aggregation's last input time, which the driver
    learnt from the earlier runs (`ReplayCarry.idle_last_input_at`)."""
    clock = getattr(self, "processor_clock", None)
    if idle_close_ms is None or self.mode is PlanMode.STREAMING or clock is None:
        return {}
    if not clock.punctuate_wall_clock:
        return {"wall_clock": clock.system_time}
    carry = getattr(self, "carry", None)
    last = -1 if carry is None else carry.idle_last_input_at.get(node.name, -1)
    return {"wall_clock": clock.system_time, "idle_at": (clock.position, self.topology.nodes.index(node)),
            "idle_last_input_at": last}


def _idle_channel(self: Lowering, node: ir.Node, idle_close_ms: int | None) -> dict[str, object]:
    """Streaming with idle close: where the aggregation's tasks tell each other when it last had
    a record (`AggregateConfig.idle_channel`, under the query's checkpoint)."""
    if idle_close_ms is None or self.mode is not PlanMode.STREAMING:
        return {}
    checkpoint = getattr(self, "checkpoint_location", None)
    if checkpoint is None:
        raise TopologyError(
            f"{node.name}: idle close ({idle_close_ms} ms) in a streaming query needs the query's checkpoint "
            "location, where the aggregation's tasks record when it last had a record: compile it with "
            "CompileOptions(checkpoint_location=...) (KafkaStreams and the test driver pass theirs).")
    return {"idle_channel": channel_directory(checkpoint, node.store)}


def _repartitioned(self: Lowering, node: ir.Node, port: int) -> bool:
    """Whether the input ``port`` of ``node`` reads a repartition topic (Kafka's task processes
    and commits each of its records apart)."""
    return isinstance(self.topology.node(node.parents[port]), ir.RepartitionNode)


def _native_column(spec: ir.AggSpec) -> Column | None:
    """The Spark aggregate of a count or a Column aggregation (None: a Python aggregation)."""
    if isinstance(spec, ir.CountAgg):
        return F.count(F.lit(1))
    if isinstance(spec, ir.ReduceAgg) and isinstance(spec.reducer, ir.ColumnFn):
        return spec.reducer.column
    if isinstance(spec, ir.AggregateAgg) and isinstance(spec.aggregator, ir.ColumnFn):
        return spec.aggregator.column
    return None


def _cogroup(self: Lowering, node: ir.CogroupAggregateNode) -> Frame:
    """One stateful operator over the union of all inputs: each row tagged with its input
    index and its value carried in the field ``v<i>`` of a common struct column."""
    frames = [self.parent(node, i) for i in range(len(node.parents))]
    d: AggregateDescription = description_of(node, frames, self.topology)
    key_serde = d.key_serde
    value_out = d.value
    idle = _check_idle_close(self, d)
    form = jvm_operator.builtin_form(None, tuple(f.value for f in frames), value_out, key_serde,
                                     isinstance(node.windows, SessionWindows), cogroup=node)
    if idle is not None:
        form = idle
    elif self.flush is FlushPolicy.EVERY_WRITE and not isinstance(form, str):
        form = "statestore.cache.max.bytes=0: the JVM operator forwards through its record cache"
    jvm = self.choices.choose(node.name, form, frames[0].df.sparkSession, _window_kind(node.windows))
    payload_types = [f.value.spark_type for f in frames]
    parts = []
    for i, f in enumerate(frames):
        key = convert_column(F.col("key"), f.key.serde, key_serde) if f.key.serde != key_serde else F.col("key")
        payload = F.struct(*[
            (F.col("value") if j == i else F.lit(None)).cast(t).alias(f"v{j}") for j, t in enumerate(payload_types)
        ])
        if jvm is not None:  # the value's presence and its number, not the value itself
            part = jvm_operator.prepare_input(f.df, jvm, i).select(
                key.alias("key"), "value", "timestamp", "headers", SOURCE_POSITION, OUTPUT_POSITION,
                F.lit(i).alias(INPUT_INDEX), jvm_operator.NUMBER)
        else:
            part = f.df.select(key.alias("key"), payload.alias("value"), "timestamp", "headers", SOURCE_POSITION,
                               OUTPUT_POSITION, F.lit(i).alias(INPUT_INDEX))
        parts.append(part)
    union = parts[0]
    for p in parts[1:]:
        union = union.unionByName(p)
    config = AggregateConfig(
        node.name, d.key, value_out, d.windowing(self.flush),
        tuple(AggregateInput(f.value, fns, _repartitioned(self, node, i))
              for i, (f, fns) in enumerate(zip(frames, d.functions))),
        emit_on_close=d.emit_on_close, cogroup=True, flush=self.flush, input_names=node.agg_names,
        state_name=node.store, idle_close_ms=d.idle_close_ms,
        **_idle_clock(self, node, d.idle_close_ms),  # type: ignore[arg-type]
        **_idle_channel(self, node, d.idle_close_ms),  # type: ignore[arg-type]
    )
    # Each input stream's aggregate processor keeps its own stream time in Kafka Streams: in
    # replay the running max is taken per input. With emit on close (beyond Kafka Streams) one
    # stream time spans all inputs, so that a window emitted as final is final for every input.
    return Frame(_run_processor(self, node.name, union, config, jvm), config.key, value_out, is_table=True)
