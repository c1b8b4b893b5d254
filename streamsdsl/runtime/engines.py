"""The three engines of the `TopologyTestDriver`.

* ``direct`` (`DirectDriverEngine`, the default) runs the topology in the test process on the
  direct engine (`streamsdsl.direct`): no JVM, milliseconds per test.
* ``spark`` (`SparkDriverEngine`) runs the topology's compiled Spark plan in replay mode: a batch
  job over the records piped since its previous run, with the state carried from run to run —
  the plan a streaming query runs, with per-record stream time.
* ``streaming`` (`StreamingDriverEngine`) runs the compiled plan as a streaming query, each
  piped record its own micro-batch (one file of a `streamsdsl.io.files.FileTopic`): stream time
  is the watermark of the records before it, raised by the record itself, which is Kafka's
  stream time record for record; windows close on Spark's event-time timers.

Both take the records piped since their previous run and return what the topology wrote; a
record that fails raises its `RecordError` with the record's pipe position, after the records
before it have been processed (their output is returned by the next call).
"""

from __future__ import annotations

import enum
import functools
import os
from typing import TYPE_CHECKING, Any, Callable, Iterable, Sequence

import attrs

from streamsdsl.errors import InvalidArgumentError, OperationNotDefinedError, RecordError, TopologyError
from streamsdsl.runtime.connect import ConnectUnsupportedError, is_connect, quiet_global_windows
from streamsdsl.runtime.failures import locate
from streamsdsl.runtime.metrics import TASK_METRICS, Metrics
from streamsdsl.runtime.stores import StoreEntry, join_window_entries
from streamsdsl.runtime.topics import reads_topic
from streamsdsl.compiler.local_rows import local_frame
from streamsdsl.ir import nodes as ir_nodes
from streamsdsl.ir import ForeignKeyJoinNode, GlobalTableJoinNode, GlobalTableSourceNode
from streamsdsl.ir.processors import ProcessNode

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from streamsdsl import ir
    from streamsdsl.compiler import CompiledTopology
    from streamsdsl.ir.topology import Topology
    from streamsdsl.runtime.config import DriverConfig

__all__ = ["ENGINE_ENV", "Engine", "RawRecord", "SinkSerdes", "engine_choice"]

#: The environment variable that switches every driver of a process to one engine.
ENGINE_ENV = "STREAMSDSL_TEST_ENGINE"


class Engine(enum.Enum):
    """Where a `TopologyTestDriver` runs the topology."""

    DIRECT = "direct"
    SPARK = "spark"
    STREAMING = "streaming"


def engine_choice(engine: Engine | str | None) -> Engine:
    """The engine asked for (``None``: `ENGINE_ENV`, else ``direct``)."""
    if engine is None:
        engine = os.environ.get(ENGINE_ENV) or Engine.DIRECT.value
        source = f"the environment variable {ENGINE_ENV}"
    else:
        source = "'engine'"
    if isinstance(engine, Engine):
        return engine
    try:
        return Engine(str(engine).strip().lower())
    except ValueError:
        raise InvalidArgumentError(
            f"{source} must be 'direct' (in the test process, no Spark), 'spark' (the compiled Spark plan) or "
            f"'streaming' (the compiled plan as a streaming query, a micro-batch per record) (got {engine!r}).") from None


@attrs.frozen
class RawRecord:
    """A record on a topic, as bytes: piped into the driver or written by the topology."""

    topic: str
    key: bytes | None
    value: bytes | None
    timestamp: int
    headers: tuple[tuple[str, bytes | None], ...]


@attrs.frozen
class SinkSerdes:
    """What reading a sink topic needs: the key layout, and the serdes the sink writes with."""

    key_codec: Any
    key_serde: Any
    value_serde: Any

    def key_reader(self) -> Any:
        return self.key_codec.with_serde(self.key_serde).reader()


