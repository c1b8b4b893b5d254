"""Lowering of windowed stream–stream joins (``KStream.join/left_join/outer_join`` with a KStream).

Like the stream–table join (`streamsdsl.compiler.joins`), the join is **one** stateful
``transformWithState`` operator over the union of both inputs, keyed by the join key, each row
tagged with its side in `INPUT_INDEX` (0: this/left, 1: other/right) and its value in field ``l``
or ``r`` of a struct. Per key it holds one `StreamJoinState` (both sides' buffered records and the
held, not yet joined records of a left/outer join) and hosts the direct engine's kernel,
`streamsdsl.semantics.stream_stream.StreamJoinKernel`, one key at a time: ``kernel.process``
for every record with the clock the mode knows (`JoinClock`), ``kernel.expire`` for the held
records a stream time has expired.

Stream time and held records
----------------------------
Kafka Streams' stream time is shared by both inputs and all keys.

* **Test driver** (`PlanMode.REPLAY`): the plan computes, per record in pipe order, Kafka's
  stream time, the stream time of the last *in-order* record (when Kafka scans its held
  records), and each side's maximum buffered timestamp (the buffers' cut-off). Before each record
  of a key the processor emits the key's held records whose window closed by then
  (``kernel.expire`` at the scan time), then joins the record (``kernel.process``). A held record leaves the
  processor with its threshold; the plan gives it to the first in-order record of the run
  (any key) whose stream time passes the threshold, where Kafka emits it, ordered as Kafka does
  (timestamp, right before left, serialized key). State, and the four times, are carried to the
  next run, so each run processes only the newly piped records.
* **Streaming**: stream time is the event-time watermark (Spark's global watermark over both
  inputs) advanced by the key's own records of the micro-batch (an in-order record first expires
  the key's held records, as Kafka's scan does);
  an event-time timer at `stream_join_timer_threshold` ``+ 1`` emits held records and prunes the
  buffers when no record of the key comes.

The JVM operator
----------------
When ``streamsdsl.operator`` allows it, the same plan runs the kernel's Java port instead
(``jvm/src/main/java/io/streamsdsl/jvm/StreamStreamJoinProcessor.java`` over ``StreamJoin``;
`streamsdsl.compiler.jvm_joins`): same state layout, times, held records and row positions, but
the operator emits the **matched pairs** (a null-join's missing side null) and the joiner runs
afterwards over them, a batch at a time (a built-in joiner as Spark columns, no Python).

Records with a null key never reach the operator: a left/outer side's record with a value is
joined with ``None`` at once, every other one is dropped and counted (as are null values, by
the operator).
"""

from __future__ import annotations

from typing import Any, Iterable, Iterator

import attrs
from pyspark.sql import Column, DataFrame, Row, Window
from pyspark.sql import functions as F
from pyspark.sql.streaming.stateful_processor import StatefulProcessor, StatefulProcessorHandle
from pyspark.sql.types import _parse_datatype_string

from streamsdsl import ir
from streamsdsl.compiler.carry import with_carried_states
from streamsdsl.compiler.event_time import stateful_downstream, transform_with_state
from streamsdsl.compiler.columns import CARRIED_STATE, CARRY, CLOSE_THRESHOLD, DROPPED, EVENT_METRIC, EVENT_VALUE
from streamsdsl.compiler.columns import FINAL_KEY_ORDER, FRAME_COLUMNS, HEADERS_TYPE, INPUT_INDEX, OUTPUT_POSITION
from streamsdsl.compiler.columns import POSITION_TYPE, SOURCE_POSITION, STREAM_TIME
from streamsdsl.compiler.jvm_joins import JvmJoin, apply_joiner, apply_jvm_join, joiner_label, null_json_values
from streamsdsl.compiler.jvm_joins import pair_schema
from streamsdsl.compiler.jvm_operator import Backend
from streamsdsl.compiler.frame import Frame
from streamsdsl.compiler.lowering import Lowering, PlanMode
from streamsdsl.compiler.python_ops import result_error
from streamsdsl.compiler.serde_exprs import convert_column
from streamsdsl.values.serdes import DEFAULT_SERDE, BytesSerde, DoubleSerde, IntegerSerde, JsonSerde, LongSerde
from streamsdsl.values.serdes import PlanSerde, StringSerde
from streamsdsl.errors import UserFunctionError
from streamsdsl.operators.descriptions import StreamJoinDescription, description_of
from streamsdsl.semantics.stream_stream import (
    LEFT,
    RIGHT,
    JoinClock,
    StreamJoinKernel,
    StreamJoinSpec,
    StreamJoinState,
    stream_join_timer_threshold,
)
from streamsdsl.semantics.tables import key_bytes

