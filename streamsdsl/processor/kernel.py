"""The kernel of a user's processor: one task's processor instance, its context, its stores and
its punctuation schedule, driven record by record by a host that does not change what it does.

The host (the direct engine's step, the Spark operator) passes in what differs between them:
the task's stores (opened on the host's backend: `streamsdsl.state`), the stream time and the
system time with each call, where forwarded records go, and the schedule saved by an earlier
run of the task. The kernel applies Kafka Streams' rules (``StreamTask``, ``PunctuationQueue``,
``PunctuationSchedule``):

- a stream-time punctuator is aligned to 0 and fires as soon as the task has stream time, then
  whenever stream time reaches its next multiple of the interval; a wall-clock punctuator first
  fires one interval after it was scheduled. Missed intervals are skipped, not replayed, and a
  punctuator is called with the current time (stream time or system time), not its schedule's.
- a task has one punctuation queue across its processors (`PunctuationQueue`): what is due
  fires in due-time order, whichever processor scheduled it; punctuators due at the same time
  fire in the order they were scheduled.
- a `FixedKeyProcessor` may not forward a record with another key than the one it received.

The schedule is data (`Schedule`): a host that runs a task in several runs (Spark: one per
micro-batch) saves it and passes it to the next run's kernel, whose processor's ``init``
schedules its punctuators again; each gets back its due time and cancellation by its position
among the punctuators scheduled in ``init``.
"""

from __future__ import annotations

import heapq
from datetime import timedelta
from typing import Any, Callable, Mapping

import attrs

from streamsdsl._validation import to_millis
from streamsdsl.errors import InvalidArgumentError, InvalidTypeError, ProcessorStateError, PunctuationError, RecordError
from streamsdsl.errors import UserFunctionError
from streamsdsl.processor.api import FixedKeyProcessor, FixedKeyRecord, Processor, PunctuationType, Record
from streamsdsl.processor.api import RecordMetadata, TaskId

__all__ = ["ProcessorKernel", "PunctuationQueue", "Schedule", "ScheduledPunctuation"]

#: Where a forwarded record goes: ``(record, child_name)`` (None: every child).
Forward = Callable[[Record, "str | None"], None]


@attrs.frozen
class ScheduledPunctuation:
    """One punctuator's saved schedule: its interval (ms), type, next due time and whether it
    was cancelled."""

    interval_ms: int
    type: PunctuationType
    due_ms: int
    cancelled: bool = False


#: A task's saved punctuation schedule, by position among the punctuators scheduled in ``init``.
Schedule = tuple[ScheduledPunctuation, ...]