class DirectDriverEngine:
    """The direct engine behind a driver."""

    def __init__(self, topology: Topology, config: DriverConfig, wall_clock_ms: int) -> None:
        from streamsdsl.direct import Run

        self.config = config
        self.run_ = Run(topology, handler=config.deserialization_handler, flush=config.flush,
                        application_id=config.application_id, system_time=wall_clock_ms)
        self._dlq = config.dead_letter_topic

    def run(self, records: Sequence[RawRecord], offsets: Sequence[int], start: int, end: int) -> list[RawRecord]:
        out: list[RawRecord] = []
        for position in range(start, end):
            r = records[position]
            try:
                emitted = self.run_.process(r.topic, r.key, r.value, r.timestamp, r.headers, position,
                                            offsets[position])
            except RecordError as error:
                raise _Failed(out, error) from error
            out += self._raw(emitted)
        return out

    def _raw(self, emitted: Sequence[Any]) -> list[RawRecord]:
        """The records written, the dead-letter output's to its topic (dropped when none is set)."""
        out = []
        for e in emitted:
            topic = e.topic if e.topic is not None else self._dlq
            if topic is not None:
                out.append(RawRecord(topic, e.key, e.value, e.timestamp, e.headers))
        return out

    def metrics(self) -> dict[str, float]:
        m = Metrics()
        m.add_counts(self.run_.dropped, self.run_.finals)
        snapshot = m.snapshot()
        return {name: snapshot[name] for name in TASK_METRICS}

    def store_entries(self, node: ir.Node, store: str) -> list[StoreEntry]:
        if isinstance(node, ir_nodes.StreamStreamJoinNode):  # key → StreamJoinState, each side's buffer
            step = self.run_.steps.get(node.name)
            states = getattr(step, "state", {})
            return _join_store(node, store, states.items())
        return [StoreEntry(*e) for e in self.run_.store_entries(node.name)]

    def sink(self, topic: str) -> SinkSerdes:
        step = self.run_.sink_for_topic(topic)
        assert step is not None, topic
        return SinkSerdes(step.typed.key, step.key_serde, step.value_serde)

    def processor_store(self, name: str) -> Any:
        """The processor store ``name`` (the store object the processors use)."""
        return self.run_.task_stores.store(name)

    def advance_wall_clock(self, now: int) -> list[RawRecord]:
        """Fire the wall-clock punctuators due at ``now``; what they wrote."""
        try:
            emitted = self.run_.advance_wall_clock(now)
        except RecordError as error:
            raise _Failed([], error) from error
        return self._raw(emitted)

    def close(self) -> None:
        """Close the processors (nothing else outlives the driver's process)."""
        self.run_.close()


def _join_store(node: ir.StreamStreamJoinNode, store: str, states: Iterable[tuple[Any, Any]]) -> list[StoreEntry]:
    """The window store ``store`` of a stream–stream join from its key states (`StreamJoinState`):
    the this-side store holds the left records, the other-side store the right ones
    (`streamsdsl.runtime.stores.join_window_entries`)."""
    side = "left" if store == node.this_store else "right"
    return join_window_entries(((k, getattr(s, side)) for k, s in states), node.windows.size_ms)


class _Failed(Exception):
    """A run that stopped at a failed record: the output of the records before it, and the error."""

    def __init__(self, output: list[RawRecord], error: RecordError) -> None:
        super().__init__(str(error))
        self.output, self.error = output, error


def _driver_session(topology: Topology, config: DriverConfig, spark: SparkSession | None) -> SparkSession:
    """The session a Spark-backed engine runs on: ``spark``, else the active one or a local one
    with the config's ``spark.*`` settings; a topology with stores needs its RocksDB state store."""
    from streamsdsl.runtime.session import get_session, require_state_store

    if spark is None:
        spark = get_session(conf=config.spark_conf)
    if topology.store_names or any(isinstance(n, ProcessNode) for n in topology.nodes):  # a processor's task state
        require_state_store(spark)
    return spark


