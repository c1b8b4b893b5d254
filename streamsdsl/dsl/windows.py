"""Window specifications and windowed keys (pure Python, mirrors Kafka Streams)."""

from __future__ import annotations

from typing import Any

import attrs

from streamsdsl._validation import Duration, to_millis
from streamsdsl.errors import InvalidArgumentError, InvalidTypeError

__all__ = [
    "EmitStrategy", "SessionWindow", "SessionWindows", "SlidingWindows", "TimeWindow", "TimeWindows", "Window",
    "Windowed",
]


@attrs.frozen(order=True)
class Window:
    """A window ``[start, end]`` in epoch milliseconds (inclusiveness depends on the kind)."""

    start: int
    end: int


@attrs.frozen(order=True)
class SessionWindow(Window):
    """A session window: both ``start`` and ``end`` are inclusive (KIP-94)."""


@attrs.frozen(order=True)
class TimeWindow(Window):
    """A time window: ``start`` inclusive, ``end`` exclusive."""


@attrs.frozen(order=True)
class Windowed:
    """The key of a windowed table: the record key and its window."""

    key: Any
    window: Window

    def __str__(self) -> str:
        return f"[{self.key}@{self.window.start}/{self.window.end}]"


def _gap_ms(gap: Any) -> int:
    ms = to_millis(gap, "gap")
    if ms <= 0:
        raise InvalidArgumentError(
            f"'gap' must be > 0 ms (got {ms}). Sessions close after an inactivity gap; "
            "use e.g. SessionWindows.of_inactivity_gap_with_no_grace(timedelta(minutes=5))."
        )
    return ms


