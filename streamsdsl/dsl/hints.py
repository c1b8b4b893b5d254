"""Where a stage's missing method exists: a method that only other stages have is answered
with a `StageMethodError` naming the stage that has it and what to write. Each stage class
holds its table as ``_hints`` (read along its MRO by ``_Hinted.__getattr__``); this module
imports no stage.
"""

from __future__ import annotations

__all__ = ["COGROUPED", "GROUPED", "GROUPED_STREAM", "STREAM", "TABLE", "WINDOWED_COGROUPED", "WINDOWED_GROUPED"]


def _hints(where: str, fix: str, *methods: str) -> dict[str, str]:
    return {method: f"{method}() exists on {where}; {fix}." for method in methods}


_GROUP_FIRST = "group first: group_by_key() or group_by(selector)"
_WINDOW_FIRST = "window first: windowed_by(SessionWindows | TimeWindows | SlidingWindows)"
_AGGREGATE_FIRST = "aggregate first: count(), reduce() or aggregate() return a KTable"
_TABLE_GROUP_BY = "group the table first: group_by(lambda key, value: (new_key, value)) returns a KGroupedTable"
_STREAM_STEPS = ("filter", "filter_not", "map", "map_values", "flat_map", "flat_map_values", "select_key", "peek",
                 "merge", "join", "left_join", "split", "to_table", "repartition")
_COGROUP_HINTS = {
    **_hints("grouped streams", "a cogroup aggregates with aggregate(initializer), each stream with the aggregator "
             "given to cogroup()", "count", "reduce"),
    **_hints("KTable", "aggregate first: aggregate(initializer) returns a KTable", "to_stream"),
    **_hints("KStream", "aggregate first, then to_stream().to(topic)", "to"),
}
_WINDOWED_HINTS = {
    **_hints("KGroupedStream and CogroupedKStream", "this stream is already windowed, and a stream is windowed once",
             "windowed_by"),
    **_hints("KGroupedStream", "cogroup before windowing: grouped.cogroup(aggregator).windowed_by(windows)",
             "cogroup"),
}

#: A `KStream`'s.
STREAM = {
    **_hints("grouped streams", _GROUP_FIRST, "count", "reduce", "aggregate", "windowed_by", "cogroup"),
    **_hints("windowed streams", f"{_GROUP_FIRST}, then windowed_by(windows)", "emit_strategy"),
    **_hints("KTable", "this is already a stream", "to_stream"),
}
#: Every grouped stream's (grouped, windowed or not).
GROUPED = {
    **_hints("KStream", "call it before grouping, or on the aggregated table's to_stream()", *_STREAM_STEPS),
    **_hints("KStream", "aggregate first, then to_stream().to(topic)", "to"),
    **_hints("KStream", "call it before grouping, or on the aggregated table's to_stream()", "foreach", "print"),
    **_hints("KStream", "this stream is already grouped", "group_by_key", "group_by"),
    **_hints("KTable", _AGGREGATE_FIRST, "to_stream"),
}
#: A `KGroupedStream`'s (before windowing).
GROUPED_STREAM = _hints("windowed streams", _WINDOW_FIRST, "emit_strategy")
#: A windowed grouped stream's.
WINDOWED_GROUPED = _WINDOWED_HINTS
#: A `KTable`'s.
TABLE = {
    **_hints("grouped tables", _TABLE_GROUP_BY, "count", "reduce", "aggregate"),
    **_hints("grouped streams", "call to_stream() first, then group_by_key()", "windowed_by", "cogroup"),
    **_hints("KStream", _TABLE_GROUP_BY, "group_by_key"),
    **_hints("windowed streams", "set it before aggregating: windowed_by(windows).emit_strategy(strategy)",
             "emit_strategy"),
    **_hints("KStream", "call to_stream() first", "to", "map", "flat_map", "flat_map_values", "select_key", "peek",
             "merge", "split", "to_table", "foreach", "print", "repartition"),
}
#: A `CogroupedKStream`'s.
COGROUPED = {**_COGROUP_HINTS, **_hints("windowed cogroups", _WINDOW_FIRST, "emit_strategy")}
#: A windowed cogroup's.
WINDOWED_COGROUPED = {**_COGROUP_HINTS, **_WINDOWED_HINTS}
