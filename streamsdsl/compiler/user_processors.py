"""Spark's host of a user's processor (``KStream.process`` / ``process_values``): one
``transformWithState`` per processor node, grouped by **task**, running
`streamsdsl.processor.ProcessorKernel`, the kernel the direct engine runs.

Kafka's unit is the task: one input partition of a sub-topology. Its processor instance, its
stores (every key of the task) and its punctuators belong to it. Here the operator's grouping key
is the task's partition (`TASK`): the partition of the source record a row comes from (streaming:
``SOURCE_POSITION >> 40``; the test driver's replay: 0, its one task ``0_0``, as in the direct
engine). One call of the operator per task and micro-batch (a *run* of the task):

* the task's state is restored: its stores, each a ``MapState`` of key bytes to value bytes
  under a `TaskStoreBackend` (point reads go to the map, a scan reads it whole and sorts by
  unsigned bytes; writes are kept in the run and written back at its end), its stream time and
  its saved punctuation `Schedule` (a ``ValueState``). In replay the same state travels in the
  carried-state row (`CARRIED_STATE`) from run to run, as every replay operator's does.
* a kernel is made for the run (the processor's ``init`` runs once per run; the kernel gives its
  punctuators back their saved due times), the run's rows go through it in source order, grouped
  by source position: the task's stream time first takes the source record's timestamp (a
  *tick*), then each record reaching the processor goes through ``kernel.process``, then
  ``kernel.punctuate(STREAM_TIME, stream time)``: Kafka punctuates stream time after each record
  the task processes, so no timer is needed. A source record that does not reach the processor
  (filtered, another topic of the task) still ticks: tick rows (`IS_RECORD` false) read from the
  sources join the processor's input unless every source record reaches it one for one.
* wall-clock punctuators: streaming, the due ones fire at the end of the run, at the system time
  (a task runs when a micro-batch has records of it: the documented difference from Kafka's
  clock-driven punctuation; ``timeMode="ProcessingTime"`` would run a batch every trigger and
  keep ``availableNow`` from ending, PLATFORM.md); in the test driver's replay only at
  ``advance_wall_clock_time``, with the driver's mock clock (`ProcessorClock`).
* ``close()`` ends the run; the state is saved (streaming: the store writes, the schedule and the
  stream time; replay: a `CARRY` row).

Forwarded records leave in emission order: a record's forwards take its `OUTPUT_POSITION` plus
their index, a punctuation's come after every record of their source position
(`PUNCTUATION_ORDER`), so the plan's order is the direct engine's depth-first order. A forward to
one child carries the child's name (`CHILD`); ``Lowering.parent`` gives each child its rows.
"""

from __future__ import annotations

import json
import time
from itertools import groupby
from typing import Any, Callable, Iterator, Mapping

import attrs
from pyspark.sql import DataFrame, Row
from pyspark.sql import functions as F
from pyspark.sql.streaming.stateful_processor import StatefulProcessor, StatefulProcessorHandle
from pyspark.sql.types import _parse_datatype_string

from streamsdsl import ir
from streamsdsl.compiler.carry import carry_out
from streamsdsl.compiler.columns import CARRIED_STATE, CARRY, CHILD, DROPPED, EVENT_METRIC, EVENT_VALUE, FINAL_KEY_ORDER
from streamsdsl.compiler.columns import FRAME_COLUMNS, HEADERS_TYPE, OPERATOR_OUTPUT_FIELDS, OUTPUT_POSITION
from streamsdsl.compiler.columns import POSITION_TYPE, SOURCE_POSITION
from streamsdsl.compiler.event_time import transform_with_state
from streamsdsl.compiler.frame import Frame, KeyCodec
from streamsdsl.compiler.jvm_operator import Backend
from streamsdsl.compiler.local_rows import local_frame
from streamsdsl.compiler.lowering import Lowering, PlanMode
from streamsdsl.errors import OperationNotDefinedError, PunctuationError, RecordError
from streamsdsl.operators.descriptions import ProcessDescription, description_of
from streamsdsl.operators.functions import result_error
from streamsdsl.processor.api import PunctuationType, Record, RecordMetadata, TaskId
from streamsdsl.processor.kernel import ProcessorKernel, Schedule, ScheduledPunctuation
from streamsdsl.records import DRIVER_APPLICATION_ID
from streamsdsl.state.backends import MemoryBackend
from streamsdsl.state.builders import StoreBuilder
from streamsdsl.state.stores import open_store
from streamsdsl.values.serdes import PlanSerde