def _grace_ms(grace: Any) -> int:
    ms = to_millis(grace, "grace")
    if ms < 0:
        raise InvalidArgumentError(
            f"'grace' must be >= 0 ms (got {ms}). Use 0 to accept no late records."
        )
    return ms


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
    """

    inactivity_gap_ms: int
    grace_period_ms: int = 0

    @classmethod
    def with_gap(cls, gap: Duration) -> SessionWindows:
        """Sessions with inactivity gap ``gap`` (ms or ``timedelta``) and no grace period."""
        return cls(_gap_ms(gap), 0)

    @classmethod
    def of_inactivity_gap_with_no_grace(cls, gap: Duration) -> SessionWindows:
        """Sessions with inactivity gap ``gap`` and grace 0 (Kafka Streams' ``ofInactivityGapWithNoGrace``)."""
        return cls(_gap_ms(gap), 0)

    @classmethod
    def of_inactivity_gap_and_grace(cls, gap: Duration, grace: Duration) -> SessionWindows:
        """Sessions with inactivity gap ``gap`` and a grace period ``grace`` for late records."""
        return cls(_gap_ms(gap), _grace_ms(grace))

    def grace(self, grace: Duration) -> SessionWindows:
        """A copy of these windows with grace period ``grace`` (ms or ``timedelta``)."""
        return attrs.evolve(self, grace_period_ms=_grace_ms(grace))

    def __repr__(self) -> str:
        return f"SessionWindows(gap={self.inactivity_gap_ms}ms, grace={self.grace_period_ms}ms)"


@attrs.frozen
class EmitStrategy:
    """When a windowed aggregation forwards results (KIP-825).

    ``on_window_update()`` (the default) forwards every change of a window, with tombstones for
    sessions merged away; ``on_window_close()`` forwards each window exactly once, when it closes.
    """

    kind: str

    @classmethod
    def on_window_update(cls) -> EmitStrategy:
        """Forward each update of a window (the default)."""
        return cls("ON_WINDOW_UPDATE")

    @classmethod
    def on_window_close(cls) -> EmitStrategy:
        """Forward each window once, when stream time passes its end plus grace (and gap)."""
        return cls("ON_WINDOW_CLOSE")

    @property
    def emits_on_close(self) -> bool:
        return self.kind == "ON_WINDOW_CLOSE"

    def __repr__(self) -> str:
        return f"EmitStrategy.{self.kind.lower()}()"


def _size_ms(size: Any) -> int:
    ms = to_millis(size, "size")
    if ms <= 0:
        raise InvalidArgumentError(
            f"'size' must be > 0 ms (got {ms}). Use e.g. TimeWindows.of_size_with_no_grace(timedelta(minutes=5))."
        )
    return ms


@attrs.frozen
class TimeWindows:
    """Fixed-size time windows ``[start, start + size)``: tumbling, or hopping with `advance_by`.

    Window starts are the multiples of ``advance_ms`` (``advance = size`` means tumbling). A
    window accepts records until stream time reaches ``end + grace``; then it is closed.

    Examples
    --------
    >>> from datetime import timedelta
    >>> w = TimeWindows.of_size_and_grace(timedelta(seconds=10), 2000)
    >>> (w.size_ms, w.advance_ms, w.grace_period_ms)
    (10000, 10000, 2000)
    >>> TimeWindows.of_size_with_no_grace(10).advance_by(5).windows_for(12)
    [TimeWindow(start=5, end=15), TimeWindow(start=10, end=20)]
    """

    size_ms: int
    advance_ms: int
    grace_period_ms: int = 0

    @classmethod
    def of_size_with_no_grace(cls, size: Duration) -> TimeWindows:
        """Tumbling windows of ``size`` (ms or ``timedelta``) with grace 0 (Kafka's ``ofSizeWithNoGrace``)."""
        ms = _size_ms(size)
        return cls(ms, ms, 0)

    @classmethod
    def of_size_and_grace(cls, size: Duration, grace: Duration) -> TimeWindows:
        """Tumbling windows of ``size`` accepting late records for ``grace`` more stream time."""
        ms = _size_ms(size)
        return cls(ms, ms, _grace_ms(grace))

    def advance_by(self, advance: Duration) -> TimeWindows:
        """Hopping windows: a copy whose windows start every ``advance`` (``0 < advance <= size``)."""
        ms = to_millis(advance, "advance")
        if ms <= 0 or ms > self.size_ms:
            raise InvalidArgumentError(
                f"'advance' must be > 0 ms and <= the window size ({self.size_ms} ms) (got {ms}). "
                "Use advance = size for tumbling windows."
            )
        return attrs.evolve(self, advance_ms=ms)

    def windows_for(self, timestamp: int) -> list[TimeWindow]:
        """Every window containing ``timestamp`` (ms), in ascending start order.

        Those are the windows with ``start <= timestamp < start + size``, ``start >= 0`` and
        ``start`` a multiple of ``advance_ms`` (Kafka's ``TimeWindows.windowsFor``).
        """
        if isinstance(timestamp, bool) or not isinstance(timestamp, int):
            raise InvalidTypeError(f"'timestamp' must be an int (epoch milliseconds), got {timestamp!r}.")
        if timestamp < 0:
            raise InvalidArgumentError(f"'timestamp' must be >= 0 ms (got {timestamp}).")
        return [TimeWindow(s, s + self.size_ms) for s in window_starts(timestamp, self.size_ms, self.advance_ms)]

    def __repr__(self) -> str:
        return f"TimeWindows(size={self.size_ms}ms, advance={self.advance_ms}ms, grace={self.grace_period_ms}ms)"


def window_starts(timestamp: int, size: int, advance: int) -> range:
    """Starts of the time windows containing ``timestamp`` (ascending; see `TimeWindows.windows_for`)."""
    first = (max(0, timestamp - size + advance) // advance) * advance
    return range(first, timestamp + 1, advance)


def _time_difference_ms(diff: Any) -> int:
    ms = to_millis(diff, "time_difference")
    if ms < 0:
        raise InvalidArgumentError(
            f"'time_difference' must be >= 0 ms (got {ms}). Records at most this far apart share a "
            "sliding window; use e.g. SlidingWindows.of_time_difference_with_no_grace(timedelta(minutes=5))."
        )
    return ms


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

    time_difference_ms: int
    grace_period_ms: int = 0

    @classmethod
    def of_time_difference_with_no_grace(cls, time_difference: Duration) -> SlidingWindows:
        """Sliding windows of ``time_difference`` (ms or ``timedelta``) and grace 0."""
        return cls(_time_difference_ms(time_difference), 0)

    @classmethod
    def of_time_difference_and_grace(cls, time_difference: Duration, grace: Duration) -> SlidingWindows:
        """Sliding windows of ``time_difference`` accepting late records for ``grace`` more stream time."""
        return cls(_time_difference_ms(time_difference), _grace_ms(grace))

    def __repr__(self) -> str:
        return f"SlidingWindows(time_difference={self.time_difference_ms}ms, grace={self.grace_period_ms}ms)"
