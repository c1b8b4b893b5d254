"""Recipes: a topology of the oracle harness as plain data, and how streamsdsl builds it.

A recipe is JSON (it is stored in case files and edited by the minimizer): a ``shape`` (what
stateful step sits in the middle), the stateless ``pre`` steps on the stream of topic ``in``,
``other_pre`` steps on the second input (topic ``other``) where the shape has one, the
``table_steps`` (``KTable`` ``filter`` / ``filter_not`` / ``map_values``) on the table a join or
a grouping reads, the shape's parameters in ``op``, and the stateless ``post`` steps on the
result before it is written to ``out``. With ``source_pattern`` (shapes that read only ``in``)
the stream of ``in`` is read by a pattern, `SOURCE_PATTERN`, whose records come from ``in``
and `PATTERN_TOPIC`. Every function is named from the menu (`oracle.menu`). `build` turns a recipe into a
streamsdsl `Topology` through the DSL, as a user would write it; `oracle.spec` then serializes
that topology's IR for Kafka Streams.

The shapes:

``stateless``
    ``pre`` steps only.
``aggregate``
    ``in`` (merged with ``other`` when ``op["merge"]``), ``group_by_key`` (or ``group_by``
    with ``op["group_by"]``), unwindowed or windowed (``op["windows"]``: session, time,
    sliding), emit on update or on close, ``count`` / ``reduce`` / ``aggregate``, optionally
    suppressed until the window closes (``op["suppress"]``) or, unwindowed, for
    ``op["time_limit"]`` ms.
``cogroup``
    the grouped streams ``in`` and ``other``, one aggregator each, unwindowed or windowed.
``stream_table``
    ``in`` joined (inner / left) with the table of ``other`` (the stream ``other`` made a
    table with ``to_table`` when ``op["table_from_stream"]``); with ``op["versioned"]`` the table
    is materialized with a versioned store of that ``history`` (ms) and the join has that
    ``grace`` period (ms, ``None``: none).
``global_table``
    ``in`` joined (inner / left) with the global table of ``other`` on the table key
    ``op["key_selector"]`` makes of each record (no repartition, whatever ``pre`` did to the key).
``stream_stream``
    ``in`` joined (inner / left / outer) with the stream ``other`` within ``op["windows"]``.
``table_table``
    the tables of ``in`` and ``other`` joined (inner / left / outer).
``fk_join``
    the table of ``in`` joined (inner / left) with the table of ``other`` by the foreign key
    ``op["extractor"]`` makes of its values (KIP-213), the result materialized when
    ``op["materialized"]``.
``grouped_table``
    the table of ``in`` re-keyed with ``op["selector"]`` and counted, reduced or aggregated.
``split``
    ``in`` split by ``op["predicates"]`` (and a default branch when ``op["default"]``), each
    branch written to ``out-<i>``.
``process``
    ``in`` through a processor of the processor menu (`oracle.processors`): ``op["processor"]``
    with ``op["params"]``, by ``process`` or, with ``op["values"]``, ``process_values``, named
    ``op["name"]`` (``None``: the default name), its store added with ``add_state_store`` with the
    options ``op["store"]``; then, when ``op["then"]`` is there, through a second, other processor
    of the menu (the same fields): two processors of one task, each with its store and its
    punctuators. ``store_size`` forwards records of two value types (the records it passes on and
    its punctuations): a processor takes them (``dedup`` passes both on, ``window_count``
    forwards counts), a ``post`` step does not.
"""

from __future__ import annotations

import re
from typing import Any

from streamsdsl import BufferConfig, Consumed, EmitStrategy, JoinWindows, Serdes, SessionWindows, SlidingWindows
from streamsdsl import Joined, Materialized, Stores, StreamsBuilder, Suppressed, TimeWindows
from streamsdsl.dsl.api import KStream
from streamsdsl.ir.topology import Topology

from oracle.menu import by_name
from oracle.processors import PROCESSORS, store_builder, store_name, supplier

__all__ = ["PATTERN_TOPIC", "SOURCE_PATTERN", "RecipeError", "build", "step_types", "value_type"]

