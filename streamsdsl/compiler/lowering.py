"""Lowering: one rule per IR node type, applied bottom-up by a `Lowering` object.

`Lowering` dispatches on the node's type through one table (`streamsdsl.compiler.rules.RULES`):
the sources, sinks, stateless and table rules are here, the stateful ones in a module per family
(`streamsdsl.compiler.aggregations`, ``joins``, ...). How the plan counts drops is its base,
`streamsdsl.compiler.metrics.DropMetrics`. The two plan modes are two subclasses
(`streamsdsl.compiler.modes`) that override the few mode-specific steps declared here (ibis
compiles with a class the same way).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Callable, ClassVar

import attrs
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from streamsdsl import ir
from streamsdsl.records import DLQ_EXCEPTION, DLQ_HEADERS
from streamsdsl.compiler.columns import (
    CHILD,
    DEAD_LETTER_SINK,
    FINAL_KEY_ORDER,
    FRAME_COLUMNS,
    HEADERS_TYPE,
    OUTPUT_COLUMNS,
    OUTPUT_POSITION,
    POSITION_TYPE,
    SINK_INDEX,
    SOURCE_POSITION,
    SOURCE_TOMBSTONE,
)
from streamsdsl.compiler.frame import Frame, KeyCodec
from streamsdsl.compiler.jvm_operator import OperatorChoices
from streamsdsl.compiler.metrics import DropMetrics
from streamsdsl.operators.descriptions import MERGE_WINDOWED, merged_encoding, regrouped, selected_key
from streamsdsl.operators.functions import mapper_pair, null_keys_pass, value_mapper
from streamsdsl.semantics.kernels import FlushPolicy
from streamsdsl.compiler.python_ops import apply_python, filter_python, map_python
from streamsdsl.compiler.serde_exprs import RecordContext, convert_column, decode, deserialization_check, invalid_bytes
from streamsdsl.compiler.serde_exprs import key_as_json
from streamsdsl.dsl.options import DeserializationHandler
from streamsdsl.values.serdes import DEFAULT_SERDE, PlanSerde, Serdes
from streamsdsl.errors import InvalidTypeError, OperationNotDefinedError
if TYPE_CHECKING:
    from streamsdsl.compiler.processors import AggregateConfig, AggregateProcessor

__all__ = ["Lowering", "PlanMode"]

RawSource = Callable[[ir.SourceNode], DataFrame]


class PlanMode(enum.Enum):
    """How a compiled plan runs: as a streaming query, or as the test driver's batch replay."""

    STREAMING = "streaming"
    REPLAY = "replay"