__all__ = ["StreamJoinConfig"]

#: Test driver: the stream time of the last in-order record (Kafka's held-record scans).
SCAN_TIME = "_scan_time"
#: Test driver: the max timestamp buffered so far by the left / right side (over all keys).
LEFT_TIME = "_left_store_time"
RIGHT_TIME = "_right_store_time"
#: Test driver: the scan and store times at the end of the run.
RUN_TIMES = "_run_times"
#: The four times carried to the next run, in the order of the join's stream-time observation
#: (`modes.STREAM_TIME_OBSERVATION`, fields ``t0`` .. ``t3``).
_TIMES = (STREAM_TIME, SCAN_TIME, LEFT_TIME, RIGHT_TIME)
#: The replay's pipe order of the operator's input rows.
_PIPE_ORDER = (SOURCE_POSITION, OUTPUT_POSITION, INPUT_INDEX)

OUTPUT_FIELDS = ("key", "value", "timestamp", "headers", SOURCE_POSITION, OUTPUT_POSITION, FINAL_KEY_ORDER,
                 EVENT_METRIC, EVENT_VALUE)
REPLAY_FIELDS = (*OUTPUT_FIELDS, CLOSE_THRESHOLD, CARRIED_STATE)
_SIDES = (LEFT, RIGHT)


@attrs.frozen
class StreamJoinConfig:
    """What the join operator needs on the executors (pickled with it)."""

    node: str
    spec: StreamJoinSpec
    key: PlanSerde
    left_value: PlanSerde
    right_value: PlanSerde
    joiner: Any
    value_out: PlanSerde = DEFAULT_SERDE

    @property
    def state_fields(self) -> str:
        lt, rt = self.left_value.spark_type, self.right_value.spark_type
        return (f"left array<struct<ts:bigint,v:{lt}>>, right array<struct<ts:bigint,v:{rt}>>, "
                f"held array<struct<ts:bigint,side:string,l:{lt},r:{rt}>>")

    @property
    def state_type(self) -> str:
        return "struct<" + ",".join(f.replace(" ", ":", 1) for f in self.state_fields.split(", ")) + ">"

    def decode(self, cells: Any) -> StreamJoinState:
        """A stored or carried state (Rows or dicts) as a `StreamJoinState`."""
        def at(cell: Any, i: int, name: str) -> Any:
            return cell[name] if isinstance(cell, dict) else cell[i]

        left_of, right_of = self.left_value.from_internal, self.right_value.from_internal
        left = tuple((int(at(c, 0, "ts")), left_of(at(c, 1, "v"))) for c in at(cells, 0, "left") or ())
        right = tuple((int(at(c, 0, "ts")), right_of(at(c, 1, "v"))) for c in at(cells, 1, "right") or ())
        held = []
        for c in at(cells, 2, "held") or ():
            side = at(c, 1, "side")
            value = left_of(at(c, 2, "l")) if side == LEFT else right_of(at(c, 3, "r"))
            held.append((int(at(c, 0, "ts")), side, value))
        return StreamJoinState(left, right, tuple(held))

    def encode(self, state: StreamJoinState) -> tuple[Any, Any, Any]:
        left_in, right_in = self.left_value.to_internal, self.right_value.to_internal
        return (
            [(ts, left_in(v)) for ts, v in state.left],
            [(ts, right_in(v)) for ts, v in state.right],
            [(ts, side, left_in(v) if side == LEFT else None, right_in(v) if side == RIGHT else None)
             for ts, side, v in state.held],
        )


def _held_order(spec: StreamJoinSpec, state: StreamJoinState, stream_time: int) -> list[tuple[int, str]]:
    """(ts, side) of the held records `stream_join_close` emits at ``stream_time``, in its order."""
    expired = [(ts, 0 if side == RIGHT else 1, i, side) for i, (ts, side, _) in enumerate(state.held)
               if spec.hold_threshold(ts, side) < stream_time]
    return [(ts, side) for ts, _, _, side in sorted(expired)]


