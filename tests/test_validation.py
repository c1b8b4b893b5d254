"""Invalid DSL use fails when it is written, with messages that name the argument, unit and fix."""

from __future__ import annotations

from datetime import timedelta

import pytest

from streamsdsl import (
    Consumed,
    EmitStrategy,
    InvalidArgumentError,
    InvalidTypeError,
    Materialized,
    Named,
    SessionWindows,
    StreamsBuilder,
    StreamsDslError,
    TopologyError,
)


class TestSessionWindowsValidation:
    def test_gap_must_be_positive(self) -> None:
        """A zero or negative gap is rejected with the value, the unit and the fix."""
        with pytest.raises(InvalidArgumentError) as exc:
            SessionWindows.with_gap(-5)
        assert str(exc.value) == (
            "'gap' must be > 0 ms (got -5). Sessions close after an inactivity gap; "
            "use e.g. SessionWindows.of_inactivity_gap_with_no_grace(timedelta(minutes=5))."
        )
        with pytest.raises(InvalidArgumentError, match=r"'gap' must be > 0 ms \(got 0\)"):
            SessionWindows.of_inactivity_gap_with_no_grace(timedelta(0))

    def test_grace_must_not_be_negative(self) -> None:
        """A negative grace period is rejected."""
        with pytest.raises(InvalidArgumentError) as exc:
            SessionWindows.with_gap(10).grace(-1)
        assert str(exc.value) == "'grace' must be >= 0 ms (got -1). Use 0 to accept no late records."

    def test_durations_accept_int_and_timedelta(self) -> None:
        """Durations are int milliseconds or timedelta, stored as int ms."""
        w = SessionWindows.of_inactivity_gap_and_grace(timedelta(seconds=2), timedelta(milliseconds=250))
        assert (w.inactivity_gap_ms, w.grace_period_ms) == (2000, 250)
        assert SessionWindows.with_gap(7).grace_period_ms == 0

    def test_duration_type_error(self) -> None:
        """A string duration is a TypeError naming the argument and the accepted types."""
        with pytest.raises(InvalidTypeError) as exc:
            SessionWindows.with_gap("5s")  # type: ignore[arg-type]
        assert str(exc.value) == "'gap' must be an int (milliseconds) or a datetime.timedelta (got str: '5s')."
        assert isinstance(exc.value, TypeError) and isinstance(exc.value, StreamsDslError)

    def test_sub_millisecond_timedelta_rejected(self) -> None:
        """A timedelta that is not whole milliseconds is rejected rather than silently rounded."""
        with pytest.raises(InvalidArgumentError, match="whole number of milliseconds"):
            SessionWindows.with_gap(timedelta(microseconds=1500))


class TestNames:
    def test_illegal_character(self) -> None:
        """User names follow Kafka Streams' character rule."""
        b = StreamsBuilder()
        with pytest.raises(InvalidArgumentError) as exc:
            b.stream("in").filter(lambda k, v: True, name="bad name")
        assert str(exc.value) == (
            "'name' 'bad name' contains an illegal character; "
            "legal characters are ASCII letters, digits, '.', '_' and '-'."
        )

    def test_too_long(self) -> None:
        """Names are at most 249 characters."""
        with pytest.raises(InvalidArgumentError, match="'name' is 250 characters long; the limit is 249 characters."):
            Named.as_("x" * 250)

    def test_store_name_validated(self) -> None:
        """Materialized store names use the same rule."""
        with pytest.raises(InvalidArgumentError, match="illegal character"):
            Materialized.as_("a/b")

    def test_duplicate_processor_name(self) -> None:
        """Two processors cannot share a name."""
        b = StreamsBuilder()
        s = b.stream("in")
        s.filter(lambda k, v: True, name="f")
        with pytest.raises(TopologyError, match="Processor name 'f' is already used"):
            s.map_values(str, name="f")

    def test_topic_consumed_twice(self) -> None:
        """A topic can be a source only once."""
        b = StreamsBuilder()
        b.stream("in")
        with pytest.raises(TopologyError, match="Topic 'in' is already consumed by KSTREAM-SOURCE-0000000000"):
            b.stream(["other", "in"])

    def test_a_topic_pattern_is_refused_where_one_topic_is_needed(self) -> None:
        """``table()`` reads one topic: a ``re.Pattern`` there is refused when written, saying that
        only ``stream()`` reads a pattern (tests/test_topic_patterns.py has the rest)."""
        import re

        with pytest.raises(InvalidTypeError) as caught:
            StreamsBuilder().table(re.compile("orders-.*"))  # type: ignore[arg-type]
        assert str(caught.value).startswith("'topic' is a regular expression (re.compile('orders-.*')): only ")
        assert isinstance(caught.value, StreamsDslError) and isinstance(caught.value, TypeError)


