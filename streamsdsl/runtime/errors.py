"""Errors of a running `KafkaStreams` application.

A configuration error is a `streamsdsl.runtime.config.StreamsConfigError`. Each error
subclasses `streamsdsl.errors.StreamsDslError` and `RuntimeError`.
"""

from __future__ import annotations

from streamsdsl.errors import StreamsDslError

__all__ = ["IllegalStateError", "MissingTopicError", "StreamsError"]


class IllegalStateError(StreamsDslError, RuntimeError):
    """A `KafkaStreams` method was called in a state that does not allow it."""


class MissingTopicError(StreamsDslError, RuntimeError):
    """A topic the topology reads or writes does not exist on the broker."""


class StreamsError(StreamsDslError, RuntimeError):
    """The streaming query failed; the cause is chained (``__cause__``)."""
