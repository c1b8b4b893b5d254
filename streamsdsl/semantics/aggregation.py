"""The initializer / aggregator / merger triple behind count, reduce and aggregate."""

from __future__ import annotations

from typing import Any, Callable

import attrs

from streamsdsl import ir


@attrs.frozen
class AggFunctions:
    """Kafka Streams' three aggregation functions, as plain callables on Python values."""

    initializer: Callable[[], Any]
    aggregator: Callable[[Any, Any, Any], Any]  # (key, value, agg) -> agg
    merger: Callable[[Any, Any, Any], Any] | None = None  # (key, agg1, agg2) -> agg


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
    return AggFunctions(
        spec.initializer.fn,
        spec.aggregator.fn,
        spec.merger.fn if spec.merger is not None else None,
    )