__all__ = ["CHILD", "ProcessorClock", "TaskState", "TaskStoreBackend", "UserProcessorConfig", "UserProcessorOperator",
           "schedule_from_json", "schedule_to_json"]

#: The operator's grouping key: the task's partition.
TASK = "_task"
#: A row's source record's timestamp, which advances the task's stream time (null: the row does not tick).
TICK = "_tick"
#: Whether a row is a record for the processor (false: a tick or the carried state alone).
IS_RECORD = "_is_record"
#: The first `OUTPUT_POSITION` element of a punctuation's forwards (plus the processor's index
#: among the topology's processors): after every record of the source position it follows.
PUNCTUATION_ORDER = 1 << 60
#: The same for a wall-clock punctuation (after the stream-time ones of the same position).
WALL_CLOCK_ORDER = 1 << 61
#: The `OUTPUT_POSITION` of a tick row: after the records of its position.
TICK_ORDER = (1 << 62,)
#: The drop point of a processor's window or session store dropping the put of an expired
#: window (`streamsdsl.records.DROP_REASONS`).
EXPIRED_PUT = "expired-segment"

#: The state a replay carries per task (`CARRIED_STATE`): whether the task ran before, its stream
#: time, its schedule (`schedule_to_json`) and its stores' entries.
STATE_TYPE = ("struct<started:boolean,stream_time:bigint,schedule:string,"
              "stores:array<struct<name:string,entries:array<struct<k:binary,v:binary>>>>>")
#: Streaming: a task's clock and schedule (a ``ValueState`` of this name: no store name has a
#: space) and a store's entries (a ``MapState`` named after the store, which interactive queries
#: read: `streamsdsl.runtime.queries`).
TASK_STATE, TASK_STATE_SCHEMA = "task state", "stream_time bigint, schedule string"
STORE_KEY_SCHEMA, STORE_VALUE_SCHEMA = "k binary", "v binary"


# --- the schedule as data -------------------------------------------------------------------------


def schedule_to_json(schedule: Schedule) -> str:
    """A saved `Schedule` as JSON text (what a task's state holds between runs).

    >>> s = (ScheduledPunctuation(10, PunctuationType.STREAM_TIME, 20), ScheduledPunctuation(
    ...      1000, PunctuationType.WALL_CLOCK_TIME, 5000, True))
    >>> schedule_to_json(s)
    '[[10, "stream-time", 20, false], [1000, "wall-clock-time", 5000, true]]'
    >>> schedule_from_json(schedule_to_json(s)) == s
    True
    """
    return json.dumps([[p.interval_ms, p.type.value, p.due_ms, p.cancelled] for p in schedule])


def schedule_from_json(text: str | None) -> Schedule:
    """The `Schedule` `schedule_to_json` wrote (none: the empty schedule)."""
    return tuple(ScheduledPunctuation(int(i), PunctuationType(t), int(d), bool(c)) for i, t, d, c in json.loads(text or "[]"))


# --- what the plan passes -----------------------------------------------------------------------


@attrs.frozen
class ProcessorClock:
    """The test driver's clock for one replay run: the system time its processors see (the
    driver's mock wall clock), the one a task's first run initializes at (the clock when the
    driver was made, as the direct engine inits its processors then), whether the run is an
    ``advance_wall_clock_time`` (fire the wall-clock punctuators due), and the run's records'
    coordinates (pipe position → topic, offset) for ``record_metadata()``. Streaming has none:
    the system time is the executor's clock."""

    system_time: int
    initial_system_time: int
    punctuate_wall_clock: bool = False
    coordinates: Mapping[int, tuple[str, int]] = attrs.field(factory=dict)
    #: An advance's source position: the next pipe position (its forwards follow every record piped).
    position: int = -1


