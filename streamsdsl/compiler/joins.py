"""Lowering of tables and stream-table joins, and of split (branches).

A stream-table join is **one** stateful operator over the union of the stream's and the table's
records, keyed by the join key (DESIGN.md: joins like cogroup). The operator holds the table's
current value per key (one state row) and applies `streamsdsl.semantics.stream_table` to each
record in order: a table record updates the state and emits nothing, a stream record is joined
with the state. A materialized table source (`TableSourceNode` / `StreamToTableNode` whose store
exists) runs the same operator in *source* mode, which forwards the changelog
(`streamsdsl.semantics.tables.table_source_step`: a tombstone for an absent key is not forwarded).

Order within a key: the test driver's replay processes records in pipe order (Kafka Streams'
task-level timestamp synchronisation, as its TopologyTestDriver does); streaming processes a
micro-batch's records of a key by (timestamp, source position).

The JVM operator (`streamsdsl.compiler.jvm_joins`) runs a stream–table join of a plain table when
``streamsdsl.operator`` allows it: its Java port of the rules finds the matched pairs, the joiner
runs afterwards over them a batch at a time (a built-in joiner as Spark columns). The Python
operator runs it otherwise, and every join of a versioned table.
"""

from __future__ import annotations

from typing import Any, Callable, Iterator

import attrs
from pyspark.sql import DataFrame, Row
from pyspark.sql import functions as F
from pyspark.sql.streaming.stateful_processor import StatefulProcessor, StatefulProcessorHandle
from pyspark.sql.types import _parse_datatype_string

from streamsdsl import ir
from streamsdsl.compiler.carry import carry_out, with_carried_states
from streamsdsl.compiler.event_time import transform_with_state
from streamsdsl.compiler.columns import CARRIED_STATE, CARRY, DROPPED, EVENT_METRIC, EVENT_VALUE, FINAL_KEY_ORDER
from streamsdsl.compiler.columns import FRAME_COLUMNS, HEADERS_TYPE, INPUT_INDEX, OUTPUT_POSITION, POSITION_TYPE
from streamsdsl.compiler.columns import OPERATOR_OUTPUT_FIELDS, SOURCE_POSITION
from streamsdsl.compiler.jvm_joins import JvmJoin, apply_joiner, joiner_label, null_json_values, run_jvm_join
from streamsdsl.compiler.jvm_operator import CONTINUES_ON_PYTHON, JOINS_ON_PYTHON, Backend
from streamsdsl.compiler.frame import Frame
from streamsdsl.compiler.lowering import Lowering, PlanMode
from streamsdsl.compiler.python_ops import filter_python, result_error
from streamsdsl.compiler.serde_exprs import convert_column
from streamsdsl.values.serdes import PlanSerde
from streamsdsl.errors import UserFunctionError
from streamsdsl.operators.descriptions import StreamTableJoinDescription, TableDescription, description_of
from streamsdsl.operators.functions import first_match
from streamsdsl.semantics.kernels import FlushPolicy
from streamsdsl.semantics.stream_table import StreamTableJoin, stream_join_step, table_update
from streamsdsl.semantics.tables import TableValue, table_source_step

__all__ = ["KeyedOperatorConfig", "TableOperatorConfig", "run_keyed_operator"]

#: `INPUT_INDEX` of a stream record and of a table record in the operator's input.
STREAM_SIDE = 0
TABLE_SIDE = 1
#: Processor modes: forward a table's changelog, or join a stream with a table.
SOURCE = "source"

OUTPUT_FIELDS = OPERATOR_OUTPUT_FIELDS


@attrs.frozen
class KeyedOperatorConfig:
    """What an operator that `run_keyed_operator` runs needs on the executors (pickled with it):
    the processor ``node``, the operation ``kind``, the serdes of the key and of the output
    value, and the Spark type of a key's state row (`state_type`); a subclass adds the inputs'
    value serdes. ``replay`` is set by `run_keyed_operator`."""

    node: str
    kind: str
    key: PlanSerde
    value_out: PlanSerde
    replay: bool = attrs.field(default=False, kw_only=True)
    #: The store has a record cache (a write that changes nothing is not forwarded);
    #: ``False`` with ``statestore.cache.max.bytes = 0``: every write is forwarded.
    cached: bool = attrs.field(default=True, kw_only=True)
    #: The name of the operator's state variable (a materialized table's: its store, which
    #: interactive queries find it by).
    state_name: str = attrs.field(default="table", kw_only=True)

    @property
    def state_type(self) -> str:
        raise NotImplementedError


