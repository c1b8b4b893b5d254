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
from streamsdsl.compiler.aggregations import _aggregate, _run_processor
from streamsdsl.compiler.columns import EMIT_FINAL, OUTPUT_POSITION, SOURCE_POSITION, STREAM_TIME_BEFORE
from streamsdsl.compiler.jvm_operator import Backend
from streamsdsl.compiler.frame import Frame, KeyCodec
from streamsdsl.compiler.lowering import Lowering
from streamsdsl.compiler.processors import AggregateConfig, AggregateInput, ReplayAggregateProcessor
from streamsdsl.compiler.processors import StreamingAggregateProcessor, _rows_in_source_order
from streamsdsl.values.windows import EmitStrategy
from streamsdsl.errors import OperationNotDefinedError
from streamsdsl.semantics.aggregation import AggFunctions
from streamsdsl.semantics.changes import ChangeBuffer
from streamsdsl.semantics.suppress import FinalResultsRelease, FinalResultsWindowing, TimeLimitBuffer
from streamsdsl.semantics.suppress import final_results_release, time_limit_release
from streamsdsl.semantics.windowing import KeyState, RecordStep, close_step
from streamsdsl.operators import final_results_delay

__all__ = ["ReplayFinalResultsProcessor", "ReplayTimeLimitProcessor", "StreamingTimeLimitProcessor",
           "final_results_delay", "streaming_suppress_processor", "suppress_processor"]


class _ReleasingProcessor(ReplayAggregateProcessor):
    """What the test driver's suppress operators share: releases leave as pending on-close
    records (the plan gives each to the first record whose stream time passes its threshold,
    ordered by (buffer time, key) with every other key's); an immediate release comes out with
    its own record, after them; what is pending at the run's end is released if a later record
    of the run passes its threshold."""

    def _released(self, kcell: Any, release: FinalResultsRelease, r: tuple[Any, ...], stream_time: int) -> Iterator[Row]:
        if not release.passed and not release.immediate:
            return
        key = self.config.key.serde.from_internal(kcell)
        yield from self._pending(kcell, key, release.passed)
        cols = self._cols
        position, ord_ = cols.position(r), cols.output_position(r)
        threshold = self.config.windowing.close_threshold
        for i, w in enumerate(release.immediate):
            yield self._record(self._key_cell(kcell, w), self._internal(w.agg, kcell, position), w.ts, [], position,
                               [*ord_, 2, i])
            yield self._event(EMIT_FINAL, stream_time - threshold(w) - 1, w.ts, position, self.config.key_order(key))

    def _end_of_key(self, kcell: Any, key: Any, state: KeyState, batch: ChangeBuffer | None,
                    last: tuple[Any, ...]) -> Iterator[Row]:
        yield from self._pending(kcell, key, state.open_windows())
        state = close_step(self.config.windowing, state, self.run_stream_time).state
        yield from super()._end_of_key(kcell, key, state, batch, last)  # type: ignore[arg-type]

    def _times(self, r: tuple[Any, ...]) -> tuple[int, int]:
        """Stream time before and after the record (all keys')."""
        cols = self._cols
        if self._before_at is None:
            self._before_at = cols.fields.index(STREAM_TIME_BEFORE)
        return int(r[self._before_at]), int(r[cols.stream_time])


class ReplayFinalResultsProcessor(_ReleasingProcessor):
    """The test driver's operator for a session or sliding aggregation followed by
    ``suppress(until_window_closes)``: per record, what Kafka's suppress node releases of this
    key (`final_results_release`)."""

    def __init__(self, config: AggregateConfig, state_type: str) -> None:
        # The plan treats the operator as emitting on close (pending records, the run's end);
        # the record loop hands every record's step to `_on_update`.
        super().__init__(attrs.evolve(config, emit_on_close=False), state_type)
        self._before_at: int | None = None
        self._at_times = (-1, -1)

    def _stream_time(self, r: tuple[Any, ...], stream_time: int, ts: int, value: Any) -> int:
        self._at_times = self._times(r)
        return self._at_times[1]

    #: With the record cache: the key's rows of the current source position, released together
    #: at its last row (the state and stream time before the first, the steps, the last row).
    _held: tuple[KeyState, int, list[RecordStep], tuple[Any, ...]] | None = None

    def _on_update(self, kcell: Any, before: KeyState, step: RecordStep, batch: ChangeBuffer,
                   r: tuple[Any, ...]) -> Iterator[Row]:
        """Kafka's suppress node receives what the aggregation's record cache forwards, once
        per source record: the key's rows of one source position are released together
        (`final_results_release` of their steps); a row that crossed a repartition is alone."""
        cfg = self.config
        windowing = cfg.windowing
        assert isinstance(windowing, FinalResultsWindowing)
        index = r[self._cols.input_index] if cfg.cogroup else 0
        if not windowing.cached or cfg.inputs[index].repartitioned:
            release = final_results_release(windowing, before, step, *self._at_times)
            return self._released(kcell, release, r, self._at_times[1])
        out = list(self._release_held(kcell, self._cols.position(r)))
        held = self._held
        self._held = (before, self._at_times[0], [step], r) if held is None else (held[0], held[1], [*held[2], step], r)
        return iter(out)

    def _release_held(self, kcell: Any, before_position: int | None = None) -> Iterator[Row]:
        """The held rows' release, unless they are of ``before_position``."""
        held = self._held
        if held is None or self._cols.position(held[3]) == before_position:
            return iter(())
        self._held = None
        before, time_before, steps, r = held
        windowing = self.config.windowing
        assert isinstance(windowing, FinalResultsWindowing)
        stream_time = self._times(r)[1]
        return self._released(kcell, final_results_release(windowing, before, steps, time_before, stream_time), r,
                              stream_time)

    def _end_of_key(self, kcell: Any, key: Any, state: KeyState, batch: ChangeBuffer | None,
                    last: tuple[Any, ...]) -> Iterator[Row]:
        yield from self._release_held(kcell)
        yield from super()._end_of_key(kcell, key, state, batch, last)


