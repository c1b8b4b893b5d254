"""Built-in joiners: ``Joiners.pair()``, ``left()``, ``right()`` and ``merge()``.

They are ordinary ``(value, other_value)`` joiners (Kafka's ``ValueJoiner``), so they run
anywhere a joiner runs, and the compiler recognises them: on the JVM operator a join with a
built-in joiner makes its values as Spark columns, with no Python at all (see the *Joins* docs
page, "Built-in joiners").

- ``pair()``: both values as a two-element list ``[value, other_value]`` (a JSON array with the
  default serde), what Kafka users write as ``(v1, v2) -> KeyValue.pair(v1, v2)``;
- ``left()`` / ``right()``: the stream's (left) value or the other side's value;
- ``merge()``: two JSON objects merged, the other side's fields over this side's (a missing side,
  ``None``, gives the other one unchanged), what an enrichment usually writes by hand.

Examples
--------
>>> Joiners.pair()({"id": 1}, "Ann"), Joiners.left()(1, 2), Joiners.right()(1, 2)
([{'id': 1}, 'Ann'], 1, 2)
>>> Joiners.merge()({"id": 1, "name": "?"}, {"name": "Ann"}), Joiners.merge()({"id": 1}, None)
({'id': 1, 'name': 'Ann'}, {'id': 1})
>>> Joiners.merge()({"id": 1}, [2])
Traceback (most recent call last):
...
streamsdsl.errors.InvalidTypeError: Joiners.merge() joins two JSON objects (dicts); the other value is a list...
"""

from __future__ import annotations

from typing import Any

import attrs

from streamsdsl.errors import InvalidArgumentError, InvalidTypeError

__all__ = ["BuiltinJoiner", "Joiners"]

_OPS = ("pair", "left", "right", "merge")


def _op(inst: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value not in _OPS:
        raise InvalidArgumentError(f"'op' must be one of {', '.join(_OPS)} (got {value!r}).")


@attrs.frozen
class BuiltinJoiner:
    """A built-in joiner of two values (``Joiners.<op>()``): callable as any joiner, and known to
    the compiler by ``op``."""

    op: str = attrs.field(validator=_op)

    @property
    def name(self) -> str:
        return f"Joiners.{self.op}()"

    def __call__(self, value: Any, other: Any) -> Any:
        if self.op == "pair":
            return [value, other]
        if self.op == "left":
            return value
        if self.op == "right":
            return other
        for side, v in (("this", value), ("the other", other)):
            if v is not None and not isinstance(v, dict):
                raise InvalidTypeError(
                    f"Joiners.merge() joins two JSON objects (dicts); {side} value is a {type(v).__name__}. "
                    "Use Joiners.pair() to keep both values, or a joiner of your own.")
        if value is None:
            return other
        if other is None:
            return value
        return {**value, **other}

    def __repr__(self) -> str:
        return self.name


class Joiners:
    """The built-in joiners (see the module)."""

    def __init__(self) -> None:
        raise TypeError("Joiners is a namespace: call Joiners.pair(), Joiners.left(), Joiners.right() or "
                        "Joiners.merge().")

    @staticmethod
    def pair() -> BuiltinJoiner:
        """``[value, other_value]``: both values, as a two-element list."""
        return BuiltinJoiner("pair")

    @staticmethod
    def left() -> BuiltinJoiner:
        """The value of the stream (or table) the join was called on."""
        return BuiltinJoiner("left")

    @staticmethod
    def right() -> BuiltinJoiner:
        """The other side's value (``None`` where a left or outer join found none)."""
        return BuiltinJoiner("right")

    @staticmethod
    def merge() -> BuiltinJoiner:
        """Two JSON objects merged: the other side's fields over this side's; a ``None`` side gives
        the other unchanged."""
        return BuiltinJoiner("merge")