@attrs.frozen
class TableOperatorConfig(KeyedOperatorConfig):
    """What the table operator needs.

    ``kind``: ``"source"`` (forward the table's changelog), ``"inner"`` or ``"left"`` (a join).
    ``cached`` (source mode): a tombstone of an absent key is not forwarded."""

    stream_value: PlanSerde
    table_value: PlanSerde
    joiner: Any = None

    @property
    def state_type(self) -> str:
        return f"struct<value:{self.table_value.spark_type},ts:bigint>"


class KeyedOperator(StatefulProcessor):
    """What the keyed operators without timers share (tables, stream–table and table–table joins,
    grouped tables): the config, the output rows (in the test driver's replay with the carried
    state besides: `replay_fields`), no timers."""

    #: The columns a replay adds to the output (the key's state for the next run, ...).
    replay_fields: tuple[str, ...] = (CARRIED_STATE,)

    def __init__(self, config: Any) -> None:
        self.config = config
        self.fields = (*OUTPUT_FIELDS, *self.replay_fields) if config.replay else OUTPUT_FIELDS
        self.out = Row(*self.fields)

    def _row(self, *values: Any) -> Row:
        """An output row; in replay its carried-state columns empty."""
        return self.out(*values, *(None,) * len(self.replay_fields)) if self.config.replay else self.out(*values)

    def _joined(self, step: Callable[[], Any], key: Any, kcell: Any, r: dict[str, Any]) -> Iterator[Row]:
        """A stream record ``r`` joined (``step``: the kernel's join step over the key's table
        state): a drop counted, the joiner's result out under ``kcell``; the joiner's error and a
        result its serde cannot hold name the processor and the record."""
        cfg = self.config
        ts, position = r["timestamp"], r[SOURCE_POSITION]
        try:
            result = step()
        except Exception as exc:  # noqa: BLE001 - re-raised with the processor and the record
            raise UserFunctionError.of(cfg.node, "joiner", exc, key, position).in_worker() from exc
        if result.dropped:
            yield self._row(None, None, ts, [], position, [], None, DROPPED, 1.0)
        if result.output is not None:
            try:
                out_value = cfg.value_out.to_internal(result.output.value)
            except Exception as exc:  # noqa: BLE001 - a result its serde cannot hold
                raise result_error(cfg.node, "joiner", exc, repr(key), position) from exc
            yield self._row(kcell, out_value, ts, r["headers"], position, r[OUTPUT_POSITION], None, None, None)

    def _keep_table(self, state: Any, start: Any) -> None:
        """Streaming: the key's table value after its rows into the operator's state, written only
        when a table record changed it (``state`` is not ``start``, the value read before them): a
        batch of stream records alone leaves the row as it was, unwritten."""
        if state is start:
            return
        if state is None:
            self.state.clear()
        else:
            self.state.update((self.config.table_value.to_internal(state.value), state.ts))

    def handleInitialState(self, key: Any, initialState: Row, timerValues: Any) -> None:  # noqa: N802,N803
        """A continued backfill's state of the key (a row ``(key, state)``, the state as the
        replay carries it): stored as this operator stores what it processed itself."""
        raise NotImplementedError(f"{self.config.node}: this operator takes no initial state")

    def close(self) -> None:
        pass


