"""Lowering: one rule per IR node type (``functools.singledispatch``), applied bottom-up."""

from __future__ import annotations

import functools
from typing import Any, Callable

import attrs
from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql.types import LongType, StructField, StructType, _parse_datatype_string

from streamsdsl import ir
from streamsdsl.compiler.frame import CTL_TYPE, FRAME_COLUMNS, ORD_TYPE, Frame, KeyCodec, SessionKeyCodec, TimeKeyCodec
from streamsdsl.compiler.processors import (
    DROPPED,
    DROPPED_RUNNING_TOTAL,
    AggregateConfig,
    SessionAggregateProcessor,
    TableAggregateProcessor,
    TimeWindowAggregateProcessor,
)
from streamsdsl.compiler.python_ops import apply_python
from streamsdsl.compiler.serde_exprs import convert_column, deserialize
from streamsdsl.errors import InvalidTypeError, OperationNotDefinedError
from streamsdsl.semantics.aggregation import AggFunctions, agg_functions
from streamsdsl.semantics.sliding import SlidingWindowing
from streamsdsl.semantics.timewindow import TimeWindowing, Windowing
from streamsdsl.dsl.serdes import DEFAULT_SERDE, Serde, Serdes
from streamsdsl.dsl.windows import SessionWindows, SlidingWindows, TimeWindows

REPLAY = "replay"
STREAMING = "streaming"


@attrs.define
class LoweringContext:
    """Mutable state of one compilation: the frames lowered so far."""

    mode: str
    raw_source: Callable[[ir.SourceNode], DataFrame]
    deserialization_handler: str = "log_and_fail"
    frames: dict[str, Frame] = attrs.field(factory=dict)
    persisted: list[DataFrame] = attrs.field(factory=list)

    def cached(self, df: DataFrame) -> DataFrame:
        """Replay mode: cache a DataFrame read several times in one run."""
        from pyspark import StorageLevel

        df = df.persist(StorageLevel.MEMORY_ONLY)
        self.persisted.append(df)
        return df

    @property
    def replay(self) -> bool:
        return self.mode == REPLAY

    def parent(self, node: ir.Node, i: int = 0) -> Frame:
        return self.frames[node.parents[i]]


@functools.singledispatch
def lower(node: ir.Node, ctx: LoweringContext) -> Frame:
    """Lower ``node`` given its lowered parents; every concrete node type registers a rule."""
    raise OperationNotDefinedError(f"No lowering rule for IR node type {type(node).__name__} ({node.name}).")


# --- helpers ------------------------------------------------------------------------------------


def _is_data() -> Column:
    return F.col("_ctl").isNull()


def _ctl_col(node: str, metric: str, value: Column | None = None) -> Column:
    """A control-row struct (a metric event) of CTL_TYPE."""
    return F.struct(
        F.lit(node).alias("node"), F.lit(metric).alias("metric"),
        (value if value is not None else F.lit(1.0)).cast("double").alias("value"),
        *[F.lit(None).cast(t).alias(n) for n, t in _CTL_RAW_TYPES],
    )


_CTL_RAW_TYPES = (("error", "string"), ("topic", "string"), ("partition", "int"), ("offset", "bigint"),
                  ("raw_key", "binary"), ("raw_value", "binary"))


def _serde_of_type(dtype: Any) -> Serde | None:
    name = dtype.simpleString()
    return {"string": Serdes.String(), "bigint": Serdes.Long(), "int": Serdes.Integer(),
            "double": Serdes.Double(), "binary": Serdes.Bytes()}.get(name)