STRINGS = Consumed.with_serdes(Serdes.String(), Serdes.String())
#: The pattern of the ``in`` source of a recipe with ``source_pattern`` (Kafka Streams'
#: ``stream(Pattern)``): it reads ``in`` and `PATTERN_TOPIC`, and not ``other``.
SOURCE_PATTERN = "in(-[a-z]+)?"
PATTERN_TOPIC = "in-eu"

#: The menu role of each stateless step.
STEP_ROLES = {
    "filter": "predicate",
    "filter_not": "predicate",
    "map_values": "value_mapper",
    "map": "mapper",
    "flat_map": "flat_mapper",
    "flat_map_values": "flat_value_mapper",
    "select_key": "key_selector",
    "table_filter": "predicate",
    "table_filter_not": "predicate",
    "table_map_values": "value_mapper",
}

#: The DSL method of each table step (``table_steps``).
TABLE_METHODS = {"table_filter": "filter", "table_filter_not": "filter_not", "table_map_values": "map_values"}

#: Steps that change the key (Kafka Streams repartitions before the next stateful step).
KEY_CHANGING = frozenset({"map", "flat_map", "select_key"})


class RecipeError(ValueError):
    """A recipe whose steps do not fit together (a function given a value type it does not take)."""


def _fits(takes: str | None, value_type: str) -> bool:
    return takes is None or takes == value_type


def step_types(steps: list[dict[str, str]], value_type: str) -> str:
    """The value type after ``steps`` applied to values of ``value_type``; `RecipeError` if a
    step's function does not take the type it is given or plays another role."""
    for step in steps:
        fn = by_name(step["fn"])
        if fn.kind != STEP_ROLES[step["op"]]:
            raise RecipeError(f"{step['op']} takes a {STEP_ROLES[step['op']]}, not the {fn.kind} {fn.name}")
        if not _fits(fn.takes, value_type):
            raise RecipeError(f"{fn.name} takes {fn.takes} values, not {value_type}")
        if step["op"] in ("map_values", "map", "flat_map", "flat_map_values", "table_map_values"):
            value_type = fn.gives or value_type
    return value_type


def value_type(recipe: dict[str, Any]) -> str:
    """The value type of the recipe's output (checks every step on the way: `RecipeError`)."""
    shape, op = recipe["shape"], recipe.get("op", {})
    after_pre = step_types(recipe["pre"], "str")
    other = step_types(recipe.get("other_pre", []), "str")
    # a table made from the other stream (to_table) has the values its steps made
    table = step_types(recipe.get("table_steps", []), other if op.get("table_from_stream") else "str")
    if op.get("merge") and other != after_pre:
        raise RecipeError(f"merge of {after_pre} and {other} values")
    if shape in ("stateless", "split"):
        result = after_pre
    elif shape == "aggregate":
        agg = op["agg"]
        if op.get("group_by"):
            _check(op["group_by"], "key_selector", after_pre)
        if agg["kind"] == "count":
            result = "long"
        elif agg["kind"] == "reduce":
            _check(agg["reducer"], "reducer", after_pre)
            result = after_pre
        else:
            result = _check(agg["initializer"], "initializer", None)
            _check(agg["aggregator"], "aggregator", after_pre, result)
            if agg.get("merger"):
                _check(agg["merger"], "merger", result, result)
    elif shape == "cogroup":
        result = _check(op["initializer"], "initializer", None)
        _check(op["aggregators"][0], "aggregator", after_pre, result)
        _check(op["aggregators"][1], "aggregator", other, result)
        if op.get("merger"):
            _check(op["merger"], "merger", result, result)
    elif shape == "grouped_table":
        _check(op["selector"], "table_selector", table)
        kind = op["kind"]
        if kind == "count":
            result = "long"
        elif kind == "reduce":
            result = _check(op["adder"], "table_reducer", "str", "str")
            _check(op["subtractor"], "table_reducer", "str", "str")
        else:
            result = _check(op["initializer"], "initializer", None)
            _check(op["adder"], "table_aggregator", "str", result)
            _check(op["subtractor"], "table_aggregator", "str", result)
    elif shape == "fk_join":
        _check(op["extractor"], "fk_extractor", table)
        result = "str"
    elif shape == "global_table":
        _check(op["key_selector"], "key_selector", after_pre)
        result = "str"
    elif shape == "process":
        result = _process_type(op, after_pre)
        if op.get("then"):
            if op["then"]["processor"] == op["processor"]:
                raise RecipeError(f"{op['processor']} twice: the second processor is another one (one store each)")
            result = _process_type(op["then"], result)
        if result == "mixed" and recipe["post"]:
            raise RecipeError("no step after processors that forward records of two value types (store_size)")
    else:  # the joins
        result = "str"
    return step_types(recipe["post"], result)