class _Punctuation:
    """A live punctuator: Kafka's ``PunctuationSchedule`` with its ``RepointableCancellable``."""

    __slots__ = ("callback", "cancelled", "due_ms", "interval_ms", "kernel", "order", "slot", "type")

    def __init__(self, kernel: ProcessorKernel, slot: int | None, order: int, interval_ms: int, type: PunctuationType,
                 due_ms: int, callback: Callable[[int], None]) -> None:
        self.kernel, self.slot, self.order, self.interval_ms, self.type = kernel, slot, order, interval_ms, type
        self.due_ms, self.callback, self.cancelled = due_ms, callback, False

    def cancel(self) -> None:
        """Stop this punctuator (it does not fire again)."""
        self.cancelled = True

    def advance(self, now: int) -> None:
        """The next due time after firing at ``now`` (``PunctuationSchedule.next``): one interval
        on, or, if ``now`` already passed that, the first multiple of the interval after ``now``."""
        due = self.due_ms + self.interval_ms
        if now >= due:
            due = self.due_ms + ((now - self.due_ms) // self.interval_ms + 1) * self.interval_ms
        self.due_ms = due

    def saved(self) -> ScheduledPunctuation:
        return ScheduledPunctuation(self.interval_ms, self.type, self.due_ms, self.cancelled)


class PunctuationQueue:
    """A task's punctuators, of every processor of the task (Kafka's ``PunctuationQueue`` per
    ``StreamTask``): `punctuate` fires what is due of one type in due-time order (then in the
    order scheduled). A kernel makes its own unless the host passes the task's."""

    def __init__(self) -> None:
        self._heap: list[tuple[int, int, _Punctuation]] = []
        self._order = 0
        self._kernels: list[ProcessorKernel] = []

    def _join(self, kernel: ProcessorKernel) -> None:
        self._kernels.append(kernel)

    def _add(self, punctuation: _Punctuation) -> None:
        heapq.heappush(self._heap, (punctuation.due_ms, punctuation.order, punctuation))

    def _next_order(self) -> int:
        self._order += 1
        return self._order

    def punctuate(self, type: PunctuationType, now: int) -> bool:
        """Fire every punctuator of ``type`` due at ``now`` (the task's stream time or the system
        time); return whether one fired (``PunctuationQueue.maybePunctuate``)."""
        if type is PunctuationType.STREAM_TIME and now < 0:
            return False
        for kernel in self._kernels:
            kernel._observe(type, now)
        fired = False
        held: list[tuple[int, int, _Punctuation]] = []
        while self._heap and self._heap[0][0] <= now:
            entry = heapq.heappop(self._heap)
            p = entry[2]
            if p.cancelled:
                continue
            if p.type is not type:
                held.append(entry)
                continue
            p.kernel._fire(p, now)
            if not p.cancelled:
                p.advance(now)
                self._add(p)
            fired = True
        for entry in held:
            heapq.heappush(self._heap, entry)
        return fired

    def next_due(self, type: PunctuationType, kernel: ProcessorKernel | None = None) -> int | None:
        """When the next punctuator of ``type`` (of ``kernel``, or of any) is due (None: none is)."""
        due = [p.due_ms for _, _, p in self._heap
               if p.type is type and not p.cancelled and (kernel is None or p.kernel is kernel)]
        return min(due) if due else None


class _Context:
    """The `ProcessorContext` the kernel gives its processor."""

    def __init__(self, kernel: ProcessorKernel) -> None:
        self._kernel = kernel

    def forward(self, record: Record, child_name: str | None = None) -> None:
        self._kernel._forward(record, child_name)

    def get_state_store(self, name: str) -> Any:
        return self._kernel._store(name)

    def schedule(self, interval: int | timedelta, type: PunctuationType, callback: Callable[[int], None]) -> Any:
        return self._kernel._schedule(interval, type, callback)

    def record_metadata(self) -> RecordMetadata | None:
        return self._kernel._metadata

    def current_stream_time_ms(self) -> int:
        return self._kernel._stream_time

    def current_system_time_ms(self) -> int:
        return self._kernel._system_time

    def application_id(self) -> str:
        return self._kernel.application_id

    def task_id(self) -> TaskId:
        return self._kernel.task

    def __repr__(self) -> str:
        return f"ProcessorContext(processor={self._kernel.name!r}, task={self._kernel.task})"


class ProcessorKernel:
    """One task of a user's processor node.

    Parameters
    ----------
    name
        The processor's node name (errors name it).
    supplier
        Returns a new processor instance (``KStream.process``'s supplier).
    stores
        The task's stores this processor is connected to, by name, opened on the host's backend.
    task, application_id
        What ``context.task_id()`` and ``application_id()`` return.
    forward
        Called with each forwarded record and its child name (None: every child).
    fixed_key
        A ``process_values`` processor: records are `FixedKeyRecord` and keep their key.
    children
        The processor's children's names (``forward(record, child_name)`` must name one).
    schedule
        The schedule an earlier run of this task saved (`saved_schedule`).
    punctuations
        The task's punctuation queue, shared by its processors (default: one of its own).
    stream_time, system_time
        The task's stream time (-1: none yet) and the system time when the kernel starts.
    """

    def __init__(self, name: str, supplier: Callable[[], Any], stores: Mapping[str, Any], *, task: TaskId,
                 application_id: str, forward: Forward, fixed_key: bool = False, children: tuple[str, ...] = (),
                 schedule: Schedule = (), stream_time: int = -1, system_time: int = 0,
                 punctuations: PunctuationQueue | None = None) -> None:
        self.name, self.task, self.application_id = name, task, application_id
        self.fixed_key, self.children = fixed_key, children
        self._stores = dict(stores)
        self._out = forward
        self._restored = schedule
        self._stream_time, self._system_time = stream_time, system_time
        self._metadata: RecordMetadata | None = None
        self._key: Any = None
        self.queue = punctuations if punctuations is not None else PunctuationQueue()
        self.queue._join(self)
        self._punctuations: list[_Punctuation] = []
        self._initializing = False
        self.processor = self._create(supplier)
        self._initializing = True
        try:
            self._call("init", None, self.processor.init, _Context(self))
        finally:
            self._initializing = False

    # -- the host's calls ----------------------------------------------------------------------
    def process(self, record: Record, metadata: RecordMetadata, stream_time: int, system_time: int, *,
                position: int | None = None) -> None:
        """Run the processor on ``record`` (read at ``metadata``), at the task's ``stream_time``
        (which includes this record) and ``system_time``; then the host calls `punctuate`."""
        self._stream_time, self._system_time = stream_time, system_time
        self._metadata, self._key = metadata, record.key
        if self.fixed_key and not isinstance(record, FixedKeyRecord):
            record = FixedKeyRecord(record.key, record.value, record.timestamp, record.headers)
        try:
            self._call("process", position, self.processor.process, record)
        finally:
            self._metadata = None

    def punctuate(self, type: PunctuationType, now: int) -> bool:
        """Fire the task's punctuators of ``type`` due at ``now`` (its queue's `punctuate`)."""
        return self.queue.punctuate(type, now)

    def _observe(self, type: PunctuationType, now: int) -> None:
        if type is PunctuationType.STREAM_TIME:
            self._stream_time = max(self._stream_time, now)
        else:
            self._system_time = now

    def saved_schedule(self) -> Schedule:
        """The schedule to pass to the next run's kernel (punctuators scheduled in ``init``)."""
        return tuple(p.saved() for p in self._punctuations if p.slot is not None)

    def next_due(self, type: PunctuationType) -> int | None:
        """When this processor's next punctuator of ``type`` is due (None: none is scheduled)."""
        return self.queue.next_due(type, self)

    def close(self) -> None:
        """Call the processor's ``close``."""
        self._call("close", None, self.processor.close)

    # -- the context's calls -------------------------------------------------------------------
    def _forward(self, record: Record, child_name: str | None) -> None:
        if not isinstance(record, Record):
            raise InvalidTypeError(
                f"{self.name}: context.forward() takes a Record (got {type(record).__name__}: {record!r}); write "
                "context.forward(record.with_value(...)) or Record(key, value, timestamp).")
        if child_name is not None and child_name not in self.children:
            raise ProcessorStateError(
                f"{self.name}: context.forward(record, {child_name!r}) names no child of this processor; its children "
                f"are {list(self.children)}.")
        if self.fixed_key and self._metadata is not None and record.key != self._key:
            raise ProcessorStateError(
                f"{self.name}: a FixedKeyProcessor (process_values) cannot change the key (got {record.key!r}, "
                f"received {self._key!r}); use KStream.process() to change keys.")
        self._out(record, child_name)

    def _store(self, name: str) -> Any:
        store = self._stores.get(name)
        if store is None:
            raise ProcessorStateError(
                f"Processor {self.name} has no access to state store {name!r}: the store is not connected to it. "
                f"Name it when adding the processor: process(supplier, {name!r}) (connected: {sorted(self._stores)}).")
        return store

    def _schedule(self, interval: int | timedelta, type: PunctuationType, callback: Callable[[int], None]) -> Any:
        if not isinstance(type, PunctuationType):
            raise InvalidTypeError(
                f"'type' must be PunctuationType.STREAM_TIME or PunctuationType.WALL_CLOCK_TIME (got {type!r}).")
        if not callable(callback):
            raise InvalidTypeError(f"'callback' must be a callable (timestamp_ms) -> None (got {callback!r}).")
        interval_ms = to_millis(interval, "interval")
        if interval_ms < 1:
            raise InvalidArgumentError(f"'interval' must be >= 1 ms (got {interval_ms} ms): a punctuator fires at most "
                                       "once per millisecond of its time.")
        slot = sum(1 for p in self._punctuations if p.slot is not None) if self._initializing else None
        due = 0 if type is PunctuationType.STREAM_TIME else self._system_time + interval_ms
        saved = self._restored[slot] if slot is not None and slot < len(self._restored) else None
        punctuation = _Punctuation(self, slot, self.queue._next_order(), interval_ms, type, due, callback)
        if saved is not None and (saved.interval_ms, saved.type) == (interval_ms, type):
            punctuation.due_ms, punctuation.cancelled = saved.due_ms, saved.cancelled
        self._punctuations.append(punctuation)
        if not punctuation.cancelled:
            self.queue._add(punctuation)
        return punctuation

    # -- calling the user's code -----------------------------------------------------------------
    def _create(self, supplier: Callable[[], Any]) -> Processor:
        try:
            processor = supplier()
        except Exception as exc:  # noqa: BLE001 - re-raised naming the processor
            raise UserFunctionError.of(self.name, "supplier", exc, None, None) from exc
        expected = FixedKeyProcessor if self.fixed_key else Processor
        if not callable(getattr(processor, "process", None)):
            raise InvalidTypeError(
                f"{self.name}: the supplier must return a new {expected.__name__} (an object with process(record)); "
                f"it returned {type(processor).__name__}: {processor!r}. Pass the class (or a function returning a "
                "new instance), not an instance.")
        return processor

    def _call(self, function: str, position: int | None, fn: Callable[..., Any], *args: Any) -> None:
        try:
            fn(*args)
        except RecordError:
            raise
        except Exception as exc:  # noqa: BLE001 - re-raised naming the processor and the record
            key = self._key if function == "process" else None
            raise UserFunctionError.of(self.name, function, exc, key, position) from exc

    def _fire(self, p: _Punctuation, now: int) -> None:
        try:
            p.callback(now)
        except RecordError:
            raise
        except Exception as exc:  # noqa: BLE001 - re-raised naming the processor and the punctuation
            raise PunctuationError.of_punctuation(self.name, p.type.value, now, exc) from exc