def _user_column(frame: Frame, fn: ir.ColumnFn, what: str) -> tuple[Column, Serde]:
    column = fn.column
    dtype = frame.df.select(column.alias("_probe")).schema["_probe"].dataType
    serde = _serde_of_type(dtype)
    simple = dtype.simpleString()
    if serde is not None:
        return column, serde
    if simple in ("smallint", "tinyint"):
        return column.cast("int"), Serdes.Integer()
    if simple == "float":
        return column.cast("double"), Serdes.Double()
    if simple == "boolean":
        return F.when(column, F.lit("true")).when(~column, F.lit("false")), DEFAULT_SERDE
    if simple.startswith("decimal"):
        return column.cast("string"), DEFAULT_SERDE
    if simple in ("date", "timestamp", "timestamp_ntz"):
        text = F.regexp_extract(F.to_json(F.array(column.cast("string"))), r"^\[(.*)\]$", 1)
        return F.when(column.isNotNull(), text), DEFAULT_SERDE
    return F.to_json(column), DEFAULT_SERDE


def _with_stream_time(df: DataFrame, partition_by: str | None = None, *, null_values_count: bool = True) -> DataFrame:
    """Replay mode: Kafka Streams' stream time after each record, a running max in pipe order
    over the records that reach the operator (null keys excluded: they are dropped first; null
    values too where the operator drops them before advancing stream time). With
    ``partition_by`` the running max is taken per value of that column (cogroup: per input)."""
    w = (Window.partitionBy(partition_by) if partition_by else Window).orderBy("_seq", "_ord")
    w = w.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    counts = _is_data() & F.col("key").isNotNull()
    if not null_values_count:
        counts = counts & F.col("value").isNotNull()
    st = F.max(F.when(counts, F.col("timestamp"))).over(w)
    return df.withColumn("_st", F.coalesce(st, F.lit(-1).cast("bigint")))


# --- sources and stateless steps -------------------------------------------------------------


@lower.register
def _(node: ir.SourceNode, ctx: LoweringContext) -> Frame:
    raw = ctx.raw_source(node)
    key_serde = node.key_serde or DEFAULT_SERDE
    value_serde = node.value_serde or DEFAULT_SERDE
    # Source order: pipe order in replay; (partition, offset) when streaming.
    seq = F.col("_seq") if "_seq" in raw.columns else F.shiftleft(F.col("partition").cast("bigint"), 40) + F.col("offset")
    common = [
        F.col("timestamp").cast("bigint").alias("timestamp"),
        F.coalesce(F.col("headers"), F.array().cast("array<struct<key:string,value:binary>>")).alias("headers"),
        seq.cast("bigint").alias("_seq"),
        F.array().cast(ORD_TYPE).alias("_ord"),
        F.lit(None).cast("string").alias("_okey"),
    ]
    if ctx.deserialization_handler == "log_and_continue":
        df = _deserialize_or_skip(raw, node, key_serde, value_serde, common)
    else:
        df = raw.select(
            deserialize(F.col("key"), key_serde, "key").alias("key"),
            deserialize(F.col("value"), value_serde, "value").alias("value"),
            *common,
            F.lit(None).cast(CTL_TYPE).alias("_ctl"),
        )
    if not ctx.replay:
        # Stream time on Spark is the event-time watermark; the operator gets event time as a
        # plain long so Spark drops nothing before Kafka Streams' own drop rule runs.
        df = df.withColumn("_et", F.timestamp_millis(F.col("timestamp")))
        df = df.withWatermark("_et", "0 milliseconds").drop("_et")
    return Frame(df, KeyCodec(key_serde), value_serde, control_rows=ctx.deserialization_handler == "log_and_continue")


