"""Exceptions raised by streamsdsl.

Every exception subclasses `StreamsDslError` and the matching builtin, so callers may
catch either ``streamsdsl.errors.StreamsDslError`` or ``ValueError`` / ``TypeError``. A failure
while a record is processed is a `RecordError` (`UserFunctionError` when a user function
raised) naming the processor, the record and the cause, in the test driver and in
`KafkaStreams` alike.
"""

from __future__ import annotations

import base64
import json
import re
from typing import TYPE_CHECKING, Any


class StreamsDslError(Exception):
    """Base class of every error raised by streamsdsl."""


class InvalidArgumentError(StreamsDslError, ValueError):
    """An argument has a value the DSL cannot accept (raised when the DSL call is written)."""


class InvalidTypeError(StreamsDslError, TypeError):
    """An argument has a type the DSL cannot accept (raised when the DSL call is written)."""


class TopologyError(StreamsDslError, ValueError):
    """The topology as a whole is invalid (for example a topic consumed twice)."""


class StageMethodError(StreamsDslError, AttributeError):
    """A DSL stage was asked for a method that only another stage has (raised when the DSL call
    is written); the message names the stage that has it.
    """


class OperationNotDefinedError(StreamsDslError, NotImplementedError):
    """The compiler has no lowering rule for an IR node type."""


class NotYetImplementedError(OperationNotDefinedError, AttributeError):
    """A Kafka Streams method streamsdsl does not have yet (`NOT_YET`): the message names the
    row of ``docs/differences.md``'s "Not yet implemented" table that says what to use instead.
    It is an ``AttributeError`` too, so ``hasattr`` stays ``False``."""


#: Kafka Streams' methods that do not exist here yet, per class (snake_case, as they would be
#: named): the row of the "Not yet implemented" table of ``docs/differences.md`` (its first
#: column's beginning) that lists each. One table, read by every class's ``__getattr__``
#: (`not_yet`); ``tests/test_docs_status.py`` checks it against the page.
NOT_YET: dict[str, dict[str, str]] = {
    "KStream": {
        "transform": "Processor API",
        "transform_values": "Processor API",
        "flat_transform": "Processor API",
        "flat_transform_values": "Processor API",
    },
    "StreamsBuilder": {
        "add_global_store": "Processor API",
    },
    "Topology": {
        "add_processor": "Processor API",
        "add_state_store": "Processor API",
    },
    "KafkaStreams": {
        "query": "IQv2",
    },
}
DIFFERENCES_PAGE = "docs/differences.md"

#: What a user who asked for a not-yet method most likely wanted, where streamsdsl has it under
#: another name: a PySpark user's ``query`` is Spark's `StreamingQuery`.
NOT_YET_INSTEAD: dict[tuple[str, str], str] = {
    ("KafkaStreams", "query"): "Spark's StreamingQuery is KafkaStreams.streaming_query (None before start()).",
}


def not_yet(owner: str, name: str) -> NotYetImplementedError | None:
    """The error for ``owner.name`` when it is a Kafka Streams method not implemented yet
    (`NOT_YET`), else ``None``.

    Examples
    --------
    >>> print(not_yet("KStream", "transform"))
    KStream.transform() is not implemented yet: see docs/differences.md, "Not yet implemented", the row Processor API.
    >>> not_yet("KStream", "map") is None
    True
    """
    row = NOT_YET.get(owner, {}).get(name)
    if row is None:
        return None
    instead = NOT_YET_INSTEAD.get((owner, name))
    return NotYetImplementedError(f"{owner}.{name}() is not implemented yet: see {DIFFERENCES_PAGE}, "
                                  f"\"Not yet implemented\", the row {row.strip('`')}."
                                  + (f" {instead}" if instead else ""))


class NotYetAttributes:
    """Mixin of the classes `NOT_YET` lists: a Kafka Streams method not here yet raises
    `NotYetImplementedError` naming its row; any other missing attribute keeps Python's
    ``AttributeError``."""

    __slots__ = ()

    if not TYPE_CHECKING:  # type checkers keep reporting a missing method as an error

        def __getattr__(self, name: str) -> Any:
            error = not_yet(type(self).__name__, name)
            if error is not None:
                raise error
            raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'", name=name, obj=self)


