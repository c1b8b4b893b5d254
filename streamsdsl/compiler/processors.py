"""Stateful Spark operators: ``transformWithState`` processors (Row API) around the semantics core.

One state row and one event-time timer per key (PLATFORM.md: the per-key Python callback is the
cost, so each key does the least Python it can). The processors run in two time modes:

* **streaming** — stream time is ``max(watermark of the previous micro-batch, the key's record
  timestamps so far in this batch)``; sessions close on event-time timers; what a micro-batch
  forwards in update mode is the net change since the previous batch (Kafka Streams' cache
  flushed at commit).
* **replay** (the TopologyTestDriver's batch run) — every input row carries ``_st``, Kafka
  Streams' stream time after that record, computed in the plan as a running max in pipe
  order; the cache is flushed after every record; on-close emissions leave the processor with
  their close threshold ``_thr`` and the plan assigns each to the first record whose stream
  time passes it.

Output rows carry ``_ctl`` metric events (dropped records, emit-final latency) that the sink
turns into metrics.
"""

from __future__ import annotations

from typing import Any, Iterator

import attrs
from pyspark.sql import Row
from pyspark.sql.streaming.stateful_processor import StatefulProcessor, StatefulProcessorHandle

from streamsdsl.compiler.frame import KeyCodec
from streamsdsl.semantics.aggregation import AggFunctions
from streamsdsl.semantics.changes import ChangeBuffer
from streamsdsl.semantics.session import Session, close_threshold, closed_sessions, session_step
from streamsdsl.semantics.timewindow import CloseStep, WindowAgg, Windowing, close_step
from streamsdsl.dsl.serdes import Serde

DROPPED = "dropped-records-total"
#: A native aggregation's running count of the records it dropped (since its state began);
#: the runtime adds the increase to ``dropped-records-total``.
DROPPED_RUNNING_TOTAL = "dropped-records-running-total"
EMIT_FINAL_LATENCY = "emit-final-latency"


def _ctl(node: str, metric: str, value: float = 1.0) -> dict[str, Any]:
    return {"node": node, "metric": metric, "value": float(value), "error": None, "topic": None,
            "partition": None, "offset": None, "raw_key": None, "raw_value": None}


@attrs.frozen
class AggregateConfig:
    """Everything a processor needs on the executors (pickled with it)."""

    node: str
    key: KeyCodec
    value_in: Serde
    value_out: Serde
    fns: AggFunctions
    gap: int = 0
    grace: int = 0
    emit_on_close: bool = False
    #: Cogroup: per input stream (index ``_src``), its aggregation functions and value serde;
    #: the row's ``value`` is then a struct with one field ``v<i>`` per input.
    source_fns: tuple[AggFunctions, ...] = ()
    source_values: tuple[Serde, ...] = ()

    def fns_for(self, row: Any) -> AggFunctions:
        """The aggregation functions of the input stream the row came from."""
        return self.source_fns[row["_src"]] if self.source_fns else self.fns

    def raw_value(self, row: Any) -> Any:
        """The row's value cell (for cogroup: the field of its input stream)."""
        if self.source_values:
            return row["value"][f"v{row['_src']}"]
        return row["value"]

    def decode_value(self, row: Any) -> Any:
        """The row's value as a Python value."""
        if self.source_values:
            return self.source_values[row["_src"]].from_internal(self.raw_value(row))
        return self.value_in.from_internal(row["value"])


def _out_row(
    key: Any, value: Any, ts: int, headers: Any, seq: int, ord_: list[int], okey: str | None = None,
    ctl: dict[str, Any] | None = None, thr: int | None = None,
) -> Row:
    return Row(key=key, value=value, timestamp=ts, headers=headers, _seq=seq, _ord=ord_, _okey=okey, _ctl=ctl, _thr=thr)


def _ctl_row(r: Any, node: str, metric: str, value: float = 1.0, key: Any = None) -> Row:
    return _out_row(key, None, r["timestamp"] if r is not None else -1, [], r["_seq"] if r is not None else -1,
                    [], None, _ctl(node, metric, value))


def _split(rows: Iterator[Row]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The key's data rows in source order and its control rows, each as a plain dict (reading
    a ``Row`` field by name is a Python-level list search; this is the hottest loop we have)."""
    data: list[dict[str, Any]] = []
    ctl: list[dict[str, Any]] = []
    fields: list[str] | None = None
    for r in rows:
        if fields is None:
            fields = r.__fields__
        d = dict(zip(fields, r))
        (ctl if d.get("_ctl") is not None else data).append(d)
    data.sort(key=lambda r: (r["_seq"], r["_ord"] or []))
    return data, ctl


def _admit(key: Any, rows: Iterator[Row], node: str, data: list[Row]) -> Iterator[Row]:
    """Common start of every processor callback: forward upstream control rows, drop (and
    count) the rows of a null key, and fill ``data`` with the key's data rows in source order."""
    rows_data, ctl = _split(rows)
    yield from _forward_ctl(ctl)
    if key[0] is None:
        for r in rows_data:
            yield _ctl_row(r, node, DROPPED)
        return
    data.extend(rows_data)


