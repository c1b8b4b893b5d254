"""Errors of a running `KafkaStreams` application.

A configuration error is a `streamsdsl.runtime.config.StreamsConfigError`; so is a
`TopologyChangedError` (a topology that cannot continue its checkpoint), which also subclasses
`ValueError`. A `NoSinkError` (a topology without a sink, rejected by `KafkaStreams` and the test
driver alike) is both a `streamsdsl.errors.TopologyError` and a ``StreamsConfigError``. Each
other error subclasses `streamsdsl.errors.StreamsDslError` and `RuntimeError`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from streamsdsl.errors import StreamsDslError, TopologyError
from streamsdsl.runtime.config import StreamsConfigError

if TYPE_CHECKING:
    from streamsdsl.runtime.fingerprint import Change

__all__ = ["IllegalStateError", "MissingTopicError", "NoSinkError", "StreamsError", "TopologyChangedError"]


class IllegalStateError(StreamsDslError, RuntimeError):
    """A `KafkaStreams` method was called in a state that does not allow it."""


class MissingTopicError(StreamsDslError, RuntimeError):
    """A topic the topology reads or writes does not exist on the broker."""


class NoSinkError(TopologyError, StreamsConfigError):
    """The topology has no sink (no ``.to(topic)``), so it would run nothing: raised when a
    `KafkaStreams` or a `streamsdsl.runtime.driver.TopologyTestDriver` is created with it.

    A `streamsdsl.errors.TopologyError` (what the topology is), and a ``StreamsConfigError``
    so that code catching what `KafkaStreams` used to raise for it keeps working (both
    subclass ``ValueError``)."""


class StreamsError(StreamsDslError, RuntimeError):
    """The streaming query failed; the cause is chained (``__cause__``)."""


class TopologyChangedError(StreamsConfigError):
    """`KafkaStreams.start` found that the topology's stateful part changed since its checkpoint
    was written (an added, removed or changed aggregation, or a re-keying before one): Spark
    cannot continue the old state. The message names each change and the fix
    (``streamsdsl reset --application-id ...`` or a new ``application.id``); ``changes`` lists
    them (`streamsdsl.runtime.fingerprint.Change`)."""

    def __init__(self, message: str, changes: list[Change]) -> None:
        super().__init__(message)
        self.changes = list(changes)