def _deserialize_or_skip(raw: DataFrame, node: ir.SourceNode, key_serde: Serde, value_serde: Serde,
                         common: list[Column]) -> DataFrame:
    """``log_and_continue``: a record that cannot be deserialized becomes a control row carrying
    the raw record and the error (counted as dropped; written to the dead-letter topic when one
    is configured) instead of failing the query."""
    from streamsdsl.compiler.frame import DESERIALIZATION_ERROR
    from streamsdsl.compiler.serde_exprs import decode, invalid_bytes

    key_bad, key_reason = invalid_bytes(F.col("key"), key_serde)
    value_bad, value_reason = invalid_bytes(F.col("value"), value_serde)
    error = F.when(key_bad, F.concat(F.lit(f"Serdes.{key_serde.name}() cannot deserialize the record key: "), key_reason)).when(
        value_bad, F.concat(F.lit(f"Serdes.{value_serde.name}() cannot deserialize the record value: "), value_reason)
    )
    bad = key_bad | value_bad
    ctl = F.when(
        bad,
        F.struct(
            F.lit(node.name).alias("node"), F.lit(DESERIALIZATION_ERROR).alias("metric"), F.lit(1.0).alias("value"),
            error.alias("error"), F.col("topic").alias("topic"), F.col("partition").cast("int").alias("partition"),
            F.col("offset").cast("bigint").alias("offset"), F.col("key").alias("raw_key"),
            F.col("value").alias("raw_value"),
        ),
    ).cast(CTL_TYPE)
    return raw.select(
        F.when(~bad, decode(F.col("key"), key_serde)).alias("key"),
        F.when(~bad, decode(F.col("value"), value_serde)).alias("value"),
        *common,
        ctl.alias("_ctl"),
    )


def _column_condition(predicate: ir.ColumnFn, negate: bool) -> Column:
    """A boolean Column predicate; null counts as false (as a Java predicate returning false)."""
    cond = F.coalesce(predicate.column.cast("boolean"), F.lit(False))
    return ~cond if negate else cond


@lower.register
def _(node: ir.FilterNode, ctx: LoweringContext) -> Frame:
    frame = ctx.parent(node)
    if isinstance(node.predicate, ir.ColumnFn):
        return frame.with_df(frame.df.filter(~_is_data() | _column_condition(node.predicate, node.negate)))
    pred, negate = node.predicate.fn, node.negate

    def step(k: Any, v: Any) -> list[tuple[Any, Any]]:
        return [(k, v)] if bool(pred(k, v)) != negate else []

    return apply_python(frame, node.name, step)


@lower.register
def _(node: ir.MapValuesNode, ctx: LoweringContext) -> Frame:
    frame = ctx.parent(node)
    if isinstance(node.mapper, ir.ColumnFn):
        column, serde = _user_column(frame, node.mapper, "value")
        df = frame.df.withColumn("value", F.when(_is_data(), column))
        return frame.with_df(df, value=serde)
    mapper = node.mapper.fn
    return apply_python(frame, node.name, lambda k, v: [(k, mapper(v))], out_value=DEFAULT_SERDE)


def _pair(result: Any, node: ir.Node) -> tuple[Any, Any]:
    if isinstance(result, (tuple, list)) and len(result) == 2:
        return result[0], result[1]
    raise InvalidTypeError(
        f"{node.name}: the mapper must return a (key, value) pair (got {type(result).__name__}: {result!r})."
    )


@lower.register
def _(node: ir.MapNode, ctx: LoweringContext) -> Frame:
    frame = ctx.parent(node)
    mapper = node.mapper.fn
    return apply_python(
        frame, node.name, lambda k, v: [_pair(mapper(k, v), node)],
        out_key=KeyCodec(DEFAULT_SERDE), out_value=DEFAULT_SERDE,
    )


@lower.register
def _(node: ir.FlatMapNode, ctx: LoweringContext) -> Frame:
    frame = ctx.parent(node)
    mapper = node.mapper.fn
    return apply_python(
        frame, node.name, lambda k, v: [_pair(p, node) for p in (mapper(k, v) or ())],
        out_key=KeyCodec(DEFAULT_SERDE), out_value=DEFAULT_SERDE, multi=True,
    )


@lower.register
def _(node: ir.FlatMapValuesNode, ctx: LoweringContext) -> Frame:
    frame = ctx.parent(node)
    mapper = node.mapper.fn
    return apply_python(
        frame, node.name, lambda k, v: [(k, x) for x in (mapper(v) or ())], out_value=DEFAULT_SERDE, multi=True
    )


