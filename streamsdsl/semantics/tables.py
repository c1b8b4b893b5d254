"""KTables: the latest value per key, its changelog (`Change`), and the stateless table steps.

Kafka Streams' rules (``KI/`` as in ``KAFKA_STREAMS_SEMANTICS.md`` §5.4):

- **Source** (``builder.table`` / ``KStream#toTable``; ``KI/KTableSource.java``): a null key is
  dropped (and counted); a null value deletes the key (a tombstone); any other value becomes the
  key's latest value, **also when it is older** than the stored one (a non-versioned store only
  logs "Detected out-of-order KTable update"). The source forwards ``Change(new, old)`` with the
  record's timestamp; ``old`` is the previous value when old values are enabled (a join, a
  ``group_by`` or a materialized downstream asks for them), else ``None``.
- **Materialized source with a record cache** (every materialized table under the
  TopologyTestDriver, which flushes after each record): a tombstone for a key that is not in the
  store is **not** forwarded (``CachingKeyValueStore``: nothing to delete, nothing to send). An
  unmaterialized source forwards every record, tombstones included.
- **filter / filter_not** (``KI/KTableFilter.java``): a value that fails the predicate becomes a
  tombstone (``new = None``); with old values enabled the old value is filtered the same way,
  and a change whose new and old are both ``None`` afterwards is not forwarded.
- **map_values** (``KI/KTableMapValues.java``): the mapper runs on ``new`` and (old values
  enabled) ``old``, never on ``None``.

A table's per-key state is `TableValue` — the value and the timestamp it was written with — or
``None`` for an absent key; `TableValue.to_plain` / `TableValue.from_plain` turn it into a
plain ``[value, ts]`` pair for an operator's state.

Examples
--------
>>> s1 = table_source_step(None, "k", "a", 5)
>>> s1.forwarded, s1.state
(Change(new='a', old=None), TableValue(value='a', ts=5))
>>> table_source_step(s1.state, "k", None, 6, send_old_values=True).forwarded
Change(new=None, old='a')
>>> table_source_step(None, "k", None, 7).forwarded is None   # tombstone of an absent key
True
"""

from __future__ import annotations

import json
import struct
from typing import Any, Callable, Iterable, Sequence

import attrs

__all__ = [
    "DROP_NULL_KEY", "DROP_NULL_VALUE", "Change", "KeyedChange", "Output", "TableSourceStep", "TableValue",
    "filter_change", "key_bytes", "map_values_change", "table_reference_run", "table_source_step",
]

#: Drop reasons (the ``dropped-records`` metric counts both; the reason says which rule fired).
DROP_NULL_KEY = "null_key"
DROP_NULL_VALUE = "null_value"


@attrs.frozen
class Change:
    """A table update: the ``new`` value and the ``old`` one (``None``: absent, a tombstone, or
    old values not sent). Kafka Streams' ``Change<V>``."""

    new: Any
    old: Any = None


@attrs.frozen
class TableValue:
    """A key's current table value and the timestamp it was written with (``ValueAndTimestamp``)."""

    value: Any
    ts: int

    def to_plain(self) -> list[Any]:
        return [self.value, self.ts]

    @classmethod
    def from_plain(cls, plain: Sequence[Any] | None) -> TableValue | None:
        return None if plain is None else cls(plain[0], int(plain[1]))


@attrs.frozen
class Output:
    """One forwarded stream record: key, value (``None``: a tombstone) and timestamp (ms)."""

    key: Any
    value: Any
    timestamp: int


@attrs.frozen
class KeyedChange:
    """One forwarded table record: key, `Change` and timestamp (ms)."""

    key: Any
    change: Change
    timestamp: int


@attrs.frozen
class TableSourceStep:
    """What one record does to a table source: the key's new state, what is forwarded (``None``:
    nothing) and the drop reason (``None``: not dropped)."""

    state: TableValue | None
    forwarded: Change | None
    dropped: str | None = None


