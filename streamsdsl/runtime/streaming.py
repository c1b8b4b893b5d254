"""Running a compiled topology as one Spark streaming query.

The whole topology (every sink) is one query; each micro-batch is handed to
`BatchSink` callbacks through ``foreachBatch``: data rows per sink topic, and the
control rows the operators emit (dropped records, emit-final latency) folded into metrics.
"""

from __future__ import annotations

import logging
import math
import threading
from typing import TYPE_CHECKING, Any, Callable, Protocol

from streamsdsl.compiler import STREAMING, CompiledSink, CompiledTopology, compile_topology

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.streaming import StreamingQuery

    from streamsdsl import ir
    from streamsdsl.ir.topology import Topology

log = logging.getLogger("streamsdsl")

#: Columns of a sink's rows handed to a `BatchSink` (RAW_SINK_DDL).
SINK_COLUMNS = ("key", "value", "timestamp", "headers")


class BatchSink(Protocol):
    """Receives, per micro-batch, the serialized rows of one sink topic.

    A sink may also define ``write_dead_letters(rows, batch_id)``: it then receives the raw
    records the ``log_and_continue`` handler skipped, as :func:`dead_letter_rows` shapes them.
    """

    def write_batch(self, sink: CompiledSink, rows: DataFrame, batch_id: int) -> None: ...


#: Header names of a dead-letter record (Kafka Streams' KIP-1034 names).
DLQ_HEADERS = (
    "__streams.errors.exception",
    "__streams.errors.message",
    "__streams.errors.topic",
    "__streams.errors.partition",
    "__streams.errors.offset",
)


def dead_letter_rows(batch: DataFrame) -> DataFrame:
    """The skipped raw records of a batch of compiled output, one per (topic, partition, offset),
    as RAW_SINK rows whose headers are the original ones plus the KIP-1034 error headers."""
    from pyspark.sql import functions as F

    from streamsdsl.compiler.frame import DESERIALIZATION_ERROR

    bad = (
        batch.filter(F.col("_ctl.metric") == DESERIALIZATION_ERROR)
        .withColumn("_src_topic", F.col("_ctl.topic"))
        .dropDuplicates(["_src_topic", "_seq"])
    )
    c = F.col("_ctl")

    def header(name: str, value: Any) -> Any:
        return F.struct(F.lit(name).alias("key"), F.encode(value.cast("string"), "UTF-8").alias("value"))

    error_headers = F.array(
        header(DLQ_HEADERS[0], F.lit("org.apache.kafka.common.errors.SerializationException")),
        header(DLQ_HEADERS[1], c["error"]),
        header(DLQ_HEADERS[2], c["topic"]),
        header(DLQ_HEADERS[3], c["partition"]),
        header(DLQ_HEADERS[4], c["offset"]),
    )
    return bad.select(
        c["raw_key"].alias("key"),
        c["raw_value"].alias("value"),
        "timestamp",
        F.concat(F.coalesce("headers", F.array().cast("array<struct<key:string,value:binary>>")), error_headers).alias("headers"),
        c["topic"].alias("source_topic"),
        c["partition"].alias("source_partition"),
        c["offset"].alias("source_offset"),
    )


class Metrics:
    """Thread-safe running totals of the topology's metrics (KIP-825 names)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.dropped = 0
        self.emitted_final = 0
        self.latency_sum = 0.0
        self.latency_max = -math.inf
        self.input_rows = 0
        self.batches = 0
        #: Last running drop count per node (native aggregations report running totals).
        self._running: dict[str, float] = {}

    def add_events(self, events: list[tuple[str, str, float]]) -> None:
        with self._lock:
            for _node, metric, value in events:
                if metric in ("dropped-records-total", "deserialization-error"):
                    self.dropped += int(value)  # a record late for several windows counts once per window
                elif metric == "dropped-records-running-total":
                    previous = self._running.get(_node, 0.0)
                    self.dropped += int(max(0.0, value - previous))
                    self._running[_node] = max(previous, value)
                elif metric == "emit-final-latency":
                    self.emitted_final += 1
                    self.latency_sum += value
                    self.latency_max = max(self.latency_max, value)

    def snapshot(self) -> dict[str, float]:
        with self._lock:
            return {
                "dropped-records-total": float(self.dropped),
                "emit-final-records-total": float(self.emitted_final),
                "emit-final-latency-max": self.latency_max if self.emitted_final else math.nan,
                "emit-final-latency-avg": self.latency_sum / self.emitted_final if self.emitted_final else math.nan,
                "input-records-total": float(self.input_rows),
                "batches-total": float(self.batches),
            }


def start_streaming(
    topology: Topology,
    raw_source: Callable[[ir.SourceNode], DataFrame],
    sink: BatchSink,
    *,
    checkpoint_location: str,
    trigger: dict[str, Any] | None = None,
    metrics: Metrics | None = None,
    query_name: str | None = None,
    deserialization_handler: str = "log_and_fail",
) -> tuple[StreamingQuery, CompiledTopology, Metrics]:
    """Compile ``topology`` in streaming mode and start it as one query.

    ``trigger`` is passed to ``DataStreamWriter.trigger`` (e.g. ``{"processingTime": "1 second"}``
    or ``{"availableNow": True}``).
    """
    from pyspark import StorageLevel

    compiled = compile_topology(topology, raw_source, mode=STREAMING, deserialization_handler=deserialization_handler)
    if compiled.output is None:
        raise ValueError("The topology has no sink: add .to(topic) somewhere to run it.")
    metrics = metrics or Metrics()
    sinks = compiled.sinks

    def each_batch(batch: DataFrame, batch_id: int) -> None:
        batch = batch.persist(StorageLevel.MEMORY_AND_DISK)
        try:
            # A control row reaches every sink downstream of where it was emitted; count each
            # event once (per emitting node and source position).
            seen: set[tuple[Any, ...]] = set()
            events = []
            for r in batch.filter("_ctl IS NOT NULL").select("_ctl", "_seq", "_ord", "_okey").collect():
                c = r["_ctl"]
                ident = (c["node"], c["metric"], c["value"], r["_seq"], tuple(r["_ord"] or ()), r["_okey"])
                if ident not in seen:
                    seen.add(ident)
                    events.append((c["node"], c["metric"], c["value"]))
            metrics.add_events(events)
            if hasattr(sink, "write_dead_letters") and any(e[1] == "deserialization-error" for e in events):
                sink.write_dead_letters(dead_letter_rows(batch), batch_id)
            data = batch.filter("_ctl IS NULL")
            for s in sinks:
                sink.write_batch(s, data.filter(data["_sink"] == s.index).select(*SINK_COLUMNS, "_seq", "_ord"), batch_id)
            with metrics._lock:
                metrics.batches += 1
        finally:
            batch.unpersist()

    writer = compiled.output.writeStream.outputMode("update").foreachBatch(each_batch)
    writer = writer.option("checkpointLocation", checkpoint_location)
    if query_name:
        writer = writer.queryName(query_name)
    if trigger:
        writer = writer.trigger(**trigger)
    query = writer.start()
    return query, compiled, metrics
