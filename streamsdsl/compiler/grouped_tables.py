"""Lowering of grouped tables (``KTable.group_by`` + ``count``/``reduce``/``aggregate``).

A grouped table needs two keyings, so it is **two chained stateful operators** (Spark 4 accepts
chained ``transformWithState`` operators in a streaming query in update mode, with timeMode
``None``; probed 2026-11-25):

1. `TableGroupByNode` — keyed by the table's key. One state row per key: the table's current
   value, so each change becomes ``Change(new, old)`` (Kafka's ``enableSendingOldValues``), and
   `streamsdsl.semantics.grouped_table.regroup` re-keys it: the old value goes to its old group
   *first*, then the new value to its new group (one ``Change(new, old)`` when both land in the
   same group). Its output (the repartition topic in Kafka Streams) is keyed by the group key;
   the value carries the new and the old value (``struct<n, o>``).
2. `GroupedTableAggregateNode` — keyed by the group key. One state row per group: the aggregate
   and its timestamp; `streamsdsl.semantics.grouped_table.grouped_aggregate_step` applies each
   re-keyed change (subtract, then add).

Both process a key's rows in source order (pipe order in the test driver; (partition, offset)
when streaming), so a row's changes reach its groups in the order Kafka Streams forwards them.
In the test driver the state of both is carried from one run to the next (`CARRIED_STATE` in,
`CARRY` out); the aggregate's carried state has the layout of a stored window, so
``TopologyTestDriver.get_key_value_store(store)`` reads it.

``KTable.suppress`` is lowered in `streamsdsl.compiler.suppress`.
"""

from __future__ import annotations

from typing import Any, Iterator

import attrs
from pyspark.sql import DataFrame, Row
from pyspark.sql import functions as F
from pyspark.sql.streaming.stateful_processor import StatefulProcessorHandle
from pyspark.sql.types import _parse_datatype_string

from streamsdsl import ir
from streamsdsl.compiler.carry import carry_out, with_carried_states
from streamsdsl.compiler.event_time import transform_with_state
from streamsdsl.compiler.columns import CARRIED_STATE, CARRY, EVENT_METRIC, EVENT_VALUE, FINAL_KEY_ORDER, FRAME_COLUMNS
from streamsdsl.compiler.columns import HEADERS_TYPE, OUTPUT_POSITION, POSITION_TYPE, SOURCE_POSITION
from streamsdsl.compiler.jvm_operator import Backend
from streamsdsl.compiler.frame import Frame, KeyCodec
from streamsdsl.compiler.joins import KeyedOperator
from streamsdsl.compiler.lowering import Lowering, PlanMode
from streamsdsl.compiler.python_ops import result_error
from streamsdsl.compiler.processors import windows_type
from streamsdsl.values.serdes import PlanSerde
from streamsdsl.errors import UserFunctionError
from streamsdsl.semantics.grouped_table import GroupedTableFunctions, grouped_aggregate_step, regroup
from streamsdsl.semantics.tables import Change, TableValue
from streamsdsl.operators.descriptions import GroupedAggregateDescription, TableGroupByDescription, description_of
from streamsdsl.operators.functions import selector_pair

__all__ = ["GroupedTableConfig"]

REGROUP = "regroup"
AGGREGATE = "aggregate"

#: Replay: the key a `CARRY` row carries state for, in the operator's input key type (the
#: ``key`` column holds output keys, which the re-keying operator gives another type).
CARRIED_KEY = "_carried_key"


@attrs.frozen
class GroupedTableConfig:
    """What one of the two operators needs on the executors (pickled with it).

    ``kind`` `REGROUP` (keyed by the table key, state: the table's value; ``value_in`` the
    table's value serde, ``value_out`` the grouped value serde) or `AGGREGATE` (keyed by the
    group key, state: the aggregate; ``value_in`` the grouped value serde, ``value_out`` the
    aggregate's)."""

    node: str
    kind: str
    key_in: PlanSerde
    value_in: PlanSerde
    key_out: PlanSerde
    value_out: PlanSerde
    selector: Any = None
    fns: GroupedTableFunctions | None = None
    replay: bool = False
    #: The name of the operator's state variable (an aggregation's: its store, which interactive
    #: queries find it by).
    state_name: str = "state"

    @property
    def state_serde(self) -> PlanSerde:
        return self.value_in if self.kind == REGROUP else self.value_out

    @property
    def out_value_type(self) -> str:
        if self.kind == REGROUP:
            return f"struct<n:{self.value_out.spark_type},o:{self.value_out.spark_type}>"
        return self.value_out.spark_type

    @property
    def carried_type(self) -> str:
        """A key's state between driver runs, as one stored window (the store readers' layout)."""
        return windows_type(self.state_serde.spark_type)


