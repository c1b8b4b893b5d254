"""Kafka I/O on Spark's Python Data Source API.

`register` makes the format ``"streamsdsl-kafka"`` available on a session; it reads
and writes Kafka topics with confluent-kafka, without Spark's JVM Kafka connector.
`SOURCE_NAME`, `KafkaDataSource` and `register` load `streamsdsl.io.source` (and pyspark)
when first used; the errors, `streamsdsl.io.options` and `streamsdsl.io.offsets` import
neither pyspark nor confluent_kafka.

Modules
-------
`streamsdsl.io.errors`
    The errors of the I/O layer.
`streamsdsl.io.options`
    Source and sink options: parsing, validation, librdkafka settings.
`streamsdsl.io.offsets`
    Pure offset arithmetic: checkpoint JSON, offset specs, micro-batch planning, rate limit.
`streamsdsl.io.client`
    The driver's broker client: partitions, watermarks, end offsets.
`streamsdsl.io.partition_reader`
    Reading one planned offset range into Arrow batches (executors).
`streamsdsl.io.consumer_pool`
    The executors' consumers, kept across micro-batches in each Python worker.
`streamsdsl.io.source`
    The stream and batch readers, the data source and `register`.
`streamsdsl.io.sink`
    The producing batch and stream writers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from streamsdsl.io.errors import (
    KafkaDataLossError,
    KafkaDeliveryError,
    KafkaOptionError,
    KafkaSinkOptionError,
    KafkaSourceError,
)

if TYPE_CHECKING:
    from streamsdsl.io.source import SOURCE_NAME, KafkaDataSource, register

__all__ = [
    "SOURCE_NAME",
    "KafkaDataLossError",
    "KafkaDataSource",
    "KafkaDeliveryError",
    "KafkaOptionError",
    "KafkaSinkOptionError",
    "KafkaSourceError",
    "register",
]

_FROM_SOURCE = ("SOURCE_NAME", "KafkaDataSource", "register")


def __getattr__(name: str) -> Any:
    """Load `streamsdsl.io.source` (pyspark) when one of its names is first used."""
    if name in _FROM_SOURCE:
        from streamsdsl.io import source

        return getattr(source, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
