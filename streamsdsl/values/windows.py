"""Window specifications, emit strategies and windowed keys (pure Python, mirrors Kafka Streams).

Every value here is valid by construction: the fields carry attrs converters (durations are an
``int`` of milliseconds or a ``timedelta``, stored as int ms) and validators, so
``SessionWindows(-5)`` fails exactly as ``SessionWindows.with_gap(-5)`` does. The classmethods
are the friendly, Kafka-Streams-named spelling of the same constructors.
"""

from __future__ import annotations

import enum
from typing import Any, ClassVar

import attrs

from streamsdsl._validation import Duration, duration_field, epoch_millis, instance_of, is_epoch_millis, millis
from streamsdsl.errors import InvalidArgumentError
from streamsdsl.semantics.timewindow import window_starts

__all__ = [
    "EmitStrategy", "EmitStrategyKind", "SessionWindow", "SessionWindows", "SlidingWindows", "TimeWindow",
    "TimeWindows", "Window", "Windowed",
]


def _end_not_before_start(inst: Window, attribute: attrs.Attribute[Any], value: int) -> None:
    epoch_millis(value, "end")
    if value < inst.start:
        raise InvalidArgumentError(
            f"'end' must be >= 'start' ({inst.start} ms) (got {value}). A window [start, end] "
            "cannot end before it starts."
        )


@attrs.frozen(order=True)
class Window:
    """A window ``[start, end]`` in epoch milliseconds (inclusiveness depends on the kind).

    ``0 <= start <= end`` always holds (Kafka Streams' ``Window`` rule).

    Examples
    --------
    >>> TimeWindow(0, 10)
    TimeWindow(start=0, end=10)
    >>> SessionWindow(5, 3)
    Traceback (most recent call last):
    ...
    streamsdsl.errors.InvalidArgumentError: 'end' must be >= 'start' (5 ms) (got 3). A window [start, end] cannot end before it starts.
    """

    start: int = attrs.field(validator=is_epoch_millis)
    end: int = attrs.field(validator=_end_not_before_start)


@attrs.frozen(order=True)
class SessionWindow(Window):
    """A session window: both ``start`` and ``end`` are inclusive (KIP-94)."""


@attrs.frozen(order=True)
class TimeWindow(Window):
    """A time window: ``start`` inclusive, ``end`` exclusive (both inclusive for sliding windows)."""


@attrs.frozen(order=True)
class Windowed:
    """The key of a windowed table: the record key and its window."""

    key: Any
    window: Window = attrs.field(validator=instance_of(Window))

    def __str__(self) -> str:
        return f"[{self.key}@{self.window.start}/{self.window.end}]"


_GRACE_FIX = "Use 0 to accept no late records."


def _grace_field() -> Any:
    return duration_field("grace", positive=False, fix=_GRACE_FIX, default=0)


@attrs.frozen
class SessionWindows:
    """Session windows (KIP-94): a session per key grows while records arrive within ``gap``.

    A session ``[start, end]`` (both inclusive) absorbs every record whose timestamp lies within
    ``inactivity_gap_ms`` of it; a record that falls between two sessions merges them. A session
    is closed once stream time passes ``end + gap + grace``.

    Examples
    --------
    >>> from datetime import timedelta
    >>> w = SessionWindows.of_inactivity_gap_and_grace(timedelta(seconds=5), 1000)
    >>> (w.inactivity_gap_ms, w.grace_period_ms)
    (5000, 1000)
    >>> SessionWindows.with_gap(10).grace(3).grace_period_ms
    3
    >>> SessionWindows(0)
    Traceback (most recent call last):
    ...
    streamsdsl.errors.InvalidArgumentError: 'gap' must be > 0 ms (got 0). Sessions close after an inactivity gap; use e.g. SessionWindows.of_inactivity_gap_with_no_grace(timedelta(minutes=5)).
    """

    inactivity_gap_ms: int = duration_field(
        "gap",
        positive=True,
        fix="Sessions close after an inactivity gap; "
        "use e.g. SessionWindows.of_inactivity_gap_with_no_grace(timedelta(minutes=5)).",
    )
    grace_period_ms: int = _grace_field()

    @classmethod
    def with_gap(cls, gap: Duration) -> SessionWindows:
        """Sessions with inactivity gap ``gap`` (ms or ``timedelta``) and no grace period."""
        return cls(gap)

    @classmethod
    def of_inactivity_gap_with_no_grace(cls, gap: Duration) -> SessionWindows:
        """Sessions with inactivity gap ``gap`` and grace 0 (Kafka Streams' ``ofInactivityGapWithNoGrace``)."""
        return cls(gap)

    @classmethod
    def of_inactivity_gap_and_grace(cls, gap: Duration, grace: Duration) -> SessionWindows:
        """Sessions with inactivity gap ``gap`` and a grace period ``grace`` for late records."""
        return cls(gap, grace)

    def grace(self, grace: Duration) -> SessionWindows:
        """A copy of these windows with grace period ``grace`` (ms or ``timedelta``)."""
        return attrs.evolve(self, grace_period_ms=grace)

    def __repr__(self) -> str:
        return f"SessionWindows(gap={self.inactivity_gap_ms}ms, grace={self.grace_period_ms}ms)"


