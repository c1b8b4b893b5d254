"""The direct engine: the topology's IR interpreted in the test process, without Spark.

`Run` builds one step per node a sink depends on (`streamsdsl.direct.steps`,
`streamsdsl.direct.stateful`) and processes one piped record at a time, depth first, as a
Kafka Streams task does: the record goes through every step it reaches, and what the sinks
receive is returned before the next record is processed. User functions and serdes are called
directly, the stateful steps run the same kernels as the Spark operators, and values are held
in the same encodings as in the Spark plan, so the two engines agree record for record.
"""

from __future__ import annotations

import logging
from typing import Any, Callable, NamedTuple

from streamsdsl import ir
from streamsdsl.direct.processors import ProcessStep, TaskStores
from streamsdsl.direct.records import Headers, Typed
from streamsdsl.direct.rules import rule_for
from streamsdsl.direct.stateful import StatefulStep
from streamsdsl.direct.steps import SinkStep, SourceStep, Step
from streamsdsl.dsl.options import DeserializationHandler
from streamsdsl.errors import OperationNotDefinedError, RecordError
from streamsdsl.processor import PunctuationQueue, PunctuationType
from streamsdsl.semantics.kernels import FlushPolicy
from streamsdsl.records import DRIVER_APPLICATION_ID

__all__ = ["Emitted", "Run"]

log = logging.getLogger("streamsdsl")


class Emitted(NamedTuple):
    """A record written to an output topic (``topic`` None: the dead-letter output)."""

    topic: str | None
    key: bytes | None
    value: bytes | None
    timestamp: int
    headers: Headers


#: The nodes whose steps read a table's records rather than its changelog (on a table-records channel).
_TABLE_READERS = (ir.TableTableJoinNode, ir.ForeignKeyJoinNode)