@lower.register
def _(node: ir.SelectKeyNode, ctx: LoweringContext) -> Frame:
    frame = ctx.parent(node)
    if isinstance(node.selector, ir.ColumnFn):
        column, serde = _user_column(frame, node.selector, "key")
        return frame.with_df(frame.df.withColumn("key", F.when(_is_data(), column)), key=KeyCodec(serde))
    selector = node.selector.fn
    return apply_python(frame, node.name, lambda k, v: [(selector(k, v), v)], out_key=KeyCodec(DEFAULT_SERDE))


@lower.register
def _(node: ir.PeekNode, ctx: LoweringContext) -> Frame:
    frame = ctx.parent(node)
    action = node.action.fn

    def step(k: Any, v: Any) -> list[tuple[Any, Any]]:
        action(k, v)
        return [(k, v)]

    return apply_python(frame, node.name, step)


def _align(frame: Frame, key: KeyCodec, value: Serde) -> DataFrame:
    df = frame.df
    if frame.key != key:
        if frame.key.windowed or key.windowed:
            raise InvalidTypeError("merge: cannot merge a windowed stream with a non-windowed one.")
        df = df.withColumn("key", convert_column(F.col("key"), frame.key.serde, key.serde))
    if frame.value != value:
        df = df.withColumn("value", convert_column(F.col("value"), frame.value, value))
    return df.select(*FRAME_COLUMNS)


@lower.register
def _(node: ir.MergeNode, ctx: LoweringContext) -> Frame:
    left, right = ctx.parent(node, 0), ctx.parent(node, 1)
    key = left.key if left.key == right.key else KeyCodec(DEFAULT_SERDE)
    value = left.value if left.value == right.value else DEFAULT_SERDE
    df = _align(left, key, value).unionByName(_align(right, key, value))
    return Frame(df, key, value, control_rows=left.control_rows or right.control_rows)


@lower.register
def _(node: ir.RepartitionNode, ctx: LoweringContext) -> Frame:
    # Spark's shuffle in the aggregation does what the repartition topic does in Kafka
    # Streams; only a serde change (Grouped.with_serdes) is applied here.
    frame = ctx.parent(node)
    return _regroup(frame, node.key_serde, node.value_serde)


def _regroup(frame: Frame, key_serde: Serde | None, value_serde: Serde | None) -> Frame:
    df = frame.df
    key, value = frame.key, frame.value
    if key_serde is not None and key_serde != key.serde and not key.windowed:
        df = df.withColumn("key", convert_column(F.col("key"), key.serde, key_serde))
        key = KeyCodec(key_serde)
    if value_serde is not None and value_serde != value:
        df = df.withColumn("value", convert_column(F.col("value"), value, value_serde))
        value = value_serde
    return frame.with_df(df, key=key, value=value)


@lower.register
def _(node: ir.SinkNode, ctx: LoweringContext) -> Frame:
    # Serialization happens when the compiled topology binds its sinks (compiler.build).
    return ctx.parent(node)


# --- tables --------------------------------------------------------------------------------------


@lower.register
def _(node: ir.TableToStreamNode, ctx: LoweringContext) -> Frame:
    return attrs.evolve(ctx.parent(node), is_table=False)


@lower.register
def _(node: ir.TableFilterNode, ctx: LoweringContext) -> Frame:
    frame = ctx.parent(node)
    if isinstance(node.predicate, ir.ColumnFn):
        cond = _column_condition(node.predicate, node.negate)
        return frame.with_df(frame.df.withColumn("value", F.when(~_is_data() | cond, F.col("value"))))
    pred, negate = node.predicate.fn, node.negate

    def step(k: Any, v: Any) -> list[tuple[Any, Any]]:
        if v is None:
            return [(k, None)]
        return [(k, v if bool(pred(k, v)) != negate else None)]

    return apply_python(frame, node.name, step, out_value=frame.value)


@lower.register
def _(node: ir.TableMapValuesNode, ctx: LoweringContext) -> Frame:
    frame = ctx.parent(node)
    if isinstance(node.mapper, ir.ColumnFn):
        column, serde = _user_column(frame, node.mapper, "value")
        df = frame.df.withColumn("value", F.when(_is_data() & F.col("value").isNotNull(), column))
        return frame.with_df(df, value=serde)
    mapper = node.mapper.fn
    return apply_python(
        frame, node.name, lambda k, v: [(k, None if v is None else mapper(v))], out_value=DEFAULT_SERDE
    )


