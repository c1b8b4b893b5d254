"""P2b — tumbling and hopping window count: streamsdsl's JVM operator vs Spark's native ``window()``.

The P2 data (1M records, 10k keys, a record per key every 20 s with a pause after every fifth),
counted per key in 60 s tumbling windows and in 60 s windows advancing by 20 s (hopping):

* **Spark native** (baseline): ``groupBy(window(ts, "60 seconds"[, "20 seconds"]), key).count()``,
  a streaming query with a watermark in append mode (closed windows only);
* **streamsdsl, JVM operator**: ``windowed_by(TimeWindows...).count()`` with
  ``streamsdsl.operator=jvm``, emit on update (every change forwarded) and emit on close (closed
  windows only, what native writes; the number of windows written is checked equal, leaving out
  native's hopping windows that start before 0, which Kafka Streams does not have).

All are streaming queries on the same Parquet records (``trigger(availableNow=True)``, ``noop``
sink, fresh checkpoint per run), alternated in one process.

    .venv/bin/python benchmarks/p2b_time_window_count.py --records 1000000 --keys 10000
"""

from __future__ import annotations

import argparse
import tempfile
from typing import Any

from _common import compare, environment, summarize, write_raw_records, write_result
from _streaming import output_summary, raw_stream, run_stream, streamsdsl_stream
from p2_session_count import TIMESTAMP_SQL

from streamsdsl import Consumed, EmitStrategy, Produced, Serdes, StreamsBuilder, TimeWindows
from streamsdsl.runtime.session import get_session

SIZE_MS = 60_000
ADVANCE_MS = 20_000
KINDS = {"tumbling": SIZE_MS, "hopping": ADVANCE_MS}


def topology(advance_ms: int, on_close: bool) -> Any:
    b = StreamsBuilder()
    windows = TimeWindows.of_size_with_no_grace(SIZE_MS).advance_by(advance_ms)
    w = b.stream("clicks", Consumed.with_serdes(Serdes.String(), Serdes.String())).group_by_key().windowed_by(windows)
    if on_close:
        w = w.emit_strategy(EmitStrategy.on_window_close())
    w.count().to_stream().to("counts", Produced.with_serdes(Serdes.String(), Serdes.Long()))
    return b.build()


def native_stream(spark: Any, directory: str, advance_ms: int) -> Any:
    from pyspark.sql import functions as F

    raw = raw_stream(spark, directory).withColumn("et", F.timestamp_millis("timestamp")).withWatermark("et", "0 seconds")
    window = F.window("et", f"{SIZE_MS // 1000} seconds", f"{advance_ms // 1000} seconds")
    return raw.groupBy(window.alias("w"), F.col("key").cast("string").alias("key")).count()


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--keys", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    from pyspark.sql import functions as F

    spark = get_session()
    directory = tempfile.mkdtemp(prefix="p2b-")
    write_raw_records(spark, directory, "clicks", args.records, f"concat('u', id % {args.keys})", "'click'",
                      TIMESTAMP_SQL.format(keys=args.keys))
    variants: dict[str, Any] = {}
    closed: dict[str, tuple[int, int]] = {}
    for kind, advance in KINDS.items():
        # native hopping windows also start before 0 (Kafka's windowsFor: start >= 0): not compared
        native = native_stream(spark, directory, advance)
        native = native.filter(F.col("w.start") >= F.timestamp_millis(F.lit(0)))
        closed[kind] = (output_summary(native, "append")[0],
                        output_summary(streamsdsl_stream(spark, topology(advance, True), directory, "jvm"), "update")[0])
        if closed[kind][0] != closed[kind][1]:
            raise SystemExit(f"P2b invalid: {kind}: native wrote {closed[kind][0]} closed windows, the JVM operator "
                             f"{closed[kind][1]}")
        variants[f"Spark native {kind} window() count (streaming, append)"] = (
            lambda a=advance: run_stream(native_stream(spark, directory, a), "append"))
        variants[f"streamsdsl {kind} count, JVM operator (streaming, emit on update)"] = (
            lambda a=advance: run_stream(streamsdsl_stream(spark, topology(a, False), directory, "jvm"), "update"))
        variants[f"streamsdsl {kind} count, JVM operator (streaming, emit on close)"] = (
            lambda a=advance: run_stream(streamsdsl_stream(spark, topology(a, True), directory, "jvm"), "update"))
    runs = compare(variants, args.repeats)
    rows: list[dict[str, Any]] = []
    ratios: dict[str, float] = {}
    for kind in KINDS:
        part = {name: times for name, times in runs.items() if f" {kind} " in name}
        baseline = f"Spark native {kind} window() count (streaming, append)"
        kind_rows = summarize(part, baseline, args.records)
        rows += kind_rows
        ratios[kind] = kind_rows[1]["throughput_ratio_to_baseline"]
        ratios[f"{kind}_on_close"] = kind_rows[2]["throughput_ratio_to_baseline"]
    ratio = min(ratios["tumbling"], ratios["hopping"])
    result = {
        "id": "P2b",
        "ratio": ratio,
        "goal": "tumbling and hopping count on the JVM operator >= 1.0x native window() count (streaming, same run)",
        "goal_met": ratio >= 1.0,
        "benchmark": "P2b tumbling / hopping window count: streamsdsl JVM operator vs Spark native window()",
        "records": args.records,
        "keys": args.keys,
        "size_ms": SIZE_MS,
        "advance_ms": ADVANCE_MS,
        "ratio_tumbling": ratios["tumbling"],
        "ratio_hopping": ratios["hopping"],
        "ratio_tumbling_on_close": ratios["tumbling_on_close"],
        "ratio_hopping_on_close": ratios["hopping_on_close"],
        "closed_windows_written": {k: v[0] for k, v in closed.items()},
        "environment": environment(spark),
        "verdict": (f"JVM operator / native throughput: tumbling {ratios['tumbling']:.3f}, hopping "
                    f"{ratios['hopping']:.3f} (goal ≥ 1.0; baseline per kind in the same run)."),
    }
    md = write_result("p2b", result, rows)
    print(md)
    return result


if __name__ == "__main__":
    main()