class SparkDriverEngine:
    """The compiled Spark plan behind a driver, in replay mode (see the module docs)."""

    def __init__(self, topology: Topology, config: DriverConfig, spark: SparkSession | None,
                 wall_clock_ms: int = 0) -> None:
        from streamsdsl.compiler.modes import ReplayCarry

        self.topology, self.config, self.spark = topology, config, _driver_session(topology, config, spark)
        self._metrics = Metrics()
        self._carry = ReplayCarry()
        self._compiled: CompiledTopology | None = None
        #: The topics piped so far: a pattern source reads those its pattern matches.
        self._topics: set[str] = set()
        #: The driver's mock wall clock: when it was made (a processor task's first ``init``) and now.
        self._initial_wall_clock = self._wall_clock = wall_clock_ms
        #: Per idle-close aggregation, the last input time at which an advance closed it idle.
        self._idle_closed: dict[str, int] = {}

    def _records_ddl(self) -> str:
        from streamsdsl.compiler.columns import SOURCE_POSITION
        from streamsdsl.records import RAW_RECORD_DDL

        return f"{RAW_RECORD_DDL}, {SOURCE_POSITION} bigint"

    @quiet_global_windows
    def compile(self, records: DataFrame | None = None, clock: Any = None, positions: int | None = None) -> CompiledTopology:
        """The plan of a run over ``records`` (the records piped since the previous run), or
        without records the plan's sinks and serdes; ``clock``: the processors' (`ProcessorClock`);
        ``positions``: how many records ``records`` holds (`CompileOptions.positions`)."""
        from streamsdsl.compiler import PlanMode, compile_topology
        from streamsdsl.compiler.plan import CompileOptions

        if records is None:
            if self._compiled is None:
                self._compiled = self.compile(local_frame(self.spark, [], self._records_ddl()))
            return self._compiled
        options = CompileOptions(PlanMode.REPLAY, self.config.operator, self.config.deserialization_handler,
                                 self._carry, self.config.flush, application_id=self.config.application_id,
                                 processor_clock=clock or self._clock(), positions=positions)
        return compile_topology(self.topology, lambda n: records.filter(reads_topic(n, self._topics)), options)

    def plan(self, records: DataFrame, topics: Iterable[str], coordinates: Any = None, positions: int | None = None) -> CompiledTopology:
        """The replay of ``records`` (raw records of ``topics`` with their `SOURCE_POSITION`, ``positions`` of them) in
        one run from no state: a backfill (`streamsdsl.runtime.backfill`); ``coordinates``: the processors' clock's."""
        self._topics.update(topics)
        return self.compile(records, self._clock(coordinates), positions)

    def _clock(self, coordinates: Any = None, advance: bool = False) -> Any:
        """The processors' clock of a run (`ProcessorClock`): the driver's wall clock."""
        from streamsdsl.compiler.user_processors import ProcessorClock

        return ProcessorClock(self._wall_clock, self._initial_wall_clock, advance, coordinates or {},
                              self._carry.first_position)

    @quiet_global_windows
    def run(self, records: Sequence[RawRecord], offsets: Sequence[int], start: int, end: int) -> list[RawRecord]:
        """One replay of records ``start`` to ``end``; a failure reruns the records before it."""
        try:
            return self._run(records, offsets, start, end)
        except RecordError as error:
            failed = error.position if error.position is not None and start <= error.position else start
            done = self._run(records, offsets, start, failed) if failed > start else []
            error.position = failed
            raise _Failed(done, error) from error

    def _run(self, records: Sequence[RawRecord], offsets: Sequence[int], start: int, end: int) -> list[RawRecord]:
        rows = [(r.key, r.value, r.topic, 0, offsets[i], r.timestamp, [(k, v) for k, v in r.headers], i)
                for i, r in enumerate(records[start:end], start=start)]
        self._topics.update(r.topic for r in records[start:end])
        coordinates = {i: (records[i].topic, offsets[i]) for i in range(start, end)} if self._processors else {}
        return self._replay(rows, end, self._clock(coordinates), lambda p: (records[p].topic, 0, offsets[p]))

    def _replay(self, rows: list[tuple[Any, ...]], end: int, clock: Any,
                coordinates: Callable[[int], tuple[str, int, int]]) -> list[RawRecord]:
        """Run the plan over ``rows`` (records ``..end``) with the processors' ``clock``."""
        from streamsdsl.compiler.columns import DEAD_LETTER_SINK, FINAL_KEY_ORDER, OUTPUT_POSITION, SINK_INDEX
        from streamsdsl.compiler.columns import SOURCE_POSITION
        from streamsdsl.runtime.errors import StreamsError
        from streamsdsl.compiler.carry import next_carry
        from streamsdsl.runtime.metrics import log_dropped, observed_metrics

        compiled = self.compile(local_frame(self.spark, rows, self._records_ddl()), clock, len(rows))
        if self._compiled is None:
            self._compiled = compiled  # its sinks, serdes and frames serve `compile()`
        if compiled.output is None:
            return []
        try:
            collected = compiled.output.collect()
            observed = observed_metrics(compiled.output)
            carry = next_carry(compiled, observed, self._carry, end, clock.system_time)
        except Exception as exc:
            error = RecordError.find(exc)
            if error is None:
                from streamsdsl.runtime.session import python_worker_error

                worker_error = python_worker_error(exc)  # the workers' interpreter lacks streamsdsl
                if worker_error is not None:
                    raise worker_error from exc
                raise StreamsError(f"the topology failed: {_spark_cause(exc)}") from exc
            raise error from exc
        finally:
            compiled.release()
        self._carry = carry
        self._metrics.add_observations(observed)
        log_dropped(observed, lambda node, position: coordinates(position))
        fresh = sorted(collected, key=lambda r: (r[SOURCE_POSITION], list(r[OUTPUT_POSITION] or []),
                                                 r[FINAL_KEY_ORDER] or "", r[SINK_INDEX]))
        topics = {s.index: s.topic for s in compiled.sinks}
        out: list[RawRecord] = []
        for row in fresh:
            if row[SINK_INDEX] not in topics and row[SINK_INDEX] != DEAD_LETTER_SINK:
                continue
            if row[SINK_INDEX] == DEAD_LETTER_SINK:
                if self.config.dead_letter_topic is None:
                    continue
                topic = self.config.dead_letter_topic
            else:
                topic = topics[row[SINK_INDEX]]
            out.append(_raw(topic, row))
        return out

    def metrics(self) -> dict[str, float]:
        snapshot = self._metrics.snapshot()
        return {name: snapshot[name] for name in TASK_METRICS}

    @quiet_global_windows
    def store_entries(self, node: ir.Node, store: str) -> list[StoreEntry]:
        from streamsdsl.compiler.modes import native_store

        frame = self.compile().frames.get(node.name)
        if frame is None:  # not upstream of any sink: never run
            return []
        key, value = frame.key.serde, frame.value
        if node.name in self._carry.native_inputs:
            return [StoreEntry(key.from_internal(r["key"]), 0, 0, value.from_internal(r["value"]), r["timestamp"])
                    for r in native_store(self.spark, self._carry, node, value.spark_type)]
        carried = self._carry.states.get(node.name, ())
        if isinstance(node, (ir_nodes.TableSourceNode, ir_nodes.StreamToTableNode, GlobalTableSourceNode)):
            if node.name not in self._carry.states:
                return self._table_in_join(node)
            return _table_entries(key, value, carried)
        if isinstance(node, ir_nodes.TableTableJoinNode):  # both sides per key: the joined value
            return self._join_store(node, carried)
        if isinstance(node, ForeignKeyJoinNode):  # the resolve stage: this table's value and the result
            return [StoreEntry(key.from_internal(k), 0, 0, value.from_internal(s["result"]), s["result_ts"])
                    for k, s in carried if s["result_ts"] is not None]
        if isinstance(node, ir_nodes.StreamStreamJoinNode):  # each side's buffered records per key
            return self._stream_join_store(node, store, carried)
        return [StoreEntry(key.from_internal(k), w["start"], w["end"], value.from_internal(w["agg"]), w["ts"])
                for k, windows in carried for w in windows if w["start"] >= 0]  # not an idle close's mark

    def _join_store(self, node: ir.TableTableJoinNode, carried: Sequence[Any]) -> list[StoreEntry]:
        """A table–table join's store from its carried sides (`join_store_entry`)."""
        from streamsdsl.operators.functions import joiner_of
        from streamsdsl.semantics.table_table import TableJoinState, join_store_entry
        from streamsdsl.semantics.tables import TableValue

        frames = self.compile().frames
        key = frames[node.name].key.serde
        left, right = (frames[p].value for p in node.parents)
        out = []
        for k, s in carried:
            state = TableJoinState(
                None if s["left_ts"] is None else TableValue(left.from_internal(s["left_value"]), s["left_ts"]),
                None if s["right_ts"] is None else TableValue(right.from_internal(s["right_value"]), s["right_ts"]),
                bool(s["has_result"]))
            user_key = key.from_internal(k)
            entry = join_store_entry(state, joiner_of(node.joiner), user_key)
            if entry is not None:
                out.append(StoreEntry(user_key, 0, 0, entry[0], entry[1]))
        return out

    def _table_in_join(self, node: ir.Node) -> list[StoreEntry]:
        """A table's store when its own operator did not run (no carried state of its own): its
        records reach only joins, which read them before the store (`Frame.table_records`) and
        hold each key's current value themselves, as the store does (tombstones remove the key).
        Read from the first join that holds it: a stream–table join's table side (a global table's
        join, keyed by the table's key), a table–table join's side, a foreign-key join's stage."""
        frames = self.compile().frames
        value = frames[node.name].value
        for child in self.topology.children(node.name):
            join = self.topology.node(child)
            if isinstance(join, ForeignKeyJoinNode):  # this table: the resolve stage; the other: subscriptions
                this = join.parents[0] == node.name
                carried = self._carry.states.get(child if this else join.receive)
                key = frames[node.name].key.serde
                if carried is not None:
                    return [StoreEntry(key.from_internal(k), 0, 0, value.from_internal(s["value"]), s["ts"])
                            for k, s in carried if s["ts"] is not None]
                continue
            carried = self._carry.states.get(child)
            if carried is None:
                continue
            key = frames[node.name if isinstance(join, GlobalTableJoinNode) else child].key.serde
            if isinstance(join, (ir_nodes.StreamTableJoinNode, GlobalTableJoinNode)) and join.parents[1] == node.name:
                return _table_entries(key, value, carried)
            if isinstance(join, ir_nodes.TableTableJoinNode):
                side = "left" if join.parents[0] == node.name else "right"
                return [StoreEntry(key.from_internal(k), 0, 0, value.from_internal(s[f"{side}_value"]), s[f"{side}_ts"])
                        for k, s in carried if s[f"{side}_ts"] is not None]
        return []

    def _stream_join_store(self, node: ir.StreamStreamJoinNode, store: str, carried: Sequence[Any]) -> list[StoreEntry]:
        """A stream–stream join's window store from its carried states, decoded as the operator
        decodes them (`StreamJoinConfig.decode`; `_join_store`)."""
        from streamsdsl.compiler.stream_joins import StreamJoinConfig
        from streamsdsl.operators.functions import joiner_of
        from streamsdsl.semantics.stream_stream import StreamJoinSpec

        frames = self.compile().frames
        key = frames[node.name].key.serde
        left = node.value_serde or frames[node.parents[0]].value
        right = node.other_value_serde or frames[node.parents[1]].value
        config = StreamJoinConfig(node.name, StreamJoinSpec(node.kind, node.windows.spec), key,  # type: ignore[arg-type]
                                  left, right, joiner_of(node.joiner))
        return _join_store(node, store, [(key.from_internal(k), config.decode(s)) for k, s in carried])

    def sink(self, topic: str) -> SinkSerdes:
        found = self.compile().sink_for_topic(topic)
        assert found is not None, topic
        return SinkSerdes(found.key_codec, found.key_serde, found.value_serde)

    @functools.cached_property
    def _processors(self) -> list[ProcessNode]:
        return [n for n in self.topology.nodes if isinstance(n, ProcessNode)]

    @quiet_global_windows
    def advance_wall_clock(self, now: int) -> list[RawRecord]:
        """The driver's wall clock is ``now``: a replay without records in which the idle
        aggregations (`_idle_due`) close every key's open windows and every processor task fires its
        wall-clock punctuators due (none is skipped: a task that has not run yet may schedule one
        in ``init``); what they wrote."""
        from streamsdsl.compiler.user_processors import schedule_from_json
        from streamsdsl.processor import PunctuationType

        self._wall_clock = now
        states = [self._carry.states.get(n.name) for n in self._processors]
        idle = self._idle_due(now)
        if not idle and all(states) and not any(
                p.type is PunctuationType.WALL_CLOCK_TIME and not p.cancelled and p.due_ms <= now
                for rows in states for _, state in rows or () for p in schedule_from_json(state["schedule"])):
            return []  # every task has run, and none has a wall-clock punctuator due
        end = self._carry.first_position
        try:
            out = self._replay([], end, self._clock(advance=True), lambda p: ("", -1, -1))
        except RecordError as error:
            raise _Failed([], error) from error
        self._idle_closed.update(idle)
        return out

    def _idle_due(self, now: int) -> dict[str, int]:
        """The aggregations whose idle close is due at ``now`` (their last input time): a record
        reached each ``idle_close_ms`` or longer ago, it holds keys, and it has not been closed
        idle since (its keys' windows are all closed then)."""
        due: dict[str, int] = {}
        for name, idle_ms in self.topology.idle_closes.items():
            last = self._carry.idle_last_input_at.get(name, -1)
            if 0 <= last <= now - idle_ms and self._carry.states.get(name) and self._idle_closed.get(name) != last:
                due[name] = last
        return due

    def processor_store(self, name: str) -> Any:
        """The processor store ``name`` as the driver's task left it (the carried state of the
        processor connected to it); a write goes into the state the next run starts from."""
        from streamsdsl.compiler.user_processors import TaskStoreBackend, carried_with_store, task_stores
        from streamsdsl.state import open_store

        builder = self.topology.state_store(name)
        assert builder is not None, name
        node = next((n.name for n in self._processors if name in n.store_names), None)
        if node is None:  # a store no processor is connected to: nothing writes it
            return open_store(builder, TaskStoreBackend())
        tasks = list(self._carry.states.get(node, ()))
        carried = next((state for task, state in tasks if int(task) == 0), None)

        def written(entries: list[tuple[bytes, bytes]]) -> None:
            others = [(task, state) for task, state in tasks if int(task) != 0]
            states = {**self._carry.states, node: [(0, carried_with_store(carried, name, entries)), *others]}
            self._carry = attrs.evolve(self._carry, states=states)

        return open_store(builder, TaskStoreBackend(entries=task_stores(carried, (builder,))[name].entries(),
                                                    on_write=written))

    def close(self) -> None:
        """Each run's batch job is over when it returns: nothing to stop."""