def _process_type(op: dict[str, Any], value: str) -> str:
    """The value type a processor of the menu forwards, given records of ``value`` (``"mixed"``:
    strings and longs)."""
    name = op["processor"]
    if name not in PROCESSORS:
        raise RecipeError(f"{name!r} is not on the oracle's menu of processors")
    if op["values"] and not PROCESSORS[name]:
        raise RecipeError(f"{name} has no process_values variant")
    if name == "dedup":
        return value
    if name == "window_count":
        return "long"
    return "mixed"


def _check(name: str, kind: str, takes: str | None, gives: str | None = None) -> str:
    fn = by_name(name)
    if fn.kind != kind:
        raise RecipeError(f"{name} is a {fn.kind}, not a {kind}")
    if takes is not None and not _fits(fn.takes, takes):
        raise RecipeError(f"{name} takes {fn.takes} values, not {takes}")
    if gives is not None and fn.gives != gives:
        raise RecipeError(f"{name} gives {fn.gives}, not {gives}")
    return fn.gives or (takes or "str")


def _apply(stream: Any, steps: list[dict[str, str]]) -> Any:
    """``steps`` applied to a stream (or, for table steps, a table)."""
    for step in steps:
        stream = getattr(stream, TABLE_METHODS.get(step["op"], step["op"]))(by_name(step["fn"]).fn)
    return stream


def _windows(spec: dict[str, Any]) -> Any:
    if spec["kind"] == "session":
        return SessionWindows.of_inactivity_gap_and_grace(spec["gap"], spec["grace"])
    if spec["kind"] == "time":
        return TimeWindows.of_size_and_grace(spec["size"], spec["grace"]).advance_by(spec["advance"])
    return SlidingWindows.of_time_difference_and_grace(spec["difference"], spec["grace"])


def _fn(name: str | None) -> Any:
    return by_name(name).fn