def _forward_ctl(ctl: list[Row]) -> Iterator[Row]:
    for r in ctl:
        yield _out_row(None, None, r["timestamp"], r["headers"], r["_seq"], r["_ord"] or [], r["_okey"], r["_ctl"].asDict())


class _WindowedProcessor(StatefulProcessor):
    """What the windowed processors share: one state row per key holding the key's windows,
    one event-time timer per key (the earliest close), and the shape of on-close output.

    A subclass says how a stored window is read (``_bounds``), when it closes
    (``_threshold``: closed at the first stream time greater than it) and where its final
    record sorts (``_final_order``)."""

    state_name = "windows"

    def __init__(self, config: AggregateConfig, state_schema: str) -> None:
        self.config = config
        self.state_schema = state_schema

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.handle = handle
        self.state = handle.getValueState(self.state_name, self.state_schema)

    def _bounds(self, w: Any) -> tuple[int, int]:
        raise NotImplementedError

    def _threshold(self, w: Any) -> int:
        raise NotImplementedError

    def _final_order(self, w: Any) -> list[int]:
        raise NotImplementedError

    def _set_timer(self, thresholds: list[int]) -> None:
        """One timer per key: at the first stream time past the earliest threshold."""
        for t in self.handle.listTimers():
            self.handle.deleteTimer(t)
        if thresholds:
            self.handle.registerTimer(min(thresholds) + 1)

    def _windowed(self, kcell: Any, start: int, end: int) -> dict[str, Any]:
        return {"key": kcell, "start": start, "end": end}

    def _final_rows(self, kcell: Any, key: Any, closed: list[Any], stream_time: int, seq: int,
                    ord_: list[int] | None = None) -> Iterator[Row]:
        """Streaming: the on-close records of ``closed`` plus their emit-final latency events."""
        cfg = self.config
        for w in closed:
            start, end = self._bounds(w)
            order = [*(ord_ or []), 1, *self._final_order(w)]
            yield _out_row(self._windowed(kcell, start, end), cfg.value_out.to_internal(w.agg), self._final_ts(w), [],
                           seq, order, str(key))
            yield _out_row(None, None, self._final_ts(w), [], seq, order, str(key),
                           _ctl(cfg.node, EMIT_FINAL_LATENCY, stream_time - self._threshold(w) - 1))

    def _pending_finals(self, kcell: Any, key: Any, windows: list[Any]) -> Iterator[Row]:
        """Replay: on-close candidates with their threshold ``_thr``; the plan assigns each to
        the first record whose stream time passes it."""
        cfg = self.config
        for w in windows:
            start, end = self._bounds(w)
            yield _out_row(self._windowed(kcell, start, end), cfg.value_out.to_internal(w.agg), self._final_ts(w), [],
                           -1, [1, *self._final_order(w)], str(key), None, self._threshold(w))

    def _final_ts(self, w: Any) -> int:
        return self._bounds(w)[1]

    def _finish(self, kcell: Any, key: Any, pending: list[Any], batch_buf: ChangeBuffer, last: Row,
                replay: bool) -> Iterator[Row]:
        """End of a key's rows: flush the batch's net change (streaming, on update) or hand the
        windows not yet final to on-close assignment (replay). The caller saves state."""
        cfg = self.config
        if not cfg.emit_on_close and not replay:
            yield from self._flush(kcell, batch_buf, last)
        if replay and cfg.emit_on_close:
            yield from self._pending_finals(kcell, key, pending)

    def _emit_expired(self, kcell: Any, closed: list[Any], watermark: int) -> Iterator[Row]:
        """A timer fired: the on-close records of the windows the watermark closed."""
        if closed and self.config.emit_on_close:
            yield from self._final_rows(kcell, self.config.key.serde.from_internal(kcell), closed, watermark, -1)

    def _emit_closed(self, kcell: Any, key: Any, closed: list[Any], stream_time: int, r: Row,
                     replay: bool) -> Iterator[Row]:
        """On close: the windows that record ``r`` closed (replay: as candidates for assignment)."""
        if not closed or not self.config.emit_on_close:
            return
        if replay:
            yield from self._pending_finals(kcell, key, closed)
        else:
            yield from self._final_rows(kcell, key, closed, stream_time, r["_seq"], r["_ord"] or [])

    def _flush(self, kcell: Any, buf: ChangeBuffer, r: Row) -> Iterator[Row]:
        """Forward what the record cache holds: the latest value per window, tombstones."""
        cfg = self.config
        for i, ((start, end), w) in enumerate(buf.flush()):
            value = None if w is None else cfg.value_out.to_internal(w.agg)
            ts = end if w is None else self._update_ts(w)
            yield _out_row(self._windowed(kcell, start, end), value, ts, r["headers"], r["_seq"], [*(r["_ord"] or []), 0, i])

    def _update_ts(self, w: Any) -> int:
        return self._bounds(w)[1]

    def close(self) -> None:
        pass


