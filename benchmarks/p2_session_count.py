"""P2 — session-window count: streamsdsl's exact-semantics operator vs Spark's native ``session_window``.

1M records, 10k keys, gap 30 s: each key gets a record every 20 s, with a 60 s pause after every
fifth record, so each key has many sessions of five records. Records are in timestamp order.

* **Spark native** (baseline): ``groupBy(session_window(ts, "30 seconds"), key).count()`` — no
  update mode, no merger, no tombstones, other window bounds (why it is not the operator).
* **streamsdsl on the JVM operator**: ``group_by_key().windowed_by(SessionWindows.with_gap(30 s))
  .count()`` — the built-in count on the JVM ``StatefulProcessor`` (``streamsdsl.operator=jvm``),
  RocksDB state, emit on update (every change forwarded: about twice as many output rows as
  native's closed sessions), and the same with ``emit_strategy(on_window_close())`` (closed
  sessions only, what native's append mode writes);
* **streamsdsl on the Python operator**: the same count on the ``transformWithState`` Python
  processor calling the pure-Python semantics core (``streamsdsl.operator=python``), and the same
  sessions counted by a Python aggregator (``aggregate(lambda: 0, lambda k, v, a: a + 1, lambda k,
  a, b: a + b)``, ``ratio_python_aggregator``: users' own functions, which only this operator runs).

Where the time goes is measured with two more variants on the same data:

* **transformWithState, empty processor**: the same grouping and Python callback per key, doing
  nothing but iterating its rows — the framework cost (shuffle, Arrow/pickling, Python worker);
* **semantics core alone**: ``record_step`` (session windows) over all records in one Python process (no Spark) —
  the cost of the Kafka Streams rules themselves.

The first four variants are **streaming queries** on the same Parquet records (file source,
``trigger(availableNow=True)``, ``noop`` sink, fresh checkpoint per run; native with a watermark in
append mode, streamsdsl in update mode): ``ratio_jvm`` and ``ratio_python`` are their throughputs
over native's, in the same run. The two profile rows run batch plans (as before), for where the
Python operator's time goes.

    .venv/bin/python benchmarks/p2_session_count.py --records 1000000 --keys 10000
"""

from __future__ import annotations

import argparse
import tempfile
import time
from typing import Any

from _common import compare, environment, run_noop, summarize, write_raw_records, write_result
from _streaming import output_summary, raw_stream, run_stream, streamsdsl_stream

from streamsdsl import Consumed, EmitStrategy, Produced, Serdes, SessionWindows, StreamsBuilder
from streamsdsl.runtime.session import get_session

GAP_MS = 30_000
BASELINE = "Spark native session_window count (streaming, append)"
JVM = "streamsdsl session count, JVM operator (streaming, emit on update)"
JVM_CLOSE = "streamsdsl session count, JVM operator (streaming, emit on close)"
PYTHON = "streamsdsl session count, Python operator (streaming, emit on update)"
PYTHON_AGG = "streamsdsl session aggregate(), Python aggregator, Python operator (streaming, emit on update)"
FLOOR_INPUT = "profile: Python processor reading the Python operator's input (records packed by key), nothing else (streaming)"
FLOOR_KEY = "profile: Python processor reading the key column alone, one row per record (streaming)"


def topology(on_close: bool = False) -> Any:
    b = StreamsBuilder()
    windowed = b.stream("clicks", Consumed.with_serdes(Serdes.String(), Serdes.String())).group_by_key().windowed_by(
        SessionWindows.with_gap(GAP_MS))
    if on_close:
        windowed = windowed.emit_strategy(EmitStrategy.on_window_close())
    (
        windowed
        .count()
        .to_stream()
        .to("sessions", Produced.with_serdes(Serdes.String(), Serdes.Long()))
    )
    return b.build()


def topology_python_aggregator() -> Any:
    """The same sessions counted by users' own functions: ``aggregate(lambda: 0, lambda k, v, a:
    a + 1, lambda k, a, b: a + b)`` — what only the Python operator runs (issue 13 item 1)."""
    b = StreamsBuilder()
    (
        b.stream("clicks", Consumed.with_serdes(Serdes.String(), Serdes.String()))
        .group_by_key()
        .windowed_by(SessionWindows.with_gap(GAP_MS))
        .aggregate(lambda: 0, lambda k, v, a: a + 1, lambda k, a, b: a + b)
        .to_stream()
        .to("sessions", Produced.with_serdes(Serdes.String(), Serdes.Long()))
    )
    return b.build()


