"""P9, latency: Spark's real-time trigger against micro-batches, for the same streamsdsl application.

A stateless application of Column steps (``filter(F.col("value") % 10 != 7).map_values(F.col("value") * 2)``,
String keys, Long values) read with Spark's Kafka connector (``kafka.connector = "jvm"``) runs twice
in the same process and SparkSession on the same broker: with the default micro-batch trigger
(``commit.interval.ms = 100``, as in P9) and with ``streamsdsl.trigger = real_time`` (Spark's
real-time mode, ``commit.interval.ms`` = its checkpoint interval, 5000 ms); then the floor, the
same query hand-written in Spark on the real-time trigger. For each, a load
generator in its own process feeds a fresh topic at ``--rate`` records/s for ``--seconds`` and reads
the output topic (librdkafka, ``fetch.wait.max.ms = 5``). Each input value is the wall-clock time
of its production in ms shifted left by 20 bits plus a sequence number, so latency = the consumer's
receive time - (output value / 2 >> 20) (Spark's
Kafka sink writes no record timestamp, so the output's timestamp cannot carry it). The first
``--warmup`` seconds are left out. Outputs are checked: every input whose value does not end in 7
arrives doubled, once (at-least-once could repeat; a repeat is counted and reported).

    .venv/bin/python benchmarks/p9_real_time.py --rate 2000 --seconds 30
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from benchmarks._common import SinkTail, write_json  # noqa: E402

PARTITIONS = 2


def loadgen(spec: dict[str, Any]) -> dict[str, Any]:
    """Produce ``rate`` records/s for ``seconds`` (value = the wall clock in ms, a big-endian Long)
    while reading the output; latency = receive time - output value / 2. Runs in its own process."""
    import struct

    from confluent_kafka import Producer

    bootstrap, rate, seconds = spec["bootstrap"], spec["rate"], spec["seconds"]
    tail = SinkTail(bootstrap, spec["sink"], PARTITIONS, lambda m: struct.unpack(">q", m.value())[0] // 2, "p9rt")
    tail.start()
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "partitioner": "murmur2_random"})
    start = time.time()
    sent, expected = 0, set()
    while True:
        now = time.time()
        if now - start >= seconds:
            break
        due = int((now - start) * rate)
        while sent < due:
            ms = (int(time.time() * 1000) << 20) | sent  # unique; the application drops those ending in 7
            producer.produce(spec["source"], struct.pack(">q", ms), f"k{sent % 1000}".encode())
            if ms % 10 != 7:
                expected.add(ms)
            sent += 1
        producer.poll(0)
        time.sleep(0.01)
    producer.flush(30)
    end_ms = time.time() * 1000
    time.sleep(spec["drain"])
    tail.stop()
    samples = tail.samples
    got = [v for v, _ in samples]
    cutoff = (start + spec["warmup"]) * 1000
    measured = [(recv - (v >> 20), recv) for v, recv in samples if (v >> 20) >= cutoff]
    lat = sorted(latency for latency, _ in measured)
    # when the slow records arrived (seconds since the start): periodic, or not
    slow = sorted({int(recv / 1000 - start) for latency, recv in measured if lat and latency > 4 * lat[len(lat) // 2]})

    def q(p: float) -> float | None:
        return round(lat[min(len(lat) - 1, int(p * len(lat)))], 1) if lat else None

    return {"produced": sent, "rate_achieved": round(sent / seconds, 1), "outputs": len(samples),
            "missing": len(expected - set(got)), "repeated": len(got) - len(set(got)),
            "unexpected": len(set(got) - expected),
            "outputs_measured": len(lat), "p50_ms": q(0.50), "p90_ms": q(0.90), "p99_ms": q(0.99),
            "max_ms": round(lat[-1], 1) if lat else None,
            "mean_ms": round(statistics.fmean(lat), 1) if lat else None,
            "slow_seconds": slow,
            "newest_output_lag_ms": round(end_ms - (max(got) >> 20), 1) if got else None}


def topology(source: str, sink: str) -> Any:
    from pyspark.sql import functions as F

    from streamsdsl import Consumed, Produced, Serdes, StreamsBuilder

    builder = StreamsBuilder()
    (builder.stream(source, Consumed.with_serdes(Serdes.String(), Serdes.Long()))
     .filter(F.col("value") % 10 != 7).map_values(F.col("value") * 2)
     .to(sink, Produced.with_serdes(Serdes.String(), Serdes.Long())))
    return builder.build()


def run_variant(kafka: Any, spark: Any, name: str, overrides: dict[str, Any], args: argparse.Namespace,
                state_dir: str) -> dict[str, Any]:
    from streamsdsl.runtime.app import KafkaStreams

    source, sink = f"p9rt-in-{uuid.uuid4().hex[:6]}", f"p9rt-out-{uuid.uuid4().hex[:6]}"
    kafka.create_topic(source, PARTITIONS)
    kafka.create_topic(sink, PARTITIONS)
    config = {"application.id": f"p9rt-{name}-{uuid.uuid4().hex[:6]}", "bootstrap.servers": kafka.bootstrap_servers,
              "state.dir": state_dir, "kafka.connector": "jvm", "auto.offset.reset": "latest", **overrides}
    app = KafkaStreams(topology(source, sink), config, spark=spark)
    app.start()
    try:
        time.sleep(args.settle)  # the query's start (a real-time batch's tasks are long-running)
        result = _loadgen_process(kafka, source, sink, args)
        progress = [p for p in app.streaming_query.recentProgress]
        durations = [p.durationMs.get("triggerExecution") for p in progress if p.durationMs]
        result["batches_seen"] = len(progress)
        result["median_trigger_execution_ms"] = statistics.median(durations) if durations else None
    finally:
        app.close(60)
    return {"variant": name, "config": overrides, **result}


def run_spark_floor(kafka: Any, spark: Any, args: argparse.Namespace, state_dir: str) -> dict[str, Any]:
    """The floor: the same query hand-written in Spark (its Kafka source, the filter and the
    doubling as Catalyst expressions, its Kafka sink), on the real-time trigger."""
    from pyspark.sql import functions as F

    source, sink = f"p9rt-in-{uuid.uuid4().hex[:6]}", f"p9rt-out-{uuid.uuid4().hex[:6]}"
    kafka.create_topic(source, PARTITIONS)
    kafka.create_topic(sink, PARTITIONS)
    value = F.conv(F.hex("value"), 16, -10).cast("bigint")
    rows = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", kafka.bootstrap_servers)
            .option("subscribe", source).option("startingOffsets", "latest").load()
            .where(value % 10 != 7)
            .select("key", F.unhex(F.lpad(F.hex(value * 2), 16, "0")).alias("value")))
    query = (rows.writeStream.format("kafka").option("kafka.bootstrap.servers", kafka.bootstrap_servers)
             .option("topic", sink).option("checkpointLocation", os.path.join(state_dir, uuid.uuid4().hex))
             .outputMode("update").trigger(realTime="5000 milliseconds").start())
    try:
        time.sleep(args.settle)
        result = _loadgen_process(kafka, source, sink, args)
    finally:
        query.stop()
    return {"variant": "spark_real_time_floor", "config": {"trigger": "realTime 5000 ms"}, **result}


def _loadgen_process(kafka: Any, source: str, sink: str, args: argparse.Namespace) -> dict[str, Any]:
    spec = {"bootstrap": kafka.bootstrap_servers, "source": source, "sink": sink, "rate": args.rate,
            "seconds": args.seconds, "warmup": args.warmup, "drain": args.drain}
    with tempfile.TemporaryFile(mode="w+") as out:
        proc = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--loadgen", json.dumps(spec)],
                                stdout=out, text=True)
        if proc.wait(600) != 0:
            raise RuntimeError(f"the load generator failed (exit {proc.returncode})")
        out.seek(0)
        return json.loads(out.read().strip().splitlines()[-1])  # type: ignore[no-any-return]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--loadgen", help=argparse.SUPPRESS)
    parser.add_argument("--rate", type=int, default=2000)
    parser.add_argument("--seconds", type=float, default=30)
    parser.add_argument("--warmup", type=float, default=5)
    parser.add_argument("--drain", type=float, default=8)
    parser.add_argument("--settle", type=float, default=8)
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    if args.loadgen:
        print(json.dumps(loadgen(json.loads(args.loadgen))))
        return 0

    from streamsdsl.runtime.session import get_session
    from streamsdsl.testing.local_kafka import local_kafka

    load_start = [round(x, 2) for x in os.getloadavg()]
    with local_kafka() as kafka, tempfile.TemporaryDirectory() as state_dir:
        spark = get_session()
        rows = [
            run_variant(kafka, spark, "micro_batch", {"commit.interval.ms": 100}, args, state_dir),
            run_variant(kafka, spark, "real_time", {"streamsdsl.trigger": "real_time", "commit.interval.ms": 5000},
                        args, state_dir),
            run_spark_floor(kafka, spark, args, state_dir),
        ]
        version = spark.version
        spark.stop()
    micro, real, floor = rows
    ok = all(r["missing"] == 0 and r["unexpected"] == 0 for r in rows)
    ratio = (micro["p50_ms"] / real["p50_ms"]) if micro["p50_ms"] and real["p50_ms"] else 0.0
    result = {
        "id": "P9-RT", "ratio": ratio,
        "goal": "none, a measurement: micro-batch p50 latency / real-time p50 latency (above 1: real-time is faster)",
        "goal_met": None,
        "benchmark": f"stateless Column-step application, {args.rate} records/s for {args.seconds:g} s, "
                     "micro-batch (commit.interval.ms 100) against Spark's real-time trigger (5000 ms checkpoints)",
        "real_time_p50_over_floor": round(real["p50_ms"] / floor["p50_ms"], 3) if floor["p50_ms"] else None,
        "real_time_p99_over_floor": round(real["p99_ms"] / floor["p99_ms"], 3) if floor["p99_ms"] else None,
        "outputs_checked": ok, "spark": version, "cores": os.cpu_count(),
        "load_average_at_start": load_start, "load_average_at_end": [round(x, 2) for x in os.getloadavg()],
        "rows": rows,
    }
    written = write_json("p9_real_time", result, args.out)
    print(json.dumps(written, indent=2))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