class ReplayTimeLimitProcessor(_ReleasingProcessor):
    """The test driver's operator of ``suppress(until_time_limit)``, keyed by the table's key:
    one buffered update per key (`time_limit_release`)."""

    def __init__(self, config: AggregateConfig, state_type: str) -> None:
        super().__init__(config, state_type)
        self._before_at: int | None = None

    def handleInputRows(self, key: Any, rows: Iterator[Row], timerValues: Any) -> Iterator[Row]:  # noqa: N802,N803
        data, self._cols = _rows_in_source_order(rows, self._cols)
        if data:
            kcell, cols, buffer = key[0], self._cols, self.config.windowing
            assert isinstance(buffer, TimeLimitBuffer)
            state = self._load(data)
            decode = self.config.value_out.from_internal
            for r in data:
                self._at = (kcell, cols.position(r))
                before, now = self._times(r)
                state, release = time_limit_release(buffer, state, decode(r[cols.value]), cols.timestamp(r), before,
                                                     now)
                yield from self._released(kcell, release, r, now)
            yield from self._end_of_key(kcell, self.config.key.serde.from_internal(kcell), state, None, data[-1] if data else ())


class StreamingTimeLimitProcessor(StreamingAggregateProcessor):
    """The streaming operator of ``suppress(until_time_limit)``, keyed by the table's key: one
    buffered update per key (`time_limit_release`). Stream time is the watermark, raised by the
    key's own updates in the micro-batch; a buffered update comes out with the update that
    reaches its limit, or on the key's event-time timer once the watermark does (in the
    micro-batch that runs at it), and leaves the state then."""

    def handleInputRows(self, key: Any, rows: Iterator[Row], timerValues: Any) -> Iterator[Row]:  # noqa: N802,N803
        data, cols = _rows_in_source_order(rows, self._cols)
        if not data:
            return
        self._cols = cols
        kcell, buffer = key[0], self.config.windowing
        assert isinstance(buffer, TimeLimitBuffer)
        state = self._load(data)
        self._timer_before = self._timer(state)
        stream_time = timerValues.getCurrentWatermarkInMs()
        decode = self.config.value_out.from_internal
        key_value = self.config.key.serde.from_internal(kcell)
        for r in data:
            ts, position = r[cols.meta][:2]
            self._at = (kcell, position)
            before, stream_time = stream_time, max(stream_time, ts)
            state, release = time_limit_release(buffer, state, decode(r[cols.value]), ts, before, stream_time)
            released = (*release.passed, *release.immediate)
            if released:
                yield from self._finals(kcell, key_value, released, stream_time, position, cols.output_position(r))
        self._save(state)
        self._set_timer(state)


def streaming_suppress_processor(config: AggregateConfig, state_type: str) -> StreamingAggregateProcessor | None:
    """The streaming operator for a suppress node's config, or None for an aggregation's (a
    session or sliding suppress runs in the aggregation's own streaming operator)."""
    if isinstance(config.windowing, TimeLimitBuffer):
        return StreamingTimeLimitProcessor(config, state_type)
    return None


def suppress_processor(config: AggregateConfig, state_type: str) -> ReplayAggregateProcessor | None:
    """The test driver's operator for a suppress node's config, or None for an aggregation's."""
    if isinstance(config.windowing, FinalResultsWindowing):
        return ReplayFinalResultsProcessor(config, state_type)
    if isinstance(config.windowing, TimeLimitBuffer):
        return ReplayTimeLimitProcessor(config, state_type)
    return None


def _suppress(self: Lowering, node: ir.SuppressNode) -> Frame:
    if node.mode == "until_time_limit":
        return _time_limit(self, node)
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
        self.choices.forget(aggregation.name)
        carried = getattr(self, "carried_states", None)
        if carried is not None:
            carried[aggregation.name] = carried[node.name]
    return frame



def _keep_latest(key: Any, value: Any, aggregate: Any) -> Any:
    return value


def _time_limit(self: Lowering, node: ir.SuppressNode) -> Frame:
    """``suppress(until_time_limit)``: a keyed operator over the table's changelog
    (`ReplayTimeLimitProcessor` in the test driver, `StreamingTimeLimitProcessor` streaming)."""
    table = self.parent(node)
    if table.key.windowed:
        raise OperationNotDefinedError(
            f"{node.name}: suppress(until_time_limit) of a windowed table is not implemented yet; for one result "
            "per window use suppress(Suppressed.until_window_closes(Suppressed.BufferConfig.unbounded())).")
    key = KeyCodec(table.key.serde)
    config = AggregateConfig(node.name, key, table.value, TimeLimitBuffer(node.time_limit),
                             (AggregateInput(table.value, AggFunctions(lambda: None, _keep_latest)),),
                             emit_on_close=True)
    self.choices.record(node.name, Backend.PYTHON, "suppress runs on the Python operator")
    df = table.df.select("key", "value", "timestamp", "headers", SOURCE_POSITION, OUTPUT_POSITION)
    return Frame(_run_processor(self, node.name, df, config), key, table.value, is_table=True)
