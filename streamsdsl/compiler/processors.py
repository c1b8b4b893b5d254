"""The stateful Spark operator of every aggregation (unwindowed, session, time and sliding
windows, cogroup, a folded ``suppress``): one ``transformWithState`` processor (Row API) that
hosts `streamsdsl.semantics.kernels.AggregateKernel`, the kernel the direct engine runs.

One state row and one event-time timer per key (PLATFORM.md: the per-key Python callback is the
cost, so each key does the least Python it can), and on a streaming query one input row per key
and partition (`records_by_key`: PySpark's Row API converts every cell of every row). Each record
goes through ``kernel.process``; the host supplies the key's state, the clock and the record
cache, and turns what the kernel forwards into rows. The plan mode is the processor's class:

* `StreamingAggregateProcessor` — stream time starts at the watermark of the previous
  micro-batch and advances with the key's records; windows close on records and on event-time
  timers (``kernel.advance_to``); what a micro-batch forwards in update mode is the net change
  since the previous batch (one record cache per key and batch: Kafka Streams' record cache
  flushed at commit).
* `ReplayAggregateProcessor` (the TopologyTestDriver's batch run) — every input row carries
  every input's stream time before it (`STREAM_TIMES_BEFORE`, Kafka Streams' stream time over
  all keys, computed in the plan as a running max in pipe order); the cache is flushed once per
  source record; on-close records leave the processor with their `CLOSE_THRESHOLD` and the plan
  assigns each to the first record whose stream time passes it.

Drops and emit-final records leave the processor as metric event rows (`EVENT_METRIC`), which
the lowering counts with ``observe()`` and removes right after the operator.
"""

from __future__ import annotations

import functools
import pickle
from typing import Any, Iterable, Iterator

import attrs
from pyspark.sql import Row
from pyspark.sql.streaming.stateful_processor import StatefulProcessor, StatefulProcessorHandle

