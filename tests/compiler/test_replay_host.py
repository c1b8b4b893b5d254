"""`replay_map`: a replay's processor over a grouped Arrow map gives the rows a batch
``transformWithState`` of the same processor gives (keys, nested structs, maps, arrays, nulls,
timestamps; state that lives for one key), without a state store; `MemoryHandle` keeps
PySpark's state API in memory and refuses timers."""

from __future__ import annotations

import datetime
from typing import Any, Iterator

import pytest
from pyspark.sql import Row
from pyspark.sql.streaming.stateful_processor import StatefulProcessor, StatefulProcessorHandle

from streamsdsl.compiler.local_rows import local_frame
from streamsdsl.compiler.replay_host import MemoryHandle, replay_map

#: Input: a struct key with a null field, a null key, nested values, a map, a timestamp.
INPUT_DDL = ("key struct<k: string, n: int>, v bigint, "
             "nested struct<l: array<struct<a: string, b: binary>>, m: map<string, bigint>>, ts timestamp")
UTC = datetime.timezone.utc
ROWS = [({"k": "a", "n": 1}, 3, {"l": [{"a": "x", "b": b"\x00"}], "m": {"p": 1}}, datetime.datetime(2026, 1, 1, tzinfo=UTC)),
        ({"k": "a", "n": 1}, 1, None, None),
        ({"k": "b", "n": None}, 2, {"l": [], "m": {}}, datetime.datetime(1970, 1, 1, 0, 0, 1, tzinfo=UTC)),
        (None, 7, {"l": None, "m": None}, None)]
OUTPUT_DDL = ("key struct<k: string, n: int>, seen boolean, total bigint, "
              "first_nested struct<l: array<struct<a: string, b: binary>>, m: map<string, bigint>>, "
              "keys array<string>, ts timestamp, kind string")


class _Summing(StatefulProcessor):
    """Per key: whether its state existed before (never: state lives for one key), the sum of
    ``v``, the nested value and timestamp of the row with the largest ``v``, its map's keys (a map
    arrives as a list of pairs), the types the rows and the key arrive as."""

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.state = handle.getValueState("sum", "total bigint")

    def handleInputRows(self, key: Any, rows: Iterator[Row], timerValues: Any) -> Iterator[Row]:  # noqa: N802,N803
        seen = self.state.exists()
        data = sorted(rows, key=lambda r: -r["v"])
        self.state.update((sum(r["v"] for r in data),))
        (total,) = self.state.get()  # type: ignore[misc]
        first = data[0]
        kinds = (f"{type(key).__name__}/{type(key[0]).__name__}/{type(first).__name__}/"
                 f"{type(first['nested']).__name__}/{timerValues.getCurrentWatermarkInMs()}")
        yield Row(key=key[0], seen=seen, total=total, first_nested=first["nested"],
                  keys=[k for k, _ in (first["nested"] or {}).get("m") or ()], ts=first["ts"], kind=kinds)

    def close(self) -> None:
        pass


def _sorted(rows: list[Row]) -> list[Row]:
    return sorted(rows, key=lambda r: repr(r["key"]))


@pytest.mark.spark
def test_the_same_rows_as_a_batch_transform_with_state(spark: Any) -> None:
    """Every key's row, as ``transformWithState`` (Row API, batch) gives it: the key as a tuple of
    the grouping columns' Python values, the rows as `Row`s with nested structs as dicts, state
    that starts empty for each key, no watermark (-1)."""
    from streamsdsl.runtime.session import require_state_store

    require_state_store(spark)
    frame = local_frame(spark, ROWS, INPUT_DDL)
    mine = replay_map(frame.groupBy("key"), _Summing(), OUTPUT_DDL)
    theirs = frame.groupBy("key").transformWithState(statefulProcessor=_Summing(), outputStructType=OUTPUT_DDL,
                                                      outputMode="Update", timeMode="None")
    assert mine.schema == theirs.schema
    got = _sorted(mine.collect())
    assert got == _sorted(theirs.collect())
    assert [(r["key"], r["seen"], r["total"], r["keys"]) for r in got] == [
        (None, False, 7, []), (Row(k="a", n=1), False, 4, ["p"]), (Row(k="b", n=None), False, 2, [])]
    assert {r["kind"] for r in got} == {"tuple/dict/Row/dict/-1", "tuple/NoneType/Row/dict/-1"}


