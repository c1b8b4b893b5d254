"""The initializer / aggregator / merger triple behind count, reduce and aggregate (the
compiler builds it from an IR aggregation, `streamsdsl.compiler.aggregations.agg_functions`)."""

from __future__ import annotations

from typing import Any, Callable

import attrs


@attrs.frozen
class AggFunctions:
    """Kafka Streams' three aggregation functions, as plain callables on Python values."""

    initializer: Callable[[], Any]
    aggregator: Callable[[Any, Any, Any], Any]  # (key, value, agg) -> agg
    merger: Callable[[Any, Any, Any], Any] | None = None  # (key, agg1, agg2) -> agg
