"""Table–table join (``KTable#join`` / ``leftJoin`` / ``outerJoin``), non-versioned tables.

Kafka Streams' rules (``KAFKA_STREAMS_SEMANTICS.md`` §5.3; ``KI/KTableKTableInnerJoin.java``,
``KTableKTableLeftJoin.java``, ``KTableKTableRightJoin.java``, ``KTableKTableOuterJoin.java``,
``KTableKTableJoinMerger.java``):

- **Either side drives.** A record of one side first updates that side's table (a materialized
  source with a record cache: a null key is dropped; a tombstone for an absent key is not
  forwarded at all), then its ``Change(new, old)`` is joined with the other side's **current**
  value. The output key is the record key; the joiner always receives
  ``(left_value, right_value)``.
- **Timestamp**: ``max(record ts, other side's ts)`` when the other side has a value, else the
  record's ts.
- **Inner**: nothing when the other side is absent; else ``new = joiner(new, other)`` (``None``
  when ``new`` is a tombstone: a delete).
- **Left, left side**: nothing when the other side, ``new`` and ``old`` are all absent; else
  ``new = joiner(new, right)`` (``None`` for a tombstone). **Left, right side**: nothing when the
  left is absent; else ``joiner(left, new_right)`` — a right tombstone gives ``joiner(left, None)``.
- **Outer**: nothing when the other side, ``new`` and ``old`` are all absent; ``new =
  joiner(new, other)`` if either is present, else ``None`` (deleting the last side deletes the row).
- **Old values** (``send_old_values``; a downstream ``group_by`` or materialization asks for
  them): ``old = joiner(old, other)`` — when ``old`` is present (inner; left side of a left
  join), always (right side of a left join), or when ``old`` or the other side is present
  (outer). Without them ``old`` is ``None``.
- **A side read through map_values** (``tombstone`` of `table_join_step`): the source's record
  cache drops a tombstone of a key the *source* does not hold, but a mapper that returns
  ``None`` for a value makes a ``Change(None, old)`` that ``KTableMapValues`` forwards. The join
  is told whether the source value was a tombstone, and its side state keeps that the source
  holds the key (a `TableValue` whose value is ``None``), which the other side reads as absent.
- **A side read through a filter** (``filtered_sides``): ``KTableFilter`` sends old values
  (its parent table has a store) and does not forward a change whose new and old values both
  fail, so a side's ``None`` for a key the side does not hold is not joined, cache or not.
- **Materialized result** (``materialized``; ``join(..., materialized=...)``): the merger writes
  to a store with a record cache, so a delete of a key that has no result is not forwarded, and
  the forwarded old value is the previous stored result.

One operator keyed by the join key holds one `TableJoinState` per key (both sides' current
values and whether a materialized result exists). `table_join_step` is the per-key step and
exact: a table–table join forwards only for the record being processed, under that record's
key, so a per-key operator's output order equals Kafka's within a key and there is no cross-key
emission.

Examples
--------
>>> spec = TableJoinSpec("left")
>>> j = lambda l, r: f"{l}+{r}"
>>> s = table_join_step(spec, TableJoinState(), "left", "k", "A", 1, j)
>>> s.output
KeyedChange(key='k', change=Change(new='A+None', old=None), timestamp=1)
>>> table_join_step(spec, s.state, "right", "k", "b", 5, j).output
KeyedChange(key='k', change=Change(new='A+b', old=None), timestamp=5)
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Literal, Sequence

import attrs

from streamsdsl._validation import one_of
from streamsdsl.errors import InvalidArgumentError
from streamsdsl.semantics.joiners import Joiner, for_key
from streamsdsl.semantics.tables import Change, KeyedChange, TableSourceStep, TableValue, table_source_step

__all__ = ["TableJoinSpec", "TableJoinState", "TableJoinStep", "join_store_entry", "table_side_step", "table_join_reference_run",
           "table_join_step"]

LEFT = "left"
RIGHT = "right"


_kind = one_of(("inner", "left", "outer"), "table-table join")


@attrs.frozen
class TableJoinSpec:
    """A table–table join: its kind, whether it forwards old values, whether its result is materialized."""

    kind: Literal["inner", "left", "outer"] = attrs.field(validator=_kind)
    send_old_values: bool = False
    materialized: bool = False
    #: The stores have a record cache (Kafka's default): a delete of a key that has no row is not
    #: forwarded. ``False`` (``statestore.cache.max.bytes = 0``): every write is forwarded.
    cached: bool = True
    #: The sides (``"left"``, ``"right"``) read through a ``KTable.filter`` / ``filter_not``. Its
    #: parent table has a store (the join reads it), so the filter sends old values and does not
    #: forward a change whose new and old values both fail (``KTableFilter``: "unnecessary to
    #: forward"): a side's ``None`` where the side holds nothing reaches the join, cache or not.
    filtered_sides: frozenset[str] = attrs.field(default=frozenset(), converter=frozenset)


@attrs.frozen
class TableJoinState:
    """One key's state: each side's current value (``None``: absent) and whether the
    materialized result store holds a row for the key."""

    left: TableValue | None = None
    right: TableValue | None = None
    has_result: bool = False
    result: Any = None

    def to_plain(self) -> list[Any]:
        return [None if self.left is None else self.left.to_plain(),
                None if self.right is None else self.right.to_plain(), self.has_result, self.result]

    @classmethod
    def from_plain(cls, plain: Sequence[Any] | None) -> TableJoinState:
        if not plain:
            return cls()
        left, right, has_result, result = plain
        return cls(TableValue.from_plain(left), TableValue.from_plain(right), bool(has_result), result)


@attrs.frozen
class TableJoinStep:
    """One record applied to one key: the new state, the forwarded change (``None``: nothing)
    and the drop reason."""

    state: TableJoinState
    output: KeyedChange | None = None
    dropped: str | None = None


def _join(kind: str, side: str, change: Change, other: Any, send_old: bool,
          joiner: Callable[[Any, Any], Any]) -> Change | None:
    def j(this: Any, that: Any) -> Any:
        return joiner(this, that) if side == LEFT else joiner(that, this)

    new = old = None
    if kind == "inner":
        if other is None:
            return None
        new = None if change.new is None else j(change.new, other)
        old = j(change.old, other) if send_old and change.old is not None else None
    elif kind == "left" and side == LEFT:
        if other is None and change.new is None and change.old is None:
            return None
        new = None if change.new is None else j(change.new, other)
        old = j(change.old, other) if send_old and change.old is not None else None
    elif kind == "left":  # the right side of a left join (KTableKTableRightJoin)
        if other is None:
            return None
        new = j(change.new, other)
        old = j(change.old, other) if send_old else None
    else:  # outer
        if other is None and change.new is None and change.old is None:
            return None
        new = j(change.new, other) if other is not None or change.new is not None else None
        old = j(change.old, other) if send_old and (other is not None or change.old is not None) else None
    return Change(new, old)


def join_store_entry(state: TableJoinState, joiner: Joiner, key: Any = None) -> tuple[Any, int] | None:
    """What a materialized table–table join's store holds for a key in ``state``: the joined
    value (the joiner of both sides' current values, ``None`` for an absent side; ``key``: the
    key a with-key joiner receives) and its
    timestamp (the latest of the sides holding a value), or ``None`` when the store has no row
    for the key. The one reading of a join's store, for both test-driver engines.

    Examples
    --------
    >>> left, right = TableValue("a", 3), TableValue("x", 5)
    >>> join_store_entry(TableJoinState(left, right, has_result=True), lambda l, r: f"{l}+{r}")
    ('a+x', 5)
    >>> join_store_entry(TableJoinState(left, None, has_result=False), lambda l, r: f"{l}+{r}") is None
    True
    """
    if not state.has_result:
        return None
    sides = [s for s in (state.left, state.right) if s is not None and s.value is not None]
    value = for_key(joiner, key)(None if state.left is None else state.left.value, None if state.right is None else state.right.value)
    return value, max((s.ts for s in sides), default=-1)


def table_side_step(this: TableValue | None, key: Any, value: Any, ts: int, *, tombstone: bool | None,
                    cached: bool, filtered: bool) -> TableSourceStep:
    """One record of a table a join reads (both sides of a table–table join, both tables of a
    foreign-key join): the side's new state and the ``Change(new, old)`` the join sees.

    ``tombstone`` (see `table_join_step`): ``False`` for a ``None`` that ``map_values`` made of a
    value the source holds, which is forwarded and keeps the key (a `TableValue` whose value is
    ``None``); ``filtered``: the side reads through a filter, whose parent's store drops a
    tombstone for an absent key whatever ``cached`` says.

    Examples
    --------
    >>> table_side_step(TableValue("a", 1), "k", None, 2, tombstone=False, cached=True, filtered=False).forwarded
    Change(new=None, old='a')
    >>> table_side_step(None, "k", None, 2, tombstone=None, cached=True, filtered=False).forwarded is None
    True
    """
    if key is not None and value is None and tombstone is False and not filtered:
        # the source holds the key (its value is not a tombstone); map_values made it None
        return TableSourceStep(TableValue(None, ts), Change(None, None if this is None else this.value))
    return table_source_step(this, key, value, ts, send_old_values=True, materialized=cached or filtered)


def table_join_step(spec: TableJoinSpec, state: TableJoinState | None, side: str, key: Any, value: Any, ts: int,
                    joiner: Joiner, *, tombstone: bool | None = None) -> TableJoinStep:
    """Apply one table record of ``side`` (``"left"``/``"right"``) to its key's join state.

    ``tombstone``: whether the side's source value was a tombstone, where a ``map_values`` stands
    between the source and the join (``None``: ``value is None``). A ``None`` value that is not a
    tombstone (the mapper's result) is forwarded whatever the side held, as Kafka's
    ``KTableMapValues`` forwards ``Change(None, old)``, and the side keeps holding the key.

    Examples
    --------
    >>> pair = lambda l, r: f"{l}+{r}"
    >>> s = table_join_step(TableJoinSpec("outer"), None, "right", "k", "x", 53, pair)
    >>> table_join_step(TableJoinSpec("outer"), s.state, "left", "k", None, 56, pair, tombstone=False).output
    KeyedChange(key='k', change=Change(new='None+x', old=None), timestamp=56)
    >>> table_join_step(TableJoinSpec("outer"), s.state, "left", "k", None, 56, pair).output is None
    True
    """
    if side not in (LEFT, RIGHT):
        raise InvalidArgumentError(f"a join record's side must be 'left' or 'right' (got {side!r}).")
    state = state or TableJoinState()
    this = state.left if side == LEFT else state.right
    source = table_side_step(this, key, value, ts, tombstone=tombstone, cached=spec.cached,
                             filtered=side in spec.filtered_sides)
    if source.dropped:
        return TableJoinStep(state, dropped=source.dropped)
    state = attrs.evolve(state, left=source.state) if side == LEFT else attrs.evolve(state, right=source.state)
    if source.forwarded is None:
        return TableJoinStep(state)
    other = state.right if side == LEFT else state.left
    other_value = None if other is None else other.value  # a side holding a mapped None has no value
    change = _join(spec.kind, side, source.forwarded, other_value, spec.send_old_values, for_key(joiner, key))
    if change is None:
        return TableJoinStep(state)
    out_ts = ts if other is None or other_value is None else max(ts, other.ts)
    if spec.materialized:
        if change.new is None and not state.has_result and spec.cached:
            return TableJoinStep(state)
        old = state.result if spec.send_old_values else None
        state = attrs.evolve(state, has_result=change.new is not None, result=change.new)
        change = Change(change.new, old)
    return TableJoinStep(state, KeyedChange(key, change, out_ts))


def table_join_reference_run(records: Iterable[tuple[str, Any, Any, int]], spec: TableJoinSpec,
                             joiner: Joiner) -> tuple[list[KeyedChange], list[str]]:
    """Run ``(side, key, value, ts)`` records in order: the forwarded changes and drop reasons.

    Examples
    --------
    >>> run = [("left", 0, "X0", 0), ("right", 0, "Y0", 1), ("left", 0, None, 2)]
    >>> [(o.key, o.change.new, o.timestamp) for o in table_join_reference_run(run, TableJoinSpec("inner"),
    ...                                                                          lambda l, r: l + r)[0]]
    [(0, 'X0Y0', 1), (0, None, 2)]
    """
    states: dict[Any, TableJoinState] = {}
    out: list[KeyedChange] = []
    drops: list[str] = []
    for side, key, value, ts in records:
        step = table_join_step(spec, states.get(key), side, key, value, ts, joiner)
        if step.dropped:
            drops.append(step.dropped)
            continue
        states[key] = step.state
        if step.output is not None:
            out.append(step.output)
    return out, drops
