"""Lowering of foreign-key table–table joins (``KTable.join`` / ``left_join`` with a foreign-key
extractor, KIP-213).

Kafka Streams runs the join on two sub-topologies joined by two internal topics; here the three
stages of `streamsdsl.semantics.fk_join` are three keyed stateful operators of one plan, each
keyed as Kafka keys its stage, so that every key's state lives in one place:

1. **send** (``<join>-subscription-registration``), keyed by this table's key: this table's
   value per key; each record becomes the subscriptions `fk_send_step` sends (the foreign key
   and the instruction in the row's value).
2. **subscriptions** (``<join>-subscription-receive``), keyed by the foreign key, over the
   subscriptions and the other table's records: the other table's value and the subscribers per
   foreign key; the responses (`fk_subscription_step`, `fk_foreign_step`) carry this table's key.
   A subscription for a ``None`` foreign key (a left join's) reaches the ``None`` group, which
   answers it without a right value and stores nothing, as Kafka's receive processor does.
3. **resolve** (the result processor), keyed by this table's key, over this table's records and
   the responses: this table's current value (a response made for another value is stale and
   dropped, `fk_resolve_step`) and the result store's row.

Order: each stage processes a key's rows by the record they came from (its timestamp and
source position in streaming, its pipe position in the test driver's replay), then by their
position among that record's outputs: a record's responses are resolved right after the record
itself, against the value it left, as the test driver does. A foreign key's subscribers answer
in the order of their serialized keys (Kafka's prefix scan), which the output positions keep.
"""

from __future__ import annotations

from typing import Any, Iterator

import attrs
from pyspark.sql import Column, DataFrame, Row
from pyspark.sql import functions as F
from pyspark.sql.streaming.stateful_processor import StatefulProcessorHandle

from streamsdsl import ir
from streamsdsl.compiler.columns import CARRIED_STATE, CARRY, DROPPED, FRAME_COLUMNS, INPUT_INDEX, OUTPUT_POSITION
from streamsdsl.compiler.columns import SOURCE_POSITION, SOURCE_TOMBSTONE
from streamsdsl.compiler.frame import Frame
from streamsdsl.compiler.joins import KeyedOperator, KeyedOperatorConfig, run_keyed_operator
from streamsdsl.compiler.jvm_operator import JOINS_ON_PYTHON, Backend
from streamsdsl.compiler.lowering import Lowering
from streamsdsl.compiler.python_ops import result_error
from streamsdsl.compiler.serde_exprs import convert_column
from streamsdsl.errors import UserFunctionError
from streamsdsl.operators.descriptions import FkJoinDescription, description_of
from streamsdsl.semantics.fk_join import (
    DROP_NULL_FOREIGN_KEY, FkJoinSpec, ForeignState, ResolveState, Response, Subscription, fk_foreign_step,
    fk_resolve_step, fk_send_step, fk_subscription_step, fk_table_step,
)
from streamsdsl.semantics.kernels import FlushPolicy
from streamsdsl.semantics.tables import TableValue
from streamsdsl.values.serdes import PlanSerde

__all__ = ["FkResolveOperator", "FkSendOperator", "FkSubscriptionOperator", "FkJoinConfig"]

#: `INPUT_INDEX` of this table's records (stages 1 and 3), of the subscriptions (stage 2).
RECORD = 0
#: `INPUT_INDEX` of the other table's records (stage 2) and of the responses (stage 3).
OTHER = 1
#: The column a row's originating record's timestamp is in (streaming orders by it).
ORIGIN_TS = "ots"


@attrs.frozen
class _Struct:
    """The in-plan layout of an operator's output value (a struct the operator fills itself)."""

    spark_type: str


@attrs.frozen
class FkJoinConfig(KeyedOperatorConfig):
    """What the three operators need; ``key`` is the stage's key serde (this table's key or the
    foreign key), ``value_out`` the layout of its output value."""

    spec: FkJoinSpec
    left_key: PlanSerde
    foreign_key: PlanSerde
    left_value: PlanSerde
    right_value: PlanSerde
    result: PlanSerde
    extractor: Any = None
    joiner: Any = None

    @property
    def _state(self) -> tuple[tuple[str, str], ...]:
        lt, rt = self.left_value.spark_type, self.right_value.spark_type
        if self.kind == "send":
            return (("value", lt), ("ts", "bigint"))
        if self.kind == "subscriptions":
            subs = f"array<struct<pk:{self.left_key.spark_type},lv:{lt},ts:bigint>>"
            return (("value", rt), ("ts", "bigint"), ("subs", subs))
        return (("value", lt), ("ts", "bigint"), ("result", self.result.spark_type), ("result_ts", "bigint"))

    @property
    def state_fields(self) -> str:
        return ", ".join(f"{name} {t}" for name, t in self._state)

    @property
    def state_type(self) -> str:
        return f"struct<{','.join(f'{name}:{t}' for name, t in self._state)}>"