@attrs.frozen
class UserProcessorConfig:
    """What the operator needs on the executors (pickled with it)."""

    node: str
    supplier: Any
    stores: tuple[StoreBuilder, ...]
    children: tuple[str, ...]
    fixed_key: bool
    in_key: KeyCodec
    in_value: PlanSerde
    out_key: KeyCodec
    out_value: PlanSerde
    application_id: str
    subtopology: int
    #: The processor's index among the topology's processors (orders punctuations' forwards).
    index: int
    #: The task's source topics (``record_metadata().topic`` when streaming: the only one, else
    #: the first; replay reads the run's coordinates).
    topics: tuple[str, ...]
    clock: ProcessorClock | None = None
    #: Whether the operator's output keeps `CHILD` (a processor with several children).
    routed: bool = False

    @property
    def replay(self) -> bool:
        return self.clock is not None


# --- a task's stores on Spark's state -------------------------------------------------------------


class TaskStoreBackend:
    """A `streamsdsl.state.StoreBackend` over one store's entries of one task, for one run.

    Streaming, over a ``MapState`` of key bytes to value bytes: a point read asks the map (once
    per key and run), a scan or a count reads the map whole (once per run); writes stay here
    until `flush` writes the changed keys back at the end of the run. Replay: over the entries
    carried from the previous run (``entries``), all known from the start; ``on_write`` is
    called with every entry after each write (the test driver's writes between runs)."""

    def __init__(self, state: Any = None, entries: Any = (),
                 on_write: Callable[[list[tuple[bytes, bytes]]], None] | None = None) -> None:
        self._state, self._on_write = state, on_write
        self._mem = MemoryBackend()
        for k, v in entries:
            self._mem.put(bytes(k), bytes(v))
        self._absent: set[bytes] = set()
        self._dirty: set[bytes] = set()
        self._complete = state is None

    def _load(self) -> None:
        if self._complete:
            return
        mem, dirty = self._mem, self._dirty
        for (k,), (v,) in self._state.iterator():
            k = bytes(k)
            if k not in dirty and mem.get(k) is None:
                mem.put(k, bytes(v))
        self._complete = True

    def get(self, key: bytes) -> bytes | None:
        found = self._mem.get(key)
        if found is not None or self._complete or key in self._absent:
            return found
        stored = self._state.getValue((key,))
        if stored is None:
            self._absent.add(key)
            return None
        value = bytes(stored[0])
        self._mem.put(key, value)
        return value

    def put(self, key: bytes, value: bytes) -> None:
        self._mem.put(key, value)
        self._absent.discard(key)
        self._dirty.add(key)
        if self._on_write is not None:
            self._on_write(self.entries())

    def delete(self, key: bytes) -> None:
        self._mem.delete(key)
        self._absent.add(key)
        self._dirty.add(key)
        if self._on_write is not None:
            self._on_write(self.entries())

    def scan(self, lower: bytes | None = None, upper: bytes | None = None,
             reverse: bool = False) -> Iterator[tuple[bytes, bytes]]:
        self._load()
        return self._mem.scan(lower, upper, reverse)

    def count(self) -> int:
        self._load()
        return self._mem.count()

    def entries(self) -> list[tuple[bytes, bytes]]:
        """Every entry, in key order (replay: what the run carries on)."""
        return list(self.scan())

    def flush(self) -> None:
        """Write this run's changes to the map state."""
        for key in self._dirty:
            value = self._mem.get(key)
            if value is None:
                self._state.removeKey((key,))
            else:
                self._state.updateValue((key,), (value,))
        self._dirty = set()


