"""Order enrichment: a stream–table join, then revenue per region per minute.

Orders arrive on ``orders`` keyed by customer id, with a JSON value ``{"item", "amount"}``.
Customers are a table read from ``customers`` (key customer id, JSON ``{"name", "region"}``;
the latest value per id). The topology

1. joins every order with its customer's **current** value (``orders.join(customers, joiner)``):
   an order whose customer is unknown is not forwarded (an inner join; it is not counted as a
   dropped record); a customer update changes the orders that come after it, never those
   before, and emits nothing itself;
2. writes the enriched orders ``{"item", "amount", "customer", "region"}`` (key customer id,
   the order's timestamp) to ``enriched-orders``;
3. regroups them by region (``group_by``: a repartition), sums them in 1-minute tumbling windows
   without grace, and writes each window's totals ``{"start", "end", "orders", "revenue"}``
   keyed by region to ``revenue-per-region`` **when the window closes** (emit on close: one
   final record per region and minute, with the window's latest order's timestamp, once stream
   time reaches the window's end). On Spark the join passes event time on, so the watermark
   closes the windows below it, also those of a region that gets no later order (EU here).

The input has an order of an unknown customer (``c3``: no output) and a customer update between
two orders of ``c1`` (Ann moves from EU to US at 09:00:40): her tea at 09:00:10 counts for EU,
her scones at 09:00:50 for US.

By default ``main()`` runs it Kafka → Spark → Kafka: on the broker named by
``BOOTSTRAP_SERVERS``, else on a local Apache Kafka started by
:func:`~streamsdsl.testing.local_kafka`. It creates the four topics, then
produces and processes the input in three steps (the customers and the orders before the update;
the update; the orders after it), so that the update is processed between the orders around it,
reads both output topics back and prints them, in timestamp order (records of different keys
written in one micro-batch may come in any order). The last order (09:02:05) moves stream time
past 09:02:00: the three windows before it close (EU and US from 09:00, US from 09:01), on Spark
in the micro-batch that runs at the new watermark; the 09:02 window stays open until a record at
09:03:00 or later arrives. ``--driver`` runs
the same topology through the :class:`~streamsdsl.runtime.driver.TopologyTestDriver` (no
broker) and prints the same tables. ``--cluster`` runs it on a Spark standalone cluster
started for the run (a master and two workers whose Python has PySpark's dependencies but not
streamsdsl): the configuration names the master and that Python, and streamsdsl ships itself
(docs/deploy.md; ``make run-cluster``).

    .venv/bin/python examples/order_enrichment.py            # Kafka → Spark → Kafka
    .venv/bin/python examples/order_enrichment.py --driver   # the TopologyTestDriver
    .venv/bin/python examples/order_enrichment.py --cluster  # on a standalone cluster
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import signal
import sys
import tempfile
import uuid
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta, timezone
from typing import Any

from streamsdsl import (
    Consumed,
    EmitStrategy,
    Grouped,
    Produced,
    Serdes,
    StreamsBuilder,
    TimeWindows,
    Topology,
)

DAY = datetime(2024, 1, 1, tzinfo=timezone.utc)
WINDOW = timedelta(minutes=1)


def at(hhmmss: str) -> int:
    """Epoch milliseconds of ``hh:mm:ss`` UTC on 2024-01-01."""
    h, m, s = (int(x) for x in hhmmss.split(":"))
    return int((DAY + timedelta(hours=h, minutes=m, seconds=s)).timestamp() * 1000)


def clock(ms: int) -> str:
    """``hh:mm:ss`` UTC of epoch milliseconds."""
    return datetime.fromtimestamp(ms / 1000, timezone.utc).strftime("%H:%M:%S")


# The input, in three steps: each step is produced and processed before the next one starts.
# (topic, key = customer id, value, time)
STEPS: list[list[tuple[str, str, dict[str, Any], str]]] = [
    [
        ("customers", "c1", {"name": "Ann", "region": "EU"}, "09:00:00"),
        ("customers", "c2", {"name": "Bo", "region": "US"}, "09:00:00"),
        ("orders", "c1", {"item": "tea", "amount": 3}, "09:00:10"),
        ("orders", "c2", {"item": "cake", "amount": 5}, "09:00:20"),
        ("orders", "c3", {"item": "jam", "amount": 4}, "09:00:30"),  # no customer c3: no output
    ],
    [
        ("customers", "c1", {"name": "Ann", "region": "US"}, "09:00:40"),  # Ann moves: emits nothing
    ],
    [
        ("orders", "c1", {"item": "scones", "amount": 7}, "09:00:50"),  # joined with region US
        ("orders", "c2", {"item": "tea", "amount": 2}, "09:01:10"),
        ("orders", "c1", {"item": "cake", "amount": 6}, "09:02:05"),
    ],
]
TOPICS = {"orders": "orders", "customers": "customers", "enriched": "enriched-orders",
          "revenue": "revenue-per-region"}
JSON = Consumed.with_serdes(Serdes.String(), Serdes.Json())
JSON_OUT = Produced.with_serdes(Serdes.String(), Serdes.Json())


def enrich(order: dict[str, Any], customer: dict[str, Any]) -> dict[str, Any]:
    """The joiner: the order with its customer's name and region."""
    return {**order, "customer": customer["name"], "region": customer["region"]}


