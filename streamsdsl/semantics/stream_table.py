"""Stream–table join (``KStream#join`` / ``leftJoin`` with a ``KTable``).

Kafka Streams' rules (``KI/KStreamKTableJoinProcessor.java``, ``KAFKA_STREAMS_SEMANTICS.md`` §5.1):

- Only the **stream side produces output**. A table record updates the table (the latest value
  per key, also when older than the stored one; a tombstone deletes the key) and forwards
  nothing from the join.
- A stream record looks the table up **when it is processed** and forwards
  ``joiner(stream_value, table_value)`` with the stream record's key and timestamp. The inner
  join forwards only when the table has a value; the left join always forwards (``None`` for
  a missing table value).
- Dropped (and counted) stream records: a null value (both joins); a null key (inner join). The
  left join keeps a null-key record with a value and joins it with ``None`` (KIP-962).
- A table record with a null key is dropped by the table source.

One operator keyed by the join key holds one state value per key: the table's current value
(`streamsdsl.semantics.tables.TableValue` or ``None``). `table_update` and `stream_join_step`
are the per-key steps; a null-key stream record has no key state and goes through
`stream_join_step` with ``state=None``. `stream_table_reference_run` runs a whole input
sequence in order, as the TopologyTestDriver does; the per-key operator is exact (no record
leaves the join in another order than its input order within a key, and there is no cross-key
emission).

A versioned table (lookups as of the stream record's timestamp) and ``Joined#withGracePeriod``
are `streamsdsl.semantics.versioned`: it finds the table value, this module's
`stream_join_step` joins it.

Examples
--------
>>> spec = StreamTableJoin("left")
>>> t = table_update(None, "c1", {"name": "Ann"}, 1).state
>>> stream_join_step(spec, t, "c1", 42, 5, lambda v, t: (v, t)).output
Output(key='c1', value=(42, {'name': 'Ann'}), timestamp=5)
>>> stream_join_step(StreamTableJoin("inner"), None, "c2", 7, 6, lambda v, t: (v, t)).output is None
True
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Literal

import attrs

from streamsdsl.errors import InvalidArgumentError
from streamsdsl.semantics.joiners import Joiner, for_key
from streamsdsl.semantics.tables import DROP_NULL_KEY, DROP_NULL_VALUE, Output, TableSourceStep, TableValue
from streamsdsl.semantics.tables import table_source_step

__all__ = ["StreamTableJoin", "StreamTableStep", "global_join_step", "global_table_reference_run", "stream_join_step",
           "stream_table_reference_run", "table_update"]


def _kind(inst: Any, attribute: attrs.Attribute[Any], value: str) -> None:
    if value not in ("inner", "left"):
        raise InvalidArgumentError(f"'kind' of a stream-table join must be 'inner' or 'left' (got {value!r}). "
                         "A stream-table join has no outer variant.")


@attrs.frozen
class StreamTableJoin:
    """A stream–table join's kind: ``"inner"`` or ``"left"``."""

    kind: Literal["inner", "left"] = attrs.field(validator=_kind)


@attrs.frozen
class StreamTableStep:
    """One stream record: the joined record (``None``: nothing forwarded) and the drop reason."""

    output: Output | None
    dropped: str | None = None


def table_update(state: TableValue | None, key: Any, value: Any, ts: int) -> TableSourceStep:
    """A table record: the key's new table value (the join forwards nothing for it)."""
    return table_source_step(state, key, value, ts, materialized=True)


def stream_join_step(spec: StreamTableJoin, state: TableValue | None, key: Any, value: Any, ts: int,
                     joiner: Joiner) -> StreamTableStep:
    """A stream record joined with the key's current table value ``state``."""
    left = spec.kind == "left"
    joiner = for_key(joiner, key)
    if value is None:
        return StreamTableStep(None, DROP_NULL_VALUE)
    if key is None:
        if not left:
            return StreamTableStep(None, DROP_NULL_KEY)
        return StreamTableStep(Output(None, joiner(value, None), ts))
    table_value = None if state is None else state.value
    if table_value is None and not left:
        return StreamTableStep(None)
    return StreamTableStep(Output(key, joiner(value, table_value), ts))


