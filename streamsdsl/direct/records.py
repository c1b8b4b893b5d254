"""What travels between the direct engine's steps, and how each step holds keys and values.

The Spark plan holds a node's key and value in the column encoding of a serde (`Typed`, what
the compiler's ``Frame`` says); wherever the plan encodes a value (a mapper's result, an
aggregate, a re-keyed record), the direct engine passes it through the same encoding
(`hold`), so a user function sees exactly the value it sees on Spark (a tuple returned by a
mapper comes back as a list from JSON) and a value the encoding cannot hold fails in both.
"""

from __future__ import annotations

import json
from typing import Any, Callable, Protocol

import attrs

from streamsdsl.operators.codecs import KeyCodec
from streamsdsl.values.serdes import JSON_MAX_DEPTH, BytesSerde, CustomSerde, FixedWidthSerde, JsonSerde, PlanSerde, StringSerde
from streamsdsl.errors import RecordError, UserFunctionError
from streamsdsl.operators.functions import result_error as record_result_error

__all__ = ["Headers", "Host", "Record", "Typed", "hold", "invalid_reason", "result_error", "user_error"]

Headers = tuple[tuple[str, "bytes | None"], ...]


@attrs.frozen
class Record:
    """One record between two steps: key and value as Python values, timestamp (ms), headers.

    ``tombstone``: on a table's records channel after a stateless table step, whether the table
    source's value was a tombstone (a ``map_values`` can make ``None`` of a value); ``None``:
    ``value is None`` says it."""

    key: Any
    value: Any
    timestamp: int
    headers: Headers = ()
    tombstone: bool | None = None


@attrs.frozen
class Typed:
    """How a node's records are held: the key's layout and serde, the value's serde, whether the
    stream is a table's changelog."""

    key: KeyCodec
    value: PlanSerde
    is_table: bool = False


class Host(Protocol):
    """What a step needs from the engine that runs it (`streamsdsl.direct.engine.Run`): the
    topology and its settings, the record being processed, the metrics, the output."""

    topology: Any
    handler: Any
    flush: Any
    steps: dict[str, Any]
    #: The sink steps so far (a sink's index among them names its output).
    sinks: list[Any]
    #: The record being processed: its pipe position, (topic, partition, offset) and timestamp.
    position: int
    coordinates: tuple[str, int, int]
    timestamp: int
    dropped: int
    finals: list[int]
    #: The processors' context: the application id, the task's stream time and the system time.
    application_id: str
    stream_time: int
    system_time: int

    def emit(self, topic: str | None, key: bytes | None, value: bytes | None, timestamp: int,
             headers: Headers) -> None: ...

    def dead_letter(self, key: bytes | None, value: bytes | None, timestamp: int, headers: Headers) -> None: ...

    def keeps_records(self, name: str) -> bool: ...


def hold(serde: PlanSerde, value: Any) -> Any:
    """``value`` as it comes back out of ``serde``'s column encoding (raises what encoding raises)."""
    if value is None:
        return None
    return serde.from_internal(serde.to_internal(value))


def result_error(processor: str, function: str, exc: BaseException, key: Any, position: int) -> RecordError:
    """A user function's result that its serde cannot hold (as the Spark processors say it)."""
    return record_result_error(processor, function, exc, repr(key), position)


def user_error(processor: str, function: str, exc: BaseException, key: Any, position: int) -> UserFunctionError:
    """The one error of a user function that raised while a record was processed."""
    return UserFunctionError.of(processor, function, exc, key, position)


def call_user(processor: str, function: str, key: Any, position: int, fn: Callable[..., Any], *args: Any) -> Any:
    """``fn(*args)``; an exception becomes the `UserFunctionError` naming processor, function and record."""
    try:
        return fn(*args)
    except RecordError:
        raise
    except Exception as exc:  # noqa: BLE001 - re-raised with the processor and the record
        raise user_error(processor, function, exc, key, position) from exc


def _not_json(word: str) -> None:
    raise ValueError(f"{word} is not JSON (RFC 8259)")


def _nested_too_deeply(data: bytes, parsed: Any) -> bool:
    """More than `JSON_MAX_DEPTH` arrays and objects inside one another in ``parsed`` (walked
    only when its bytes ``data`` hold that many brackets at all)."""
    if data.count(b"[") + data.count(b"{") <= JSON_MAX_DEPTH:
        return False
    stack = [(parsed, 1)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, (list, dict)):
            if depth > JSON_MAX_DEPTH:
                return True
            stack.extend((child, depth + 1) for child in (value.values() if isinstance(value, dict) else value))
    return False


def invalid_reason(serde: PlanSerde, data: bytes) -> str | None:
    """Why ``serde`` cannot read ``data`` (``None``: it can), in the words the Spark plan's
    validation uses (`streamsdsl.compiler.serde_exprs`)."""
    if isinstance(serde, (BytesSerde, StringSerde)):  # any bytes (a String reads them with U+FFFD)
        return None
    if isinstance(serde, FixedWidthSerde):
        return None if len(data) == serde.width else f"expected {serde.width} bytes, got {len(data)}"
    if isinstance(serde, JsonSerde):
        try:
            parsed = json.loads(data.decode("utf-8"), parse_constant=_not_json)
        except (ValueError, RecursionError):
            return "not valid UTF-8 JSON"
        return "not valid UTF-8 JSON" if _nested_too_deeply(data, parsed) else None
    if isinstance(serde, CustomSerde):
        try:
            serde.inner.deserialize(data)
        except Exception as exc:  # noqa: BLE001 - any failure of user code is the reason
            return f"{type(exc).__name__}: {exc}"
        return None
    try:
        serde.deserialize(data)
    except Exception as exc:  # noqa: BLE001 - a serde of another kind: its own words
        return str(exc)
    return None