class GroupedTableOperator(KeyedOperator):
    """One state row per key: the table's value (regroup) or the group's aggregate (aggregate)."""

    replay_fields = (CARRIED_STATE, CARRIED_KEY)

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.state = handle.getValueState(self.config.state_name, f"value {self.config.state_serde.spark_type}, ts bigint")

    def handleInputRows(self, key: Any, rows: Iterator[Row], timerValues: Any) -> Iterator[Row]:  # noqa: N802,N803
        cfg = self.config
        data = sorted((r.asDict() for r in rows), key=lambda r: (r[SOURCE_POSITION], r[OUTPUT_POSITION] or []))
        kcell = key[0]
        serde = cfg.state_serde
        state: TableValue | None = None
        if cfg.replay:
            while data and data[0].get(CARRIED_STATE) is not None:
                for w in data.pop(0)[CARRIED_STATE]:
                    state = TableValue(serde.from_internal(w["agg"]), int(w["ts"]))
        else:
            stored = self.state.get()
            if stored is not None:
                state = TableValue(serde.from_internal(stored[0]), int(stored[1]))
        step = self._regroup if cfg.kind == REGROUP else self._aggregate
        for r in data:
            state = yield from step(kcell, r, state)
        if cfg.replay:
            if state is not None:
                carried = [{"start": 0, "end": 0, "agg": serde.to_internal(state.value), "ts": state.ts, "fin": False}]
                yield self.out(None, None, -1, [], -1, [], None, CARRY, None, carried, kcell)
        elif state is None:
            self.state.clear()
        else:
            self.state.update((serde.to_internal(state.value), state.ts))

    def _regroup(self, kcell: Any, r: dict[str, Any], state: TableValue | None) -> Any:
        cfg = self.config
        ts, position = r["timestamp"], r[SOURCE_POSITION]
        k = cfg.key_in.from_internal(kcell)
        new = cfg.value_in.from_internal(r["value"])
        old = None if state is None else state.value
        try:
            changes = regroup(k, Change(new, old), ts, lambda key, value: selector_pair(cfg.selector(key, value), cfg.node))
        except Exception as exc:  # noqa: BLE001 - re-raised with the processor and the record
            raise UserFunctionError.of(cfg.node, "selector", exc, k, position).in_worker() from exc
        base = list(r[OUTPUT_POSITION] or [])
        for i, (group, change, t) in enumerate(changes):
            try:
                gcell = cfg.key_out.to_internal(group)
                vo = cfg.value_out
                value = {"n": None if change.new is None else vo.to_internal(change.new),
                         "o": None if change.old is None else vo.to_internal(change.old)}
            except Exception as exc:  # noqa: BLE001 - a result its serde cannot hold
                raise result_error(cfg.node, "selector", exc, repr(k), position) from exc
            yield self._row(gcell, value, t, r["headers"], position, [*base, i], None, None, None)
        return None if new is None else TableValue(new, ts)

    def _aggregate(self, kcell: Any, r: dict[str, Any], state: TableValue | None) -> Any:
        cfg = self.config
        ts, position = r["timestamp"], r[SOURCE_POSITION]
        group = cfg.key_in.from_internal(kcell)
        vi, v = cfg.value_in, r["value"]
        change = Change(None if v["n"] is None else vi.from_internal(v["n"]),
                        None if v["o"] is None else vi.from_internal(v["o"]))
        try:
            step = grouped_aggregate_step(state, group, change, ts, cfg.fns)  # type: ignore[arg-type]
        except Exception as exc:  # noqa: BLE001 - re-raised with the processor and the record
            raise UserFunctionError.of(cfg.node, "adder/subtractor", exc, group, position).in_worker() from exc
        if step.output is not None:
            new = step.output.change.new
            try:
                out_value = None if new is None else cfg.value_out.to_internal(new)
            except Exception as exc:  # noqa: BLE001 - a result its serde cannot hold
                raise result_error(cfg.node, "adder", exc, repr(group), position) from exc
            yield self._row(kcell, out_value, step.output.timestamp, r["headers"], position, r[OUTPUT_POSITION],
                            None, None, None)
        return step.state



