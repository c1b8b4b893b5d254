"""Spark's floor for P9's enrichment: the query a Spark user would write by hand for it (used by
``p9_latency_floor.py`` for latency and by ``p9_kafka_streams_peer.py --floors`` for throughput).

The orders read with the ``streamsdsl-kafka`` Python data source (streamsdsl's default connector)
or with Spark's own Kafka connector (``jvm``), joined with the customers (the table topic's
records, read once when the query starts, broadcast: Spark has no stream–table join, so this is
the cheapest form of it), regrouped by region and counted in 1-minute tumbling windows (event time
= the record timestamp, watermark without delay, as windows without grace), in **update** mode
(emit on every update) or **append** mode (emit on close), written as ``region@start`` → the count
(a big-endian Long) with the window's newest input timestamp as the record's (Kafka Streams'
rule; Spark's Kafka sink writes no record timestamp, so there it travels in the header ``p9.ts``).
"""

from __future__ import annotations

from typing import Any


def floor_query(spark: Any, bootstrap: str, topics: dict[str, str], checkpoint: str, trigger_ms: int,
                jvm: bool = False, async_progress: bool = False, mode: str = "update",
                starting: str = "latest") -> Any:
    """The hand-written Spark query (see the module docstring), started on ``topics`` (``source``,
    ``customers``, ``sink``). ``jvm``: read the customers and the orders with Spark's Kafka
    connector and write with its Kafka sink (``async_progress``: with asynchronous progress
    tracking, which only that sink supports); else the ``streamsdsl-kafka`` source and, in
    ``foreachBatch``, its batch writer. ``mode``: ``update`` or ``append``; ``starting``: the
    orders' ``startingOffsets``."""
    from pyspark.sql import functions as F

    from streamsdsl.io import register

    register(spark)
    rows = (spark.read.format("kafka" if jvm else "streamsdsl-kafka").option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", topics["customers"]).option("startingOffsets", "earliest")
            .option("endingOffsets", "latest").load()
            .select(F.col("key").cast("string").alias("customer"), F.col("value").cast("string").alias("region"))
            .collect())
    customers = spark.createDataFrame([tuple(r) for r in rows], "customer string, region string")
    ms = F.unix_millis("timestamp") if jvm else F.col("timestamp")  # Spark's connector: a timestamp
    orders = (spark.readStream.format("kafka" if jvm else "streamsdsl-kafka").option("kafka.bootstrap.servers", bootstrap)
              .option("subscribe", topics["source"]).option("startingOffsets", starting).load()
              .select(F.col("key").cast("string").alias("customer"), ms.alias("ms"), F.timestamp_millis(ms).alias("ts")))
    counts = (orders.join(F.broadcast(customers), "customer").withWatermark("ts", "0 seconds")
              .groupBy("region", F.window("ts", "1 minute"))
              .agg(F.count("*").alias("n"), F.max("ms").alias("ms")))
    if jvm:  # Spark's Kafka sink writes no record timestamp: the header p9.ts carries it
        out = counts.select(
            F.concat("region", F.lit("@"), F.unix_millis(F.col("window.start")).cast("string")).alias("key"),
            F.unhex(F.lpad(F.hex("n"), 16, "0")).alias("value"),
            F.array(F.struct(F.lit("p9.ts").alias("key"),
                             F.unhex(F.lpad(F.hex("ms"), 16, "0")).alias("value"))).alias("headers"))
        writer = (out.writeStream.format("kafka").option("kafka.bootstrap.servers", bootstrap)
                  .option("topic", topics["sink"]).option("kafka.linger.ms", "5"))
        if async_progress:
            writer = (writer.option("asyncProgressTrackingEnabled", "true")
                      .option("asyncProgressTrackingCheckpointIntervalMs", "1000"))
    else:  # the Python data source writes only in append mode: foreachBatch with its batch writer
        out = counts.select(
            F.concat("region", F.lit("@"), F.unix_millis(F.col("window.start")).cast("string")).cast("binary").alias("key"),
            F.unhex(F.lpad(F.hex("n"), 16, "0")).alias("value"),
            F.col("ms").alias("timestamp"))
        sink = topics["sink"]

        def write(batch: Any, _batch_id: int) -> None:
            (batch.write.format("streamsdsl-kafka").option("kafka.bootstrap.servers", bootstrap)
             .option("topic", sink).mode("append").save())

        writer = out.writeStream.foreachBatch(write)
    return (writer.option("checkpointLocation", checkpoint).outputMode(mode)
            .trigger(processingTime=f"{trigger_ms} milliseconds").start())
