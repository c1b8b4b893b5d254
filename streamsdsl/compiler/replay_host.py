"""A replay's Python-kernel operator as a grouped Arrow map.

In a replay (the TopologyTestDriver's batch run) a stateful operator's state arrives as rows
(`CARRIED_STATE`) and leaves as rows (`CARRY`), and its clock comes from the plan's columns: the
processor is a pure function of one key's rows. A batch ``transformWithState`` would give it a
state store it never reads: each task opens a RocksDB instance (and Spark spawns ``rm -rf`` to
delete it afterwards) and each state call is a round trip to the JVM. `replay_map` runs the same
processor through ``applyInArrow`` instead: per key, ``init`` with a `MemoryHandle` (state that
lives for the one key, as a batch ``transformWithState``'s does), ``handleInputRows`` with the
key and the rows as ``transformWithState``'s Row API gives them (top-level `Row`s, nested structs
as dicts, the key a tuple of the grouping columns' values), then ``close``. Its rows go back as
that API sends them (``asDict(recursive=True)`` into the output schema's Arrow types).

The processor keeps no timer in a replay: timers are the streaming query's (the replay hands a
window's close to the plan with its threshold), and registering one here is an error.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterator

from streamsdsl.compiler.local_rows import struct_type

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, GroupedData
    from pyspark.sql.streaming.stateful_processor import StatefulProcessor
    from pyspark.sql.types import StructType

__all__ = ["MemoryHandle", "replay_map"]


class _Value:
    """A ``ValueState`` held in memory."""

    def __init__(self) -> None:
        self._value: tuple[Any, ...] | None = None

    def exists(self) -> bool:
        return self._value is not None

    def get(self) -> tuple[Any, ...] | None:
        return self._value

    def update(self, new_value: tuple[Any, ...]) -> None:
        self._value = tuple(new_value)

    def clear(self) -> None:
        self._value = None


class _List:
    """A ``ListState`` held in memory."""

    def __init__(self) -> None:
        self._values: list[tuple[Any, ...]] = []

    def exists(self) -> bool:
        return bool(self._values)

    def get(self) -> Iterator[tuple[Any, ...]]:
        return iter(list(self._values))

    def put(self, new_state: list[tuple[Any, ...]]) -> None:
        self._values = [tuple(v) for v in new_state]

    def appendValue(self, new_state: tuple[Any, ...]) -> None:  # noqa: N802 - PySpark's name
        self._values.append(tuple(new_state))

    def appendList(self, new_state: list[tuple[Any, ...]]) -> None:  # noqa: N802 - PySpark's name
        self._values.extend(tuple(v) for v in new_state)

    def clear(self) -> None:
        self._values = []


class _Map:
    """A ``MapState`` held in memory (keys and values as tuples)."""

    def __init__(self) -> None:
        self._entries: dict[tuple[Any, ...], tuple[Any, ...]] = {}

    def exists(self) -> bool:
        return bool(self._entries)

    def getValue(self, key: tuple[Any, ...]) -> tuple[Any, ...] | None:  # noqa: N802 - PySpark's name
        return self._entries.get(tuple(key))

    def containsKey(self, key: tuple[Any, ...]) -> bool:  # noqa: N802 - PySpark's name
        return tuple(key) in self._entries

    def updateValue(self, key: tuple[Any, ...], value: tuple[Any, ...]) -> None:  # noqa: N802 - PySpark's name
        self._entries[tuple(key)] = tuple(value)

    def iterator(self) -> Iterator[tuple[tuple[Any, ...], tuple[Any, ...]]]:
        return iter(list(self._entries.items()))

    def keys(self) -> Iterator[tuple[Any, ...]]:
        return iter(list(self._entries))

    def values(self) -> Iterator[tuple[Any, ...]]:
        return iter(list(self._entries.values()))

    def removeKey(self, key: tuple[Any, ...]) -> None:  # noqa: N802 - PySpark's name
        self._entries.pop(tuple(key), None)

    def clear(self) -> None:
        self._entries = {}


class MemoryHandle:
    """A ``StatefulProcessorHandle`` whose state lives in memory for one key's call: a replay's
    processor carries its state as rows, so what it stores here is gone after the key, as a
    batch ``transformWithState``'s state is. It has no timers (see the module docs)."""

    def __init__(self) -> None:
        self._states: dict[str, Any] = {}

    def _state(self, name: str, kind: type) -> Any:
        state = self._states.get(name)
        if state is None:
            state = self._states[name] = kind()
        elif not isinstance(state, kind):
            raise ValueError(f"state {name!r} is a {type(state).__name__[1:]} state, not a {kind.__name__[1:]} state")
        return state

    def getValueState(self, stateName: str, schema: Any, ttlDurationMs: int | None = None) -> _Value:  # noqa: N802,N803
        return self._state(stateName, _Value)  # type: ignore[no-any-return]

    def getListState(self, stateName: str, schema: Any, ttlDurationMs: int | None = None) -> _List:  # noqa: N802,N803
        return self._state(stateName, _List)  # type: ignore[no-any-return]

    def getMapState(self, stateName: str, userKeySchema: Any, valueSchema: Any,  # noqa: N802,N803
                    ttlDurationMs: int | None = None) -> _Map:  # noqa: N803
        return self._state(stateName, _Map)  # type: ignore[no-any-return]

    def deleteIfExists(self, stateName: str) -> None:  # noqa: N802,N803
        self._states.pop(stateName, None)

    def registerTimer(self, expiryTimestampMs: int) -> None:  # noqa: N802,N803
        raise RuntimeError(f"a replay's processor registered a timer (at {expiryTimestampMs} ms): a replay "
                           "closes windows by the plan's stream times, not by timers")

    def deleteTimer(self, expiryTimestampMs: int) -> None:  # noqa: N802,N803
        pass

    def listTimers(self) -> Iterator[int]:  # noqa: N802
        return iter(())


def replay_map(grouped: GroupedData, processor: StatefulProcessor, schema: StructType | str) -> DataFrame:
    """``processor`` over each key of ``grouped`` (a replay's operator input), its rows in
    ``schema`` (a `StructType` or a DDL string): what a batch ``transformWithState`` of it gives,
    without a state store. The function ``applyInArrow`` calls per key is pickled with the
    processor and the output's Arrow schema, built here once."""
    import pyarrow as pa
    from pyspark.sql.pandas.types import to_arrow_type

    struct = struct_type(schema) if isinstance(schema, str) else schema
    arrow = pa.schema(list(to_arrow_type(struct, timezone="UTC", prefers_large_types=False)))

    def each_key(key, table):  # type: ignore[no-untyped-def] # no hints: PySpark reads them as the API's form
        from pyspark.sql import Row
        from pyspark.sql.streaming.stateful_processor import TimerValues

        data_row = Row(*table.column_names)
        columns = [column.to_pylist() for column in table.columns]
        rows = [data_row(*values) for values in zip(*columns)]
        processor.init(MemoryHandle())  # type: ignore[arg-type]
        try:
            out = [row.asDict(True) for row in processor.handleInputRows(
                tuple(k.as_py() for k in key), iter(rows), TimerValues(-1, -1))]
        finally:
            processor.close()
        return pa.Table.from_pylist(out, schema=arrow)

    return grouped.applyInArrow(each_key, struct)