class Lowering(DropMetrics):
    """Lowers one topology: holds the frames lowered so far and what the plan collects besides
    them (dead-letter records, DataFrames cached for a replay); counts drops as its base
    (`streamsdsl.compiler.metrics.DropMetrics`) does."""

    mode: ClassVar[PlanMode]
    #: When the aggregations forward their store writes (``statestore.cache.max.bytes``; set by
    #: `compile_topology` from its options): a cache flushed per record (streaming: per micro-batch),
    #: or every write.
    flush: FlushPolicy = FlushPolicy.PER_RECORD
    #: Whether Spark's native aggregation forwards one change per record (replay) rather than the
    #: latest per key and micro-batch (streaming).
    native_per_record: ClassVar[bool] = False
    def __init__(self, raw_source: RawSource,
                 handler: DeserializationHandler = DeserializationHandler.LOG_AND_FAIL,
                 choices: OperatorChoices | None = None) -> None:
        super().__init__()
        self.raw_source = raw_source
        self.handler = DeserializationHandler.parse(handler)
        #: Which operator runs each stateful node (the ``streamsdsl.operator`` setting it follows).
        self.choices = choices if choices is not None else OperatorChoices()
        self.frames: dict[str, Frame] = {}
        self.dead_letters: list[DataFrame] = []
        self.persisted: list[DataFrame] = []
        #: The topology being lowered (set by `compile_topology`), for rules that read a parent's IR node.
        self.topology: Any = None
        #: The application id a user processor's context gives (set by `compile_topology`).
        self.application_id: str | None = None
        #: Replay: the test driver's clock for its processors (`streamsdsl.compiler.user_processors.ProcessorClock`).
        self.processor_clock: Any = None
        #: Streaming: the query's checkpoint location (set by `compile_topology`; None: unknown).
        self.checkpoint_location: str | None = None
        #: The processors whose output carries each record's child (``forward(record, child_name)``).
        self.routed: dict[str, bool] = {}

    def parent(self, node: ir.Node, i: int = 0) -> Frame:
        """The lowered frame of ``node``'s ``i``-th parent: a processor's forwards to ``node``
        when the parent is a processor that may forward to one child only."""
        name = node.parents[i]
        frame = self.frames[name]
        if name in self.routed:  # forwarded to every child, or to this one
            return frame.with_df(frame.df.filter(F.col(CHILD).isNull() | (F.col(CHILD) == node.name)).drop(CHILD))
        return frame

    #: The rule of each node type (`streamsdsl.compiler.rules.RULES`, set by the plan modes).
    rules: ClassVar[Mapping[type[ir.Node], Callable[..., Frame]]] = {}

    def lower(self, node: ir.Node) -> Frame:
        """Lower ``node`` given its lowered parents, with the rule of its type."""
        rule = self.rule_for(type(node))
        if rule is None:
            raise OperationNotDefinedError(f"No lowering rule for IR node type {type(node).__name__} ({node.name}).")
        return rule(self, node)

    @classmethod
    def rule_for(cls, node_type: type[ir.Node]) -> Callable[..., Frame] | None:
        """The rule of ``node_type`` (or of the nearest base type that has one)."""
        for t in node_type.__mro__:
            if t in cls.rules:
                return cls.rules[t]
        return None

    @classmethod
    def has_rule(cls, node_type: type[ir.Node]) -> bool:
        """Whether ``node_type`` has a lowering rule."""
        return cls.rule_for(node_type) is not None

    # -- mode-specific steps (`streamsdsl.compiler.modes`) ----------------------------------------
    def with_event_time(self, df: DataFrame) -> DataFrame:
        """A source's records, with the event-time watermark where the mode has one."""
        raise NotImplementedError

    def operator_input(self, df: DataFrame, config: AggregateConfig, partition_by: str | None = None) -> DataFrame:
        """The rows a stateful processor reads (replay: with each record's stream time, and the
        state carried over from the previous run)."""
        raise NotImplementedError

    def processor(self, config: AggregateConfig, state_type: str) -> AggregateProcessor:
        """The stateful processor of this mode."""
        raise NotImplementedError

    def initial_state(self, spark: Any, node: str, key_type: str, state_type: str) -> Any:
        """The state ``node``'s operator starts from (streaming continuing a backfill: its keys'
        carried rows ``(key, state)``, `StreamingLowering.initial_state`); ``None``: none."""
        return None

    def continues(self, node: str) -> bool:
        """Whether ``node``'s operator starts from a backfill's state (`initial_state`): a join then
        runs on the Python operator, the one whose join operators take an initial state."""
        initial = getattr(self, "initial", None)
        return initial is not None and bool(initial.states.get(node))

    def initial_stream_time(self, node: str) -> int:
        """The stream time ``node`` starts from (-1: none; `StreamingLowering.initial_stream_time`)."""
        return -1

    def after_processor(self, out: DataFrame, inp: DataFrame, config: AggregateConfig) -> DataFrame:
        """The processor's output, completed where the mode needs it (replay: on-close records
        assigned to the record after which they are emitted)."""
        return out

    def native_aggregate(self, node: str, df: DataFrame, column: Column, value_type: str, *,
                         per_source_record: bool = False) -> DataFrame:
        """A count / Column aggregation per key on Spark's own aggregation, as a changelog
        (``per_source_record``: the record cache is flushed once per source record, not once
        per record reaching the aggregation)."""
        raise NotImplementedError


