"""The stateful Spark operator: one ``transformWithState`` processor (Row API) around the
semantics core, for every aggregation — unwindowed, session, time and sliding windows, cogroup.

One state row and one event-time timer per key (PLATFORM.md: the per-key Python callback is the
cost, so each key does the least Python it can), and on a streaming query one input row per key
and partition (`records_by_key`: PySpark's Row API converts every cell of every row). For each
record the processor calls `streamsdsl.semantics.windowing.record_step`; what it forwards
depends on the plan mode, which is the processor's class:

* `StreamingAggregateProcessor` — stream time is ``max(watermark of the previous micro-batch,
  the key's record timestamps so far in this batch)``; windows close on event-time timers; what
  a micro-batch forwards in update mode is the net change since the previous batch (Kafka
  Streams' record cache flushed at commit).
* `ReplayAggregateProcessor` (the TopologyTestDriver's batch run) — every input row carries
  `STREAM_TIME`, Kafka Streams' stream time after that record, computed in the plan as a
  running max in pipe order; the cache is flushed after every record; on-close records leave
  the processor with their `CLOSE_THRESHOLD` and the plan assigns each to the first record
  whose stream time passes it.

Drops and emit-final records leave the processor as metric event rows (`EVENT_METRIC`), which
the lowering counts with ``observe()`` and removes right after the operator.
"""

from __future__ import annotations

import functools
import pickle
from typing import TYPE_CHECKING, Any, Iterable, Iterator

import attrs
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import Row
from pyspark.sql import functions as F
from pyspark.sql.streaming.stateful_processor import StatefulProcessor, StatefulProcessorHandle
from pyspark.sql.types import ArrayType, BinaryType, BooleanType, ByteType, DoubleType, FloatType, IntegerType
from pyspark.sql.types import LongType, ShortType, StringType, StructField, StructType

from streamsdsl.compiler.columns import CARRIED_STATE, CARRY, DROPPED, EMIT_FINAL, INPUT_INDEX, OPERATOR_OUTPUT_FIELDS
from streamsdsl.compiler.columns import EXPIRY_TIME, STREAM_TIME_BEFORE
from streamsdsl.compiler.columns import OUTPUT_POSITION, POSITION_TYPE, REPLAY_FIELDS, RUN_STREAM_TIME, SOURCE_POSITION
from streamsdsl.compiler.columns import STREAM_TIME
from streamsdsl.compiler.frame import KeyCodec
from streamsdsl.compiler.python_ops import result_error
from streamsdsl.values.serdes import PlanSerde
from streamsdsl.errors import UserFunctionError
from streamsdsl.semantics.aggregation import AggFunctions
from streamsdsl.operators import function_of
from streamsdsl.semantics.changes import ChangeBuffer
from streamsdsl.semantics.kernels import FlushPolicy, forwarded_updates
from streamsdsl.semantics.windowing import KeyState, RecordStep, WindowAgg, Windowing, advance_stream_time
from streamsdsl.semantics.windowing import close_step, record_step

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

#: Output columns of the streaming processor (the replay processor adds `CLOSE_THRESHOLD`).
OUTPUT_FIELDS = OPERATOR_OUTPUT_FIELDS


def windows_type(value_type: str) -> str:
    """Spark type of a key's stored windows (an unwindowed aggregate is one window)."""
    return f"array<struct<start:bigint,end:bigint,agg:{value_type},ts:bigint,fin:boolean>>"


def state_schema(value_type: str) -> str:
    """The one state row of a key: its stored windows as one pickled list of ``(start, end,
    agg, ts, fin)`` tuples, ``agg`` in its serde's column form (`AggregateProcessor._save`).

    One binary cell rather than a ``windows_type`` array: the state API converts a value cell by
    cell on both sides of its socket (``StructType.toInternal`` in Python, the pickled rows into
    Spark rows on the JVM), for every key of every micro-batch; a pickled list costs neither."""
    return "windows binary"


#: The operator input's column of a record's numbers: ``[timestamp, source position, *output
#: position]`` (`operator_rows`).
META = "_meta"


