"""Lowering of table–table joins (``KTable.join`` / ``left_join`` / ``outer_join``).

Like a stream–table join (`streamsdsl.compiler.joins`), a table–table join is **one** stateful
operator over the union of both tables' records (`Frame.table_records`: a table source's
records before its store), keyed by the join key, with the side in `INPUT_INDEX`. One state row
per key holds both sides' current values and timestamps (and, for a materialized result,
whether the result store has a row); each record goes through
`streamsdsl.semantics.table_table.table_join_step`, which updates its side and forwards the
joined change under the record's key (Kafka Streams' ``KTableKTable*Join`` processors and the
``KTableKTableJoinMerger``).

The JVM operator (`streamsdsl.compiler.jvm_joins`) runs the join when ``streamsdsl.operator``
allows it: its Java port of the rules (the Python operator's state row) finds the matched pairs
and the tombstones, the joiner runs afterwards over the pairs a batch at a time (a built-in joiner
as Spark columns). A materialized join whose joiner may return ``None`` stays on the Python
operator: there the joiner's result decides whether the result store holds the key's row.

Order within a key: the test driver's replay processes records in pipe order and carries the
state rows from one run to the next (`CARRIED_STATE` / `CARRY`); streaming processes a
micro-batch's records of a key by (timestamp, source position) and keeps the state in the
``transformWithState`` handle.

The result is a table: its changelog (the new values, ``None`` for a delete) is both the
frame's ``df`` and its ``table_records``, so a later join, filter or ``to_stream()`` reads it.
Old values are not carried: a joined table's ``Change.old`` is re-derived by a later stateful
step from the previous value per key, as a materialized join result holds it.
"""

from __future__ import annotations

from typing import Any, Iterator

import attrs
from pyspark.sql import DataFrame, Row
from pyspark.sql import functions as F
from pyspark.sql.streaming.stateful_processor import StatefulProcessorHandle

from streamsdsl import ir
from streamsdsl.compiler.columns import CARRIED_STATE, CARRY, DROPPED
from streamsdsl.compiler.columns import INPUT_INDEX, OUTPUT_POSITION, SOURCE_POSITION, SOURCE_TOMBSTONE
from streamsdsl.compiler.jvm_joins import JvmJoin, apply_joiner, joiner_label, null_json_values, run_jvm_join
from streamsdsl.compiler.jvm_operator import CONTINUES_ON_PYTHON, Backend
from streamsdsl.compiler.frame import Frame
from streamsdsl.compiler.joins import KeyedOperator, KeyedOperatorConfig, run_keyed_operator
from streamsdsl.compiler.lowering import Lowering
from streamsdsl.compiler.python_ops import result_error
from streamsdsl.compiler.serde_exprs import convert_column
from streamsdsl.values.serdes import PlanSerde
from streamsdsl.errors import UserFunctionError
from streamsdsl.operators.descriptions import TableJoinDescription, description_of
from streamsdsl.semantics.kernels import FlushPolicy
from streamsdsl.semantics.table_table import LEFT, RIGHT, TableJoinSpec, TableJoinState, table_join_step
from streamsdsl.semantics.tables import TableValue

__all__ = ["MATERIALIZED_ON_PYTHON", "TableJoinConfig", "TableJoinOperator", "joiner_may_return_none"]

#: `INPUT_INDEX` of a record of this (left) table and of the other (right) table.
LEFT_SIDE = 0
RIGHT_SIDE = 1


@attrs.frozen
class TableJoinConfig(KeyedOperatorConfig):
    """What the table–table join operator needs."""

    left_value: PlanSerde
    right_value: PlanSerde
    joiner: Any
    materialized: bool = False
    #: `TableJoinSpec.filtered_sides`.
    filtered_sides: frozenset[str] = frozenset()

    @property
    def _state(self) -> tuple[tuple[str, str], ...]:
        """The state row: each side's value and timestamp (a null timestamp: no value) and
        whether a materialized result store holds the key."""
        return (("left_value", self.left_value.spark_type), ("left_ts", "bigint"),
                ("right_value", self.right_value.spark_type), ("right_ts", "bigint"), ("has_result", "boolean"))

    @property
    def state_fields(self) -> str:
        return ", ".join(f"{name} {t}" for name, t in self._state)

    @property
    def state_type(self) -> str:
        return f"struct<{','.join(f'{name}:{t}' for name, t in self._state)}>"