class _JoinProcessor(StatefulProcessor):
    """A Spark host of `StreamJoinKernel` (the direct engine's), one key per call: what both
    plan modes share: decoding rows, handing the key's state and the clock to the kernel, output
    rows. The kernel holds just the call's key; expired held records come out through
    ``kernel.expire`` at the times the mode knows (the plan's scan times, or the watermark)."""

    fields: tuple[str, ...] = OUTPUT_FIELDS

    def __init__(self, config: StreamJoinConfig) -> None:
        self.config = config
        self.out = Row(*self.fields)

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.handle = handle
        self.state = handle.getValueState("join", self.config.state_fields)
        self.kernel = StreamJoinKernel(self.config.spec, self.config.joiner)

    def _hand_to_kernel(self, key: Any, state: StreamJoinState) -> StreamJoinKernel:
        """The kernel, holding ``state`` as the one key it knows."""
        self.kernel.states.clear()
        self.kernel.states[key] = state
        return self.kernel

    def _state_of(self, key: Any) -> StreamJoinState:
        return self.kernel.states.get(key) or StreamJoinState()

    def _row(self, key: Any, value: Any, ts: int, headers: Any, position: int, opos: list[int],
             final_key: str | None = None, metric: str | None = None, metric_value: float | None = None,
             threshold: int | None = None, carried: Any = None) -> Row:
        values = (key, value, ts, headers, position, opos, final_key, metric, metric_value)
        return self.out(*values, threshold, carried) if len(self.fields) > len(OUTPUT_FIELDS) else self.out(*values)

    def _value_in(self, r: Row) -> tuple[str, Any]:
        side = _SIDES[r[INPUT_INDEX]]
        cell = r["value"]
        if side == LEFT:
            return side, self.config.left_value.from_internal(cell["l"] if cell is not None else None)
        return side, self.config.right_value.from_internal(cell["r"] if cell is not None else None)

    def _out_value(self, value: Any, k: Any, position: int) -> Any:
        try:
            return self.config.value_out.to_internal(value)
        except Exception as exc:  # noqa: BLE001 - a result its serde cannot hold
            raise result_error(self.config.node, "joiner", exc, repr(k), position) from exc

    def _step_rows(self, step: Any, kcell: Any, k: Any, r: Any, position: int, opos: list[int],
                   ts: int) -> Iterator[Row]:
        """A record step's rows: its drop event, or its joined records (in the step's order)."""
        if step.dropped:
            yield self._row(None, None, ts, [], position, [], metric=DROPPED, metric_value=1.0)
            return
        for i, o in enumerate(step.outputs):
            yield self._row(kcell, self._out_value(o.value, k, position), o.timestamp, r["headers"], position,
                            [*opos, 1, i])

    def _null_key(self, rows: Iterable[Row]) -> Iterator[Row]:
        """The records with a ``None`` key (Spark groups them under one key): no state, each
        joined with ``None`` at once when its side is an outer one and it has a value
        (KIP-962), else a drop event (`stream_join_step`)."""
        kernel = self.kernel
        kernel.states.clear()
        for r in sorted(rows, key=lambda r: (r[SOURCE_POSITION], r[OUTPUT_POSITION] or [], r[INPUT_INDEX])):
            position, opos, ts = r[SOURCE_POSITION], list(r[OUTPUT_POSITION] or []), r["timestamp"]
            side, value = self._value_in(r)
            step = self._call(kernel.process, None, position, side, None, value, ts, clock=JoinClock(ts))
            yield from self._step_rows(step, None, None, r, position, opos, ts)

    def _call(self, fn: Any, k: Any, position: int, *args: Any, **kwargs: Any) -> Any:
        """A core step; an exception from the joiner names the processor, function and record."""
        try:
            return fn(*args, **kwargs)
        except UserFunctionError:
            raise
        except Exception as exc:  # noqa: BLE001 - re-raised with the processor and the record
            raise UserFunctionError.of(self.config.node, "joiner", exc, k, position).in_worker() from exc

    def close(self) -> None:
        pass


