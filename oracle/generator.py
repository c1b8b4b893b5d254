"""A seeded generator of oracle cases: a random recipe (`oracle.recipe`) and a random input.

``generate(seed, index)`` is a pure function of its arguments: the same seed and index give
the same case on every machine. Inputs have out-of-order and late records (timestamps step
back by more than any grace), timestamp ties, jumps in time, and ``None`` keys and values; for
shapes with two inputs, records of both topics interleave. Each case runs with Kafka Streams'
record cache on (the driver default, flushed after every record) or, one case in four, off
(``statestore.cache.max.bytes`` 0) in both systems.

What the generator leaves out, and why, is listed in `LEFT_OUT` (and in docs/testing.md).
"""

from __future__ import annotations

import random
from typing import Any

import attrs

from oracle.menu import MENU, MenuFn
from oracle.processors import PROCESSORS
from oracle.recipe import KEY_CHANGING, PATTERN_TOPIC, STEP_ROLES, step_types, value_type

__all__ = ["Case", "FK_SHARE", "LEFT_OUT", "PROCESS_SHARE", "SHAPES_APART", "WALL_CLOCK", "generate"]

#: What the generator never produces, with the reason; docs/testing.md shows this list.
LEFT_OUT: dict[str, str] = {
    "emit on window close for a windowed cogroup": "Kafka Streams has no emit strategy on a windowed cogroup "
    "(a deliberate streamsdsl addition, docs/differences.md): there is nothing to compare with.",
    "a cogroup of two re-keyed streams": "both systems refuse the topology (Kafka Streams: 'Processor "
    "...-repartition-filter is already added'; streamsdsl: the same name, already used): both name each "
    "stream's repartition after the cogroup's store; only the stream of topic in is re-keyed.",
    "several partitions per topic": "Kafka Streams' TopologyTestDriver runs every topic as one partition.",
    "JSON values, headers": "the menu's functions read and return strings and longs only; headers pass "
    "through unchanged and no menu function reads them.",
    "steps after a left or outer stream-stream join": "the comparison finds the non-joined results (whose "
    "timing differs, docs/differences.md, Joins) by the joiner's text for the missing side, which a later "
    "map_values would change.",
    "peek": "its action's effects are outside the records compared; the oracle has no rule for it.",
    "foreach, print": "terminal steps whose effects are outside the records compared; their names, describe() "
    "and print format are checked against Kafka Streams' sources in tests/test_foreach_print.py.",
    "suppress after a join, a cogroup or a table step; until_time_limit of a windowed table": "streamsdsl "
    "refuses them (docs/differences.md, Not yet implemented).",
    "steps after a windowed aggregation that read the Windowed key": "the menu's functions take string keys; "
    "a windowed table's records are compared by (key, start, end).",
    "a re-keyed stream's table (to_table after map) and the other side of a join re-keyed": "not "
    "generated yet: only the stream side of a join (topic in) is re-keyed.",
    "a grace period in a left stream-table join": "Kafka Streams' grace buffer cannot hold a null key "
    "(KStreamKTableJoinProcessor puts it and fails with a NullPointerException) while its left join keeps null-key "
    "records (KIP-962); streamsdsl joins such a record at once (docs/differences.md).",
    "wall-clock punctuators but store_size's": "dedup purges by stream time; a case advances both drivers' wall "
    "clocks (from 0) only where store_size punctuates by the wall clock.",
    "approximate_num_entries of a persistent or a caching store": "Kafka Streams' answer is an estimate there: "
    "RocksDB's estimate-num-keys, and a caching store counts only what its cache has flushed to the store "
    "beneath (0 for a key put in the same record); the generator asks it of an in-memory store without "
    "caching, where Kafka's answer is exact, and counts over all() otherwise.",
    "processors off the menu, more than two processors, a stateful step after a processor": "the processors are "
    "a fixed menu written in both languages (oracle/processors.py, Processors.java); a process recipe holds one "
    "or two of them (two different ones, one store each) and ends in stateless steps.",
}

KEYS = ["a", "b", "c", "ab", None]
KEY_WEIGHTS = [5, 4, 2, 1, 1]
VALUES = ["x", "yy", "zzz", "ab", "x y", None]
VALUE_WEIGHTS = [4, 3, 2, 2, 1, 2]


