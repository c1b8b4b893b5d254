"""Python mistakes fail when the topology is written, with messages that name the argument and the fix."""

from __future__ import annotations

import copy
import functools
import inspect
import pickle
from types import SimpleNamespace
from typing import Any, Callable

import attrs
import pytest

from streamsdsl.errors import StageMethodError
from streamsdsl.dsl.api import KGroupedStream, StreamsBuilder
from streamsdsl.values.joins import JoinWindows
from streamsdsl.values.windows import EmitStrategy, SessionWindows, SlidingWindows, TimeWindows
from streamsdsl.errors import InvalidTypeError, StreamsDslError


def stages() -> SimpleNamespace:
    """One fresh stage of every kind, all of one builder."""
    b = StreamsBuilder()
    stream = b.stream("in")
    grouped = stream.group_by_key()
    cogrouped = grouped.cogroup(lambda k, v, a: a)
    return SimpleNamespace(
        builder=b,
        stream=stream,
        grouped=grouped,
        other=b.stream("other").group_by_key(),
        table=grouped.count(),
        time=grouped.windowed_by(TimeWindows.of_size_with_no_grace(10)),
        sliding=grouped.windowed_by(SlidingWindows.of_time_difference_with_no_grace(10)),
        session=grouped.windowed_by(SessionWindows.with_gap(5)),
        cogrouped=cogrouped,
        time_cogrouped=cogrouped.windowed_by(TimeWindows.of_size_with_no_grace(10)),
        session_cogrouped=cogrouped.windowed_by(SessionWindows.with_gap(5)),
    )


def type_error(call: Callable[[SimpleNamespace], Any]) -> str:
    """The message of the InvalidTypeError (exactly that type) that ``call`` raises."""
    with pytest.raises(InvalidTypeError) as exc:
        call(stages())
    assert type(exc.value) is InvalidTypeError
    return str(exc.value)


TWO = "must accept 2 positional arguments (key, value)"
ONE = "must accept 1 positional argument (value) or 2 (key, value)"
ONE_FIX = "Use lambda value: ... or lambda key, value: ..."
JOINER = "must accept 2 positional arguments (value, other_value) or 3 (key, value, other_value)"
JOINER_FIX = "Use lambda value, other_value: ... or lambda key, value, other_value: ..."
THREE = "must accept 3 positional arguments (key, value, aggregate)"
NONE = "must accept no arguments"
MERGER = "must accept 3 positional arguments (key, aggregate1, aggregate2)"
REDUCER = "must accept 2 positional arguments (aggregate, value)"