# --- aggregations ---------------------------------------------------------------------------------


def _agg_value_serde(node: ir.AggregateNode, frame: Frame) -> Serde:
    if node.value_serde is not None:
        return node.value_serde
    if isinstance(node.agg, ir.CountAgg):
        return Serdes.Long()
    if isinstance(node.agg, ir.ReduceAgg):
        return frame.value
    return DEFAULT_SERDE


def _processor_output_schema(key_type: str, value_type: str) -> StructType:
    return StructType(
        [
            StructField("key", _parse_datatype_string(key_type), True),
            StructField("value", _parse_datatype_string(value_type), True),
            StructField("timestamp", LongType(), True),
            StructField("headers", _parse_datatype_string("array<struct<key:string,value:binary>>"), True),
            StructField("_seq", LongType(), True),
            StructField("_ord", _parse_datatype_string(ORD_TYPE), True),
            StructField("_okey", _parse_datatype_string("string"), True),
            StructField("_ctl", _parse_datatype_string(CTL_TYPE), True),
            StructField("_thr", LongType(), True),
        ]
    )


def _operator_columns(frame: Frame, ctx: LoweringContext) -> DataFrame:
    """The frame's columns a stateful operator reads. Streaming without possible control rows
    leaves out ``_ctl`` and ``_okey`` (always null there): every input column is converted to
    Python for every record, which is most of a Python operator's cost."""
    if ctx.replay or frame.control_rows:
        return frame.df.select(*FRAME_COLUMNS)
    return frame.df.select(*[c for c in FRAME_COLUMNS if c not in ("_ctl", "_okey")])


def _processor_input(df: DataFrame, ctx: LoweringContext, partition_by: str | None = None, *,
                     null_values_count: bool = True) -> DataFrame:
    """The stateful operator's input: ``_st`` is the per-record stream time in replay mode and
    null when streaming (the processor then takes it from the watermark)."""
    if ctx.replay:
        return _with_stream_time(df, partition_by, null_values_count=null_values_count)
    return df.withColumn("_st", F.lit(None).cast("bigint"))


def _run_processor(inp: DataFrame, processor: Any, schema: StructType) -> DataFrame:
    return inp.groupBy("key").transformWithState(
        statefulProcessor=processor, outputStructType=schema, outputMode="Update", timeMode="EventTime"
    )


@lower.register
def _(node: ir.AggregateNode, ctx: LoweringContext) -> Frame:
    frame = _regroup(ctx.parent(node), node.key_serde, None)
    value_out = _agg_value_serde(node, frame)
    native = _native_aggregate_column(node.agg, frame)
    if native is not None:
        return _native_aggregate(node, frame, native, value_out, ctx)
    config = AggregateConfig(node.name, frame.key, frame.value, value_out, agg_functions(node.agg))
    schema = _processor_output_schema(frame.key.spark_type, value_out.spark_type)
    state = f"agg {value_out.spark_type}, ts bigint"
    out = _run_processor(_processor_input(_operator_columns(frame, ctx), ctx), TableAggregateProcessor(config, state), schema)
    return Frame(out.select(*FRAME_COLUMNS), frame.key, value_out, is_table=True)


def _native_aggregate_column(spec: ir.AggSpec, frame: Frame) -> Column | None:
    if isinstance(spec, ir.CountAgg):
        return F.count(F.lit(1))
    if isinstance(spec, ir.ReduceAgg) and isinstance(spec.reducer, ir.ColumnFn):
        return spec.reducer.column
    if isinstance(spec, ir.AggregateAgg) and isinstance(spec.aggregator, ir.ColumnFn):
        return spec.aggregator.column
    return None


