"""What each stateful IR node runs, derived once from the IR (no pyspark here).

The Spark compiler and the test driver's direct engine build their operators from these
functions: the window kind of an aggregation (`windowing_of`), Kafka Streams' functions for
``count`` / ``reduce`` / ``aggregate`` (`agg_functions`) and for grouped tables
(`grouped_functions`), the serdes an operator holds its keys and results in, and which user
function raised (`function_of`).
"""

from __future__ import annotations

from typing import Any

from streamsdsl import ir
from streamsdsl.operators.codecs import KeyCodec, SessionKeyCodec, TimeKeyCodec
from streamsdsl.dsl.aggregations import BuiltinAggregator
from streamsdsl.values.serdes import DEFAULT_SERDE, PlanSerde, Serdes
from streamsdsl.values.windows import SessionWindows, SlidingWindows, TimeWindows
from streamsdsl.errors import InvalidTypeError, RecordSerializationError
from streamsdsl.semantics.aggregation import AggFunctions
from streamsdsl.semantics.grouped_table import GroupedTableFunctions
from streamsdsl.semantics.joiners import Joiner, JoinerWithKey
from streamsdsl.semantics.session import SessionWindowing
from streamsdsl.semantics.sliding import SlidingWindowing
from streamsdsl.semantics.timewindow import TimeWindowing
from streamsdsl.semantics.unwindowed import Unwindowed
from streamsdsl.semantics.windowing import Windowing

__all__ = [
    "agg_functions", "agg_value_serde", "builtin_serde", "final_results_delay", "function_names", "function_of",
    "filtered_table_sides", "first_match", "grouped_functions", "grouped_value_serde", "joiner_of", "key_codec",
    "mapper_pair", "null_keys_pass", "result_error", "selector_pair", "sink_write_error", "value_mapper",
    "windowing_of",
]


def value_mapper(mapper: ir.UserFn) -> Any:
    """A ``map_values`` / ``flat_map_values`` mapper as a function of ``(key, value)``: Kafka's
    ``ValueMapper`` is given the value, a ``ValueMapperWithKey`` the key too (read-only: the
    record keeps its key whatever the mapper does with it).

    Examples
    --------
    >>> value_mapper(ir.UserFn(str.upper, "(value) -> value"))("k", "v")
    'V'
    >>> value_mapper(ir.UserFn(lambda k, v: k + v, "(key, value) -> value"))("k", "v")
    'kv'
    """
    fn = mapper.fn
    if mapper.takes_key:
        return fn
    return lambda key, value: fn(value)


def joiner_of(joiner: ir.UserFn) -> Joiner:
    """A join node's joiner as the join kernels take it: the function of two values, or a
    `JoinerWithKey` (Kafka's ``ValueJoinerWithKey``) that each kernel gives the record's key."""
    return JoinerWithKey(joiner.fn) if joiner.takes_key else joiner.fn

AnyWindows = SessionWindows | TimeWindows | SlidingWindows


def _count_init() -> int:
    return 0


def _count_agg(key: Any, value: Any, agg: int) -> int:
    return agg + 1


def _count_merge(key: Any, a1: int, a2: int) -> int:
    return a1 + a2


def agg_functions(spec: ir.AggSpec) -> AggFunctions:
    """The functions Kafka Streams builds for ``count``, ``reduce`` and ``aggregate``.

    - count: ``(0, agg + 1, a1 + a2)``
    - reduce: initializer ``None``; aggregator ``v if agg is None else reducer(agg, v)``;
      merger ``a2 if a1 is None else reducer(a1, a2)``
    - aggregate: the user's functions.

    Examples
    --------
    >>> f = agg_functions(ir.CountAgg())
    >>> f.aggregator("k", "v", f.initializer())
    1
    """
    if isinstance(spec, ir.CountAgg):
        return AggFunctions(_count_init, _count_agg, _count_merge)
    if isinstance(spec, ir.ReduceAgg):
        assert isinstance(spec.reducer, ir.UserFn), "Column reducers compile natively"
        reducer = spec.reducer.fn

        def red_agg(key: Any, value: Any, agg: Any) -> Any:
            return value if agg is None else reducer(agg, value)

        def red_merge(key: Any, a1: Any, a2: Any) -> Any:
            return a2 if a1 is None else reducer(a1, a2)

        return AggFunctions(lambda: None, red_agg, red_merge)
    assert isinstance(spec, ir.AggregateAgg) and spec.initializer is not None
    assert isinstance(spec.aggregator, ir.UserFn), "Column aggregators compile natively"
    return AggFunctions(spec.initializer.fn, spec.aggregator.fn, spec.merger.fn if spec.merger is not None else None)


