"""Idle close on a streaming query's Python operator (`IdleCloseAggregateProcessor`): the
aggregation kernel's idle-close rule (`streamsdsl.semantics.kernels.AggregateKernel.close_idle`)
hosted on Spark's processing-time timers, per aggregation through the markers of
`streamsdsl.compiler.idle_channel`. The test driver's replay runs the rule in
`streamsdsl.compiler.processors.ReplayAggregateProcessor`; the JVM operator's port is
``AggregateProcessor.java``'s idle timer."""

from __future__ import annotations

import pickle
from typing import Any, Iterator

import attrs
from pyspark.sql import Row

from streamsdsl.compiler.idle_channel import IdleChannel
from streamsdsl.compiler.processors import StreamingAggregateProcessor
from streamsdsl.semantics.kernels import AggregateKernel
from streamsdsl.semantics.windowing import KeyState

__all__ = ["IdleCloseAggregateProcessor"]

#: The task-local property in which Spark's micro-batch execution names the batch's id.
BATCH_ID_PROPERTY = "streaming.sql.batchId"


class IdleCloseAggregateProcessor(StreamingAggregateProcessor):
    """Streaming with idle close (`AggregateConfig.idle_close_ms`): the operator runs in Spark's
    ``ProcessingTime`` time mode, so that its timers fire while no record arrives (Spark then runs
    a micro-batch every trigger, PLATFORM.md). A key's records are stamped with the micro-batch's
    processing time ``T`` (`AggregateKernel.wall_clock`).

    Idle close is per aggregation: its open windows close once no record has reached the
    aggregation for ``idle_close_ms``. A task sees only its partition's keys, so the tasks tell
    each other when the aggregation last had a record (``L``) through the markers of
    `streamsdsl.compiler.idle_channel` (`AggregateConfig.idle_channel`): a task that gets records
    in micro-batch ``B`` leaves one, and ``L`` as of ``B`` is read from the markers of the
    micro-batches before ``B`` (``B``'s own records do not count, so the outcome does not depend on
    partitioning or task order). A key with records in ``B`` first has its open windows closed if
    the aggregation was idle as of ``T`` (``T - L >= idle_close_ms``), then its records are
    processed (a record for a window closed so is late). A key's one timer is a processing-time
    timer at its last record's time plus the idle close, a lower bound of the aggregation's
    deadline: when it fires, the windows the watermark has closed are emitted
    (`AggregateKernel.advance_to`), then, the aggregation being idle, every window still open
    (`AggregateKernel.close_idle` with ``last_input_at=L``); else the timer moves to ``L`` plus
    the idle close. A key whose state stays (its stream-time floor, a sliding window's final
    windows) is looked at again an idle close later.

    Without event-time timers, a window that the watermark closes while its key has no records
    comes out at the key's idle deadline, not at once (docs/session-windows.md, Idle windows).
    The state row holds the windows, the key's floor and its last record's time (or the ``L`` its
    timer last read: both are times at which a record reached the aggregation, so never past
    ``L``)."""

    def init(self, handle: Any) -> None:
        super().init(handle)
        directory = self.config.idle_channel
        assert directory is not None, "compiled without the query's checkpoint location"
        self._channel = IdleChannel(directory)

    def _start(self, kernel: AggregateKernel, timer_values: Any) -> None:
        super()._start(kernel, timer_values)
        kernel.wall_clock = timer_values.getCurrentProcessingTimeInMs()

    def _micro_batch(self) -> tuple[int, int]:
        """(this task's partition, the micro-batch's id) from Spark's task context."""
        from pyspark import TaskContext

        context = TaskContext.get()
        batch = None if context is None else context.getLocalProperty(BATCH_ID_PROPERTY)
        if batch is None:
            raise RuntimeError(f"{self.config.node}: idle close runs in a streaming query's micro-batches only "
                               f"(the task has no {BATCH_ID_PROPERTY})")
        return context.partitionId(), int(batch)

    def _last_input_at(self, state: KeyState, batch: int) -> int:
        """``L`` as of micro-batch ``batch``: the channel's, and at least the key's own last record."""
        return max(state.last_record_at, self._channel.last_input_before(batch))

    def _before_records(self, kcell: Any, key: Any) -> Iterator[Row]:
        kernel, idle = self.kernel, self.config.idle_close_ms
        assert idle is not None
        now = kernel.wall_clock
        partition, batch = self._micro_batch()
        self._channel.record(partition, batch, now)
        state = kernel.states.get(key)
        if state is None or not state.open_windows() or now - state.last_record_at < idle:
            return  # the key's own last record is a lower bound of L: not idle
        last = self._last_input_at(state, batch)
        if now - last < idle:
            return
        yield from self._close(kcell, key, now, last)

    def _close(self, kcell: Any, key: Any, now: int, last: int) -> Iterator[Row]:
        """The key's windows the watermark has closed (`AggregateKernel.advance_to`), then, if the
        aggregation has been idle since ``last`` (its ``L``), every window still open
        (`AggregateKernel.close_idle`)."""
        kernel = self.kernel
        for step in (kernel.advance_to(kernel.stream_time), kernel.close_idle(now, last_input_at=last)):
            for o, latency in zip(step.outputs, step.final_latencies):
                yield from self._emitted(kcell, key, o, latency, None)

    def _load(self, data: list[tuple[Any, ...]]) -> KeyState:
        stored = self.state.get()
        if stored is None:
            return KeyState()
        windows, floor, last_record_at = pickle.loads(stored[0])
        return attrs.evolve(self._decode_state(windows), floor=floor, last_record_at=last_record_at)

    def _save(self, state: KeyState) -> None:
        if not state.windows and state.floor < 0:
            self.state.clear()
            return
        payload = (self._encode_state(state), state.floor, state.last_record_at)
        self.state.update((pickle.dumps(payload, protocol=pickle.HIGHEST_PROTOCOL),))

    def _hand_to_kernel(self, key: Any, state: KeyState) -> AggregateKernel:
        kernel = super()._hand_to_kernel(key, state)
        if not state.windows and state.floor >= 0:
            kernel.states[key] = state
        return kernel

    def _timer(self, state: KeyState) -> int | None:
        idle = self.config.idle_close_ms
        assert idle is not None
        return state.last_record_at + idle if state.windows or state.floor >= 0 else None

    def handleExpiredTimer(self, key: Any, timerValues: Any, expiredTimerInfo: Any) -> Iterator[Row]:  # noqa: N802,N803
        cfg = self.config
        idle = cfg.idle_close_ms
        assert idle is not None
        kcell = key[0]
        k = cfg.key.serde.from_internal(kcell)
        self._at = (kcell, -1)
        state = self._load([])
        self._timer_before = self._timer(state)
        kernel = self._hand_to_kernel(k, state)
        now = timerValues.getCurrentProcessingTimeInMs()
        kernel.wall_clock = now
        kernel.stream_times = [timerValues.getCurrentWatermarkInMs()] * len(kernel.stream_times)
        last = self._last_input_at(state, self._micro_batch()[1])
        yield from self._close(kcell, k, now, last)
        state = kernel.states.get(k) or KeyState()
        if state.windows or state.floor >= 0:
            # the aggregation had a record since: looked at again at its deadline; else an idle close later
            state = attrs.evolve(state, last_record_at=last if now - last < idle else now)
        self._save(state)
        self._set_timer(state, expiredTimerInfo.getExpiryTimeInMs())
