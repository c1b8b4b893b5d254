"""P2 — session-window count: streamsdsl's exact-semantics operator vs Spark's native ``session_window``.

1M records, 10k keys, gap 30 s: each key gets a record every 20 s, with a 60 s pause after every
fifth record, so each key has many sessions of five records. Records are in timestamp order.

* **Spark native** (baseline): ``groupBy(session_window(ts, "30 seconds"), key).count()`` — no
  update mode, no merger, no tombstones, other window bounds (why it is not the operator).
* **streamsdsl**: ``group_by_key().windowed_by(SessionWindows.with_gap(30 s)).count()`` — the
  ``transformWithState`` processor calling the pure-Python semantics core, RocksDB state.

Where the time goes is measured with two more variants on the same data:

* **transformWithState, empty processor**: the same grouping and Python callback per key, doing
  nothing but iterating its rows — the framework cost (shuffle, Arrow/pickling, Python worker);
* **semantics core alone**: ``record_step`` (session windows) over all records in one Python process (no Spark) —
  the cost of the Kafka Streams rules themselves.

All variants run the streaming-mode plan on a batch (Parquet) source, completely (``noop`` sink).

    .venv/bin/python benchmarks/p2_session_count.py --records 1000000 --keys 10000
"""

from __future__ import annotations

import argparse
import tempfile
import time
from typing import Any, Iterator

from _common import compare, environment, run_noop, summarize, write_raw_records, write_result

from streamsdsl import Consumed, Produced, Serdes, SessionWindows, StreamsBuilder
from streamsdsl.runtime.session import get_session

GAP_MS = 30_000
BASELINE = "Spark native session_window count"


def topology() -> Any:
    b = StreamsBuilder()
    (
        b.stream("clicks", Consumed.with_serdes(Serdes.String(), Serdes.String()))
        .group_by_key()
        .windowed_by(SessionWindows.with_gap(GAP_MS))
        .count()
        .to_stream()
        .to("sessions", Produced.with_serdes(Serdes.String(), Serdes.Long()))
    )
    return b.build()


def streamsdsl_job(spark: Any, directory: str) -> Any:
    from streamsdsl.compiler import PlanMode, compile_topology

    return compile_topology(topology(), lambda node: spark.read.parquet(directory), mode=PlanMode.STREAMING).output


def native_job(spark: Any, directory: str) -> Any:
    from pyspark.sql import functions as F

    raw = spark.read.parquet(directory)
    return raw.groupBy(
        F.session_window(F.timestamp_millis("timestamp"), f"{GAP_MS // 1000} seconds").alias("w"),
        F.col("key").cast("string").alias("key"),
    ).count()


def empty_processor_job(spark: Any, directory: str) -> Any:
    from pyspark.sql import functions as F
    from pyspark.sql.streaming.stateful_processor import StatefulProcessor

    class Empty(StatefulProcessor):
        def init(self, handle: Any) -> None:
            pass

        def handleInputRows(self, key: Any, rows: Iterator[Any], timerValues: Any) -> Iterator[Any]:  # noqa: N802,N803
            for _ in rows:
                pass
            return iter(())

        def close(self) -> None:
            pass

    raw = spark.read.parquet(directory).select(F.col("key").cast("string").alias("key"), "timestamp", "offset")
    return raw.groupBy("key").transformWithState(
        statefulProcessor=Empty(), outputStructType="key string", outputMode="Update", timeMode="None"
    )


def core_alone_seconds(records: int, keys: int) -> float:
    """The semantics core applied to every record in one Python process (no Spark)."""
    from streamsdsl import ir
    from streamsdsl.compiler.aggregations import agg_functions
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
    sessions_sdsl = streamsdsl_job(spark, directory).count()
    if sessions_native != sessions_sdsl:
        raise SystemExit(f"P2 invalid: {sessions_native} native sessions vs {sessions_sdsl} from streamsdsl")
    runs = compare({
        BASELINE: lambda: run_noop(native_job(spark, directory)),
        "streamsdsl session count (exact semantics)": lambda: run_noop(streamsdsl_job(spark, directory)),
        "profile: transformWithState, empty Python processor": lambda: run_noop(empty_processor_job(spark, directory)),
    }, args.repeats)
    runs["profile: semantics core alone (1 Python process, no Spark)"] = [core_alone_seconds(args.records, args.keys)]
    rows = summarize(runs, BASELINE, args.records)
    ratio = rows[1]["throughput_ratio_to_baseline"]
    result = {
        "id": "P2",
        "ratio": ratio,
        "benchmark": "P2 session-window count: streamsdsl vs Spark native session_window",
        "records": args.records,
        "keys": args.keys,
        "gap_ms": GAP_MS,
        "sessions": sessions_native,
        "throughput_ratio_streamsdsl_to_native": ratio,
        "goal": "throughput ratio >= 0.5",
        "goal_met": ratio >= 0.5,
        "environment": environment(spark),
        "verdict": f"streamsdsl / native throughput = {ratio:.3f} (goal ≥ 0.5); {sessions_native:,} sessions.",
    }
    md = write_result("p2", result, rows)
    print(md)
    return result


if __name__ == "__main__":
    main()
