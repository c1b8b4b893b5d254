"""P10: state over a long run. An enrichment application (orders joined with a customers table,
then regrouped by region and counted in 1-minute windows emitted on close) runs as one streaming
query over ``--records`` orders whose time advances steadily (``--step-ms`` per order), read in
``--batches`` micro-batches. After every micro-batch the state rows of each stateful operator
(Spark's ``stateOperators[].numRowsTotal``) are sampled.

What must hold: the windowed count's state stays flat (only the windows still open: about one
per region) and the join's stays at the table's size (a table's rows never expire), however
many orders went through; the run's final windows are checked against a count of the same
orders in Spark SQL. Writes ``results/p10.json``, ``results/p10.md`` and the plot
``docs/images/p10-state.svg``.

    .venv/bin/python benchmarks/p10_state_bounded.py                       # 2,000,000 orders
    .venv/bin/python benchmarks/p10_state_bounded.py --records 200000 --batches 10   # quicker
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from typing import Any

from _common import HERE, environment, write_json

CUSTOMERS = 1000
REGIONS = 10
WINDOW_MS = 60_000
SVG = os.path.join(os.path.dirname(HERE), "docs", "images", "p10-state.svg")


def topology() -> Any:
    from streamsdsl import Consumed, EmitStrategy, Grouped, Produced, Serdes, StreamsBuilder, TimeWindows

    s = Serdes.String()
    strings = Consumed.with_serdes(s, s)
    b = StreamsBuilder()
    (b.stream("orders", strings).join(b.table("customers", strings), lambda order, region: region)
     .group_by(lambda customer, region: region, Grouped.with_serdes(s, s))
     .windowed_by(TimeWindows.of_size_with_no_grace(WINDOW_MS)).emit_strategy(EmitStrategy.on_window_close())
     .count().to_stream().map(lambda w, n: (f"{w.key}@{w.window.start}", n))
     .to("revenue", Produced.with_serdes(s, Serdes.Long())))
    return b.build()


def write_input(spark: Any, directory: str, records: int, batches: int, step_ms: int) -> None:
    """The customers (region ``r<id % REGIONS>``) as the first file, then the orders (customer
    ``c<id % CUSTOMERS>``, timestamp ``id * step_ms``) in ``batches`` files, in time order."""
    from pyspark.sql import functions as F

    def raw(df: Any, topic: str) -> Any:
        return df.select(F.col("key").cast("binary"), F.col("value").cast("binary"), F.lit(topic).alias("topic"),
                         F.lit(0).alias("partition"), F.col("id").alias("offset"),
                         F.col("ts").cast("bigint").alias("timestamp"),
                         F.array().cast("array<struct<key:string,value:binary>>").alias("headers"))

    customers = spark.range(CUSTOMERS).select("id", F.concat(F.lit("c"), F.col("id")).alias("key"),
                                              F.concat(F.lit("r"), F.col("id") % REGIONS).alias("value"),
                                              F.lit(0).alias("ts"))
    raw(customers, "customers").coalesce(1).write.parquet(os.path.join(directory, "part-0000"))
    per = -(-records // batches)
    for i in range(batches):
        lo, hi = i * per, min(records, (i + 1) * per)
        orders = spark.range(lo, hi).select("id", F.concat(F.lit("c"), F.col("id") % CUSTOMERS).alias("key"),
                                            F.lit("o").alias("value"), (F.col("id") * step_ms + 1).alias("ts"))
        raw(orders, "orders").coalesce(1).write.parquet(os.path.join(directory, f"part-{i + 1:04d}"))
    # one file per micro-batch, in this order
    for n, sub in enumerate(sorted(os.listdir(directory))):
        for f in os.listdir(os.path.join(directory, sub)):
            if f.endswith(".parquet"):
                target = os.path.join(directory, f"{n:04d}.parquet")
                os.replace(os.path.join(directory, sub, f), target)
                stamp = time.time_ns() + n * 10_000_000
                os.utime(target, ns=(stamp, stamp))
        shutil.rmtree(os.path.join(directory, sub))


class CountingSink:
    """Counts the windows written and their orders (the batch's rows are computed once)."""

    def __init__(self) -> None:
        self.windows = 0
        self.orders = 0

    def write_batch(self, sink: Any, rows: Any, batch_id: int) -> None:
        value_serde = sink.value_serde
        got = rows.select("value").collect()
        self.windows += len(got)
        self.orders += sum(value_serde.deserialize(bytes(r["value"])) for r in got)


def svg_plot(samples: list[dict[str, Any]], path: str, labels: dict[str, str] | None = None) -> None:
    """A line per operator: state rows after each micro-batch (x: orders processed); ``labels``
    names the operators in the legend."""
    width, height, left, bottom, top, right = 720, 300, 60, 40, 30, 170
    xs = [s["orders_processed"] for s in samples]
    series = sorted({name for s in samples for name in s["state_rows"]})
    ymax = max([1] + [v for s in samples for v in s["state_rows"].values()])
    xmax = max(xs) or 1

    def px(x: float, y: float) -> tuple[float, float]:
        return (left + (width - left - right) * x / xmax, height - bottom - (height - bottom - top) * y / ymax)

    colors = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e"]
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
             f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="12">',
             f'<text x="{left}" y="18" font-size="14">State rows per operator after each micro-batch</text>']
    x0, y0 = px(0, 0)
    x1, y1 = px(xmax, ymax)
    parts.append(f'<line x1="{x0}" y1="{y0}" x2="{x1}" y2="{y0}" stroke="#333"/>')
    parts.append(f'<line x1="{x0}" y1="{y0}" x2="{x0}" y2="{y1}" stroke="#333"/>')
    for frac in (0, 0.5, 1):
        _, y = px(0, ymax * frac)
        parts.append(f'<text x="{x0 - 6}" y="{y + 4}" text-anchor="end">{round(ymax * frac):,}</text>')
        x, _ = px(xmax * frac, 0)
        parts.append(f'<text x="{x}" y="{y0 + 16}" text-anchor="middle">{round(xmax * frac):,}</text>')
    parts.append(f'<text x="{(x0 + x1) / 2}" y="{height - 6}" text-anchor="middle">orders processed</text>')
    for i, name in enumerate(series):
        points = " ".join("{:.1f},{:.1f}".format(*px(s["orders_processed"], s["state_rows"].get(name, 0)))
                          for s in samples)
        color = colors[i % len(colors)]
        parts.append(f'<polyline fill="none" stroke="{color}" stroke-width="2" points="{points}"/>')
        label = (labels or {}).get(name, name)
        parts.append(f'<text x="{width - right + 10}" y="{top + 20 + 18 * i}" fill="{color}">{label}</text>')
    parts.append("</svg>")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write("\n".join(parts) + "\n")