def operator_rows(df: DataFrame) -> DataFrame:
    """The rows a Python processor reads: ``key``, ``value``, `META`, ``headers`` (null when
    empty), then whatever else ``df`` carries (`INPUT_INDEX`, the test driver's columns).

    PySpark's Row API converts every cell of every input row on its own (one pyarrow scalar and
    its ``as_py()`` each, ≈ 2 µs) and the key once more: folding the timestamp and both positions
    into one array and nulling empty headers saves a third of that per record."""
    packed = ("value", "timestamp", "headers", SOURCE_POSITION, OUTPUT_POSITION)
    meta = F.concat(F.array(F.col("timestamp").cast("bigint"), F.col(SOURCE_POSITION)),
                    F.coalesce(F.col(OUTPUT_POSITION), F.array().cast(POSITION_TYPE)))
    headers = F.when(F.size("headers") > 0, F.col("headers"))
    rest = [c for c in df.columns if c != "key" and c not in packed]
    return df.select("key", "value", meta.alias(META), headers.alias("headers"), *rest)


#: Key types `records_by_key` groups with Arrow's sort (what ``pyarrow.compute.sort_indices`` orders).
_SORTABLE_KEYS = (StringType, BinaryType, LongType, IntegerType, ShortType, ByteType, BooleanType, DoubleType,
                  FloatType)

#: How much of a partition's input `records_by_key` holds before it hands on its groups (rows,
#: bytes of Arrow buffers): a key with records on both sides of a cut gets two rows.
PACK_ROWS, PACK_BYTES = 1 << 20, 128 << 20


def records_by_key(df: DataFrame, pack: bool, max_rows: int = PACK_ROWS, max_bytes: int = PACK_BYTES) -> DataFrame:
    """``df`` (`operator_rows`) as the processor reads it: one row per key and group of its
    records, every column but ``key`` a list with one element per record, in the input's order.

    ``pack``: group a partition's records by key in Arrow before the shuffle (`_pack_batches`,
    one ``mapInArrow``), so PySpark's Row API converts one row and a few lists per key instead of
    every cell of every record (P2: 18.5–20.6 s → 4.3–6.3 s for reading 1M records). Without it
    (the test driver's small runs, keys of other types) each record is its own one-element group,
    in the JVM. Either way the processor sorts a key's records by source position. ``max_rows`` and
    ``max_bytes`` bound what one packing step holds (`PACK_ROWS`, `PACK_BYTES`)."""
    fields = [f for f in df.schema.fields if f.name != "key"]
    if pack and isinstance(df.schema["key"].dataType, _SORTABLE_KEYS):
        schema = StructType([df.schema["key"], *[StructField(f.name, ArrayType(f.dataType, True)) for f in fields]])
        return df.mapInArrow(functools.partial(_pack_batches, max_rows=max_rows, max_bytes=max_bytes), schema)
    return df.select("key", *[F.array(f.name).alias(f.name) for f in fields])


def _pack_batches(batches: Iterator[pa.RecordBatch], max_rows: int, max_bytes: int) -> Iterator[pa.RecordBatch]:
    """``mapInArrow`` function of `records_by_key`: up to ``max_rows`` rows / ``max_bytes`` of input at a time."""
    held: list[pa.RecordBatch] = []
    rows = size = 0
    for batch in batches:
        if batch.num_rows:
            held.append(batch)
            rows, size = rows + batch.num_rows, size + batch.nbytes
        if rows >= max_rows or size >= max_bytes:
            yield _packed(held)
            held, rows, size = [], 0, 0
    if held:
        yield _packed(held)


def _packed(batches: list[pa.RecordBatch]) -> pa.RecordBatch:
    """One row per distinct key, each other column the list of its records' cells (a stable
    sort by key keeps each key's records in input order)."""
    table = pa.Table.from_batches(batches)
    table = table.take(pc.sort_indices(table, [("key", "ascending")]))
    keys = table.column("key").combine_chunks()
    starts = pc.add(pc.indices_nonzero(pc.fill_null(pc.not_equal(keys[1:], keys[:-1]), True)), 1)
    offsets = pa.concat_arrays([pa.array([0], pa.int32()), starts.cast(pa.int32()), pa.array([len(keys)], pa.int32())])
    names = [name for name in table.column_names if name != "key"]
    columns = [pa.ListArray.from_arrays(offsets, table.column(name).combine_chunks()) for name in names]
    return pa.RecordBatch.from_arrays([keys.take(offsets[:-1]), *columns], names=["key", *names])