class StreamingDriverEngine:
    """The compiled plan as a streaming query behind a driver (see the module docs): the same
    plan `KafkaStreams` runs, on its own checkpoint in a temporary directory, fed one micro-batch
    per piped record. A run appends the records piped since the previous one and waits until the
    query has processed them and the event-time timers they set off have fired. Its metrics come
    from the query's progress. A failed record stops the query: the driver then refuses further
    records. Stores are not readable on this engine (use ``direct`` or ``spark``)."""

    def __init__(self, topology: Topology, config: DriverConfig, spark: SparkSession | None) -> None:
        import tempfile

        from streamsdsl.io.files import FileTopic
        from streamsdsl.runtime.metrics import QueryMetrics

        self.topology, self.config, self.spark = topology, config, _driver_session(topology, config, spark)
        if is_connect(self.spark):
            raise ConnectUnsupportedError(
                "engine='streaming' cannot run on a Spark Connect session: it collects each micro-batch's rows into "
                "this process, and over Spark Connect the micro-batch function runs in a Python process of the "
                "server. Use engine='spark' (the same plan, replayed as one batch job per run, runs over Spark "
                "Connect) or engine='direct'.")
        self._directory = tempfile.mkdtemp(prefix="streamsdsl-driver-")
        self._input = FileTopic(os.path.join(self._directory, "input"))
        self._collected: list[tuple[int, tuple[Any, ...], RawRecord]] = []
        self._query: Any = None
        self._compiled: CompiledTopology | None = None
        self._failed: RecordError | None = None
        self._metrics = QueryMetrics(locate=functools.partial(locate, topology))

    def run(self, records: Sequence[RawRecord], offsets: Sequence[int], start: int, end: int) -> list[RawRecord]:
        from streamsdsl.runtime.streaming import await_event_time_timers, process_all_available

        if self._failed is not None:
            raise TopologyError(f"this driver's streaming query stopped at a failed record ({self._failed}); "
                                "create a new TopologyTestDriver to go on.")
        for r in records[start:end]:
            self._input.append_raw([(r.topic, r.key, r.value, r.timestamp, r.headers)])
        query = self._query or self._start()
        try:
            process_all_available(query, self.topology)
            await_event_time_timers(query, self.topology)
            self._metrics.refresh()
        except Exception as exc:
            error = RecordError.find(exc)
            if error is None:
                raise
            self._failed = error
            # a streaming position is the record's offset in its topic (partition 0): the first
            # record of this run at that offset failed (its batch, the query's last, did not commit)
            offset = None if error.position is None else error.position & ((1 << 40) - 1)
            error.position = next((i for i in range(start, end) if offsets[i] == offset), start)
            raise _Failed(self._take(), error) from error
        return self._take()

    def _take(self) -> list[RawRecord]:
        """What the query wrote since the last call, in order (batch, position, output position)."""
        out = [raw for _, _, raw in sorted(self._collected, key=lambda c: (c[0], c[1]))]
        self._collected = []
        return out

    def _start(self) -> Any:
        from streamsdsl.runtime.lifecycle import progress_listener
        from streamsdsl.runtime.streaming import start_streaming

        # every micro-batch's progress counted as it ends (`recentProgress` keeps the last few only;
        # with processing-time timers a batch runs every trigger, also between two reads)
        name = f"streamsdsl-driver-{os.path.basename(self._directory)}"
        self._listener = progress_listener(name, lambda: self._metrics, lambda run_id, error: None)
        self.spark.streams.addListener(self._listener)
        query, compiled, _ = start_streaming(
            self.topology, lambda n: self._input.read_stream(self.spark).filter(reads_topic(n)), _DriverSink(self),
            checkpoint_location=os.path.join(self._directory, "checkpoint"), metrics=self._metrics, query_name=name,
            deserialization_handler=self.config.deserialization_handler, operator=self.config.operator.value,
            flush=self.config.flush, application_id=self.config.application_id)
        self._query, self._compiled = query, compiled
        return query

    def compile(self) -> CompiledTopology:
        """The streaming plan (compiled when the query starts, else for the sinks' serdes)."""
        if self._compiled is None:
            from streamsdsl.compiler import CompileOptions, PlanMode, compile_topology

            c, checkpoint = self.config, os.path.join(self._directory, "checkpoint")
            self._compiled = compile_topology(
                self.topology, lambda n: self._input.read_stream(self.spark).filter(reads_topic(n)),
                CompileOptions(PlanMode.STREAMING, c.operator.value, c.deserialization_handler, flush=c.flush,
                               application_id=c.application_id, checkpoint_location=checkpoint))
        return self._compiled

    def metrics(self) -> dict[str, float]:
        snapshot = self._metrics.snapshot()
        return {name: snapshot[name] for name in TASK_METRICS}

    def store_entries(self, node: ir.Node, store: str) -> list[StoreEntry]:
        raise OperationNotDefinedError(
            f"{node.name}: the test driver's streaming engine does not read state stores; read them with "
            "engine='direct' or engine='spark'.")

    def sink(self, topic: str) -> SinkSerdes:
        found = self.compile().sink_for_topic(topic)
        assert found is not None, topic
        return SinkSerdes(found.key_codec, found.key_serde, found.value_serde)

    def advance_wall_clock(self, now: int) -> list[RawRecord]:
        """Nothing: a streaming query's processors punctuate by the executors' clock, at the end
        of each micro-batch with records of their task (see docs/differences.md)."""
        return []

    def processor_store(self, name: str) -> Any:
        """The processor store ``name``, read-only, as the last committed micro-batch left it:
        read from the query's checkpoint with Spark's state data source, every task's entries
        (`streamsdsl.runtime.queries`, the reader of `KafkaStreams.store`)."""
        from streamsdsl.runtime.queries import StoreReader

        if self._query is None:
            from streamsdsl.compiler.user_processors import TaskStoreBackend
            from streamsdsl.state import open_store

            builder = self.topology.state_store(name)
            assert builder is not None, name
            return _ReadOnlyStore(open_store(builder, TaskStoreBackend()))  # nothing has run
        reader = StoreReader(self.spark, os.path.join(self._directory, "checkpoint"), self.compile())
        return _ReadOnlyStore(reader._processor_store(name))

    def close(self) -> None:
        import shutil

        from streamsdsl.runtime.state_stores import release_state_stores

        if self._query is not None:
            self._query.stop()
            release_state_stores(self.spark, self._query.runId, os.path.join(self._directory, "checkpoint"))
            self._query = None
            self.spark.streams.removeListener(self._listener)
        shutil.rmtree(self._directory, ignore_errors=True)