class ReplayStreamJoinProcessor(_JoinProcessor):
    """The test driver's run: per-record times from the plan, held records handed to the plan
    with their threshold, the state carried in and out as rows (`CARRIED_STATE` / `CARRY`)."""

    fields = REPLAY_FIELDS

    def handleInputRows(self, key: Any, rows: Iterator[Row], timerValues: Any) -> Iterator[Row]:  # noqa: N802,N803
        if key[0] is None:
            yield from self._null_key(rows)
            return
        cfg, spec = self.config, self.config.spec
        data = sorted(rows, key=lambda r: (r[SOURCE_POSITION], r[OUTPUT_POSITION] or [], r[INPUT_INDEX]))
        kcell = key[0]
        k = cfg.key.from_internal(kcell)
        korder = key_bytes(k).hex()
        state = StreamJoinState()
        run = data[0][RUN_TIMES] if data else None  # on carried-state rows too
        while data and data[0][CARRIED_STATE] is not None:
            state = cfg.decode(data.pop(0)[CARRIED_STATE])
        kernel = self._hand_to_kernel(k, state)
        held_seq = 0
        for r in data:
            position, opos, ts = r[SOURCE_POSITION], list(r[OUTPUT_POSITION] or []), r["timestamp"]
            side, value = self._value_in(r)
            if value is not None and spec.holds:
                yield from self._expire(kcell, k, korder, r, position, held_seq)
                held_seq = self._held_seq
            other_time = r[RIGHT_TIME] if side == LEFT else r[LEFT_TIME]
            step = self._call(kernel.process, k, position, side, k, value, ts,
                              clock=JoinClock(r[STREAM_TIME], other_time))
            yield from self._step_rows(step, kcell, k, r, position, opos, ts)
        if run is not None and spec.holds:
            yield from self._expire(kcell, k, korder, run, -1, held_seq)
        elif run is not None:
            self._call(kernel.expire, k, -1, k, run[SCAN_TIME], left_store_time=run[LEFT_TIME],
                       right_store_time=run[RIGHT_TIME])
        state = self._state_of(k)
        if not state.is_empty():
            yield self._row(kcell, None, -1, [], -1, [], metric=CARRY, carried=cfg.encode(state))

    _held_seq = 0

    def _expire(self, kcell: Any, k: Any, korder: str, times: Any, position: int, held_seq: int) -> Iterator[Row]:
        """The key's held records that the scan time of ``times`` (a row, or the run's end) has
        expired, pending for the plan to place (Kafka's scan over all keys); `_held_seq` after."""
        spec = self.config.spec
        order = _held_order(spec, self._state_of(k), times[SCAN_TIME])
        outputs = self._call(self.kernel.expire, k, position, k, times[SCAN_TIME], left_store_time=times[LEFT_TIME],
                             right_store_time=times[RIGHT_TIME])
        for (hts, hside), o in zip(order, outputs):
            yield self._pending(kcell, k, korder, hts, hside, o.value, held_seq, position)
            held_seq += 1
        self._held_seq = held_seq

    def _pending(self, kcell: Any, k: Any, korder: str, ts: int, side: str, value: Any, seq: int,
                 position: int) -> Row:
        """A held record emitted as a null-join: the plan places it after the first in-order
        record whose stream time passes its threshold, ordered (ts, right before left, key)."""
        threshold = self.config.spec.hold_threshold(ts, side)
        return self._row(kcell, self._out_value(value, k, position), ts, [], -1, [0, ts, 0 if side == RIGHT else 1],
                         final_key=f"{korder} {seq:010d}", threshold=threshold)