@attrs.frozen
class AggregateInput:
    """One input stream of an aggregation: how its values are held and its functions."""

    value: PlanSerde
    fns: AggFunctions
    #: Whether the input's records reach the operator through a repartition topic: each is then
    #: an input record of its own, whose cache flush forwards its writes (replay; otherwise
    #: one flush per source record, `streamsdsl.semantics.kernels.InputRecordCache`).
    repartitioned: bool = False


@attrs.frozen
class AggregateConfig:
    """Everything a processor needs on the executors (pickled with it).

    ``key`` is the output key layout (windowed or not) around the grouping key's serde. With
    ``cogroup`` each row carries `INPUT_INDEX` and its value in field ``v<i>`` of a struct.
    """

    node: str
    key: KeyCodec
    value_out: PlanSerde
    windowing: Windowing
    inputs: tuple[AggregateInput, ...]
    emit_on_close: bool = False
    cogroup: bool = False
    #: How errors name the initializer, aggregator and merger (e.g. "reducer" for reduce()).
    function_names: tuple[str, str, str] = ("initializer", "aggregator", "merger")
    #: Replay: when store writes are forwarded (``statestore.cache.max.bytes``).
    flush: FlushPolicy = FlushPolicy.PER_RECORD

    def key_order(self, key: Any) -> str:
        """How on-close records of one stream-time step and one window order by key: the key's
        serialized bytes (Kafka's store order), as hex text."""
        data = self.key.serde.serialize(key)
        return "" if data is None else data.hex()

    def value_of(self, cell: Any, index: int | None) -> tuple[Any, AggFunctions]:
        """An input row's value cell as a Python value, and the functions of its input
        (``index``: the row's `INPUT_INDEX`, read only for a cogroup)."""
        if self.cogroup:
            spec = self.inputs[index]
            return spec.value.from_internal(cell[f"v{index}"]), spec.fns
        spec = self.inputs[0]
        return spec.value.from_internal(cell), spec.fns


class _Columns:
    """Where each input column sits in a row of `operator_rows` (read by index: ``Row.__getitem__``
    is Python code, a plain tuple's is not); ``None`` for a column the plan mode does not give the
    processor. A record's timestamp, position and output position are in its `META` list
    (`timestamp`, `position`, `output_position`)."""

    def __init__(self, fields: list[str]) -> None:
        self.fields = list(fields)
        at = {f: i for i, f in enumerate(fields)}
        self.value, self.meta, self.headers = at["value"], at[META], at["headers"]
        self.input_index = at.get(INPUT_INDEX)
        self.stream_time = at.get(STREAM_TIME)
        self.stream_time_before = at.get(STREAM_TIME_BEFORE)
        self.expiry_time = at.get(EXPIRY_TIME)
        self.carried_state = at.get(CARRIED_STATE)
        self.run_stream_time = at.get(RUN_STREAM_TIME)

    def timestamp(self, r: tuple[Any, ...]) -> int:
        return r[self.meta][0]

    def position(self, r: tuple[Any, ...]) -> int:
        return r[self.meta][1]

    def output_position(self, r: tuple[Any, ...]) -> list[int]:
        return r[self.meta][2:]

    def headers_of(self, r: tuple[Any, ...]) -> list[Any]:
        return r[self.headers] or []


def _rows_in_source_order(rows: Iterable[Row], cols: _Columns | None) -> tuple[list[tuple[Any, ...]], _Columns | None]:
    """The key's records (`records_by_key` rows: lists of cells after the key) as plain tuples
    without the key, in source order, and where their columns are (``cols`` again unless the
    rows' fields differ from it)."""
    out: list[tuple[Any, ...]] = []
    for r in rows:
        if cols is None or r.__fields__[1:] != cols.fields:
            cols = _Columns(r.__fields__[1:])
        out.extend(zip(*r[1:]))
    if out:
        meta = cols.meta
        out.sort(key=lambda r: r[meta][1:])  # (position, output position)
    return out, cols