class TestFunctionArity:
    @pytest.mark.parametrize(
        ("call", "message"),
        [
            (lambda s: s.stream.filter(lambda k: True),
             f"'predicate' {TWO}; lambda k has 1 (k). Use lambda key, value: ..."),
            (lambda s: s.stream.filter_not(lambda k, v, x: True),
             f"'predicate' {TWO}; lambda k, v, x has 3 required (k, v, x). Use lambda key, value: ..."),
            (lambda s: s.stream.map_values(lambda k, v, x: v),
             f"'mapper' {ONE}; lambda k, v, x has 3 required (k, v, x). {ONE_FIX}"),
            (lambda s: s.stream.map_values(lambda: 1),
             f"'mapper' {ONE}; lambda has 0 (). {ONE_FIX}"),
            (lambda s: s.stream.map(lambda v: (v, v)),
             f"'mapper' {TWO}; lambda v has 1 (v). Use lambda key, value: ..."),
            (lambda s: s.stream.flat_map(lambda v: [(v, v)]),
             f"'mapper' {TWO}; lambda v has 1 (v). Use lambda key, value: ..."),
            (lambda s: s.stream.flat_map_values(lambda k, v, x: [v]),
             f"'mapper' {ONE}; lambda k, v, x has 3 required (k, v, x). {ONE_FIX}"),
            (lambda s: s.stream.select_key(lambda v: v),
             f"'selector' {TWO}; lambda v has 1 (v). Use lambda key, value: ..."),
            (lambda s: s.stream.group_by(lambda v: v),
             f"'key_selector' {TWO}; lambda v has 1 (v). Use lambda key, value: ..."),
            (lambda s: s.stream.peek(lambda v: None),
             f"'action' {TWO}; lambda v has 1 (v). Use lambda key, value: ..."),
            (lambda s: s.grouped.reduce(lambda a: a),
             f"'reducer' {REDUCER}; lambda a has 1 (a). Use lambda aggregate, value: ..."),
            (lambda s: s.grouped.aggregate(lambda k: 0, lambda k, v, a: a),
             f"'initializer' {NONE}; lambda k has 1 required (k). Use lambda: ..."),
            (lambda s: s.grouped.aggregate(lambda: 0, lambda v, a: a),
             f"'aggregator' {THREE}; lambda v, a has 2 (v, a). Use lambda key, value, aggregate: ..."),
            (lambda s: s.grouped.cogroup(lambda v, a: a),
             f"'aggregator' {THREE}; lambda v, a has 2 (v, a). Use lambda key, value, aggregate: ..."),
            (lambda s: s.time.reduce(lambda a, v, x: a),
             f"'reducer' {REDUCER}; lambda a, v, x has 3 required (a, v, x). Use lambda aggregate, value: ..."),
            (lambda s: s.sliding.aggregate(lambda: 0, lambda v, a: a),
             f"'aggregator' {THREE}; lambda v, a has 2 (v, a). Use lambda key, value, aggregate: ..."),
            (lambda s: s.session.aggregate(lambda a: a, lambda k, v, a: a, lambda k, a, b: a),
             f"'initializer' {NONE}; lambda a has 1 required (a). Use lambda: ..."),
            (lambda s: s.session.aggregate(lambda: 0, lambda k, v, a: a, lambda a, b: a),
             f"'merger' {MERGER}; lambda a, b has 2 (a, b). Use lambda key, aggregate1, aggregate2: ..."),
            (lambda s: s.table.filter(lambda v: True),
             f"'predicate' {TWO}; lambda v has 1 (v). Use lambda key, value: ..."),
            (lambda s: s.table.filter_not(lambda v: True),
             f"'predicate' {TWO}; lambda v has 1 (v). Use lambda key, value: ..."),
            (lambda s: s.table.map_values(lambda k, v, x: v),
             f"'mapper' {ONE}; lambda k, v, x has 3 required (k, v, x). {ONE_FIX}"),
            (lambda s: s.stream.join(s.table, lambda v: v),
             "'joiner' must accept 2 positional arguments (value, table_value) or 3 (key, value, table_value); "
             "lambda v has 1 (v). Use lambda value, table_value: ... or lambda key, value, table_value: ..."),
            (lambda s: s.table.join(s.builder.table("t"), lambda k, a, b, c: a),
             f"'joiner' {JOINER}; lambda k, a, b, c has 4 required (k, a, b, c). {JOINER_FIX}"),
            (lambda s: s.stream.outer_join(s.builder.stream("o"), lambda v: v,
                                           JoinWindows.of_time_difference_with_no_grace(5)),
             f"'joiner' {JOINER}; lambda v has 1 (v). {JOINER_FIX}"),
            (lambda s: s.cogrouped.cogroup(s.other, lambda v: v),
             f"'aggregator' {THREE}; lambda v has 1 (v). Use lambda key, value, aggregate: ..."),
            (lambda s: s.cogrouped.aggregate(lambda a: 0),
             f"'initializer' {NONE}; lambda a has 1 required (a). Use lambda: ..."),
            (lambda s: s.time_cogrouped.aggregate(lambda a: 0),
             f"'initializer' {NONE}; lambda a has 1 required (a). Use lambda: ..."),
            (lambda s: s.session_cogrouped.aggregate(lambda: 0, lambda k, a: a),
             f"'merger' {MERGER}; lambda k, a has 2 (k, a). Use lambda key, aggregate1, aggregate2: ..."),
        ],
    )
    def test_wrong_arity_fails_at_the_call(self, call: Callable[[SimpleNamespace], Any], message: str) -> None:
        """Every DSL method that takes a user function rejects one with the wrong number of parameters."""
        assert type_error(call) == message

    def test_failed_call_adds_nothing(self) -> None:
        """A rejected function leaves the builder as it was: the next processor gets the next name."""
        b = StreamsBuilder()
        stream = b.stream("in")
        with pytest.raises(InvalidTypeError):
            stream.filter(lambda k: True)
        with pytest.raises(InvalidTypeError):
            stream.group_by_key().cogroup(lambda k, v, a: a).aggregate(lambda k: 0)
        stream.filter(lambda k, v: True)
        assert [n.name for n in b.build().nodes] == ["KSTREAM-SOURCE-0000000000", "KSTREAM-FILTER-0000000001"]


