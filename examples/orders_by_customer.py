"""A foreign-key join (KIP-213): orders keyed by order id, each naming its customer, joined with
the customers table keyed by customer id; the result is keyed by order id.

An update of a customer reaches every order of that customer; an order moved to another
customer is joined with that one (the old match retracted); a deleted order is a tombstone.
Runs through the TopologyTestDriver (no broker needed):

    .venv/bin/python examples/orders_by_customer.py
"""

from __future__ import annotations

from typing import Any

from streamsdsl import Consumed, Produced, Serdes, StreamsBuilder, TableJoined
from streamsdsl.runtime.driver import TopologyTestDriver

JSON = Consumed.with_serdes(Serdes.String(), Serdes.Json())


def enrich(order: dict[str, Any], customer: dict[str, Any] | None) -> dict[str, Any]:
    """The order with its customer's name (``None`` while the customer is unknown)."""
    return {**order, "name": None if customer is None else customer["name"]}


def build_topology() -> Any:
    builder = StreamsBuilder()
    orders = builder.table("orders", JSON)  # order id -> {"customer": id, "item": ...}
    customers = builder.table("customers", JSON)  # customer id -> {"name": ...}
    orders.left_join(customers, lambda order: order["customer"], enrich,
                     table_joined=TableJoined.as_("orders-by-customer")).to_stream().to(
        "enriched-orders", Produced.with_serdes(Serdes.String(), Serdes.Json()))
    return builder.build()


def main() -> None:
    with TopologyTestDriver(build_topology()) as driver:
        orders = driver.create_input_topic("orders", Serdes.String(), Serdes.Json())
        customers = driver.create_input_topic("customers", Serdes.String(), Serdes.Json())
        customers.pipe_input("c1", {"name": "Ann"}, 1)
        orders.pipe_input("o1", {"customer": "c1", "item": "tea"}, 2)
        orders.pipe_input("o2", {"customer": "c1", "item": "cake"}, 3)
        orders.pipe_input("o3", {"customer": "c2", "item": "jam"}, 4)  # no customer c2 yet
        customers.pipe_input("c1", {"name": "Anna"}, 5)  # reaches o1 and o2
        orders.pipe_input("o2", {"customer": "c2", "item": "cake"}, 6)  # moved to c2
        customers.pipe_input("c2", {"name": "Bo"}, 7)  # reaches o3 and o2
        orders.pipe_input("o1", None, 8)  # deleted
        out = driver.create_output_topic("enriched-orders", Serdes.String(), Serdes.Json())
        print(f"{'order':6} {'item':5} {'name':5} time")
        for r in out.read_records_to_list():
            v = r.value
            print(f"{r.key:6} {'-' if v is None else v['item']:5} {'-' if v is None else str(v['name']):5} {r.timestamp}")


if __name__ == "__main__":
    main()