class EmitStrategyKind(enum.Enum):
    """The two emit strategies of KIP-825 (``EmitStrategy.Kind`` is the same enum)."""

    ON_WINDOW_UPDATE = "on_window_update"
    ON_WINDOW_CLOSE = "on_window_close"


def _idle_close_fits(inst: EmitStrategy, attribute: attrs.Attribute[Any], value: int | None) -> None:
    if value is None:
        return
    if value <= 0:
        raise InvalidArgumentError(
            f"'idle_close' must be > 0 ms (got {value}). Use e.g. "
            "EmitStrategy.on_window_close(idle_close=timedelta(minutes=5)), or leave it out to keep Kafka's close."
        )
    if inst.kind is not EmitStrategyKind.ON_WINDOW_CLOSE:
        raise InvalidArgumentError(
            f"'idle_close' ({value} ms) applies only to EmitStrategy.on_window_close(): a window emitted on "
            "update has nothing to close. Use EmitStrategy.on_window_close(idle_close=...)."
        )


def _optional_millis(value: Any) -> int | None:
    return None if value is None else millis("idle_close")(value)


@attrs.frozen
class EmitStrategy:
    """When a windowed aggregation forwards results (KIP-825).

    ``on_window_update()`` (the default) forwards every change of a window, with tombstones for
    sessions merged away; ``on_window_close()`` forwards each window exactly once, when it closes.
    ``on_window_close(idle_close=...)`` (streamsdsl's own, docs/session-windows.md, *Idle windows*) also
    closes every open window of the aggregation once no record has reached it for that long on
    the wall clock (``idle_close_ms``; ``None``: Kafka's close alone, unless the
    application's ``streamsdsl.window.idle.close.ms`` sets it).

    Examples
    --------
    >>> from datetime import timedelta
    >>> EmitStrategy.on_window_close()
    EmitStrategy.on_window_close()
    >>> EmitStrategy.on_window_close(idle_close=timedelta(minutes=1))
    EmitStrategy.on_window_close(idle_close=60000ms)
    >>> EmitStrategy(EmitStrategy.Kind.ON_WINDOW_CLOSE).emits_on_close
    True
    >>> EmitStrategy.on_window_close(idle_close=0)
    Traceback (most recent call last):
    ...
    streamsdsl.errors.InvalidArgumentError: 'idle_close' must be > 0 ms (got 0). Use e.g. EmitStrategy.on_window_close(idle_close=timedelta(minutes=5)), or leave it out to keep Kafka's close.
    """

    Kind: ClassVar[type[EmitStrategyKind]] = EmitStrategyKind

    kind: EmitStrategyKind = attrs.field(
        validator=instance_of(
            EmitStrategyKind, hint="Use EmitStrategy.on_window_update() or EmitStrategy.on_window_close()."
        )
    )
    #: Close a key's open windows once it has had no record for this many ms of wall-clock time.
    idle_close_ms: int | None = attrs.field(default=None, kw_only=True, converter=_optional_millis,
                                            validator=_idle_close_fits)

    @classmethod
    def on_window_update(cls) -> EmitStrategy:
        """Forward each update of a window (the default)."""
        return cls(EmitStrategyKind.ON_WINDOW_UPDATE)

    @classmethod
    def on_window_close(cls, *, idle_close: Duration | None = None) -> EmitStrategy:
        """Forward each window once, when stream time passes its end plus grace (and gap), or
        (``idle_close``, ms or ``timedelta``) once its key has had no record for that long on the
        wall clock, whichever comes first."""
        return cls(EmitStrategyKind.ON_WINDOW_CLOSE, idle_close_ms=idle_close)

    @property
    def emits_on_close(self) -> bool:
        return self.kind is EmitStrategyKind.ON_WINDOW_CLOSE

    def with_default_idle_close(self, idle_close_ms: int | None) -> EmitStrategy:
        """This strategy, closing idle windows after ``idle_close_ms`` unless it says otherwise
        (the application's ``streamsdsl.window.idle.close.ms``): on-close strategies only."""
        if idle_close_ms is None or not self.emits_on_close or self.idle_close_ms is not None:
            return self
        return attrs.evolve(self, idle_close_ms=idle_close_ms)

    def __repr__(self) -> str:
        idle = "" if self.idle_close_ms is None else f"idle_close={self.idle_close_ms}ms"
        return f"EmitStrategy.{self.kind.value}({idle})"


