"""The two plan modes: `Lowering` subclasses overriding the few mode-specific steps.

* `StreamingLowering` — event-time watermark at the sources, stream time from the watermark,
  Spark's streaming aggregation in update mode, processors with timers: what a micro-batch
  emits is the net change since the previous one.
* `ReplayLowering` — the TopologyTestDriver's batch run over recorded input: per-record stream
  time computed in the plan (a running max in pipe order), a running aggregate per record, and
  on-close records assigned to the record after which Kafka Streams emits them.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from streamsdsl.compiler.columns import (
    CLOSE_THRESHOLD,
    EMIT_FINAL,
    EVENT_METRIC,
    EVENT_TIME,
    EVENT_VALUE,
    FINAL_KEY_ORDER,
    HEADERS_TYPE,
    OUTPUT_POSITION,
    SOURCE_POSITION,
    STREAM_TIME,
)
from streamsdsl.compiler import aggregations as _aggregations  # noqa: F401 - registers the stateful rules
from streamsdsl.compiler.lowering import Lowering, PlanMode
from streamsdsl.compiler.processors import (
    AggregateConfig,
    AggregateProcessor,
    ReplayAggregateProcessor,
    StreamingAggregateProcessor,
)
from streamsdsl.semantics.windowing import Windowing

__all__ = ["ReplayLowering", "StreamingLowering", "lowering_for"]


class StreamingLowering(Lowering):
    """Streaming: stream time on Spark is the event-time watermark."""

    mode = PlanMode.STREAMING

    def with_event_time(self, df: DataFrame) -> DataFrame:
        # The operator gets event time as a plain long so Spark drops nothing before Kafka
        # Streams' own drop rule runs (PLATFORM.md, late-data trap).
        df = df.withColumn(EVENT_TIME, F.timestamp_millis(F.col("timestamp")))
        return df.withWatermark(EVENT_TIME, "0 milliseconds").drop(EVENT_TIME)

    def operator_input(self, df: DataFrame, windowing: Windowing, partition_by: str | None = None) -> DataFrame:
        return df

    def processor(self, config: AggregateConfig, state_type: str) -> AggregateProcessor:
        return StreamingAggregateProcessor(config, state_type)

    def native_aggregate(self, df: DataFrame, column: Column, value_type: str) -> DataFrame:
        """Spark's streaming aggregation in update mode: the latest aggregate per key per batch."""
        return df.groupBy("key").agg(
            column.cast(value_type).alias("value"),
            F.max("timestamp").alias("timestamp"),
            F.max(SOURCE_POSITION).alias(SOURCE_POSITION),
        ).select(
            "key", "value", "timestamp", F.array().cast(HEADERS_TYPE).alias("headers"), SOURCE_POSITION,
            F.array(F.lit(0).cast("bigint")).alias(OUTPUT_POSITION), F.lit(None).cast("string").alias(FINAL_KEY_ORDER),
        )


class ReplayLowering(Lowering):
    """The test driver's batch replay: stream time is computed per record in the plan."""

    mode = PlanMode.REPLAY

    def with_event_time(self, df: DataFrame) -> DataFrame:
        return df

    def cached(self, df: DataFrame) -> DataFrame:
        """Cache a DataFrame the replay reads more than once (unpersisted after the run)."""
        from pyspark import StorageLevel

        df = df.persist(StorageLevel.MEMORY_ONLY)
        self.persisted.append(df)
        return df

    def operator_input(self, df: DataFrame, windowing: Windowing, partition_by: str | None = None) -> DataFrame:
        """Kafka Streams' stream time after each record: a running max in pipe order (per value
        of ``partition_by`` if given: cogroup inputs), over the records that advance it."""
        w = (Window.partitionBy(partition_by) if partition_by else Window).orderBy(SOURCE_POSITION, OUTPUT_POSITION)
        w = w.rowsBetween(Window.unboundedPreceding, Window.currentRow)
        advances = F.col("value").isNotNull() if windowing.drops_null_values else F.lit(True)
        st = F.max(F.when(advances, F.col("timestamp"))).over(w)
        return df.withColumn(STREAM_TIME, F.coalesce(st, F.lit(-1).cast("bigint")))

    def processor(self, config: AggregateConfig, state_type: str) -> AggregateProcessor:
        return ReplayAggregateProcessor(config, state_type)

    def after_processor(self, out: DataFrame, inp: DataFrame, config: AggregateConfig) -> DataFrame:
        """With emit on close: give each pending on-close record the first input record whose
        stream time passes its threshold (Kafka Streams emits it right after that record);
        pending records whose threshold is never passed are not emitted. Adds one emit-final
        event (its latency) per emitted record."""
        if not config.emit_on_close:
            return out.drop(CLOSE_THRESHOLD)
        # The assignment reads the operator's input and output more than once: cache both so
        # the stateful operator runs once per replay.
        inp, out = self.cached(inp), self.cached(out)
        times = inp.select(F.col(SOURCE_POSITION).alias("_at_position"), F.col(OUTPUT_POSITION).alias("_at_output"),
                           F.col(STREAM_TIME).alias("_at_stream_time"))
        pending = out.filter(F.col(CLOSE_THRESHOLD).isNotNull()).withColumn("_pending", F.monotonically_increasing_id())
        rest = out.filter(F.col(CLOSE_THRESHOLD).isNull()).drop(CLOSE_THRESHOLD)
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

    def native_aggregate(self, df: DataFrame, column: Column, value_type: str) -> DataFrame:
        """A running aggregate per key in pipe order: one changelog record per input record."""
        w = Window.partitionBy("key").orderBy(SOURCE_POSITION, OUTPUT_POSITION)
        w = w.rowsBetween(Window.unboundedPreceding, Window.currentRow)
        return df.select(
            "key", column.over(w).cast(value_type).alias("value"), F.max("timestamp").over(w).alias("timestamp"),
            "headers", SOURCE_POSITION, F.concat(F.col(OUTPUT_POSITION), F.array(F.lit(0).cast("bigint"))).alias(
                OUTPUT_POSITION),
            F.lit(None).cast("string").alias(FINAL_KEY_ORDER),
        )


def lowering_for(mode: PlanMode) -> type[Lowering]:
    """The `Lowering` class of a plan mode."""
    return {PlanMode.STREAMING: StreamingLowering, PlanMode.REPLAY: ReplayLowering}[mode]
