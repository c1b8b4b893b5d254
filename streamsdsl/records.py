"""The record model shared by every layer (no pyspark here).

A stream on Spark is a DataFrame whose columns are the ones below. Sources produce
``RAW_RECORD_DDL`` (bytes as they are on the wire); the compiler deserializes ``key`` and
``value`` with the topology's serdes right after the source and serializes them again
right before a sink, which receives ``RAW_SINK_DDL``.
"""

from __future__ import annotations

import re

#: Schema (Spark DDL) of what a source yields: one row per Kafka record.
#: ``timestamp`` is the record timestamp in epoch milliseconds (event time).
RAW_RECORD_DDL = (
    "key binary, value binary, topic string, partition int, offset long, "
    "timestamp long, headers array<struct<key:string,value:binary>>"
)

#: Column names of ``RAW_RECORD_DDL`` in order.
RAW_RECORD_COLUMNS = ("key", "value", "topic", "partition", "offset", "timestamp", "headers")

#: Schema (Spark DDL) of what a sink receives: serialized key/value, a null value is a
#: tombstone; ``timestamp`` in epoch milliseconds.
RAW_SINK_DDL = "key binary, value binary, timestamp long, headers array<struct<key:string,value:binary>>"

#: Why a point drops records (the part of an operator that drops them: before it, a null value,
#: a deserialization error, too late for its windows), in Kafka Streams' log words; the direct
#: engine and the Spark runners log a dropped record with them.
DROP_REASONS = {
    "input": "Skipping record due to null key or value",
    "null-value": "Skipping record due to null key or value",
    "deserialize": "Skipping record that could not be deserialized (log_and_continue)",
    "output": "Skipping record for expired window",
    "expired-segment": "Skipping record for expired segment",
    "null-foreign-key": "Skipping record due to null foreign key",
    "stale-response": "Dropping FK-join response due to hash mismatch",
}

#: Kafka Streams' dead-letter headers (KIP-1034).
DLQ_HEADERS = (
    "__streams.errors.exception",
    "__streams.errors.message",
    "__streams.errors.topic",
    "__streams.errors.partition",
    "__streams.errors.offset",
)
DLQ_EXCEPTION = "org.apache.kafka.common.errors.SerializationException"

#: The application id of a `TopologyTestDriver` whose config has none (Kafka's driver's).
DRIVER_APPLICATION_ID = "dummy-topology-test-driver-app-id"

#: A store name Kafka Streams generates (a store without ``Materialized.as_``): such a store is
#: not queryable (``KafkaStreams.store``); a named one is.
GENERATED_STORE_NAME = re.compile(r"-STATE-STORE-\d{10}$")