def _advance_within_size(inst: TimeWindows, attribute: attrs.Attribute[Any], value: int) -> None:
    if value <= 0 or value > inst.size_ms:
        raise InvalidArgumentError(
            f"'advance' must be > 0 ms and <= the window size ({inst.size_ms} ms) (got {value}). "
            "Use advance = size for tumbling windows."
        )


@attrs.frozen
class TimeWindows:
    """Fixed-size time windows ``[start, start + size)``: tumbling, or hopping with `advance_by`.

    Window starts are the multiples of ``advance_ms`` (``advance = size``, the default, means
    tumbling). A window accepts records until stream time reaches ``end + grace``; then it is
    closed.

    Examples
    --------
    >>> from datetime import timedelta
    >>> w = TimeWindows.of_size_and_grace(timedelta(seconds=10), 2000)
    >>> (w.size_ms, w.advance_ms, w.grace_period_ms)
    (10000, 10000, 2000)
    >>> TimeWindows.of_size_with_no_grace(10).advance_by(5).windows_for(12)
    [TimeWindow(start=5, end=15), TimeWindow(start=10, end=20)]
    """

    size_ms: int = duration_field(
        "size", positive=True, fix="Use e.g. TimeWindows.of_size_with_no_grace(timedelta(minutes=5))."
    )
    advance_ms: int = attrs.field(
        default=attrs.Factory(lambda self: self.size_ms, takes_self=True),
        converter=millis("advance"),
        validator=_advance_within_size,
    )
    grace_period_ms: int = _grace_field()

    @classmethod
    def of_size_with_no_grace(cls, size: Duration) -> TimeWindows:
        """Tumbling windows of ``size`` (ms or ``timedelta``) with grace 0 (Kafka's ``ofSizeWithNoGrace``)."""
        return cls(size)

    @classmethod
    def of_size_and_grace(cls, size: Duration, grace: Duration) -> TimeWindows:
        """Tumbling windows of ``size`` accepting late records for ``grace`` more stream time."""
        return cls(size, grace_period_ms=grace)

    def advance_by(self, advance: Duration) -> TimeWindows:
        """Hopping windows: a copy whose windows start every ``advance`` (``0 < advance <= size``)."""
        return attrs.evolve(self, advance_ms=advance)

    def windows_for(self, timestamp: int) -> list[TimeWindow]:
        """Every window containing ``timestamp`` (ms), in ascending start order.

        Those are the windows with ``start <= timestamp < start + size``, ``start >= 0`` and
        ``start`` a multiple of ``advance_ms`` (Kafka's ``TimeWindows.windowsFor``).
        """
        epoch_millis(timestamp, "timestamp")
        return [TimeWindow(s, s + self.size_ms) for s in window_starts(timestamp, self.size_ms, self.advance_ms)]

    def __repr__(self) -> str:
        return f"TimeWindows(size={self.size_ms}ms, advance={self.advance_ms}ms, grace={self.grace_period_ms}ms)"


@attrs.frozen
class SlidingWindows:
    """Kafka Streams' record-driven sliding windows (KIP-450).

    A window ``[start, start + time_difference]`` (both ends **inclusive**) exists for every
    distinct set of records of a key lying at most ``time_difference_ms`` apart: each record
    creates the window ending at it and, when a later record is within reach, the window
    starting just after it. A window is closed once stream time passes ``end + grace``.

    Examples
    --------
    >>> w = SlidingWindows.of_time_difference_and_grace(10, 5)
    >>> (w.time_difference_ms, w.grace_period_ms)
    (10, 5)
    """

    time_difference_ms: int = duration_field(
        "time_difference",
        positive=False,
        fix="Records at most this far apart share a sliding window; "
        "use e.g. SlidingWindows.of_time_difference_with_no_grace(timedelta(minutes=5)).",
    )
    grace_period_ms: int = _grace_field()

    @classmethod
    def of_time_difference_with_no_grace(cls, time_difference: Duration) -> SlidingWindows:
        """Sliding windows of ``time_difference`` (ms or ``timedelta``) and grace 0."""
        return cls(time_difference)

    @classmethod
    def of_time_difference_and_grace(cls, time_difference: Duration, grace: Duration) -> SlidingWindows:
        """Sliding windows of ``time_difference`` accepting late records for ``grace`` more stream time."""
        return cls(time_difference, grace)

    def __repr__(self) -> str:
        return f"SlidingWindows(time_difference={self.time_difference_ms}ms, grace={self.grace_period_ms}ms)"