class Run:
    """One topology in the direct engine: its steps, their state, the metrics so far."""

    def __init__(self, topology: Any, *, handler: DeserializationHandler = DeserializationHandler.LOG_AND_FAIL,
                 flush: FlushPolicy = FlushPolicy.PER_RECORD, application_id: str = DRIVER_APPLICATION_ID,
                 system_time: int = 0) -> None:
        self.topology = topology
        self.handler = handler
        self.flush = flush
        self.application_id = application_id
        #: The task's stream time (the largest timestamp read so far; -1: none) and the system
        #: time (the driver's mock wall clock), as the processors' context gives them.
        self.stream_time = -1
        self.system_time = system_time
        self.task_stores = TaskStores(topology.state_stores, self._expired_put)
        #: The task's punctuation queue, shared by its processors (Kafka's per task).
        self.punctuations = PunctuationQueue()
        self.processors: list[ProcessStep] = []
        self.steps: dict[str, Step] = {}
        self.readers: dict[str, tuple[SourceStep, Step]] = {}
        self._pattern_readers: list[tuple[ir.SourceNode, tuple[SourceStep, Step]]] = []
        #: The topics of global tables: their records update the tables and not stream time.
        self.global_topics: set[str] = set()
        self.sinks: list[SinkStep] = []
        self.stateful: list[StatefulStep] = []
        #: The record being processed: its pipe position, (topic, partition, offset) and timestamp.
        self.position = -1
        self.coordinates: tuple[str, int, int] = ("", 0, -1)
        self.timestamp = -1
        self.dropped = 0
        self.finals: list[int] = []
        self._emitted: list[Emitted] = []
        self._build()

    # -- building ------------------------------------------------------------------------------
    def _needed(self) -> set[str]:
        """The nodes a sink, a processor or a named store depends on (`Topology.runs_unread`: a
        processor runs for its stores and punctuators, a named store for its queries, even when
        nothing reads their output)."""
        return self.topology.ancestors(*(s.name for s in self.topology.sinks), *self.topology.runs_unread())

    def _build(self) -> None:
        topology = self.topology
        needed = self._needed()
        for node in topology.topological_order():
            if node.name not in needed:
                continue
            parents = [self.steps[p].typed for p in node.parents]
            step = self._step(node, parents)
            self.steps[node.name] = step
            if isinstance(step, StatefulStep):
                self.stateful.append(step)
            if isinstance(step, ProcessStep):
                self.processors.append(step)
            self._wire(node, step)

    def _step(self, node: ir.Node, parents: list[Typed]) -> Step:
        """The step of ``node``, by the rule of its type (`streamsdsl.direct.rules.RULES`); a
        source's (and a source table's) topics are read into it, a sink is one of the outputs."""
        rule = rule_for(type(node))
        if rule is None:
            raise OperationNotDefinedError(f"No direct-engine step for IR node type {type(node).__name__} ({node.name}).")
        step = rule(node, parents, self)
        if isinstance(step, SinkStep):
            self.sinks.append(step)
        if isinstance(node, ir.SourceNode):
            self._read(node, step)
        return step

    def _read(self, node: ir.SourceNode, target: Step) -> None:
        reader = target if isinstance(target, SourceStep) else SourceStep(node, target.typed, self)
        for topic in node.topics:
            self.readers[topic] = (reader, target)
            if isinstance(node, ir.GlobalTableSourceNode):
                self.global_topics.add(topic)
        if node.pattern is not None:
            self._pattern_readers.append((node, (reader, target)))

    def _reader(self, topic: str) -> tuple[SourceStep, Step]:
        """The source step reading ``topic``: the one naming it, else the one whose pattern
        matches it (the driver routed the topic to exactly one source)."""
        found = self.readers.get(topic)
        if found is None:
            found = next(r for node, r in self._pattern_readers if node.reads(topic))
            self.readers[topic] = found
        return found

    def _wire(self, node: ir.Node, step: Step) -> None:
        if isinstance(node, ir.SuppressNode) and node.mode == "until_window_closes":
            return  # folded into its aggregation, which feeds it its own input (`AggregateStep.folded`)
        for port, name in enumerate(node.parents):
            parent = self.steps[name]
            reads_records = isinstance(node, _TABLE_READERS) or (
                isinstance(node, (ir.StreamTableJoinNode, ir.GlobalTableJoinNode)) and port == 1)
            table_step = isinstance(node, (ir.TableFilterNode, ir.TableMapValuesNode))
            if parent.keeps_records and (reads_records or table_step):
                parent.record_children.append((step, port))
                if reads_records:
                    continue
            parent.children.append((step, port))

    def keeps_records(self, name: str) -> bool:
        """Whether the step of ``name`` forwards a table's records besides its changelog."""
        return self.steps[name].keeps_records

    # -- running -------------------------------------------------------------------------------
    def emit(self, topic: str | None, key: bytes | None, value: bytes | None, timestamp: int, headers: Headers) -> None:
        self._emitted.append(Emitted(topic, key, value, timestamp, tuple(headers)))

    def dead_letter(self, key: bytes | None, value: bytes | None, timestamp: int, headers: Headers) -> None:
        self.emit(None, key, value, timestamp, headers)

    def process(self, topic: str, key: bytes | None, value: bytes | None, timestamp: int, headers: Headers,
                position: int, offset: int) -> list[Emitted]:
        """Process one piped record; return what it wrote. A record that fails leaves no trace
        (state, metrics, output) and raises its `RecordError` (with its pipe position)."""
        self.position, self.coordinates, self.timestamp = position, (topic, 0, offset), timestamp
        reader, target = self._reader(topic)

        def run() -> None:
            record = reader.read(key, value, timestamp, headers)
            if record is not None and topic in self.global_topics:  # the global thread: no stream time
                target.receive(record, 0)
            elif record is not None:
                self.stream_time = max(self.stream_time, record.timestamp)
                target.receive(record, 0)
                try:
                    self._punctuate(PunctuationType.STREAM_TIME, self.stream_time)
                except RecordError as error:
                    # the record's processing triggered the punctuation: it is where the driver stops
                    error.position = position if error.position is None else error.position
                    raise

        return self._transaction(run)

    def advance_wall_clock(self, now: int) -> list[Emitted]:
        """The system time is ``now``: the idle aggregations (idle close) close every key's open
        windows (in topological order, what each forwards going on depth first), then the
        wall-clock punctuators due fire; return what they wrote."""
        self.system_time = now
        self.position, self.coordinates, self.timestamp = -1, ("", -1, -1), -1

        def work() -> None:
            for step in self.stateful:
                close_idle = getattr(step, "close_idle", None)
                if close_idle is not None:
                    close_idle(now)
            self._punctuate(PunctuationType.WALL_CLOCK_TIME, now)

        return self._transaction(work)

    def _punctuate(self, type: PunctuationType, now: int) -> None:
        self.punctuations.punctuate(type, now)

    def _expired_put(self, store: str) -> None:
        """A processor's window or session store dropped the put of an expired window: counted
        and logged, as Kafka Streams' store does."""
        self.dropped += 1
        topic, partition, offset = self.coordinates
        log.warning("%s: Skipping record for expired segment. topic=[%s] partition=[%s] offset=[%s]", store, topic,
                    partition, offset)

    def _transaction(self, work: Callable[[], None]) -> list[Emitted]:
        """Run ``work`` (a record, or punctuations), then commit the record caches (Kafka's
        commit); if it fails, leave no trace (state, metrics, output) and raise its `RecordError`."""
        self._emitted = []
        dropped, finals, stream_time = self.dropped, len(self.finals), self.stream_time
        for step in self.stateful:
            step.begin()
        self.task_stores.begin()
        try:
            work()
            for step in self.stateful:  # in topological order: a flush reaches the caches below it
                step.commit()
        except RecordError:
            for step in self.stateful:
                step.rollback()
            self.task_stores.rollback()
            self.dropped, self.finals[finals:], self.stream_time = dropped, [], stream_time
            self._emitted = []
            raise
        return self._emitted

    def close(self) -> None:
        """Close every processor (its ``close()``), as Kafka's driver closes its task."""
        for step in self.processors:
            step.close()

    # -- reading -------------------------------------------------------------------------------
    def sink_for_topic(self, topic: str) -> SinkStep | None:
        return next((s for s in self.sinks if s.topic == topic), None)

    def store_entries(self, name: str) -> list[tuple[Any, int, int, Any, int]]:
        """What the aggregation ``name`` holds: (key, start, end, value, timestamp) per window."""
        step = self.steps.get(name)
        if step is None:
            return []
        step = getattr(step, "store_of", step)
        return step.store_entries()

