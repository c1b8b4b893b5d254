"""Quickstart: count paid orders per customer, Kafka → Spark → Kafka.

The topology reads JSON orders from the topic ``orders``, keeps the paid ones, maps each to its
customer, regroups by customer and counts. The counts table is written, as its changelog, to
``orders-per-customer``: one update per counted order.

By default ``main()`` runs it against a broker:

1. the broker named by ``BOOTSTRAP_SERVERS`` if that is set, else a local Apache Kafka started
   by :func:`~streamsdsl.testing.local_kafka` (a Docker container, or a JVM process);
2. creates ``orders`` and ``orders-per-customer`` (one partition each) and produces the five
   orders (string keys, JSON values, the given record timestamps);
3. runs the topology with :class:`~streamsdsl.runtime.app.KafkaStreams` until every order is processed,
   reading one record per micro-batch (``max.offsets.per.trigger = 1``): Spark emits one
   update per key and micro-batch, so one record per batch gives the record-by-record
   changelog Kafka Streams writes (with several records per batch you get only each batch's
   latest count per customer);
4. reads ``orders-per-customer`` back with an ``assign()``-based consumer and prints it;
5. stops the application and, if it started one, the broker (also on error).

On an external broker where the topics already exist, both names get a run suffix so that
an earlier run's records are not counted again.

``--connector jvm`` reads ``orders`` with Spark's own Kafka connector instead of streamsdsl's
Python data source (``make run CONNECTOR=jvm``; ``make install`` resolves the connector).

``--remote sc://host:port`` runs it on a Spark Connect server instead of a local session
(docs/connect.md: ``python -m streamsdsl.testing.connect_server`` starts one on this machine).

``--driver`` runs the same topology without a broker, through the
:class:`~streamsdsl.runtime.driver.TopologyTestDriver`, and prints the same table.

Run it with ``make run`` or ``.venv/bin/python examples/quickstart.py [--driver]``.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import json
import logging
import signal
import sys
import tempfile
import threading
import uuid
from collections.abc import Callable
from typing import Any

from streamsdsl import Consumed, Produced, Serdes, StreamsBuilder, Topology

ORDERS = [
    # (key = order id, value = order, timestamp in ms)
    ("o-1", {"customer": "alice", "amount": 30, "status": "paid"}, 1_000),
    ("o-2", {"customer": "bob", "amount": 12, "status": "paid"}, 2_000),
    ("o-3", {"customer": "alice", "amount": 99, "status": "cancelled"}, 3_000),
    ("o-4", {"customer": "Alice", "amount": 5, "status": "paid"}, 4_000),
    ("o-5", {"customer": "bob", "amount": 40, "status": "paid"}, 5_000),
]
INPUT_TOPIC = "orders"
OUTPUT_TOPIC = "orders-per-customer"


def build_topology(input_topic: str = INPUT_TOPIC, output_topic: str = OUTPUT_TOPIC) -> Topology:
    """orders → paid only → customer (lowercased) → group by customer → count → orders-per-customer."""
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


def print_table(records: list[tuple[str, int, int]]) -> None:
    """Print (customer, paid orders, timestamp) rows."""
    print(f"{'customer':<10} {'paid orders':>11} {'timestamp':>9}")
    for customer, count, timestamp in records:
        print(f"{customer:<10} {count:>11} {timestamp:>9}")


def run_with_driver() -> list[tuple[str, int, int]]:
    """Run the topology through the TopologyTestDriver (no broker)."""
    from streamsdsl.runtime.driver import TopologyTestDriver

    topology = build_topology()
    print(topology.describe())
    with TopologyTestDriver(topology) as driver:
        orders = driver.create_input_topic(INPUT_TOPIC)
        for order_id, order, timestamp in ORDERS:
            orders.pipe_input(order_id, order, timestamp)
        records = driver.create_output_topic(OUTPUT_TOPIC).read_records_to_list()
    return [(r.key, r.value, r.timestamp) for r in records]


def _topic_names(kafka: Any) -> tuple[str, str]:
    """The plain topic names, or suffixed ones if they already exist (an external broker)."""
    from confluent_kafka.admin import AdminClient

    existing = AdminClient({"bootstrap.servers": kafka.bootstrap_servers}).list_topics(timeout=30).topics
    if INPUT_TOPIC not in existing and OUTPUT_TOPIC not in existing:
        return INPUT_TOPIC, OUTPUT_TOPIC
    suffix = uuid.uuid4().hex[:8]
    print(f"topics {INPUT_TOPIC!r}/{OUTPUT_TOPIC!r} exist already; using the suffix -{suffix}", file=sys.stderr)
    return f"{INPUT_TOPIC}-{suffix}", f"{OUTPUT_TOPIC}-{suffix}"


def _interruptibly(fn: Callable[[], None]) -> None:
    """Call ``fn`` in a helper thread; the main thread waits in short steps, so Ctrl-C and
    SIGTERM are handled at once (a Py4J call blocks signal handling until it returns)."""
    done = threading.Event()
    failure: list[BaseException] = []

    def call() -> None:
        try:
            fn()
        except BaseException as exc:  # noqa: BLE001 - re-raised in the main thread
            failure.append(exc)
        finally:
            done.set()

    threading.Thread(target=call, name="quickstart-wait", daemon=True).start()
    while not done.wait(0.2):
        pass
    if failure:
        raise failure[0]


def run_on_kafka(connector: str = "python", remote: str | None = None) -> list[tuple[str, int, int]]:
    """Produce the orders, run the topology Kafka → Spark → Kafka, read the output topic back;
    ``connector`` is what reads ``orders`` (``kafka.connector``: ``python`` or ``jvm``); ``remote``
    is a Spark Connect server's address (``sc://host:port``) to run on instead of a local session."""
    from pyspark.sql import SparkSession

    from streamsdsl.runtime.app import KafkaStreams
    from streamsdsl.runtime.session import get_session
    from streamsdsl.testing import local_kafka

    # Progress lines (one per micro-batch) and the Spark UI address go to stderr.
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logging.getLogger("streamsdsl").addHandler(handler)
    logging.getLogger("streamsdsl").setLevel(logging.INFO)

    # The SparkSession starts while the broker does (both take seconds; neither needs the other).
    def start_session() -> Any:
        return get_session() if remote is None else SparkSession.builder.remote(remote).getOrCreate()

    session = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="quickstart-session").submit(start_session)
    with local_kafka() as kafka, tempfile.TemporaryDirectory(prefix="streamsdsl-quickstart-") as state_dir:
        print(f"broker: {kafka.bootstrap_servers} ({kafka.kind})", file=sys.stderr)
        input_topic, output_topic = _topic_names(kafka)
        kafka.create_topic(input_topic, partitions=1)
        kafka.create_topic(output_topic, partitions=1)
        kafka.produce(
            input_topic,
            [(order_id.encode(), json.dumps(order).encode(), ts, None) for order_id, order, ts in ORDERS],
        )

        topology = build_topology(input_topic, output_topic)
        print(topology.describe())
        app = KafkaStreams(
            topology,
            {
                "application.id": "quickstart-orders-per-customer",
                "bootstrap.servers": kafka.bootstrap_servers,
                "state.dir": state_dir,
                "commit.interval.ms": 50,
                # One record per micro-batch: the changelog then has one update per counted order.
                "max.offsets.per.trigger": 1,
                "kafka.connector": connector,
            },
            spark=session.result(),
        )
        try:
            app.start()
            _interruptibly(app.process_all_available)
        finally:
            app.close()
            # Stop Spark before the broker: its Python workers keep producers open until then.
            with contextlib.suppress(Exception):
                session.result().stop()

        # assign()-based read of every partition from its start (no consumer group).
        keys, values = Serdes.String(), Serdes.Long()
        return [
            (keys.deserialize(r.key), values.deserialize(r.value), r.timestamp)
            for r in kafka.consume_all(output_topic)
        ]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--driver", action="store_true", help="run through the TopologyTestDriver instead of a Kafka broker"
    )
    parser.add_argument(
        "--connector", choices=("python", "jvm"), default="python",
        help="what reads the input topic: streamsdsl's Python data source (default) or Spark's Kafka connector",
    )
    parser.add_argument(
        "--remote", metavar="sc://HOST:PORT", default=None,
        help="run on this Spark Connect server instead of a local SparkSession (docs/connect.md)",
    )
    args = parser.parse_args(argv)
    # SIGTERM (e.g. from a supervisor) unwinds like Ctrl-C, so the local broker is stopped.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    records = run_with_driver() if args.driver else run_on_kafka(args.connector, args.remote)
    print_table(records)


if __name__ == "__main__":
    main()
