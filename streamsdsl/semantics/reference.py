"""Reference runs of whole inputs through the semantics core, as Kafka Streams'
TopologyTestDriver processes them: one partition, records in order, stream time advancing per
record, the record cache flushed after every record.

The property tests compare the compiled Spark plan against `reference_run`, which calls the
same record step (`streamsdsl.semantics.windowing.record_step`) as the Spark processors.
"""

from __future__ import annotations

from typing import Any, Iterable, Sequence

import attrs

from streamsdsl.semantics.aggregation import AggFunctions
from streamsdsl.semantics.changes import ChangeBuffer
from streamsdsl.semantics.unwindowed import Unwindowed
from streamsdsl.semantics.windowing import KeyState, WindowAgg, Windowing, advance_stream_time, close_step, record_step

__all__ = ["Out", "ReferenceResult", "reference_run"]


@attrs.frozen
class Out:
    """One forwarded record: key, window bounds (``None`` when unwindowed), value (``None`` =
    tombstone), timestamp."""

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


def reference_run(
    records: Iterable[tuple[Any, ...]],
    windowing: Windowing,
    fns: AggFunctions | Sequence[AggFunctions],
    *,
    emit_on_close: bool = False,
) -> ReferenceResult:
    """Run records through an aggregation of any window kind.

    ``records`` are ``(key, value, timestamp)``; with one `AggFunctions` per input (a cogroup)
    they are ``(input index, key, value, timestamp)``. A null key is dropped and counted before
    stream time advances. On update every store write is forwarded per record (the last value
    per window, in write order; tombstones for merged-away windows); on close each window is
    forwarded once, when stream time closes it, ordered by the window kind's final order and
    then the key.

    Examples
    --------
    >>> from streamsdsl.semantics.session import SessionWindowing
    >>> count = AggFunctions(lambda: 0, lambda k, v, a: a + 1, lambda k, a, b: a + b)
    >>> run = reference_run([("a", "x", 0), ("a", "x", 4)], SessionWindowing(5, 0), count)
    >>> [(o.start, o.end, o.value, o.timestamp) for o in run.outputs]
    [(0, 0, 1, 0), (0, 0, None, 0), (0, 4, 2, 4)]
    """
    per_input = not isinstance(fns, AggFunctions)
    state: dict[Any, KeyState] = {}
    stream_time = -1
    dropped = 0
    emitted = 0
    outputs: list[Out] = []
    for record in records:
        source, key, value, ts = record if per_input else (0, *record)
        record_fns = fns[source] if per_input else fns  # type: ignore[index]
        if key is None:
            dropped += 1
            continue
        stream_time = advance_stream_time(windowing, stream_time, ts, value)
        before = state.get(key, KeyState())
        step = record_step(windowing, before, key, value, ts, stream_time, record_fns)
        state[key] = step.state
        dropped += step.dropped
        if not emit_on_close:
            buffer = ChangeBuffer(w.bounds for w in before.windows)
            step.write_to(buffer)
            outputs.extend(_out(windowing, key, bounds, w) for bounds, w in buffer.flush())
        closing = [(w, key) for w in step.closed]
        for other in state:
            if other != key:
                close = close_step(windowing, state[other], stream_time)
                state[other] = close.state
                closing.extend((w, other) for w in close.closed)
        if emit_on_close:
            closing.sort(key=lambda pair: (windowing.final_order(pair[0]), str(pair[1])))
            outputs.extend(_out(windowing, k, w.bounds, w) for w, k in closing)
            emitted += len(closing)
    return ReferenceResult(outputs, dropped, emitted)


def _out(windowing: Windowing, key: Any, bounds: Any, window: WindowAgg | None) -> Out:
    start, end = (None, None) if isinstance(windowing, Unwindowed) else bounds
    if window is None:
        return Out(key, start, end, None, bounds[1])
    return Out(key, start, end, window.agg, window.ts)