def is_big(x: int) -> bool:
    return x > 1


def add3(a: int, b: int, c: int) -> int:
    return a + b + c


def keyword_flag(key: object, value: object, *, flag: bool) -> bool:
    return flag


class Adder:
    def __call__(self, a: int, b: int, c: int) -> int:
        return a + b + c


class Pair:
    def __init__(self, a: object, b: object) -> None:
        self.a, self.b = a, b


class Triple:
    def __init__(self, a: object, b: object, c: object) -> None:
        self.a, self.b, self.c = a, b, c


class Checker:
    def check(self, key: object) -> bool:
        return True

    def check_record(self, key: object, value: object) -> bool:
        return True


class TestCallableForms:
    def test_def_function(self) -> None:
        """A named function is named in the message, with a def to write instead."""
        assert type_error(lambda s: s.stream.filter(is_big)) == (
            f"'predicate' {TWO}; is_big has 1 (x). Use def is_big(key, value): ..."
        )

    def test_partial(self) -> None:
        """functools.partial counts only the arguments still to give."""
        stages().stream.filter(functools.partial(add3, 1))
        assert type_error(lambda s: s.stream.filter(functools.partial(add3, 1, 2))) == (
            f"'predicate' {TWO}; functools.partial(add3) has 1 (c). Pass a callable of shape (key, value) -> bool."
        )

    def test_bound_method(self) -> None:
        """A bound method does not count self."""
        stages().stream.filter(Checker().check_record)
        assert type_error(lambda s: s.stream.filter(Checker().check)) == (
            f"'predicate' {TWO}; Checker.check has 1 (key). Pass a callable of shape (key, value) -> bool."
        )

    def test_callable_object(self) -> None:
        """A callable object is checked through its __call__."""
        assert type_error(lambda s: s.stream.filter(Adder())) == (
            f"'predicate' {TWO}; Adder.__call__ has 3 required (a, b, c). "
            "Pass a callable of shape (key, value) -> bool."
        )
        stages().grouped.cogroup(Adder())

    def test_class(self) -> None:
        """A class is checked through its constructor."""
        assert type_error(lambda s: s.stream.map_values(Triple)) == (
            f"'mapper' {ONE}; Triple has 3 required (a, b, c). "
            "Pass a callable of shape (value) -> value or (key, value) -> value."
        )
        stages().stream.map(Pair)

    def test_required_keyword_only(self) -> None:
        """A required keyword-only parameter is never passed: rejected."""
        assert type_error(lambda s: s.stream.filter(keyword_flag)) == (
            f"'predicate' {TWO}; keyword_flag has required keyword-only (flag), which the DSL never passes. "
            "Use def keyword_flag(key, value): ..."
        )

    def test_defaults_and_varargs_accepted(self) -> None:
        """Extra defaulted parameters and *args fit any arity."""
        s = stages()
        s.stream.map_values(lambda v, scale=2: v * scale).filter(lambda *args: True).peek(lambda k, *rest: None)
        s.grouped.aggregate(lambda start=0: start, lambda k, v, a, *more: a)

    def test_either_form_takes_the_value_only(self) -> None:
        """A function fitting both forms of a ValueMapper / ValueJoiner (defaults, *args, an
        unknown signature) is called without the key, as before the with-key forms existed."""
        s = stages()
        for mapper in (lambda v, scale=2: v, lambda *args: args, int):
            assert s.stream.map_values(mapper)._builder._nodes  # built
        nodes = s.builder._nodes
        assert [n.mapper.takes_key for n in nodes.values() if type(n).__name__ == "MapValuesNode"] == [False] * 3
        s.stream.map_values(lambda k, v, extra=0: v)
        assert [n.mapper.takes_key for n in nodes.values() if type(n).__name__ == "MapValuesNode"][-1] is True

    def test_unknown_signatures_accepted(self) -> None:
        """Builtins whose signature cannot be read (int, str, max) are accepted, as are known fitting ones."""
        s = stages()
        s.stream.map_values(int).map_values(str).map_values(len).map_values(str.upper).peek(print)
        s.grouped.reduce(max)