def global_join_step(spec: StreamTableJoin, state: TableValue | None, key: Any, table_key: Any, value: Any, ts: int,
                     joiner: Joiner) -> StreamTableStep:
    """A stream record joined with a global table (``KStreamGlobalKTableJoin``): ``table_key`` is
    what the key selector made of the record (Kafka calls it for every record), ``state`` the
    table's current value for it.

    Kafka Streams' rules (``KStreamKTableJoinProcessor.maybeDropRecord`` / ``doJoin``): a ``None``
    value is dropped; a ``None`` table key is dropped too, except in a left join of a record
    whose own key is ``None`` (KIP-962), which is joined with ``None``. The inner join forwards
    only when the table has a value; the output keeps the stream record's key and timestamp.

    Examples
    --------
    >>> left = StreamTableJoin("left")
    >>> global_join_step(left, None, "o1", None, 7, 5, lambda v, t: (v, t)).dropped
    'null_key'
    >>> global_join_step(left, None, None, None, 7, 5, lambda v, t: (v, t)).output
    Output(key=None, value=(7, None), timestamp=5)
    """
    joiner = for_key(joiner, key)
    if value is None:
        return StreamTableStep(None, DROP_NULL_VALUE)
    if table_key is None and not (spec.kind == "left" and key is None):
        return StreamTableStep(None, DROP_NULL_KEY)
    table_value = None if state is None or table_key is None else state.value
    if table_value is None and spec.kind != "left":
        return StreamTableStep(None)
    return StreamTableStep(Output(key, joiner(value, table_value), ts))


def global_table_reference_run(records: Iterable[tuple[str, Any, Any, int]], spec: StreamTableJoin,
                               key_selector: Callable[[Any, Any], Any], joiner: Joiner
                               ) -> tuple[list[Output], list[str]]:
    """Run ``(side, key, value, ts)`` records (side ``"stream"`` or ``"table"``) of a
    stream–global-table join in order, as Kafka Streams' TopologyTestDriver does (a table record
    updates the global store at once): the joined records and the drop reasons.

    Examples
    --------
    >>> run = [("stream", "o1", "c1", 0), ("table", "c1", "Ann", 9), ("stream", "o2", "c1", 1)]
    >>> global_table_reference_run(run, StreamTableJoin("left"), lambda k, v: v, lambda v, t: f"{v}:{t}")[0]
    [Output(key='o1', value='c1:None', timestamp=0), Output(key='o2', value='c1:Ann', timestamp=1)]
    """
    table: dict[Any, TableValue] = {}
    out: list[Output] = []
    drops: list[str] = []
    for side, key, value, ts in records:
        if side == "table":
            _apply_table_record(table, drops, key, value, ts)
            continue
        table_key = key_selector(key, value)
        result = global_join_step(spec, table.get(table_key) if table_key is not None else None, key, table_key,
                                  value, ts, joiner)
        if result.dropped:
            drops.append(result.dropped)
        if result.output is not None:
            out.append(result.output)
    return out, drops


def _apply_table_record(table: dict[Any, TableValue], drops: list[str], key: Any, value: Any, ts: int) -> None:
    """A reference run's table record: the table's new state for ``key``, or the drop reason."""
    step = table_update(table.get(key) if key is not None else None, key, value, ts)
    if step.dropped:
        drops.append(step.dropped)
    elif step.state is None:
        table.pop(key, None)
    else:
        table[key] = step.state


def stream_table_reference_run(records: Iterable[tuple[str, Any, Any, int]], spec: StreamTableJoin,
                               joiner: Joiner) -> tuple[list[Output], list[str]]:
    """Run ``(side, key, value, ts)`` records (side ``"stream"`` or ``"table"``) in order: the
    joined records and the drop reasons (one per dropped record, stream and table side).

    Examples
    --------
    >>> run = [("stream", 0, "X0", 0), ("table", 0, "Y0", 0), ("stream", 0, "X0", 1), ("table", 0, None, 2),
    ...        ("stream", 0, "X0", 3)]
    >>> stream_table_reference_run(run, StreamTableJoin("left"), lambda a, b: f"{a}+{b}")[0]
    [Output(key=0, value='X0+None', timestamp=0), Output(key=0, value='X0+Y0', timestamp=1), Output(key=0, value='X0+None', timestamp=3)]
    """
    table: dict[Any, TableValue] = {}
    out: list[Output] = []
    drops: list[str] = []
    for side, key, value, ts in records:
        if side == "table":
            _apply_table_record(table, drops, key, value, ts)
            continue
        if side != "stream":
            raise InvalidArgumentError(f"record side must be 'stream' or 'table' (got {side!r})")
        result = stream_join_step(spec, table.get(key) if key is not None else None, key, value, ts, joiner)
        if result.dropped:
            drops.append(result.dropped)
        if result.output is not None:
            out.append(result.output)
    return out, drops
