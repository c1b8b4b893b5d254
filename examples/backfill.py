"""A backfill: last week's orders, kept in a Parquet table, run through the streaming topology once.

The application counts each customer's orders per hour and writes each hour once, when it
closes (``EmitStrategy.on_window_close()``). Its history is not in Kafka any more: it is a
Parquet table with typed columns (``customer`` a string, ``order`` a struct, ``at`` a
timestamp). `streamsdsl.backfill` runs the topology over it as one Spark batch job and returns
what the sink would have written, as the bytes on the topic, in order; here they are decoded
with the sink's serdes and printed. The table is read in timestamp order, so the order made at
10:59 but stored after the 11:05 one is still counted in its hour.

Run it with ``.venv/bin/python examples/backfill.py``.
"""

from __future__ import annotations

import os
import tempfile
from datetime import datetime, timedelta, timezone

from streamsdsl import Consumed, EmitStrategy, Produced, Serdes, StreamsBuilder, TimeWindows, Topology, backfill

DAY = datetime(2024, 1, 1, tzinfo=timezone.utc)

ORDERS = [
    # (customer, order, time): the table's rows, not in time order
    ("alice", {"item": "tea", "amount": 3}, "10:05"),
    ("bob", {"item": "cake", "amount": 5}, "10:20"),
    ("alice", {"item": "scones", "amount": 7}, "10:40"),
    ("bob", {"item": "tea", "amount": 2}, "11:05"),
    ("alice", {"item": "cake", "amount": 6}, "10:59"),
    ("alice", {"item": "tea", "amount": 3}, "12:30"),
]


def build_topology() -> Topology:
    """orders (JSON values) → orders per customer per hour, written once each hour closes."""
    builder = StreamsBuilder()
    (builder.stream("orders", Consumed.with_serdes(Serdes.String(), Serdes.Json()))
     .group_by_key()
     .windowed_by(TimeWindows.of_size_with_no_grace(timedelta(hours=1)))
     .emit_strategy(EmitStrategy.on_window_close())
     .count()
     .to_stream()
     .map(lambda window, n: (f"{window.key}@{datetime.fromtimestamp(window.window.start / 1000, timezone.utc):%H:%M}", n))
     .to("orders-per-hour", Produced.with_serdes(Serdes.String(), Serdes.Long())))
    return builder.build()


def main() -> None:
    from streamsdsl.runtime.session import get_session

    spark = get_session()
    with tempfile.TemporaryDirectory() as directory:
        table = os.path.join(directory, "orders.parquet")
        rows = [(c, o, DAY + timedelta(hours=int(t[:2]), minutes=int(t[3:]))) for c, o, t in ORDERS]
        (spark.createDataFrame(rows, "customer string, order struct<item:string,amount:int>, at timestamp")
         .write.parquet(table))

        history = spark.read.parquet(table).selectExpr("customer AS key", "order AS value", "at AS timestamp")
        topology = build_topology()
        out = backfill(topology, {"orders": history})
        sink = out.compiled.sink_for_topic("orders-per-hour")
        print("customer@hour orders written at")
        for r in out["orders-per-hour"].collect():
            key, count = sink.key_serde.deserialize(bytes(r.key)), sink.value_serde.deserialize(bytes(r.value))
            print(f"{key:13} {count:6} {datetime.fromtimestamp(r.timestamp / 1000, timezone.utc):%H:%M}")
        out.release()


if __name__ == "__main__":
    main()
