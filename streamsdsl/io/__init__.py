"""Kafka I/O on Spark's Python Data Source API (imports pyspark).

`register` makes the format ``"streamsdsl-kafka"`` available on a session; it
reads (`streamsdsl.io.kafka_source`) and writes (`streamsdsl.io.kafka_sink`).
"""

from __future__ import annotations

from streamsdsl.io.kafka_sink import KafkaDeliveryError, KafkaSinkOptionError
from streamsdsl.io.kafka_source import (
    SOURCE_NAME,
    KafkaDataLossError,
    KafkaDataSource,
    KafkaOptionError,
    KafkaSourceError,
    register,
)

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