from streamsdsl.compiler.columns import CARRIED_STATE, CARRY, DROPPED, DROPPED_NULL_VALUE, EMIT_FINAL, INPUT_INDEX
from streamsdsl.compiler.columns import OPERATOR_OUTPUT_FIELDS
from streamsdsl.compiler.columns import REPLAY_FIELDS, RUN_STREAM_TIME
from streamsdsl.compiler.columns import STREAM_TIMES_BEFORE
from streamsdsl.compiler.frame import KeyCodec
from streamsdsl.compiler.operator_input import META
from streamsdsl.compiler.operator_input import operator_rows, records_by_key  # noqa: F401 - where they were before
from streamsdsl.compiler.python_ops import result_error
from streamsdsl.values.serdes import PlanSerde
from streamsdsl.errors import UserFunctionError
from streamsdsl.semantics.aggregation import AggFunctions
from streamsdsl.operators.functions import function_of
from streamsdsl.semantics.kernels import DROPPED_NULL_VALUE as NULL_VALUE
from streamsdsl.semantics.kernels import AggregateKernel, FlushPolicy, InputRecordCache, KernelStep, Out
from streamsdsl.semantics.windowing import FoldFailed, KeyState, WindowAgg, Windowing, close_step

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
    #: A cogroup: each input's aggregate processor (``agg_names``), which counts and logs the
    #: drops of its input's records.
    input_names: tuple[str, ...] = ()
    #: The name of the operator's state variable: the store it holds (what interactive queries
    #: find it by, `streamsdsl.runtime.queries`); the JVM operator's is the same.
    state_name: str = "windows"
    #: Idle close (emit on close): ms of wall clock without a record reaching the aggregation
    #: after which every key's open windows close (`IdleCloseAggregateProcessor`; ``None``:
    #: Kafka's close alone).
    idle_close_ms: int | None = None
    #: Replay with idle close: the run's wall clock (the test driver's), which its records stamp on
    #: their keys; and in an ``advance_wall_clock_time`` run, the source position and the first
    #: output position element of what the idle close emits (``idle_at``: the run's position).
    wall_clock: int | None = None
    idle_at: tuple[int, int] | None = None
    #: Streaming with idle close: the directory of the markers that tell every task when the
    #: aggregation last had a record (`streamsdsl.compiler.idle_channel`, under the checkpoint).
    idle_channel: str | None = None
    #: Replay with idle close: the aggregation's last input time, the driver's wall clock of the
    #: last run that brought it a record (-1: none; `ReplayCarry.idle_last_input_at`).
    idle_last_input_at: int = -1
    #: Streaming continuing a backfill: the aggregation's stream time at the backfill's end, below
    #: which its stream time does not start in any micro-batch (-1: none).
    stream_time_floor: int = -1

    def key_order(self, key: Any) -> str:
        """How on-close records of one stream-time step and one window order by key: the key's
        serialized bytes (Kafka's store order), as hex text."""
        data = self.key.serde.serialize(key)
        return "" if data is None else data.hex()

    def value_of(self, cell: Any, index: int) -> Any:
        """An input row's value cell as a Python value (``index``: the row's input, 0 unless a
        cogroup's `INPUT_INDEX`; a cogroup's value is in field ``v<index>`` of a struct)."""
        spec = self.inputs[index]
        return spec.value.from_internal(cell[f"v{index}"] if self.cogroup else cell)


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
        self.stream_times_before = at.get(STREAM_TIMES_BEFORE)
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
    """A Spark host of `AggregateKernel`: one ``transformWithState`` call per key, whose state
    and clock it hands the kernel, and whose forwarded records it turns into output rows.

    The kernel is the direct engine's: the same ``process`` per record, the same record cache
    (`InputRecordCache`), the same folded suppress and time-limit releases. The kernel's state
    holds just the key of the call (loaded from Spark's state store, or carried in by the test
    driver's plan); what the host supplies is the input and the stream times. A subclass says
    where stream time comes from, which records share a cache flush, and where the windows
    stream time closes go (see the module docs)."""

    fields: tuple[str, ...] = OUTPUT_FIELDS
    #: Whether the kernel keeps a stream time per input (a cogroup's inputs, as Kafka's one
    #: aggregate processor per input stream), which the host then supplies per input.
    per_input_time = False
    #: How a folded suppress releases (`AggregateKernel`'s ``suppress_release``).
    suppress_release = True

    def __init__(self, config: AggregateConfig, state_type: str) -> None:
        self.config = config
        self.state_type = state_type
        self.out_fields = list(self.fields)
        self._cols: _Columns | None = None

    def init(self, handle: StatefulProcessorHandle) -> None:
        cfg = self.config
        self.handle = handle
        self.state = handle.getValueState(cfg.state_name, self.state_type)
        #: The key cell and source position of the record being processed (for errors).
        self._at: tuple[Any, int] = (None, -1)
        #: The event-time timer the key's stored state has registered (see `_set_timer`).
        self._timer_before: int | None = None
        self.kernel = AggregateKernel(cfg.windowing, [spec.fns for spec in cfg.inputs],
                                      emit_on_close=cfg.emit_on_close,
                                      per_input_time=self.per_input_time and cfg.cogroup and not cfg.emit_on_close,
                                      flush=cfg.flush, suppress_release=self.suppress_release,
                                      idle_close_ms=cfg.idle_close_ms)

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

    def _hand_to_kernel(self, key: Any, state: KeyState) -> AggregateKernel:
        """The kernel, holding ``state`` as the one key it knows."""
        kernel = self.kernel
        kernel.states.clear()
        if state.windows:
            kernel.states[key] = state
        return kernel

    # -- output rows -------------------------------------------------------------------------
    def _key_cell(self, kcell: Any, o: Out) -> Any:
        if self.config.key.windowed:
            return {"key": kcell, "start": o.start, "end": o.end}
        return kcell

    def _record(self, key: Any, value: Any, ts: int, headers: Any, position: int, output_position: list[int],
                final_key: str | None = None, threshold: int | None = None) -> Row:
        return self.out(key, value, ts, headers, position, output_position, final_key, None, None)

    def _event(self, metric: str, value: float, ts: int, position: int, final_key: str | None = None,
               output_position: tuple[int, ...] = ()) -> Row:
        return self.out(None, None, ts, [], position, list(output_position), final_key, metric, float(value))

    def _dropped(self, step: KernelStep, ts: int, position: int, source: int) -> Row:
        """A drop event: its reason as the metric, a cogroup's input as its output position."""
        metric = DROPPED_NULL_VALUE if step.reason == NULL_VALUE else DROPPED
        return self._event(metric, step.dropped, ts, position, None, (source,) if self.config.cogroup else ())

    def _update(self, kcell: Any, o: Out, r: tuple[Any, ...], index: int) -> Row:
        """A forwarded store write (an update, or a tombstone), with the writing record's
        position, headers and output position."""
        cols = self._cols
        position = cols.position(r)
        value = None if o.value is None else self._internal(o.value, kcell, position)
        return self._record(self._key_cell(kcell, o), value, o.timestamp, cols.headers_of(r), position,
                            [*cols.output_position(r), 0, index])

    def _final(self, kcell: Any, key: Any, o: Out, position: int, ord_: list[int],
               threshold: int | None = None) -> Row:
        """A window's on-close (or released) record, after the updates of its record, in the
        window kind's final order."""
        assert o.window is not None
        order = [*ord_, 1, *self.config.windowing.final_order(o.window)]
        return self._record(self._key_cell(kcell, o), self._internal(o.value, kcell, position), o.timestamp, [],
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
        kernel = self._hand_to_kernel(k, state)
        self._start(kernel, timerValues)
        yield from self._before_records(kcell, k)
        if self.folds:
            yield from self._fold(kcell, k, data)
        else:
            yield from self._record_loop(kcell, k, data)
        yield from self._end_of_key(kcell, k)
        state = kernel.states.get(k) or KeyState()
        self._save(state)
        self._set_timer(state)

    #: Whether the host hands a key's records to the kernel together (`_fold`) where the kernel
    #: folds them (``AggregateKernel.folds``): streaming, whose records of a key in a
    #: micro-batch share one record cache and one clock.
    batched = False

    @functools.cached_property
    def folds(self) -> bool:
        return self.batched and self.kernel.folds

    def _fold(self, kcell: Any, k: Any, data: list[tuple[Any, ...]]) -> Iterator[Row]:
        """The key's records through ``kernel.process_batch``: the user's functions per record,
        the key's windows held once, the writes into the record cache (or forwarded each, with
        ``statestore.cache.max.bytes = 0``); drop events and forwarded records in record order."""
        cfg, cols, kernel = self.config, self._cols, self.kernel
        i_meta, i_val, i_index = cols.meta, cols.value, cols.input_index
        if cfg.cogroup:
            value_of = cfg.value_of
            records = [(value_of(r[i_val], r[i_index]), r[i_meta][0], r[i_index], r) for r in data]
        else:
            decode = cfg.inputs[0].value.from_internal
            records = [(decode(r[i_val]), r[i_meta][0], 0, r) for r in data]
        self._at, self._cache_row = (kcell, cols.position(data[-1])), data[-1]
        try:
            step = kernel.process_batch(k, records, cache=self._cache)
        except FoldFailed as failed:
            exc, r = failed.__cause__, data[failed.index]
            assert exc is not None
            source = records[failed.index][2]
            raise UserFunctionError.of(cfg.node, function_of(exc, kernel.fns[source], cfg.function_names), exc, k,
                                       cols.position(r)).in_worker() from exc
        outputs, at = step.outputs, 0
        for i, n, reason in step.dropped:
            while at < len(outputs) and outputs[at][0] < i:
                at = yield from self._forward_batch(kcell, k, data, outputs, at)
            r = data[i]
            yield self._dropped(KernelStep(dropped=n, reason=reason), r[i_meta][0], cols.position(r), records[i][2])
        while at < len(outputs):
            at = yield from self._forward_batch(kcell, k, data, outputs, at)

    def _forward_batch(self, kcell: Any, k: Any, data: list[tuple[Any, ...]], outputs: tuple[tuple[int, Out], ...],
                       at: int) -> Iterator[Row]:
        """The forwarded records of one record (``outputs[at]``'s); returns where the next record's start."""
        i, index = outputs[at][0], 0
        r = data[i]
        while at < len(outputs) and outputs[at][0] == i:
            yield self._update(kcell, outputs[at][1], r, index)
            at, index = at + 1, index + 1
        return at

    def _record_loop(self, kcell: Any, k: Any, data: list[tuple[Any, ...]]) -> Iterator[Row]:
        """The key's records through ``kernel.process`` one by one."""
        cfg, cols, kernel = self.config, self._cols, self.kernel
        i_meta, i_val, i_index = cols.meta, cols.value, cols.input_index
        for r in data:
            ts, position = r[i_meta][:2]
            self._at = (kcell, position)
            source = r[i_index] if cfg.cogroup else 0
            value = cfg.value_of(r[i_val], source)
            flushed, cache = self._cache_for(kcell, k, r, source)
            yield from flushed
            try:
                step = kernel.process(k, value, ts, source, cache=cache, context=r)
            except Exception as exc:  # noqa: BLE001 - re-raised with the processor and the record
                raise UserFunctionError.of(cfg.node, function_of(exc, kernel.fns[source], cfg.function_names), exc, k,
                                           position).in_worker() from exc
            if step.dropped:
                yield self._dropped(step, ts, position, source)
            yield from self._forward(kcell, k, step, r)

    def _start(self, kernel: AggregateKernel, timer_values: Any) -> None:
        """Set the kernel's clock for the key's rows."""
        raise NotImplementedError

    def _before_records(self, kcell: Any, key: Any) -> Iterator[Row]:
        """What the key emits before its rows, once its clock is set (`IdleCloseAggregateProcessor`:
        the idle close of an aggregation that was idle as of the micro-batch)."""
        return iter(())

    #: The record cache the current rows share (`_cache_for`).
    _cache: InputRecordCache | None = None

    def _cache_for(self, kcell: Any, key: Any, r: tuple[Any, ...],
                   source: int) -> tuple[Iterable[Row], InputRecordCache | None]:
        """Set the kernel's clock for row ``r`` and say which record cache its writes go to:
        what an earlier cache forwards first (its rows), then the cache (``None``: none, the
        kernel forwards at once)."""
        raise NotImplementedError

    def _forward(self, kcell: Any, key: Any, step: KernelStep, r: tuple[Any, ...]) -> Iterator[Row]:
        """Output rows of what the kernel forwarded for row ``r``."""
        raise NotImplementedError

    def _end_of_key(self, kcell: Any, key: Any) -> Iterator[Row]:
        raise NotImplementedError

    def _flush_cache(self, kcell: Any, key: Any) -> Iterator[Row]:
        """What the pending record cache forwards (each window with its last writing row), or
        what a folded suppress releases of it (with the cache's last row)."""
        cache, self._cache = self._cache, None
        if cache is None:
            return
        last, releases = self._cache_row, bool(cache.finals)
        flushed = self.kernel.flush_cache(cache)
        if releases:  # a folded suppress's releases of what the cache forwards
            yield from self._releases(kcell, key, [o for o, _ in flushed], cache.final_latencies, last)
            return
        for i, (o, r) in enumerate(flushed):
            yield self._update(kcell, o, r, i)

    def _releases(self, kcell: Any, key: Any, outputs: Iterable[Out], latencies: Iterable[int],
                  r: tuple[Any, ...]) -> Iterator[Row]:
        raise NotImplementedError

    _cache_row: tuple[Any, ...] | None = None

    def _timer(self, state: KeyState) -> int | None:
        """The one event-time timer a key with this stored state has registered: the first
        stream time past its earliest threshold (``None``: no timer)."""
        return None

    def _set_timer(self, state: KeyState, expired: int | None = None) -> None:
        pass

    def close(self) -> None:
        pass


class StreamingAggregateProcessor(AggregateProcessor):
    """Streaming: the kernel's stream time starts at the watermark of the previous micro-batch
    and advances with the key's records; one record cache per key and micro-batch (what a batch
    forwards in update mode is the net change since the previous batch: Kafka's cache flushed at
    commit); windows close on records and on event-time timers, their records leave at once with
    one emit-final event each. A folded suppress releases a window when stream time closes it
    (the kernel's ``suppress_release=False``: a watermark cannot follow Kafka's suppress node's
    own stream time record by record)."""

    suppress_release = False
    batched = True

    def _start(self, kernel: AggregateKernel, timer_values: Any) -> None:
        watermark = max(timer_values.getCurrentWatermarkInMs(), self.config.stream_time_floor)
        kernel.stream_times = [watermark] * len(kernel.stream_times)
        self._cache = InputRecordCache()

    def handleInitialState(self, key: Any, initialState: Row, timerValues: Any) -> None:  # noqa: N802,N803
        """A continued backfill's state of the key (its windows as the replay carries them):
        stored as this operator stores what it aggregated itself, with the key's timer, so that
        its open windows go on and close when stream time passes them."""
        kcell = key[0]
        self._at = (kcell, -1)
        state = self._decode_state([c for c in initialState["state"]
                                    if (c["start"] if isinstance(c, dict) else c[0]) != IDLE_MARK])
        self._timer_before = None
        self._save(state)
        self._set_timer(state)

    def _cache_for(self, kcell: Any, key: Any, r: tuple[Any, ...],
                   source: int) -> tuple[Iterable[Row], InputRecordCache | None]:
        self._cache_row = r
        return (), self._cache

    def _forward(self, kcell: Any, key: Any, step: KernelStep, r: tuple[Any, ...]) -> Iterator[Row]:
        finals = iter(step.final_latencies)
        for i, o in enumerate(step.outputs):
            if o.final:
                yield from self._emitted(kcell, key, o, next(finals), r)
            else:
                yield self._update(kcell, o, r, i)

    def _emitted(self, kcell: Any, key: Any, o: Out, latency: int, r: tuple[Any, ...] | None) -> Iterator[Row]:
        """An on-close record plus its emit-final event (latency: stream time past the close)."""
        cols = self._cols
        position, ord_ = (cols.position(r), cols.output_position(r)) if r is not None else (-1, [])
        yield self._final(kcell, key, o, position, ord_)
        yield self._event(EMIT_FINAL, latency, o.timestamp, position, self.config.key_order(key))

    def _releases(self, kcell: Any, key: Any, outputs: Iterable[Out], latencies: Iterable[int],
                  r: tuple[Any, ...]) -> Iterator[Row]:
        for o, latency in zip(outputs, latencies):
            yield from self._emitted(kcell, key, o, latency, r)

    def _end_of_key(self, kcell: Any, key: Any) -> Iterator[Row]:
        yield from self._flush_cache(kcell, key)

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
        kcell = key[0]
        k = cfg.key.serde.from_internal(kcell)
        self._at = (kcell, -1)
        state = StreamingAggregateProcessor._load(self, [])
        self._timer_before = self._timer(state)
        kernel = self._hand_to_kernel(k, state)
        step = kernel.advance_to(max(timerValues.getCurrentWatermarkInMs(), cfg.stream_time_floor))
        for o, latency in zip(step.outputs, step.final_latencies):
            yield from self._emitted(kcell, k, o, latency, None)
        state = kernel.states.get(k) or KeyState()
        self._save(state)
        self._set_timer(state, expiredTimerInfo.getExpiryTimeInMs())


class ReplayAggregateProcessor(AggregateProcessor):
    """The test driver's batch run over the records piped since its previous run. The plan
    supplies each row's clock: every input's stream time before it, over all keys
    (`STREAM_TIMES_BEFORE`); the kernel derives the rest (stream time after the record, a
    cogroup's store and expiry times). The record cache is flushed once per source record (a
    row that crossed a repartition alone); windows that stream time closes leave as pending
    on-close records with their `CLOSE_THRESHOLD`, and the plan gives each to the first record
    whose stream time passes it. A key's state arrives as a row carrying it (`CARRIED_STATE`)
    and leaves as a `CARRY` event, which the driver keeps for its next run."""

    fields = (*OUTPUT_FIELDS, *REPLAY_FIELDS)
    per_input_time = True

    def _record(self, key: Any, value: Any, ts: int, headers: Any, position: int, output_position: list[int],
                final_key: str | None = None, threshold: int | None = None) -> Row:
        return self.out(key, value, ts, headers, position, output_position, final_key, None, None, threshold, None)

    def _event(self, metric: str, value: float, ts: int, position: int, final_key: str | None = None,
               output_position: tuple[int, ...] = ()) -> Row:
        return self.out(None, None, ts, [], position, list(output_position), final_key, metric, float(value), None,
                        None)

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

    def _cache_for(self, kcell: Any, key: Any, r: tuple[Any, ...],
                   source: int) -> tuple[Iterable[Row], InputRecordCache | None]:
        """Kafka's TopologyTestDriver flushes the cache once per source record: the key's rows of
        one source position share one cache (flushed before the next position's first row); a
        row that crossed a repartition, or any row without a cache, is flushed alone."""
        cfg, cols = self.config, self._cols
        self.kernel.stream_times = list(r[cols.stream_times_before])
        if cfg.flush is not FlushPolicy.PER_RECORD or cfg.inputs[source].repartitioned:
            return list(self._flush_cache(kcell, key)), None
        if self._cache is not None and cols.position(self._cache_row) == cols.position(r):
            self._cache_row = r
            return (), self._cache
        flushed = list(self._flush_cache(kcell, key))
        self._cache, self._cache_row = InputRecordCache(), r
        return flushed, self._cache

    def _forward(self, kcell: Any, key: Any, step: KernelStep, r: tuple[Any, ...]) -> Iterator[Row]:
        if any(o.final for o in step.outputs):
            yield from self._releases(kcell, key, step.outputs, step.final_latencies, r)
            return
        for i, o in enumerate(step.outputs):
            yield self._update(kcell, o, r, i)

    def _releases(self, kcell: Any, key: Any, outputs: Iterable[Out], latencies: Iterable[int],
                  r: tuple[Any, ...]) -> Iterator[Row]:
        """Windows stream time closed leave pending, with their threshold; what a folded suppress
        releases at once (a window the record wrote again after its release) comes out with the
        record, after them, with its emit-final event."""
        cols = self._cols
        threshold = self.config.windowing.close_threshold
        immediate = 0
        for o, latency in zip(outputs, latencies):
            assert o.window is not None
            if not o.immediate:
                yield self._final(kcell, key, o, -1, [], threshold(o.window))
                continue
            position = cols.position(r)
            yield self._record(self._key_cell(kcell, o), self._internal(o.value, kcell, position), o.timestamp, [],
                               position, [*cols.output_position(r), 2, immediate])
            yield self._event(EMIT_FINAL, latency, o.timestamp, position, self.config.key_order(key))
            immediate += 1

    def _end_of_key(self, kcell: Any, key: Any) -> Iterator[Row]:
        yield from self._flush_cache(kcell, key)
        cfg = self.config
        if cfg.idle_at is not None and cfg.wall_clock is not None:
            # the driver's advance_wall_clock_time: the key's open windows close if the aggregation
            # is idle; they come out at the advance's position, in final order (the plan adds the
            # key's bytes)
            position, order = cfg.idle_at
            if self.run_stream_time is not None:  # the operator's stream time (the kernel's is the last row's)
                self.kernel.stream_times = [self.run_stream_time] * len(self.kernel.stream_times)
            step = self.kernel.close_idle(cfg.wall_clock, last_input_at=cfg.idle_last_input_at)
            for o, latency in zip(step.outputs, step.final_latencies):
                yield self._final(kcell, key, o, position, [order])
                yield self._event(EMIT_FINAL, latency, o.timestamp, position, cfg.key_order(key), (order,))
        state = self.kernel.states.get(key) or KeyState()
        if cfg.emit_on_close:
            threshold = cfg.windowing.close_threshold
            for w in state.open_windows():
                o = self.kernel.out(key, w.bounds, w, final=True)
                yield self._final(kcell, key, o, -1, [], threshold(w))
            # what the run's later records closed is emitted (assigned) in this run: not again
            state = close_step(cfg.windowing, state, self.run_stream_time).state
            self.kernel.states[key] = state
        if state.windows or state.floor >= 0:
            key_cell = kcell if not cfg.key.windowed else {"key": kcell, "start": 0, "end": 0}
            yield self.out(key_cell, None, -1, [], -1, [], None, CARRY, None, None, self._encode_state(state))

    # -- idle close: the key's floor rides in the carried state as one more element, marked by a
    # start no window has (`IDLE_MARK`); the aggregation's last input time is the driver's
    # (`AggregateConfig.idle_last_input_at`)
    def _start(self, kernel: AggregateKernel, timer_values: Any) -> None:
        self._cache = self._cache_row = None
        if self.config.wall_clock is not None:
            kernel.wall_clock = self.config.wall_clock

    def _decode_state(self, cells: Iterable[Any]) -> KeyState:
        cells = list(cells)
        idle = [c for c in cells if (c["start"] if isinstance(c, dict) else c[0]) == IDLE_MARK]
        state = super()._decode_state([c for c in cells if (c["start"] if isinstance(c, dict) else c[0]) != IDLE_MARK])
        if not idle:
            return state
        mark = idle[0]
        return attrs.evolve(state, floor=mark["end"] if isinstance(mark, dict) else mark[1])

    def _encode_state(self, state: KeyState) -> list[tuple[Any, ...]]:
        cells = super()._encode_state(state)
        if self.config.idle_close_ms is not None and state.floor >= 0:
            cells.append((IDLE_MARK, state.floor, None, -1, False))
        return cells

    def _hand_to_kernel(self, key: Any, state: KeyState) -> AggregateKernel:
        kernel = super()._hand_to_kernel(key, state)
        if not state.windows and state.floor >= 0:
            kernel.states[key] = state
        return kernel


#: The start of the carried-state element holding an idle-close key's floor (``end``): no window
#: starts before 0.
IDLE_MARK = -2