def build(recipe: dict[str, Any]) -> Topology:
    """The streamsdsl topology of ``recipe`` (its types checked first: `RecipeError`)."""
    value_type(recipe)
    b = StreamsBuilder()
    shape, op = recipe["shape"], recipe.get("op", {})
    if shape in ("table_table", "grouped_table", "fk_join"):
        stream = None
    else:
        source = re.compile(SOURCE_PATTERN) if recipe.get("source_pattern") else "in"
        stream = _apply(b.stream(source, STRINGS), recipe["pre"])
    if shape == "stateless":
        out = stream
    elif shape == "split":
        split = stream.split()
        for predicate in op["predicates"]:
            split = split.branch(_fn(predicate))
        branches = split.default_branch() if op["default"] else split.no_default_branch()
        for i, branch in enumerate(branches.values()):
            _apply(branch, recipe["post"]).to(f"out-{i}")
        return b.build()
    elif shape == "aggregate":
        if op.get("merge"):
            stream = stream.merge(_apply(b.stream("other", STRINGS), recipe["other_pre"]))
        out = _aggregate(stream, op)
    elif shape == "cogroup":
        other = _apply(b.stream("other", STRINGS), recipe["other_pre"])
        co = stream.group_by_key().cogroup(_fn(op["aggregators"][0])).cogroup(
            other.group_by_key(), _fn(op["aggregators"][1]))
        if op["windows"] is None:
            table = co.aggregate(_fn(op["initializer"]))
        elif op["windows"]["kind"] == "session":
            table = co.windowed_by(_windows(op["windows"])).aggregate(_fn(op["initializer"]), _fn(op["merger"]))
        else:
            table = co.windowed_by(_windows(op["windows"])).aggregate(_fn(op["initializer"]))
        out = table.to_stream()
    elif shape == "stream_table":
        versioned = op.get("versioned")
        store = None if versioned is None else Materialized.as_(
            Stores.persistent_versioned_key_value_store("versions", versioned["history"]))
        if op.get("table_from_stream"):
            table = _apply(b.stream("other", STRINGS), recipe["other_pre"]).to_table(materialized=store)
        else:
            table = b.table("other", STRINGS, store)
        table = _apply(table, recipe.get("table_steps", []))
        joiner = _fn(op["joiner"])
        joined = None if versioned is None or versioned["grace"] is None else Joined.with_grace_period(versioned["grace"])
        out = stream.join(table, joiner, joined=joined) if op["kind"] == "inner" \
            else stream.left_join(table, joiner, joined=joined)
    elif shape == "global_table":
        table = b.global_table("other", STRINGS)
        method = stream.join if op["kind"] == "inner" else stream.left_join
        out = method(table, _fn(op["key_selector"]), _fn(op["joiner"]))
    elif shape == "stream_stream":
        other = _apply(b.stream("other", STRINGS), recipe["other_pre"])
        w = op["windows"]
        windows = JoinWindows.of_time_difference_and_grace(w["after"], w["grace"]).before(w["before"])
        method = {"inner": "join", "left": "left_join", "outer": "outer_join"}[op["kind"]]
        out = getattr(stream, method)(other, _fn(op["joiner"]), windows)
    elif shape == "table_table":
        left, right = _apply(b.table("in", STRINGS), recipe.get("table_steps", [])), b.table("other", STRINGS)
        method = {"inner": "join", "left": "left_join", "outer": "outer_join"}[op["kind"]]
        out = getattr(left, method)(right, _fn(op["joiner"])).to_stream()
    elif shape == "fk_join":
        left, right = _apply(b.table("in", STRINGS), recipe.get("table_steps", [])), b.table("other", STRINGS)
        method = left.join if op["kind"] == "inner" else left.left_join
        options = {"materialized": Materialized.as_("fk-store")} if op.get("materialized") else {}
        out = method(right, _fn(op["extractor"]), _fn(op["joiner"]), **options).to_stream()
    elif shape == "process":
        out = _process(b, stream, op)
    elif shape == "grouped_table":
        grouped = _apply(b.table("in", STRINGS), recipe.get("table_steps", [])).group_by(_fn(op["selector"]))
        if op["kind"] == "count":
            table = grouped.count()
        elif op["kind"] == "reduce":
            table = grouped.reduce(_fn(op["adder"]), _fn(op["subtractor"]))
        else:
            table = grouped.aggregate(_fn(op["initializer"]), _fn(op["adder"]), _fn(op["subtractor"]))
        out = table.to_stream()
    else:
        raise RecipeError(f"unknown shape {shape!r}")
    _apply(out, recipe["post"]).to("out")
    return b.build()


def _process(b: StreamsBuilder, stream: KStream, op: dict[str, Any]) -> KStream:
    """``stream`` through the op's processor (and then the second one, ``op["then"]``)."""
    for processor in (op, op.get("then")):
        if processor:
            b.add_state_store(store_builder(processor))
            method = stream.process_values if processor["values"] else stream.process
            stream = method(supplier(processor), store_name(processor["processor"]), named=processor["name"])
    return stream


def _aggregate(stream: KStream, op: dict[str, Any]) -> KStream:
    grouped = stream.group_by(_fn(op["group_by"])) if op.get("group_by") else stream.group_by_key()
    agg = op["agg"]
    if op["windows"] is not None:
        grouped = grouped.windowed_by(_windows(op["windows"]))
        if op["emit_on_close"]:
            grouped = grouped.emit_strategy(EmitStrategy.on_window_close())
    if agg["kind"] == "count":
        table = grouped.count()
    elif agg["kind"] == "reduce":
        table = grouped.reduce(_fn(agg["reducer"]))
    elif op["windows"] is not None and op["windows"]["kind"] == "session":
        table = grouped.aggregate(_fn(agg["initializer"]), _fn(agg["aggregator"]), _fn(agg["merger"]))
    else:
        table = grouped.aggregate(_fn(agg["initializer"]), _fn(agg["aggregator"]))
    if op.get("suppress"):
        table = table.suppress(Suppressed.until_window_closes(BufferConfig.unbounded()))
    if op.get("time_limit") is not None:
        table = table.suppress(Suppressed.until_time_limit(op["time_limit"], BufferConfig.unbounded()))
    return table.to_stream()