@attrs.frozen
class Case:
    """One oracle case: the recipe, the input records ``(topic, key, value, timestamp)`` in pipe
    order, and whether the record cache is on."""

    recipe: dict[str, Any]
    records: tuple[tuple[str, str | None, str | None, int], ...] = attrs.field(converter=tuple)
    cache: bool = True

    def to_json(self) -> dict[str, Any]:
        return {"recipe": self.recipe, "records": [list(r) for r in self.records], "cache": self.cache}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Case:
        return cls(data["recipe"], [tuple(r) for r in data["records"]], data["cache"])


def _menu(kind: str, takes: str) -> list[MenuFn]:
    return [f for f in MENU.values() if f.kind == kind and f.takes in (None, takes)]


def _steps(rng: random.Random, value: str, count: int, ops: list[str]) -> tuple[list[dict[str, str]], str]:
    steps: list[dict[str, str]] = []
    for _ in range(count):
        op = rng.choice(ops)
        choices = _menu(STEP_ROLES[op], value)
        if not choices:
            continue
        step = {"op": op, "fn": rng.choice(choices).name}
        value = step_types([step], value)
        steps.append(step)
    return steps, value


STATELESS = ["filter", "filter_not", "map_values", "map", "flat_map", "flat_map_values", "select_key"]
KEY_KEEPING = [op for op in STATELESS if op not in KEY_CHANGING]
#: After a windowed aggregation: steps that read values only.
VALUE_ONLY = ["map_values"]
TABLE_STEPS = ["table_filter", "table_filter_not", "table_map_values"]