class StreamingStreamJoinProcessor(_JoinProcessor):
    """Streaming: stream time from the watermark and the key's records; one event-time timer
    per key at its next threshold."""

    def _load(self) -> StreamJoinState:
        stored = self.state.get()
        return StreamJoinState() if stored is None else self.config.decode(stored)

    def _save(self, state: StreamJoinState) -> None:
        for t in list(self.handle.listTimers()):
            self.handle.deleteTimer(t)
        if state.is_empty():
            self.state.clear()
            return
        self.state.update(self.config.encode(state))
        threshold = stream_join_timer_threshold(self.config.spec, state)
        if threshold is not None:
            self.handle.registerTimer(threshold + 1)

    def _closed(self, kcell: Any, k: Any, watermark: int) -> Iterator[Row]:
        """The key's held records the watermark has expired, before the batch's records."""
        for i, o in enumerate(self._call(self.kernel.expire, k, -1, k, watermark)):
            yield self._row(kcell, self._out_value(o.value, k, -1), o.timestamp, [], -1, [0, i])

    def handleInputRows(self, key: Any, rows: Iterator[Row], timerValues: Any) -> Iterator[Row]:  # noqa: N802,N803
        if key[0] is None:
            yield from self._null_key(rows)
            return
        cfg, spec = self.config, self.config.spec
        data = sorted(rows, key=lambda r: (r["timestamp"], r[INPUT_INDEX], r[SOURCE_POSITION], r[OUTPUT_POSITION] or []))
        kcell = key[0]
        k = cfg.key.from_internal(kcell)
        stream_time = timerValues.getCurrentWatermarkInMs()
        kernel = self._hand_to_kernel(k, self._load())
        yield from self._closed(kcell, k, stream_time)
        for r in data:
            position, opos, ts = r[SOURCE_POSITION], list(r[OUTPUT_POSITION] or []), r["timestamp"]
            side, value = self._value_in(r)
            stream_time = max(stream_time, ts)
            if value is not None and spec.holds and ts == stream_time:
                # an in-order record: the key's expired held records come out before its results
                expired = self._call(kernel.expire, k, position, k, stream_time)
                for i, o in enumerate(expired):
                    yield self._row(kcell, self._out_value(o.value, k, position), o.timestamp, r["headers"], position,
                                    [*opos, 0, i])
            step = self._call(kernel.process, k, position, side, k, value, ts, clock=JoinClock(stream_time))
            yield from self._step_rows(step, kcell, k, r, position, opos, ts)
        self._save(self._state_of(k))

    def handleExpiredTimer(self, key: Any, timerValues: Any, expiredTimerInfo: Any) -> Iterator[Row]:  # noqa: N802,N803
        kcell = key[0]
        k = self.config.key.from_internal(kcell)
        self._hand_to_kernel(k, self._load())
        yield from self._closed(kcell, k, timerValues.getCurrentWatermarkInMs())
        self._save(self._state_of(k))


# --- the plan ---------------------------------------------------------------------------------------


def _side_input(frame: Frame, side: int, key: PlanSerde, value: PlanSerde, lt: str, rt: str) -> DataFrame:
    """A side's rows in the operator's layout: the key in ``key``'s encoding, the value (in
    ``value``'s) in field ``l`` or ``r`` of a struct, the side in `INPUT_INDEX`."""
    k = convert_column(F.col("key"), frame.key.serde, key) if frame.key.serde != key else F.col("key")
    v = convert_column(F.col("value"), frame.value, value) if frame.value != value else F.col("value")
    struct = F.struct((v if side == 0 else F.lit(None)).cast(lt).alias("l"),
                      (v if side == 1 else F.lit(None)).cast(rt).alias("r"))
    return frame.df.select(k.cast(key.spark_type).alias("key"), struct.alias("value"), "timestamp", "headers",
                           SOURCE_POSITION, OUTPUT_POSITION, F.lit(side).alias(INPUT_INDEX))


def _has_value() -> Any:
    """Whether a row of the operator's input has a value: its side's field (``l`` or ``r``) is
    not null. Each field is tested on its own: the sides' value types may differ (a String
    stream joined with a Long stream), and a ``CASE`` choosing between the two fields would make
    Spark coerce both to one type, casting e.g. the string 'A0' to BIGINT (CAST_INVALID_INPUT)."""
    return F.when(F.col(INPUT_INDEX) == 0, F.col("value.l").isNotNull()).otherwise(F.col("value.r").isNotNull())


