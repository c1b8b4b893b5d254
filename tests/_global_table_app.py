"""Orders enriched from a global table of customers, as a streaming query over files, the table
updated while the query runs; and a windowed count of the enriched orders, which shows that the
table's timestamps (far ahead of the orders') move no stream time.

Shared by the ``local[*]`` test (tests/test_global_tables.py) and the local-cluster one
(`integration.local_cluster_source`), where the join's operator runs in the executors."""

from __future__ import annotations

import tempfile
from typing import Any

from streamsdsl import Consumed, Materialized, Produced, Serdes, StreamsBuilder, TimeWindows, Topology

#: The micro-batches, one file each: records (topic, key, value, timestamp) in file order. The
#: customers' timestamps are far ahead of the orders': were they stream time, every order after
#: the first batch would be too late for its window of the count.
BATCHES = [
    # the first batch bootstraps the table: o1 sees Ann although it comes first in the file
    [("orders", "o1", "c1", 5), ("orders", "o2", "c3", 6), ("customers", "c1", "Ann", 10_000),
     ("customers", "c2", "Bob", 10_000)],
    # an update while the query runs, seen by the order of the same micro-batch
    [("customers", "c3", "Cy", 10_001), ("orders", "o3", "c3", 7)],
    # a delete in the same micro-batch as an order that comes before it in the file: on Spark the
    # order sees the table as of its batch's end (docs/joins.md, "Global tables")
    [("orders", "o4", "c1", 8), ("customers", "c1", None, 10_002)],
    [("orders", "o5", "c2", 9)],
]


def topology() -> Topology:
    s = Serdes.String()
    b = StreamsBuilder()
    customers = b.global_table("customers", Consumed.with_serdes(s, s), Materialized.as_("customers-store"))
    enriched = b.stream("orders", Consumed.with_serdes(s, s)).left_join(
        customers, lambda order, customer: customer, lambda customer, name: f"{customer}:{name}")
    enriched.to("enriched", Produced.with_serdes(s, s))
    enriched.group_by(lambda k, v: "all").windowed_by(TimeWindows.of_size_with_no_grace(100)).count() \
        .to_stream().map(lambda k, v: (k.key, v)).to("counts", Produced.with_serdes(s, Serdes.Long()))
    return b.build()


#: What the enriched topic receives (key, value, timestamp), in order.
ENRICHED = [("o1", "c1:Ann", 5), ("o2", "c3:None", 6), ("o3", "c3:Cy", 7), ("o4", "c1:None", 8),
            ("o5", "c2:Bob", 9)]
#: The window [0, 100)'s count after each micro-batch: every order counted.
COUNTS = [2, 3, 4, 5]
#: The global store at the end, as an interactive query reads it (c1 deleted).
STORE = [["c2", "Bob"], ["c3", "Cy"]]


def run(spark: Any) -> dict[str, list[Any]]:
    """The topology as a streaming query over `BATCHES`, one micro-batch each: the enriched
    records (key, value, timestamp), the count after each batch, and the global store's
    entries as an interactive query reads them from the checkpoint."""
    from streamsdsl.io.files import FileTopic
    from streamsdsl.runtime.streaming import start_streaming
    from tests._support import Collect

    s = Serdes.String()
    with tempfile.TemporaryDirectory(prefix="streamsdsl-global-") as directory:
        topic = FileTopic(f"{directory}/in")
        out = Collect()
        query, compiled, _ = start_streaming(topology(), lambda n: topic.read_stream(spark, n.topics), out,
                                      checkpoint_location=f"{directory}/checkpoint")
        try:
            for batch in BATCHES:
                topic.append_topics(batch, s, s)
                query.processAllAvailable()
        finally:
            query.stop()
        from streamsdsl import QueryableStoreTypes, StoreQueryParameters
        from streamsdsl.runtime.queries import StoreReader, store_view

        store = store_view(StoreReader(spark, f"{directory}/checkpoint", compiled),
                           StoreQueryParameters.from_name_and_type("customers-store", QueryableStoreTypes.key_value_store()))
        entries = sorted([k, store.get(k)] for k in ("c1", "c2", "c3") if store.get(k) is not None)
    return {"enriched": [(k, v, ts) for _, k, v, ts in out.by_topic.get("enriched", [])],
            "counts": [v for _, _, v, _ in out.by_topic.get("counts", [])], "store": entries}
