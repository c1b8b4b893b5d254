"""Errors of the Kafka I/O layer (imports neither pyspark nor confluent_kafka).

Each error subclasses `streamsdsl.errors.StreamsDslError` and the matching builtin:

* `KafkaOptionError` (``ValueError``): a source option is missing or invalid.
* `KafkaSinkOptionError` (``ValueError``): a sink option or the sink's input schema is invalid.
* `KafkaSourceError` (``RuntimeError``): reading from the broker failed;
  `KafkaDataLossError` when planned offsets are gone from the broker.
* `KafkaDeliveryError` (``RuntimeError``): the broker did not acknowledge produced records.
"""

from __future__ import annotations

from streamsdsl.errors import StreamsDslError

__all__ = [
    "KafkaDataLossError",
    "KafkaDeliveryError",
    "KafkaOptionError",
    "KafkaSinkOptionError",
    "KafkaSourceError",
]


class KafkaOptionError(StreamsDslError, ValueError):
    """An option of the ``streamsdsl-kafka`` data source is missing or invalid."""


class KafkaSinkOptionError(StreamsDslError, ValueError):
    """An option or the input schema of the ``streamsdsl-kafka`` sink is invalid."""


class KafkaSourceError(StreamsDslError, RuntimeError):
    """Reading from Kafka failed (broker error, timeout)."""


class KafkaDataLossError(KafkaSourceError):
    """Planned offsets are gone from the broker and ``failOnDataLoss`` is true."""


class KafkaDeliveryError(StreamsDslError, RuntimeError):
    """Records were not acknowledged by the broker; the task (and batch) fails."""