class ProcessorStateError(StreamsDslError, RuntimeError):
    """A processor used its context in a way Kafka Streams refuses (a store it is not connected
    to, a forward with a changed key from a ``FixedKeyProcessor``, a child it does not have)."""


class SerializationError(StreamsDslError, ValueError):
    """A serde could not turn bytes into a value or a value into bytes."""


#: Marks the structured part of a record failure's message: Spark hands a Python worker's
#: exception to the driver as text, from which the runner rebuilds the `RecordError`.
_PAYLOAD = re.compile(r"\[streamsdsl-error\](.*?)\[/streamsdsl-error\]", re.S)


#: What a source record's deserialization error adds after its reason: the fix, and how to skip
#: such records instead (the same words in every engine).
DESERIALIZATION_HINT = (
    ". Fix the producer or consume the topic with a matching serde (Consumed.with_serdes), or skip such records "
    "with default.deserialization.exception.handler=log_and_continue (errors.dead.letter.topic keeps them)"
)
#: The reason a JSON serde gives for bytes it cannot read.
NOT_JSON = "not valid UTF-8 JSON"


def json_error_at(data: bytes) -> str:
    """Where and why ``data`` is not the JSON a JSON serde reads, for the error of a malformed
    record (`NOT_JSON` is the reason; this says where).

    Examples
    --------
    >>> json_error_at(b'{"a": 1 "b": 2}')
    "Expecting ',' delimiter at byte 8 (line 1, column 9)"
    >>> json_error_at(bytes([91, 34, 0xC3, 0xA9, 34, 44, 32, 0xFF, 93]))
    'invalid UTF-8 at byte 7'
    >>> json_error_at(b'')
    'Expecting value at byte 0 (line 1, column 1)'
    """
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return f"invalid UTF-8 at byte {exc.start}"

    def constant(word: str) -> None:
        raise ValueError(f"{word} is not JSON (RFC 8259)")

    try:
        json.loads(text, parse_constant=constant)
    except json.JSONDecodeError as exc:
        at = len(text[: exc.pos].encode("utf-8"))
        return f"{exc.msg} at byte {at} (line {exc.lineno}, column {exc.colno})"
    except RecursionError:
        return "nested too deeply"
    except ValueError as exc:
        return str(exc)
    return "nested too deeply (more than 500 arrays and objects inside one another)"


def with_json_position(cause: str, data: bytes, complete: bool = True) -> str:
    """``cause`` with `json_error_at` after its `NOT_JSON` reason (unchanged without that reason,
    or when ``data`` is a truncated prefix whose error lies at its end)."""
    if NOT_JSON not in cause:
        return cause
    where = json_error_at(data)
    if not complete and ("Unterminated" in where or "Expecting" in where and f"at byte {len(data)}" in where):
        return cause
    return cause.replace(NOT_JSON, f"{NOT_JSON}: {where}", 1)