class TableOperator(KeyedOperator):
    """One state row per key: the table's current value and its timestamp."""

    def __init__(self, config: TableOperatorConfig) -> None:
        super().__init__(config)
        self.spec = None if config.kind == SOURCE else StreamTableJoin(config.kind)  # type: ignore[arg-type]

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.handle = handle
        self.state = handle.getValueState(self.config.state_name, f"value {self.config.table_value.spark_type}, ts bigint")

    def handleInputRows(self, key: Any, rows: Iterator[Row], timerValues: Any) -> Iterator[Row]:  # noqa: N802,N803
        cfg = self.config
        data = [r.asDict() for r in rows]
        if cfg.replay:
            data.sort(key=lambda r: (r[SOURCE_POSITION], r[OUTPUT_POSITION] or []))
        else:
            data.sort(key=lambda r: (r["timestamp"], r[SOURCE_POSITION], r[OUTPUT_POSITION] or []))
        kcell = key[0]
        k = cfg.key.from_internal(kcell)
        tv = cfg.table_value
        state = start = table_state_at_start(data, cfg.replay, self.state, tv)
        for r in data:
            ts, position = r["timestamp"], r[SOURCE_POSITION]
            if r[INPUT_INDEX] == TABLE_SIDE:
                value = tv.from_internal(r["value"]["t"])
                step = table_source_step(state, k, value, ts, materialized=cfg.cached) if self.spec is None \
                    else table_update(state, k, value, ts)
                state = step.state
                if self.spec is None and step.forwarded is not None:
                    yield self._row(kcell, r["value"]["t"] if step.forwarded.new is not None else None, ts,
                                    r["headers"], position, r[OUTPUT_POSITION], None, None, None)
                continue
            value = cfg.stream_value.from_internal(r["value"]["s"])
            spec: StreamTableJoin = self.spec  # type: ignore[assignment]
            yield from self._joined(lambda: stream_join_step(spec, state, k, value, ts, cfg.joiner), k, kcell, r)
        if cfg.replay:
            if state is not None:
                carried = {"value": tv.to_internal(state.value), "ts": state.ts}
                yield self.out(kcell, None, -1, [], -1, [], None, CARRY, None, carried)
        else:
            self._keep_table(state, start)

    def handleInitialState(self, key: Any, initialState: Row, timerValues: Any) -> None:  # noqa: N802,N803
        carried, tv = initialState["state"], self.config.table_value
        self.state.update((tv.to_internal(tv.from_internal(carried["value"])), int(carried["ts"])))


def _operator_input(frame: Frame, side: int, key: PlanSerde, stream_type: str, table_type: str) -> DataFrame:
    """A frame's rows in the operator's input layout: the key in ``key``'s encoding, the value in
    field ``s`` (stream) or ``t`` (table) of a struct, the side in `INPUT_INDEX`."""
    k = convert_column(F.col("key"), frame.key.serde, key) if frame.key.serde != key else F.col("key")
    value = F.struct(
        (F.col("value") if side == STREAM_SIDE else F.lit(None)).cast(stream_type).alias("s"),
        (F.col("value") if side == TABLE_SIDE else F.lit(None)).cast(table_type).alias("t"),
    )
    return frame.df.select(k.alias("key"), value.alias("value"), "timestamp", "headers", SOURCE_POSITION,
                           OUTPUT_POSITION, F.lit(side).alias(INPUT_INDEX))