@attrs.frozen
class TaskState:
    """A task's state between runs: whether it ran, its stream time and its saved schedule."""

    started: bool = False
    stream_time: int = -1
    schedule: Schedule = ()


# --- the operator -------------------------------------------------------------------------------


def _now_ms() -> int:
    return int(time.time() * 1000)


class UserProcessorOperator(StatefulProcessor):
    """One task's run of a processor node per call (see the module)."""

    def __init__(self, config: UserProcessorConfig) -> None:
        self.config = config
        fields = [*OPERATOR_OUTPUT_FIELDS]
        if config.routed:
            fields.append(CHILD)
        if config.replay:
            fields.append(CARRIED_STATE)
        self.fields = tuple(fields)
        self.out = Row(*self.fields)

    def init(self, handle: StatefulProcessorHandle) -> None:
        cfg = self.config
        self.handle = handle
        if not cfg.replay:
            self.task_state = handle.getValueState(TASK_STATE, TASK_STATE_SCHEMA)
            self.maps = [handle.getMapState(b.name, STORE_KEY_SCHEMA, STORE_VALUE_SCHEMA) for b in cfg.stores]

    # -- state ---------------------------------------------------------------------------------
    def _restore(self, carried: Any) -> tuple[TaskState, list[TaskStoreBackend]]:
        cfg = self.config
        if cfg.replay:
            backends = task_stores(carried, cfg.stores)
            state = TaskState() if carried is None else TaskState(
                bool(carried["started"]), int(carried["stream_time"]), schedule_from_json(carried["schedule"]))
            return state, [backends[b.name] for b in cfg.stores]
        backends = [TaskStoreBackend(state=m) for m in self.maps]
        if not self.task_state.exists():
            return TaskState(), backends
        stream_time, schedule = self.task_state.get()  # type: ignore[misc]
        return TaskState(True, int(stream_time), schedule_from_json(schedule)), backends

    def _saved(self, task: int, state: TaskState, backends: list[TaskStoreBackend]) -> Iterator[Row]:
        cfg = self.config
        if cfg.replay:
            carried = {"started": True, "stream_time": state.stream_time, "schedule": schedule_to_json(state.schedule),
                       "stores": [{"name": b.name, "entries": [{"k": k, "v": v} for k, v in backend.entries()]}
                                  for b, backend in zip(cfg.stores, backends)]}
            values = {f: None for f in self.fields}
            values.update({"timestamp": -1, "headers": [], SOURCE_POSITION: -1, OUTPUT_POSITION: [],
                           EVENT_METRIC: CARRY, EVENT_VALUE: float(task), CARRIED_STATE: carried})
            yield self.out(*(values[f] for f in self.fields))
            return
        for backend in backends:
            backend.flush()
        self.task_state.update((state.stream_time, schedule_to_json(state.schedule)))

    # -- a run -----------------------------------------------------------------------------------
    def handleInputRows(self, key: Any, rows: Iterator[Row], timerValues: Any) -> Iterator[Row]:  # noqa: N802,N803
        cfg = self.config
        task = int(key[0])
        data = sorted((r.asDict(recursive=False) for r in rows),
                      key=lambda r: (r[SOURCE_POSITION], list(r[OUTPUT_POSITION] or ())))
        carried = None
        if cfg.replay:
            while data and data[0].get(CARRIED_STATE) is not None:
                carried = data.pop(0)[CARRIED_STATE]
        state, backends = self._restore(carried)
        clock = cfg.clock
        system_time = clock.system_time if clock is not None else _now_ms()
        first_time = system_time if state.started or clock is None else clock.initial_system_time
        out: list[Row] = []
        self._out = out
        self._position, self._prefix, self._emitted, self._timestamp = -1, [], 0, -1
        stores = {b.name: open_store(b, backend) for b, backend in zip(cfg.stores, backends)}
        for store in stores.values():
            if hasattr(store, "on_expired"):  # a window or session store's dropped put, counted as Kafka does
                store.on_expired = self._expired_put
        stream_time = state.stream_time
        try:
            kernel = ProcessorKernel(
                cfg.node, cfg.supplier, stores, task=TaskId(cfg.subtopology, task), application_id=cfg.application_id,
                forward=self._forward, fixed_key=cfg.fixed_key, children=cfg.children, schedule=state.schedule,
                stream_time=stream_time, system_time=first_time)
            last = -1
            for position, group in groupby(data, key=lambda r: r[SOURCE_POSITION]):
                rows_at = list(group)
                ticks = [r[TICK] for r in rows_at if r[TICK] is not None]
                if ticks:
                    stream_time = max(stream_time, *ticks)
                last = position
                if clock is None:  # the executor's clock, as the task reads it per record
                    system_time = _now_ms()
                for r in rows_at:
                    if not r[IS_RECORD]:
                        continue
                    self._position, self._prefix, self._emitted = position, list(r[OUTPUT_POSITION] or ()), 0
                    self._timestamp = r["timestamp"]
                    record = Record(cfg.in_key.from_cell(r["key"]), cfg.in_value.from_internal(r["value"]),
                                    r["timestamp"], _headers_in(r["headers"]))
                    kernel.process(record, self._metadata(task, position), stream_time, system_time, position=position)
                if ticks:
                    self._position, self._prefix, self._emitted = position, [PUNCTUATION_ORDER + cfg.index], 0
                    kernel.punctuate(PunctuationType.STREAM_TIME, stream_time)
            if clock is None or clock.punctuate_wall_clock:
                if clock is None:
                    system_time = _now_ms()
                else:
                    last = clock.position
                self._position, self._prefix, self._emitted = last, [WALL_CLOCK_ORDER + cfg.index], 0
                kernel.punctuate(PunctuationType.WALL_CLOCK_TIME, system_time)
            schedule = kernel.saved_schedule()
            kernel.close()
        except PunctuationError as error:
            if error.position is None and self._position >= 0:
                error.position = self._position
            raise error.in_worker() from error
        except RecordError as error:
            raise error.in_worker() from error
        out.extend(self._saved(task, TaskState(True, stream_time, schedule), backends))
        return iter(out)

    def _metadata(self, task: int, position: int) -> RecordMetadata:
        cfg = self.config
        if cfg.clock is not None:
            topic, offset = cfg.clock.coordinates.get(position, (cfg.topics[0] if cfg.topics else "", position))
            return RecordMetadata(topic, 0, offset)
        return RecordMetadata(cfg.topics[0] if cfg.topics else "", task, position & ((1 << 40) - 1))

    def _forward(self, record: Record, child: str | None) -> None:
        cfg = self.config
        try:
            key = cfg.out_key.to_cell(record.key)
            value = cfg.out_value.to_internal(record.value)
        except Exception as exc:  # noqa: BLE001 - a forwarded record its encoding cannot hold
            raise result_error(cfg.node, "process", exc, repr(record.key), self._position).in_worker() from exc
        values = [key, value, record.timestamp, _headers_out(record.headers), self._position,
                  [*self._prefix, self._emitted], None, None, None]
        self._emitted += 1
        if cfg.routed:
            values.append(child)
        if cfg.replay:
            values.append(None)
        self._out.append(self.out(*values))

    def _expired_put(self) -> None:
        """A drop event (`DROPPED`) for a put of an expired window: counted after the operator."""
        values = {f: None for f in self.fields}
        values.update({"timestamp": self._timestamp, "headers": [], SOURCE_POSITION: self._position,
                       OUTPUT_POSITION: [], EVENT_METRIC: DROPPED, EVENT_VALUE: 1.0})
        self._out.append(self.out(*(values[f] for f in self.fields)))

    def close(self) -> None:
        pass