def _replay_times(lowering: Lowering, inp: DataFrame, config: StreamJoinConfig) -> DataFrame:
    """Kafka's times after each record (pipe order, continuing from the previous run), observed
    for the next run, and the run's end times in `RUN_TIMES` (on carried-state rows too)."""
    from streamsdsl.compiler.columns import STREAM_TIME_OBSERVATION

    before = list(lowering.carry.stream_times.get(config.node, ())) or [-1] * len(_TIMES)  # type: ignore[attr-defined]
    carried = F.col(CARRIED_STATE).isNotNull()
    valid = F.col("key").isNotNull() & _has_value()
    ts = F.col("timestamp")
    if getattr(lowering, "scanned", False):
        return _replay_times_in_blocks(lowering, inp, config, before, carried, valid)
    w = Window.orderBy(*_PIPE_ORDER).rowsBetween(Window.unboundedPreceding, Window.currentRow)
    df = inp.withColumn(STREAM_TIME, F.greatest(F.coalesce(F.max(ts).over(w), F.lit(-1)), F.lit(before[0])).cast("bigint"))
    in_order = F.coalesce(~carried & valid & (ts == F.col(STREAM_TIME)), F.lit(False))
    df = df.withColumn("_in_order", in_order)
    df = df.withColumn(SCAN_TIME, F.greatest(F.coalesce(F.max(F.when(in_order, ts)).over(w), F.lit(-1)),
                                             F.lit(before[1])).cast("bigint"))
    for i, (name, side) in enumerate(((LEFT_TIME, 0), (RIGHT_TIME, 1)), start=2):
        mine = F.max(F.when(~carried & valid & (F.col(INPUT_INDEX) == side), ts)).over(w)
        df = df.withColumn(name, F.greatest(F.coalesce(mine, F.lit(-1)), F.lit(before[i])).cast("bigint"))
    df = df.observe(f"{STREAM_TIME_OBSERVATION}{config.node}", *[F.max(c).alias(f"t{i}") for i, c in enumerate(_TIMES)])
    everything = Window.partitionBy()
    run = F.struct(*[F.greatest(F.coalesce(F.max(c).over(everything), F.lit(-1)), F.lit(before[i])).cast("bigint")
                     .alias(c) for i, c in enumerate(_TIMES)])
    return df.withColumn(RUN_TIMES, run)


def _replay_times_in_blocks(lowering: Lowering, inp: DataFrame, config: StreamJoinConfig, before: list[int],
                            carried: Column, valid: Column) -> DataFrame:
    """`_replay_times` of a large run: the same times, computed per block of positions
    (`scan.running_maxima`), and ``_held_from``: the stream time of the in-order record before
    each (where `_place_held` finds the record that passes a held record's threshold)."""
    from streamsdsl.compiler.columns import STREAM_TIME_OBSERVATION
    from streamsdsl.compiler.scan import position_block, running_maxima

    ts = F.col("timestamp")
    cache = lowering.cached  # type: ignore[attr-defined]
    sides = {f"_side{side}": (F.when(~carried & valid & (F.col(INPUT_INDEX) == side), ts), True) for side in (0, 1)}
    df, blocks = running_maxima(inp, _PIPE_ORDER, position_block(), {"_any": (ts, True), **sides}, cache)
    df = df.withColumn(STREAM_TIME, F.greatest(F.coalesce(F.col("_any"), F.lit(-1)), F.lit(before[0])).cast("bigint"))
    for i, name in enumerate((LEFT_TIME, RIGHT_TIME)):
        df = df.withColumn(name, F.greatest(F.coalesce(F.col(f"_side{i}"), F.lit(-1)), F.lit(before[i + 2])).cast("bigint"))
    in_order = F.coalesce(~carried & valid & (ts == F.col(STREAM_TIME)), F.lit(False))
    df = df.drop("_any", *sides).withColumn("_in_order", in_order)
    held = F.when(F.col("_in_order"), ts)
    df, scans = running_maxima(df, _PIPE_ORDER, position_block(), {"_scan": (held, True), "_scan_before": (held, False)},
                               cache)
    df = df.withColumn(SCAN_TIME, F.greatest(F.coalesce(F.col("_scan"), F.lit(-1)), F.lit(before[1])).cast("bigint"))
    df = df.withColumn("_held_from", F.greatest(F.coalesce(F.col("_scan_before"), F.lit(-1)), F.lit(before[0])))
    df = df.drop("_scan", "_scan_before")
    df = df.observe(f"{STREAM_TIME_OBSERVATION}{config.node}", *[F.max(c).alias(f"t{i}") for i, c in enumerate(_TIMES)])
    # the run's end times: the largest of each over the run, from the blocks' maxima
    totals = blocks.agg(*[F.max(c).alias(c) for c in ("_any", *sides)]).crossJoin(scans.agg(F.max("_scan").alias("_scan")))
    ends = dict(zip(_TIMES, ("_any", "_scan", "_side0", "_side1")))
    run = F.struct(*[F.greatest(F.coalesce(F.col(ends[c]), F.lit(-1)), F.lit(before[i])).cast("bigint").alias(c)
                     for i, c in enumerate(_TIMES)])
    return df.crossJoin(F.broadcast(totals.select(run.alias(RUN_TIMES))))