def _native_aggregate(node: ir.AggregateNode, frame: Frame, column: Column, value_out: Serde, ctx: LoweringContext) -> Frame:
    """count / Column aggregations on Spark's own aggregation: a running aggregate per record in
    replay mode, a streaming ``groupBy().agg()`` in update mode when streaming; both give the
    same changelog (the latest aggregate per key per flush)."""
    df = frame.df
    valid = _is_data() & F.col("key").isNotNull() & F.col("value").isNotNull()
    # Control rows from upstream (skipped records, metric events) pass through.
    passthrough = df.filter(~_is_data()).select(
        F.lit(None).cast(frame.key.spark_type).alias("key"),
        F.lit(None).cast(value_out.spark_type).alias("value"),
        "timestamp", "headers", "_seq", "_ord", "_okey", "_ctl",
    )
    good = df.filter(valid)
    if ctx.replay:
        dropped = df.filter(_is_data() & ~valid).select(
            F.lit(None).cast(frame.key.spark_type).alias("key"),
            F.lit(None).cast(value_out.spark_type).alias("value"),
            "timestamp", "headers", "_seq", "_ord", "_okey",
            _ctl_col(node.name, DROPPED).alias("_ctl"),
        )
        w = Window.partitionBy("key").orderBy("_seq", "_ord").rowsBetween(Window.unboundedPreceding, Window.currentRow)
        agg = good.select(
            "key",
            column.over(w).cast(value_out.spark_type).alias("value"),
            F.max("timestamp").over(w).alias("timestamp"),
            "headers", "_seq",
            F.concat(F.col("_ord"), F.array(F.lit(0).cast("bigint"))).alias("_ord"),
            F.lit(None).cast("string").alias("_okey"),
            F.lit(None).cast(CTL_TYPE).alias("_ctl"),
        )
        return Frame(agg.unionByName(dropped).unionByName(passthrough), frame.key, value_out, is_table=True)
    # Streaming: one aggregation reads the input once. Records that cannot be aggregated (null
    # key or value) form one extra group whose running count becomes a metric event, so the
    # source is not read a second time just to count them.
    bad = ~valid
    agg = df.filter(_is_data()).groupBy(F.when(valid, F.col("key")).alias("key"), bad.alias("_bad")).agg(
        column.cast(value_out.spark_type).alias("value"),
        F.max("timestamp").alias("timestamp"),
        F.max("_seq").alias("_seq"),
        F.count(F.lit(1)).alias("_n"),
    ).select(
        "key", F.when(~F.col("_bad"), F.col("value")).alias("value"), "timestamp",
        F.array().cast("array<struct<key:string,value:binary>>").alias("headers"),
        "_seq", F.array(F.lit(0).cast("bigint")).alias("_ord"),
        F.lit(None).cast("string").alias("_okey"),
        F.when(F.col("_bad"), _ctl_col(node.name, DROPPED_RUNNING_TOTAL, F.col("_n"))).cast(CTL_TYPE).alias("_ctl"),
    )
    # A second branch reads the input again (Spark does not prune an always-false streaming
    # filter): only where control rows can reach this point.
    out = agg.unionByName(passthrough) if frame.control_rows else agg
    return Frame(out, frame.key, value_out, is_table=True)


@lower.register
def _(node: ir.SessionAggregateNode, ctx: LoweringContext) -> Frame:
    frame = _regroup(ctx.parent(node), node.key_serde, None)
    value_out = _agg_value_serde(node, frame)
    config = AggregateConfig(
        node.name, frame.key, frame.value, value_out, agg_functions(node.agg),
        gap=node.windows.inactivity_gap_ms, grace=node.windows.grace_period_ms,
        emit_on_close=node.emit.emits_on_close,
    )
    key_codec = SessionKeyCodec(frame.key.serde)
    schema = _processor_output_schema(key_codec.spark_type, value_out.spark_type)
    state = f"sessions array<struct<start:bigint,end:bigint,agg:{value_out.spark_type}>>"
    inp = _processor_input(_operator_columns(frame, ctx), ctx)
    out = _run_windowed(inp, SessionAggregateProcessor(config, state), schema, config, ctx)
    return Frame(out.select(*FRAME_COLUMNS), key_codec, value_out, is_table=True)


