"""Window specifications, windows and emit strategies are valid by construction.

Each invalid value is built directly (bypassing the classmethods) and must fail with the exact
exception type and message; the classmethods are only the friendly spelling.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any, Callable

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from streamsdsl.dsl.api import StreamsBuilder
from streamsdsl.values.windows import (
    EmitStrategy,
    EmitStrategyKind,
    SessionWindow,
    SessionWindows,
    SlidingWindows,
    TimeWindow,
    TimeWindows,
    Window,
    Windowed,
)
from streamsdsl.errors import InvalidArgumentError, InvalidTypeError, StreamsDslError

GAP = (
    "Sessions close after an inactivity gap; "
    "use e.g. SessionWindows.of_inactivity_gap_with_no_grace(timedelta(minutes=5))."
)
GRACE = "Use 0 to accept no late records."
SIZE = "Use e.g. TimeWindows.of_size_with_no_grace(timedelta(minutes=5))."
DIFF = (
    "Records at most this far apart share a sliding window; "
    "use e.g. SlidingWindows.of_time_difference_with_no_grace(timedelta(minutes=5))."
)
ADVANCE = "Use advance = size for tumbling windows."

INVALID: list[tuple[Callable[[], Any], type[StreamsDslError], str]] = [
    (lambda: SessionWindows(-5, -1), InvalidArgumentError, f"'gap' must be > 0 ms (got -5). {GAP}"),
    (lambda: SessionWindows(0), InvalidArgumentError, f"'gap' must be > 0 ms (got 0). {GAP}"),
    (lambda: SessionWindows(5, -1), InvalidArgumentError, f"'grace' must be >= 0 ms (got -1). {GRACE}"),
    (
        lambda: SessionWindows("5s"),
        InvalidTypeError,
        "'gap' must be an int (milliseconds) or a datetime.timedelta (got str: '5s').",
    ),
    (
        lambda: SessionWindows(True),
        InvalidTypeError,
        "'gap' must be an int (milliseconds) or a datetime.timedelta (got bool: True).",
    ),
    (
        lambda: SessionWindows(timedelta(microseconds=1500)),
        InvalidArgumentError,
        "'gap' must be a whole number of milliseconds (got datetime.timedelta(microseconds=1500)). "
        "Round the timedelta to milliseconds.",
    ),
    (lambda: attrs.evolve(SessionWindows(5), grace_period_ms=-2), InvalidArgumentError,
     f"'grace' must be >= 0 ms (got -2). {GRACE}"),
    (lambda: TimeWindows(0, 0), InvalidArgumentError, f"'size' must be > 0 ms (got 0). {SIZE}"),
    (lambda: TimeWindows(-10), InvalidArgumentError, f"'size' must be > 0 ms (got -10). {SIZE}"),
    (
        lambda: TimeWindows(10, 0),
        InvalidArgumentError,
        f"'advance' must be > 0 ms and <= the window size (10 ms) (got 0). {ADVANCE}",
    ),
    (
        lambda: TimeWindows(10, 11),
        InvalidArgumentError,
        f"'advance' must be > 0 ms and <= the window size (10 ms) (got 11). {ADVANCE}",
    ),
    (
        lambda: TimeWindows(10, "5"),
        InvalidTypeError,
        "'advance' must be an int (milliseconds) or a datetime.timedelta (got str: '5').",
    ),
    (lambda: TimeWindows(10, 5, -1), InvalidArgumentError, f"'grace' must be >= 0 ms (got -1). {GRACE}"),
    (lambda: SlidingWindows(-1), InvalidArgumentError, f"'time_difference' must be >= 0 ms (got -1). {DIFF}"),
    (lambda: SlidingWindows(0, -3), InvalidArgumentError, f"'grace' must be >= 0 ms (got -3). {GRACE}"),
    (lambda: Window(-1, 5), InvalidArgumentError, "'start' must be >= 0 ms (got -1)."),
    (lambda: TimeWindow("0", 5), InvalidTypeError, "'start' must be an int (epoch milliseconds), got '0'."),
    (
        lambda: SessionWindow(5, 3),
        InvalidArgumentError,
        "'end' must be >= 'start' (5 ms) (got 3). A window [start, end] cannot end before it starts.",
    ),
    (lambda: TimeWindow(0, 2.5), InvalidTypeError, "'end' must be an int (epoch milliseconds), got 2.5."),
    (lambda: Windowed("k", (0, 1)), InvalidTypeError, "'window' must be Window (got tuple: (0, 1))."),
    (
        lambda: EmitStrategy("bogus"),
        InvalidTypeError,
        "'kind' must be EmitStrategyKind (got str: 'bogus'). "
        "Use EmitStrategy.on_window_update() or EmitStrategy.on_window_close().",
    ),
    (
        lambda: EmitStrategy("ON_WINDOW_CLOSE"),
        InvalidTypeError,
        "'kind' must be EmitStrategyKind (got str: 'ON_WINDOW_CLOSE'). "
        "Use EmitStrategy.on_window_update() or EmitStrategy.on_window_close().",
    ),
]


class TestInvalidValues:
    @pytest.mark.parametrize(("build", "error", "message"), INVALID)
    def test_direct_construction_fails(self, build: Callable[[], Any], error: type, message: str) -> None:
        """Building an invalid value directly fails with the exact type and message."""
        with pytest.raises(error) as exc:
            build()
        assert type(exc.value) is error
        assert str(exc.value) == message

    @pytest.mark.parametrize(("build", "error", "message"), INVALID)
    def test_errors_subclass_builtins(self, build: Callable[[], Any], error: type, message: str) -> None:
        """Every error is a StreamsDslError and the matching builtin (ValueError or TypeError)."""
        builtin = ValueError if error is InvalidArgumentError else TypeError
        with pytest.raises(StreamsDslError) as exc:
            build()
        assert isinstance(exc.value, builtin)

    def test_invalid_windows_build_no_topology(self) -> None:
        """An invalid window specification fails before any node is added."""
        b = StreamsBuilder()
        grouped = b.stream("in").group_by_key()
        with pytest.raises(InvalidArgumentError, match=r"'gap' must be > 0 ms \(got -5\)"):
            grouped.windowed_by(SessionWindows(-5)).count()
        assert [n.name for n in b.build().nodes] == ["KSTREAM-SOURCE-0000000000"]

    def test_classmethods_keep_their_messages(self) -> None:
        """The friendly spellings fail with the same messages as direct construction."""
        with pytest.raises(InvalidArgumentError) as exc:
            TimeWindows.of_size_with_no_grace(10).advance_by(20)
        assert str(exc.value) == f"'advance' must be > 0 ms and <= the window size (10 ms) (got 20). {ADVANCE}"
        with pytest.raises(InvalidArgumentError) as exc:
            SlidingWindows.of_time_difference_and_grace(-1, 0)
        assert str(exc.value) == f"'time_difference' must be >= 0 ms (got -1). {DIFF}"


class TestValidValues:
    def test_durations_convert_to_int_millis(self) -> None:
        """Direct construction accepts timedelta durations and stores int milliseconds."""
        w = TimeWindows(timedelta(seconds=10), timedelta(seconds=5), timedelta(milliseconds=1))
        assert (w.size_ms, w.advance_ms, w.grace_period_ms) == (10_000, 5_000, 1)
        assert SessionWindows(timedelta(seconds=1)) == SessionWindows(1000, 0)

    def test_time_windows_default_to_tumbling(self) -> None:
        """Without an advance, time windows are tumbling (advance = size)."""
        assert TimeWindows(10) == TimeWindows.of_size_with_no_grace(10) == TimeWindows(10, 10, 0)

    def test_windows_allow_zero_length(self) -> None:
        """A window may start and end at the same millisecond (a one-record session)."""
        assert SessionWindow(3, 3).end == 3 and TimeWindow(0, 0).start == 0

    def test_emit_strategy_kind_enum(self) -> None:
        """EmitStrategy holds an EmitStrategyKind, also reachable as EmitStrategy.Kind."""
        assert EmitStrategy.Kind is EmitStrategyKind
        close = EmitStrategy(EmitStrategy.Kind.ON_WINDOW_CLOSE)
        assert close == EmitStrategy.on_window_close() and close.emits_on_close
        assert not EmitStrategy.on_window_update().emits_on_close
        assert [repr(EmitStrategy(k)) for k in EmitStrategyKind] == [
            "EmitStrategy.on_window_update()",
            "EmitStrategy.on_window_close()",
        ]


durations = st.integers(min_value=0, max_value=10**12)
positive = st.integers(min_value=1, max_value=10**12)


class TestRoundTrips:
    @given(gap=positive, grace=durations)
    def test_session_windows(self, gap: int, grace: int) -> None:
        """Any valid (gap, grace) constructs and equals its classmethod spelling, in ms or timedelta."""
        w = SessionWindows(gap, grace)
        assert (w.inactivity_gap_ms, w.grace_period_ms) == (gap, grace)
        assert w == SessionWindows.of_inactivity_gap_and_grace(gap, grace)
        assert w == SessionWindows.with_gap(timedelta(milliseconds=gap)).grace(timedelta(milliseconds=grace))

    @given(data=st.data(), size=positive, grace=durations)
    def test_time_windows(self, data: st.DataObject, size: int, grace: int) -> None:
        """Any valid (size, advance, grace) constructs and equals its classmethod spelling."""
        advance = data.draw(st.integers(min_value=1, max_value=size), label="advance")
        w = TimeWindows(size, advance, grace)
        assert (w.size_ms, w.advance_ms, w.grace_period_ms) == (size, advance, grace)
        assert w == TimeWindows.of_size_and_grace(size, grace).advance_by(advance)
        assert w == TimeWindows(timedelta(milliseconds=size), timedelta(milliseconds=advance), grace)

    @given(diff=durations, grace=durations)
    def test_sliding_windows(self, diff: int, grace: int) -> None:
        """Any valid (time_difference, grace) constructs and equals its classmethod spelling."""
        w = SlidingWindows(diff, grace)
        assert w == SlidingWindows.of_time_difference_and_grace(diff, grace)
        assert (w == SlidingWindows.of_time_difference_with_no_grace(diff)) == (grace == 0)

    @given(gap=st.integers(max_value=0), grace=st.integers(max_value=-1))
    def test_out_of_range_always_fails(self, gap: int, grace: int) -> None:
        """A non-positive gap or a negative grace never constructs, whichever spelling is used."""
        with pytest.raises(InvalidArgumentError):
            SessionWindows(gap)
        with pytest.raises(InvalidArgumentError):
            SessionWindows(1, grace)
        with pytest.raises(InvalidArgumentError):
            TimeWindows.of_size_and_grace(1, grace)
