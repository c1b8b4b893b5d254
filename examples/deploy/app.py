"""The application of the deploy example's image: paid orders per customer, Kafka → Spark → Kafka.

The quickstart's topology (examples/quickstart.py): JSON orders keyed by order id; the paid ones,
regrouped by customer (lowercased) and counted; the counts' changelog written to the output
topic (string keys, long values). The count is a built-in aggregation: the JVM operator runs it.

It runs on the session ``spark-submit`` made; on Kubernetes, in the driver pod::

    spark-submit --master k8s://https://KUBERNETES_API:443 --deploy-mode cluster \\
        --conf spark.kubernetes.container.image=IMAGE ... \\
        local:///opt/streamsdsl/app/app.py --bootstrap-servers kafka:9092 --state-dir s3a://bucket/orders-app

Options: ``--bootstrap-servers``, ``--input`` (``orders``), ``--output`` (``orders-per-customer``),
``--application-id`` (``orders-app``), ``--state-dir`` (checkpoints: on Kubernetes a shared file
system or object store, a pod's disk is lost with the pod), ``--connector`` (``python``: the
``streamsdsl-kafka`` data source; ``jvm``: Spark's Kafka connector), ``--max-offsets-per-trigger``
and ``--until-caught-up``: process what the input holds, print the application's metrics as a
JSON line and stop (without it the application runs until the driver is stopped).
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading

from streamsdsl import Consumed, KafkaStreams, Produced, Serdes, StreamsBuilder, Topology


def build_topology(input_topic: str, output_topic: str) -> Topology:
    """orders → paid only → customer (lowercased) → group by customer → count → output."""
    builder = StreamsBuilder()
    (
        builder.stream(input_topic, Consumed.with_serdes(Serdes.String(), Serdes.Json()))
        .filter(lambda order_id, order: order["status"] == "paid")
        .map_values(lambda order: order["customer"].lower())
        .group_by(lambda order_id, customer: customer)
        .count()
        .to_stream()
        .to(output_topic, Produced.with_serdes(Serdes.String(), Serdes.Long()))
    )
    return builder.build()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="paid orders per customer")
    parser.add_argument("--bootstrap-servers", required=True)
    parser.add_argument("--input", default="orders")
    parser.add_argument("--output", default="orders-per-customer")
    parser.add_argument("--application-id", default="orders-app")
    parser.add_argument("--state-dir", default="/tmp/orders-app")
    parser.add_argument("--connector", choices=("python", "jvm"), default="python")
    parser.add_argument("--max-offsets-per-trigger", type=int, default=0)
    parser.add_argument("--until-caught-up", action="store_true")
    args = parser.parse_args(argv)
    config: dict[str, object] = {
        "application.id": args.application_id,
        "bootstrap.servers": args.bootstrap_servers,
        "state.dir": args.state_dir,
        "kafka.connector": args.connector,
    }
    if args.max_offsets_per_trigger:
        config["max.offsets.per.trigger"] = args.max_offsets_per_trigger
    app = KafkaStreams(build_topology(args.input, args.output), config)
    app.start()
    try:
        if args.until_caught_up:
            app.process_all_available()
            print(json.dumps({"metrics": app.metrics()}), flush=True)
        else:
            stop = threading.Event()
            signal.signal(signal.SIGTERM, lambda *_: stop.set())  # Kubernetes stops a pod with SIGTERM
            while not stop.wait(1.0) and not app.await_termination(0):
                pass
    finally:
        app.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