def _table_value(serde: PlanSerde, value: Any, ts: Any) -> TableValue | None:
    return None if ts is None else TableValue(serde.from_internal(value), int(ts))


class _FkOperator(KeyedOperator):
    """What the three stages share: reading the state (carried in replay), ordering a key's rows."""

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.state = handle.getValueState(self.config.state_name, self.config.state_fields)

    def _rows(self, rows: Iterator[Row]) -> tuple[list[dict[str, Any]], Any]:
        cfg = self.config
        data = [r.asDict() for r in rows]
        if cfg.replay:
            data.sort(key=lambda r: (r[SOURCE_POSITION], r[OUTPUT_POSITION] or [], r[INPUT_INDEX]))
        else:
            data.sort(key=lambda r: (r["value"][ORIGIN_TS] if r["value"] is not None else -1, r[SOURCE_POSITION],
                                     r[OUTPUT_POSITION] or [], r[INPUT_INDEX]))
        saved = None
        if cfg.replay:
            while data and data[0].get(CARRIED_STATE) is not None:
                carried = data.pop(0)[CARRIED_STATE]
                saved = tuple(carried[name] for name, _ in cfg._state)
        elif self.state.exists():
            saved = tuple(self.state.get())
        return data, saved

    def _save(self, kcell: Any, cells: tuple[Any, ...] | None) -> Iterator[Row]:
        cfg = self.config
        if cfg.replay:
            if cells is not None:
                yield self.out(kcell, None, -1, [], -1, [], None, CARRY, None,
                               dict(zip((n for n, _ in cfg._state), cells)))
        elif cells is None:
            self.state.clear()
        else:
            self.state.update(cells)

    def _drop(self, ts: int, position: Any) -> Row:
        return self._row(None, None, ts, [], position, [], None, DROPPED, 1.0)

    def _fail(self, function: str, exc: Exception, key: Any, position: Any) -> Exception:
        return UserFunctionError.of(self.config.node, function, exc, key, position).in_worker()


class FkSendOperator(_FkOperator):
    """Stage 1, keyed by this table's key: its value; the subscriptions each record sends."""

    def handleInputRows(self, key: Any, rows: Iterator[Row], timerValues: Any) -> Iterator[Row]:  # noqa: N802,N803
        cfg = self.config
        kcell = key[0]
        k = cfg.key.from_internal(kcell)
        data, saved = self._rows(rows)
        state = None if saved is None else _table_value(cfg.left_value, *saved)
        for r in data:
            ts, position, outpos = r["timestamp"], r[SOURCE_POSITION], r[OUTPUT_POSITION] or []
            value = cfg.left_value.from_internal(r["value"]["l"])
            try:
                step = fk_send_step(cfg.spec, state, k, value, ts, cfg.extractor, tombstone=r["value"]["t"])
            except Exception as exc:  # noqa: BLE001 - re-raised with the processor and the record
                raise self._fail("foreign_key_extractor", exc, k, position) from exc
            if step.dropped is not None and step.dropped != DROP_NULL_FOREIGN_KEY:
                yield self._drop(ts, position)
                continue
            state = step.state
            if step.dropped is not None:
                yield self._drop(ts, position)
            for i, sub in enumerate(step.subscriptions):
                try:
                    fk = cfg.foreign_key.to_internal(sub.foreign_key)
                except Exception as exc:  # noqa: BLE001 - a foreign key its serde cannot hold
                    raise result_error(cfg.node, "foreign_key_extractor", exc, repr(k), position) from exc
                cell = {"fk": fk, "ins": sub.instruction, "lv": cfg.left_value.to_internal(sub.value), ORIGIN_TS: ts}
                yield self._row(kcell, cell, sub.timestamp, r["headers"], position, [*outpos, i], None, None, None)
        cells = None if state is None else (cfg.left_value.to_internal(state.value), state.ts)
        yield from self._save(kcell, cells)