def _windows(rng: random.Random, kinds: tuple[str, ...]) -> dict[str, Any]:
    kind = rng.choice(kinds)
    grace = rng.choice([0, 0, 2, 5])
    if kind == "session":
        return {"kind": "session", "gap": rng.choice([2, 5, 10]), "grace": grace}
    if kind == "time":
        size = rng.choice([5, 10])
        return {"kind": "time", "size": size, "advance": rng.choice([size, size // 2 or 1, 3]), "grace": grace}
    return {"kind": "sliding", "difference": rng.choice([3, 5]), "grace": grace}


def _aggregation(rng: random.Random, value: str, session: bool) -> dict[str, Any]:
    kind = rng.choice(["count", "reduce", "aggregate"])
    if kind == "count":
        return {"kind": "count"}
    if kind == "reduce":
        return {"kind": "reduce", "reducer": rng.choice(_menu("reducer", value)).name}
    aggregator = rng.choice(_menu("aggregator", value))
    initializer = next(f for f in MENU.values() if f.kind == "initializer" and f.gives == aggregator.gives)
    merger = next(f for f in MENU.values() if f.kind == "merger" and f.gives == aggregator.gives)
    return {"kind": "aggregate", "initializer": initializer.name, "aggregator": aggregator.name,
            "merger": merger.name if session else None}


def _recipe(rng: random.Random) -> dict[str, Any]:
    shape = rng.choices(
        ["stateless", "aggregate", "cogroup", "stream_table", "stream_stream", "table_table", "grouped_table", "split"],
        [1, 6, 2, 2, 3, 2, 2, 1])[0]
    recipe: dict[str, Any] = {"shape": shape, "pre": [], "other_pre": [], "table_steps": [], "op": {}, "post": []}
    if shape in ("table_table", "grouped_table"):
        pre_value = "str"
    elif shape in ("stream_table", "stream_stream"):  # a key change before a join: one case in four
        ops = STATELESS if rng.random() < 0.25 else KEY_KEEPING
        recipe["pre"], pre_value = _steps(rng, "str", rng.randint(0, 2), ops)
    else:
        recipe["pre"], pre_value = _steps(rng, "str", rng.randint(0, 3), STATELESS)
    op = recipe["op"]
    post_ops = VALUE_ONLY
    if shape == "stateless":
        post_ops = []
    elif shape == "split":
        op["predicates"] = [rng.choice(_menu("predicate", pre_value)).name for _ in range(rng.randint(1, 2))]
        op["default"] = rng.random() < 0.6
        post_ops = []
    elif shape == "aggregate":
        if rng.random() < 0.15:
            recipe["other_pre"], other_value = _steps(rng, "str", rng.randint(0, 1), KEY_KEEPING)
            op["merge"] = other_value == pre_value
            if not op["merge"]:
                recipe["other_pre"] = []
        if rng.random() < 0.25:
            op["group_by"] = rng.choice(_menu("key_selector", pre_value)).name
        windowed = rng.random() < 0.75
        op["windows"] = _windows(rng, ("session", "time", "sliding")) if windowed else None
        op["emit_on_close"] = windowed and rng.random() < 0.4
        op["agg"] = _aggregation(rng, pre_value, windowed and op["windows"]["kind"] == "session")
        op["suppress"] = windowed and not op["emit_on_close"] and rng.random() < 0.2
        if not windowed:
            op["time_limit"] = rng.choice([0, 3, 10]) if rng.random() < 0.4 else None
            post_ops = KEY_KEEPING[:3]
    elif shape == "cogroup":
        # a key change on one side only: see LEFT_OUT
        recipe["other_pre"], other_value = _steps(rng, "str", rng.randint(0, 2), KEY_KEEPING)
        gives = rng.choice(["str", "long"])
        pick = [f for f in MENU.values() if f.kind == "aggregator" and f.gives == gives]
        first = [f.name for f in pick if f.takes == pre_value]
        second = [f.name for f in pick if f.takes == other_value]
        if not first or not second:
            gives = "long"
            first = ["add" if pre_value == "long" else "add_length"]
            second = ["add" if other_value == "long" else "add_length"]
        windowed = rng.random() < 0.6
        op["windows"] = _windows(rng, ("session", "time", "sliding")) if windowed else None
        op["aggregators"] = [rng.choice(first), rng.choice(second)]
        op["initializer"] = "empty" if gives == "str" else "zero"
        op["merger"] = ("concat_bar" if gives == "str" else "plus") if windowed and op["windows"]["kind"] == "session" \
            else None
    elif shape == "stream_table":
        op["kind"] = rng.choice(["inner", "left"])
        op["joiner"] = rng.choice(["pair", "key_pair"])
        op["table_from_stream"] = rng.random() < 0.3
        table_value = "str"
        if op["table_from_stream"]:
            # the table's values are what the stream's steps made of them (a length is a long)
            recipe["other_pre"], table_value = _steps(rng, "str", rng.randint(0, 1), KEY_KEEPING)
        recipe["table_steps"], _ = _steps(rng, table_value, rng.randint(0, 1), TABLE_STEPS)
        if rng.random() < 0.4:  # a versioned table (KIP-914), with a grace period (KIP-923) in an inner join
            history = rng.choice([0, 3, 10, 1000])
            grace = rng.choice([None, 0, 2, 5]) if op["kind"] == "inner" else None
            op["versioned"] = {"history": history, "grace": None if grace is None else min(grace, history)}
    elif shape == "stream_stream":
        recipe["other_pre"], _ = _steps(rng, "str", rng.randint(0, 1), KEY_KEEPING)
        difference = rng.choice([0, 2, 5])
        op["kind"] = rng.choice(["inner", "left", "outer"])
        op["windows"] = {"before": rng.choice([difference, 0, 3]), "after": difference,
                         "grace": rng.choice([0, 2, 5])}
        op["joiner"] = rng.choice(["pair", "key_pair"])
        if op["kind"] != "inner":  # see LEFT_OUT
            post_ops = []
    elif shape == "table_table":
        op["kind"] = rng.choice(["inner", "left", "outer"])
        op["joiner"] = "pair"
        recipe["table_steps"], _ = _steps(rng, "str", rng.randint(0, 1), TABLE_STEPS)
    elif shape == "grouped_table":
        steps, value = _steps(rng, "str", rng.randint(0, 1), TABLE_STEPS)
        recipe["table_steps"] = steps if value == "str" else []
        op["selector"] = rng.choice(_menu("table_selector", "str")).name
        op["kind"] = rng.choice(["count", "reduce", "aggregate"])
        if op["kind"] == "reduce":
            op["adder"], op["subtractor"] = "concat_adder", "strip_subtractor"
        elif op["kind"] == "aggregate":
            op["initializer"], op["adder"], op["subtractor"] = "zero", "add_length_adder", "sub_length_subtractor"
        post_ops = KEY_KEEPING[:3]
    if post_ops and rng.random() < 0.4:
        recipe["post"], _ = _steps(rng, value_type({**recipe, "post": []}), 1, post_ops)
    value_type(recipe)
    return recipe


def _records(rng: random.Random, topics: list[str]) -> list[tuple[str, str | None, str | None, int]]:
    records = []
    now = rng.randint(0, 5)
    for _ in range(rng.randint(1, 16)):
        move = rng.random()
        if move < 0.15:
            ts = now  # a tie
        elif move < 0.3:
            ts = max(0, now - rng.randint(1, 15))  # out of order, often later than any grace
        elif move < 0.38:
            now += rng.randint(15, 40)  # a jump that closes windows
            ts = now
        else:
            now += rng.randint(1, 6)
            ts = now
        key = rng.choices(KEYS, KEY_WEIGHTS)[0]
        value = rng.choices(VALUES, VALUE_WEIGHTS)[0]
        records.append((rng.choice(topics), key, value, ts))
    return records


#: The share of generated cases that run a processor of the menu (`_process_recipe`), decided
#: by a random stream of its own, so that every other case is the one this seed and index gave
#: before processors were on the menu.
PROCESS_SHARE = 0.15


def _processor(rng: random.Random, name: str) -> dict[str, Any]:
    """Processor ``name`` of the menu with drawn parameters and store options."""
    store = {"persistent": rng.random() < 0.5, "caching": rng.random() < 0.5, "logging": rng.random() < 0.8}
    if name == "dedup":
        params: dict[str, Any] = {"by": rng.choice(["value", "value", "key"]), "horizon": rng.choice([0, 3, 10, 30]),
                                  "interval": rng.choice([1, 4, 10])}
    elif name == "window_count":
        params = {"size": rng.choice([3, 5, 10])}
        store["retention"] = rng.choice([params["size"], 2 * params["size"], 25])
    else:
        params = {"interval": rng.choice([1, 4, 10]), "emit": rng.choice(["count", "entries", "approximate"]),
                  "punctuation": rng.choice(["stream_time", "stream_time", "wall_clock"])}
        if params["emit"] == "approximate":  # see LEFT_OUT
            store["persistent"] = store["caching"] = False
    return {"processor": name, "values": PROCESSORS[name] and rng.random() < 0.5,
            "name": name.replace("_", "-") if rng.random() < 0.75 else None, "params": params, "store": store}


def _process_recipe(rng: random.Random) -> dict[str, Any]:
    """A recipe of shape ``process``: up to two stateless steps, a processor of the menu with
    its store, one case in three a second, other processor after it, and (unless the last
    forwards two value types) up to one step that keeps the key."""
    recipe: dict[str, Any] = {"shape": "process", "pre": [], "other_pre": [], "table_steps": [], "op": {}, "post": []}
    recipe["pre"], _ = _steps(rng, "str", rng.randint(0, 2), STATELESS)
    first = rng.choice(sorted(PROCESSORS))
    recipe["op"] = _processor(rng, first)
    if rng.random() < 1 / 3:
        recipe["op"]["then"] = _processor(rng, rng.choice(sorted(set(PROCESSORS) - {first})))
    value = value_type(recipe)
    if value != "mixed" and rng.random() < 0.4:  # no step reads two value types
        recipe["post"], _ = _steps(rng, value, 1, KEY_KEEPING[:3])
    value_type(recipe)
    return recipe


#: The "topic" of an input entry ``(WALL_CLOCK, None, None, ms)`` that advances both drivers'
#: wall clocks (which start at 0) by ``ms`` instead of piping a record.
WALL_CLOCK = "@wall-clock"


def _wall_clock(recipe: dict[str, Any]) -> bool:
    """Whether the recipe has a wall-clock punctuator."""
    op = recipe["op"]
    return any(p and p["params"].get("punctuation") == "wall_clock" for p in (op, op.get("then")))


def _with_wall_clock(rng: random.Random, records: list[tuple[str, str | None, str | None, int]]
                     ) -> list[tuple[str, str | None, str | None, int]]:
    """``records`` with the wall clock advanced (1 to 25 ms) before one record in three and at the end."""
    out: list[tuple[str, str | None, str | None, int]] = []
    for record in records:
        if rng.random() < 1 / 3:
            out.append((WALL_CLOCK, None, None, rng.randint(1, 25)))
        out.append(record)
    return [*out, (WALL_CLOCK, None, None, rng.randint(1, 25))]


#: The share of generated cases that join two tables by a foreign key (`_fk_recipe`), drawn as
#: the processor cases are: from a generator of their own, so that every other case is the one
#: its seed and index gave before.
FK_SHARE = 0.1


def _fk_recipe(rng: random.Random) -> dict[str, Any]:
    """A foreign-key join (KIP-213) of the tables ``in`` and ``other``: inner or left, an
    extractor of the menu (one gives ``None`` for some values), the result materialized or not,
    a table step on ``in`` that keeps string values, a value step after."""
    steps, value = _steps(rng, "str", rng.randint(0, 1), TABLE_STEPS)
    op = {"kind": rng.choice(["inner", "left"]), "joiner": "pair",
          "extractor": rng.choice(_menu("fk_extractor", "str")).name, "materialized": rng.random() < 0.3}
    recipe = {"shape": "fk_join", "pre": [], "other_pre": [], "table_steps": steps if value == "str" else [],
              "op": op, "post": []}
    if rng.random() < 0.3:
        recipe["post"], _ = _steps(rng, "str", 1, VALUE_ONLY)
    value_type(recipe)
    return recipe


def _global_table_recipe(rng: random.Random) -> dict[str, Any]:
    """A recipe of shape ``global_table``: up to two stateless steps (one case in three a key
    change, which a global-table join does not repartition), an inner or left join with the
    global table of topic ``other`` on a key selector of the menu, up to one value step after."""
    recipe: dict[str, Any] = {"shape": "global_table", "pre": [], "other_pre": [], "table_steps": [], "op": {},
                              "post": []}
    recipe["pre"], value = _steps(rng, "str", rng.randint(0, 2), STATELESS if rng.random() < 1 / 3 else KEY_KEEPING)
    recipe["op"] = {"kind": rng.choice(["inner", "left"]), "key_selector": rng.choice(_menu("key_selector", value)).name,
                    "joiner": "pair"}
    if rng.random() < 0.3:
        recipe["post"], _ = _steps(rng, "str", 1, VALUE_ONLY)
    value_type(recipe)
    return recipe


#: The keys of a global table's records: what the menu's key selectors make of the stream's keys
#: and values ("A", "all", a value's first letter), so that joins find rows; None is dropped.
TABLE_KEYS = ["a", "ab", "A", "B", "all", "x", "yy", "y", "z", None]

#: The shapes drawn apart (``generate(..., shape=...)``), each by a random stream of its own so
#: that the cases of the main draw stay the ones each seed and index gave before.
SHAPES_APART = ("process", "fk_join", "global_table")


def generate(seed: int, index: int, *, shape: str | None = None) -> Case:
    """The case ``index`` of the run seeded with ``seed`` (``shape="process"``: the case of
    that index as if it ran a processor; ``shape="fk_join"``: a foreign-key join;
    ``shape="global_table"``: a stream joined with a
    global table, the table's records (topic ``other``) interleaved with the stream's)."""
    if shape not in (None, *SHAPES_APART):
        raise ValueError(f"'shape' is None or one of {SHAPES_APART} (got {shape!r}): only these are drawn apart.")
    if shape == "global_table":
        rng = random.Random(f"{seed}/{index}/global_table")
        recipe = _global_table_recipe(rng)
        records = [(t, rng.choice(TABLE_KEYS) if t == "other" else k, v, ts)
                   for t, k, v, ts in _records(rng, ["in", "other"])]
        return Case(recipe, records, cache=rng.random() >= 0.25)
    process = random.Random(f"{seed}/{index}/process")
    if shape == "process" or (shape is None and process.random() < PROCESS_SHARE):
        recipe = _process_recipe(process)
        records = _records(process, ["in"])
        if _wall_clock(recipe):
            records = _with_wall_clock(process, records)
        return Case(recipe, records, cache=process.random() >= 0.25)
    fk = random.Random(f"{seed}/{index}/fk_join")
    if shape == "fk_join" or (shape is None and fk.random() < FK_SHARE):
        return Case(_fk_recipe(fk), _records(fk, ["in", "other"]), cache=fk.random() >= 0.25)
    rng = random.Random(f"{seed}/{index}")
    recipe = _recipe(rng)
    two = recipe["shape"] in ("cogroup", "stream_table", "stream_stream", "table_table") or recipe["op"].get("merge")
    topics = ["in", "other"] if two else ["in"]
    # one case in five of a shape that reads only `in` reads it by a pattern, from two topics (a
    # generator of its own: the other cases of a seed stay what they were)
    if not two and recipe["shape"] != "grouped_table" and random.Random(f"{seed}/{index}/pattern").random() < 0.2:
        recipe["source_pattern"] = True
        topics = ["in", PATTERN_TOPIC]
    return Case(recipe, _records(rng, topics), cache=rng.random() >= 0.25)