def _row(fields: list[str], values: tuple[Any, ...]) -> Row:
    """``Row(*fields)(*values)`` without its per-call checks."""
    row = tuple.__new__(Row, values)
    row.__fields__ = fields
    return row


class AggregateProcessor(StatefulProcessor):
    """What both plan modes share: state I/O, the record loop, output rows. A subclass says
    where stream time comes from and what is forwarded when (see the module docs)."""

    fields: tuple[str, ...] = OUTPUT_FIELDS

    def __init__(self, config: AggregateConfig, state_type: str) -> None:
        self.config = config
        self.state_type = state_type
        self.out_fields = list(self.fields)
        self._cols: _Columns | None = None

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.handle = handle
        self.state = handle.getValueState("windows", self.state_type)
        #: The key cell and source position of the record being processed (for errors).
        self._at: tuple[Any, int] = (None, -1)
        #: The event-time timer the key's stored state has registered (see `_set_timer`).
        self._timer_before: int | None = None

    def out(self, *values: Any) -> Row:
        return _row(self.out_fields, values)

    # -- state ----------------------------------------------------------------------------------
    def _decode_state(self, cells: Iterable[Any]) -> KeyState:
        """The stored windows: Rows in the schema's field order from the state store, dicts when
        carried as an input column (replay)."""
        decode = self.config.value_out.from_internal
        cells = [(c["start"], c["end"], c["agg"], c["ts"], c["fin"]) if isinstance(c, dict) else c for c in cells]
        windows = tuple([WindowAgg(start, end, decode(agg), ts) for start, end, agg, ts, _ in cells])
        finals = frozenset([c[0] for c in cells if c[4]]) if any(c[4] for c in cells) else frozenset()
        return KeyState(windows, finals)

    def _encode_state(self, state: KeyState) -> list[tuple[Any, ...]]:
        kcell, position = self._at
        return [(w.start, w.end, self._internal(w.agg, kcell, position), w.ts, w.start in state.finals)
                for w in state.windows]

    def _load(self, data: list[tuple[Any, ...]]) -> KeyState:
        """The key's state before its rows (removing rows that only carry state). One call into
        the JVM: ``get()`` answers ``None`` where ``exists()`` would say no."""
        stored = self.state.get()
        if stored is None:
            return KeyState()
        return self._decode_state(pickle.loads(stored[0]))

    def _save(self, state: KeyState) -> None:
        if not state.windows:
            self.state.clear()
            return
        self.state.update((pickle.dumps(self._encode_state(state), protocol=pickle.HIGHEST_PROTOCOL),))

    # -- output rows -------------------------------------------------------------------------
    def _key_cell(self, kcell: Any, w: WindowAgg) -> Any:
        if self.config.key.windowed:
            return {"key": kcell, "start": w.start, "end": w.end}
        return kcell

    def _record(self, key: Any, value: Any, ts: int, headers: Any, position: int, output_position: list[int],
                final_key: str | None = None, threshold: int | None = None) -> Row:
        return self.out(key, value, ts, headers, position, output_position, final_key, None, None)

    def _event(self, metric: str, value: float, ts: int, position: int, final_key: str | None = None) -> Row:
        return self.out(None, None, ts, [], position, [], final_key, metric, float(value))

    def _flush(self, kcell: Any, written: list[tuple[Any, WindowAgg | None]], r: tuple[Any, ...]) -> Iterator[Row]:
        """Forward store writes: what the record cache holds (the latest value per window,
        tombstones), or every write when there is no cache."""
        cols = self._cols
        ord_ = cols.output_position(r)
        position, headers = cols.position(r), cols.headers_of(r)
        for i, (bounds, w) in enumerate(written):
            window = w if w is not None else WindowAgg(bounds[0], bounds[1], None, bounds[1])
            value = None if w is None else self._internal(w.agg, kcell, position)
            yield self._record(self._key_cell(kcell, window), value, window.ts, headers, position, [*ord_, 0, i])

    def _final(self, kcell: Any, key: Any, w: WindowAgg, position: int, ord_: list[int],
               threshold: int | None = None) -> Row:
        """A window's on-close record."""
        order = [*ord_, 1, *self.config.windowing.final_order(w)]
        return self._record(self._key_cell(kcell, w), self._internal(w.agg, kcell, position), w.ts, [],
                            position, order, self.config.key_order(key), threshold)

    def _internal(self, agg: Any, kcell: Any, position: int) -> Any:
        """An aggregate as its serde's column value; one the serde cannot hold names the function."""
        try:
            return self.config.value_out.to_internal(agg)
        except Exception as exc:  # noqa: BLE001 - re-raised with the processor and the record
            key = repr(self.config.key.serde.from_internal(kcell))
            raise result_error(self.config.node, self.config.function_names[1], exc, key, position) from exc

    # -- the record loop ---------------------------------------------------------------------
    def handleInputRows(self, key: Any, rows: Iterator[Row], timerValues: Any) -> Iterator[Row]:  # noqa: N802,N803
        cfg = self.config
        data, cols = _rows_in_source_order(rows, self._cols)
        if not data:
            return
        self._cols = cols
        kcell = key[0]
        k = cfg.key.serde.from_internal(kcell)
        state = self._load(data)
        self._timer_before = self._timer(state)
        stream_time = timerValues.getCurrentWatermarkInMs()
        batch = ChangeBuffer(w.bounds for w in state.windows)
        windowing, emit_on_close = cfg.windowing, cfg.emit_on_close
        i_meta, i_val, i_index = cols.meta, cols.value, cols.input_index
        decode, fns = cfg.inputs[0].value.from_internal, cfg.inputs[0].fns
        for r in data:
            ts, position = r[i_meta][:2]
            self._at = (kcell, position)
            if cfg.cogroup:
                value, fns = cfg.value_of(r[i_val], r[i_index])
            else:
                value = decode(r[i_val])
            before_time = stream_time
            stream_time = self._stream_time(r, stream_time, ts, value)
            try:
                step = record_step(windowing, state, k, value, ts, stream_time, fns,
                                   stream_time_before=self._stream_time_before(r, before_time),
                                   expiry_time=self._expiry_time(r))
            except Exception as exc:  # noqa: BLE001 - re-raised with the processor and the record
                raise UserFunctionError.of(cfg.node, function_of(exc, fns, cfg.function_names), exc, k,
                                           position).in_worker() from exc
            if step.dropped:
                yield self._event(DROPPED, step.dropped, ts, position)
            if not emit_on_close:
                yield from self._on_update(kcell, state, step, batch, r)
            state = step.state
            if emit_on_close and step.closed:
                yield from self._on_close(kcell, k, step.closed, stream_time, r)
        yield from self._end_of_key(kcell, k, state, batch, data[-1] if data else ())
        self._save(state)
        self._set_timer(state)

    def _stream_time(self, r: tuple[Any, ...], stream_time: int, ts: int, value: Any) -> int:
        raise NotImplementedError

    def _stream_time_before(self, r: tuple[Any, ...], previous: int) -> int | None:
        """The stream time before the record (``previous``: the running one of the key's loop)."""
        return previous

    def _expiry_time(self, r: tuple[Any, ...]) -> int | None:
        """The stream time windows expire by, where it is not the record's stream time (a cogroup
        whose inputs keep their own stream times: the least of them); ``None``: stream time."""
        at = self._cols.expiry_time
        return None if at is None else int(r[at])

    def _on_update(self, kcell: Any, before: KeyState, step: RecordStep, batch: ChangeBuffer,
                   r: tuple[Any, ...]) -> Iterator[Row]:
        raise NotImplementedError

    def _on_close(self, kcell: Any, key: Any, closed: tuple[WindowAgg, ...], stream_time: int,
                  r: tuple[Any, ...]) -> Iterator[Row]:
        raise NotImplementedError

    def _end_of_key(self, kcell: Any, key: Any, state: KeyState, batch: ChangeBuffer,
                    last: tuple[Any, ...]) -> Iterator[Row]:
        raise NotImplementedError

    def _timer(self, state: KeyState) -> int | None:
        """The one event-time timer a key with this stored state has registered: the first
        stream time past its earliest threshold (``None``: no timer)."""
        return None

    def _set_timer(self, state: KeyState, expired: int | None = None) -> None:
        pass

    def close(self) -> None:
        pass


