"""``examples/order_enrichment.py`` end to end: Kafka → Spark → Kafka on the test broker.

The example's topology (orders ⋈ customers table → enriched orders; revenue per region in
1-minute windows emitted on close) runs as one `KafkaStreams` application. The input is produced
in the example's three steps, each processed (`KafkaStreams.process_all_available`) before the
next is produced: the customers and the first orders, then Ann's move from EU to US, then the
later orders. The outputs are read back with an ``assign()`` consumer and compared in full.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pytest

from integration.examples import load_example
from streamsdsl.testing.local_kafka import LocalKafka

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = [pytest.mark.integration, pytest.mark.spark]


def test_order_enrichment_kafka_to_kafka(
    kafka: LocalKafka,
    new_topic: Callable[..., str],
    streams_config: Callable[..., dict[str, object]],
    spark: SparkSession,
) -> None:
    """The enriched orders carry the order's key and timestamp and the customer's value current
    when the order is processed (Ann's scones after her move: US); the unknown customer's order
    is not forwarded (and not counted as dropped); each window is written once, when the
    watermark passes its end, keyed by region, with its latest order's timestamp: EU's too,
    although no later order of EU arrives (the join passes event time on); the 09:02 window
    stays open."""
    example = load_example("order_enrichment")
    at = example.at
    topics = {role: new_topic(1) for role in ("orders", "customers", "enriched", "revenue")}
    apps: list[Any] = []

    def process(app: Any) -> None:
        apps.append(app)
        app.process_all_available()

    example.run_steps(kafka, topics, streams_config("order-enrichment"), spark, process)

    enriched, revenue = example.read_outputs(kafka, topics)
    # One key's records keep their order; records of different keys written in one micro-batch
    # may come in any order: compare in timestamp order.
    for customer in ("c1", "c2"):
        times = [ts for key, value, ts in enriched if key == customer]
        assert times == sorted(times), enriched
    assert sorted(enriched, key=lambda r: r[2]) == [
        ("c1", {"item": "tea", "amount": 3, "customer": "Ann", "region": "EU"}, at("09:00:10")),
        ("c2", {"item": "cake", "amount": 5, "customer": "Bo", "region": "US"}, at("09:00:20")),
        ("c1", {"item": "scones", "amount": 7, "customer": "Ann", "region": "US"}, at("09:00:50")),
        ("c2", {"item": "tea", "amount": 2, "customer": "Bo", "region": "US"}, at("09:01:10")),
        ("c1", {"item": "cake", "amount": 6, "customer": "Ann", "region": "US"}, at("09:02:05")),
    ]

    def window(start: str, end: str, orders: int, revenue: int) -> dict[str, int]:
        return {"start": at(start), "end": at(end), "orders": orders, "revenue": revenue}

    assert sorted(revenue, key=lambda r: r[2]) == [
        ("EU", window("09:00:00", "09:01:00", 1, 3), at("09:00:10")),
        ("US", window("09:00:00", "09:01:00", 2, 12), at("09:00:50")),
        ("US", window("09:01:00", "09:02:00", 1, 2), at("09:01:10")),
    ]
    # c3's order found no customer: an inner join forwards nothing for it, but that is no drop
    # (Kafka Streams counts only records with a None key or value).
    assert apps[-1].metrics()["dropped-records-total"] == 0.0