def add(region: str, order: dict[str, Any], totals: dict[str, int]) -> dict[str, int]:
    """The aggregator: one more order and its amount."""
    return {"orders": totals["orders"] + 1, "revenue": totals["revenue"] + order["amount"]}


def build_topology(topics: dict[str, str] = TOPICS) -> Topology:
    """orders ⋈ customers → enriched-orders; → group by region → 1-minute windows, each emitted
    when it closes → revenue-per-region."""
    builder = StreamsBuilder()
    customers = builder.table(topics["customers"], JSON)
    enriched = builder.stream(topics["orders"], JSON).join(customers, enrich)
    enriched.to(topics["enriched"], JSON_OUT)
    (
        enriched.group_by(lambda customer_id, order: order["region"], Grouped.with_serdes(Serdes.String(), Serdes.Json()))
        .windowed_by(TimeWindows.of_size_with_no_grace(WINDOW))
        .emit_strategy(EmitStrategy.on_window_close())
        .aggregate(lambda: {"orders": 0, "revenue": 0}, add)
        .to_stream()
        .map(lambda window, totals: (window.key, {"start": window.window.start, "end": window.window.end, **totals}))
        .to(topics["revenue"], JSON_OUT)
    )
    return builder.build()


Record = tuple[str, dict[str, Any], int]  # (key, value, timestamp)


def print_tables(enriched: list[Record], revenue: list[Record]) -> None:
    """Print the enriched orders, then the revenue of each closed window per region."""
    print(f"{'customer':<8} {'item':<7} {'amount':>6} {'name':<5} {'region':<6} {'time':>8}")
    for key, value, ts in enriched:
        print(f"{key:<8} {value['item']:<7} {value['amount']:>6} {value['customer']:<5} {value['region']:<6} "
              f"{clock(ts):>8}")
    print()
    print(f"{'region':<6} {'start':>8} {'end':>8} {'orders':>6} {'revenue':>7} {'time':>8}")
    for key, value, ts in revenue:
        print(f"{key:<6} {clock(value['start']):>8} {clock(value['end']):>8} {value['orders']:>6} "
              f"{value['revenue']:>7} {clock(ts):>8}")


def run_with_driver() -> tuple[list[Record], list[Record]]:
    """Run the topology through the TopologyTestDriver (no broker), step after step."""
    from streamsdsl.runtime.driver import TopologyTestDriver

    topology = build_topology()
    print(topology.describe())
    with TopologyTestDriver(topology) as driver:
        inputs = {name: driver.create_input_topic(name, Serdes.String(), Serdes.Json()) for name in ("orders", "customers")}
        for step in STEPS:
            for topic, key, value, time in step:
                inputs[topic].pipe_input(key, value, at(time))
        outputs = []
        for name in ("enriched", "revenue"):
            records = driver.create_output_topic(TOPICS[name], Serdes.String(), Serdes.Json()).read_records_to_list()
            outputs.append([(r.key, r.value, r.timestamp) for r in records])
    return outputs[0], outputs[1]


def topic_names(kafka: Any) -> dict[str, str]:
    """The plain topic names, or suffixed ones if any of them exists already (an external broker)."""
    from confluent_kafka.admin import AdminClient

    existing = AdminClient({"bootstrap.servers": kafka.bootstrap_servers}).list_topics(timeout=30).topics
    if not any(name in existing for name in TOPICS.values()):
        return dict(TOPICS)
    suffix = uuid.uuid4().hex[:8]
    print(f"topics exist already; using the suffix -{suffix}", file=sys.stderr)
    return {role: f"{name}-{suffix}" for role, name in TOPICS.items()}