def run_keyed_operator(lowering: Lowering, inp: DataFrame, config: KeyedOperatorConfig,
                       operator: type[StatefulProcessor], carried_side: int, count_drops: bool = True, *,
                       stateful_below: bool | None = None, out_key_type: str | None = None,
                       carried_key: Any = None) -> DataFrame:
    """Run ``operator(config)`` (one state row per key, no timers) over ``inp``; in replay with
    the state carried from the previous run (its rows on input side ``carried_side``) and handed
    to the next. Drops are counted (and logged) right after it when ``count_drops``.
    ``stateful_below``: whether a stateful operator reads its output (``None``: a node of the
    topology named ``config.node`` says; an operator of a node's inner stage says itself).

    ``out_key_type``: the type of the output's keys when they are not the operator's keys (a
    global-table join outputs the stream's keys); then ``carried_key`` is the Column of a carry
    row that holds the operator's key."""
    replay = lowering.mode is PlanMode.REPLAY
    config = attrs.evolve(config, replay=replay)
    types = {"key": out_key_type or config.key.spark_type, "value": config.value_out.spark_type, "timestamp": "bigint",
             "headers": HEADERS_TYPE, SOURCE_POSITION: "bigint", OUTPUT_POSITION: POSITION_TYPE,
             FINAL_KEY_ORDER: "string", EVENT_METRIC: "string", EVENT_VALUE: "double",
             CARRIED_STATE: config.state_type}
    processor = operator(config)
    schema = _parse_datatype_string(", ".join(f"{f} {types[f]}" for f in processor.fields))  # type: ignore[attr-defined]
    if replay:
        inp = with_carried_states(lowering, inp, config.node, config.key.spark_type, config.state_type,
                                  **{INPUT_INDEX: F.lit(carried_side)})
    initial = lowering.initial_state(inp.sparkSession, config.node, config.key.spark_type, config.state_type)
    out = transform_with_state(not replay, lowering.topology, config.node, inp.groupBy("key"), processor, schema,
                               "None", stateful_below=stateful_below,
                               initial_state=None if initial is None else initial.groupBy("key"))
    if replay:
        out = carry_out(lowering, out, config.node, F.col("key") if carried_key is None else carried_key,
                        config.key.spark_type, config.state_type)
    metric = F.col(EVENT_METRIC)
    if count_drops:
        out = lowering.observe(out, config.node, "input", dropped=F.when(metric == DROPPED, F.col(EVENT_VALUE)))
    return out.filter(metric.isNull()).select(*FRAME_COLUMNS)


def _run(lowering: Lowering, inp: DataFrame, config: TableOperatorConfig) -> DataFrame:
    """The table operator over ``inp`` (a table source's drops, null keys, are counted before it)."""
    return run_keyed_operator(lowering, inp, config, TableOperator, TABLE_SIDE, count_drops=config.kind != SOURCE)


def _table_records(lowering: Lowering, frame: Frame, node: str) -> Frame:
    """A table source's records: a null key is dropped (and counted), a null value is a tombstone."""
    return frame.with_df(lowering.drop_counted(frame.df, node, F.col("key").isNotNull()), is_table=True)


def _table(lowering: Lowering, node: ir.Node, records: Frame, materialized: bool) -> Frame:
    """The changelog of a table source: its records as they are (no store), or (a store with a
    record cache) through the operator in source mode. A join reads ``records`` either way."""
    if not materialized:
        return attrs.evolve(records, table_records=records.df)
    lowering.choices.record(node.name, Backend.PYTHON, "tables run on the Python operator")
    inp = _operator_input(records, TABLE_SIDE, records.key.serde, records.value.spark_type, records.value.spark_type)
    retention = getattr(node, "history_retention_ms", None)
    if retention is not None:
        from streamsdsl.compiler.versioned import VersionedConfig, run_versioned

        versioned = VersionedConfig(node.name, SOURCE, records.key.serde, value_out=records.value,
                                    stream_value=records.value, table_value=records.value, retention=retention,
                                    state_name=node.store)
        return Frame(run_versioned(lowering, inp, versioned), records.key, records.value, is_table=True,
                     table_records=records.df)
    config = TableOperatorConfig(node.name, SOURCE, records.key.serde, value_out=records.value,
                                 stream_value=records.value, table_value=records.value,
                                 cached=lowering.flush is FlushPolicy.PER_RECORD, state_name=node.store)
    return Frame(_run(lowering, inp, config), records.key, records.value, is_table=True, table_records=records.df)


def _versioned_records(lowering: Lowering, records: Frame, node: ir.TableSourceNode | ir.StreamToTableNode) -> Frame:
    """A versioned table's records without the updates its store refuses (older than the
    store's stream time minus the history retention: counted as dropped, as Kafka's store counts
    them), in the test driver's replay, where the store's stream time (all keys, pipe order) is
    known; the streaming operator applies the rule itself (`streamsdsl.compiler.versioned`)."""
    if node.history_retention_ms is None or lowering.mode is not PlanMode.REPLAY:
        return records
    from streamsdsl.compiler.versioned import expired_table_records

    return records.with_df(expired_table_records(lowering, records.df, node.name, node.history_retention_ms),
                           is_table=True)