def _run_windowed(inp: DataFrame, processor: Any, schema: StructType, config: AggregateConfig,
                  ctx: LoweringContext) -> DataFrame:
    """Run a windowed processor; in replay mode with emit on close, give each final record the
    input record after which Kafka Streams emits it."""
    out = _run_processor(inp, processor, schema)
    if ctx.replay and config.emit_on_close:
        # The assignment reads the operator's input and output more than once: cache both so
        # the stateful operator runs once per replay (unpersisted by the driver after the run).
        inp, out = ctx.cached(inp), ctx.cached(out)
        out = _assign_close_records(out, inp, config.node)
    return out


def windowing_of(windows: TimeWindows | SlidingWindows) -> Windowing:
    """The semantics-core strategy of ``TimeWindows`` / ``SlidingWindows``."""
    if isinstance(windows, TimeWindows):
        return TimeWindowing(windows.size_ms, windows.advance_ms, windows.grace_period_ms)
    return SlidingWindowing(windows.time_difference_ms, windows.grace_period_ms)


def _time_key_codec(serde: Serde, windows: TimeWindows | SlidingWindows) -> KeyCodec:
    size = windows.size_ms if isinstance(windows, TimeWindows) else windows.time_difference_ms
    return TimeKeyCodec(serde, window_size_ms=size)


def _time_window_state(value_out: Serde) -> str:
    return f"windows array<struct<start:bigint,end:bigint,agg:{value_out.spark_type},ts:bigint,fin:boolean>>"


@lower.register
def _(node: ir.TimeWindowAggregateNode, ctx: LoweringContext) -> Frame:
    """Tumbling / hopping / sliding aggregation on the stateful operator (every aggregation,
    count included: Spark's ``window()`` aggregation has no grace-period drop rule, no
    per-record stream time and no sliding windows of Kafka's kind)."""
    frame = _regroup(ctx.parent(node), node.key_serde, None)
    value_out = _agg_value_serde(node, frame)
    config = AggregateConfig(node.name, frame.key, frame.value, value_out, agg_functions(node.agg),
                             emit_on_close=node.emit.emits_on_close)
    key_codec = _time_key_codec(frame.key.serde, node.windows)
    schema = _processor_output_schema(key_codec.spark_type, value_out.spark_type)
    windowing = windowing_of(node.windows)
    processor = TimeWindowAggregateProcessor(config, _time_window_state(value_out), windowing)
    inp = _processor_input(_operator_columns(frame, ctx), ctx, null_values_count=not windowing.drops_null_values)
    out = _run_windowed(inp, processor, schema, config, ctx)
    return Frame(out.select(*FRAME_COLUMNS), key_codec, value_out, is_table=True)


def _assign_close_records(out: DataFrame, inp: DataFrame, node: str) -> DataFrame:
    """Replay mode: give each pending on-close record the first input record whose stream time
    passes its threshold (Kafka Streams emits it right after that record); pending records
    whose threshold is never passed are not emitted. Adds the emit-final latency events."""
    times = inp.filter(_is_data() & F.col("key").isNotNull()).select(
        F.col("_seq").alias("_jseq"), F.col("_ord").alias("_jord"), F.col("_st").alias("_jst")
    )
    pending = out.filter(F.col("_thr").isNotNull()).withColumn("_rid", F.monotonically_increasing_id())
    rest = out.filter(F.col("_thr").isNull()).drop("_thr")
    matched = pending.join(times, F.col("_jst") > F.col("_thr"), "inner")
    first = matched.groupBy("_rid").agg(F.min(F.struct("_jseq", "_jord", "_jst")).alias("_first"))
    finals = pending.join(first, "_rid").withColumn("_seq", F.col("_first._jseq")).withColumn(
        "_ord", F.concat(F.col("_first._jord"), F.col("_ord"))
    )
    data = finals.select(*FRAME_COLUMNS)
    latency = finals.select(
        F.lit(None).cast(out.schema["key"].dataType).alias("key"),
        F.lit(None).cast(out.schema["value"].dataType).alias("value"),
        "timestamp", "headers", "_seq", "_ord", "_okey",
        _ctl_col(node, "emit-final-latency", F.col("_first._jst") - F.col("_thr") - 1).alias("_ctl"),
    )
    return rest.unionByName(data).unionByName(latency)