def _run(lowering: Lowering, node: ir.StreamStreamJoinNode, inp: DataFrame, config: StreamJoinConfig,
         jvm: JvmJoin | None = None) -> DataFrame:
    """The join over the union ``inp``: the operator (``None`` keys included), its events counted.
    ``inp`` is read once: a second read would plan the operators above it twice. With ``jvm`` the
    JVM operator runs it and the rows' ``value`` is the matched pair (`_jvm_operator`)."""
    replay = lowering.mode is PlanMode.REPLAY
    if replay:
        inp = with_carried_states(lowering, inp, config.node, config.key.spark_type, config.state_type,
                                  **{INPUT_INDEX: F.lit(0)})
        inp = lowering.cached(_replay_times(lowering, inp, config))  # type: ignore[attr-defined]
    out = _python_operator(lowering, inp, config) if jvm is None else _jvm_operator(lowering, inp, config, jvm)
    if replay:
        out = _place_held(lowering, out, inp, config)
    metric = F.col(EVENT_METRIC)
    out = lowering.observe(out, node.name, "input", dropped=F.when(metric == DROPPED, F.col(EVENT_VALUE)))
    return out.filter(metric.isNull()).select(*FRAME_COLUMNS)


def _python_operator(lowering: Lowering, inp: DataFrame, config: StreamJoinConfig) -> DataFrame:
    replay = lowering.mode is PlanMode.REPLAY
    types = {"key": config.key.spark_type, "value": config.value_out.spark_type, "timestamp": "bigint",
             "headers": HEADERS_TYPE, SOURCE_POSITION: "bigint", OUTPUT_POSITION: POSITION_TYPE,
             FINAL_KEY_ORDER: "string", EVENT_METRIC: "string", EVENT_VALUE: "double", CLOSE_THRESHOLD: "bigint",
             CARRIED_STATE: config.state_type}
    processor: _JoinProcessor = ReplayStreamJoinProcessor(config) if replay else StreamingStreamJoinProcessor(config)
    schema = _parse_datatype_string(", ".join(f"{f} {types[f]}" for f in processor.fields))
    keyed = inp.groupBy("key")  # None keys too: the operator forwards or drops them (`_null_key`)
    return transform_with_state(not replay, lowering.topology, config.node, keyed, processor, schema,
                                "None" if replay else "EventTime")


def _jvm_operator(lowering: Lowering, inp: DataFrame, config: StreamJoinConfig, jvm: JvmJoin) -> DataFrame:
    """The JVM operator's rows: the Python operator's, with ``value`` the matched pair (and, in
    the replay, the plan's time columns named to it by their index)."""
    replay = lowering.mode is PlanMode.REPLAY
    lt, rt = config.left_value.spark_type, config.right_value.spark_type
    if replay:
        schema = pair_schema(config.key.spark_type, lt, rt)
        schema = _parse_datatype_string(", ".join(f"{f.name} {f.dataType.simpleString()}" for f in schema.fields)
                                        + f", {CLOSE_THRESHOLD} bigint, {CARRIED_STATE} {config.state_type}")
        names = {"stream_time": STREAM_TIME, "scan_time": SCAN_TIME, "left_time": LEFT_TIME, "right_time": RIGHT_TIME,
                 "run_times": RUN_TIMES}
        jvm = attrs.evolve(jvm, params={**jvm.params, "columns": {k: inp.columns.index(c) for k, c in names.items()}})
    else:
        schema = pair_schema(config.key.spark_type, lt, rt, event_time_out=stateful_downstream(lowering.topology, config.node))
    return apply_jvm_join(inp, config.node, jvm, schema, replay=replay, state_name="join", state_type=config.state_type)