class TestFunctionsAndStages:
    def test_non_callable_predicate(self) -> None:
        """A predicate that is neither callable nor a Column is rejected with its expected shape."""
        with pytest.raises(InvalidTypeError) as exc:
            StreamsBuilder().stream("in").filter(42)  # type: ignore[arg-type]
        assert str(exc.value) == (
            "'predicate' must be a callable or a pyspark Column of shape (key, value) -> bool (got int: 42)."
        )

    def test_map_rejects_column(self, spark: object) -> None:
        """map needs a Python (key, value) -> (key, value) function; a Column is refused."""
        from pyspark.sql import functions as F

        with pytest.raises(InvalidTypeError, match="'mapper' does not accept a pyspark Column here"):
            StreamsBuilder().stream("in").map(F.col("value"))

    def test_bad_option_type(self) -> None:
        """Options must be the right option class."""
        with pytest.raises(InvalidTypeError, match="'consumed' must be a Consumed"):
            StreamsBuilder().stream("in", Materialized.as_("x"))  # type: ignore[arg-type]

    def test_emit_strategy_only_on_windowed_stages(self) -> None:
        """emit_strategy does not exist before windowing: an AttributeError at write time."""
        grouped = StreamsBuilder().stream("in").group_by_key()
        assert not hasattr(grouped, "emit_strategy")
        with pytest.raises(AttributeError):
            grouped.emit_strategy(EmitStrategy.on_window_close())  # type: ignore[attr-defined]
        assert not hasattr(StreamsBuilder().stream("x"), "aggregate")

    def test_windowed_by_rejects_other_types(self) -> None:
        """windowed_by needs a window specification."""
        with pytest.raises(InvalidTypeError, match="'windows' must be SessionWindows"):
            StreamsBuilder().stream("in").group_by_key().windowed_by(5)  # type: ignore[arg-type]

    def test_emit_strategy_type(self) -> None:
        """emit_strategy needs an EmitStrategy."""
        w = StreamsBuilder().stream("in").group_by_key().windowed_by(SessionWindows.with_gap(5))
        with pytest.raises(InvalidTypeError, match="'strategy' must be an EmitStrategy"):
            w.emit_strategy("on_close")  # type: ignore[arg-type]

    def test_column_aggregator_with_initializer(self, spark: object) -> None:
        """A Column aggregator defines the whole aggregation: an initializer is an error."""
        from pyspark.sql import functions as F

        g = StreamsBuilder().stream("in", Consumed.with_serdes(None, None)).group_by_key()
        with pytest.raises(InvalidArgumentError, match="'initializer' must be None when 'aggregator' is a pyspark"):
            g.aggregate(lambda: 0, F.sum("value"))

    def test_session_aggregate_needs_merger(self) -> None:
        """Session aggregation requires a merger."""
        w = StreamsBuilder().stream("in").group_by_key().windowed_by(SessionWindows.with_gap(5))
        with pytest.raises(InvalidTypeError, match="'merger' must be a callable"):
            w.aggregate(lambda: 0, lambda k, v, a: a, None)  # type: ignore[arg-type]