def _headers_in(headers: Any) -> tuple[tuple[str, bytes | None], ...]:
    return tuple((h["key"], None if h["value"] is None else bytes(h["value"])) for h in headers or ())


def _headers_out(headers: Any) -> list[tuple[str, bytes | None]]:
    return [(name, value) for name, value in headers]


# --- the lowering rule ----------------------------------------------------------------------------


def _processors(topology: Any) -> list[str]:
    return [n.name for n in topology.topological_order() if isinstance(n, ir.ProcessNode)]


#: Node types that pass each record on once, with its timestamp: a processor below a chain of
#: them reads every source record itself, so its records tick and no tick rows are needed.
_ONE_FOR_ONE = (ir.MapNode, ir.MapValuesNode, ir.SelectKeyNode, ir.PeekNode)


def _records_tick(topology: Any, node: ir.ProcessNode, sources: list[str]) -> bool:
    """Whether every record of the processor's task reaches it once, unchanged in time (one
    source, then only one-for-one steps): its own records then advance the stream time."""
    if len(sources) != 1:
        return False
    current = topology.node(node.parents[0])
    while not isinstance(current, ir.SourceNode):
        if not isinstance(current, _ONE_FOR_ONE) or len(current.parents) != 1:
            return False
        current = topology.node(current.parents[0])
    return current.name == sources[0] and not isinstance(current, ir.TableSourceNode)