class TableJoinOperator(KeyedOperator):
    """One state row per key: both tables' current values (`TableJoinState`)."""

    def __init__(self, config: TableJoinConfig) -> None:
        super().__init__(config)
        # A joined table's old values are not forwarded (see the module docstring); only the
        # new values, which old values do not change, leave the operator.
        self.spec = TableJoinSpec(config.kind, send_old_values=False, materialized=config.materialized,  # type: ignore[arg-type]
                                  cached=config.cached, filtered_sides=config.filtered_sides)

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.state = handle.getValueState(self.config.state_name, self.config.state_fields)

    def _decode(self, lv: Any, lts: Any, rv: Any, rts: Any, has_result: Any) -> TableJoinState:
        cfg = self.config
        left = None if lts is None else TableValue(cfg.left_value.from_internal(lv), int(lts))
        right = None if rts is None else TableValue(cfg.right_value.from_internal(rv), int(rts))
        return TableJoinState(left, right, bool(has_result))

    def _encode(self, state: TableJoinState) -> tuple[Any, ...]:
        cfg = self.config
        left, right = state.left, state.right
        return (None if left is None else cfg.left_value.to_internal(left.value), None if left is None else left.ts,
                None if right is None else cfg.right_value.to_internal(right.value),
                None if right is None else right.ts, state.has_result)

    def handleInputRows(self, key: Any, rows: Iterator[Row], timerValues: Any) -> Iterator[Row]:  # noqa: N802,N803
        cfg = self.config
        data = [r.asDict() for r in rows]
        if cfg.replay:
            data.sort(key=lambda r: (r[SOURCE_POSITION], r[OUTPUT_POSITION] or [], r[INPUT_INDEX]))
        else:
            data.sort(key=lambda r: (r["timestamp"], r[SOURCE_POSITION], r[OUTPUT_POSITION] or [], r[INPUT_INDEX]))
        kcell = key[0]
        k = cfg.key.from_internal(kcell)
        state = TableJoinState()
        if cfg.replay:
            while data and data[0].get(CARRIED_STATE) is not None:
                c = data.pop(0)[CARRIED_STATE]
                state = self._decode(c["left_value"], c["left_ts"], c["right_value"], c["right_ts"], c["has_result"])
        elif self.state.exists():
            state = self._decode(*self.state.get())
        for r in data:
            ts, position = r["timestamp"], r[SOURCE_POSITION]
            left = r[INPUT_INDEX] == LEFT_SIDE
            value = (cfg.left_value if left else cfg.right_value).from_internal(r["value"]["l" if left else "r"])
            try:
                step = table_join_step(self.spec, state, LEFT if left else RIGHT, k, value, ts, cfg.joiner,
                                       tombstone=r["value"]["t"])
            except Exception as exc:  # noqa: BLE001 - re-raised with the processor and the record
                raise UserFunctionError.of(cfg.node, "joiner", exc, k, position).in_worker() from exc
            if step.dropped:
                yield self._row(None, None, ts, [], position, [], None, DROPPED, 1.0)
                continue
            state = step.state
            if step.output is None:
                continue
            try:
                out_value = cfg.value_out.to_internal(step.output.change.new)
            except Exception as exc:  # noqa: BLE001 - a result its serde cannot hold
                raise result_error(cfg.node, "joiner", exc, repr(k), position) from exc
            yield self._row(kcell, out_value, step.output.timestamp, r["headers"], position, r[OUTPUT_POSITION],
                            None, None, None)
        empty = state.left is None and state.right is None and not state.has_result
        if cfg.replay:
            if not empty:
                carried = dict(zip(("left_value", "left_ts", "right_value", "right_ts", "has_result"),
                                   self._encode(state)))
                yield self.out(kcell, None, -1, [], -1, [], None, CARRY, None, carried)
        elif empty:
            self.state.clear()
        else:
            self.state.update(self._encode(state))

    def handleInitialState(self, key: Any, initialState: Row, timerValues: Any) -> None:  # noqa: N802,N803
        c = initialState["state"]
        self.state.update(self._encode(self._decode(c["left_value"], c["left_ts"], c["right_value"], c["right_ts"],
                                                    c["has_result"])))