STAGE_METHOD_ERRORS = [
    ("grouped", "emit_strategy",
     "KGroupedStream has no 'emit_strategy': emit_strategy() exists on windowed streams; "
     "window first: windowed_by(SessionWindows | TimeWindows | SlidingWindows)."),
    ("stream", "emit_strategy",
     "KStream has no 'emit_strategy': emit_strategy() exists on windowed streams; "
     "group first: group_by_key() or group_by(selector), then windowed_by(windows)."),
    ("table", "emit_strategy",
     "KTable has no 'emit_strategy': emit_strategy() exists on windowed streams; "
     "set it before aggregating: windowed_by(windows).emit_strategy(strategy)."),
    ("cogrouped", "emit_strategy",
     "CogroupedKStream has no 'emit_strategy': emit_strategy() exists on windowed cogroups; "
     "window first: windowed_by(SessionWindows | TimeWindows | SlidingWindows)."),
    ("time", "windowed_by",
     "TimeWindowedKStream has no 'windowed_by': windowed_by() exists on KGroupedStream and CogroupedKStream; "
     "this stream is already windowed, and a stream is windowed once."),
    ("session", "windowed_by",
     "SessionWindowedKStream has no 'windowed_by': windowed_by() exists on KGroupedStream and CogroupedKStream; "
     "this stream is already windowed, and a stream is windowed once."),
    ("session_cogrouped", "windowed_by",
     "SessionWindowedCogroupedKStream has no 'windowed_by': windowed_by() exists on KGroupedStream and "
     "CogroupedKStream; this stream is already windowed, and a stream is windowed once."),
    ("stream", "count",
     "KStream has no 'count': count() exists on grouped streams; group first: group_by_key() or group_by(selector)."),
    ("stream", "reduce",
     "KStream has no 'reduce': reduce() exists on grouped streams; group first: group_by_key() or group_by(selector)."),
    ("stream", "aggregate",
     "KStream has no 'aggregate': aggregate() exists on grouped streams; "
     "group first: group_by_key() or group_by(selector)."),
    ("stream", "windowed_by",
     "KStream has no 'windowed_by': windowed_by() exists on grouped streams; "
     "group first: group_by_key() or group_by(selector)."),
    ("stream", "cogroup",
     "KStream has no 'cogroup': cogroup() exists on grouped streams; "
     "group first: group_by_key() or group_by(selector)."),
    ("stream", "to_stream", "KStream has no 'to_stream': to_stream() exists on KTable; this is already a stream."),
    ("table", "group_by_key",
     "KTable has no 'group_by_key': group_by_key() exists on KStream; "
     "group the table first: group_by(lambda key, value: (new_key, value)) returns a KGroupedTable."),
    ("table", "count",
     "KTable has no 'count': count() exists on grouped tables; "
     "group the table first: group_by(lambda key, value: (new_key, value)) returns a KGroupedTable."),
    ("table", "to", "KTable has no 'to': to() exists on KStream; call to_stream() first."),
    ("grouped", "to",
     "KGroupedStream has no 'to': to() exists on KStream; aggregate first, then to_stream().to(topic)."),
    ("grouped", "filter",
     "KGroupedStream has no 'filter': filter() exists on KStream; "
     "call it before grouping, or on the aggregated table's to_stream()."),
    ("grouped", "group_by_key",
     "KGroupedStream has no 'group_by_key': group_by_key() exists on KStream; this stream is already grouped."),
    ("time", "cogroup",
     "TimeWindowedKStream has no 'cogroup': cogroup() exists on KGroupedStream; "
     "cogroup before windowing: grouped.cogroup(aggregator).windowed_by(windows)."),
    ("cogrouped", "count",
     "CogroupedKStream has no 'count': count() exists on grouped streams; "
     "a cogroup aggregates with aggregate(initializer), each stream with the aggregator given to cogroup()."),
]


