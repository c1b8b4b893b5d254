"""Helpers shared by the transcribed Kafka Streams tests."""

from __future__ import annotations

from typing import Any


def s(value: Any) -> str:
    """Java's string rendering of a value (``None`` is ``"null"``)."""
    return "null" if value is None else str(value)


def tostring_joiner(left: Any, right: Any) -> str:
    """Kafka's ``MockValueJoiner.TOSTRING_JOINER``: ``left + "+" + right``."""
    return f"{s(left)}+{s(right)}"