def _run(lowering: Lowering, inp: DataFrame, config: GroupedTableConfig) -> DataFrame:
    """Run one operator over ``inp`` (frame columns, key in ``key_in``'s encoding); in replay with
    the state carried from the previous run (and handed to the next)."""
    replay = lowering.mode is PlanMode.REPLAY
    config = attrs.evolve(config, replay=replay)
    types = {"key": config.key_out.spark_type, "value": config.out_value_type, "timestamp": "bigint",
             "headers": HEADERS_TYPE, SOURCE_POSITION: "bigint", OUTPUT_POSITION: POSITION_TYPE,
             FINAL_KEY_ORDER: "string", EVENT_METRIC: "string", EVENT_VALUE: "double",
             CARRIED_STATE: config.carried_type, CARRIED_KEY: config.key_in.spark_type}
    processor = GroupedTableOperator(config)
    schema = _parse_datatype_string(", ".join(f"{f} {types[f]}" for f in processor.fields))
    inp = inp.select("key", "value", "timestamp", "headers", SOURCE_POSITION, OUTPUT_POSITION)
    if replay:
        inp = with_carried_states(lowering, inp, config.node, config.key_in.spark_type, config.carried_type)
    out = transform_with_state(not replay, lowering.topology, config.node, inp.groupBy("key"), processor, schema,
                               "None")
    if replay:
        out = carry_out(lowering, out, config.node, F.col(CARRIED_KEY), config.key_in.spark_type,
                        config.carried_type).drop(CARRIED_KEY)
    return out.filter(F.col(EVENT_METRIC).isNull()).select(*FRAME_COLUMNS)


@attrs.frozen
class WindowedKeyCells:
    """A windowed table's key column (``{key, start, end}``) read as the operator reads a serde's
    cells: the selector of a windowed table's ``group_by`` receives a `Windowed` key."""

    codec: KeyCodec

    @property
    def spark_type(self) -> str:
        return self.codec.spark_type

    def from_internal(self, cell: Any) -> Any:
        return self.codec.from_cell(cell)


def _table_group_by(self: Lowering, node: ir.TableGroupByNode) -> Frame:
    table = self.parent(node)
    d: TableGroupByDescription = description_of(node, [table], self.topology)
    key_in = WindowedKeyCells(table.key) if table.key.windowed else table.key.serde
    config = GroupedTableConfig(node.name, REGROUP, key_in, table.value, d.key_serde, d.value,  # type: ignore[arg-type]
                                selector=node.selector.fn)
    self.choices.record(node.name, Backend.PYTHON, "grouped tables run on the Python operator")
    return Frame(_run(self, table.df, config), d.key, d.value, is_table=True)


def _grouped_table_aggregate(self: Lowering, node: ir.GroupedTableAggregateNode) -> Frame:
    regrouped = self.parent(node)
    d: GroupedAggregateDescription = description_of(node, [regrouped], self.topology)
    key_out, value_out = d.key_serde, d.value
    df = regrouped.df
    if key_out != regrouped.key.serde:
        from streamsdsl.compiler.serde_exprs import convert_column

        df = df.withColumn("key", convert_column(F.col("key"), regrouped.key.serde, key_out))
    config = GroupedTableConfig(node.name, AGGREGATE, key_out, regrouped.value, key_out, value_out,
                                fns=d.functions, state_name=node.store)
    self.choices.record(node.name, Backend.PYTHON, "grouped tables run on the Python operator")
    return Frame(_run(self, df, config), d.key, value_out, is_table=True)