class FkSubscriptionOperator(_FkOperator):
    """Stage 2, keyed by the foreign key: the other table's value and the subscribers; the
    responses to subscriptions and to the other table's updates."""

    def _decode(self, saved: tuple[Any, ...] | None) -> ForeignState:
        cfg = self.config
        if saved is None:
            return ForeignState()
        value, ts, subs = saved
        return ForeignState(_table_value(cfg.right_value, value, ts), tuple(
            (cfg.left_key.from_internal(s["pk"]), cfg.left_value.from_internal(s["lv"]), int(s["ts"]))
            for s in subs or ()))

    def _encode(self, state: ForeignState) -> tuple[Any, ...] | None:
        cfg = self.config
        if state.empty:
            return None
        right = state.right
        subs = [{"pk": cfg.left_key.to_internal(k), "lv": cfg.left_value.to_internal(v), "ts": ts}
                for k, v, ts in state.subscribers]
        return (None if right is None else cfg.right_value.to_internal(right.value),
                None if right is None else right.ts, subs)

    def handleInputRows(self, key: Any, rows: Iterator[Row], timerValues: Any) -> Iterator[Row]:  # noqa: N802,N803
        cfg = self.config
        kcell = key[0]
        fk = cfg.key.from_internal(kcell)
        data, saved = self._rows(rows)
        state = self._decode(saved)
        for r in data:
            ts, position, outpos, v = r["timestamp"], r[SOURCE_POSITION], r[OUTPUT_POSITION] or [], r["value"]
            if r[INPUT_INDEX] == RECORD:
                sub = Subscription(fk, v["ins"], cfg.left_key.from_internal(v["pk"]),
                                   cfg.left_value.from_internal(v["lv"]), ts)
                state, response = fk_subscription_step(state, sub)
                responses: tuple[Response, ...] = () if response is None else (response,)
            else:
                state, responses, dropped = fk_foreign_step(cfg.spec, state, fk, cfg.right_value.from_internal(v["r"]),
                                                            ts, tombstone=v["t"])
                if dropped is not None:
                    yield self._drop(ts, position)
                    continue
            for i, resp in enumerate(responses):
                cell = {"pk": cfg.left_key.to_internal(resp.key), "lv": cfg.left_value.to_internal(resp.value),
                        "fv": cfg.right_value.to_internal(resp.foreign), ORIGIN_TS: v[ORIGIN_TS]}
                yield self._row(kcell, cell, resp.timestamp, r["headers"], position, [*outpos, i], None, None, None)
        yield from self._save(kcell, self._encode(state))


class FkResolveOperator(_FkOperator):
    """Stage 3, keyed by this table's key: its current value and the result's row; the results."""

    def handleInputRows(self, key: Any, rows: Iterator[Row], timerValues: Any) -> Iterator[Row]:  # noqa: N802,N803
        cfg = self.config
        kcell = key[0]
        k = cfg.key.from_internal(kcell)
        data, saved = self._rows(rows)
        state = ResolveState()
        if saved is not None:
            value, ts, result, result_ts = saved
            state = ResolveState(_table_value(cfg.left_value, value, ts),
                                 None if result_ts is None else (cfg.result.from_internal(result), int(result_ts)))
        for r in data:
            ts, position, v = r["timestamp"], r[SOURCE_POSITION], r["value"]
            if r[INPUT_INDEX] == RECORD:
                source = fk_table_step(cfg.spec, "left", state.left, k, cfg.left_value.from_internal(v["l"]), ts,
                                       tombstone=v["t"])
                if not source.dropped:
                    state = attrs.evolve(state, left=source.state)
                continue
            response = Response(k, cfg.left_value.from_internal(v["lv"]), cfg.right_value.from_internal(v["fv"]), ts)
            try:
                state, output, dropped = fk_resolve_step(cfg.spec, state, response, cfg.joiner)
            except Exception as exc:  # noqa: BLE001 - re-raised with the processor and the record
                raise self._fail("joiner", exc, k, position) from exc
            if dropped is not None:
                yield self._drop(ts, position)
            if output is None:
                continue
            try:
                out_value = cfg.result.to_internal(output.change.new)
            except Exception as exc:  # noqa: BLE001 - a result its serde cannot hold
                raise result_error(cfg.node, "joiner", exc, repr(k), position) from exc
            yield self._row(kcell, out_value, output.timestamp, r["headers"], position, r[OUTPUT_POSITION], None, None,
                            None)
        cells = None
        if not state.empty:
            left, result = state.left, state.result
            cells = (None if left is None else cfg.left_value.to_internal(left.value), None if left is None else left.ts,
                     None if result is None else cfg.result.to_internal(result[0]),
                     None if result is None else result[1])
        yield from self._save(kcell, cells)