def produce_step(kafka: Any, topics: dict[str, str], step: list[tuple[str, str, dict[str, Any], str]]) -> None:
    """Produce one step's records (string keys, JSON values, their timestamps), in order."""
    keys, values = Serdes.String(), Serdes.Json()
    for topic, key, value, time in step:
        kafka.produce(topics[topic], [(keys.serialize(key), values.serialize(value), at(time), 0)])


def read_outputs(kafka: Any, topics: dict[str, str]) -> tuple[list[Record], list[Record]]:
    """Both output topics, read with an ``assign()`` consumer from their start."""
    keys, values = Serdes.String(), Serdes.Json()
    return tuple(  # type: ignore[return-value]
        [(keys.deserialize(r.key), values.deserialize(r.value), r.timestamp) for r in kafka.consume_all(topics[name])]
        for name in ("enriched", "revenue")
    )


@contextlib.contextmanager
def running(topology: Topology, config: dict[str, Any], spark: Any = None) -> Iterator[Any]:
    """A started `KafkaStreams` application, closed on the way out (also on error)."""
    from streamsdsl.runtime.app import KafkaStreams

    app = KafkaStreams(topology, config, spark=spark)
    app.start()
    try:
        yield app
    finally:
        app.close(60)


def run_steps(kafka: Any, topics: dict[str, str], config: dict[str, Any], spark: Any = None,
              process: Callable[[Any], None] = lambda app: app.process_all_available()) -> None:
    """Run the topology on ``kafka`` (its topics created): produce each step, then process
    everything available (``process``: `KafkaStreams.process_all_available` also waits for
    the micro-batch at the watermark the step reached, where windows close), so that each step
    is processed before the next."""
    with running(build_topology(topics), config, spark) as app:
        for step in STEPS:
            produce_step(kafka, topics, step)
            process(app)


def run_on_kafka(cluster: bool = False) -> tuple[list[Record], list[Record]]:
    """Kafka → Spark → Kafka on ``BOOTSTRAP_SERVERS`` or a local broker; returns both outputs.

    With ``cluster``, on a Spark standalone cluster started for the run (a master and two workers
    whose Python has PySpark's dependencies only: `streamsdsl.testing.standalone`): the
    configuration names its master and that Python, and streamsdsl ships itself there."""
    from pyspark.sql import SparkSession

    from streamsdsl.testing import local_kafka
    from streamsdsl.testing.standalone import StandaloneCluster, bare_python

    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logging.getLogger("streamsdsl").addHandler(handler)
    logging.getLogger("streamsdsl").setLevel(logging.INFO)

    with contextlib.ExitStack() as stack:
        kafka = stack.enter_context(local_kafka())
        state_dir = stack.enter_context(tempfile.TemporaryDirectory(prefix="streamsdsl-enrichment-"))
        print(f"broker: {kafka.bootstrap_servers} ({kafka.kind})", file=sys.stderr)
        topics = topic_names(kafka)
        for name in topics.values():
            kafka.create_topic(name, partitions=1)
        print(build_topology(topics).describe())
        config = {
            "application.id": f"order-enrichment-{uuid.uuid4().hex[:6]}",
            "bootstrap.servers": kafka.bootstrap_servers,
            "state.dir": state_dir,
            "commit.interval.ms": 50,
        }
        if cluster:
            spark_cluster = stack.enter_context(StandaloneCluster(workers=2, python=bare_python()))
            print(f"Spark standalone cluster: {spark_cluster.master_url} (web UI {spark_cluster.ui_url}), "
                  f"workers' Python {spark_cluster.python}", file=sys.stderr)
            config.update({"spark.master": spark_cluster.master_url, "spark.pyspark.python": spark_cluster.python})
        try:
            run_steps(kafka, topics, config)
        finally:
            # Stop Spark before the broker: its Python workers keep producers open until then.
            with contextlib.suppress(Exception):
                spark = SparkSession.getActiveSession()
                if spark is not None:
                    spark.stop()
        enriched, revenue = read_outputs(kafka, topics)
    return sorted(enriched, key=lambda r: r[2]), sorted(revenue, key=lambda r: r[2])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--driver", action="store_true", help="run through the TopologyTestDriver instead of a Kafka broker"
    )
    parser.add_argument(
        "--cluster", action="store_true",
        help="run on a Spark standalone cluster started for the run, whose workers' Python lacks streamsdsl",
    )
    args = parser.parse_args(argv)
    # SIGTERM (e.g. from a supervisor) unwinds like Ctrl-C, so the local broker is stopped.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    enriched, revenue = run_with_driver() if args.driver else run_on_kafka(cluster=args.cluster)
    print_tables(enriched, revenue)


if __name__ == "__main__":
    main()
