"""The Processor API's types, as Kafka Streams' ``org.apache.kafka.streams.processor.api`` names
them (snake_case): what a user's processor implements and what it is given.

A processor belongs to a **task** (one input partition of a sub-topology), not to a key: its
stores span every key the task sees, its punctuators fire per task. `KStream.process` adds one;
`streamsdsl.processor.kernel.ProcessorKernel` runs it, the same object in the direct engine and
on Spark.

Examples
--------
>>> class Upper(Processor):
...     def init(self, context):
...         self.context = context
...     def process(self, record):
...         self.context.forward(record.with_value(record.value.upper()))
>>> Record("k", "v", 5).with_value("V")
Record(key='k', value='V', timestamp=5, headers=())
"""

from __future__ import annotations

import enum
from typing import TYPE_CHECKING, Any, Callable, NamedTuple, Protocol

import attrs

from streamsdsl.errors import InvalidArgumentError, InvalidTypeError

if TYPE_CHECKING:
    from datetime import timedelta

__all__ = [
    "Cancellable",
    "FixedKeyProcessor",
    "FixedKeyRecord",
    "Processor",
    "ProcessorContext",
    "PunctuationType",
    "Punctuator",
    "Record",
    "RecordMetadata",
    "TaskId",
]

Headers = tuple[tuple[str, "bytes | None"], ...]


def _headers(value: Any) -> Headers:
    """Headers as a tuple of ``(name, bytes | None)`` pairs (from a dict or pairs)."""
    if value is None:
        return ()
    items = value.items() if isinstance(value, dict) else value
    out = []
    for item in items:
        try:
            name, data = item
        except (TypeError, ValueError):
            raise InvalidTypeError(
                f"'headers' must be (name, bytes) pairs or a dict of them (got {item!r} in {value!r}).") from None
        if not isinstance(name, str) or not (data is None or isinstance(data, bytes)):
            raise InvalidTypeError(
                f"'headers' must be (name: str, value: bytes | None) pairs (got ({name!r}, {data!r})).")
        out.append((name, data))
    return tuple(out)


def _timestamp(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidTypeError(f"'timestamp' must be epoch milliseconds as an int (got {type(value).__name__}: {value!r}).")
    if value < 0:
        raise InvalidArgumentError(f"'timestamp' must be >= 0 ms (got {value}): Kafka records cannot have a negative "
                                   "timestamp.")
    return value


@attrs.frozen
class Record:
    """A record a processor receives and forwards (Kafka's ``api.Record``): immutable; the
    ``with_*`` methods return a new record.

    ``timestamp`` is epoch milliseconds; ``headers`` a tuple of ``(name, bytes | None)`` pairs
    (a dict is accepted)."""

    key: Any
    value: Any
    timestamp: int = attrs.field(converter=_timestamp)
    headers: Headers = attrs.field(default=(), converter=_headers)

    def with_key(self, key: Any) -> Record:
        """This record with ``key``."""
        return attrs.evolve(self, key=key)

    def with_value(self, value: Any) -> Record:
        """This record with ``value``."""
        return attrs.evolve(self, value=value)

    def with_timestamp(self, timestamp: int) -> Record:
        """This record with ``timestamp`` (epoch ms)."""
        return attrs.evolve(self, timestamp=timestamp)

    def with_headers(self, headers: Any) -> Record:
        """This record with ``headers``."""
        return attrs.evolve(self, headers=headers)


@attrs.frozen
class FixedKeyRecord(Record):
    """The record of a `FixedKeyProcessor` (``process_values``): its key cannot change, so it
    has no ``with_key`` (Kafka's ``FixedKeyRecord``)."""

    def with_key(self, key: Any) -> Record:
        raise InvalidArgumentError(
            "A FixedKeyRecord's key cannot change (KStream.process_values keeps every key): use with_value(), or "
            "KStream.process() with a Processor to change keys.")


class Processor:
    """A custom processor (Kafka's ``api.Processor``): subclass it and override `process`.

    `init` is called with the `ProcessorContext` before the first record of its task, `close`
    when the task ends (on Spark, each micro-batch is a task's run: see the Processor API page).
    A processor forwards any number of records with ``context.forward``; what it must remember
    across runs belongs in its stores."""

    def init(self, context: ProcessorContext) -> None:
        """Keep the context, open stores (``context.get_state_store``), schedule punctuators."""

    def process(self, record: Record) -> None:
        """Handle one record."""
        raise NotImplementedError(f"{type(self).__name__} must implement process(record)")

    def close(self) -> None:
        """Release what `init` acquired (stores are closed by streamsdsl)."""


class FixedKeyProcessor(Processor):
    """A processor that keeps every record's key (Kafka's ``api.FixedKeyProcessor``, added with
    ``KStream.process_values``): it receives `FixedKeyRecord` and may only forward records with
    the key it received, so no repartition follows it."""


class PunctuationType(enum.Enum):
    """What drives a punctuator (Kafka's ``PunctuationType``)."""

    #: The task's stream time: the largest timestamp of the records the task has processed.
    STREAM_TIME = "stream-time"
    #: The system clock (in the test driver: its mock wall clock, `advance_wall_clock_time`).
    WALL_CLOCK_TIME = "wall-clock-time"


Punctuator = Callable[[int], None]


class Cancellable(Protocol):
    """What `ProcessorContext.schedule` returns: ``cancel()`` stops the punctuator."""

    def cancel(self) -> None: ...


class RecordMetadata(NamedTuple):
    """Where the record being processed was read: ``topic``, ``partition``, ``offset`` (Kafka's
    ``RecordMetadata``)."""

    topic: str
    partition: int
    offset: int


class TaskId(NamedTuple):
    """A task: a sub-topology and one input partition of it (Kafka's ``TaskId``, ``0_1``)."""

    subtopology: int
    partition: int

    def __str__(self) -> str:
        return f"{self.subtopology}_{self.partition}"


class ProcessorContext(Protocol):
    """What a processor is given at `Processor.init` (Kafka's ``api.ProcessorContext``)."""

    def forward(self, record: Record, child_name: str | None = None) -> None:
        """Send ``record`` to every child of the processor (or only to ``child_name``)."""

    def get_state_store(self, name: str) -> Any:
        """The store ``name``, connected to this processor (``KStream.process(supplier, name)``)."""

    def schedule(self, interval: int | timedelta, type: PunctuationType, callback: Punctuator) -> Cancellable:
        """Call ``callback(timestamp)`` every ``interval`` (ms or timedelta) of ``type`` time."""

    def record_metadata(self) -> RecordMetadata | None:
        """The topic, partition and offset of the record being processed (None in a punctuator)."""

    def current_stream_time_ms(self) -> int:
        """The task's stream time (the largest record timestamp it has processed; -1 before any)."""

    def current_system_time_ms(self) -> int:
        """The system time (the test driver's mock wall clock)."""

    def application_id(self) -> str:
        """The application's ``application.id``."""

    def task_id(self) -> TaskId:
        """The task this processor instance belongs to."""
