"""Reference runs of whole inputs through the semantics core, as Kafka Streams'
TopologyTestDriver processes them: one partition, records in order, stream time advancing per
record, the record cache flushed after every record.

The property tests compare both engines of the test driver against `reference_run`, which runs
the aggregation kernel (`streamsdsl.semantics.kernels.AggregateKernel`) over a whole input;
the kernel calls the same record step (`streamsdsl.semantics.windowing.record_step`) as the
Spark processors.
"""

from __future__ import annotations

from typing import Any, Iterable, Sequence

import attrs

from streamsdsl.semantics.aggregation import AggFunctions
from streamsdsl.semantics.kernels import AggregateKernel, Out
from streamsdsl.semantics.windowing import Windowing

__all__ = ["Out", "ReferenceResult", "reference_run"]


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
    kernel = AggregateKernel(windowing, fns, emit_on_close=emit_on_close)
    dropped = emitted = 0
    outputs: list[Out] = []
    for record in records:
        source, key, value, ts = record if per_input else (0, *record)
        step = kernel.process(key, value, ts, source)
        outputs.extend(step.outputs)
        dropped += step.dropped
        emitted += len(step.final_latencies)
    return ReferenceResult(outputs, dropped, emitted)
