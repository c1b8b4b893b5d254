"""The two plan modes: `Lowering` subclasses overriding the few mode-specific steps.

* `StreamingLowering` — event-time watermark at the sources, stream time from the watermark,
  Spark's streaming aggregation in update mode, processors with timers: what a micro-batch
  emits is the net change since the previous one.
* `ReplayLowering` — the TopologyTestDriver's batch run over recorded input: per-record stream
  time computed in the plan (a running max in pipe order), a running aggregate per record, and
  on-close records assigned to the record after which Kafka Streams emits them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import attrs
from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from streamsdsl.compiler.columns import IDLE_INPUT_OBSERVATION, STREAM_TIME_OBSERVATION, CARRIED_STATE, CARRY, CLOSE_THRESHOLD, EMIT_FINAL
from streamsdsl.compiler.columns import EVENT_METRIC, EVENT_TIME, EVENT_VALUE, FINAL_KEY_ORDER, HEADERS_TYPE
from streamsdsl.compiler.columns import OUTPUT_POSITION, RUN_STREAM_TIME, SOURCE_POSITION, STREAM_TIME
from streamsdsl.compiler.columns import EVENT_TIME_SHIFT_MS, STREAM_TIMES_BEFORE
from streamsdsl.compiler.local_rows import cached_frame, local_frame
from streamsdsl.compiler.rules import RULES
from streamsdsl.compiler.scan import first_passing, in_blocks, position_block, running_maxima
from streamsdsl.compiler.carry import carry_out, with_carried_states
from streamsdsl.compiler.lowering import Lowering, PlanMode, RawSource
from streamsdsl.compiler.processors import (
    AggregateConfig,
    AggregateProcessor,
    ReplayAggregateProcessor,
    StreamingAggregateProcessor,
    windows_type,
)
from streamsdsl.compiler.idle_close import IdleCloseAggregateProcessor
from streamsdsl.compiler.jvm_operator import OperatorChoices
from streamsdsl.dsl.options import DeserializationHandler

__all__ = ["ReplayCarry", "ReplayLowering", "StreamingLowering", "lowering_for", "native_store"]



class StreamingLowering(Lowering):
    """Streaming: stream time on Spark is the event-time watermark."""

    mode = PlanMode.STREAMING
    rules = RULES
    counts_drops = True
    #: A backfill's final state (`ReplayCarry`), which the query's stateful operators start from
    #: (``transformWithState``'s initial state, read in the query's first micro-batch only).
    initial: ReplayCarry | None = None

    def initial_state(self, spark: Any, node: str, key_type: str, state_type: str) -> Any:
        """``node``'s initial state: its keys' rows ``(key, state)`` in the replay's carried layout
        (``transformWithState`` takes them grouped by key); ``None`` when the query starts without
        state for it."""
        rows = None if self.initial is None else self.initial.states.get(node)
        if not rows:
            return None
        return local_frame(spark, rows, f"key {key_type}, state {state_type}")

    def initial_stream_time(self, node: str) -> int:
        """The stream time ``node`` had at the end of the backfill the query continues (-1: none):
        its records and windows are judged by at least that time, as in Kafka Streams, where stream
        time never goes back."""
        times = () if self.initial is None else self.initial.stream_times.get(node, ())
        return max(times, default=-1)

    def with_event_time(self, df: DataFrame) -> DataFrame:
        # The operator gets event time as a plain long so Spark drops nothing before Kafka
        # Streams' own drop rule runs (PLATFORM.md, late-data trap).
        # (shifted by EVENT_TIME_SHIFT_MS, and back by the delay: the watermark is the largest
        # timestamp, and an operator may emit a record whose timestamp equals it)
        df = df.withColumn(EVENT_TIME, F.timestamp_millis(F.col("timestamp") + EVENT_TIME_SHIFT_MS))
        return df.withWatermark(EVENT_TIME, f"{EVENT_TIME_SHIFT_MS} milliseconds").drop(EVENT_TIME)

    def operator_input(self, df: DataFrame, config: AggregateConfig, partition_by: str | None = None) -> DataFrame:
        # below another stateful operator, stream time is the watermark that operator passes on
        # (`streamsdsl.compiler.event_time`)
        return df

    def processor(self, config: AggregateConfig, state_type: str) -> AggregateProcessor:
        if config.idle_close_ms is not None:
            return IdleCloseAggregateProcessor(config, state_type)
        return StreamingAggregateProcessor(config, state_type)

    def native_aggregate(self, node: str, df: DataFrame, column: Column, value_type: str, *,
                         per_source_record: bool = False) -> DataFrame:
        """Spark's streaming aggregation in update mode: the latest aggregate per key per batch."""
        return df.groupBy("key").agg(
            column.cast(value_type).alias("value"),
            F.max("timestamp").alias("timestamp"),
            F.max(SOURCE_POSITION).alias(SOURCE_POSITION),
        ).select(
            "key", "value", "timestamp", F.array().cast(HEADERS_TYPE).alias("headers"), SOURCE_POSITION,
            F.array(F.lit(0).cast("bigint")).alias(OUTPUT_POSITION), F.lit(None).cast("string").alias(FINAL_KEY_ORDER),
        )


