"""Lowering of ``KTable.suppress``.

``suppress(until_window_closes)`` folds into the windowed aggregation it follows: the same
aggregation, lowered again under the suppress node's name, whose operator forwards what Kafka's
suppress node would release instead of its changelog (so no chained operator is needed, and in
streaming the release runs on the aggregation's own event-time timers).

- **Time windows**: Kafka's suppress and on-close emission agree record for record (release
  when stream time reaches ``end + grace``, the latest aggregate with its timestamp, windows in
  (end, key) order): the aggregation is lowered with emit on window close.
- **Session and sliding windows**: suppress releases a window at stream time ``end + delay``
  (gap + grace for sessions, grace for sliding windows), 1 ms before the aggregation closes it,
  so a record can still write a released window (Kafka's suppress releases it again) or merge
  a released session into a larger one. The operator's windowing is
  `streamsdsl.semantics.suppress.FinalResultsWindowing` (its windows "close" on release; a
  window written again is released again). In the test driver `ReplayFinalResultsProcessor`
  applies `final_results_release` per record, exactly Kafka's suppress node for that key; in
  streaming the aggregation's processor releases each window on its event-time timer (or the
  record that passes its threshold) with its value at that stream time. These run on the
  Python operator.
"""

from __future__ import annotations

from typing import Any, Iterator

import attrs
from pyspark.sql import Row

from streamsdsl import ir
from streamsdsl.compiler import jvm_operator
from streamsdsl.compiler.aggregations import _aggregate
from streamsdsl.compiler.columns import EMIT_FINAL, STREAM_TIME_BEFORE
from streamsdsl.compiler.frame import Frame
from streamsdsl.compiler.lowering import Lowering
from streamsdsl.compiler.processors import AggregateConfig, ReplayAggregateProcessor
from streamsdsl.dsl.windows import EmitStrategy, SessionWindows, SlidingWindows
from streamsdsl.errors import OperationNotDefinedError
from streamsdsl.semantics.changes import ChangeBuffer
from streamsdsl.semantics.suppress import FinalResultsWindowing, final_results_release
from streamsdsl.semantics.windowing import KeyState, RecordStep, close_step

__all__ = ["ReplayFinalResultsProcessor", "final_results_delay"]


def final_results_delay(windows: Any) -> int | None:
    """How long after a window's end Kafka's suppress releases it, for the window kinds whose
    release precedes the aggregation's close (Kafka's ``GraphGraceSearchUtil``: gap + grace
    for sessions, grace for sliding windows); ``None`` for time windows (release == close)."""
    if isinstance(windows, SessionWindows):
        return windows.inactivity_gap_ms + windows.grace_period_ms
    if isinstance(windows, SlidingWindows):
        return windows.grace_period_ms
    return None


class ReplayFinalResultsProcessor(ReplayAggregateProcessor):
    """The test driver's operator for a session or sliding aggregation followed by
    ``suppress(until_window_closes)``: per record, what Kafka's suppress node releases of this
    key (`final_results_release`). Windows released by stream time leave as pending on-close
    records (the plan gives each to the first record whose stream time passes its threshold,
    ordered by (end, key) with every other key's); a window written again after its release
    is released at once, after them."""

    def __init__(self, config: AggregateConfig, state_type: str) -> None:
        # The plan treats the operator as emitting on close (pending records, the run's end);
        # the record loop hands every record's step to `_on_update`.
        super().__init__(attrs.evolve(config, emit_on_close=False), state_type)
        self._before_at: int | None = None
        self._times = (-1, -1)

    def _stream_time(self, r: tuple[Any, ...], stream_time: int, ts: int, value: Any) -> int:
        cols = self._cols
        if self._before_at is None:
            self._before_at = cols.fields.index(STREAM_TIME_BEFORE)
        self._times = (int(r[self._before_at]), int(r[cols.stream_time]))
        return self._times[1]

    def _on_update(self, kcell: Any, before: KeyState, step: RecordStep, batch: ChangeBuffer,
                   r: tuple[Any, ...]) -> Iterator[Row]:
        windowing = self.config.windowing
        assert isinstance(windowing, FinalResultsWindowing)
        release = final_results_release(windowing, before, step, *self._times)
        if not release.passed and not release.immediate:
            return
        key = self.config.key.serde.from_internal(kcell)
        yield from self._pending(kcell, key, release.passed)
        cols = self._cols
        position, ord_ = r[cols.position], list(r[cols.output_position] or [])
        stream_time = self._times[1]
        for i, w in enumerate(release.immediate):
            yield self._record(self._key_cell(kcell, w), self._internal(w.agg, kcell, position), w.ts, [], position,
                               [*ord_, 2, i])
            yield self._event(EMIT_FINAL, stream_time - windowing.close_threshold(w) - 1, w.ts, position, str(key))

    def _end_of_key(self, kcell: Any, key: Any, state: KeyState, batch: ChangeBuffer,
                    last: tuple[Any, ...]) -> Iterator[Row]:
        # what is still pending is released if a later record of the run passes its threshold
        yield from self._pending(kcell, key, state.open_windows())
        state = close_step(self.config.windowing, state, self.run_stream_time).state
        yield from super()._end_of_key(kcell, key, state, batch, last)


@Lowering.lower.register(ir.SuppressNode)
def _suppress(self: Lowering, node: ir.SuppressNode) -> Frame:
    if node.mode != "until_window_closes":
        raise OperationNotDefinedError(f"{node.name}: suppress(until_time_limit) is not implemented yet.")
    aggregation = self.topology.node(node.parents[0]) if self.topology is not None else None
    if not isinstance(aggregation, (ir.TimeWindowAggregateNode, ir.SessionAggregateNode)) or aggregation.emit.emits_on_close:
        raise OperationNotDefinedError(
            f"{node.name}: suppress(until_window_closes) is implemented right after a windowed aggregation "
            "that emits on update.")
    delay = final_results_delay(aggregation.windows)
    if delay is None:
        frame = self.lower(attrs.evolve(aggregation, name=node.name, emit=EmitStrategy.on_window_close()))
    else:
        frame = _aggregate(self, attrs.evolve(aggregation, name=node.name), final_results=delay)
    topology = self.topology
    if all(isinstance(topology.node(c), ir.SuppressNode) for c in topology.children(aggregation.name)):
        # Nothing reads the aggregation's own changelog: its operator is not part of the plan.
        # Its store holds what the folded operator holds (closed windows leave both).
        jvm_operator.forget(aggregation.name)
        carried = getattr(self, "carried_states", None)
        if carried is not None:
            carried[aggregation.name] = carried[node.name]
    return frame

