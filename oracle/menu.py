"""The menu of user functions the oracle harness may put into a topology.

Every function has a name that exists in both languages: here as a Python callable that builds
the streamsdsl topology, in ``oracle/java/.../Menu.java`` as the same function for Kafka
Streams. The spec (`oracle.spec`) names functions only; a topology holding any other callable
cannot be serialized.

Keys are strings (or ``None``); values are strings or longs. Each entry says what it takes and
gives (``"str"``, ``"long"``), so that the generator (`oracle.generator`) only chains functions
whose types fit. ``None`` is rendered as ``"null"`` where a function makes text of a value, as
Java's ``String.valueOf`` does.
"""

from __future__ import annotations

from typing import Any, Callable

import attrs

from streamsdsl.dsl.joiners import Joiners

__all__ = ["MENU", "MenuFn", "by_callable", "by_name", "text"]


def text(value: Any) -> str:
    """A value as text, ``None`` as ``"null"`` (Java's ``String.valueOf``)."""
    return "null" if value is None else str(value)


@attrs.frozen
class MenuFn:
    """One named function: ``kind`` is the role it plays (``predicate``, ``value_mapper``, ...),
    ``takes`` the value type it reads (``None``: any), ``gives`` the type it returns where that
    is a value (``None``: not a value, or the same type as it reads)."""

    name: str
    kind: str
    fn: Callable[..., Any] = attrs.field(eq=False)
    takes: str | None = None
    gives: str | None = None


def _first(value: str | None) -> str | None:
    return None if value is None else value[:1]