@attrs.frozen
class ReplayCarry:
    """What one test-driver run hands to the next, so that each run processes only the records
    piped since the previous one (user functions run once per record, as in Kafka Streams):

    ``first_position``: the pipe position of the run's first record; ``states``: per stateful
    processor, its keys' stored windows (rows ``(key, windows)``); ``stream_times``: per
    stateful processor, its stream time (per input for a cogroup); ``native_inputs``: per
    native aggregation, the rows it aggregated so far (Spark recomputes those aggregates; no
    user code runs for them)."""

    first_position: int = 0
    states: Mapping[str, Sequence[Any]] = attrs.field(factory=dict)
    stream_times: Mapping[str, Sequence[int]] = attrs.field(factory=dict)
    native_inputs: Mapping[str, Sequence[Any]] = attrs.field(factory=dict)
    #: per native aggregation, the schema of its ``native_inputs`` rows
    native_schemas: Mapping[str, Any] = attrs.field(factory=dict)
    #: per aggregation with idle close, the driver's wall clock (ms) of the last run that brought
    #: it a record with a key (its last input time, `AggregateConfig.idle_last_input_at`)
    idle_last_input_at: Mapping[str, int] = attrs.field(factory=dict)


def native_store(spark: Any, carry: ReplayCarry, node: Any, value_type: str) -> list[Any]:
    """The current value per key of a native aggregation (what its store holds), recomputed by
    Spark from the input rows ``carry`` holds for it: rows ``(key, value, timestamp)``."""
    from streamsdsl.compiler.aggregations import _native_column

    rows = carry.native_inputs.get(node.name)
    if not rows:
        return []
    df = local_frame(spark, rows, carry.native_schemas[node.name])
    return df.groupBy("key").agg(_native_column(node.agg).cast(value_type).alias("value"),
                                 F.max("timestamp").alias("timestamp")).collect()