def _side_input(frame: Frame, side: int, key: PlanSerde, left_type: str, right_type: str) -> DataFrame:
    """A table's records in the operator's input layout: the key in ``key``'s encoding, the value
    in field ``l`` (this table) or ``r`` (the other table) of a struct, whether the table source's
    value was a tombstone in its field ``t`` (`SOURCE_TOMBSTONE`; null: the value says it), the
    side in `INPUT_INDEX`."""
    df = frame.table_records if frame.table_records is not None else frame.df
    k = convert_column(F.col("key"), frame.key.serde, key) if frame.key.serde != key else F.col("key")
    tombstone = F.col(SOURCE_TOMBSTONE) if SOURCE_TOMBSTONE in df.columns else F.lit(None)
    value = F.struct(
        (F.col("value") if side == LEFT_SIDE else F.lit(None)).cast(left_type).alias("l"),
        (F.col("value") if side == RIGHT_SIDE else F.lit(None)).cast(right_type).alias("r"),
        tombstone.cast("boolean").alias("t"),
    )
    return df.select(k.alias("key"), value.alias("value"), "timestamp", "headers", SOURCE_POSITION, OUTPUT_POSITION,
                     F.lit(side).alias(INPUT_INDEX))


def _run(lowering: Lowering, inp: DataFrame, config: TableJoinConfig) -> DataFrame:
    """The join operator over ``inp`` (`streamsdsl.compiler.joins.run_keyed_operator`)."""
    return run_keyed_operator(lowering, inp, config, TableJoinOperator, LEFT_SIDE)


def _table_table_join(self: Lowering, node: ir.TableTableJoinNode) -> Frame:
    left, right = self.parent(node, 0), self.parent(node, 1)
    d: TableJoinDescription = description_of(node, [left, right], self.topology)
    key, value_out = d.key_serde, d.value
    config = TableJoinConfig(node.name, node.kind, key, value_out, d.left_value, d.right_value, d.joiner,
                             cached=self.flush is FlushPolicy.PER_RECORD, materialized=d.materialized,
                             filtered_sides=d.filtered_sides, state_name=node.store or "join")
    types = (left.value.spark_type, right.value.spark_type)
    inp = _side_input(left, LEFT_SIDE, key, *types).unionByName(_side_input(right, RIGHT_SIDE, key, *types))
    form = JvmJoin("table_table", node.kind, {"materialized": config.materialized, "cached": config.cached,
                                              "filtered_sides": sorted(config.filtered_sides)})
    if self.continues(node.name):
        jvm = None
        self.choices.record(node.name, Backend.PYTHON, CONTINUES_ON_PYTHON)
    elif config.materialized and joiner_may_return_none(d.joiner, node.kind):
        jvm = None
        self.choices.record(node.name, Backend.PYTHON, f"{form.label}, {node.kind}; {MATERIALIZED_ON_PYTHON}")
    else:
        jvm = self.choices.choose(node.name, form, inp.sparkSession, node.kind)
    if jvm is not None:
        how = joiner_label(d.joiner, node.name, key=key, left=d.left_value, right=d.right_value, value_out=value_out)
        self.choices.record(node.name, Backend.JVM, f"{jvm.label}, {node.kind}; {how}")
        pairs = run_jvm_join(self, null_json_values(inp, d.left_value, d.right_value, key=key), node.name, jvm,
                             key_type=key.spark_type, left_type=types[0], right_type=types[1],
                             state_type=config.state_type, state_name=config.state_name, carried_side=LEFT_SIDE)
        out = apply_joiner(pairs, node.name, d.joiner, key=key, left=d.left_value, right=d.right_value,
                           value_out=value_out)
    else:
        out = _run(self, inp, config)
    return Frame(out, d.key, value_out, is_table=True, table_records=out)


#: Why a materialized table–table join with a joiner that may return ``None`` runs on the Python operator.
MATERIALIZED_ON_PYTHON = ("materialized, and its joiner may return None: the joiner's result decides whether the "
                          "store holds a row, and the JVM operator runs the joiner after the join (Joiners.pair() "
                          "and merge() never return None)")


def joiner_may_return_none(joiner: Any, kind: str) -> bool:
    """Whether a table–table join's joiner might return ``None`` for a pair the join forwards (a
    side without a value is ``None`` in a left or outer join): a Python joiner might; a built-in
    joiner's result is known (`streamsdsl.dsl.joiners.BuiltinJoiner`).

    Examples
    --------
    >>> from streamsdsl.dsl.joiners import Joiners
    >>> [joiner_may_return_none(Joiners.left(), k) for k in ("inner", "left", "outer")]
    [False, False, True]
    >>> joiner_may_return_none(Joiners.merge(), "outer"), joiner_may_return_none(lambda v, o: v, "inner")
    (False, True)
    """
    from streamsdsl.dsl.joiners import BuiltinJoiner

    if not isinstance(joiner, BuiltinJoiner):
        return True
    return {"pair": False, "merge": False, "left": kind == "outer", "right": kind != "inner"}[joiner.op]