def _place_held(lowering: Lowering, out: DataFrame, inp: DataFrame, config: StreamJoinConfig) -> DataFrame:
    """Keep the carried states for the next run; give each held record emitted in this run the
    first in-order input record whose stream time passes its threshold (Kafka emits it while
    processing that record, before joining it)."""
    out = lowering.cached(out)  # type: ignore[attr-defined]
    lowering.carried_states[config.node] = out.filter(F.col(EVENT_METRIC) == CARRY).select(  # type: ignore[attr-defined]
        "key", F.col(CARRIED_STATE).alias("state"))
    out = out.filter(F.col(EVENT_METRIC).isNull() | (F.col(EVENT_METRIC) != CARRY)).drop(CARRIED_STATE)
    pending = out.filter(F.col(CLOSE_THRESHOLD).isNotNull()).withColumn("_pending", F.monotonically_increasing_id())
    rest = out.filter(F.col(CLOSE_THRESHOLD).isNull()).drop(CLOSE_THRESHOLD)
    if "_held_from" in inp.columns:  # a large run (`_replay_times_in_blocks`)
        from streamsdsl.compiler.scan import first_passing

        at = F.struct(F.col(SOURCE_POSITION).alias("_at_position"), F.col(OUTPUT_POSITION).alias("_at_output"))
        initial = (list(lowering.carry.stream_times.get(config.node, ())) or [-1])[0]  # type: ignore[attr-defined]
        first = first_passing(lowering.cached, pending, inp.filter(F.col("_in_order")), at,  # type: ignore[attr-defined]
                              F.col("_held_from"), initial)
    else:
        times = inp.filter(F.col("_in_order")).select(
            F.col(SOURCE_POSITION).alias("_at_position"), F.col(OUTPUT_POSITION).alias("_at_output"),
            F.col(STREAM_TIME).alias("_at_stream_time"))
        first = pending.join(times, F.col("_at_stream_time") > F.col(CLOSE_THRESHOLD), "inner").groupBy("_pending").agg(
            F.min(F.struct("_at_position", "_at_output")).alias("_at"))
    placed = pending.join(first, "_pending").withColumn(SOURCE_POSITION, F.col("_at._at_position")).withColumn(
        OUTPUT_POSITION, F.concat(F.col("_at._at_output"), F.col(OUTPUT_POSITION)))
    return rest.unionByName(placed.select(*rest.columns))


#: The key serdes whose bytes the JVM operator orders held records by (`key_bytes`'s rules).
_KEY_ORDER = {StringSerde: "string", IntegerSerde: "int", LongSerde: "long", BytesSerde: "bytes", JsonSerde: "json",
              DoubleSerde: "double"}


def _jvm_form(spec: StreamJoinSpec, key: PlanSerde) -> JvmJoin | str:
    """The join in the JVM operator's terms, or why it cannot run it."""
    kind = _KEY_ORDER.get(type(key))
    if kind is None:
        return f"keys of {key!r}"
    w = spec.windows
    return JvmJoin("stream_stream", spec.kind, {"before": w.before, "after": w.after, "grace": w.grace,
                                                 "spurious_result_fix": w.spurious_result_fix, "key_kind": kind})


def _stream_stream_join(self: Lowering, node: ir.StreamStreamJoinNode) -> Frame:
    this, other = self.parent(node, 0), self.parent(node, 1)
    d: StreamJoinDescription = description_of(node, [this, other], self.topology)
    key, left_value, right_value = d.key_serde, d.left_value, d.right_value
    config = StreamJoinConfig(node.name, d.spec, key, left_value, right_value, d.joiner)
    lt, rt = left_value.spark_type, right_value.spark_type
    inp = _side_input(this, 0, key, left_value, lt, rt).unionByName(_side_input(other, 1, key, right_value, lt, rt))
    jvm = self.choices.choose(node.name, _jvm_form(d.spec, key), inp.sparkSession, d.spec.kind)
    if jvm is None:
        return Frame(_run(self, node, inp, config), d.key, d.value)
    how = joiner_label(d.joiner, node.name, key=key, left=left_value, right=right_value, value_out=d.value)
    self.choices.record(node.name, Backend.JVM, f"{jvm.label}, {d.spec.kind}; {how}")
    pairs = _run(self, node, null_json_values(inp, left_value, right_value), config, jvm)
    return Frame(apply_joiner(pairs, node.name, d.joiner, key=key, left=left_value, right=right_value,
                              value_out=d.value), d.key, d.value)
