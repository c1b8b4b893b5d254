"""Errors of the Kafka I/O layer (imports neither pyspark nor confluent_kafka).

Each error subclasses `streamsdsl.errors.StreamsDslError` and the matching builtin:

* `KafkaOptionError` (``ValueError``): a source option is missing or invalid.
* `KafkaSinkOptionError` (``ValueError``): a sink option or the sink's input schema is invalid.
* `KafkaSourceError` (``RuntimeError``): reading from the broker failed;
  `KafkaBrokerTimeoutError` when the broker did not answer within the poll timeout;
  `KafkaDataLossError` when planned offsets are gone from the broker, and its subclass
  `KafkaTopicRecreatedError` when the partition's offsets are now below the query's position
  (the topic was deleted and re-created, or the broker lost its data).
* `KafkaDeliveryError` (``RuntimeError``): the broker did not acknowledge produced records;
  under exactly-once, `KafkaTransactionError` when a transaction failed, with its subclasses
  `KafkaProducerFencedError` (another instance of the application fenced this one) and
  `KafkaTransactionTimeoutError` (a write outlived ``transaction.timeout.ms``).

A source error raised in a Spark worker or in the driver's data source process reaches the
application inside a Spark error; `find_source_error` recovers it from that error's text, and
`find_transaction_error` a sink's transaction error.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import TypeVar

from streamsdsl.errors import StreamsDslError

__all__ = [
    "KafkaBrokerTimeoutError",
    "KafkaDataLossError",
    "KafkaDeliveryError",
    "KafkaOptionError",
    "KafkaProducerFencedError",
    "KafkaSinkOptionError",
    "KafkaSourceError",
    "KafkaTopicRecreatedError",
    "KafkaTransactionError",
    "KafkaTransactionTimeoutError",
    "broker_timeout",
    "find_source_error",
    "find_transaction_error",
    "topic_recreated",
]


class KafkaOptionError(StreamsDslError, ValueError):
    """An option of the ``streamsdsl-kafka`` data source is missing or invalid."""


class KafkaSinkOptionError(StreamsDslError, ValueError):
    """An option or the input schema of the ``streamsdsl-kafka`` sink is invalid."""


class KafkaSourceError(StreamsDslError, RuntimeError):
    """Reading from Kafka failed (broker error, timeout)."""


class KafkaBrokerTimeoutError(KafkaSourceError):
    """The broker did not answer (or a read made no progress) within ``kafkaConsumer.pollTimeoutMs``."""


class KafkaDataLossError(KafkaSourceError):
    """Planned offsets are gone from the broker and ``failOnDataLoss`` is true."""


class KafkaTopicRecreatedError(KafkaDataLossError):
    """A partition's offsets are below the query's position: the topic was deleted and re-created."""


#: The option that bounds every wait of the source, as the source and `KafkaStreams` name it.
TIMEOUT_OPTION = "'kafkaConsumer.pollTimeoutMs' (KafkaStreams: 'task.timeout.ms')"


def broker_timeout(what: str, bootstrap_servers: str, timeout_ms: int, cause: object = None) -> KafkaBrokerTimeoutError:
    """The error of a wait for the broker that exceeded the poll timeout.

    Examples
    --------
    >>> str(broker_timeout("fetch metadata of topic 'orders'", "h:9092", 5000, "Local: Timed out"))
    "could not fetch metadata of topic 'orders' from the broker at 'bootstrap.servers' = h:9092 within ...
    """
    return KafkaBrokerTimeoutError(
        f"could not {what} from the broker at 'bootstrap.servers' = {bootstrap_servers} within "
        f"kafkaConsumer.pollTimeoutMs = {timeout_ms} ms"
        + (f" ({cause})" if cause is not None and str(cause) else "")
        + f". Check that the broker is running and reachable, or raise {TIMEOUT_OPTION} to wait longer."
    )


def topic_recreated(topic: str, partition: int, reached: int, low: int, high: int) -> KafkaTopicRecreatedError:
    """The error of a partition that now ends (``high``) below an offset it had ``reached`` before.

    Examples
    --------
    >>> str(topic_recreated("orders", 2, 3413, 0, 12))
    "partition orders-2 now ends at offset 12 (it holds [0, 12)), below offset 3413 it had reached before: ...
    """
    return KafkaTopicRecreatedError(
        f"partition {topic}-{partition} now ends at offset {high} (it holds [{low}, {high})), below offset "
        f"{reached} it had reached before: the topic was deleted and re-created (or the broker lost its data). "
        "Set the source option 'failOnDataLoss' to 'false' to go on from the new topic's earliest offset, or "
        "reset the application to start afresh (close it, call KafkaStreams.clean_up() and start it again; a "
        "plain query: a new checkpoint)."
    )


#: ``streamsdsl.io.errors.KafkaXxxError: message`` as a Python traceback in a Spark error ends.
_IN_TRACEBACK = re.compile(r"streamsdsl\.io\.errors\.(Kafka\w+Error): ([^\n]+)")


def _texts(error: BaseException, depth: int = 0) -> Iterator[str]:
    """The texts of ``error`` and of its causes: its message, the JVM stack trace a PySpark error
    keeps (with every ``Caused by:``), then the same of its cause (PySpark's, then Python's)."""
    yield str(error)
    stack = getattr(error, "_stackTrace", None)  # pyspark CapturedException: the JVM's exceptionString
    if isinstance(stack, str):
        yield stack
    if depth < 8:
        for cause in (getattr(error, "_cause", None), error.__cause__):
            if isinstance(cause, BaseException) and cause is not error:
                yield from _texts(cause, depth + 1)


def find_source_error(error: BaseException) -> KafkaSourceError | None:
    """The source error carried by ``error`` (a Spark error wrapping a worker's or the data
    source process's traceback, in its message or in its causes' JVM stack traces), rebuilt
    as its class with its message; ``None`` if there is none.

    Examples
    --------
    >>> find_source_error(RuntimeError("... streamsdsl.io.errors.KafkaSourceError: broker gone"))
    KafkaSourceError('broker gone')
    >>> find_source_error(RuntimeError("[DIVIDE_BY_ZERO] ...")) is None
    True
    """
    return _rebuilt(error, (KafkaSourceError, KafkaBrokerTimeoutError, KafkaDataLossError, KafkaTopicRecreatedError))


_E = TypeVar("_E", bound=BaseException)


def _rebuilt(error: BaseException, kinds: tuple[type[_E], ...]) -> _E | None:
    """``error`` if it is of ``kinds[0]``; else the first of ``kinds`` named in a traceback
    ``error`` carries, rebuilt with its message; else None."""
    if isinstance(error, kinds[0]):
        return error
    by_name = {c.__name__: c for c in kinds}
    for text in _texts(error):
        for match in _IN_TRACEBACK.finditer(text):
            cls = by_name.get(match.group(1))
            if cls is not None:
                return cls(match.group(2).strip())
    return None


class KafkaDeliveryError(StreamsDslError, RuntimeError):
    """Records were not acknowledged by the broker; the task (and batch) fails."""


class KafkaTransactionError(KafkaDeliveryError):
    """Exactly-once: a transaction of the sink failed (aborted, nothing of it is visible to
    ``read_committed`` consumers)."""


class KafkaProducerFencedError(KafkaTransactionError):
    """Exactly-once: a newer instance with the same ``application.id`` fenced this one (a zombie)."""


class KafkaTransactionTimeoutError(KafkaTransactionError):
    """Exactly-once: a task's transaction stayed open longer than ``transaction.timeout.ms``."""


def find_transaction_error(error: BaseException) -> KafkaTransactionError | None:
    """The sink's transaction error carried by ``error`` (as `find_source_error` does for the
    source), rebuilt as its class with its message; ``None`` if there is none.

    Examples
    --------
    >>> find_transaction_error(RuntimeError("... streamsdsl.io.errors.KafkaProducerFencedError: fenced"))
    KafkaProducerFencedError('fenced')
    >>> find_transaction_error(RuntimeError("[DIVIDE_BY_ZERO] ...")) is None
    True
    """
    return _rebuilt(error, (KafkaTransactionError, KafkaProducerFencedError, KafkaTransactionTimeoutError))