class _ReadOnlyStore:
    """A processor's store read from a streaming query's checkpoint: its reads; a write raises."""

    _WRITES = frozenset({"put", "put_if_absent", "put_all", "delete", "remove"})

    def __init__(self, store: Any) -> None:
        self._store = store

    def __getattr__(self, attr: str) -> Any:
        if attr in self._WRITES:
            raise OperationNotDefinedError(
                f"{attr}(): the test driver's streaming engine reads a processor's store from its query's checkpoint, "
                "read-only; write it from its processor, or run the driver with engine='direct' or engine='spark'.")
        return getattr(self._store, attr)


class _DriverSink:
    """The streaming engine's `streamsdsl.runtime.streaming.BatchSink`: each micro-batch's rows,
    in their order (batch, source position, output position), as raw records."""

    def __init__(self, engine: StreamingDriverEngine) -> None:
        self.engine = engine

    def write_batch(self, sink: Any, rows: DataFrame, batch_id: int) -> None:
        from streamsdsl.compiler.columns import OUTPUT_POSITION, SOURCE_POSITION

        for row in rows.collect():
            self.engine._collected.append((batch_id, (row[SOURCE_POSITION], list(row[OUTPUT_POSITION] or [])),
                                           _raw(sink.topic, row)))

    def write_dead_letters(self, rows: DataFrame, batch_id: int) -> None:
        topic = self.engine.config.dead_letter_topic
        if topic is None:
            return
        for i, row in enumerate(rows.collect()):
            self.engine._collected.append((batch_id, (-1, [i]), _raw(topic, row)))


