"""P5b — the cost of exactly-once: P5's application with ``exactly_once_v2`` against ``at_least_once``.

P5's input (``--records`` records, ``--keys`` keys, ``--partitions`` partitions; every session
five records, gap 30 s) and P5's streamsdsl application (a session-window count emitted on
window close, topic to topic, ``local[2]``, ``commit.interval.ms`` 100), run with
``processing.guarantee`` = ``at_least_once`` (the baseline) and ``exactly_once_v2``, alternating,
``--repeats`` times each after a warm-up of both, in this one process on one local broker. The
time is end to end, from ``start()`` until every record is processed and its closed sessions are
written; ``ratio`` = exactly-once time / at-least-once time (median of the repeats).
``--max-offsets`` bounds the micro-batch (``max.offsets.per.trigger``): the transactions' cost
is per task and micro-batch, so it grows with the number of batches. Both outputs must equal
the expected closed sessions.

    .venv/bin/python benchmarks/p5b_exactly_once.py --records 20000 --keys 500
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import uuid
from typing import Any

from _common import write_json
from p5_quix_session import GAP_MS, expected_closed, produce, streamsdsl_sessions

GUARANTEES = ("at_least_once", "exactly_once_v2")


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    """Create ``name`` keeping records forever: Kafka's time retention goes by record timestamps, and
    P5's (November 2023) are older than P5's 7-day retention, so the broker deleted the input."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(name, partitions, 1, config={"retention.ms": "-1"})]).values():
        future.result(30)


def run(bootstrap: str, source: str, sink: str, guarantee: str, operator: str, state_dir: str,
        max_offsets: int | None) -> float:
    """P5's streamsdsl application under ``guarantee`` until every record is processed; seconds."""
    from streamsdsl import Consumed, EmitStrategy, KafkaStreams, Produced, Serdes, SessionWindows, StreamsBuilder

    b = StreamsBuilder()
    (
        b.stream(source, Consumed.with_serdes(Serdes.String(), Serdes.Bytes()))
        .group_by_key()
        .windowed_by(SessionWindows.with_gap(GAP_MS))
        .emit_strategy(EmitStrategy.on_window_close())
        .count()
        .to_stream()
        .to(sink, Produced.with_serdes(Serdes.String(), Serdes.Long()))
    )
    config: dict[str, Any] = {
        "application.id": f"p5b-{guarantee}-{uuid.uuid4().hex[:6]}",
        "bootstrap.servers": bootstrap,
        "state.dir": state_dir,
        "commit.interval.ms": 100,
        "streamsdsl.operator": operator,
        "processing.guarantee": guarantee,
    }
    if max_offsets:
        config["max.offsets.per.trigger"] = max_offsets
    app = KafkaStreams(b.build(), config)
    start = time.perf_counter()
    app.start()
    try:
        app.process_all_available()
        elapsed = time.perf_counter() - start
    finally:
        app.close()
    return elapsed