class TestStageMethods:
    @pytest.mark.parametrize(("stage", "method", "message"), STAGE_METHOD_ERRORS)
    def test_method_of_another_stage(self, stage: str, method: str, message: str) -> None:
        """A stage asked for another stage's method says which stage has it and what to write."""
        with pytest.raises(StageMethodError) as exc:
            getattr(getattr(stages(), stage), method)
        assert type(exc.value) is StageMethodError
        assert str(exc.value) == message
        assert (exc.value.name, type(exc.value.obj).__name__) == (method, message.split()[0])

    def test_is_an_attribute_error(self) -> None:
        """The error is a StreamsDslError and an AttributeError, so hasattr() and getattr() defaults still work."""
        grouped = stages().grouped
        with pytest.raises(StreamsDslError):
            grouped.emit_strategy(EmitStrategy.on_window_close())  # type: ignore[attr-defined]
        assert issubclass(StageMethodError, AttributeError)
        assert not hasattr(grouped, "emit_strategy")
        assert getattr(grouped, "emit_strategy", None) is None

    def test_other_names_keep_python_text(self) -> None:
        """A name no stage has, or a dunder name, gets Python's own AttributeError."""
        stream = stages().stream
        for name in ("filtr", "__wrapped__", "_repr_html_"):
            with pytest.raises(AttributeError) as exc:
                getattr(stream, name)
            assert type(exc.value) is AttributeError
            assert str(exc.value) == f"'KStream' object has no attribute '{name}'"

    def test_copy_evolve_and_pickle(self) -> None:
        """Stages still copy, evolve and pickle (their attributes are all present)."""
        b = StreamsBuilder()
        windowed = b.stream("in").group_by_key().windowed_by(TimeWindows.of_size_with_no_grace(10))
        closing = attrs.evolve(windowed, emit=EmitStrategy.on_window_close())
        assert closing.emit == EmitStrategy.on_window_close()
        assert copy.copy(windowed) == windowed
        assert copy.deepcopy(windowed) == windowed
        assert pickle.loads(pickle.dumps(windowed)) == windowed


NEEDS_TWO = (
    "aggregate() needs initializer and aggregator: aggregate(initializer, aggregator), "
    "e.g. aggregate(lambda: 0, lambda key, value, agg: agg + 1)."
)
NEEDS_THREE = (
    "aggregate() needs initializer, aggregator and merger: aggregate(initializer, aggregator, merger), "
    "e.g. aggregate(lambda: 0, lambda key, value, agg: agg + 1, lambda key, agg1, agg2: agg1 + agg2)."
)
NEEDS_MERGER = (
    "aggregate() needs initializer and merger: aggregate(initializer, merger), "
    "e.g. aggregate(lambda: 0, lambda key, agg1, agg2: agg1 + agg2)."
)
NEEDS_INITIALIZER = "aggregate() needs initializer: aggregate(initializer), e.g. aggregate(lambda: 0)."
NEEDS_REDUCER = "reduce() needs reducer: reduce(reducer), e.g. reduce(lambda agg, value: agg + value)."
LOOKS_LIKE_AGGREGATOR = "The initializer given, lambda k, v, a, looks like the aggregator; the initializer comes first."


