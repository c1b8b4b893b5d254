"""Streaming runs for the window benchmarks (P2, P2b): every variant is a streaming query over
the same Parquet records (a file source read with ``trigger(availableNow=True)``, one micro-batch
of data plus the no-data batch where event-time timers fire), written to the ``noop`` sink; the
time is from ``start()`` to the query's end. Each run gets a fresh checkpoint."""

from __future__ import annotations

import shutil
import tempfile
import time
from typing import Any, Callable


def raw_stream(spark: Any, directory: str) -> Any:
    from streamsdsl.records import RAW_RECORD_DDL

    return spark.readStream.schema(RAW_RECORD_DDL).parquet(directory)


def run_stream(df: Any, output_mode: str, on_batch: Callable[[Any, int], None] | None = None) -> float:
    """Run the streaming ``df`` to the end of its input; seconds (``on_batch``: a foreachBatch
    function instead of the noop sink, for validation runs)."""
    checkpoint = tempfile.mkdtemp(prefix="bench-cp-")
    try:
        writer = df.writeStream.outputMode(output_mode).option("checkpointLocation", checkpoint)
        writer = writer.foreachBatch(on_batch) if on_batch else writer.format("noop")
        start = time.perf_counter()
        query = writer.trigger(availableNow=True).start()
        query.awaitTermination()
        return time.perf_counter() - start
    finally:
        shutil.rmtree(checkpoint, ignore_errors=True)


def streamsdsl_stream(spark: Any, topology: Any, directory: str, operator: str) -> Any:
    """The streaming plan of ``topology`` on the file source, with ``streamsdsl.operator``."""
    from streamsdsl.compiler import PlanMode, compile_topology
    from streamsdsl.compiler.plan import CompileOptions

    compiled = compile_topology(topology, lambda node: raw_stream(spark, directory),
                                CompileOptions(PlanMode.STREAMING, operator))
    assert all(how.backend.value == operator for how in compiled.operators.values()), compiled.operators
    return compiled.output


def output_summary(df: Any, output_mode: str) -> tuple[int, int]:
    """(rows, rows with a value) the streaming ``df`` writes: for checking variants agree."""
    from pyspark.sql import functions as F

    totals = [0, 0]

    def count(batch: Any, batch_id: int) -> None:
        value = "value" if "value" in batch.columns else batch.columns[-1]
        row = batch.agg(F.count(F.lit(1)), F.count(value)).collect()[0]
        totals[0] += row[0]
        totals[1] += row[1]

    run_stream(df, output_mode, count)
    return totals[0], totals[1]