def task_cost(bootstrap: str, writes: int = 20, rows: int = 100) -> dict[str, float]:
    """Milliseconds per task write of ``rows`` records outside Spark, median of ``writes``: the
    at-least-once path (`produce_batches`, a producer kept across tasks) and the exactly-once
    path (`produce_transactionally`: a new producer, ``init_transactions``, the marker read,
    the transaction with the marker). Run with ``--task-cost``."""
    import pyarrow as pa

    from streamsdsl.io.options import KafkaSinkOptions
    from streamsdsl.io.sink import produce_batches, produce_transactionally

    topic = f"p5b-task-{uuid.uuid4().hex[:6]}"
    create_topic(bootstrap, topic, 1)
    batch = pa.record_batch({"key": pa.array([f"k{i}".encode() for i in range(rows)]),
                             "value": pa.array([b"v"] * rows)})
    base = {"kafka.bootstrap.servers": bootstrap, "topic": topic}
    out: dict[str, float] = {}
    for name, write in (
        ("at_least_once", lambda i: produce_batches(KafkaSinkOptions.from_options(base), iter([batch]))),
        ("exactly_once_v2", lambda i: produce_transactionally(KafkaSinkOptions.from_options(
            {**base, "transactionalIdPrefix": "p5b-task", "transactionalBatch": f"q:{i}"}), iter([batch]), 0)),
    ):
        write(0)  # warm-up: the producer id, the coordinators
        times = []
        for i in range(1, writes + 1):
            start = time.perf_counter()
            assert write(i) == rows
            times.append((time.perf_counter() - start) * 1000)
        out[name] = round(statistics.median(times), 1)
    return out


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=20_000)
    parser.add_argument("--keys", type=int, default=500)
    parser.add_argument("--partitions", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--max-offsets", type=int, default=0, help="max.offsets.per.trigger (0: unbounded)")
    parser.add_argument("--operator", default="python", help="streamsdsl.operator (python or jvm)")
    parser.add_argument("--task-cost", action="store_true", help="only time one task's write on each path")
    args = parser.parse_args(argv)
    if args.task_cost:
        from streamsdsl.testing.local_kafka import local_kafka

        with local_kafka() as kafka:
            cost = task_cost(kafka.bootstrap_servers)
        print(f"P5b task write of 100 records, median of 20 (ms): {cost}", flush=True)
        return cost
    if args.records <= 0 or args.keys <= 0 or args.records % args.keys:
        parser.error("--records and --keys must be positive, --records a multiple of --keys")

    from streamsdsl.runtime.session import get_session
    from streamsdsl.testing.local_kafka import local_kafka

    get_session()  # started once, outside the timings
    times: dict[str, list[float]] = {g: [] for g in GUARANTEES}
    outputs: dict[str, list[Any]] = {}
    with local_kafka() as kafka, tempfile.TemporaryDirectory(prefix="p5b-") as tmp:
        bootstrap = kafka.bootstrap_servers
        source, warm_in = f"p5b-in-{uuid.uuid4().hex[:6]}", f"p5b-warm-{uuid.uuid4().hex[:6]}"
        for topic, n in ((source, args.records), (warm_in, 10 * args.keys)):
            create_topic(bootstrap, topic, args.partitions)
            produce(bootstrap, topic, n, args.keys)
        for g in GUARANTEES:  # warm-up: Python workers, the operator, the broker's coordinators
            warm_out = f"p5b-warm-out-{uuid.uuid4().hex[:6]}"
            create_topic(bootstrap, warm_out, args.partitions)
            run(bootstrap, warm_in, warm_out, g, args.operator, os.path.join(tmp, f"warm-{g}"), args.max_offsets)
        for i in range(args.repeats):
            for g in GUARANTEES:
                sink = f"p5b-out-{g}-{i}-{uuid.uuid4().hex[:6]}"
                create_topic(bootstrap, sink, args.partitions)
                times[g].append(run(bootstrap, source, sink, g, args.operator, os.path.join(tmp, f"{g}-{i}"),
                                    args.max_offsets))
                print(f"P5b {g} run {i}: {times[g][-1]:.2f} s", file=sys.stderr, flush=True)
                outputs[g] = streamsdsl_sessions(kafka.consume_all(sink, timeout=120))
    expected = expected_closed(args.records, args.keys)
    median = {g: statistics.median(t) for g, t in times.items()}
    ratio = round(median["exactly_once_v2"] / median["at_least_once"], 3)
    equal = outputs["exactly_once_v2"] == outputs["at_least_once"] and len(outputs["at_least_once"]) == expected
    result = {
        "id": "P5b",
        "ratio": ratio,
        "goal": "a measurement: exactly-once time / at-least-once time on P5's streamsdsl application",
        "goal_met": None,
        "benchmark": "P5b exactly-once against at-least-once, P5's session-window count topic to topic",
        "records": args.records,
        "keys": args.keys,
        "partitions": args.partitions,
        "max_offsets_per_trigger": args.max_offsets or None,
        "operator": args.operator,
        "repeats": args.repeats,
        "seconds": {g: [round(t, 3) for t in ts] for g, ts in times.items()},
        "median_seconds": {g: round(t, 3) for g, t in median.items()},
        "records_per_second": {g: round(args.records / t) for g, t in median.items()},
        "expected_closed_sessions": expected,
        "closed_sessions_written": {g: len(o) for g, o in outputs.items()},
        "outputs_equal": equal,
        "environment": {"cores": os.cpu_count(), "load_average_at_end": os.getloadavg()},
    }
    write_json("p5b", result)
    bounded = f", max.offsets.per.trigger {args.max_offsets:,}" if args.max_offsets else ""
    lines = [f"### P5b: exactly-once against at-least-once, {args.records:,} records, {args.keys:,} keys, "
             f"{args.partitions} partitions{bounded} ({args.operator} operator)", "",
             "| processing.guarantee | seconds (median) | records/s | closed sessions |", "|---|---|---|---|"]
    for g in GUARANTEES:
        lines.append(f"| {g} | {median[g]:.2f} | {args.records / median[g]:,.0f} | {len(outputs[g]):,} |")
    lines.append(f"\nexactly-once / at-least-once: {ratio:.2f}×; outputs equal: {equal}\n")
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "results", "p5b.md"), "w") as f:
        f.write("\n".join(lines))
    if not equal:
        raise SystemExit(f"P5b: the outputs differ or miss sessions (expected {expected}): "
                         f"{ {g: len(o) for g, o in outputs.items()} }")
    return result


if __name__ == "__main__":
    main()