class SessionAggregateProcessor(_WindowedProcessor):
    """Session-windowed aggregation (KIP-94) with emit on update or on close (KIP-825)."""

    state_name = "sessions"

    def _bounds(self, w: Session) -> tuple[int, int]:
        return w.start, w.end

    def _threshold(self, w: Session) -> int:
        return close_threshold(w, self.config.gap, self.config.grace)

    def _final_order(self, w: Session) -> list[int]:
        return [w.end, w.start]

    # -- state ------------------------------------------------------------------------------
    def _load(self) -> list[Session]:
        if not self.state.exists():
            return []
        (cells,) = self.state.get()
        vs = self.config.value_out
        return [Session(c["end"], c["start"], vs.from_internal(c["agg"])) for c in cells]

    def _save(self, sessions: list[Session]) -> None:
        if not sessions:
            self.state.clear()
            return
        vs = self.config.value_out
        self.state.update(([(s.start, s.end, vs.to_internal(s.agg)) for s in sessions],))

    # -- callbacks ----------------------------------------------------------------------------
    def handleInputRows(self, key: Any, rows: Iterator[Row], timerValues: Any) -> Iterator[Row]:  # noqa: N802,N803
        cfg = self.config
        data: list[Row] = []
        yield from _admit(key, rows, cfg.node, data)
        if not data:
            return
        kcell = key[0]
        k = cfg.key.serde.from_internal(kcell)
        replay = data[0]["_st"] is not None
        stream_time = timerValues.getCurrentWatermarkInMs()
        sessions = self._load()
        batch_buf = ChangeBuffer(s.window for s in sessions)
        for r in data:
            ts = r["timestamp"]
            stream_time = r["_st"] if replay else max(stream_time, ts)
            before = sessions
            step = session_step(sessions, k, cfg.decode_value(r), ts, stream_time,
                                cfg.gap, cfg.grace, cfg.fns_for(r))
            if step.dropped:
                yield _ctl_row(r, cfg.node, DROPPED)
            else:
                sessions = list(step.sessions)
                if not cfg.emit_on_close:
                    buf = ChangeBuffer(s.window for s in before) if replay else batch_buf
                    for s in step.deleted:
                        buf.delete(s.window)
                    assert step.put is not None
                    buf.put(step.put.window, step.put)
                    if replay:
                        yield from self._flush(kcell, buf, r)
            closed, sessions = closed_sessions(sessions, stream_time, cfg.gap, cfg.grace)
            yield from self._emit_closed(kcell, k, closed, stream_time, r, replay)
        yield from self._finish(kcell, k, sessions, batch_buf, data[-1], replay)
        self._save(sessions)
        if not replay:
            self._set_timer([self._threshold(w) for w in sessions])

    def handleExpiredTimer(self, key: Any, timerValues: Any, expiredTimerInfo: Any) -> Iterator[Row]:  # noqa: N802,N803
        cfg = self.config
        watermark = timerValues.getCurrentWatermarkInMs()
        closed, still_open = closed_sessions(self._load(), watermark, cfg.gap, cfg.grace)
        yield from self._emit_expired(key[0], closed, watermark)
        self._save(still_open)
        self._set_timer([self._threshold(w) for w in still_open])


