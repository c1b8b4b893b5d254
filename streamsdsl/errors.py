"""Exceptions raised by streamsdsl.

Every exception subclasses `StreamsDslError` and the matching builtin, so callers may
catch either ``streamsdsl.errors.StreamsDslError`` or ``ValueError`` / ``TypeError``.
"""

from __future__ import annotations


class StreamsDslError(Exception):
    """Base class of every error raised by streamsdsl."""


class InvalidArgumentError(StreamsDslError, ValueError):
    """An argument has a value the DSL cannot accept (raised when the DSL call is written)."""


class InvalidTypeError(StreamsDslError, TypeError):
    """An argument has a type the DSL cannot accept (raised when the DSL call is written)."""


class TopologyError(StreamsDslError, ValueError):
    """The topology as a whole is invalid (for example a topic consumed twice)."""


class OperationNotDefinedError(StreamsDslError, NotImplementedError):
    """The compiler has no lowering rule for an IR node type."""


class SerializationError(StreamsDslError, ValueError):
    """A serde could not turn bytes into a value or a value into bytes."""