class TestMissingArguments:
    @pytest.mark.parametrize(
        ("call", "message"),
        [
            (lambda s: s.grouped.aggregate(lambda k, v, a: a), f"{NEEDS_TWO} {LOOKS_LIKE_AGGREGATOR}"),
            (lambda s: s.grouped.aggregate(), NEEDS_TWO),
            (lambda s: s.grouped.aggregate(lambda: 0), f"{NEEDS_TWO} Missing: 'aggregator'."),
            (lambda s: s.grouped.aggregate(aggregator=lambda k, v, a: a), f"{NEEDS_TWO} Missing: 'initializer'."),
            (lambda s: s.time.aggregate(lambda k, v, a: a), f"{NEEDS_TWO} {LOOKS_LIKE_AGGREGATOR}"),
            (lambda s: s.session.aggregate(lambda: 0, lambda k, v, a: a), f"{NEEDS_THREE} Missing: 'merger'."),
            (lambda s: s.session.aggregate(lambda k, v, a: a, lambda k, a, b: a),
             f"{NEEDS_THREE} {LOOKS_LIKE_AGGREGATOR}"),
            (lambda s: s.cogrouped.aggregate(), NEEDS_INITIALIZER),
            (lambda s: s.time_cogrouped.aggregate(), NEEDS_INITIALIZER),
            (lambda s: s.session_cogrouped.aggregate(lambda: 0), f"{NEEDS_MERGER} Missing: 'merger'."),
            (lambda s: s.session_cogrouped.aggregate(lambda k, a, b: a),
             f"{NEEDS_MERGER} The initializer given, lambda k, a, b, looks like the merger; "
             "the initializer comes first."),
            (lambda s: s.grouped.reduce(), NEEDS_REDUCER),
            (lambda s: s.session.reduce(), NEEDS_REDUCER),
            (lambda s: s.grouped.cogroup(),
             "cogroup() needs aggregator: cogroup(aggregator), e.g. cogroup(lambda key, value, agg: agg + 1)."),
            (lambda s: s.cogrouped.cogroup(lambda k, v, a: a),
             "cogroup() needs grouped_stream and aggregator: cogroup(grouped_stream, aggregator), "
             "e.g. cogroup(builder.stream('views').group_by_key(), lambda key, value, agg: agg + 1). "
             "The grouped_stream given, lambda k, v, a, looks like the aggregator; the grouped_stream comes first."),
        ],
    )
    def test_names_the_left_out_argument(self, call: Callable[[SimpleNamespace], Any], message: str) -> None:
        """A call that leaves out a required argument names it, with a complete example call."""
        assert type_error(call) == message

    def test_keyword_names_unchanged(self) -> None:
        """The arguments keep their names: keyword calls work, and the signature shows them as required."""
        s = stages()
        s.grouped.aggregate(initializer=lambda: 0, aggregator=lambda k, v, a: a)
        s.session.aggregate(initializer=lambda: 0, aggregator=lambda k, v, a: a, merger=lambda k, a, b: a)
        s.cogrouped.cogroup(grouped_stream=s.other, aggregator=lambda k, v, a: a)
        assert str(inspect.signature(KGroupedStream.aggregate)).startswith(
            "(self, initializer: 'Callable[[], Any] | None' = <required>, "
            "aggregator: 'Callable[[Any, Any, Any], Any] | Any' = <required>, *,"
        )
