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
    from streamsdsl.topology import Topology

log = logging.getLogger("streamsdsl")

#: Columns of a sink's rows handed to a `BatchSink` (RAW_SINK_DDL).
SINK_COLUMNS = ("key", "value", "timestamp", "headers")


class BatchSink(Protocol):
    """Receives, per micro-batch, the serialized rows of one sink topic."""

    def write_batch(self, sink: CompiledSink, rows: DataFrame, batch_id: int) -> None: ...


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

    def add_events(self, events: list[tuple[str, str, float]]) -> None:
        with self._lock:
            for _node, metric, value in events:
                if metric == "dropped-records-total":
                    self.dropped += 1
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
) -> tuple[StreamingQuery, CompiledTopology, Metrics]:
    """Compile ``topology`` in streaming mode and start it as one query.

    ``trigger`` is passed to ``DataStreamWriter.trigger`` (e.g. ``{"processingTime": "1 second"}``
    or ``{"availableNow": True}``).
    """
    from pyspark import StorageLevel

    compiled = compile_topology(topology, raw_source, mode=STREAMING)
    if compiled.output is None:
        raise ValueError("The topology has no sink: add .to(topic) somewhere to run it.")
    metrics = metrics or Metrics()
    sinks = compiled.sinks

    def each_batch(batch: DataFrame, batch_id: int) -> None:
        batch = batch.persist(StorageLevel.MEMORY_AND_DISK)
        try:
            events = [
                (r["_ctl"]["node"], r["_ctl"]["metric"], r["_ctl"]["value"])
                for r in batch.filter("_ctl IS NOT NULL").select("_ctl").collect()
            ]
            metrics.add_events(events)
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