def _raw(topic: str, row: Any) -> RawRecord:
    return RawRecord(
        topic,
        None if row["key"] is None else bytes(row["key"]),
        None if row["value"] is None else bytes(row["value"]),
        row["timestamp"],
        tuple((h["key"], None if h["value"] is None else bytes(h["value"])) for h in (row["headers"] or [])),
    )


def _spark_cause(exc: BaseException) -> str:
    """The line of a Spark error that states the cause: the last line of a Python worker's
    traceback (``ValueError: ...``), else the first line."""
    text = str(exc).split("JVM stacktrace:")[0]
    lines = [line for line in text.splitlines() if line.strip()]
    if "Traceback (most recent call last)" in text:
        causes = [line for line in lines if not line.startswith((" ", "\t"))]
        if causes:
            return causes[-1].strip()
    return lines[0].strip() if lines else type(exc).__name__


def _table_entries(key: Any, value: Any, carried: Sequence[Any]) -> list[StoreEntry]:
    """A table's store from its operator's carried states: each key's value and timestamp (a
    versioned table's latest version, `streamsdsl.compiler.versioned`)."""
    out = []
    for k, s in carried:
        if "versions" not in (s.asDict() if hasattr(s, "asDict") else s):
            out.append(StoreEntry(key.from_internal(k), 0, 0, value.from_internal(s["value"]), s["ts"]))
        elif s["versions"] and s["versions"][-1]["value"] is not None:
            latest = s["versions"][-1]
            out.append(StoreEntry(key.from_internal(k), 0, 0, value.from_internal(latest["value"]), latest["ts"]))
    return out