class TimeWindowAggregateProcessor(_WindowedProcessor):
    """Tumbling, hopping (KStreamWindowAggregate) and sliding (KStreamSlidingWindowAggregate)
    windowed aggregation with emit on update or on close; the windowing strategy (a semantics
    core object) decides what each record does. The state row holds the key's windows and,
    per window, whether it is final already (sliding windows stay readable after closing)."""

    def __init__(self, config: AggregateConfig, state_schema: str, windowing: Windowing) -> None:
        super().__init__(config, state_schema)
        self.windowing = windowing

    def _bounds(self, w: WindowAgg) -> tuple[int, int]:
        return w.start, w.end

    def _threshold(self, w: WindowAgg) -> int:
        return self.windowing.close_threshold(w)

    def _final_order(self, w: WindowAgg) -> list[int]:
        return [w.start]

    def _final_ts(self, w: WindowAgg) -> int:
        return w.ts

    def _update_ts(self, w: WindowAgg) -> int:
        return w.ts

    def _load(self) -> tuple[list[WindowAgg], frozenset[int]]:
        if not self.state.exists():
            return [], frozenset()
        (cells,) = self.state.get()
        vs = self.config.value_out
        windows = [WindowAgg(c["start"], c["end"], vs.from_internal(c["agg"]), c["ts"]) for c in cells]
        return windows, frozenset(c["start"] for c in cells if c["fin"])

    def _store(self, step: CloseStep, replay: bool) -> None:
        if not step.kept:
            self.state.clear()
        else:
            vs = self.config.value_out
            self.state.update(([(w.start, w.end, vs.to_internal(w.agg), w.ts, w.start in step.finals)
                                for w in step.kept],))
        if not replay:
            self._set_timer(step.timer_thresholds(self.windowing))

    def handleInputRows(self, key: Any, rows: Iterator[Row], timerValues: Any) -> Iterator[Row]:  # noqa: N802,N803
        cfg = self.config
        data: list[Row] = []
        yield from _admit(key, rows, cfg.node, data)
        if not data:
            return
        kcell = key[0]
        k = cfg.key.serde.from_internal(kcell)
        replay = data[0]["_st"] is not None
        stream_time = timerValues.getCurrentWatermarkInMs()
        windows, finals = self._load()
        state = CloseStep((), tuple(windows), finals)
        batch_buf = ChangeBuffer()
        for r in data:
            ts = r["timestamp"]
            value = cfg.decode_value(r)
            if replay:
                stream_time = r["_st"]
            elif value is not None or not self.windowing.drops_null_values:
                stream_time = max(stream_time, ts)
            step = self.windowing.step(state.kept, k, value, ts, stream_time, cfg.fns_for(r))
            if step.dropped:
                yield _ctl_row(r, cfg.node, DROPPED, step.dropped)
            if not cfg.emit_on_close and step.puts:
                buf = ChangeBuffer() if replay else batch_buf
                for w in step.puts:
                    buf.put((w.start, w.end), w)
                if replay:
                    yield from self._flush(kcell, buf, r)
            state = close_step(self.windowing, step.windows, stream_time, state.finals)
            yield from self._emit_closed(kcell, k, list(state.closed), stream_time, r, replay)
        yield from self._finish(kcell, k, [w for w in state.kept if w.start not in state.finals], batch_buf,
                                data[-1], replay)
        self._store(state, replay)

    def handleExpiredTimer(self, key: Any, timerValues: Any, expiredTimerInfo: Any) -> Iterator[Row]:  # noqa: N802,N803
        watermark = timerValues.getCurrentWatermarkInMs()
        windows, finals = self._load()
        state = close_step(self.windowing, windows, watermark, finals)
        yield from self._emit_expired(key[0], list(state.closed), watermark)
        self._store(state, False)


class TableAggregateProcessor(StatefulProcessor):
    """Unwindowed aggregation with user Python functions (Kafka Streams' KStreamAggregate)."""

    def __init__(self, config: AggregateConfig, state_schema: str) -> None:
        self.config = config
        self.state_schema = state_schema

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.handle = handle
        self.state = handle.getValueState("aggregate", self.state_schema)

    def handleInputRows(self, key: Any, rows: Iterator[Row], timerValues: Any) -> Iterator[Row]:  # noqa: N802,N803
        cfg = self.config
        data: list[Row] = []
        yield from _admit(key, rows, cfg.node, data)
        if not data:
            return
        kcell = key[0]
        k = cfg.key.serde.from_internal(kcell)
        replay = data[0]["_st"] is not None
        exists = self.state.exists()
        agg, agg_ts = (None, None)
        if exists:
            cell, agg_ts = self.state.get()
            agg = cfg.value_out.from_internal(cell)
        last: Row | None = None
        for r in data:
            if cfg.raw_value(r) is None:
                yield _ctl_row(r, cfg.node, DROPPED)
                continue
            fns = cfg.fns_for(r)
            if agg_ts is None:
                agg = fns.initializer()
            agg = fns.aggregator(k, cfg.decode_value(r), agg)
            agg_ts = r["timestamp"] if agg_ts is None else max(agg_ts, r["timestamp"])
            last = r
            if replay:
                yield _out_row(kcell, cfg.value_out.to_internal(agg), agg_ts, r["headers"], r["_seq"], [*(r["_ord"] or []), 0, 0])
        if last is None:
            return
        if not replay:
            yield _out_row(kcell, cfg.value_out.to_internal(agg), agg_ts, last["headers"], last["_seq"], [*(last["_ord"] or []), 0, 0])
        self.state.update((cfg.value_out.to_internal(agg), agg_ts))

    def close(self) -> None:
        pass