def function_names(spec: ir.AggSpec | None) -> tuple[str, str, str]:
    """How errors name an aggregation's initializer, aggregator and merger."""
    if isinstance(spec, ir.ReduceAgg):
        return ("initializer", "reducer", "reducer")
    return ("initializer", "aggregator", "merger")


def function_of(exc: BaseException, fns: AggFunctions, names: tuple[str, str, str]) -> str:
    """Which of the aggregation functions raised: the innermost of them in the traceback."""
    codes = {getattr(f, "__code__", None): name for f, name in zip((fns.initializer, fns.aggregator, fns.merger), names)
             if f is not None}
    found = "aggregation function"
    tb = exc.__traceback__
    while tb is not None:
        found = codes.get(tb.tb_frame.f_code, found)
        tb = tb.tb_next
    return found


def windowing_of(windows: AnyWindows | None, *, cached: bool = True) -> Windowing:
    """The semantics-core rule of a window specification (``None``: unwindowed); ``cached``: the
    aggregation's store has Kafka's record cache (emit on update with a cache), which decides
    which sessions a record still finds (`SessionWindowing.cached`)."""
    if windows is None:
        return Unwindowed()
    if isinstance(windows, SessionWindows):
        return SessionWindowing(windows.inactivity_gap_ms, windows.grace_period_ms, cached=cached)
    if isinstance(windows, TimeWindows):
        return TimeWindowing(windows.size_ms, windows.advance_ms, windows.grace_period_ms)
    return SlidingWindowing(windows.time_difference_ms, windows.grace_period_ms)


def key_codec(serde: PlanSerde, windows: AnyWindows | None) -> KeyCodec:
    """The output key layout of an aggregation with ``windows``."""
    if windows is None:
        return KeyCodec(serde)
    if isinstance(windows, SessionWindows):
        return SessionKeyCodec(serde)
    size = windows.size_ms if isinstance(windows, TimeWindows) else windows.time_difference_ms
    return TimeKeyCodec(serde, window_size_ms=size)


def builtin_serde(fn: ir.Fn | None) -> PlanSerde | None:
    """The value serde of a built-in (`Aggregations`) aggregate: Long for int, Double for float."""
    if isinstance(fn, ir.UserFn) and isinstance(fn.fn, BuiltinAggregator):
        return Serdes.Long() if fn.fn.value_type is int else Serdes.Double()
    return None


def agg_value_serde(node: ir.AggregateNode, input_value: PlanSerde) -> PlanSerde:
    """The serde an aggregation holds its aggregates in."""
    if node.value_serde is not None:
        return node.value_serde
    if isinstance(node.agg, ir.CountAgg):
        return Serdes.Long()
    if isinstance(node.agg, ir.ReduceAgg):
        return input_value
    return builtin_serde(node.agg.aggregator) or DEFAULT_SERDE


def cogroup_value_serde(node: ir.CogroupAggregateNode) -> PlanSerde:
    """The serde a cogroup holds its aggregates in."""
    return node.value_serde or builtin_serde(node.aggregators[0]) or DEFAULT_SERDE


def final_results_delay(windows: Any) -> int | None:
    """How long after a window's end Kafka's suppress releases it, for the window kinds whose
    release precedes the aggregation's close (Kafka's ``GraphGraceSearchUtil``: gap + grace
    for sessions, grace for sliding windows); ``None`` for time windows (release == close)."""
    if isinstance(windows, SessionWindows):
        return windows.inactivity_gap_ms + windows.grace_period_ms
    if isinstance(windows, SlidingWindows):
        return windows.grace_period_ms
    return None


def grouped_functions(agg: ir.GroupedTableAgg) -> GroupedTableFunctions:
    """A grouped table's initializer, adder and subtractor."""
    if agg.kind == "count":
        return GroupedTableFunctions.count()
    assert agg.adder is not None and agg.subtractor is not None
    if agg.kind == "reduce":
        return GroupedTableFunctions.reduce(agg.adder.fn, agg.subtractor.fn)
    assert agg.initializer is not None
    return GroupedTableFunctions(agg.initializer.fn, agg.adder.fn, agg.subtractor.fn)