def table_source_step(state: TableValue | None, key: Any, value: Any, ts: int, *, send_old_values: bool = False,
                      materialized: bool = True) -> TableSourceStep:
    """Apply one record to a table source (``KTableSource.process``).

    ``materialized``: the source has a store with a record cache flushed after every record (so
    a tombstone for an absent key is not forwarded); ``False`` forwards every record.

    Examples
    --------
    >>> table_source_step(None, None, "v", 1).dropped
    'null_key'
    >>> table_source_step(None, "k", None, 7, materialized=False).forwarded
    Change(new=None, old=None)
    """
    if key is None:
        return TableSourceStep(state, None, DROP_NULL_KEY)
    new_state = None if value is None else TableValue(value, ts)
    old = None if state is None else state.value
    if materialized and value is None and state is None:
        return TableSourceStep(None, None)
    return TableSourceStep(new_state, Change(value, old if send_old_values else None))


def filter_change(change: Change, predicate: Callable[[Any, Any], bool], key: Any, *, filter_not: bool = False,
                  send_old_values: bool = False) -> Change | None:
    """``KTable#filter`` / ``filterNot`` on one change (``KTableFilter.process``).

    Examples
    --------
    >>> even = lambda k, v: v % 2 == 0
    >>> filter_change(Change(3, 2), even, "k")                      # fails: a tombstone
    Change(new=None, old=None)
    >>> filter_change(Change(3, 1), even, "k", send_old_values=True) is None
    True
    """
    def keep(value: Any) -> Any:
        return value if value is not None and filter_not != bool(predicate(key, value)) else None

    new = keep(change.new)
    old = keep(change.old) if send_old_values else None
    if send_old_values and new is None and old is None:
        return None
    return Change(new, old)


def map_values_change(change: Change, mapper: Callable[[Any, Any], Any], key: Any, *,
                      send_old_values: bool = False) -> Change:
    """``KTable#mapValues`` on one change (``KTableMapValues``): ``None`` stays ``None``.

    Examples
    --------
    >>> map_values_change(Change(2, 1), lambda k, v: v * 10, "k", send_old_values=True)
    Change(new=20, old=10)
    """
    new = None if change.new is None else mapper(key, change.new)
    old = None if change.old is None or not send_old_values else mapper(key, change.old)
    return Change(new, old)


def table_reference_run(records: Iterable[tuple[Any, Any, int]], *, send_old_values: bool = False,
                        materialized: bool = True) -> tuple[list[KeyedChange], dict[Any, TableValue], int]:
    """Run ``(key, value, ts)`` records through a table source: the forwarded changes, the final
    table and the number of dropped records.

    Examples
    --------
    >>> out, table, dropped = table_reference_run([("a", 1, 0), ("a", 2, 5), ("a", 3, 1), ("a", None, 2)])
    >>> [(o.key, o.change.new, o.timestamp) for o in out], table, dropped
    ([('a', 1, 0), ('a', 2, 5), ('a', 3, 1), ('a', None, 2)], {}, 0)
    """
    table: dict[Any, TableValue] = {}
    out: list[KeyedChange] = []
    dropped = 0
    for key, value, ts in records:
        step = table_source_step(table.get(key) if key is not None else None, key, value, ts,
                                 send_old_values=send_old_values, materialized=materialized)
        if step.dropped:
            dropped += 1
            continue
        if step.state is None:
            table.pop(key, None)
        else:
            table[key] = step.state
        if step.forwarded is not None:
            out.append(KeyedChange(key, step.forwarded, ts))
    return out, table, dropped


def key_bytes(key: Any) -> bytes:
    """A key's serialized bytes, for Kafka's byte-wise key orders (outer-join store, suppression
    buffer): ``bytes`` as is, ``str`` as UTF-8 (``StringSerializer``), ``int`` as a 4-byte
    big-endian signed integer when it fits (``IntegerSerializer``) else 8 bytes (``LongSerializer``),
    anything else as compact JSON (the default JSON serde).

    Examples
    --------
    >>> key_bytes("ab"), key_bytes(1), key_bytes(-1) > key_bytes(1)
    (b'ab', b'\\x00\\x00\\x00\\x01', True)
    """
    if isinstance(key, bytes):
        return key
    if isinstance(key, str):
        return key.encode()
    if isinstance(key, int) and not isinstance(key, bool):
        return struct.pack(">i", key) if -2**31 <= key < 2**31 else struct.pack(">q", key)
    return json.dumps(key, separators=(",", ":"), sort_keys=True).encode()