@pytest.mark.spark
def test_an_error_in_the_processor_fails_the_job_with_its_message(spark: Any) -> None:
    """What the processor raises reaches the driver with its message (the replay's error model
    reads it there)."""
    class _Failing(_Summing):
        def handleInputRows(self, key: Any, rows: Iterator[Row], timerValues: Any) -> Iterator[Row]:  # noqa: N802,N803
            raise ValueError(f"no rows for {key[0]['k']}")

    frame = local_frame(spark, ROWS[:1], INPUT_DDL)
    with pytest.raises(Exception, match="ValueError: no rows for a"):
        replay_map(frame.groupBy("key"), _Failing(), OUTPUT_DDL).collect()


def test_memory_handle_keeps_pyspark_state_api() -> None:
    """Value, list and map state keep tuples; a name keeps its kind; timers are refused."""
    handle = MemoryHandle()
    value = handle.getValueState("v", "x bigint")
    assert (value.exists(), value.get()) == (False, None)
    value.update([1])
    assert (value.exists(), value.get(), handle.getValueState("v", "x bigint").get()) == (True, (1,), (1,))
    value.clear()
    assert value.get() is None

    items = handle.getListState("l", "x bigint")
    items.put([(1,), [2]])
    items.appendValue((3,))
    items.appendList([(4,)])
    assert (items.exists(), list(items.get())) == (True, [(1,), (2,), (3,), (4,)])
    items.clear()
    assert (items.exists(), list(items.get())) == (False, [])

    entries = handle.getMapState("m", "k string", "v bigint")
    entries.updateValue(("a",), (1,))
    entries.updateValue(["b"], [2])
    assert (entries.getValue(("a",)), entries.containsKey(("b",)), entries.getValue(("c",))) == ((1,), True, None)
    assert (list(entries.iterator()), list(entries.keys()), list(entries.values())) == (
        [(("a",), (1,)), (("b",), (2,))], [("a",), ("b",)], [(1,), (2,)])
    entries.removeKey(("a",))
    assert list(entries.keys()) == [("b",)]
    handle.deleteIfExists("m")
    assert not handle.getMapState("m", "k string", "v bigint").exists()

    with pytest.raises(ValueError, match="state 'v' is a Value state, not a Map state"):
        handle.getMapState("v", "k string", "v bigint")
    assert list(handle.listTimers()) == []
    with pytest.raises(RuntimeError, match=r"registered a timer \(at 5 ms\): a replay closes windows"):
        handle.registerTimer(5)


@pytest.mark.spark
@pytest.mark.parametrize("choice, host", [("python", "FlatMapGroupsInArrow"), ("auto", "MapGroups")])
def test_a_replay_plan_has_no_state_store(spark: Any, choice: str, host: str) -> None:
    """The test driver's plan of an aggregation with Python functions, a count and a
    stream–stream join hosts their operators per key (a grouped Arrow map on the Python operator,
    ``flatMapGroups`` on the JVM's): no ``transformWithState``, so no state store."""
    from streamsdsl import Consumed, JoinWindows, Serdes, StreamsBuilder
    from streamsdsl.runtime.driver import TopologyTestDriver

    b = StreamsBuilder()
    strings = Consumed.with_serdes(Serdes.String(), Serdes.String())
    left, right = b.stream("l", strings), b.stream("r", strings)
    left.group_by_key().aggregate(lambda: "", lambda k, v, a: a + v).to_stream().to("agg")
    left.group_by_key().count().to_stream().to("count")
    left.join(right, lambda a, c: f"{a}+{c}", JoinWindows.of_time_difference_and_grace(5, 0)).to("joined")
    with TopologyTestDriver(b.build(), {"streamsdsl.operator": choice}, engine="spark", spark=spark) as d:
        plan = d._engine.compile().output._jdf.queryExecution().executedPlan().toString()
    assert "TransformWithState" not in plan
    assert plan.count(f"{host} ") + plan.count(f"{host}(") >= (3 if choice == "python" else 2), plan
