"""`Printed`: where and how ``KStream.print`` prints (Kafka Streams' ``Printed``), and the
action the print step runs (`PrintAction`, Kafka's ``PrintForeachAction``).

Each record is printed as ``[label]: key, value`` — ``None`` as ``null``, as Java's
``String.format`` renders it — or as ``[label]: <mapper(key, value)>`` with
`Printed.with_key_value_mapper`. The label is `Printed.with_label`'s, else the name of the
stream's node (Kafka's ``PrintedInternal.build(this.name)``).
"""

from __future__ import annotations

import os
import sys
from typing import Any, Callable

import attrs

from streamsdsl._validation import require_callable, validate_name
from streamsdsl.errors import InvalidArgumentError, InvalidTypeError

__all__ = ["PrintAction", "Printed"]

_MAPPER_SHAPE = "(key, value) -> str"


def _text(value: Any) -> str:
    """``value`` as Java's ``%s`` prints it: ``None`` as ``null``."""
    return "null" if value is None else str(value)


def _file_path(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, os.PathLike):
        value = os.fspath(value)
    if not isinstance(value, str):
        raise InvalidTypeError(f"'file_path' must be a str or a path (got {type(value).__name__}: {value!r}).")
    if not value.strip():
        raise InvalidArgumentError("'file_path' must not be blank: name the file to print to, e.g. "
                                   "Printed.to_file('/tmp/orders.txt').")
    return value


def _label(inst: Any, attribute: Any, value: Any) -> None:
    if value is not None and not isinstance(value, str):
        raise InvalidTypeError(f"'label' must be a str (got {type(value).__name__}: {value!r}).")


def _mapper(inst: Any, attribute: Any, value: Any) -> None:
    if value is not None:
        require_callable(value, "mapper", _MAPPER_SHAPE, check_arity=True)


@attrs.frozen
class PrintAction:
    """What a print step calls for each record: one line ``[label]: ...`` to standard output
    (flushed at once) or appended to ``file_path`` (the file opened and closed per line, on the
    machine where the step runs)."""

    label: str
    file_path: str | None = None
    mapper: Callable[[Any, Any], Any] | None = attrs.field(default=None, eq=False)

    def line(self, key: Any, value: Any) -> str:
        """The printed line of a record.

        Examples
        --------
        >>> PrintAction("orders").line("o1", None)
        '[orders]: o1, null'
        >>> PrintAction("orders", mapper=lambda k, v: f"{k}={v}").line("o1", 3)
        '[orders]: o1=3'
        """
        text = f"{_text(key)}, {_text(value)}" if self.mapper is None else _text(self.mapper(key, value))
        return f"[{self.label}]: {text}"

    def __call__(self, key: Any, value: Any) -> None:
        line = self.line(key, value) + "\n"
        if self.file_path is None:
            sys.stdout.write(line)
            sys.stdout.flush()
            return
        with open(self.file_path, "a", encoding="utf-8") as out:
            out.write(line)


@attrs.frozen
class Printed:
    """Where ``KStream.print`` prints: `to_sys_out` or `to_file`, with an optional label
    (`with_label`), format (`with_key_value_mapper`) and processor name (`with_name`).
    Immutable: each ``with_*`` returns a new `Printed`; every argument is checked when given.

    Examples
    --------
    >>> Printed.to_sys_out().with_label("orders")
    Printed(file_path=None, label='orders', mapper=None, name=None)
    >>> Printed.to_file("")
    Traceback (most recent call last):
    ...
    streamsdsl.errors.InvalidArgumentError: 'file_path' must not be blank: name the file to print to, e.g. Printed.to_file('/tmp/orders.txt').
    """

    file_path: str | None = attrs.field(default=None, converter=_file_path)
    label: str | None = attrs.field(default=None, validator=_label)
    mapper: Callable[[Any, Any], Any] | None = attrs.field(default=None, eq=False, validator=_mapper)
    name: str | None = attrs.field(default=None, converter=lambda v: None if v is None else validate_name(v))

    @classmethod
    def to_sys_out(cls) -> Printed:
        """Print to standard output (on Spark: the standard output of the Python worker that
        runs the step; on a cluster it lands in the executors' logs)."""
        return cls()

    @classmethod
    def to_file(cls, file_path: str | os.PathLike[str]) -> Printed:
        """Append each line to ``file_path`` (on Spark: on the disk of the executor that runs
        the step). Unlike Kafka Streams, which truncates the file when ``Printed.toFile`` is
        called, the file is not truncated."""
        if file_path is None:
            raise InvalidTypeError("'file_path' must be a str or a path (got None).")
        return cls(file_path=file_path)

    def with_label(self, label: str) -> Printed:
        """Print ``[label]: ...`` (by default the label is the name of the printed stream's node)."""
        if label is None:
            raise InvalidTypeError("'label' must be a str (got None).")
        return attrs.evolve(self, label=label)

    def with_key_value_mapper(self, mapper: Callable[[Any, Any], Any]) -> Printed:
        """Print ``[label]: <mapper(key, value)>`` instead of ``[label]: key, value``."""
        if mapper is None:
            raise InvalidTypeError(f"'mapper' must be a callable of shape {_MAPPER_SHAPE} (got None).")
        return attrs.evolve(self, mapper=mapper)

    def with_name(self, name: str) -> Printed:
        """Name the print processor (by default ``KSTREAM-PRINTER-<n>``)."""
        return attrs.evolve(self, name=validate_name(name, "name"))

    def action(self, stream_name: str) -> PrintAction:
        """The action that prints for the stream of node ``stream_name`` (the default label)."""
        return PrintAction(self.label if self.label is not None else stream_name, self.file_path, self.mapper)