def native_stream(spark: Any, directory: str) -> Any:
    """Native session_window count as a streaming query (append mode needs the watermark)."""
    from pyspark.sql import functions as F

    raw = raw_stream(spark, directory).withColumn("et", F.timestamp_millis("timestamp")).withWatermark("et", "0 seconds")
    return raw.groupBy(F.session_window("et", f"{GAP_MS // 1000} seconds").alias("w"),
                       F.col("key").cast("string").alias("key")).count()


def native_job(spark: Any, directory: str) -> Any:
    from pyspark.sql import functions as F

    raw = spark.read.parquet(directory)
    return raw.groupBy(
        F.session_window(F.timestamp_millis("timestamp"), f"{GAP_MS // 1000} seconds").alias("w"),
        F.col("key").cast("string").alias("key"),
    ).count()


def empty_processor_job(spark: Any, directory: str) -> Any:
    """The empty processor (`_floor_processor`) as a batch job over key, timestamp and offset."""
    import _floor_processor
    from pyspark import cloudpickle
    from pyspark.sql import functions as F

    cloudpickle.register_pickle_by_value(_floor_processor)  # the workers cannot import benchmarks/
    raw = spark.read.parquet(directory).select(F.col("key").cast("string").alias("key"), "timestamp", "offset")
    return raw.groupBy("key").transformWithState(
        statefulProcessor=_floor_processor.ReadRowsOnly(), outputStructType="key string", outputMode="Update",
        timeMode="None")


def floor_stream(spark: Any, directory: str, operator_input: bool) -> Any:
    """The Row API's floor (`_floor_processor`) as a streaming query on the same records: the
    Python operator's input rows (``operator_input``) or the key column alone."""
    import _floor_processor
    from pyspark import cloudpickle
    from pyspark.sql import functions as F

    from streamsdsl.compiler.columns import OUTPUT_POSITION, POSITION_TYPE, SOURCE_POSITION
    from streamsdsl.compiler.operator_input import operator_rows, records_by_key

    cloudpickle.register_pickle_by_value(_floor_processor)  # the workers cannot import benchmarks/
    raw = raw_stream(spark, directory)
    rows = raw.select(
        F.col("key").cast("string").alias("key"), F.col("value").cast("string").alias("value"), "timestamp",
        "headers", ((F.col("partition").cast("bigint") * (1 << 40)) + F.col("offset")).alias(
            SOURCE_POSITION), F.array().cast(POSITION_TYPE).alias(OUTPUT_POSITION))
    rows = records_by_key(operator_rows(rows), pack=True) if operator_input else rows.select("key")
    processor = _floor_processor.ReadRecordsOnly() if operator_input else _floor_processor.ReadRowsOnly()
    return rows.groupBy("key").transformWithState(
        statefulProcessor=processor, outputStructType="key string", outputMode="Update", timeMode="None")


def core_alone_seconds(records: int, keys: int) -> float:
    """The semantics core applied to every record in one Python process (no Spark)."""
    from streamsdsl import ir
    from streamsdsl.operators.functions import agg_functions
    from streamsdsl.semantics.session import SessionWindowing
    from streamsdsl.semantics.windowing import KeyState, record_step

    fns = agg_functions(ir.CountAgg())
    windowing = SessionWindowing(GAP_MS, 0)
    state: dict[str, KeyState] = {}
    data = [(f"u{i % keys}", timestamp_of(i, keys)) for i in range(records)]
    start = time.perf_counter()
    stream_time = -1
    for key, ts in data:
        stream_time = max(stream_time, ts)
        state[key] = record_step(windowing, state.get(key, KeyState()), key, None, ts, stream_time, fns).state
    return time.perf_counter() - start


