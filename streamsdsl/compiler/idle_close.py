"""Idle close on a streaming query's Python operator (`IdleCloseAggregateProcessor`): the
aggregation kernel's idle-close rule (`streamsdsl.semantics.kernels.AggregateKernel.close_idle`)
hosted on Spark's processing-time timers. The test driver's replay runs the rule in
`streamsdsl.compiler.processors.ReplayAggregateProcessor`; the JVM operator's port is
``AggregateProcessor.java``'s idle timer."""

from __future__ import annotations

import pickle
from typing import Any, Iterator

import attrs
from pyspark.sql import Row

from streamsdsl.compiler.processors import StreamingAggregateProcessor
from streamsdsl.semantics.kernels import AggregateKernel
from streamsdsl.semantics.windowing import KeyState

__all__ = ["IdleCloseAggregateProcessor"]


class IdleCloseAggregateProcessor(StreamingAggregateProcessor):
    """Streaming with idle close (`AggregateConfig.idle_close_ms`): the operator runs in Spark's
    ``ProcessingTime`` time mode, so that its timers fire while no record arrives (Spark then runs
    a micro-batch every trigger, PLATFORM.md). A key's records are stamped with the micro-batch's
    processing time (`AggregateKernel.wall_clock`); its one timer is a processing-time timer at
    its last record's time plus the idle close. When it fires, the windows the watermark has
    closed are emitted (`AggregateKernel.advance_to`), then every window still open
    (`AggregateKernel.close_idle`, the direct engine's rule). A key whose state stays (its
    stream-time floor, a sliding window's final windows) is looked at again an idle close later.

    Without event-time timers, a window that the watermark closes while its key has no records
    comes out at the key's idle deadline, not at once (docs/session-windows.md, Idle windows).
    The state row holds the windows, the key's floor and its last record's time."""

    def _start(self, kernel: AggregateKernel, timer_values: Any) -> None:
        super()._start(kernel, timer_values)
        kernel.wall_clock = timer_values.getCurrentProcessingTimeInMs()

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
        kcell = key[0]
        k = cfg.key.serde.from_internal(kcell)
        self._at = (kcell, -1)
        state = self._load([])
        self._timer_before = self._timer(state)
        kernel = self._hand_to_kernel(k, state)
        now = timerValues.getCurrentProcessingTimeInMs()
        kernel.stream_times = [timerValues.getCurrentWatermarkInMs()] * len(kernel.stream_times)
        last = state.last_record_at
        for step in (kernel.advance_to(kernel.stream_time), kernel.close_idle(now, last_input_at=last)):
            for o, latency in zip(step.outputs, step.final_latencies):
                yield from self._emitted(kcell, k, o, latency, None)
        state = kernel.states.get(k) or KeyState()
        if state.windows or state.floor >= 0:
            state = attrs.evolve(state, last_record_at=now)  # looked at again an idle close later
        self._save(state)
        self._set_timer(state, expiredTimerInfo.getExpiryTimeInMs())
