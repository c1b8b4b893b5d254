"""Window specifications and windowed keys (pure Python, mirrors Kafka Streams)."""

from __future__ import annotations

from typing import Any

import attrs

from streamsdsl._validation import Duration, to_millis
from streamsdsl.errors import InvalidArgumentError

__all__ = ["EmitStrategy", "SessionWindow", "SessionWindows", "TimeWindow", "Window", "Windowed"]


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
