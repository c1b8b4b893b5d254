"""Lowering of versioned tables (KIP-889, KIP-914) and of the stream–table join against one,
with its grace buffer (KIP-923).

One ``transformWithState`` operator keyed by the table's key, as for the other tables and
stream–table joins (`streamsdsl.compiler.joins`), hosting the steps of
`streamsdsl.semantics.versioned` (the direct engine's): per key, the table's version history and
the stream records waiting in the grace buffer. In *source* mode it forwards the table's
changelog (every record the store takes, out-of-order ones too); in a join it joins each stream
record with the version valid at the record's timestamp.

Two times belong to the whole store, not to a key: the versioned store's stream time (the
largest table timestamp put: what refuses a put older than the history retention and limits an
``as of`` lookup) and the grace buffer's (the largest stream timestamp buffered: what releases
buffered records).

* **Test driver** (`PlanMode.REPLAY`): the plan computes both exactly, per record in pipe
  order, continuing from the previous run (carried like a stream–stream join's times): the
  store time before each record (`STORE_BEFORE`), the buffer time before each stream record
  (`BUFFER_BEFORE`), and, for the grace join, the run's buffered records as *release points*
  (`RELEASES`: the buffer time after each, its position and the store time before it). A
  buffered record is joined at the first release point at or after it whose buffer time
  reaches its timestamp plus the grace period, against the key's history as it is there (the
  table records before that point); its result takes that point's position and Kafka's order
  among the records released together (timestamp, serialized key, arrival).
* **Streaming**: both times are the key's own (a key's history is kept for the retention past
  its own latest update; Kafka counts from the task's latest), the buffer time also follows the
  watermark, and an event-time timer at the oldest buffered timestamp plus the grace period
  releases the key's buffer when no record of it comes (``docs/differences.md``).
"""

from __future__ import annotations

from typing import Any, Iterator

import attrs
from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql.streaming.stateful_processor import StatefulProcessorHandle
from pyspark.sql.types import _parse_datatype_string

from streamsdsl.compiler.carry import carry_out, with_carried_states
from streamsdsl.compiler.columns import CARRIED_STATE, CARRY, DROPPED, EVENT_METRIC, EVENT_VALUE, FINAL_KEY_ORDER
from streamsdsl.compiler.columns import FRAME_COLUMNS, HEADERS_TYPE, INPUT_INDEX, OUTPUT_POSITION, POSITION_TYPE
from streamsdsl.compiler.columns import SOURCE_POSITION, STREAM_TIME_OBSERVATION
from streamsdsl.compiler.event_time import transform_with_state
from streamsdsl.compiler.joins import SOURCE, STREAM_SIDE, TABLE_SIDE, KeyedOperator, KeyedOperatorConfig
from streamsdsl.compiler.lowering import Lowering, PlanMode
from streamsdsl.compiler.python_ops import result_error
from streamsdsl.errors import UserFunctionError
from streamsdsl.semantics.stream_table import StreamTableJoin, stream_join_step
from streamsdsl.semantics.versioned import NO_TIME, NOT_PUT, VersionHistory, versioned_get, versioned_put
from streamsdsl.values.serdes import PlanSerde

__all__ = ["VersionedConfig", "expired_table_records", "run_versioned"]

#: Test driver: the versioned store's stream time before the record (all keys, pipe order).
STORE_BEFORE = "_store_before"
#: Test driver: the grace buffer's stream time before the record.
BUFFER_BEFORE = "_buffer_before"
#: Test driver: the run's release points (every buffered stream record).
RELEASES = "_releases"
#: Test driver: a table record older than the history retention (`expired_table_records`).
EXPIRED = "_expired"
#: The observation of a versioned table's store time for `expired_table_records` (the node's name, then this).
EXPIRY_SUFFIX = "-versioned-store"
RELEASES_TYPE = f"array<struct<time:bigint,pos:bigint,opos:{POSITION_TYPE},store:bigint>>"


@attrs.frozen
class VersionedConfig(KeyedOperatorConfig):
    """What the versioned operator needs: ``kind`` ``"source"`` (forward the changelog),
    ``"inner"`` or ``"left"`` (a join); the history retention and the grace period (ms)."""

    stream_value: PlanSerde
    table_value: PlanSerde
    retention: int
    grace: int | None = None
    joiner: Any = None

    @property
    def state_fields(self) -> str:
        """The key's state: its versions, the store time, the buffered stream records, the buffer time."""
        buffered = (f"struct<ts:bigint,value:{self.stream_value.spark_type},headers:{HEADERS_TYPE},seq:bigint,"
                    f"opos:{POSITION_TYPE}>")
        return (f"versions array<struct<ts:bigint,value:{self.table_value.spark_type}>>, store_time bigint, "
                f"buffer array<{buffered}>, buffer_time bigint")

    @property
    def state_type(self) -> str:
        return "struct<" + ", ".join(f.replace(" ", ":", 1) for f in _split_fields(self.state_fields)) + ">"


