"""Fluent stages carry typed state: a windowed KTable holds its window specification."""

from __future__ import annotations

from streamsdsl.dsl.api import StreamsBuilder
from streamsdsl.values.windows import EmitStrategy, SessionWindows, SlidingWindows, TimeWindows


def merge(key: object, a: int, b: int) -> int:
    return a + b


class TestKTableWindows:
    def test_unwindowed_table(self) -> None:
        """An unwindowed aggregation gives a table without windows."""
        table = StreamsBuilder().stream("in").group_by_key().count()
        assert table.windows is None
        assert table.filter(lambda k, v: True).windows is None

    def test_session_windowed_table(self) -> None:
        """A session-windowed aggregation's table holds the SessionWindows (gap and grace)."""
        windows = SessionWindows.of_inactivity_gap_and_grace(10, 2)
        table = StreamsBuilder().stream("in").group_by_key().windowed_by(windows).count()
        assert table.windows is windows
        assert (table.windows.inactivity_gap_ms, table.windows.grace_period_ms) == (10, 2)

    def test_time_and_sliding_windowed_tables(self) -> None:
        """Time and sliding windowed aggregations keep their specifications through table steps."""
        b = StreamsBuilder()
        hopping = TimeWindows.of_size_and_grace(10, 1).advance_by(5)
        sliding = SlidingWindows.of_time_difference_with_no_grace(7)
        grouped = b.stream("in").group_by_key()
        assert grouped.windowed_by(hopping).reduce(lambda a, v: v).map_values(str).windows == hopping
        closing = grouped.windowed_by(sliding).emit_strategy(EmitStrategy.on_window_close())
        assert closing.aggregate(lambda: 0, lambda k, v, a: a).filter_not(lambda k, v: False).windows == sliding

    def test_cogroup_tables(self) -> None:
        """Cogrouped tables hold the cogroup's windows, or None when unwindowed."""
        b = StreamsBuilder()
        cogrouped = b.stream("a").group_by_key().cogroup(lambda k, v, agg: agg + 1)
        assert cogrouped.aggregate(lambda: 0).windows is None
        sessions = SessionWindows.with_gap(5)
        assert cogrouped.windowed_by(sessions).aggregate(lambda: 0, merge, name="s").windows is sessions
        tumbling = TimeWindows.of_size_with_no_grace(5)
        assert cogrouped.windowed_by(tumbling).aggregate(lambda: 0, name="t").windows is tumbling