class StreamingAggregateProcessor(AggregateProcessor):
    """Streaming: stream time from the watermark, net change per micro-batch, timers."""

    def _stream_time(self, r: tuple[Any, ...], stream_time: int, ts: int, value: Any) -> int:
        return advance_stream_time(self.config.windowing, stream_time, ts, value)

    def _on_update(self, kcell: Any, before: KeyState, step: RecordStep, batch: ChangeBuffer,
                   r: tuple[Any, ...]) -> Iterator[Row]:
        if self.config.flush is FlushPolicy.EVERY_WRITE:  # no record cache: every write, at once
            return self._flush(kcell, forwarded_updates(before, step, FlushPolicy.EVERY_WRITE), r)
        step.write_to(batch)
        return ()

    def _finals(self, kcell: Any, key: Any, closed: Iterable[WindowAgg], stream_time: int, position: int,
                ord_: list[int]) -> Iterator[Row]:
        """On-close records plus one emit-final event each (latency: stream time past the close)."""
        threshold = self.config.windowing.close_threshold
        for w in closed:
            record = self._final(kcell, key, w, position, ord_)
            yield record
            yield self._event(EMIT_FINAL, stream_time - threshold(w) - 1, w.ts, position, self.config.key_order(key))

    def _on_close(self, kcell: Any, key: Any, closed: tuple[WindowAgg, ...], stream_time: int,
                  r: tuple[Any, ...]) -> Iterator[Row]:
        cols = self._cols
        return self._finals(kcell, key, closed, stream_time, cols.position(r), cols.output_position(r))

    def _end_of_key(self, kcell: Any, key: Any, state: KeyState, batch: ChangeBuffer,
                    last: tuple[Any, ...]) -> Iterator[Row]:
        if not self.config.emit_on_close:
            yield from self._flush(kcell, batch.flush(), last)

    def _timer(self, state: KeyState) -> int | None:
        thresholds = state.timer_thresholds(self.config.windowing)
        return min(thresholds) + 1 if thresholds else None

    def _set_timer(self, state: KeyState, expired: int | None = None) -> None:
        """One timer per key: at the first stream time past the earliest threshold.

        Which timer a key has registered follows from its stored state (`_timer`: every callback
        leaves exactly that one registered; Spark deletes a timer after it fired, ``expired``),
        so the timer is deleted and registered only when it changes — no ``listTimers()``."""
        before, after = self._timer_before, self._timer(state)
        if after == before and before != expired:
            return
        if before is not None and before != expired and before != after:
            self.handle.deleteTimer(before)
        if after is not None:
            self.handle.registerTimer(after)

    def handleExpiredTimer(self, key: Any, timerValues: Any, expiredTimerInfo: Any) -> Iterator[Row]:  # noqa: N802,N803
        cfg = self.config
        self._at = (key[0], -1)
        watermark = timerValues.getCurrentWatermarkInMs()
        state = StreamingAggregateProcessor._load(self, [])
        self._timer_before = self._timer(state)
        close = close_step(cfg.windowing, state, watermark)
        if cfg.emit_on_close and close.closed:
            yield from self._finals(key[0], cfg.key.serde.from_internal(key[0]), close.closed, watermark, -1, [])
        self._save(close.state)
        self._set_timer(close.state, expiredTimerInfo.getExpiryTimeInMs())


