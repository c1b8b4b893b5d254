"""``KTable.suppress``: `Suppressed` and its `BufferConfig` (Kafka Streams' ``Suppressed``,
KIP-328), validated when they are written.

``Suppressed.until_window_closes(Suppressed.BufferConfig.unbounded())`` keeps back every update
of a windowed table (time, session or sliding windows) and forwards one final result per window
once stream time reaches the window's end plus its grace period (plus the gap for sessions).
``Suppressed.until_time_limit(ms, Suppressed.BufferConfig.unbounded())`` keeps back each key's
updates of a table until stream time is ``ms`` past the first of them (on a streaming query:
until the watermark is, or an update of the key itself is). Only the unbounded buffer exists: Kafka bounds a
buffer (``max_records``, ``max_bytes``) over all the keys of the suppress node, evicting the
earliest buffered record when the bound is exceeded, while streamsdsl's suppress operators hold
each key apart, so `BufferConfig.max_records` and `BufferConfig.max_bytes` raise
`OperationNotDefinedError` naming the fix.

Examples
--------
>>> s = Suppressed.until_window_closes(Suppressed.BufferConfig.unbounded())
>>> s.mode, s.with_name("final-counts").name
('until_window_closes', 'final-counts')
>>> Suppressed.until_time_limit(-5, BufferConfig.unbounded())
Traceback (most recent call last):
...
streamsdsl.errors.InvalidArgumentError: 'time_to_wait_for_more_events' must be >= 0 ms (got -5). Use 0 to forward each update on the next record.
"""

from __future__ import annotations

from typing import Any, ClassVar

import attrs

from streamsdsl._validation import REQUIRED, instance_of, require_arguments, to_millis, validate_name
from streamsdsl.errors import InvalidArgumentError, InvalidTypeError, OperationNotDefinedError

__all__ = ["BufferConfig", "Suppressed"]