def _subtopology(topology: Any, name: str) -> int:
    for sub in topology.describe().subtopologies:
        if any(n.name == name for n in sub.nodes):
            return int(sub.id)
    return 0


def _process(self: Lowering, node: ir.ProcessNode) -> Frame:
    topology = self.topology
    frame = self.parent(node)
    d: ProcessDescription = description_of(node, [frame], topology)
    replay = self.mode is PlanMode.REPLAY
    clock: ProcessorClock | None = getattr(self, "processor_clock", None)
    if replay and clock is None:
        clock = ProcessorClock(0, 0)
    shared = [b.name for b in d.stores if any(isinstance(n, ir.ProcessNode) and n.name != node.name
                                               and b.name in n.store_names for n in topology.nodes)]
    if shared:
        raise OperationNotDefinedError(
            f"{node.name}: state store {shared[0]!r} is connected to more than one processor; on Spark each processor "
            "keeps its own stores, so a store shared by processors runs on the direct engine only (engine='direct'). "
            "Give each processor its own store, or do both steps in one processor.")
    ancestors = topology.ancestors(node.name)
    sources = [n.name for n in topology.topological_order() if isinstance(n, ir.SourceNode)
               and (replay or n.name in ancestors)]
    own_ticks = _records_tick(topology, node, sources)
    routed = len(d.children) > 1
    config = UserProcessorConfig(
        node.name, d.supplier, d.stores, d.children, node.fixed_key, frame.key, frame.value, d.key, d.value,
        getattr(self, "application_id", DRIVER_APPLICATION_ID), 0 if replay else _subtopology(topology, node.name),
        _processors(topology).index(node.name), topology.upstream_topics(node.name), clock, routed)
    self.choices.record(node.name, Backend.PYTHON, "user processors run on the Python operator, one task per partition")

    task = F.lit(0) if replay else F.shiftright(F.col(SOURCE_POSITION), 40)
    inp = frame.df.select(
        task.cast("int").alias(TASK), "key", "value", "timestamp", "headers", SOURCE_POSITION, OUTPUT_POSITION,
        (F.col("timestamp") if own_ticks else F.lit(None)).cast("bigint").alias(TICK), F.lit(True).alias(IS_RECORD))
    key_type, value_type = inp.schema["key"].dataType, inp.schema["value"].dataType
    if not own_ticks:
        for source in sources:
            source_frame = self.frames.get(source) or self.lower(topology.node(source))
            self.frames[source] = source_frame
            records = source_frame.table_records if source_frame.table_records is not None else source_frame.df
            inp = inp.unionByName(records.select(
                task.cast("int").alias(TASK), F.lit(None).cast(key_type).alias("key"),
                F.lit(None).cast(value_type).alias("value"), "timestamp", F.array().cast(HEADERS_TYPE).alias("headers"),
                SOURCE_POSITION, F.array(*[F.lit(x).cast("bigint") for x in TICK_ORDER]).alias(OUTPUT_POSITION),
                F.col("timestamp").cast("bigint").alias(TICK), F.lit(False).alias(IS_RECORD)))
    if replay:
        inp = _with_task_states(self, inp, node.name)

    processor = UserProcessorOperator(config)
    types = {"key": d.key.spark_type, "value": d.value.spark_type, "timestamp": "bigint", "headers": HEADERS_TYPE,
             SOURCE_POSITION: "bigint", OUTPUT_POSITION: POSITION_TYPE, FINAL_KEY_ORDER: "string",
             EVENT_METRIC: "string", EVENT_VALUE: "double", CHILD: "string", CARRIED_STATE: STATE_TYPE}
    schema = _parse_datatype_string(", ".join(f"`{f}` {types[f]}" for f in processor.fields))
    out = transform_with_state(not replay, topology, node.name, inp.groupBy(TASK), processor, schema, "None")
    if replay:
        out = carry_out(self, out, node.name, F.col(EVENT_VALUE).cast("int"), "int", STATE_TYPE)
    metric = F.col(EVENT_METRIC)
    if any(b.kind in ("window", "session") for b in d.stores):
        out = self.observe(out, node.name, EXPIRED_PUT, dropped=F.when(metric == DROPPED, F.col(EVENT_VALUE)))
    columns = [*FRAME_COLUMNS, CHILD] if routed else list(FRAME_COLUMNS)
    out = out.filter(metric.isNull()).select(*columns)
    if routed:
        self.routed[node.name] = True
    return Frame(out, d.key, d.value)