class ReplayAggregateProcessor(AggregateProcessor):
    """The test driver's batch run over the records piped since its previous run: per-record
    stream time from the plan, the cache flushed after every record, on-close candidates handed
    to the plan with their threshold. A key's state arrives as a row carrying it
    (`CARRIED_STATE`) and leaves as a `CARRY` event, which the driver keeps for its next run."""

    fields = (*OUTPUT_FIELDS, *REPLAY_FIELDS)
    #: The record cache of the key's current source position and its last row (`_on_update`).
    _cache: ChangeBuffer | None = None
    _cache_row: tuple[Any, ...] | None = None

    def _record(self, key: Any, value: Any, ts: int, headers: Any, position: int, output_position: list[int],
                final_key: str | None = None, threshold: int | None = None) -> Row:
        return self.out(key, value, ts, headers, position, output_position, final_key, None, None, threshold, None)

    def _event(self, metric: str, value: float, ts: int, position: int, final_key: str | None = None) -> Row:
        return self.out(None, None, ts, [], position, [], final_key, metric, float(value), None, None)

    def _load(self, data: list[tuple[Any, ...]]) -> KeyState:
        cols = self._cols
        self.run_stream_time = None if cols.run_stream_time is None else data[0][cols.run_stream_time]
        state = KeyState()
        carried = cols.carried_state
        while data and data[0][carried] is not None:
            state = self._decode_state(data.pop(0)[carried])
        return state

    def _save(self, state: KeyState) -> None:
        pass  # the state leaves as a CARRY event (`_end_of_key`)

    def _stream_time(self, r: tuple[Any, ...], stream_time: int, ts: int, value: Any) -> int:
        return int(r[self._cols.stream_time])

    def _stream_time_before(self, r: tuple[Any, ...], previous: int) -> int | None:
        at = self._cols.stream_time_before
        return None if at is None else int(r[at])

    def _on_update(self, kcell: Any, before: KeyState, step: RecordStep, batch: ChangeBuffer,
                   r: tuple[Any, ...]) -> Iterator[Row]:
        """Kafka's TopologyTestDriver flushes the cache once per source record: the writes of the
        key's rows of one source position go out at its last row (its output position orders
        the keys by their last write); a row that crossed a repartition is flushed alone."""
        cfg, cols = self.config, self._cols
        index = r[cols.input_index] if cfg.cogroup else 0
        if cfg.flush is not FlushPolicy.PER_RECORD or cfg.inputs[index].repartitioned:
            out = list(self._flush_cache(kcell))
            out.extend(self._flush(kcell, forwarded_updates(before, step, cfg.flush), r))
            return iter(out)
        out = list(self._flush_cache(kcell, cols.position(r)))
        if self._cache is None:
            self._cache = ChangeBuffer(w.bounds for w in before.windows)
        step.write_to(self._cache)
        self._cache_row = r
        return iter(out)

    def _flush_cache(self, kcell: Any, before_position: int | None = None) -> Iterator[Row]:
        """The pending cache's writes, unless its rows are of ``before_position``."""
        if self._cache is None or self._cols.position(self._cache_row) == before_position:
            return iter(())
        cache, row = self._cache, self._cache_row
        self._cache = self._cache_row = None
        return self._flush(kcell, cache.flush(), row)

    def _pending(self, kcell: Any, key: Any, windows: Iterable[WindowAgg]) -> Iterator[Row]:
        threshold = self.config.windowing.close_threshold
        for w in windows:
            yield self._final(kcell, key, w, -1, [], threshold(w))

    def _on_close(self, kcell: Any, key: Any, closed: tuple[WindowAgg, ...], stream_time: int,
                  r: tuple[Any, ...]) -> Iterator[Row]:
        return self._pending(kcell, key, closed)

    def _end_of_key(self, kcell: Any, key: Any, state: KeyState, batch: ChangeBuffer,
                    last: tuple[Any, ...]) -> Iterator[Row]:
        yield from self._flush_cache(kcell)
        if self.config.emit_on_close:
            yield from self._pending(kcell, key, state.open_windows())
            # what the run's later records closed is emitted (assigned) in this run: not again
            state = close_step(self.config.windowing, state, self.run_stream_time).state
        if state.windows:
            key_cell = self._key_cell(kcell, WindowAgg(0, 0, None, 0))  # the grouping key, in the output key column
            yield self.out(key_cell, None, -1, [], -1, [], None, CARRY, None, None, self._encode_state(state))