def _split_fields(ddl: str) -> list[str]:
    """The top-level fields of a DDL field list (commas inside ``<...>`` kept)."""
    fields, depth, start = [], 0, 0
    for i, c in enumerate(ddl):
        depth += c == "<"
        depth -= c == ">"
        if c == "," and depth == 0:
            fields.append(ddl[start:i].strip())
            start = i + 1
    fields.append(ddl[start:].strip())
    return fields


def _fields(cell: Any, *names: str) -> tuple[Any, ...]:
    """A struct's fields: a carried state arrives as a dict, a stored one as a tuple (or Row)."""
    if isinstance(cell, dict):
        return tuple(cell[n] for n in names)
    return tuple(cell)


@attrs.frozen
class _Buffered:
    """A stream record in the grace buffer: timestamp, value cell, headers, arrival (its source
    position) and output position."""

    ts: int
    value: Any
    headers: Any
    seq: int
    opos: tuple[int, ...]


class VersionedOperator(KeyedOperator):
    """What both plan modes share: decoding the state, the table step, the joined rows."""

    def __init__(self, config: VersionedConfig) -> None:
        super().__init__(config)
        self.spec = None if config.kind == SOURCE else StreamTableJoin(config.kind)  # type: ignore[arg-type]

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.handle = handle
        self.state = handle.getValueState(self.config.state_name, self.config.state_fields)

    def _decode(self, cells: Any) -> tuple[VersionHistory, int, list[_Buffered], int]:
        tv = self.config.table_value
        versions, store_time, buffer, buffer_time = _fields(cells, "versions", "store_time", "buffer", "buffer_time")
        history = VersionHistory(tuple((int(ts), tv.from_internal(value))
                                       for ts, value in (_fields(v, "ts", "value") for v in versions or ())))
        waiting = [_Buffered(int(ts), value, headers, int(seq), tuple(opos or ()))
                   for ts, value, headers, seq, opos in (_fields(b, "ts", "value", "headers", "seq", "opos")
                                                         for b in buffer or ())]
        return history, NO_TIME if store_time is None else int(store_time), waiting, \
            NO_TIME if buffer_time is None else int(buffer_time)

    def _encode(self, history: VersionHistory, store_time: int, buffer: list[_Buffered], buffer_time: int) -> tuple:
        tv = self.config.table_value
        return ([(ts, tv.to_internal(v)) for ts, v in history.versions], store_time,
                [(b.ts, b.value, b.headers, b.seq, list(b.opos)) for b in buffer], buffer_time)

    def _put(self, history: VersionHistory, kcell: Any, r: Any, store_time: int) -> tuple[VersionHistory, int, list]:
        """A table record: the history, the store time after it and (source mode) its changelog row."""
        cfg = self.config
        cell = r["value"]["t"]
        history, code, store_time = versioned_put(history, cfg.table_value.from_internal(cell), r["timestamp"],
                                                  store_time=store_time, retention=cfg.retention)
        rows = []
        if self.spec is None and code == NOT_PUT:  # streaming (the replay's plan drops them before)
            rows.append(self._drop_row(r["timestamp"], r[SOURCE_POSITION]))
        elif self.spec is None:
            rows.append(self._row(kcell, cell, r["timestamp"], r["headers"], r[SOURCE_POSITION], r[OUTPUT_POSITION],
                                  None, None, None))
        return history, store_time, rows

    def _dropped(self, k: Any, value: Any) -> bool:
        """`stream_join_step`'s drops: a null value; a null key in an inner join."""
        return value is None or (k is None and self.config.kind != "left")

    def _join(self, history: VersionHistory, store_time: int, kcell: Any, k: Any, value: Any, ts: int, headers: Any,
              position: int, opos: list[int]) -> Iterator[Any]:
        """A stream record joined with the version as of ``ts``."""
        cfg = self.config
        found = None if k is None else versioned_get(history, ts, store_time, cfg.retention)
        try:
            result = stream_join_step(self.spec, found, k, value, ts, cfg.joiner)  # type: ignore[arg-type]
        except Exception as exc:  # noqa: BLE001 - re-raised with the processor and the record
            raise UserFunctionError.of(cfg.node, "joiner", exc, k, position).in_worker() from exc
        if result.output is not None:
            try:
                out = cfg.value_out.to_internal(result.output.value)
            except Exception as exc:  # noqa: BLE001 - a result its serde cannot hold
                raise result_error(cfg.node, "joiner", exc, repr(k), position) from exc
            yield self._row(kcell, out, ts, headers, position, opos, None, None, None)

    def _drop_row(self, ts: int, position: int) -> Any:
        return self._row(None, None, ts, [], position, [], None, DROPPED, 1.0)


