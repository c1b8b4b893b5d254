"""The application of the standalone-cluster tests (`integration.test_standalone_cluster`).

Orders (keyed by customer) joined with the customers table; the enriched orders written out, a
session count per customer (a built-in aggregation: the JVM operator) emitted when its sessions
close, and the revenue per region (a Python aggregation, its table's changelog). Run as a
script, once per step, by the tests, as a user runs an application on a cluster::

    python integration/standalone_app.py '{"bootstrap": ..., "topics": {...}, "state_dir": ...,
                                           "master": "spark://...", "python": "/bare/bin/python"}'
    spark-submit --master spark://... --conf spark.pyspark.python=/bare/bin/python \\
        $(streamsdsl ship) integration/standalone_app.py '{..., "own_session": true}'

With ``master`` and ``python``, the application's config names the master and the workers'
interpreter and nothing else about Spark (streamsdsl builds the session and ships itself); with
``own_session`` it runs on the session ``spark-submit`` made (``SparkSession.builder.getOrCreate()``,
shipped by the options ``streamsdsl ship`` printed). It processes what the topics hold, closes and
prints a JSON line: the application's metrics, its state, the executors and Spark settings seen,
and where the driver's and two tasks' Python imported streamsdsl and confluent-kafka from.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from streamsdsl import (
    Consumed,
    EmitStrategy,
    Grouped,
    Produced,
    Serdes,
    SessionWindows,
    StreamsBuilder,
    Topology,
)

ROLES = ("customers", "orders", "enriched", "sessions", "revenue")
BASE = 1_700_000_000_000
JSON = Consumed.with_serdes(Serdes.String(), Serdes.Json())
JSON_OUT = Produced.with_serdes(Serdes.String(), Serdes.Json())


def enrich(order: dict[str, Any], customer: dict[str, Any]) -> dict[str, Any]:
    return {**order, "region": customer["region"]}


def add(region: str, order: dict[str, Any], total: int) -> int:
    return total + int(order["amount"])


def build_topology(topics: dict[str, str]) -> Topology:
    """orders ⋈ customers → enriched; sessions per customer (gap 5 s) counted on window close;
    the revenue per region (a table: its changelog)."""
    builder = StreamsBuilder()
    customers = builder.table(topics["customers"], JSON)
    enriched = builder.stream(topics["orders"], JSON).join(customers, enrich)
    enriched.to(topics["enriched"], JSON_OUT)
    (
        enriched.group_by_key(Grouped.with_serdes(Serdes.String(), Serdes.Json()))
        .windowed_by(SessionWindows.of_inactivity_gap_with_no_grace(5_000))
        .emit_strategy(EmitStrategy.on_window_close())
        .count()
        .to_stream()
        .map(lambda w, n: (w.key, {"start": w.window.start, "end": w.window.end, "orders": n}))
        .to(topics["sessions"], JSON_OUT)
    )
    (
        enriched.group_by(lambda customer, order: order["region"], Grouped.with_serdes(Serdes.String(), Serdes.Json()))
        .aggregate(lambda: 0, add)
        .to_stream()
        .to(topics["revenue"], Produced.with_serdes(Serdes.String(), Serdes.Long()))
    )
    return builder.build()


def steps() -> list[list[tuple[str, str, dict[str, Any] | None, int, int]]]:
    """The input in two steps, each ``(role, key, value, timestamp, partition)``: the customers
    and 30 s of orders; then a customer's move, a new customer, 30 s more and a last order on
    each partition, which closes the sessions.
    Keys ``cN`` go to partition ``N % 2`` of both inputs (co-partitioned, as Kafka's default
    partitioner would keep them)."""
    regions = {"c0": "EU", "c1": "US", "c2": "EU", "c3": "APAC"}
    first: list[tuple[str, str, dict[str, Any] | None, int, int]] = [
        ("customers", key, {"region": region}, BASE - 1_000, int(key[1:]) % 2) for key, region in regions.items()
    ]
    second: list[tuple[str, str, dict[str, Any] | None, int, int]] = [
        ("customers", "c1", {"region": "EU"}, BASE + 30_000, 1),
        ("customers", "c5", {"region": "US"}, BASE + 30_000, 1),
    ]
    for i in range(60):
        key = f"c{(i * 7) % 5}"  # c4 has no customer: an inner join forwards nothing for it
        t = BASE + i * 1_000 + (3_000 if i >= 20 else 0) + (6_000 if i >= 40 else 0)
        (first if i < 30 else second).append(("orders", key, {"amount": i + 1}, t, int(key[1:]) % 2))
    # a last order on each partition: stream time passes every earlier session's close in every task
    second.extend(("orders", key, {"amount": 100}, BASE + 200_000, int(key[1:]) % 2) for key in ("c0", "c5"))
    return [first, second]


def origins(_: object = None) -> dict[str, str]:
    """Where this Python process imported streamsdsl and confluent-kafka from (run on the driver,
    and in a task on each executor)."""
    import confluent_kafka

    import streamsdsl

    return {"streamsdsl": streamsdsl.__file__ or "", "confluent_kafka": confluent_kafka.__file__ or ""}


def main(argv: list[str]) -> int:
    from pyspark.sql import SparkSession

    from streamsdsl import KafkaStreams

    args = json.loads(argv[0])
    config: dict[str, Any] = {
        "application.id": args["application_id"], "bootstrap.servers": args["bootstrap"],
        "state.dir": args["state_dir"], "commit.interval.ms": 100,
    }
    spark = None
    if args.get("own_session"):
        spark = SparkSession.builder.getOrCreate()
    else:
        config.update({"spark.master": args["master"], "spark.pyspark.python": args["python"]})
    app = KafkaStreams(build_topology(args["topics"]), config, spark=spark)
    app.start()
    try:
        app.process_all_available()
        metrics = app.metrics()
    finally:
        app.close()
    session = SparkSession.getActiveSession()
    assert session is not None
    context = session.sparkContext
    print(json.dumps({
        "state": app.state().value,
        "metrics": metrics,
        "executors": context._jsc.sc().getExecutorMemoryStatus().size() - 1,
        "master": context.master,
        "shuffle_partitions": session.conf.get("spark.sql.shuffle.partitions"),
        "python": context.pythonExec,
        "py_files": context.getConf().get("spark.submit.pyFiles", ""),
        "deploy_mode": context.getConf().get("spark.submit.deployMode", "client"),
        "imported": {"driver": origins(),
                     "executors": context.parallelize(range(2), 2).map(origins).collect()},
    }))
    session.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
