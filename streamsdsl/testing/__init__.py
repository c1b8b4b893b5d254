"""Testing helpers: a local Kafka broker and produce/consume utilities."""

from __future__ import annotations

from streamsdsl.testing.local_kafka import ConsumedRecord, LocalKafka, local_kafka

__all__ = ["ConsumedRecord", "LocalKafka", "local_kafka"]