_FUNCTIONS = [
    # predicates (key, value) -> bool
    MenuFn("value_not_null", "predicate", lambda k, v: v is not None),
    MenuFn("key_not_null", "predicate", lambda k, v: k is not None),
    MenuFn("key_is_a", "predicate", lambda k, v: k == "a"),
    MenuFn("value_short", "predicate", lambda k, v: v is None or len(v) <= 2, "str"),
    MenuFn("value_even", "predicate", lambda k, v: v is not None and v % 2 == 0, "long"),
    # value mappers value -> value
    MenuFn("upper", "value_mapper", lambda v: None if v is None else v.upper(), "str", "str"),
    MenuFn("twice", "value_mapper", lambda v: None if v is None else v + v, "str", "str"),
    MenuFn("null_if_x", "value_mapper", lambda v: None if v == "x" else v, "str", "str"),
    MenuFn("length", "value_mapper", lambda v: None if v is None else len(v), "str", "long"),
    MenuFn("inc", "value_mapper", lambda v: None if v is None else v + 1, "long", "long"),
    MenuFn("to_text", "value_mapper", lambda v: None if v is None else str(v), "long", "str"),
    # with the key (key, value) -> value: Kafka's ValueMapperWithKey (the DSL tells by arity)
    MenuFn("key_colon", "value_mapper", lambda k, v: None if v is None else text(k) + ":" + v, "str", "str"),
    # key-value mappers (key, value) -> (key, value)
    MenuFn("swap", "mapper", lambda k, v: (v, k), "str", "str"),
    MenuFn("key_or_z", "mapper", lambda k, v: ("z" if k is None else k, v)),
    MenuFn("value_initial_key", "mapper", lambda k, v: (_first(v), v), "str", "str"),
    # flat mappers (key, value) -> [(key, value)]
    MenuFn("chars", "flat_mapper", lambda k, v: [(k, c) for c in (v or "")], "str", "str"),
    MenuFn("with_swapped", "flat_mapper", lambda k, v: [(k, v), (v, k)], "str", "str"),
    # flat value mappers value -> [value]
    MenuFn("value_chars", "flat_value_mapper", lambda v: list(v or ""), "str", "str"),
    # key selectors (key, value) -> key
    MenuFn("value_as_key", "key_selector", lambda k, v: v, "str"),
    MenuFn("key_upper", "key_selector", lambda k, v: None if k is None else k.upper()),
    MenuFn("constant_key", "key_selector", lambda k, v: "all"),
    MenuFn("value_initial", "key_selector", lambda k, v: _first(v), "str"),
    # initializers () -> aggregate
    MenuFn("empty", "initializer", lambda: "", None, "str"),
    MenuFn("zero", "initializer", lambda: 0, None, "long"),
    # aggregators (key, value, aggregate) -> aggregate
    MenuFn("append", "aggregator", lambda k, v, agg: agg + ("-" if v is None else v), "str", "str"),
    MenuFn("add_length", "aggregator", lambda k, v, agg: agg + (0 if v is None else len(v)), "str", "long"),
    MenuFn("add", "aggregator", lambda k, v, agg: agg + (0 if v is None else v), "long", "long"),
    # session mergers (key, aggregate1, aggregate2) -> aggregate
    MenuFn("concat_bar", "merger", lambda k, a1, a2: a1 + "|" + a2, "str", "str"),
    MenuFn("plus", "merger", lambda k, a1, a2: a1 + a2, "long", "long"),
    # reducers (aggregate, value) -> aggregate
    MenuFn("concat", "reducer", lambda agg, v: agg + text(v), "str", "str"),
    MenuFn("larger", "reducer", lambda agg, v: max(agg, v), "long", "long"),
    # joiners (value, other value) -> value
    MenuFn("pair", "joiner", lambda v1, v2: text(v1) + "+" + text(v2), None, "str"),
    # with the key (key, value, other value) -> value: Kafka's ValueJoinerWithKey, which its
    # stream-table and stream-stream joins take (KTable joins take a ValueJoiner only)
    MenuFn("key_pair", "joiner", lambda k, v1, v2: text(k) + ":" + text(v1) + "+" + text(v2), None, "str"),
    # the built-in joiners (streamsdsl.Joiners) that values of the menu's types can take; the
    # generator does not draw them (tests/oracle names them in cases of their own)
    MenuFn("joiners_left", "joiner", Joiners.left()),
    MenuFn("joiners_right", "joiner", Joiners.right()),
    # foreign-key extractors value -> the other table's key (KIP-213); one of them gives None
    MenuFn("length_key", "fk_extractor", lambda v: {1: "a", 2: "b", 3: "c"}.get(len(v)), "str"),
    MenuFn("letter_key_or_null", "fk_extractor", lambda v: "a" if "x" in v else "b" if "y" in v else None, "str"),
    # grouped tables: selectors (key, value) -> (key, value), adders and subtractors
    MenuFn("by_value", "table_selector", lambda k, v: (v, k), "str", "str"),
    MenuFn("by_initial", "table_selector", lambda k, v: (_first(v), v), "str", "str"),
    MenuFn("concat_adder", "table_reducer", lambda agg, v: agg + v, "str", "str"),
    MenuFn("strip_subtractor", "table_reducer", lambda agg, v: agg.replace(v, "", 1), "str", "str"),
    MenuFn("add_length_adder", "table_aggregator", lambda k, v, agg: agg + len(v), "str", "long"),
    MenuFn("sub_length_subtractor", "table_aggregator", lambda k, v, agg: agg - len(v), "str", "long"),
]

#: The menu by name.
MENU: dict[str, MenuFn] = {f.name: f for f in _FUNCTIONS}
_BY_ID = {id(f.fn): f for f in _FUNCTIONS}


def by_name(name: str) -> MenuFn:
    """The menu entry ``name``; a `KeyError` naming the menu when there is none."""
    try:
        return MENU[name]
    except KeyError:
        raise KeyError(f"{name!r} is not on the oracle's menu (oracle/menu.py): {sorted(MENU)}") from None


def by_callable(fn: Callable[..., Any]) -> MenuFn:
    """The menu entry whose callable is ``fn`` (by identity)."""
    try:
        return _BY_ID[id(fn)]
    except KeyError:
        raise ValueError(
            f"{fn!r} is not a function of the oracle's menu (oracle/menu.py): the oracle can only name "
            "functions that exist in both languages."
        ) from None