#: The column of a source's ``log_and_fail`` check (true, or the record's error raised).
_SOURCE_CHECKED = "_source_checked"


# --- sources and sinks ----------------------------------------------------------------------------


def _source_columns(node: ir.SourceNode, key_serde: PlanSerde, value_serde: PlanSerde, replay: bool,
                    handler: DeserializationHandler) -> tuple[list[Column], Column, Column | None]:
    """The select list of a source, its position column and (``log_and_fail``) the check that
    raises for a record its serdes cannot read; built once per source shape (`reused_columns`)."""
    return reused_columns(("source", node, key_serde, value_serde, replay, handler),
                          lambda: _build_source_columns(node, key_serde, value_serde, replay, handler))


def _build_source_columns(node: ir.SourceNode, key_serde: PlanSerde, value_serde: PlanSerde, replay: bool,
                          handler: DeserializationHandler) -> tuple[list[Column], Column, Column | None]:
    # Source order: pipe order in the driver; (partition, offset) when streaming.
    position = (F.col(SOURCE_POSITION) if replay
                else F.shiftleft(F.col("partition").cast("bigint"), 40) + F.col("offset")).cast("bigint")
    common = [
        F.col("timestamp").cast("bigint").alias("timestamp"),
        F.coalesce(F.col("headers"), F.array().cast(HEADERS_TYPE)).alias("headers"),
        position.alias(SOURCE_POSITION),
        F.array().cast(POSITION_TYPE).alias(OUTPUT_POSITION),
        F.lit(None).cast("string").alias(FINAL_KEY_ORDER),
    ]
    columns = [decode(F.col("key"), key_serde).alias("key"), decode(F.col("value"), value_serde).alias("value"),
               *common]
    check = None
    if handler is not DeserializationHandler.LOG_AND_CONTINUE:
        key_bad, _ = invalid_bytes(F.col("key"), key_serde)
        key_json = F.when(~key_bad, key_as_json(decode(F.col("key"), key_serde), key_serde))
        topic = node.topics[0] if len(node.topics) == 1 else None
        checks = [c for c in (
            deserialization_check(F.col("key"), key_serde, "key", RecordContext(node.name, position, topic=topic)),
            deserialization_check(F.col("value"), value_serde, "value",
                                  RecordContext(node.name, position, key_json, topic)),
        ) if c is not None]
        for c in checks:
            check = c if check is None else check & c
    return columns, position, check


_REUSED: dict[tuple[Any, ...], Any] = {}


def reused_columns(key: tuple[Any, ...], build: Callable[[], Any]) -> Any:
    """Column expressions built once per ``key`` and Spark context, then reused: unresolved
    expressions fit every plan, and building them costs a call into the JVM per operator, which
    is most of the planning time of a test-driver run. ``key`` must determine what ``build``
    returns (hashable IR nodes, serdes, codecs, flags)."""
    from pyspark import SparkContext

    full = (*key, id(SparkContext._active_spark_context))
    found = _REUSED.get(full)
    if found is None:
        if len(_REUSED) >= 512:
            _REUSED.clear()
        found = _REUSED[full] = build()
    return found