class ReplayVersionedOperator(VersionedOperator):
    """The test driver's run: the store's and the buffer's times from the plan, the key's state
    carried in and out as rows."""

    def handleInputRows(self, key: Any, rows: Iterator[Any], timerValues: Any) -> Iterator[Any]:  # noqa: N802,N803
        cfg = self.config
        kcell = key[0]
        k = cfg.key.from_internal(kcell)
        history, buffer = VersionHistory(), []
        data = []
        releases: list[tuple[int, list[int], int, int]] = []
        for r in rows:
            if cfg.grace is not None and not releases and r[RELEASES]:
                releases = sorted((p["pos"], list(p["opos"] or []), p["time"], p["store"]) for p in r[RELEASES])
            if r[CARRIED_STATE] is not None:
                history, _, buffer, _ = self._decode(r[CARRIED_STATE])
            else:
                data.append(r)
        data.sort(key=lambda r: (r[SOURCE_POSITION], r[OUTPUT_POSITION] or [], r[INPUT_INDEX]))
        events: list[tuple[tuple, str, Any, Any]] = []
        for r in data:
            at = (r[SOURCE_POSITION], list(r[OUTPUT_POSITION] or []))
            if r[INPUT_INDEX] == TABLE_SIDE:
                events.append(((*at, 0), "table", r, None))
                continue
            value = cfg.stream_value.from_internal(r["value"]["s"])
            if self._dropped(k, value):
                events.append(((*at, 1), "drop", r, None))
            elif cfg.grace is None or k is None or r["timestamp"] < r[BUFFER_BEFORE] - cfg.grace:
                events.append(((*at, 1), "join", r, value))
            else:
                buffer.append(_Buffered(r["timestamp"], r["value"]["s"], r["headers"], at[0], tuple(at[1])))
        korder = [*cfg.key.serialize(k)] if k is not None else []
        waiting = []
        for b in buffer:
            point = next((p for p in releases if (p[0], p[1]) >= (b.seq, list(b.opos)) and p[2] >= b.ts + cfg.grace),
                         None) if cfg.grace is not None else None
            if point is None:
                waiting.append(b)
            else:
                events.append(((point[0], point[1], 2, b.ts, b.seq, list(b.opos)), "release", b, point))
        events.sort(key=lambda e: e[0])
        for _, kind, r, extra in events:
            if kind == "table":
                history, _, out = self._put(history, kcell, r, r[STORE_BEFORE])
                yield from out
            elif kind == "drop":
                yield self._drop_row(r["timestamp"], r[SOURCE_POSITION])
            elif kind == "join":
                yield from self._join(history, r[STORE_BEFORE], kcell, k, extra, r["timestamp"], r["headers"],
                                      r[SOURCE_POSITION], list(r[OUTPUT_POSITION] or []))
            else:
                b, (pos, opos, _, store) = r, extra
                # Kafka's order among the records one point releases: timestamp, serialized key
                # (its bytes, then -1: a shorter key first), arrival
                order = [*opos, b.ts, *korder, -1, b.seq, *b.opos]
                yield from self._join(history, store, kcell, k, cfg.stream_value.from_internal(b.value), b.ts,
                                      b.headers, pos, order)
        if history.versions or waiting:
            carried = self._encode(history, NO_TIME, waiting, NO_TIME)
            yield self.out(kcell, None, -1, [], -1, [], None, CARRY, None, carried)


