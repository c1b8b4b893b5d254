"""P9, latency floor: P9's enrichment on streamsdsl against the same query hand-written in Spark.

The floor is the query a Spark user would write for P9's enrichment (``p9_kafka_streams_peer.py``,
app ``enrich``): the orders topic read with the **same connector** streamsdsl uses there (the
``streamsdsl-kafka`` Python data source), joined with the customers (the table topic's records,
read once when the query starts, broadcast: Spark has no stream–table join, so this is the
cheapest form of it), regrouped by region and counted in 1-minute tumbling windows (event time
= the record timestamp, watermark without delay, as windows without grace) in **update** mode,
written with the ``streamsdsl-kafka`` sink; the output record's timestamp is the newest input
timestamp of its window (Kafka Streams' rule), so the load generator measures both the same way.
Same trigger (``processingTime`` = ``commit.interval.ms`` = 100 ms), same session, same broker.

For every setting (``--settings``), both queries run on fresh topics one after the other,
``--repeats`` times, alternating which goes first; each is fed at ``--rate`` records/s for
``--seconds`` by P9's load generator process (`SinkTail`: latency = receive time - the output
record's timestamp), the first ``--warmup`` seconds left out. Reported per run: p50/p90/p99,
the load average, and the mean of Spark's ``durationMs`` phases over the micro-batches that
read data, and per state operator its commit and update time and its stores' RocksDB metrics
(`STORE_METRICS`). ``--interleave`` runs every setting in every repeat, in alternating order (an
A/B in one process, for a machine whose load trends). The query (`_floor_p9.floor_query`) is
shared with ``p9_kafka_streams_peer.py --floors``. Writes
``benchmarks/results/p9_latency_floor.json`` (or ``--out``).

    .venv/bin/python benchmarks/p9_latency_floor.py --settings base,trigger0 --repeats 2
    .venv/bin/python benchmarks/p9_latency_floor.py --settings base,hadoop_checkpoint_files \
        --repeats 3 --interleave --floors spark_floor
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import statistics
import sys
import tempfile
import time
import uuid
from datetime import datetime
from typing import Any

from _common import write_json
from _floor_p9 import floor_query
from p9_kafka_streams_peer import (
    COMMIT_MS,
    WINDOW_MS,
    PHASES,
    add_driver_java_options,
    driver_session,
    finish_loadgen,
    latency_topics,
    run_loadgen,
    sdsl_topology,
    wait_for_output,
)

#: Settings tried on both queries: Spark SQL settings set on the session before each query
#: starts, and the trigger interval (ms; streamsdsl's ``commit.interval.ms``).
SETTINGS: dict[str, dict[str, Any]] = {
    "base": {},
    "trigger0": {"trigger_ms": 0},
    "trigger500": {"trigger_ms": 500},
    "partitions1": {"spark": {"spark.sql.shuffle.partitions": "1"}},
    "no_data_batches_off": {"spark": {"spark.sql.streaming.noDataMicroBatches.enabled": "false"}},
    "changelog_off": {"spark": {"spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "false"}},
    # RocksDB settings of the state stores' per-put and per-commit work (issue 42 item 5)
    "rows_untracked": {"spark": {"spark.sql.streaming.stateStore.rocksdb.trackTotalNumberOfRows": "false"}},
    "snapshot_every_100": {"spark": {"spark.sql.streaming.stateStore.minDeltasForSnapshot": "100"}},
    "commit_validation_off": {"spark": {"spark.sql.streaming.stateStore.commitValidation.enabled": "false"}},
    # checkpoint files written with Java's file API (no chmod child process, no .crc), streamsdsl's jar
    "local_checkpoint_files": {"spark": {"spark.sql.streaming.checkpointFileManagerClass":
                                         "io.streamsdsl.jvm.LocalCheckpointFileManager"}},
    "hadoop_checkpoint_files": {"spark": {"spark.sql.streaming.checkpointFileManagerClass":
                                          "org.apache.spark.sql.execution.streaming.checkpointing."
                                          "FileContextBasedCheckpointFileManager"}},
}
#: The state stores' custom metrics kept per operator (ms or counts summed over the stores of a batch).
STORE_METRICS = ("rocksdbCommitFileSyncLatencyMs", "rocksdbCommitFlushLatencyMs", "rocksdbCommitCheckpointLatencyMs",
                 "rocksdbCommitWriteBatchLatencyMs", "rocksdbCommitCompactLatencyMs", "rocksdbCommitPauseLatencyMs",
                 "rocksdbGetCount", "rocksdbPutCount")


def phases(progress: list[Any]) -> dict[str, Any]:
    """Mean ``durationMs`` per micro-batch that read data, and how many batches there were."""
    with_data = [p for p in progress if int(p["numInputRows"]) > 0]
    totals: dict[str, float] = collections.defaultdict(float)
    for p in with_data:
        for k, v in dict(p["durationMs"]).items():
            totals[k] += int(v)
    ops: dict[str, dict[str, float]] = collections.defaultdict(lambda: collections.defaultdict(float))
    for p in with_data:
        for i, op in enumerate(p["stateOperators"] or []):
            name = f"{i}:{op['operatorName']}"
            for k in ("commitTimeMs", "allUpdatesTimeMs", "allRemovalsTimeMs", "numRowsTotal"):
                ops[name][k] += float(op[k] or 0)
            custom = dict(op["customMetrics"] or {})
            for k in STORE_METRICS:
                if k in custom:
                    ops[name][k] += float(custom[k] or 0)
            ops[name]["stores"] = float(op["numStateStoreInstances"] or 0) * len(with_data)
    n = max(1, len(with_data))
    keys = [*[k for k in PHASES if k in totals], *sorted(set(totals) - set(PHASES))]
    return {"batches": len(progress), "batches_with_data": len(with_data),
            "rows_per_batch": round(statistics.fmean([int(p["numInputRows"]) for p in with_data]), 1) if with_data else 0,
            "ms_per_batch_with_data": {k: round(totals[k] / n, 1) for k in keys},
            "state_operators_per_batch": {o: {k: round(v / n, 1) for k, v in m.items()} for o, m in ops.items()}}


def run_one(kafka: Any, spark: Any, engine: str, setting: dict[str, Any], args: argparse.Namespace,
            tmp: str) -> dict[str, Any]:
    topics = latency_topics(kafka, "enrich", engine)
    trigger_ms = setting.get("trigger_ms", COMMIT_MS)
    spec = {"bootstrap": kafka.bootstrap_servers, "app": "enrich", "source": topics["source"], "sink": topics["sink"],
            "rate": args.rate, "seconds": args.seconds, "warmup": args.warmup, "keys": 500, "drain": 5}
    load = [round(x, 2) for x in os.getloadavg()]
    if engine.startswith("streamsdsl"):
        streams = sdsl_streams(kafka.bootstrap_servers, topics, os.path.join(tmp, uuid.uuid4().hex), trigger_ms,
                               columns=engine == "streamsdsl_columns")
        streams.start()
        query, stop = streams.streaming_query, streams.close
    else:
        query = floor_query(spark, kafka.bootstrap_servers, topics, os.path.join(tmp, uuid.uuid4().hex), trigger_ms,
                            jvm=engine.startswith("spark_jvm"), async_progress=engine == "spark_jvm_async")
        stop = query.stop
    try:
        deadline = time.monotonic() + 120  # "latest" is resolved by the first batch: wait for it
        while query.lastProgress is None and time.monotonic() < deadline:
            time.sleep(0.1)
        try:
            ready = wait_for_output(kafka.bootstrap_servers, topics["source"], topics["sink"], "enrich", timeout=90)
        except TimeoutError as e:
            raise RuntimeError(f"{engine}: {e}; query error {query.exception()}; progress {query.lastProgress}") from e
        started = time.time()
        proc, out = run_loadgen(spec)
        result = finish_loadgen(proc, out)
        progress = [p for p in query.recentProgress
                    if datetime.fromisoformat(p["timestamp"].replace("Z", "+00:00")).timestamp() >= started]
    finally:
        stop()
    keep = ("p50_ms", "p90_ms", "p99_ms", "max_ms", "outputs_measured", "rate_achieved")
    return {"engine": engine, "load_average": load, **{k: result[k] for k in keep},
            "seconds_to_first_output": round(ready, 2), **phases(progress)}


def columns_topology(source: str, customers: str, sink: str) -> Any:
    """P9's enrichment without Python: regrouped by a Column (the joined value, the region) and
    written with its windowed key (Kafka Streams' layout) instead of the lambda that formats
    ``region@start``."""
    from pyspark.sql import functions as F

    from streamsdsl import Consumed, Grouped, Joiners, Produced, Serdes, StreamsBuilder, TimeWindows

    s = Serdes.String()
    b = StreamsBuilder()
    (b.stream(source, Consumed.with_serdes(s, s)).join(b.table(customers, Consumed.with_serdes(s, s)), Joiners.right())
     .group_by(F.col("value"), Grouped.with_serdes(s, s))
     .windowed_by(TimeWindows.of_size_with_no_grace(WINDOW_MS)).count().to_stream()
     .to(sink, Produced.with_serdes(s, Serdes.Long())))  # the windowed key in Kafka Streams' layout
    return b.build()


def sdsl_streams(bootstrap: str, topics: dict[str, str], state_dir: str, trigger_ms: int,
                 columns: bool = False) -> Any:
    """P9's streamsdsl enrichment (emit on every update), as `p9_kafka_streams_peer.sdsl_app`
    configures it but with ``commit.interval.ms`` = ``trigger_ms`` (``columns``: `columns_topology`)."""
    from streamsdsl import KafkaStreams

    topology = (columns_topology(topics["source"], topics["customers"], topics["sink"]) if columns else
                sdsl_topology("enrich", False, topics["source"], topics["customers"], topics["sink"]))
    return KafkaStreams(topology, {
        "application.id": f"p9-{uuid.uuid4().hex[:8]}", "bootstrap.servers": bootstrap,
        "state.dir": state_dir, "commit.interval.ms": trigger_ms})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=int, default=2_000)
    parser.add_argument("--seconds", type=float, default=15)
    parser.add_argument("--warmup", type=float, default=5)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--settings", default="base", help=f"comma-separated, of {', '.join(SETTINGS)}")
    parser.add_argument("--engines", default="streamsdsl",
                        help="streamsdsl (P9's topology: two Python lambdas) and/or streamsdsl_columns (no Python)")
    parser.add_argument("--floors", default="spark_floor,spark_jvm",
                        help="the hand-written queries: spark_floor (streamsdsl-kafka, the floor), spark_jvm "
                             "(Spark's Kafka source and sink), spark_jvm_async (that sink with async progress: Spark "
                             "4.2 refuses it for a stateful query)")
    parser.add_argument("--interleave", action="store_true",
                        help="A/B: every repeat runs every setting, in alternating order (else a setting's repeats "
                             "run together)")
    add_driver_java_options(parser)
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    names = [s for s in args.settings.split(",") if s]
    if set(names) - set(SETTINGS):
        parser.error(f"--settings: choose from {', '.join(SETTINGS)}")

    import pyspark

    from streamsdsl.testing.local_kafka import local_kafka

    load_start = [round(x, 2) for x in os.getloadavg()]
    runs: list[dict[str, Any]] = []
    with local_kafka() as kafka, tempfile.TemporaryDirectory(prefix="p9f-") as tmp:
        spark, java_options = driver_session(args.driver_java_options)
        spark.conf.set("spark.sql.streaming.numRecentProgressUpdates", "1000")
        defaults = {k: spark.conf.get(k, None) for s in SETTINGS.values() for k in s.get("spark", {})}
        # a short run of each, not recorded: the session's first query starts the Python workers
        warm = argparse.Namespace(**{**vars(args), "seconds": 4, "warmup": 0})
        for engine in [*args.engines.split(","), *[f for f in args.floors.split(",") if f]]:
            print(f"P9 floor: warm-up, {engine}", file=sys.stderr, flush=True)
            run_one(kafka, spark, engine, {}, warm, tmp)
        plan = ([(r, name) for r in range(args.repeats) for name in (names if r % 2 == 0 else names[::-1])]
                if args.interleave else [(r, name) for name in names for r in range(args.repeats)])
        for r, name in plan:
            setting = SETTINGS[name]
            for k, v in defaults.items():
                if v is None:
                    spark.conf.unset(k)
                else:
                    spark.conf.set(k, v)
            for k, v in setting.get("spark", {}).items():
                spark.conf.set(k, v)
            engines = [*args.engines.split(","), *[f for f in args.floors.split(",") if f]]
            for engine in (engines if r % 2 == 0 else engines[::-1]):
                print(f"P9 floor: {name}, repeat {r + 1}, {engine}", file=sys.stderr, flush=True)
                row = {"setting": name, "repeat": r + 1, **run_one(kafka, spark, engine, setting, args, tmp)}
                print(json.dumps(row), file=sys.stderr, flush=True)
                runs.append(row)
        version = pyspark.__version__
        spark.stop()

    summary = {}
    for name in names:
        engines = sorted({r["engine"] for r in runs})
        got = {e: [r for r in runs if r["setting"] == name and r["engine"] == e] for e in engines}
        med = {e: {q: statistics.median(r[q] for r in rs) for q in ("p50_ms", "p99_ms")} for e, rs in got.items() if rs}
        summary[name] = {f"{e}_{q}": v for e, m in med.items() for q, v in m.items()}
        if "streamsdsl" in med and "spark_floor" in med:
            summary[name].update(
                p50_over_floor=round(med["streamsdsl"]["p50_ms"] / med["spark_floor"]["p50_ms"], 3),
                p99_over_floor=round(med["streamsdsl"]["p99_ms"] / med["spark_floor"]["p99_ms"], 3))
    first = summary.get(names[0], {})
    result = {
        "id": "P9-FLOOR", "ratio": first.get("p50_over_floor", 0.0),
        "goal": "issue 42 item 5: streamsdsl's p50/p99 latency <= 1.3x the hand-written Spark query's (ratio: p50 "
                "over the floor, first setting)",
        "goal_met": (first["p50_over_floor"] <= 1.3 and first["p99_over_floor"] <= 1.3) if "p50_over_floor" in first
        else None,
        "benchmark": f"P9 enrichment latency at {args.rate} records/s for {args.seconds:g} s: streamsdsl against the "
                     "same query hand-written in Spark (streamsdsl-kafka source and sink, broadcast customers, "
                     "1-minute windows in update mode), same trigger and session",
        "settings": {n: SETTINGS[n] for n in names}, "summary_medians": summary, "runs": runs,
        "driver_java_options": java_options,
        "environment": {"pyspark": version, "cores": os.cpu_count(), "load_average_at_start": load_start,
                        "load_average_at_end": [round(x, 2) for x in os.getloadavg()]},
        "timestamp": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    written = write_json("p9_latency_floor", result, args.out)
    print(json.dumps({k: written[k] for k in ("ratio", "summary_medians")}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