class RecordError(StreamsDslError, RuntimeError):
    """Processing one record failed. The message (one line) names the processor (its Kafka
    Streams name), the record and the cause; the Spark error, if any, is ``__cause__``.

    Attributes: ``processor``, ``cause`` (e.g. ``"ZeroDivisionError: division by zero"``),
    ``function`` (the user function that raised, if one did), ``key`` (the record key's
    ``repr``), ``position`` (the record's source position in the plan) and, once the runner has
    resolved them, ``topic``, ``partition`` and ``offset``; for a punctuator's failure
    ``punctuation`` says which punctuation it was instead of a record (`PunctuationError`).
    """

    def __init__(self, processor: str, cause: str, *, function: str | None = None, key: str | None = None,
                 position: int | None = None, topic: str | None = None, partition: int | None = None,
                 offset: int | None = None, punctuation: str | None = None) -> None:
        self.processor, self.cause, self.function, self.key = processor, cause, function, key
        self.position, self.topic, self.partition, self.offset = position, topic, partition, offset
        self.punctuation = punctuation
        super().__init__(self.headline())

    def headline(self) -> str:
        what = f"the {self.function} raised " if self.function else ""
        if self.punctuation is not None:
            return f"{self.processor}: {what}{self.cause} ({self.punctuation})"
        where = (f"topic {self.topic} partition {self.partition} offset {self.offset}" if self.topic is not None
                 else f"position {self.position}" if self.position is not None else "an unknown position")
        key = f", key {self.key}" if self.key is not None else ""
        return f"{self.processor}: {what}{self.cause} (record at {where}{key})"

    def in_worker(self) -> RecordFailure:
        """The exception to raise inside a Spark worker: its text carries this error."""
        payload = json.dumps({"kind": type(self).__name__, "processor": self.processor, "cause": self.cause,
                              "function": self.function, "key": self.key, "position": self.position,
                              "punctuation": self.punctuation})
        return RecordFailure(f"{self.headline()} [streamsdsl-error]{payload}[/streamsdsl-error]")

    def located(self, topic: str, partition: int, offset: int) -> RecordError:
        """The same error with the record's coordinates (a punctuation's error has none: itself)."""
        if self.punctuation is not None:
            return self
        return type(self)(self.processor, self.cause, function=self.function, key=self.key,
                          position=self.position, topic=topic, partition=partition, offset=offset)

    @staticmethod
    def find(error: BaseException) -> RecordError | None:
        """The record error carried by ``error`` (a Spark error wrapping a worker's), if any.

        Only a payload that is a JSON object counts: a failed query's message also shows its
        plan, where the markers appear around the expression that builds the payload.
        """
        for match in _PAYLOAD.finditer(str(error)):
            try:
                data = json.loads(match.group(1))
            except ValueError:
                continue
            if isinstance(data, dict) and "kind" in data:
                break
        else:
            return None
        raw, raw_length = data.pop("data_b64", None), data.pop("data_length", None)
        if raw is not None:  # a malformed source record's first bytes: say where it breaks
            prefix = base64.b64decode(raw)
            data["cause"] = with_json_position(data["cause"], prefix, raw_length is None or raw_length == len(prefix))
        kinds = (RecordError, UserFunctionError, RecordDeserializationError, RecordSerializationError, PunctuationError)
        cls = {c.__name__: c for c in kinds}.get(data.pop("kind"), RecordError)
        key_json = data.pop("key_json", None)
        if key_json is not None:  # a key rendered by Spark (to_json of a one-element array)
            try:
                data["key"] = repr(json.loads(key_json)[0])
            except (ValueError, IndexError, TypeError):
                data["key"] = key_json
        return cls(data.pop("processor"), data.pop("cause"), **data)


class UserFunctionError(RecordError):
    """A user function (a mapper, a predicate, an aggregator, ...) raised while processing a record."""

    @classmethod
    def of(cls, processor: str, function: str, exc: BaseException, key: object, position: int | None) -> UserFunctionError:
        """The error of ``function`` of ``processor`` raising ``exc`` for the record at ``position``
        with ``key``: every engine and operator reports a user function's failure through this.
        The cause is the exception's type and text (a streamsdsl error's own message alone)."""
        cause = str(exc) if isinstance(exc, StreamsDslError) else f"{type(exc).__name__}: {exc}"
        return cls(processor, cause, function=function, key=repr(key), position=position)


class PunctuationError(UserFunctionError):
    """A processor's punctuator raised: the message names the processor, the punctuation (its
    type and time) and the cause."""

    @classmethod
    def of_punctuation(cls, processor: str, kind: str, time_ms: int, exc: BaseException) -> PunctuationError:
        """The error of the ``kind`` (``"stream-time"`` / ``"wall-clock-time"``) punctuator of
        ``processor`` raising ``exc`` when it fired at ``time_ms``."""
        cause = str(exc) if isinstance(exc, StreamsDslError) else f"{type(exc).__name__}: {exc}"
        return cls(processor, cause, function="punctuator", punctuation=f"{kind} punctuation at {time_ms} ms")


class RecordDeserializationError(RecordError, SerializationError):
    """A source record's key or value could not be deserialized with the source's serde (Kafka
    Streams' ``log_and_fail`` handler; ``log_and_continue`` skips and counts the record)."""


class RecordSerializationError(RecordError, SerializationError):
    """A sink could not serialize a record's key or value with its serde (the value does not
    have the type the serde writes)."""


class RecordFailure(StreamsDslError, RuntimeError):
    """How a `RecordError` travels from a Spark worker to the runner (see `RecordError.find`)."""