def timestamp_of(i: int, keys: int) -> int:
    """Python twin of ``TIMESTAMP_SQL``."""
    j, k = divmod(i, keys)
    return (j + (j // 5) * 2) * 20_000 + k * 2


TIMESTAMP_SQL = "(floor(id / {keys}) + floor(id / {keys} / 5) * 2) * 20000 + (id % {keys}) * 2"


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--keys", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    spark = get_session()
    directory = tempfile.mkdtemp(prefix="p2-")
    write_raw_records(spark, directory, "clicks", args.records, f"concat('u', id % {args.keys})", "'click'",
                      TIMESTAMP_SQL.format(keys=args.keys))
    sessions_native = native_job(spark, directory).count()
    jvm_out = output_summary(streamsdsl_stream(spark, topology(), directory, "jvm"), "update")
    python_out = output_summary(streamsdsl_stream(spark, topology(), directory, "python"), "update")
    if jvm_out != python_out:
        raise SystemExit(f"P2 invalid: the JVM operator wrote {jvm_out} (rows, values), the Python operator {python_out}")
    python_agg_out = output_summary(streamsdsl_stream(spark, topology_python_aggregator(), directory, "python"), "update")
    if python_agg_out != python_out:
        raise SystemExit(f"P2 invalid: the Python aggregator wrote {python_agg_out} (rows, values), count {python_out}")
    closed_native = output_summary(native_stream(spark, directory), "append")[0]
    closed_jvm = output_summary(streamsdsl_stream(spark, topology(True), directory, "jvm"), "update")[0]
    runs = compare({
        BASELINE: lambda: run_stream(native_stream(spark, directory), "append"),
        JVM: lambda: run_stream(streamsdsl_stream(spark, topology(), directory, "jvm"), "update"),
        JVM_CLOSE: lambda: run_stream(streamsdsl_stream(spark, topology(True), directory, "jvm"), "update"),
        PYTHON: lambda: run_stream(streamsdsl_stream(spark, topology(), directory, "python"), "update"),
        PYTHON_AGG: lambda: run_stream(streamsdsl_stream(spark, topology_python_aggregator(), directory, "python"),
                                       "update"),
        FLOOR_INPUT: lambda: run_stream(floor_stream(spark, directory, True), "update"),
        FLOOR_KEY: lambda: run_stream(floor_stream(spark, directory, False), "update"),
    }, args.repeats)
    runs["profile: transformWithState, empty Python processor (batch)"] = [
        run_noop(empty_processor_job(spark, directory))]
    runs["profile: semantics core alone (1 Python process, no Spark)"] = [core_alone_seconds(args.records, args.keys)]
    rows = summarize(runs, BASELINE, args.records)
    by_name = {r["variant"]: r for r in rows}
    ratio_jvm = by_name[JVM]["throughput_ratio_to_baseline"]
    ratio_python = by_name[PYTHON]["throughput_ratio_to_baseline"]
    ratio_python_agg = by_name[PYTHON_AGG]["throughput_ratio_to_baseline"]
    result = {
        "id": "P2",
        "ratio": ratio_jvm,
        "benchmark": "P2 session-window count: streamsdsl (JVM and Python operators) vs Spark native session_window",
        "records": args.records,
        "keys": args.keys,
        "gap_ms": GAP_MS,
        "sessions": sessions_native,
        "closed_sessions_native_append": closed_native,
        "closed_sessions_jvm_on_close": closed_jvm,
        "update_rows_jvm_and_python": list(jvm_out),
        "ratio_jvm": ratio_jvm,
        "ratio_jvm_on_close": by_name[JVM_CLOSE]["throughput_ratio_to_baseline"],
        "ratio_python": ratio_python,
        "ratio_python_aggregator": ratio_python_agg,
        "goal_python_aggregator": "Python operator with a Python aggregator >= 0.25x native (issue 13 item 1)",
        "goal_python_aggregator_met": ratio_python_agg >= 0.25,
        "ratio_floor_operator_input": by_name[FLOOR_INPUT]["throughput_ratio_to_baseline"],
        "ratio_floor_key_only": by_name[FLOOR_KEY]["throughput_ratio_to_baseline"],
        "goal": "JVM operator throughput >= 1.0x native session_window (streaming, same run)",
        "goal_met": ratio_jvm >= 1.0,
        "environment": environment(spark),
        "verdict": (f"JVM operator / native throughput = {ratio_jvm:.3f} (goal ≥ 1.0), Python operator {ratio_python:.3f} "
                    f"(with a Python aggregator {ratio_python_agg:.3f}, goal ≥ 0.25); "
                    f"{sessions_native:,} sessions; closed sessions written: native {closed_native:,}, "
                    f"JVM on close {closed_jvm:,}."),
    }
    md = write_result("p2", result, rows)
    print(md)
    return result


if __name__ == "__main__":
    main()
