"""KIP-150's shopping example: cart, purchases and wish list cogrouped into one Customer.

Three topics, three aggregators (one per topic, each with its own input type), one
initializer, one state store and one Spark stateful operator. Runs through the
TopologyTestDriver (no broker needed):

    .venv/bin/python examples/customer_cogroup.py
"""

from __future__ import annotations

from typing import Any

from streamsdsl import Consumed, Materialized, Produced, Serdes, StreamsBuilder
from streamsdsl.runtime.driver import TopologyTestDriver

ITEMS = Consumed.with_serdes(Serdes.Long(), Serdes.Json())  # customer id → {"no": item number}


def add_to(field: str) -> Any:
    """An aggregator appending the item number to one list of the Customer."""

    def aggregator(customer_id: int, item: dict[str, int], customer: dict[str, list[int]]) -> dict[str, list[int]]:
        return {**customer, field: [*customer[field], item["no"]]}

    return aggregator


def build() -> Any:
    builder = StreamsBuilder()
    cart = builder.stream("cart", ITEMS).group_by_key()
    purchases = builder.stream("purchases", ITEMS).group_by_key()
    wish_list = builder.stream("wish-list", ITEMS).group_by_key()
    customers = (
        cart.cogroup(add_to("cart"))
        .cogroup(purchases, add_to("purchases"))
        .cogroup(wish_list, add_to("wish_list"))
        .aggregate(lambda: {"cart": [], "purchases": [], "wish_list": []}, materialized=Materialized.as_("customers"))
    )
    customers.to_stream().to("customer-updates", Produced.with_serdes(Serdes.Long(), Serdes.Json()))
    return builder.build()


def main() -> None:
    topology = build()
    print(topology.describe())
    data = {
        "cart": [(1, 1), (2, 2), (1, 3), (1, 4), (2, 5)],
        "purchases": [(2, 6), (1, 7), (1, 8), (2, 9), (2, 10)],
        "wish-list": [(1, 11), (2, 12), (2, 13), (2, 14), (2, 15)],
    }
    with TopologyTestDriver(topology) as driver:
        ts = 0
        for topic, items in data.items():
            input_topic = driver.create_input_topic(topic)
            for customer, no in items:
                ts += 1
                input_topic.pipe_input(customer, {"no": no}, ts)
        final = driver.create_output_topic("customer-updates").read_key_values_to_map()
    for customer_id in sorted(final):
        print(f"customer {customer_id}: {final[customer_id]}")


if __name__ == "__main__":
    main()
