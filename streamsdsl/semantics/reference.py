"""Reference runs of whole inputs through the semantics core, as Kafka Streams'
TopologyTestDriver would process them: one partition, records in order, stream time advancing
per record, the record cache flushed after every record.

The property tests compare the compiled Spark plan against these functions.
"""

from __future__ import annotations

from typing import Any, Iterable

import attrs

from streamsdsl.semantics.aggregation import AggFunctions
from streamsdsl.semantics.changes import ChangeBuffer
from streamsdsl.semantics.session import Session, close_threshold, closed_sessions, session_step
from streamsdsl.semantics.timewindow import CloseStep, Windowing, close_step


@attrs.frozen
class Out:
    """One forwarded record: windowed key, value (``None`` = tombstone), timestamp."""

    key: Any
    start: int | None
    end: int | None
    value: Any
    timestamp: int


@attrs.frozen
class ReferenceResult:
    outputs: list[Out]
    dropped: int
    emitted_final: int


def session_aggregate_reference(
    records: Iterable[tuple[Any, Any, int]],
    gap: int,
    grace: int,
    fns: AggFunctions,
    *,
    emit_on_close: bool = False,
) -> ReferenceResult:
    """Run ``(key, value, timestamp)`` records through a session-windowed aggregation."""
    state: dict[Any, list[Session]] = {}
    stream_time = -1
    dropped = 0
    emitted = 0
    outputs: list[Out] = []
    for key, value, ts in records:
        if key is None:
            dropped += 1
            continue
        stream_time = max(stream_time, ts)
        sessions = state.get(key, [])
        step = session_step(sessions, key, value, ts, stream_time, gap, grace, fns)
        if step.dropped:
            dropped += 1
        else:
            state[key] = list(step.sessions)
            if not emit_on_close:
                buf = ChangeBuffer(s.window for s in sessions)
                for s in step.deleted:
                    buf.delete(s.window)
                assert step.put is not None
                buf.put(step.put.window, step.put)
                for (start, end), s in buf.flush():
                    outputs.append(Out(key, start, end, None if s is None else s.agg, end))
        # close: every key's sessions that ended before close time, ordered (end, start, key)
        closing: list[tuple[int, int, Any, Session]] = []
        for k in list(state):
            closed, still_open = closed_sessions(state[k], stream_time, gap, grace)
            state[k] = still_open
            closing.extend((s.end, s.start, k, s) for s in closed)
        if emit_on_close:
            closing.sort(key=lambda t: (t[0], t[1], _key_order(t[2])))
            for _, _, k, s in closing:
                assert close_threshold(s, gap, grace) < stream_time
                outputs.append(Out(k, s.start, s.end, s.agg, s.end))
                emitted += 1
    return ReferenceResult(outputs, dropped, emitted)


def time_window_reference(
    records: Iterable[tuple[Any, Any, int]],
    windowing: Windowing,
    fns: AggFunctions,
    *,
    emit_on_close: bool = False,
) -> ReferenceResult:
    """Run ``(key, value, timestamp)`` records through a time-windowed (tumbling, hopping or
    sliding) aggregation: null keys dropped; on update every store write is forwarded per record
    (last value per window, in write order); on close every window is forwarded once, when
    stream time closes it, ordered (start, key), with ts = its max record timestamp."""
    state: dict[Any, CloseStep] = {}
    stream_time = -1
    dropped = 0
    emitted = 0
    outputs: list[Out] = []
    for key, value, ts in records:
        if key is None:
            dropped += 1
            continue
        if value is not None or not windowing.drops_null_values:
            stream_time = max(stream_time, ts)
        current = state.get(key, CloseStep((), (), frozenset()))
        step = windowing.step(current.kept, key, value, ts, stream_time, fns)
        dropped += step.dropped
        state[key] = CloseStep((), step.windows, current.finals)
        if not emit_on_close:
            buf = ChangeBuffer()
            for w in step.puts:
                buf.put((w.start, w.end), w)
            for (start, end), w in buf.flush():
                outputs.append(Out(key, start, end, w.agg, w.ts))
        closing = []
        for k in list(state):
            state[k] = close_step(windowing, state[k].kept, stream_time, state[k].finals)
            closing.extend((w.start, _key_order(k), k, w) for w in state[k].closed)
        if emit_on_close:
            for _, _, k, w in sorted(closing, key=lambda t: (t[0], t[1])):
                outputs.append(Out(k, w.start, w.end, w.agg, w.ts))
                emitted += 1
    return ReferenceResult(outputs, dropped, emitted)


def _key_order(key: Any) -> str:
    return str(key)


def aggregate_reference(records: Iterable[tuple[Any, Any, int]], fns: AggFunctions) -> ReferenceResult:
    """Unwindowed aggregation: null key or value dropped; ts = max(record ts, previous ts)."""
    aggs: dict[Any, tuple[Any, int]] = {}
    dropped = 0
    outputs: list[Out] = []
    for key, value, ts in records:
        if key is None or value is None:
            dropped += 1
            continue
        agg, prev_ts = aggs.get(key, (fns.initializer(), ts))
        agg = fns.aggregator(key, value, agg)
        new_ts = max(ts, prev_ts)
        aggs[key] = (agg, new_ts)
        outputs.append(Out(key, None, None, agg, new_ts))
    return ReferenceResult(outputs, dropped, 0)


def cogroup_reference(
    records: Iterable[tuple[int, Any, Any, int]], initializer: Any, aggregators: list[Any]
) -> ReferenceResult:
    """Unwindowed cogroup (KIP-150): ``(input index, key, value, ts)`` records; one aggregate
    per key shared by all inputs; the initializer runs only for a key without an aggregate;
    null key or value dropped; ts = max(record ts, previous aggregate ts)."""
    aggs: dict[Any, tuple[Any, int]] = {}
    dropped = 0
    outputs: list[Out] = []
    for src, key, value, ts in records:
        if key is None or value is None:
            dropped += 1
            continue
        agg, prev_ts = aggs[key] if key in aggs else (initializer(), ts)
        agg = aggregators[src](key, value, agg)
        new_ts = max(ts, prev_ts)
        aggs[key] = (agg, new_ts)
        outputs.append(Out(key, None, None, agg, new_ts))
    return ReferenceResult(outputs, dropped, 0)
