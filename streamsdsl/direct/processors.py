"""The direct engine's host of user processors (``KStream.process`` / ``process_values``): one
`ProcessorKernel` per processor node (the driver runs one task, as Kafka's driver does), its
stores on an in-memory backend whose writes a failed record rolls back.

The engine (`streamsdsl.direct.engine.Run`) owns the task's stores (a store connected to two
processors is one store), its stream time (the largest timestamp of the records it has read)
and the system time (the driver's mock wall clock); after each record it fires the stream-time
punctuators due, and the driver's ``advance_wall_clock_time`` fires the wall-clock ones.
"""

from __future__ import annotations

from typing import Any, Callable, Iterator

from streamsdsl import ir
from streamsdsl.direct.records import Host, Record, Typed, hold, result_error
from streamsdsl.direct.steps import Step
from streamsdsl.processor import ProcessorKernel, RecordMetadata, TaskId
from streamsdsl.processor.api import Record as ProcessorRecord
from streamsdsl.state import MemoryBackend, StoreBuilder, open_store
from streamsdsl.operators.descriptions import ProcessDescription, description_of

__all__ = ["JournaledBackend", "ProcessStep", "TaskStores"]

#: The driver's task (Kafka's driver runs the whole topology as task 0_0).
DRIVER_TASK = TaskId(0, 0)


class JournaledBackend:
    """A store backend (`streamsdsl.state.StoreBackend`) over a `MemoryBackend` that remembers,
    from `begin` on, what each written key held, so that `rollback` puts it back."""

    def __init__(self) -> None:
        self._inner = MemoryBackend()
        self._undo: dict[bytes, bytes | None] = {}

    def begin(self) -> None:
        self._undo = {}

    def rollback(self) -> None:
        for key, value in self._undo.items():
            if value is None:
                self._inner.delete(key)
            else:
                self._inner.put(key, value)
        self._undo = {}

    def _remember(self, key: bytes) -> None:
        if key not in self._undo:
            self._undo[key] = self._inner.get(key)

    def get(self, key: bytes) -> bytes | None:
        return self._inner.get(key)

    def put(self, key: bytes, value: bytes) -> None:
        self._remember(key)
        self._inner.put(key, value)

    def delete(self, key: bytes) -> None:
        self._remember(key)
        self._inner.delete(key)

    def scan(self, lower: bytes | None = None, upper: bytes | None = None, reverse: bool = False
             ) -> Iterator[tuple[bytes, bytes]]:
        return self._inner.scan(lower, upper, reverse)

    def count(self) -> int:
        return self._inner.count()


class TaskStores:
    """The driver task's processor stores, opened once each on a `JournaledBackend`;
    ``on_expired(store)``: a window or session store dropped a put of an expired window, which
    Kafka Streams counts as a dropped record."""

    def __init__(self, builders: tuple[StoreBuilder, ...], on_expired: Callable[[str], None]) -> None:
        self._builders = {b.name: b for b in builders}
        self._open: dict[str, tuple[Any, JournaledBackend]] = {}
        self._on_expired = on_expired

    def store(self, name: str) -> Any:
        if name not in self._open:
            backend = JournaledBackend()
            store = open_store(self._builders[name], backend)
            if hasattr(store, "on_expired"):
                store.on_expired = lambda: self._on_expired(name)
            self._open[name] = (store, backend)
        return self._open[name][0]

    def begin(self) -> None:
        for _, backend in self._open.values():
            backend.begin()

    def rollback(self) -> None:
        for _, backend in self._open.values():
            backend.rollback()


class ProcessStep(Step):
    """A processor node's step: hands each record to its `ProcessorKernel` and forwards what
    the processor forwards (keys and values held as the Spark plan holds a mapper's: JSON)."""

    def __init__(self, description: ProcessDescription, run: Host, stores: TaskStores) -> None:
        node = description.node
        super().__init__(node, Typed(description.key, description.value), run)
        self.kernel = ProcessorKernel(
            node.name, description.supplier, {b.name: stores.store(b.name) for b in description.stores},
            task=DRIVER_TASK, application_id=run.application_id, forward=self._emit, fixed_key=node.fixed_key,
            children=description.children, system_time=run.system_time, punctuations=run.punctuations)

    def receive(self, rec: Record, port: int, records: bool = False) -> None:
        run = self.run
        metadata = RecordMetadata(*run.coordinates)
        self.kernel.process(ProcessorRecord(rec.key, rec.value, rec.timestamp, rec.headers), metadata,
                            run.stream_time, run.system_time, position=run.position)

    def _emit(self, record: ProcessorRecord, child_name: str | None) -> None:
        key, value = record.key, record.value
        try:
            if not self.node.fixed_key:  # type: ignore[attr-defined]
                key = self.typed.key.from_cell(self.typed.key.to_cell(key))
            value = hold(self.typed.value, value)
        except Exception as exc:  # noqa: BLE001 - a forwarded record its encoding cannot hold
            raise result_error(self.name, "process", exc, record.key, self.run.position) from exc
        out = Record(key, value, record.timestamp, record.headers)
        for step, port in self.children:
            if child_name is None or step.name == child_name:
                step.receive(out, port)

    def close(self) -> None:
        self.kernel.close()


def _process(node: ir.ProcessNode, parents: list[Typed], run: Any) -> Step:
    return ProcessStep(description_of(node, parents, run.topology), run, run.task_stores)