def grouped_value_serde(node: ir.GroupedTableAggregateNode, grouped_value: PlanSerde) -> PlanSerde:
    """The serde a grouped table's aggregation holds its aggregates in."""
    if node.value_serde is not None:
        return node.value_serde
    if node.agg.kind == "count":
        return Serdes.Long()
    return grouped_value if node.agg.kind == "reduce" else DEFAULT_SERDE


def selector_pair(result: Any, node: str) -> tuple[Any, Any] | None:
    """A grouped table selector's result: a (key, value) pair (tuple, list, `KeyValue`) or None."""
    if result is None:
        return None
    if isinstance(result, (tuple, list)) and len(result) == 2:
        return result[0], result[1]
    raise InvalidTypeError(
        f"{node}: the selector must return a (key, value) pair or None (got {type(result).__name__}: {result!r}).")


def result_error(processor: str, function: str, exc: BaseException, key: str,
                 position: int | None) -> RecordSerializationError:
    """A user function's result that its serde cannot hold (``key``: the record's key as text)."""
    return RecordSerializationError(processor, f"the {function} returned a result its serde cannot hold: {exc}",
                                    key=key, position=position)


def sink_write_error(processor: str, what: str, exc: BaseException, key: str | None,
                     position: int | None) -> RecordSerializationError:
    """A sink's serde that cannot write the record's ``what`` (``"key"`` or ``"value"``)."""
    return RecordSerializationError(
        processor, f"cannot write the record {what}: {exc}. Give the sink a serde for this type "
        f"(Produced.with_serdes) or map the {what} to the type its serde writes", key=key, position=position)


def mapper_pair(result: Any, node: str) -> tuple[Any, Any]:
    """A ``map`` / ``flat_map`` mapper's result: a (key, value) pair (tuple, list, `KeyValue`)."""
    if isinstance(result, (tuple, list)) and len(result) == 2:
        return result[0], result[1]
    raise InvalidTypeError(
        f"{node}: the mapper must return a (key, value) pair (got {type(result).__name__}: {result!r}).")


def first_match(predicates: tuple[Any, ...], default: bool) -> Any:
    """A record goes to the first branch whose predicate holds (``KStreamBranch``)."""
    *earlier, own = predicates if predicates else (None,)

    def keep(k: Any, v: Any) -> bool:
        for p in earlier:
            if p(k, v):
                return False
        if default:
            return own is None or not own(k, v)
        return bool(own(k, v))

    return keep


def filtered_table_sides(topology: Any, node: ir.TableTableJoinNode | ir.ForeignKeyJoinNode) -> frozenset[str]:
    """The sides (``"left"``, ``"right"``) of a table–table join whose table reaches it through a
    ``KTable.filter`` / ``filter_not`` (among its stateless table steps)."""
    sides = set()
    for side, name in zip(("left", "right"), node.parents):
        step = topology.node(name)
        while isinstance(step, (ir.TableFilterNode, ir.TableMapValuesNode)):
            if isinstance(step, ir.TableFilterNode):
                sides.add(side)
                break
            step = topology.node(step.parents[0])
    return frozenset(sides)


def null_keys_pass(topology: Any, name: str) -> bool:
    """Whether the repartition ``name`` forwards records with a null key: only when a join that
    keeps them (a stream-table left join, a stream-stream left or outer join: KIP-962) is
    downstream of it (Kafka Streams' ``NodesWithRelaxedNullKeyJoinDownstream``). Otherwise its
    filter drops them, and streamsdsl counts them in ``dropped-records`` of the repartition node
    (Kafka's filter counts nothing: a deliberate difference, no record vanishes silently)."""
    todo, seen = [name], set()
    while todo:
        current = todo.pop()
        for child in topology.children(current):
            node = topology.node(child)
            if isinstance(node, ir.StreamTableJoinNode) and node.parents[0] != current:
                continue
            if isinstance(node, ir.GlobalTableJoinNode) and node.parents[0] != current:
                continue
            if isinstance(node, (ir.StreamTableJoinNode, ir.StreamStreamJoinNode, ir.GlobalTableJoinNode)) \
                    and node.kind != "inner":
                return True
            if child not in seen:
                seen.add(child)
                todo.append(child)
    return False
