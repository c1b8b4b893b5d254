"""P12: a backfill against the same data streamed. P10's enrichment (orders joined with a
customers table, regrouped by region, 1-minute windows emitted on close) over ``--records``
orders, run twice on the same raw records (Parquet): as one batch job with
`streamsdsl.backfill` (the output computed completely, Spark's ``noop`` sink) and as P10's
streaming query over ``--batches`` micro-batches (``availableNow``). Reports the records/s of
each and their ratio, and checks that both wrote the same closed windows (the count of windows
and of the orders in them). Writes ``results/p12.json``.

    .venv/bin/python benchmarks/p12_backfill.py                      # 2,000,000 orders
    .venv/bin/python benchmarks/p12_backfill.py --records 200000 --batches 10   # quicker
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from typing import Any

from _common import environment, write_json
from p10_state_bounded import CountingSink, topology, write_input


def run_backfill(spark: Any, directory: str) -> tuple[float, int, int]:
    """The backfill over the Parquet input: seconds, windows written, orders in them."""
    from pyspark.sql import functions as F

    from streamsdsl import backfill

    raw = spark.read.parquet(directory)
    sources = {t: raw.filter(F.col("topic") == t).select("key", "value", "timestamp", "partition", "offset")
               for t in ("orders", "customers")}
    topo = topology()
    started = time.perf_counter()
    out = backfill(topo, sources, spark=spark)
    out["revenue"].write.format("noop").mode("overwrite").save()  # every record computed, nothing collected
    seconds = time.perf_counter() - started
    serde = out.compiled.sink_for_topic("revenue").value_serde
    values = [serde.deserialize(bytes(r["value"])) for r in out["revenue"].select("value").collect()]
    out.release()
    return seconds, len(values), sum(values)


def run_streaming(spark: Any, directory: str) -> tuple[float, int, int]:
    """P10's streaming query over the same input: seconds, windows written, orders in them."""
    from pyspark.sql import functions as F

    from streamsdsl.records import RAW_RECORD_DDL
    from streamsdsl.runtime.streaming import start_streaming

    checkpoint = tempfile.mkdtemp(prefix="p12-cp-")
    sink = CountingSink()

    def source(node: Any) -> Any:
        return (spark.readStream.schema(RAW_RECORD_DDL).option("maxFilesPerTrigger", 1).parquet(directory)
                .filter(F.col("topic").isin(list(node.topics))))

    try:
        started = time.perf_counter()
        query, _, _ = start_streaming(topology(), source, sink, checkpoint_location=checkpoint,
                                      trigger={"availableNow": True})
        query.awaitTermination()
        seconds = time.perf_counter() - started
        query.stop()
    finally:
        shutil.rmtree(checkpoint, ignore_errors=True)
    return seconds, sink.windows, sink.orders


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=2_000_000)
    parser.add_argument("--batches", type=int, default=40)
    parser.add_argument("--step-ms", type=int, default=10)
    args = parser.parse_args()

    from streamsdsl.runtime.session import get_session

    spark = get_session()
    spark.conf.set("spark.sql.shuffle.partitions", "2")
    directory = tempfile.mkdtemp(prefix="p12-in-")
    load_at_start = [round(x, 2) for x in os.getloadavg()]
    try:
        write_input(spark, directory, args.records, args.batches, args.step_ms)
        b_seconds, b_windows, b_orders = run_backfill(spark, directory)
        s_seconds, s_windows, s_orders = run_streaming(spark, directory)
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    result = {
        "id": "P12", "ratio": s_seconds / b_seconds,
        "goal": "none (measured): the backfill's records/s over the streamed query's; both write the same closed windows",
        "goal_met": None,
        "benchmark": "P12: backfill vs streaming (P10's enrichment: join, regroup, 1-minute windows on close)",
        "records": args.records, "batches": args.batches, "step_ms": args.step_ms,
        "backfill": {"seconds": round(b_seconds, 1), "records_per_second": round(args.records / b_seconds),
                     "windows_written": b_windows, "orders_in_windows": b_orders},
        "streaming": {"seconds": round(s_seconds, 1), "records_per_second": round(args.records / s_seconds),
                      "windows_written": s_windows, "orders_in_windows": s_orders},
        "same_windows": (b_windows, b_orders) == (s_windows, s_orders),
        "load_average_at_start": load_at_start,
        "environment": environment(spark),
    }
    write_json("p12", result)
    print(f"P12: {args.records:,} orders: backfill {b_seconds:.1f} s ({args.records / b_seconds:,.0f} records/s), "
          f"streamed {s_seconds:.1f} s ({args.records / s_seconds:,.0f} records/s); windows {b_windows:,} / "
          f"{s_windows:,}, orders in them {b_orders:,} / {s_orders:,}; load {load_at_start} → "
          f"{result['environment']['load_average_at_end']}")


if __name__ == "__main__":
    main()
