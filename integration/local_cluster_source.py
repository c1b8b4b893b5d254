"""Read a topic with the streamsdsl-kafka source on ``local-cluster[2,1,1024]`` (a driver and two
executor JVMs, each with its own Python workers); print each micro-batch's rows as JSON.

Run by ``test_kafka_io.py::TestPooledReader::test_streaming_read_on_a_multi_process_cluster``::

    python -m integration.local_cluster_source BOOTSTRAP TOPIC MAX_OFFSETS_PER_TRIGGER CHECKPOINT
"""

from __future__ import annotations

import json
import sys


def main(bootstrap: str, topic: str, max_per_trigger: str, checkpoint: str) -> None:
    from streamsdsl.io import register
    from streamsdsl.runtime.session import get_session

    spark = get_session(master="local-cluster[2,1,1024]")
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
    executors = spark.sparkContext._jsc.sc().getExecutorMemoryStatus().size() - 1  # type: ignore[union-attr]
    spark.stop()
    print(json.dumps({"finished": finished, "error": str(error) if error else None, "executors": executors,
                      "batches": batches}))


if __name__ == "__main__":
    main(*sys.argv[1:5])