# --- cogroup (KIP-150) ------------------------------------------------------------------------------


@lower.register
def _(node: ir.CogroupAggregateNode, ctx: LoweringContext) -> Frame:
    """One stateful operator over the union of all inputs: each row tagged with its input
    index ``_src`` and its value carried in the field ``v<i>`` of a common struct column."""
    frames = [ctx.parent(node, i) for i in range(len(node.parents))]
    key_serde = node.key_serde or frames[0].key.serde
    if any(f.key.windowed for f in frames):
        raise InvalidTypeError(f"{node.name}: cannot cogroup a windowed stream.")
    payload_types = [f.value.spark_type for f in frames]
    parts = []
    for i, f in enumerate(frames):
        key = convert_column(F.col("key"), f.key.serde, key_serde) if f.key.serde != key_serde else F.col("key")
        payload = F.struct(*[
            (F.col("value") if j == i else F.lit(None)).cast(t).alias(f"v{j}") for j, t in enumerate(payload_types)
        ])
        parts.append(f.df.select(
            key.alias("key"), F.when(_is_data(), payload).alias("value"), "timestamp", "headers",
            "_seq", "_ord", "_okey", "_ctl", F.lit(i).alias("_src"),
        ))
    union = parts[0]
    for p in parts[1:]:
        union = union.unionByName(p)
    value_out = node.value_serde or DEFAULT_SERDE
    init = node.initializer.fn
    merger = node.merger.fn if node.merger is not None else None
    source_fns = tuple(AggFunctions(init, a.fn, merger) for a in node.aggregators)
    key_codec = KeyCodec(key_serde)
    windows = node.windows
    config = AggregateConfig(
        node.name, key_codec, DEFAULT_SERDE, value_out, source_fns[0],
        gap=windows.inactivity_gap_ms if isinstance(windows, SessionWindows) else 0,
        grace=windows.grace_period_ms if isinstance(windows, SessionWindows) else 0,
        emit_on_close=windows is not None and node.emit.emits_on_close,
        source_fns=source_fns, source_values=tuple(f.value for f in frames),
    )
    # Each input stream's aggregate processor keeps its own stream time in Kafka Streams: in
    # replay the running max is taken per input (``_src``). With emit on close (beyond Kafka
    # Streams) one stream time spans all inputs, so that a window emitted as final is final
    # for every input and no later record of a slower input changes it unseen.
    per_input = None if config.emit_on_close else "_src"
    inp = _processor_input(union, ctx, per_input, null_values_count=not isinstance(windows, SlidingWindows))
    if isinstance(windows, SessionWindows):
        out_key = SessionKeyCodec(key_serde)
        processor: Any = SessionAggregateProcessor(config, f"sessions array<struct<start:bigint,end:bigint,agg:{value_out.spark_type}>>")
    elif windows is not None:
        out_key = _time_key_codec(key_serde, windows)
        processor = TimeWindowAggregateProcessor(config, _time_window_state(value_out), windowing_of(windows))
    else:
        schema = _processor_output_schema(key_codec.spark_type, value_out.spark_type)
        out = _run_processor(inp, TableAggregateProcessor(config, f"agg {value_out.spark_type}, ts bigint"), schema)
        return Frame(out.select(*FRAME_COLUMNS), key_codec, value_out, is_table=True)
    schema = _processor_output_schema(out_key.spark_type, value_out.spark_type)
    out = _run_windowed(inp, processor, schema, config, ctx)
    return Frame(out.select(*FRAME_COLUMNS), out_key, value_out, is_table=True)