class StreamingVersionedOperator(VersionedOperator):
    """Streaming: the key's own store time; the buffer time from the watermark and the key's
    buffered records; an event-time timer releases the buffer when no record of the key comes."""

    def _load(self) -> tuple[VersionHistory, int, list[_Buffered], int]:
        stored = self.state.get() if self.state.exists() else None
        return (VersionHistory(), NO_TIME, [], NO_TIME) if stored is None else self._decode(stored)

    def _save(self, history: VersionHistory, store_time: int, buffer: list[_Buffered], buffer_time: int) -> None:
        if self.config.grace is not None:
            for t in list(self.handle.listTimers()):
                self.handle.deleteTimer(t)
            if buffer:
                self.handle.registerTimer(min(b.ts for b in buffer) + self.config.grace)
        if not history.versions and not buffer:
            self.state.clear()
        else:
            self.state.update(self._encode(history, store_time, buffer, buffer_time))

    def _release(self, history: VersionHistory, store_time: int, buffer: list[_Buffered], buffer_time: int,
                 kcell: Any, k: Any, position: int, opos: list[int]) -> tuple[list[_Buffered], list[Any]]:
        """The buffered records the buffer time releases, joined in (timestamp, arrival) order."""
        horizon = buffer_time - self.config.grace  # type: ignore[operator]
        ready = sorted((b for b in buffer if b.ts <= horizon), key=lambda b: (b.ts, b.seq, b.opos))
        rows = []
        for i, b in enumerate(ready):
            rows.extend(self._join(history, store_time, kcell, k, self.config.stream_value.from_internal(b.value), b.ts,
                                   b.headers, position, [*opos, 1, i]))
        return [b for b in buffer if b.ts > horizon], rows

    def handleInputRows(self, key: Any, rows: Iterator[Any], timerValues: Any) -> Iterator[Any]:  # noqa: N802,N803
        cfg = self.config
        kcell = key[0]
        k = cfg.key.from_internal(kcell)
        history, store_time, buffer, buffer_time = self._load()
        if cfg.grace is not None:
            buffer_time = max(buffer_time, timerValues.getCurrentWatermarkInMs())
        data = sorted(rows, key=lambda r: (r["timestamp"], r[INPUT_INDEX] != TABLE_SIDE, r[SOURCE_POSITION],
                                           r[OUTPUT_POSITION] or []))
        for r in data:
            position, opos, ts = r[SOURCE_POSITION], list(r[OUTPUT_POSITION] or []), r["timestamp"]
            if r[INPUT_INDEX] == TABLE_SIDE:
                history, store_time, out = self._put(history, kcell, r, store_time)
                yield from out
                continue
            value = cfg.stream_value.from_internal(r["value"]["s"])
            if self._dropped(k, value):
                yield self._drop_row(ts, position)
            elif cfg.grace is None or k is None or ts < buffer_time - cfg.grace:
                yield from self._join(history, store_time, kcell, k, value, ts, r["headers"], position, opos)
            else:
                buffer.append(_Buffered(ts, r["value"]["s"], r["headers"], position, tuple(opos)))
                buffer_time = max(buffer_time, ts)
                buffer, out = self._release(history, store_time, buffer, buffer_time, kcell, k, position, opos)
                yield from out
        if k is not None:
            self._save(history, store_time, buffer, buffer_time)

    def handleExpiredTimer(self, key: Any, timerValues: Any, expiredTimerInfo: Any) -> Iterator[Any]:  # noqa: N802,N803
        kcell = key[0]
        k = self.config.key.from_internal(kcell)
        history, store_time, buffer, buffer_time = self._load()
        buffer_time = max(buffer_time, timerValues.getCurrentWatermarkInMs())
        buffer, out = self._release(history, store_time, buffer, buffer_time, kcell, k, -1, [0])
        yield from out
        self._save(history, store_time, buffer, buffer_time)