def _with_task_states(lowering: Any, inp: DataFrame, node: str) -> DataFrame:
    """``inp`` with a `CARRIED_STATE` column and one row per task the previous run left state
    for (the driver's task 0_0 always: it runs in every replay, for its wall-clock punctuators)."""
    inp = inp.withColumn(CARRIED_STATE, F.lit(None).cast(STATE_TYPE))
    rows = list(lowering.carry.states.get(node) or ())
    if not any(int(task) == 0 for task, _ in rows):
        rows.append((0, {"started": False, "stream_time": -1, "schedule": "[]", "stores": []}))
    states = local_frame(inp.sparkSession, rows, f"task int, state {STATE_TYPE}")
    filler = {c: F.lit(None).cast(inp.schema[c].dataType) for c in inp.columns}
    filler.update({TASK: F.col("task"), CARRIED_STATE: F.col("state"), SOURCE_POSITION: F.lit(-1).cast("bigint"),
                   OUTPUT_POSITION: F.array().cast(POSITION_TYPE), IS_RECORD: F.lit(False)})
    return inp.unionByName(states.select(*[filler[c].alias(c) for c in inp.columns]))


def task_stores(carried: Any, builders: tuple[StoreBuilder, ...]) -> dict[str, TaskStoreBackend]:
    """A replay's carried task state (`STATE_TYPE`; None: a task that has not run) as one backend
    per store."""
    entries = {s["name"]: s["entries"] or [] for s in (carried["stores"] or [])} if carried else {}
    return {b.name: TaskStoreBackend(entries=[(e["k"], e["v"]) for e in entries.get(b.name, [])]) for b in builders}


def carried_with_store(carried: Any, name: str, entries: list[tuple[bytes, bytes]]) -> dict[str, Any]:
    """A replay's carried task state with store ``name``'s entries replaced (the test driver's
    writes to a processor's store between runs)."""
    state = {"started": False, "stream_time": -1, "schedule": "[]", "stores": []} if carried is None else {
        "started": bool(carried["started"]), "stream_time": int(carried["stream_time"]),
        "schedule": carried["schedule"], "stores": [{"name": s["name"], "entries": s["entries"]}
                                                    for s in carried["stores"] or [] if s["name"] != name]}
    state["stores"].append({"name": name, "entries": [{"k": k, "v": v} for k, v in entries]})
    return state