def _table_source(self: Lowering, node: ir.TableSourceNode) -> Frame:
    from streamsdsl.compiler.lowering import _source

    records = _versioned_records(self, _table_records(self, _source(self, node), node.name), node)
    return _table(self, node, records, node.materialized)


def _stream_to_table(self: Lowering, node: ir.StreamToTableNode) -> Frame:
    parent = self.parent(node)
    d: TableDescription = description_of(node, [parent], self.topology)
    return _table(self, node, _versioned_records(self, _table_records(self, parent, node.name), node), d.materialized)


def _stream_table_join(self: Lowering, node: ir.StreamTableJoinNode) -> Frame:
    stream, table = self.parent(node, 0), self.parent(node, 1)
    d: StreamTableJoinDescription = description_of(node, [stream, table], self.topology)
    table_df = table.table_records if table.table_records is not None else table.df
    key = d.key_serde
    config = TableOperatorConfig(node.name, node.kind, key, value_out=d.value, stream_value=d.stream_value,
                                 table_value=d.table_value, joiner=d.joiner)
    inp = _operator_input(stream, STREAM_SIDE, key, stream.value.spark_type, table.value.spark_type).unionByName(
        _operator_input(table.with_df(table_df), TABLE_SIDE, key, stream.value.spark_type, table.value.spark_type))
    if d.history_retention_ms is None and self.continues(node.name):
        self.choices.record(node.name, Backend.PYTHON, CONTINUES_ON_PYTHON)
    elif d.history_retention_ms is None:
        jvm = self.choices.choose(node.name, JvmJoin("stream_table", node.kind), inp.sparkSession, node.kind)
        if jvm is not None:
            how = joiner_label(d.joiner, node.name, key=key, left=d.stream_value, right=d.table_value,
                               value_out=d.value)
            self.choices.record(node.name, Backend.JVM, f"{jvm.label}, {node.kind}; {how}")
            inp = null_json_values(inp, d.stream_value, d.table_value, key=key)
            pairs = run_jvm_join(self, inp, node.name, jvm, key_type=key.spark_type,
                                 left_type=stream.value.spark_type, right_type=table.value.spark_type,
                                 state_type=config.state_type, state_name=config.state_name, carried_side=TABLE_SIDE)
            return Frame(apply_joiner(pairs, node.name, d.joiner, key=key, left=d.stream_value, right=d.table_value,
                                      value_out=d.value), d.key, d.value)
    else:  # a versioned table: lookups as of the stream record's time
        self.choices.record(node.name, Backend.PYTHON, "stream-table join of a versioned table: " + JOINS_ON_PYTHON)
        from streamsdsl.compiler.versioned import VersionedConfig, run_versioned

        versioned = VersionedConfig(node.name, node.kind, key, value_out=d.value, stream_value=d.stream_value,
                                    table_value=d.table_value, retention=d.history_retention_ms, grace=d.grace_ms,
                                    joiner=d.joiner)
        return Frame(run_versioned(self, inp, versioned), d.key, d.value)
    return Frame(_run(self, inp, config), d.key, d.value)


# --- split ------------------------------------------------------------------------------------------


def _branch(self: Lowering, node: ir.BranchNode) -> Frame:
    return self.parent(node)


def _branch_child(self: Lowering, node: ir.BranchChildNode) -> Frame:
    keep = first_match(tuple(p.fn for p in node.predicates), node.default)
    return filter_python(self.parent(node), node.name, keep)


def table_state_at_start(data: list[dict[str, Any]], replay: bool, stored: Any, table_value: Any) -> TableValue | None:
    """A table-side operator's state for a key at the start of its rows: in replay the state the
    rows carry (taken off the front of ``data``), in streaming the operator's value state."""
    state: TableValue | None = None
    if replay:
        while data and data[0].get(CARRIED_STATE) is not None:
            carried = data.pop(0)[CARRIED_STATE]
            state = TableValue(table_value.from_internal(carried["value"]), int(carried["ts"]))
    elif stored.exists():
        value, ts = stored.get()
        state = TableValue(table_value.from_internal(value), int(ts))
    return state
