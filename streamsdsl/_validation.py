"""Argument validation shared by the API, the windows and the IR (pure Python)."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any, Callable

from streamsdsl.errors import InvalidArgumentError, InvalidTypeError

#: Kafka Streams' legal characters for user-provided processor, store and topic names.
_NAME_RE = re.compile(r"^[A-Za-z0-9._-]+$")
MAX_NAME_LENGTH = 249

Duration = int | timedelta


def to_millis(value: Any, arg: str, hint: str = "") -> int:
    """Convert an ``int`` (milliseconds) or ``timedelta`` to whole milliseconds.

    Raises
    ------
    InvalidTypeError
        If ``value`` is neither an ``int`` nor a ``timedelta`` (``bool`` is rejected too).
    """
    if isinstance(value, bool) or not isinstance(value, (int, timedelta)):
        raise InvalidTypeError(
            f"'{arg}' must be an int (milliseconds) or a datetime.timedelta "
            f"(got {type(value).__name__}: {value!r}).{(' ' + hint) if hint else ''}"
        )
    if isinstance(value, timedelta):
        micros = (value.days * 86_400 + value.seconds) * 1_000_000 + value.microseconds
        if micros % 1000:
            raise InvalidArgumentError(
                f"'{arg}' must be a whole number of milliseconds (got {value!r}). "
                "Round the timedelta to milliseconds."
            )
        return micros // 1000
    return int(value)


def validate_name(value: Any, arg: str = "name") -> str:
    """Validate a user-provided processor/store name as Kafka Streams does."""
    if not isinstance(value, str):
        raise InvalidTypeError(f"'{arg}' must be a str (got {type(value).__name__}: {value!r}).")
    if not value:
        raise InvalidArgumentError(f"'{arg}' must not be empty. Pass a name such as 'orders-count'.")
    if len(value) > MAX_NAME_LENGTH:
        raise InvalidArgumentError(
            f"'{arg}' is {len(value)} characters long; the limit is {MAX_NAME_LENGTH} characters."
        )
    if not _NAME_RE.match(value):
        raise InvalidArgumentError(
            f"'{arg}' {value!r} contains an illegal character; "
            "legal characters are ASCII letters, digits, '.', '_' and '-'."
        )
    return value


def validate_topic(value: Any, arg: str = "topic") -> str:
    """Validate a Kafka topic name (same rule as processor names, '.' and '..' excluded)."""
    name = validate_name(value, arg)
    if name in (".", ".."):
        raise InvalidArgumentError(f"'{arg}' cannot be '.' or '..'.")
    return name


def is_spark_column(value: Any) -> bool:
    """True if ``value`` is a pyspark ``Column`` (checked without importing pyspark)."""
    t = type(value)
    return t.__name__ == "Column" and t.__module__.startswith("pyspark.")


def require_callable(value: Any, arg: str, shape: str, *, column_ok: bool = False) -> None:
    """Raise a clear error unless ``value`` is callable (or a Spark Column when allowed)."""
    if is_spark_column(value):
        if column_ok:
            return
        raise InvalidTypeError(
            f"'{arg}' does not accept a pyspark Column here; pass a Python callable of shape {shape}."
        )
    if not callable(value):
        allowed = "a callable or a pyspark Column" if column_ok else "a callable"
        raise InvalidTypeError(
            f"'{arg}' must be {allowed} of shape {shape} (got {type(value).__name__}: {value!r})."
        )


def fn_name(fn: Callable[..., Any] | Any) -> str:
    """A short, stable label for a user function or Column (used by repr only)."""
    if is_spark_column(fn):
        return f"Column<{fn}>"
    return getattr(fn, "__qualname__", None) or type(fn).__name__
