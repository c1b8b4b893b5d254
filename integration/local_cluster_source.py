"""Read a topic on ``local-cluster[2,1,1024]`` (a driver and two executor JVMs, each with its own
Python workers) with both connectors, on one session; print the result as JSON:

1. the streamsdsl-kafka source, rate-limited: each micro-batch's rows (``batches``);
2. a `KafkaStreams` application with ``kafka.connector = "jvm"`` (Spark's connector, shipped to
   the executors from the user's cache) copying the topic, values upper-cased, to ``SINK``
   (``jvm_app``: its state and metrics; the test reads ``SINK``);
3. a `KafkaStreams` count of ``EOS_SOURCE`` into ``EOS_SINK`` with ``processing.guarantee =
   exactly_once_v2`` (the executors' tasks write in transactions), application id ``EOS_APP``,
   300 records per micro-batch (``eos_app``; the test reads the sink ``read_committed``);
4. the JVM operator shipped to the executors (``operator``): `tests.jvm._loading_app`'s session
   count on the Spark engine with ``streamsdsl.operator = "jvm"`` and its ``explain`` (and with
   ``"python"``: both replay hosts, ``flatMapGroups`` and the grouped Arrow map, there), a
   streaming session aggregation whose packing step and Python processor run there, and the
   clicks-and-users application (`tests._quiet_table`), whose users table stays quiet;
5. a user processor with a store on two partitions (``processors``: `tests._processor_app`'s
   streaming query, a task per partition, its records), its kernel in the executors' workers.
6. a stream joined with a global table updated while the query runs (``global_tables``:
   `tests._global_table_app`'s records), the join's operator in the executors.

One session for all of it (a local cluster starts in ≈ 30 s), built as a user builds one:
``streamsdsl.configure_spark(SparkSession.builder.master("local-cluster[2,1,1024]"))``. Run by
``local_cluster_run`` for the tests of ``test_local_cluster.py``::

    python -m integration.local_cluster_source BOOTSTRAP TOPIC MAX_OFFSETS_PER_TRIGGER CHECKPOINT SINK \
        EOS_SOURCE EOS_SINK EOS_APP
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from streamsdsl.testing.jvm_options import with_options

#: The one run of this script per test session (`local_cluster_run`): a local cluster starts in ≈ 30 s.
_RUN: dict[str, tuple[dict[str, Any], list[tuple[bytes, bytes, int, int]]]] = {}


def local_cluster_run(kafka: Any, new_topic: Callable[..., str], tmp_path_factory: Any,
                      ) -> tuple[dict[str, Any], list[tuple[bytes, bytes, int, int]]]:
    """Run this script once per test session in a subprocess (its own SparkSession on the local
    cluster): 40 records on 2 partitions, 10 per trigger; for the exactly-once count 1,200
    records of 40 keys ``k000``... on 2 partitions. Returns (its JSON output with ``sink``,
    ``eos_source``, ``eos_sink`` and ``eos_app_id`` added, the 40 records produced as
    (key, value, timestamp, partition))."""
    if "run" not in _RUN:
        topic, sink, eos_source, eos_sink = new_topic(2), new_topic(1), new_topic(2), new_topic(1)
        records = [(f"k{i}".encode(), f"v{i}".encode(), 1_000 + i, i % 2) for i in range(40)]
        kafka.produce(topic, records)
        kafka.produce(eos_source, [(f"k{i % 40:03d}".encode(), b"x", 1_700_000_000_000 + i, (i % 40) % 2)
                                   for i in range(1_200)], timeout=120)
        eos_app = f"eos-cluster-{os.getpid()}"
        root = Path(__file__).parents[1]
        # the executor JVMs inherit the driver's environment: the test run's JVM options
        env = {**with_options(os.environ, "JAVA_TOOL_OPTIONS"), "PYSPARK_PYTHON": sys.executable,
               "PYSPARK_DRIVER_PYTHON": sys.executable}
        env.pop("STREAMSDSL_SPARK_MASTER", None)
        proc = subprocess.run(
            [sys.executable, "-m", "integration.local_cluster_source", kafka.bootstrap_servers,
             topic, "10", str(tmp_path_factory.mktemp("local-cluster") / "ckpt"), sink, eos_source, eos_sink, eos_app],
            cwd=root, env=env, capture_output=True, text=True, timeout=600,
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
        out = json.loads(proc.stdout.strip().splitlines()[-1])
        _RUN["run"] = ({**out, "sink": sink, "eos_source": eos_source, "eos_sink": eos_sink, "eos_app_id": eos_app},
                       records)
    return _RUN["run"]


def _jvm_app(bootstrap: str, topic: str, sink: str, state_dir: str) -> dict[str, object]:
    from streamsdsl import Consumed, Produced, Serdes, StreamsBuilder
    from streamsdsl.runtime.app import KafkaStreams

    strings = (Serdes.String(), Serdes.String())
    builder = StreamsBuilder()
    builder.stream(topic, Consumed.with_serdes(*strings)).map_values(lambda v: v.upper()).to(
        sink, Produced.with_serdes(*strings))
    app = KafkaStreams(builder.build(), {
        "application.id": "local-cluster-jvm-connector", "bootstrap.servers": bootstrap, "state.dir": state_dir,
        "commit.interval.ms": 50, "kafka.connector": "jvm",
    })
    app.start()
    try:
        app.process_all_available()
    finally:
        closed = app.close(60)
    metrics = app.metrics()
    return {"closed": closed, "state": app.state().value, "input": metrics["input-records-total"],
            "output": metrics["output-records-total"]}


def _eos_app(bootstrap: str, source: str, sink: str, state_dir: str, app_id: str) -> dict[str, object]:
    from integration.fault_app import count_topology
    from streamsdsl.runtime.app import KafkaStreams

    app = KafkaStreams(count_topology(source, sink), {
        "application.id": app_id, "bootstrap.servers": bootstrap, "state.dir": state_dir,
        "commit.interval.ms": 50, "max.offsets.per.trigger": 300, "processing.guarantee": "exactly_once_v2",
    })
    app.start()
    try:
        app.process_all_available()
    finally:
        closed = app.close(120)
    return {"closed": closed, "state": app.state().value, "state_dir": state_dir}


def _source_checks(spark: Any) -> dict[str, object]:
    """A ``Serdes.Json()`` source's check, as the compiled plan makes it: the jar's ``JsonCheck``
    and ``RecordErrors``, called from the generated code of the executors' tasks, over 400 values
    in 4 partitions; the last one malformed in the second run, which fails naming it."""
    from pyspark.sql import functions as F

    from streamsdsl.compiler.serde_exprs import RecordContext, deserialization_check
    from streamsdsl.errors import RecordError
    from streamsdsl.values.serdes import JsonSerde

    def values(bad: bool) -> Any:
        value = F.encode(F.to_json(F.struct("id")), "UTF-8")
        if bad:
            value = F.when(F.col("id") == 399, F.lit(b'{"id" 399}')).otherwise(value)
        return spark.range(0, 400, 1, 4).select(
            F.lit("in").alias("topic"), F.lit(0).alias("partition"), F.col("id").alias("offset"), value.alias("value"))

    position = (F.shiftleft(F.col("partition").cast("bigint"), 40) + F.col("offset")).cast("bigint")
    check = deserialization_check(F.col("value"), JsonSerde(), "value",
                                  RecordContext("KSTREAM-SOURCE-0000000000", position, topic="in"))
    # generated code that does not compile (a class the executors cannot see) fails the job here
    # instead of running interpreted
    spark.conf.set("spark.sql.codegen.fallback", "false")
    try:
        kept = values(False).filter(check).count()
        try:
            values(True).filter(check).count()
            error = None
        except Exception as exc:  # noqa: BLE001 - Spark's error, which carries the record's
            found = RecordError.find(exc)
            error = str(found) if found is not None else f"no record error in: {str(exc)[:300]}"
    finally:
        spark.conf.unset("spark.sql.codegen.fallback")
    return {"kept": kept, "error": error}


def _operator(spark: Any) -> dict[str, object]:
    """The JVM operator and a Python processor in the executors (item 4 of the module's list)."""
    from streamsdsl import explain
    from tests import _quiet_table
    from tests.jvm import _loading_app

    sessions = _quiet_table.run(spark)
    return {"source_checks": _source_checks(spark), "driver": _loading_app.run(spark, {"streamsdsl.operator": "jvm"}),
            "driver_python": _loading_app.run(spark, {"streamsdsl.operator": "python"}),
            "explain_jvm": "JVM operator (count, session windows)" in explain(_loading_app.topology(), spark,
                                                                             mode="simple"),
            "streaming": _loading_app.streaming_sessions(spark),
            "quiet_sessions": len(sessions), "quiet_as_expected": sessions == _quiet_table.expected_sessions()}


def _processors(spark: Any) -> list[list[object]]:
    """A processor with a store, a task per partition, in the executors (item 5 of the module's list)."""
    from tests import _processor_app

    return [list(r) for r in _processor_app.run(spark)]


def main(bootstrap: str, topic: str, max_per_trigger: str, checkpoint: str, sink: str, eos_source: str,
         eos_sink: str, eos_app: str) -> None:
    from pyspark.sql import SparkSession

    import streamsdsl
    from streamsdsl.io import register

    builder = SparkSession.builder.master("local-cluster[2,1,1024]").config("spark.ui.enabled", "false")
    spark = streamsdsl.configure_spark(builder.config("spark.sql.shuffle.partitions", "2")).getOrCreate()
    register(spark)
    batches: list[list[list[object]]] = []

    def collect(df: object, batch_id: int) -> None:
        rows = df.select("key", "value", "partition", "offset", "timestamp").collect()  # type: ignore[attr-defined]
        batches.append(sorted([bytes(r[0]).decode(), bytes(r[1]).decode(), r[2], r[3], r[4]] for r in rows))

    df = (
        spark.readStream.format("streamsdsl-kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("maxOffsetsPerTrigger", max_per_trigger)
        .load()
    )
    query = df.writeStream.foreachBatch(collect).option("checkpointLocation", checkpoint).trigger(availableNow=True).start()
    finished = query.awaitTermination(180)
    error = query.exception()
    query.stop()
    jvm_app = _jvm_app(bootstrap, topic, sink, checkpoint + "-state")
    eos = _eos_app(bootstrap, eos_source, eos_sink, checkpoint + "-eos-state", eos_app)
    operator = _operator(spark)
    processors = _processors(spark)
    from tests import _global_table_app

    global_tables = {k: [list(r) if isinstance(r, tuple) else r for r in v]
                     for k, v in _global_table_app.run(spark).items()}
    executors = spark.sparkContext._jsc.sc().getExecutorMemoryStatus().size() - 1  # type: ignore[union-attr]
    spark.stop()
    print(json.dumps({"finished": finished, "error": str(error) if error else None, "executors": executors,
                      "batches": batches, "jvm_app": jvm_app, "eos_app": eos,
                      "operator": operator, "processors": processors, "global_tables": global_tables}))


if __name__ == "__main__":
    main(*sys.argv[1:9])