class ReplayLowering(Lowering):
    """The test driver's batch replay of the records piped since its previous run: stream time
    is computed per record in the plan, state is carried over between runs (`ReplayCarry`)."""

    mode = PlanMode.REPLAY
    rules = RULES
    native_per_record = True

    def __init__(self, raw_source: RawSource, handler: DeserializationHandler = DeserializationHandler.LOG_AND_FAIL,
                 carry: ReplayCarry | None = None, *, choices: OperatorChoices | None = None,
                 positions: int | None = None) -> None:
        super().__init__(raw_source, handler, choices)
        self.carry = carry or ReplayCarry()
        #: a run over more than `scan.SCAN_BLOCK` source positions computes stream time per block
        #: (`streamsdsl.compiler.scan`), a smaller one (``positions`` None: a few) in one window
        self.scanned = in_blocks(positions)
        #: per stateful node, whether its stream time is per input (a cogroup's)
        self._per_input: dict[str, bool] = {}
        #: What the driver collects after the run for the next one: per node, a DataFrame of
        #: its carried state rows (processors) or of its input rows (native aggregations).
        self.carried_states: dict[str, DataFrame] = {}
        self.native_inputs: dict[str, DataFrame] = {}

    def with_event_time(self, df: DataFrame) -> DataFrame:
        return df

    def cached(self, df: DataFrame) -> DataFrame:
        """Cache a DataFrame the replay reads more than once (unpersisted after the run); the
        plan continues from the cache (`cached_frame`)."""
        from pyspark import StorageLevel

        df = df.persist(StorageLevel.MEMORY_ONLY)
        self.persisted.append(df)
        return cached_frame(df)

    def operator_input(self, df: DataFrame, config: AggregateConfig, partition_by: str | None = None) -> DataFrame:
        """The run's records with Kafka Streams' stream time after each (a running max in pipe
        order, per input for a cogroup, continuing from the previous run's), plus one row per key
        carrying the key's state from the previous run."""
        node = config.node
        inputs = len(config.inputs)
        self._per_input[node] = partition_by is not None
        advances = F.col("value").isNotNull() if config.windowing.drops_null_values else F.lit(True)
        before = list(self.carry.stream_times.get(node, ())) or [-1] * inputs
        if partition_by:
            initial = F.lit(before[0])
            for i, t in enumerate(before[1:], start=1):
                initial = F.when(F.col(partition_by) == i, F.lit(t)).otherwise(initial)
        else:
            initial = F.lit(max(before))
        inputs_before = [(advances & (F.col(partition_by) == i), t) for i, t in enumerate(before)] if partition_by \
            else [(advances, max(before))]
        ts = F.col("timestamp")
        if self.scanned:
            # the same maxima, per input over the pipe order, computed per block of positions
            maxima = {f"_st_after{i}": (F.when(c, ts), True) for i, (c, _) in enumerate(inputs_before)}
            maxima.update({f"_st_before{i}": (F.when(c, ts), False) for i, (c, _) in enumerate(inputs_before)})
            if partition_by and config.emit_on_close:  # which inputs have records (the run's stream time)
                maxima.update({f"_st_has{i}": (F.when(F.col(partition_by) == i, F.lit(0)), True) for i in range(inputs)})
            df, blocks = running_maxima(df, [SOURCE_POSITION, OUTPUT_POSITION], position_block(), maxima, self.cached)
            st: Column = F.col("_st_after0")
            if partition_by:
                st = F.when(F.col(partition_by) == 0, st)
                for i in range(1, len(inputs_before)):
                    st = st.when(F.col(partition_by) == i, F.col(f"_st_after{i}"))
            df = df.withColumn(STREAM_TIME, F.greatest(F.coalesce(st, F.lit(-1)), initial).cast("bigint"))
            df = df.withColumn(STREAM_TIMES_BEFORE, F.array(*[
                F.greatest(F.coalesce(F.col(f"_st_before{i}"), F.lit(-1)), F.lit(t)).cast("bigint")
                for i, (_, t) in enumerate(inputs_before)])).drop(*maxima)
        else:
            w = (Window.partitionBy(partition_by) if partition_by else Window).orderBy(SOURCE_POSITION, OUTPUT_POSITION)
            w = w.rowsBetween(Window.unboundedPreceding, Window.currentRow)
            st = F.max(F.when(advances, ts)).over(w)
            df = df.withColumn(STREAM_TIME, F.greatest(F.coalesce(st, F.lit(-1)), initial).cast("bigint"))
            # the clock the processor's kernel reads: every input's stream time before the record
            prior = Window.orderBy(SOURCE_POSITION, OUTPUT_POSITION).rowsBetween(Window.unboundedPreceding, -1)
            df = df.withColumn(STREAM_TIMES_BEFORE, F.array(*[
                F.greatest(F.coalesce(F.max(F.when(c, ts)).over(prior), F.lit(-1)), F.lit(t)).cast("bigint")
                for c, t in inputs_before]))
        times = [F.max(F.when(F.col(partition_by) == i, F.col(STREAM_TIME)) if partition_by else F.col(STREAM_TIME)
                       ).alias(f"t{i}") for i in range(inputs if partition_by else 1)]
        df = df.observe(f"{STREAM_TIME_OBSERVATION}{node}", *times)
        if config.idle_close_ms is not None:  # whether a record reached the aggregation in this run
            df = df.observe(f"{IDLE_INPUT_OBSERVATION}{node}", F.count(F.col("key")).alias("n"))
        df = with_carried_states(self, df, node, config.key.serde.spark_type, windows_type(config.value_out.spark_type))
        if config.emit_on_close:
            # every key closes its windows at the run's end, so that nothing emitted in this run
            # is still open in the state the next run starts from
            if not self.scanned:
                run = F.max(STREAM_TIME).over(Window.partitionBy())
                return df.withColumn(RUN_STREAM_TIME, F.greatest(F.coalesce(run, F.lit(-1)), initial).cast("bigint"))
            # the largest stream time of the run's records, from the blocks' maxima: per input
            # that has records, its largest timestamp or its stream time before the run
            totals = blocks.agg(*[F.max(c).alias(c) for c in blocks.columns if c.startswith("_st_")])
            if partition_by:
                run = F.greatest(*[F.when(F.col(f"_st_has{i}").isNotNull(), F.greatest(
                    F.coalesce(F.col(f"_st_after{i}"), F.lit(-1)), F.lit(t))) for i, (_, t) in enumerate(inputs_before)],
                    F.lit(None).cast("bigint"))
            else:
                run = F.greatest(F.coalesce(F.col("_st_after0"), F.lit(-1)), F.lit(max(before)))
            total = totals.select(run.alias("_run"))
            df = df.crossJoin(F.broadcast(total))
            df = df.withColumn(RUN_STREAM_TIME, F.greatest(F.coalesce(F.col("_run"), F.lit(-1)), initial).cast("bigint"))
            df = df.drop("_run")
        return df

    def processor(self, config: AggregateConfig, state_type: str) -> AggregateProcessor:
        return ReplayAggregateProcessor(config, state_type)

    def after_processor(self, out: DataFrame, inp: DataFrame, config: AggregateConfig) -> DataFrame:
        """Keep the keys' state for the next run; with emit on close, give each pending on-close
        record the first input record whose stream time passes its threshold (Kafka Streams
        emits it right after that record); pending records whose threshold is not passed stay in
        the state. Adds one emit-final event (its latency) per emitted record."""
        key = F.col("key.key") if config.key.windowed else F.col("key")
        if not config.emit_on_close:
            out = carry_out(self, out, config.node, key, config.key.serde.spark_type,
                            windows_type(config.value_out.spark_type))
            return out.drop(CLOSE_THRESHOLD)
        out = self.cached(out)  # read for the carried state and for the records
        self.carried_states[config.node] = out.filter(F.col(EVENT_METRIC) == CARRY).select(
            key.alias("key"), F.col(CARRIED_STATE).alias("state"))
        out = out.filter(F.col(EVENT_METRIC).isNull() | (F.col(EVENT_METRIC) != CARRY)).drop(CARRIED_STATE)
        inp = self.cached(inp.filter(F.col(CARRIED_STATE).isNull()))
        pending = out.filter(F.col(CLOSE_THRESHOLD).isNotNull()).withColumn("_pending", F.monotonically_increasing_id())
        rest = out.filter(F.col(CLOSE_THRESHOLD).isNull()).drop(CLOSE_THRESHOLD)
        if self.scanned and not self._per_input.get(config.node, False):
            # one stream time for all inputs: it never decreases in pipe order
            at = F.struct(F.col(SOURCE_POSITION).alias("_at_position"), F.col(OUTPUT_POSITION).alias("_at_output"),
                          F.col(STREAM_TIME).alias("_at_stream_time"))
            initial = max(list(self.carry.stream_times.get(config.node, ())) or [-1])
            first = first_passing(self.cached, pending, inp, at, F.col(STREAM_TIMES_BEFORE)[0], initial)
        else:
            times = inp.select(F.col(SOURCE_POSITION).alias("_at_position"), F.col(OUTPUT_POSITION).alias("_at_output"),
                               F.col(STREAM_TIME).alias("_at_stream_time"))
            matched = pending.join(times, F.col("_at_stream_time") > F.col(CLOSE_THRESHOLD), "inner")
            first = matched.groupBy("_pending").agg(
                F.min(F.struct("_at_position", "_at_output", "_at_stream_time")).alias("_at"))
        finals = pending.join(first, "_pending").withColumn(SOURCE_POSITION, F.col("_at._at_position")).withColumn(
            OUTPUT_POSITION, F.concat(F.col("_at._at_output"), F.col(OUTPUT_POSITION)))
        data = finals.select(*rest.columns)
        events = finals.select(
            F.lit(None).cast(out.schema["key"].dataType).alias("key"),
            F.lit(None).cast(out.schema["value"].dataType).alias("value"),
            "timestamp", "headers", SOURCE_POSITION, OUTPUT_POSITION, FINAL_KEY_ORDER,
            F.lit(EMIT_FINAL).alias(EVENT_METRIC),
            (F.col("_at._at_stream_time") - F.col(CLOSE_THRESHOLD) - 1).cast("double").alias(EVENT_VALUE),
        )
        return rest.unionByName(data).unionByName(events)

    def native_aggregate(self, node: str, df: DataFrame, column: Column, value_type: str, *,
                         per_source_record: bool = False) -> DataFrame:
        """A running aggregate per key in pipe order over the rows aggregated in earlier runs and
        this run's: one changelog record per record of this run (``per_source_record``: per key
        and source record, the last one: Kafka's cache flushed once per source record)."""
        rows = self.carry.native_inputs.get(node)
        if rows:
            df = df.unionByName(local_frame(df.sparkSession, rows, df.schema))
        self.native_inputs[node] = df
        w = Window.partitionBy("key").orderBy(SOURCE_POSITION, OUTPUT_POSITION)
        w = w.rowsBetween(Window.unboundedPreceding, Window.currentRow)
        out = df.select(
            "key", column.over(w).cast(value_type).alias("value"), F.max("timestamp").over(w).alias("timestamp"),
            "headers", SOURCE_POSITION, F.concat(F.col(OUTPUT_POSITION), F.array(F.lit(0).cast("bigint"))).alias(
                OUTPUT_POSITION),
            F.lit(None).cast("string").alias(FINAL_KEY_ORDER),
        ).filter(F.col(SOURCE_POSITION) >= self.carry.first_position)
        if per_source_record:
            last = Window.partitionBy("key", SOURCE_POSITION).orderBy(F.col(OUTPUT_POSITION).desc())
            out = out.withColumn("_last", F.row_number().over(last)).filter(F.col("_last") == 1).drop("_last")
        return out


def lowering_for(mode: PlanMode) -> type[Lowering]:
    """The `Lowering` class of a plan mode."""
    return {PlanMode.STREAMING: StreamingLowering, PlanMode.REPLAY: ReplayLowering}[mode]