def _source(self: Lowering, node: ir.SourceNode, *, event_time: bool = True) -> Frame:
    """A source's records, deserialized (``event_time``: with the event-time watermark where the
    mode has one; a global table's source has none)."""
    raw = self.raw_source(node)
    key_serde = node.key_serde or DEFAULT_SERDE
    value_serde = node.value_serde or DEFAULT_SERDE
    columns, position, check = _source_columns(node, key_serde, value_serde, SOURCE_POSITION in raw.columns,
                                               self.handler)
    if self.handler is DeserializationHandler.LOG_AND_CONTINUE:
        df = _deserialize_or_skip(self, raw, node, key_serde, value_serde, columns, position)
    elif check is None:
        df = raw.select(*columns)
    else:
        # log_and_fail: each record is checked once (the check raises or is true), in a
        # projection that a filter reads. With the jar the check's message is declared not
        # deterministic, so Spark keeps that projection apart: there a column only the message
        # reads (the key, for a value's error) is read for a failing record only, where a filter
        # reads every column its condition names for every record. Without the jar, Spark pushes
        # the filter into the projection, which is the same check.
        df = raw.select("*", check.alias(_SOURCE_CHECKED)).filter(F.col(_SOURCE_CHECKED)).select(*columns)
    return Frame(self.with_event_time(df) if event_time else df, KeyCodec(key_serde), value_serde)


def _deserialize_or_skip(lowering: Lowering, raw: DataFrame, node: ir.SourceNode, key_serde: PlanSerde,
                         value_serde: PlanSerde, columns: list[Column], position: Column) -> DataFrame:
    """``log_and_continue``: a record that cannot be deserialized is counted as dropped and left
    out (``columns``: the source's select list without validation); the same records, raw and with Kafka Streams' error headers (KIP-1034), become the
    plan's dead-letter output (`DEAD_LETTER_SINK`)."""
    key_bad, key_reason = invalid_bytes(F.col("key"), key_serde)
    value_bad, value_reason = invalid_bytes(F.col("value"), value_serde)
    bad = key_bad | value_bad
    error = F.when(key_bad, F.concat(F.lit(f"{key_serde!r} cannot deserialize the record key: "), key_reason)).when(
        value_bad, F.concat(F.lit(f"{value_serde!r} cannot deserialize the record value: "), value_reason)
    )

    def header(name: str, value: Column) -> Column:
        return F.struct(F.lit(name).alias("key"), F.encode(value.cast("string"), "UTF-8").alias("value"))

    error_headers = F.array(*[header(n, v) for n, v in zip(DLQ_HEADERS, (
        F.lit(DLQ_EXCEPTION), error, F.col("topic"), F.col("partition"), F.col("offset")))])
    lowering.dead_letters.append(raw.filter(bad).select(
        F.lit(DEAD_LETTER_SINK).alias(SINK_INDEX), "key", "value", F.col("timestamp").cast("bigint").alias("timestamp"),
        F.concat(F.coalesce(F.col("headers"), F.array().cast(HEADERS_TYPE)), error_headers).alias("headers"),
        *columns[4:],  # source position, output position, final key order
    ).select(*OUTPUT_COLUMNS))
    good = lowering.drop_counted(raw, node.name, ~bad, "deserialize", detail=error, position=position)
    return good.select(*columns)


def _sink(self: Lowering, node: ir.SinkNode) -> Frame:
    # Serialization happens when the compiled topology binds its sinks (compile_topology).
    return self.parent(node)


# --- stateless steps ------------------------------------------------------------------------------


def _serde_of_type(dtype: Any) -> PlanSerde | None:
    return {"string": Serdes.String(), "bigint": Serdes.Long(), "int": Serdes.Integer(),
            "double": Serdes.Double(), "binary": Serdes.Bytes()}.get(dtype.simpleString())


def _user_column(frame: Frame, fn: ir.ColumnFn) -> tuple[Column, PlanSerde]:
    """A user's Column expression and the serde its Spark type is held as."""
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


def _column_condition(predicate: ir.ColumnFn, negate: bool) -> Column:
    """A boolean Column predicate; null counts as false (as a Java predicate returning false).
    A filter drops a row whose condition is null, so only the negated form needs the
    ``coalesce`` (``NOT null`` is null, which would drop a row ``filter_not`` keeps)."""
    cond = predicate.column.cast("boolean")
    return ~F.coalesce(cond, F.lit(False)) if negate else cond


