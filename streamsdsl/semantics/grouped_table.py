"""``KTable#groupBy`` and ``KGroupedTable`` ``count`` / ``reduce`` / ``aggregate``.

Kafka Streams' rules (``KAFKA_STREAMS_SEMANTICS.md`` §5.5; ``KI/KTableRepartitionMap.java``,
``KI/KTableAggregate.java``, ``KI/KTableReduce.java``, ``KI/KGroupedTableImpl.java``):

- **Re-keying** (`regroup`, stateless): ``group_by`` needs the upstream table's old values. The
  selector runs on the new and on the old value (never on ``None``); a pair whose key or value is
  ``None`` is skipped. Same group for both: one ``Change(new, old)``. Otherwise
  ``Change(None, old)`` goes to the old group **first**, then ``Change(new, None)`` to the new one.
- **Aggregation** (`grouped_aggregate_step`, one state value per group key): with an old value
  and an aggregate, ``agg = subtractor(key, old, agg)`` first; then, with a new value,
  ``agg = adder(key, new, agg if present else initializer())``. The result's ts is
  ``max(record ts, previous aggregate ts)`` (the record's ts for a new group). A ``None``
  aggregate deletes the group. ``count`` is (0, +1, -1): a group counted down to 0 stays, at 0.
  ``reduce`` has no initializer: the first value is the aggregate.
- The aggregate forwards ``Change(new_agg, old_agg if send_old_values else None)``; its store
  has a record cache, so deleting a group that has no aggregate forwards nothing.

The re-keying is stateless, and the aggregate is keyed by the group key, so one operator keyed
by the group key (over the re-keyed changes, in their input order) is exact: within a group the
output order equals Kafka's; there is no cross-key emission.

Examples
--------
>>> count = GroupedTableFunctions.count()
>>> regroup("alice", Change("US", "EU"), 7, lambda k, v: (v, v))
[('EU', Change(new=None, old='EU'), 7), ('US', Change(new='US', old=None), 7)]
>>> s = grouped_aggregate_step(None, "US", Change("US", None), 7, count)
>>> s.state, s.output
(TableValue(value=1, ts=7), KeyedChange(key='US', change=Change(new=1, old=None), timestamp=7))
"""

from __future__ import annotations

from typing import Any, Callable, Iterable

import attrs

from streamsdsl.semantics.tables import Change, KeyedChange, TableValue, table_source_step

__all__ = ["GroupedTableFunctions", "GroupedTableStep", "grouped_aggregate_step", "grouped_table_reference_run",
           "regroup"]

_NO_INIT = object()


@attrs.frozen
class GroupedTableFunctions:
    """The initializer, adder and subtractor of a ``KGroupedTable`` aggregation, as
    ``initializer()``, ``adder(key, value, agg)`` and ``subtractor(key, value, agg)``.
    ``initializer`` ``None`` means reduce: the first value becomes the aggregate."""

    initializer: Callable[[], Any] | None
    adder: Callable[[Any, Any, Any], Any]
    subtractor: Callable[[Any, Any, Any], Any]

    @classmethod
    def count(cls) -> GroupedTableFunctions:
        return cls(lambda: 0, lambda k, v, a: a + 1, lambda k, v, a: a - 1)

    @classmethod
    def reduce(cls, adder: Callable[[Any, Any], Any], subtractor: Callable[[Any, Any], Any]) -> GroupedTableFunctions:
        """``reduce(adder(agg, value), subtractor(agg, value))`` (Kafka's ``Reducer`` order)."""
        return cls(None, lambda k, v, a: adder(a, v), lambda k, v, a: subtractor(a, v))


@attrs.frozen
class GroupedTableStep:
    """One re-keyed change applied to one group: the new aggregate and the forwarded change."""

    state: TableValue | None
    output: KeyedChange | None


def regroup(key: Any, change: Change, ts: int,
            selector: Callable[[Any, Any], tuple[Any, Any]]) -> list[tuple[Any, Change, int]]:
    """Re-key one table change (``KTableRepartitionMap``): ``(group key, Change, ts)`` in order."""
    new_pair = None if change.new is None else selector(key, change.new)
    old_pair = None if change.old is None else selector(key, change.old)
    new_ok = new_pair is not None and new_pair[0] is not None and new_pair[1] is not None
    old_ok = old_pair is not None and old_pair[0] is not None and old_pair[1] is not None
    if new_ok and old_ok and new_pair[0] == old_pair[0]:  # type: ignore[index]
        return [(old_pair[0], Change(new_pair[1], old_pair[1]), ts)]  # type: ignore[index]
    out = []
    if old_ok:
        out.append((old_pair[0], Change(None, old_pair[1]), ts))  # type: ignore[index]
    if new_ok:
        out.append((new_pair[0], Change(new_pair[1], None), ts))  # type: ignore[index]
    return out


def grouped_aggregate_step(state: TableValue | None, group: Any, change: Change, ts: int,
                           fns: GroupedTableFunctions, *, send_old_values: bool = False) -> GroupedTableStep:
    """Apply one re-keyed change to a group's aggregate (``KTableAggregate`` / ``KTableReduce``)."""
    old_agg = None if state is None else state.value
    agg = old_agg
    if change.old is not None and old_agg is not None:
        agg = fns.subtractor(group, change.old, agg)
    if change.new is not None:
        if agg is None:
            agg = change.new if fns.initializer is None else fns.adder(group, change.new, fns.initializer())
        else:
            agg = fns.adder(group, change.new, agg)
    if agg is None and state is None:
        return GroupedTableStep(None, None)  # the cached store forwards no delete of an absent group
    out_ts = ts if state is None else max(ts, state.ts)
    new_state = None if agg is None else TableValue(agg, out_ts)
    return GroupedTableStep(new_state, KeyedChange(group, Change(agg, old_agg if send_old_values else None), out_ts))


def grouped_table_reference_run(records: Iterable[tuple[Any, Any, int]], selector: Callable[[Any, Any], tuple[Any, Any]],
                                fns: GroupedTableFunctions, *, send_old_values: bool = False) -> list[KeyedChange]:
    """``builder.table(...).group_by(selector).<aggregation>`` over ``(key, value, ts)`` table
    records in order: the aggregate's forwarded changes (the source is materialized: old values
    on, a tombstone of an absent key forwards nothing).

    Examples
    --------
    >>> recs = [("A", "green", 10), ("B", "green", 9), ("A", "blue", 12), ("C", "yellow", 15), ("D", "green", 11)]
    >>> [(o.key, o.change.new, o.timestamp) for o in grouped_table_reference_run(
    ...     recs, lambda k, v: (v, v), GroupedTableFunctions.count())]
    [('green', 1, 10), ('green', 2, 10), ('green', 1, 12), ('blue', 1, 12), ('yellow', 1, 15), ('green', 2, 12)]
    """
    table: dict[Any, TableValue] = {}
    aggs: dict[Any, TableValue] = {}
    out: list[KeyedChange] = []
    for key, value, ts in records:
        source = table_source_step(table.get(key) if key is not None else None, key, value, ts,
                                   send_old_values=True, materialized=True)
        if source.dropped:
            continue
        if source.state is None:
            table.pop(key, None)
        else:
            table[key] = source.state
        if source.forwarded is None:
            continue
        for group, change, t in regroup(key, source.forwarded, ts, selector):
            step = grouped_aggregate_step(aggs.get(group), group, change, t, fns, send_old_values=send_old_values)
            if step.state is None:
                aggs.pop(group, None)
            else:
                aggs[group] = step.state
            if step.output is not None:
                out.append(step.output)
    return out
