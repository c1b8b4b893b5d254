"""P11 — interactive queries: how long a point query on a running application takes.

One `KafkaStreams` application on a local Apache Kafka broker: ``--records`` records over
``--keys`` keys, counted per key into the named store ``counts`` (on the Python operator, and
again on the JVM operator). Once it has processed them (and keeps running), measured in the same
process:

* **point query**: ``app.store(StoreQueryParameters.from_name_and_type("counts",
  QueryableStoreTypes.key_value_store())).get(key)`` for ``--queries`` random keys, after one
  warm-up query: median, p95 and max seconds;
* **full scan**: the same view's ``all()``;
* **baseline**: Spark's state data source read of the same store and key, written by hand
  (``spark.read.format("statestore")`` with the operator id and the state variable, filtered to
  the key, collected): what any reader of the checkpoint pays. The ratio is the point query's
  median over the baseline's: what streamsdsl adds (finding the operator, decoding).

Kafka Streams answers a point query from its local store in microseconds; this is the price of
reading Spark's checkpoint instead.

Writes ``benchmarks/results/p11.json``.

    .venv/bin/python benchmarks/p11_interactive_queries.py --records 100000 --keys 10000
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
import uuid
from typing import Any

sys.path.insert(0, __file__.rsplit("/", 1)[0])

from _common import write_json  # noqa: E402


def _produce(bootstrap: str, topic: str, records: int, keys: int) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
    base = 1_700_000_000_000
    for i in range(records):
        producer.produce(topic, key=f"k{i % keys}".encode(), value=b'"v"', timestamp=base + i)
        if i % 10_000 == 0:
            producer.poll(0)
    producer.flush(60)


def _timed(call: Any) -> tuple[float, Any]:
    started = time.perf_counter()
    out = call()
    return time.perf_counter() - started, out


def _baseline(spark: Any, checkpoint: str, key: str) -> float:
    """The state data source read of ``counts`` for ``key``, by hand."""
    def read() -> Any:
        meta = spark.read.format("state-metadata").load(checkpoint).collect()
        op = next(r.operatorId for r in meta
                  if any(v["stateName"] == "counts" for v in json.loads(r.operatorProperties or "{}").get(
                      "stateVariables", ())))
        return (spark.read.format("statestore").option("path", checkpoint).option("operatorId", op)
                .option("stateVarName", "counts").load().filter(f"key.key = '\"{key}\"' or key.key = '{key}'")
                .collect())
    return _timed(read)[0]


def measure(bootstrap: str, spark: Any, operator: str, records: int, keys: int, queries: int) -> dict[str, Any]:
    from streamsdsl import Consumed, KafkaStreams, Materialized, Produced, QueryableStoreTypes, Serdes
    from streamsdsl import StoreQueryParameters, StreamsBuilder

    source, sink = f"p11-in-{uuid.uuid4().hex[:6]}", f"p11-out-{uuid.uuid4().hex[:6]}"
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(source, 2, 1), NewTopic(sink, 2, 1)]).values():
        f.result(30)
    _produce(bootstrap, source, records, keys)
    b = StreamsBuilder()
    (b.stream(source, Consumed.with_serdes(Serdes.String(), Serdes.String())).group_by_key()
     .count(materialized=Materialized.as_("counts")).to_stream()
     .to(sink, Produced.with_serdes(Serdes.String(), Serdes.Long())))
    with tempfile.TemporaryDirectory(prefix="p11-") as state_dir:
        app = KafkaStreams(b.build(), {"application.id": f"p11-{operator}-{uuid.uuid4().hex[:6]}",
                                       "bootstrap.servers": bootstrap, "state.dir": state_dir,
                                       "streamsdsl.operator": operator}, spark=spark)
        app.start()
        try:
            app.process_all_available()
            store = app.store(StoreQueryParameters.from_name_and_type("counts", QueryableStoreTypes.key_value_store()))
            rng = random.Random(7)
            store.get("k0")  # warm-up
            point = []
            for _ in range(queries):
                key = f"k{rng.randrange(keys)}"
                seconds, value = _timed(lambda: store.get(key))
                assert value == records // keys + (1 if int(key[1:]) < records % keys else 0), (key, value)
                point.append(seconds)
            scan_seconds, entries = _timed(store.all)
            assert len(entries) == keys
            checkpoint = app.config.checkpoint_location
            _baseline(spark, checkpoint, "k0")
            base = [_baseline(spark, checkpoint, f"k{rng.randrange(keys)}") for _ in range(max(3, queries // 4))]
        finally:
            app.close(60)
    point.sort()
    return {"operator": operator, "point_median_s": round(statistics.median(point), 3),
            "point_p95_s": round(point[int(0.95 * (len(point) - 1))], 3), "point_max_s": round(point[-1], 3),
            "scan_s": round(scan_seconds, 3), "baseline_median_s": round(statistics.median(base), 3),
            "ratio_point_to_baseline": round(statistics.median(point) / statistics.median(base), 3)}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--keys", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=20)
    parser.add_argument("--output", default=None, help="result path (default results/p11.json)")
    args = parser.parse_args(argv)
    from streamsdsl.runtime.session import configure_spark
    from streamsdsl.testing.local_kafka import local_kafka
    from pyspark.sql import SparkSession

    spark = configure_spark(SparkSession.builder.master("local[2]")).getOrCreate()
    with local_kafka() as kafka:
        runs = [measure(kafka.bootstrap_servers, spark, op, args.records, args.keys, args.queries)
                for op in ("python", "jvm")]
    result = {
        "id": "P11", "ratio": max(r["ratio_point_to_baseline"] for r in runs),
        "goal": "measured only: a point query's latency on a running application, over the state data source read "
                "it makes (ratio: streamsdsl's median point query / the hand-written read)",
        "goal_met": None, "benchmark": "P11 interactive queries", "records": args.records, "keys": args.keys,
        "queries": args.queries, "runs": runs,
    }
    result = write_json("p11", result, args.output)
    print(json.dumps(result, indent=2))
    return result


if __name__ == "__main__":
    main()
