"""Quickstart: count paid orders per customer, run on Spark through the TopologyTestDriver.

The topology reads JSON orders from the topic ``orders``, keeps the paid ones, maps each to its
customer, regroups by customer and counts. The counts table is written, as its changelog, to
``orders-per-customer``: one update per counted order.

No Kafka broker is needed: :class:`~streamsdsl.driver.TopologyTestDriver` runs the compiled
Spark plan over the piped records with Kafka Streams' record-by-record semantics.

Run it with ``make run`` or ``.venv/bin/python examples/quickstart.py``.
"""

from __future__ import annotations

from streamsdsl import Consumed, Produced, Serdes, StreamsBuilder, Topology
from streamsdsl.driver import TopologyTestDriver

ORDERS = [
    # (key = order id, value = order, timestamp in ms)
    ("o-1", {"customer": "alice", "amount": 30, "status": "paid"}, 1_000),
    ("o-2", {"customer": "bob", "amount": 12, "status": "paid"}, 2_000),
    ("o-3", {"customer": "alice", "amount": 99, "status": "cancelled"}, 3_000),
    ("o-4", {"customer": "Alice", "amount": 5, "status": "paid"}, 4_000),
    ("o-5", {"customer": "bob", "amount": 40, "status": "paid"}, 5_000),
]


def build_topology() -> Topology:
    """orders → paid only → customer (lowercased) → group by customer → count → orders-per-customer."""
    builder = StreamsBuilder()
    (
        builder.stream("orders", Consumed.with_serdes(Serdes.String(), Serdes.Json()))
        .filter(lambda order_id, order: order["status"] == "paid")
        .map_values(lambda order: order["customer"].lower())
        .group_by(lambda order_id, customer: customer)
        .count()
        .to_stream()
        .to("orders-per-customer", Produced.with_serdes(Serdes.String(), Serdes.Long()))
    )
    return builder.build()


def main() -> None:
    topology = build_topology()
    print(topology.describe())

    with TopologyTestDriver(topology) as driver:
        orders = driver.create_input_topic("orders")
        for order_id, order, timestamp in ORDERS:
            orders.pipe_input(order_id, order, timestamp)
        records = driver.create_output_topic("orders-per-customer").read_records_to_list()

    print(f"{'customer':<10} {'paid orders':>11} {'timestamp':>9}")
    for record in records:
        print(f"{record.key:<10} {record.value:>11} {record.timestamp:>9}")


if __name__ == "__main__":
    main()