def _filter(self: Lowering, node: ir.FilterNode) -> Frame:
    frame = self.parent(node)
    if isinstance(node.predicate, ir.ColumnFn):
        return frame.with_df(frame.df.filter(_column_condition(node.predicate, node.negate)))
    predicate, negate = node.predicate.fn, node.negate
    return filter_python(frame, node.name, lambda k, v: bool(predicate(k, v)) != negate)


def _map_values(self: Lowering, node: ir.MapValuesNode) -> Frame:
    frame = self.parent(node)
    if isinstance(node.mapper, ir.ColumnFn):
        column, serde = _user_column(frame, node.mapper)
        return frame.with_df(frame.df.withColumn("value", column), value=serde)
    mapper = value_mapper(node.mapper)
    return map_python(frame, node.name, lambda k, v: (k, mapper(k, v)), out_value=DEFAULT_SERDE, function="mapper")


def _map(self: Lowering, node: ir.MapNode) -> Frame:
    mapper = node.mapper.fn
    return map_python(self.parent(node), node.name, lambda k, v: mapper_pair(mapper(k, v), node.name),
                        out_key=KeyCodec(DEFAULT_SERDE), out_value=DEFAULT_SERDE, function="mapper")


def _flat_map(self: Lowering, node: ir.FlatMapNode) -> Frame:
    mapper = node.mapper.fn
    return apply_python(self.parent(node), node.name, lambda k, v: [mapper_pair(p, node.name) for p in (mapper(k, v) or ())],
                        out_key=KeyCodec(DEFAULT_SERDE), out_value=DEFAULT_SERDE, multi=True, function="mapper")


def _flat_map_values(self: Lowering, node: ir.FlatMapValuesNode) -> Frame:
    mapper = value_mapper(node.mapper)
    return apply_python(self.parent(node), node.name, lambda k, v: [(k, x) for x in (mapper(k, v) or ())],
                        out_value=DEFAULT_SERDE, multi=True, function="mapper")


def _select_key(self: Lowering, node: ir.SelectKeyNode) -> Frame:
    frame = self.parent(node)
    if isinstance(node.selector, ir.ColumnFn):
        column, serde = _user_column(frame, node.selector)
        return frame.with_df(frame.df.withColumn("key", column), key=KeyCodec(serde))
    selector = node.selector.fn
    return map_python(frame, node.name, lambda k, v: (selector(k, v), v), out_key=selected_key(node, self.topology),
                        function="key selector")


def _peek(self: Lowering, node: ir.PeekNode) -> Frame:
    action = node.action.fn

    def step(k: Any, v: Any) -> list[tuple[Any, Any]]:
        action(k, v)
        return [(k, v)]

    return apply_python(self.parent(node), node.name, step, function="action")


def _foreach(self: Lowering, node: ir.ForeachNode) -> Frame:
    """``foreach`` / ``print``: the action runs in the Python workers and nothing is forwarded
    (the plan's output runs the node: `Topology.runs_unread`)."""
    action = node.action.fn

    def step(k: Any, v: Any) -> list[tuple[Any, Any]]:
        action(k, v)
        return []

    return apply_python(self.parent(node), node.name, step, function="action")


def _align(frame: Frame, key: KeyCodec, value: PlanSerde) -> DataFrame:
    df = frame.df
    if frame.key != key:
        if frame.key.windowed or key.windowed:
            raise InvalidTypeError(MERGE_WINDOWED)
        df = df.withColumn("key", convert_column(F.col("key"), frame.key.serde, key.serde))
    if frame.value != value:
        df = df.withColumn("value", convert_column(F.col("value"), frame.value, value))
    return df.select(*FRAME_COLUMNS)