def _unbounded_only(inst: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value != "unbounded":
        raise InvalidArgumentError(
            f"Only an unbounded suppression buffer is implemented (got {value!r}): use BufferConfig.unbounded().")


def _bounded(limit: Any, arg: str, unit: str, method: str) -> BufferConfig:
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise InvalidArgumentError(
            f"'{arg}' must be an int >= 1 ({unit}; got {limit!r}). Use e.g. BufferConfig.{method}(1000), or "
            "BufferConfig.unbounded().")
    raise OperationNotDefinedError(
        f"BufferConfig.{method}({limit}) is not implemented: Kafka bounds a suppress node's buffer over all its keys "
        "(past the bound it evicts the update buffered earliest, of any key), while streamsdsl's suppress operators "
        "hold each key's buffer apart and cannot enforce that bound as Kafka does. Use BufferConfig.unbounded().")


@attrs.frozen
class BufferConfig:
    """How much a suppression buffer may hold. Only `unbounded` is implemented: the buffer holds
    every key's pending update (Kafka's ``BufferConfig.unbounded()``).

    Examples
    --------
    >>> BufferConfig.unbounded().shut_down_when_full() == BufferConfig.unbounded()
    True
    >>> BufferConfig.max_records(0)
    Traceback (most recent call last):
    ...
    streamsdsl.errors.InvalidArgumentError: 'record_limit' must be an int >= 1 (records; got 0). Use e.g. BufferConfig.max_records(1000), or BufferConfig.unbounded().
    """

    kind: str = attrs.field(default="unbounded", validator=_unbounded_only)

    @classmethod
    def unbounded(cls) -> BufferConfig:
        """A buffer without a size limit (Kafka's ``StrictBufferConfig``: it never emits early)."""
        return cls("unbounded")

    @classmethod
    def max_records(cls, record_limit: int) -> BufferConfig:
        """Kafka's ``BufferConfig.maxRecords``: validated, then not implemented (see the module docs)."""
        return _bounded(record_limit, "record_limit", "records", "max_records")

    @classmethod
    def max_bytes(cls, byte_limit: int) -> BufferConfig:
        """Kafka's ``BufferConfig.maxBytes``: validated, then not implemented (see the module docs)."""
        return _bounded(byte_limit, "byte_limit", "bytes", "max_bytes")

    def with_max_records(self, record_limit: int) -> BufferConfig:
        """Kafka's ``withMaxRecords``: as `max_records`."""
        return _bounded(record_limit, "record_limit", "records", "max_records")

    def with_max_bytes(self, byte_limit: int) -> BufferConfig:
        """Kafka's ``withMaxBytes``: as `max_bytes`."""
        return _bounded(byte_limit, "byte_limit", "bytes", "max_bytes")

    def shut_down_when_full(self) -> BufferConfig:
        """Kafka's ``shutDownWhenFull``: an unbounded buffer is never full, so it is this buffer."""
        return self

    def emit_early_when_full(self) -> BufferConfig:
        """Kafka's ``emitEarlyWhenFull``: an unbounded buffer is never full, so it is this buffer."""
        return self


def _mode(inst: Suppressed, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value not in ("until_window_closes", "until_time_limit"):
        raise InvalidArgumentError(
            f"'mode' must be 'until_window_closes' or 'until_time_limit' (got {value!r}); build a Suppressed with "
            "Suppressed.until_window_closes(...) or Suppressed.until_time_limit(...).")


def _time_limit(inst: Suppressed, attribute: attrs.Attribute[Any], value: Any) -> None:
    if inst.mode == "until_window_closes":
        if value is not None:
            raise InvalidArgumentError(
                f"until_window_closes takes no time limit (got {value!r}): the window's end and grace decide.")
        return
    if value is None or value < 0:
        raise InvalidArgumentError(
            f"'time_to_wait_for_more_events' must be >= 0 ms (got {value}). Use 0 to forward each update on the "
            "next record.")


def _optional_millis(value: Any) -> int | None:
    return None if value is None else to_millis(value, "time_to_wait_for_more_events")


@attrs.frozen
class Suppressed:
    """What ``KTable.suppress`` keeps back: `until_window_closes` (final results of a windowed
    table) or `until_time_limit`; ``name`` names the suppress processor (its buffer store is
    ``<name>-store``), else both are generated (``KTABLE-SUPPRESS-…``)."""

    mode: str = attrs.field(validator=_mode)
    buffer_config: BufferConfig = attrs.field(
        validator=instance_of(BufferConfig, hint="Use Suppressed.BufferConfig.unbounded()."))
    time_limit: int | None = attrs.field(default=None, converter=_optional_millis, validator=_time_limit)
    name: str | None = attrs.field(default=None, converter=lambda v: None if v is None else validate_name(v))

    #: Kafka's nested ``Suppressed.BufferConfig``.
    BufferConfig: ClassVar[type[BufferConfig]] = BufferConfig

    @classmethod
    def until_window_closes(cls, buffer_config: BufferConfig = REQUIRED) -> Suppressed:
        """One final result per window of a windowed table, forwarded once stream time reaches
        the window's end plus its grace period; tombstones are not forwarded."""
        require_arguments("until_window_closes", "until_window_closes(Suppressed.BufferConfig.unbounded())",
                          ("buffer_config", buffer_config, "buffer config"))
        return cls("until_window_closes", _buffer(buffer_config))

    @classmethod
    def until_time_limit(cls, time_to_wait_for_more_events: Any = REQUIRED,
                         buffer_config: BufferConfig = REQUIRED) -> Suppressed:
        """Forward a key's latest update once stream time is ``time_to_wait_for_more_events``
        (ms or ``timedelta``) past its first buffered update (tombstones included), on a table
        of plain keys, in the TopologyTestDriver (see `streamsdsl.dsl.suppress`)."""
        require_arguments("until_time_limit", "until_time_limit(1000, Suppressed.BufferConfig.unbounded())",
                          ("time_to_wait_for_more_events", time_to_wait_for_more_events, "duration"),
                          ("buffer_config", buffer_config, "buffer config"))
        return cls("until_time_limit", _buffer(buffer_config), time_to_wait_for_more_events)

    def with_name(self, name: str) -> Suppressed:
        """A copy that names the suppress processor ``name`` (and its store ``<name>-store``)."""
        return attrs.evolve(self, name=name)


def _buffer(value: Any) -> BufferConfig:
    if not isinstance(value, BufferConfig):
        raise InvalidTypeError(
            f"'buffer_config' must be a BufferConfig such as Suppressed.BufferConfig.unbounded() "
            f"(got {type(value).__name__}: {value!r}).")
    return value