def plot_labels(peaks: dict[str, int], count_name: str) -> dict[str, str]:
    """The legend: the windowed count, and the join (which holds the customers table)."""
    return {name: "windowed count" if name == count_name else "join (the table)" for name in peaks}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=2_000_000)
    parser.add_argument("--batches", type=int, default=40)
    parser.add_argument("--step-ms", type=int, default=10)
    parser.add_argument("--quick", action="store_true", help="200,000 orders in 10 micro-batches")
    args = parser.parse_args()
    if args.quick:
        args.records, args.batches = 200_000, 10

    from streamsdsl.runtime.session import get_session
    from streamsdsl.runtime.streaming import start_streaming
    from streamsdsl.records import RAW_RECORD_DDL

    spark = get_session()
    spark.conf.set("spark.sql.shuffle.partitions", "2")
    spark.conf.set("spark.sql.streaming.numRecentProgressUpdates", "100000")  # every batch's progress
    directory = tempfile.mkdtemp(prefix="p10-in-")
    checkpoint = tempfile.mkdtemp(prefix="p10-cp-")
    try:
        write_input(spark, directory, args.records, args.batches, args.step_ms)
        sink = CountingSink()

        def source(node: Any) -> Any:
            from pyspark.sql import functions as F

            return (spark.readStream.schema(RAW_RECORD_DDL).option("maxFilesPerTrigger", 1).parquet(directory)
                    .filter(F.col("topic").isin(list(node.topics))))

        started = time.perf_counter()
        query, compiled, _ = start_streaming(topology(), source, sink, checkpoint_location=checkpoint,
                                             trigger={"availableNow": True})
        query.awaitTermination()
        seconds = time.perf_counter() - started
        names = [str(node) for node in compiled.operators]
        samples, processed = [], 0
        for p in query.recentProgress:
            processed += int(p.numInputRows or 0)
            rows = {f"op{i} {o.operatorName.replace('Exec', '')}": int(o.numRowsTotal)
                    for i, o in enumerate(p.stateOperators)}
            samples.append({"batch": p.batchId, "orders_processed": max(0, processed - CUSTOMERS),
                            "watermark": (p.eventTime or {}).get("watermark"),
                            "state_rows": rows})
        # the windows before the last order's are closed: their orders are the ones before it
        last_ts = (args.records - 1) * args.step_ms + 1
        open_from = last_ts // WINDOW_MS * WINDOW_MS
        closed_orders = min(args.records, -(-(open_from - 1) // args.step_ms))  # orders i with i * step + 1 < open_from
        closed_windows = REGIONS * (open_from // WINDOW_MS)
        second_half = samples[len(samples) // 2:]
        peaks = {name: max(s["state_rows"].get(name, 0) for s in second_half) for name in samples[-1]["state_rows"]}
        count_name = min(peaks, key=peaks.get)  # the windowed count: the smallest state (the join holds the table)
        flat = peaks[count_name] <= 2 * REGIONS and all(p <= 2 * CUSTOMERS for p in peaks.values())
        result = {
            "id": "P10", "ratio": peaks[count_name] / REGIONS,
            "goal": "in the second half of the run the windowed count holds at most 2 state rows per region "
                    "(its open window and timer) and the join at most 2 per customer; every closed window written",
            "goal_met": flat and sink.orders == closed_orders and sink.windows == closed_windows,
            "benchmark": "P10: state over a long run (enrichment: join, regroup, 1-minute windows on close)",
            "records": args.records, "batches": args.batches, "step_ms": args.step_ms,
            "seconds": round(seconds, 1), "records_per_second": round(args.records / seconds),
            "operators": names, "peak_state_rows_second_half": peaks, "windowed_count": count_name,
            "windows_written": sink.windows, "orders_in_windows_written": sink.orders,
            "orders_in_closed_windows_expected": closed_orders, "closed_windows_expected": closed_windows,
            "samples": samples,
            "environment": environment(spark),
        }
        write_json("p10", result)
        svg_plot(samples, SVG, plot_labels(peaks, count_name))
        print(f"P10: {args.records:,} orders in {seconds:.1f} s; windows written {sink.windows:,} "
              f"(expected {closed_windows:,}) "
              f"({sink.orders:,} orders, expected {closed_orders:,}); state rows at the end: "
              f"{samples[-1]['state_rows'] if samples else {}}; goal met: {result['goal_met']}")
        query.stop()
    finally:
        shutil.rmtree(directory, ignore_errors=True)
        shutil.rmtree(checkpoint, ignore_errors=True)


if __name__ == "__main__":
    main()