def _replay_times(lowering: Lowering, inp: DataFrame, config: VersionedConfig) -> DataFrame:
    """The store's (and the grace buffer's) times before each record, in pipe order from the
    previous run's, and the run's release points; the run's largest observed for the next run."""
    before = list(lowering.carry.stream_times.get(config.node, ())) or [NO_TIME, NO_TIME]  # type: ignore[attr-defined]
    prior = Window.orderBy(SOURCE_POSITION, OUTPUT_POSITION, INPUT_INDEX).rowsBetween(Window.unboundedPreceding, -1)
    fresh = F.col(CARRIED_STATE).isNull()
    ts = F.col("timestamp")
    put = fresh & (F.col(INPUT_INDEX) == TABLE_SIDE) & F.col("key").isNotNull()
    waits = fresh & (F.col(INPUT_INDEX) == STREAM_SIDE) & F.col("key").isNotNull() & F.col("value.s").isNotNull()
    df = inp.withColumn(STORE_BEFORE, F.greatest(F.coalesce(F.max(F.when(put, ts)).over(prior), F.lit(NO_TIME)),
                                                 F.lit(before[0])).cast("bigint"))
    if config.grace is None:
        df = df.withColumn(BUFFER_BEFORE, F.lit(NO_TIME).cast("bigint")).withColumn(
            RELEASES, F.lit(None).cast(RELEASES_TYPE))
    else:
        df = df.withColumn(BUFFER_BEFORE, F.greatest(F.coalesce(F.max(F.when(waits, ts)).over(prior), F.lit(NO_TIME)),
                                                     F.lit(before[1])).cast("bigint"))
        buffered = waits & (ts >= F.col(BUFFER_BEFORE) - F.lit(config.grace))
        point = F.when(buffered, F.struct(F.greatest(F.col(BUFFER_BEFORE), ts).cast("bigint").alias("time"),
                                          F.col(SOURCE_POSITION).alias("pos"), F.col(OUTPUT_POSITION).alias("opos"),
                                          F.col(STORE_BEFORE).alias("store")))
        df = df.withColumn(RELEASES, F.collect_list(point).over(Window.partitionBy()).cast(RELEASES_TYPE))
    return df.observe(f"{STREAM_TIME_OBSERVATION}{config.node}", F.max(F.when(put, ts)).alias("t0"),
                      F.max(F.when(waits, ts)).alias("t1"))


def expired_table_records(lowering: Lowering, records: DataFrame, node: str, retention: int) -> DataFrame:
    """Test driver: a versioned table's records without those older than the store's stream
    time (the largest timestamp before them in pipe order, from the previous run's on) minus
    the history retention, each counted as dropped by ``node``."""
    name = f"{node}{EXPIRY_SUFFIX}"
    before = list(lowering.carry.stream_times.get(name, ())) or [NO_TIME]  # type: ignore[attr-defined]
    prior = Window.orderBy(SOURCE_POSITION, OUTPUT_POSITION).rowsBetween(Window.unboundedPreceding, -1)
    ts = F.col("timestamp")
    store = F.greatest(F.coalesce(F.max(ts).over(prior), F.lit(NO_TIME)), F.lit(before[0]))
    df = records.withColumn(EXPIRED, ts < store - F.lit(retention))
    df = df.observe(f"{STREAM_TIME_OBSERVATION}{name}", F.max(ts).alias("t0"))
    return lowering.drop_counted(df, node, ~F.col(EXPIRED), part="expired").drop(EXPIRED)


def run_versioned(lowering: Lowering, inp: DataFrame, config: VersionedConfig) -> DataFrame:
    """The versioned operator over ``inp`` (the table's records and, in a join, the stream's);
    its drops counted right after it (a join's: a table source's null keys are counted before)."""
    replay = lowering.mode is PlanMode.REPLAY
    config = attrs.evolve(config, replay=replay)
    types = {"key": config.key.spark_type, "value": config.value_out.spark_type, "timestamp": "bigint",
             "headers": HEADERS_TYPE, SOURCE_POSITION: "bigint", OUTPUT_POSITION: POSITION_TYPE,
             FINAL_KEY_ORDER: "string", EVENT_METRIC: "string", EVENT_VALUE: "double",
             CARRIED_STATE: config.state_type}
    processor: VersionedOperator
    if replay:
        processor = ReplayVersionedOperator(config)
        inp = with_carried_states(lowering, inp, config.node, config.key.spark_type, config.state_type,
                                  **{INPUT_INDEX: F.lit(TABLE_SIDE)})
        inp = _replay_times(lowering, inp, config)
    else:
        processor = StreamingVersionedOperator(config)
    schema = _parse_datatype_string(", ".join(f"{f} {types[f]}" for f in processor.fields))
    time_mode = "EventTime" if not replay and config.grace is not None else "None"
    out = transform_with_state(not replay, lowering.topology, config.node, inp.groupBy("key"), processor, schema,
                               time_mode)
    if replay:
        out = carry_out(lowering, out, config.node, F.col("key"), config.key.spark_type, config.state_type)
    metric = F.col(EVENT_METRIC)
    # a join's drops (null keys and values) at its input; a source's (refused updates) at its store
    out = lowering.observe(out, config.node, "store" if config.kind == SOURCE else "input",
                           dropped=F.when(metric == DROPPED, F.col(EVENT_VALUE)))
    return out.filter(metric.isNull()).select(*FRAME_COLUMNS)
