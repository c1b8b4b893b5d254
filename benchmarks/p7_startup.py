"""P7: start-up of a KafkaStreams application, ``start()`` to its first output record.

The quickstart's topology (``examples/quickstart.py``: filter, map_values, group_by, count) on a
local broker: the five orders are in the input topic before the application starts. Measured in
one fresh process, so the first application pays for everything a real first start pays for:

* ``cold``: ``KafkaStreams(...).start()`` with no active SparkSession (it builds one, loads the
  JVM operator's jar), until the first output record can be read from the output topic, and
  until all four output records are there;
* ``warm``: a second application (new ``application.id``) in the same process and session.

The first micro-batch's phases come from Spark's own progress report (``durationMs``).

    .venv/bin/python benchmarks/p7_startup.py [--records 5] [--repeats 1]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, HERE)

from _common import write_json  # noqa: E402

#: Issue 14: the quickstart's start() to first output, on an idle machine.
GOAL_S = 10.0


def _orders(n: int) -> list[tuple[bytes, bytes, int, int]]:
    from examples.quickstart import ORDERS

    out = []
    for i in range(n):
        order_id, order, ts = ORDERS[i % len(ORDERS)]
        out.append((f"{order_id}-{i}".encode(), json.dumps(order).encode(), ts + i, 0))
    return out


def _first_output(kafka: object, topic: str, expected: int, t0: float,
                  timeout: float = 300.0) -> tuple[float, float | None]:
    """Seconds from ``t0`` until the first record and until ``expected`` records are in ``topic``
    (None if they are not all there within ``timeout``)."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": kafka.bootstrap_servers, "group.id": f"p7-{uuid.uuid4().hex}",  # type: ignore[attr-defined]
                         "enable.auto.commit": False, "fetch.wait.max.ms": 10})
    consumer.assign([TopicPartition(topic, 0, 0)])
    first = None
    seen = 0
    try:
        while time.perf_counter() - t0 < timeout:
            for m in consumer.consume(100, 0.02):
                if m.error() is None:
                    seen += 1
                    if first is None:
                        first = time.perf_counter() - t0
            if seen >= expected:
                return first, time.perf_counter() - t0  # type: ignore[return-value]
        if first is None:
            raise TimeoutError(f"no output record within {timeout} s")
        return first, None
    finally:
        consumer.close()


def run_app(kafka: object, state_dir: str, records: int, spark_conf: dict[str, str]) -> dict[str, object]:
    from examples.quickstart import build_topology
    from streamsdsl.runtime.app import KafkaStreams

    run = uuid.uuid4().hex[:8]
    source, sink = f"orders-{run}", f"orders-per-customer-{run}"
    kafka.create_topic(source, 1)  # type: ignore[attr-defined]
    kafka.create_topic(sink, 1)  # type: ignore[attr-defined]
    data = _orders(records)
    kafka.produce(source, data)  # type: ignore[attr-defined]
    paid = sum(1 for _, v, _, _ in data if json.loads(v)["status"] == "paid")
    app = KafkaStreams(build_topology(source, sink), {
        "application.id": f"p7-{run}", "bootstrap.servers": kafka.bootstrap_servers,  # type: ignore[attr-defined]
        "state.dir": state_dir,
        "commit.interval.ms": 50, "max.offsets.per.trigger": 1, **spark_conf,
    })
    t0 = time.perf_counter()
    app.start()
    started = time.perf_counter() - t0
    try:
        first, done = _first_output(kafka, sink, paid, t0)
        progress = app.streaming_query.recentProgress if app.streaming_query is not None else []
        phases = dict(progress[0].durationMs) if progress else {}
    finally:
        app.close()
    return {"start_returned_seconds": round(started, 3), "first_output_seconds": round(first, 3),
            "all_outputs_seconds": None if done is None else round(done, 3), "output_records": paid, "first_batch_duration_ms": phases}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=5, help="orders in the input topic (default: the quickstart's 5)")
    parser.add_argument("--repeats", type=int, default=1, help="warm applications after the cold one")
    parser.add_argument("--conf", action="append", default=[], metavar="spark.KEY=VALUE",
                        help="a Spark setting of the session start() builds (repeatable), e.g. to time a 'before'")
    parser.add_argument("--out", default="p7", help="result name (results/<out>.json)")
    args = parser.parse_args()
    spark_conf = dict(c.split("=", 1) for c in args.conf)
    if any(not k.startswith("spark.") for k in spark_conf):
        parser.error("--conf takes spark.KEY=VALUE")
    if args.records <= 0 or args.repeats <= 0:
        parser.error("--records and --repeats must be positive")
    import logging

    logging.getLogger("py4j").setLevel(logging.WARNING)
    from streamsdsl.testing.local_kafka import KAFKA_VERSION, local_kafka

    load_before = os.getloadavg()[0]
    with local_kafka() as kafka, tempfile.TemporaryDirectory(prefix="p7-") as state_dir:
        cold = run_app(kafka, state_dir, args.records, spark_conf)
        warm = [run_app(kafka, state_dir, args.records, spark_conf) for _ in range(args.repeats)]
        broker = f"{kafka.kind} (Apache Kafka {KAFKA_VERSION})"
        from pyspark.sql import SparkSession

        spark = SparkSession.getActiveSession()
        if spark is not None:
            spark.stop()
    ratio = cold["first_output_seconds"]
    result = {
        "id": "P7",
        "ratio": ratio,
        "goal": f"quickstart: start() to first output <= {GOAL_S} s (cold: the session built by start(); ratio: those seconds)",
        "goal_met": bool(ratio <= GOAL_S),  # type: ignore[operator]
        "benchmark": "P7 start-up: KafkaStreams.start() to the first output record (quickstart topology)",
        "records": args.records,
        "spark_conf": spark_conf,
        "broker": broker,
        "cold": cold,
        "warm": warm,
        "load_average_before_after": [round(load_before, 2), round(os.getloadavg()[0], 2)],
    }
    print(json.dumps(result, indent=2))
    write_json(args.out, result)


if __name__ == "__main__":
    main()