def _records(frame: Frame, key: PlanSerde, fields: dict[str, Column], side: int) -> DataFrame:
    """A table's records in an operator's input layout: the key in ``key``'s encoding, the value
    struct ``fields`` (``value``: the record's value; `SOURCE_TOMBSTONE` in ``t``)."""
    df = frame.table_records if frame.table_records is not None else frame.df
    k = convert_column(F.col("key"), frame.key.serde, key) if frame.key.serde != key else F.col("key")
    tombstone = F.col(SOURCE_TOMBSTONE) if SOURCE_TOMBSTONE in df.columns else F.lit(None)
    value = F.struct(*[c.alias(n) for n, c in fields.items()])
    return df.withColumn("t", tombstone.cast("boolean")).select(
        k.alias("key"), value.alias("value"), "timestamp", "headers", SOURCE_POSITION, OUTPUT_POSITION,
        F.lit(side).alias(INPUT_INDEX))


def _fk_join(self: Lowering, node: ir.ForeignKeyJoinNode) -> Frame:
    left, right = self.parent(node, 0), self.parent(node, 1)
    d: FkJoinDescription = description_of(node, [left, right], self.topology)
    lk, fk = d.key_serde, d.foreign_key_serde
    lt, rt, fkt, lkt = d.left_value.spark_type, d.right_value.spark_type, fk.spark_type, lk.spark_type
    spec = d.spec(self.flush)
    self.choices.record(node.name, Backend.PYTHON, JOINS_ON_PYTHON)

    def config(name: str, kind: str, key: PlanSerde, out: Any, state: str) -> FkJoinConfig:
        return FkJoinConfig(name, kind, key, out, spec=spec, left_key=lk, foreign_key=fk, left_value=d.left_value,
                            right_value=d.right_value, result=d.value, extractor=d.extractor, joiner=d.joiner,
                            cached=self.flush is FlushPolicy.PER_RECORD, state_name=state)

    def null(t: str) -> Column:
        return F.lit(None).cast(t)

    value = F.col("value")
    # 1. send: this table's records, keyed by its key
    send_in = _records(left, lk, {"l": value.cast(lt), "t": F.col("t"), ORIGIN_TS: F.col("timestamp")}, RECORD)
    subs = run_keyed_operator(self, send_in, config(node.registration, "send", lk,
                                                    _Struct(f"struct<fk:{fkt},ins:string,lv:{lt},{ORIGIN_TS}:bigint>"),
                                                    "left"),
                              FkSendOperator, RECORD, stateful_below=True)
    sub = F.col("value")
    # 2. subscriptions and the other table, keyed by the foreign key (a None foreign key, a left
    # join's, is answered without a right value and not stored: `fk_subscription_step`)
    routed = subs.select(
        sub["fk"].alias("key"),
        F.struct(sub["ins"].alias("ins"), F.col("key").alias("pk"), sub["lv"].alias("lv"), null(rt).alias("r"),
                 null("boolean").alias("t"), sub[ORIGIN_TS].alias(ORIGIN_TS)).alias("value"),
        "timestamp", "headers", SOURCE_POSITION, OUTPUT_POSITION, F.lit(RECORD).alias(INPUT_INDEX))
    others = _records(right, fk, {"ins": null("string"), "pk": null(lkt), "lv": null(lt), "r": value.cast(rt),
                                  "t": F.col("t"), ORIGIN_TS: F.col("timestamp")}, OTHER)
    responses = run_keyed_operator(
        self, routed.unionByName(others),
        config(node.receive, "subscriptions", fk, _Struct(f"struct<pk:{lkt},lv:{lt},fv:{rt},{ORIGIN_TS}:bigint>"),
               node.subscription_store),
        FkSubscriptionOperator, RECORD, stateful_below=True)
    resp = F.col("value")

    def as_response(df: DataFrame, key: Column, fv: Column) -> DataFrame:
        return df.select(key.alias("key"), F.struct(null(lt).alias("l"), null("boolean").alias("t"),
                                                    resp["lv"].alias("lv"), fv.alias("fv"),
                                                    resp[ORIGIN_TS].alias(ORIGIN_TS)).alias("value"),
                         "timestamp", "headers", SOURCE_POSITION, OUTPUT_POSITION, F.lit(OTHER).alias(INPUT_INDEX))

    answered = as_response(responses, resp["pk"], resp["fv"])
    # 3. resolve: this table's records and the responses, keyed by its key
    resolve_in = _records(left, lk, {"l": value.cast(lt), "t": F.col("t"), "lv": null(lt), "fv": null(rt),
                                     ORIGIN_TS: F.col("timestamp")}, RECORD)
    out = run_keyed_operator(self, resolve_in.unionByName(answered), config(node.name, "resolve", lk, d.value, node.store),
                             FkResolveOperator, RECORD)
    return Frame(out.select(*FRAME_COLUMNS), d.key, d.value, is_table=True, table_records=out)

