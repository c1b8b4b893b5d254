"""``KTable.suppress``: `Suppressed` and its `BufferConfig` (Kafka Streams' ``Suppressed``,
KIP-328), validated when they are written.

``Suppressed.until_window_closes(Suppressed.BufferConfig.unbounded())`` keeps back every update
of a windowed table and forwards one final result per window once stream time reaches the
window's end plus its grace period. ``Suppressed.until_time_limit`` can be written (and is
validated) but is not implemented yet: ``KTable.suppress`` rejects it with an
`OperationNotDefinedError`. Only the unbounded buffer exists; bounded buffers (``max_records``,
``max_bytes``) are not implemented.

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
from streamsdsl.errors import InvalidArgumentError, InvalidTypeError

__all__ = ["BufferConfig", "Suppressed"]


def _unbounded_only(inst: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value != "unbounded":
        raise InvalidArgumentError(
            f"Only an unbounded suppression buffer is implemented (got {value!r}): use BufferConfig.unbounded().")


@attrs.frozen
class BufferConfig:
    """How much a suppression buffer may hold. Only `unbounded` is implemented: the buffer holds
    every key's pending update (Kafka's ``BufferConfig.unbounded()``)."""

    kind: str = attrs.field(default="unbounded", validator=_unbounded_only)

    @classmethod
    def unbounded(cls) -> BufferConfig:
        """A buffer without a size limit (Kafka's ``StrictBufferConfig``: it never emits early)."""
        return cls("unbounded")


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
        (ms or ``timedelta``) past its first buffered update (not implemented yet: see
        `streamsdsl.dsl.suppress`)."""
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