def _merge(self: Lowering, node: ir.MergeNode) -> Frame:
    left, right = self.parent(node, 0), self.parent(node, 1)
    merged = merged_encoding(node, left, right)
    key, value = merged.key, merged.value
    return Frame(_align(left, key, value).unionByName(_align(right, key, value)), key, value)


def regroup(frame: Frame, key_serde: PlanSerde | None, value_serde: PlanSerde | None) -> Frame:
    """Re-encode key and value with the serdes a grouping asks for (``Grouped.with_serdes``;
    the encodings: `streamsdsl.operators.descriptions.regrouped`)."""
    df = frame.df
    encoding = regrouped(frame, key_serde, value_serde)
    if encoding.key != frame.key:
        df = df.withColumn("key", convert_column(F.col("key"), frame.key.serde, encoding.key.serde))
    if encoding.value != frame.value:
        df = df.withColumn("value", convert_column(F.col("value"), frame.value, encoding.value))
    return frame.with_df(df, key=encoding.key, value=encoding.value)


def _repartition(self: Lowering, node: ir.RepartitionNode) -> Frame:
    # Spark's shuffle in the stateful operator downstream does what the repartition topic does
    # in Kafka Streams; here only a serde change (Grouped/StreamJoined serdes) and the filter.
    # KStream.repartition with a number of partitions: a shuffle by key into that many.
    frame = regroup(self.parent(node), node.key_serde, node.value_serde)
    if self.topology is None or not null_keys_pass(self.topology, node.name):
        frame = frame.with_df(self.drop_counted(frame.df, node.name, F.col("key").isNotNull()))
    if node.partitions is not None:
        frame = frame.with_df(frame.df.repartition(node.partitions, F.col("key")))
    return frame


# --- tables --------------------------------------------------------------------------------------


def _table_to_stream(self: Lowering, node: ir.TableToStreamNode) -> Frame:
    return self.parent(node).with_df(self.parent(node).df, is_table=False)


def _table_step(frame: Frame, step: Callable[[Frame], Frame]) -> Frame:
    """A stateless table step on the changelog and, for a table source's, on the records a join
    reads (`Frame.table_records`)."""
    out = step(frame)
    if frame.table_records is not None:
        records = frame.table_records
        if SOURCE_TOMBSTONE not in records.columns:  # whether the source's value was a tombstone goes along
            records = records.withColumn(SOURCE_TOMBSTONE, F.col("value").isNull())
        out = attrs.evolve(out, table_records=step(frame.with_df(records)).df)
    return out


def _table_filter(self: Lowering, node: ir.TableFilterNode) -> Frame:
    return _table_step(self.parent(node), lambda frame: _table_filter_frame(frame, node))


def _table_filter_frame(frame: Frame, node: ir.TableFilterNode) -> Frame:
    if isinstance(node.predicate, ir.ColumnFn):
        cond = _column_condition(node.predicate, node.negate)
        return frame.with_df(frame.df.withColumn("value", F.when(cond, F.col("value"))))
    pred, negate = node.predicate.fn, node.negate

    def step(k: Any, v: Any) -> tuple[Any, Any]:
        if v is None:
            return k, None
        return k, v if bool(pred(k, v)) != negate else None

    return map_python(frame, node.name, step, out_value=frame.value, function="predicate")


def _table_map_values(self: Lowering, node: ir.TableMapValuesNode) -> Frame:
    return _table_step(self.parent(node), lambda frame: _table_map_values_frame(frame, node))


def _table_map_values_frame(frame: Frame, node: ir.TableMapValuesNode) -> Frame:
    if isinstance(node.mapper, ir.ColumnFn):
        column, serde = _user_column(frame, node.mapper)
        return frame.with_df(frame.df.withColumn("value", F.when(F.col("value").isNotNull(), column)), value=serde)
    mapper = value_mapper(node.mapper)
    return map_python(frame, node.name, lambda k, v: (k, None if v is None else mapper(k, v)),
                        out_value=DEFAULT_SERDE, function="mapper")
