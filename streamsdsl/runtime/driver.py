"""``TopologyTestDriver``: run a topology on real Spark without a broker, record by record.

Like Kafka Streams' driver, records are processed in ``pipe_input`` order across all topics,
stream time advances with every record, and what a record causes is forwarded before the next
record is processed (the record cache is flushed after every record).

How it runs: the driver executes the topology's **compiled Spark plan** (the same lowering and
the same stateful operators as in streaming) as a batch job over every record piped so far —
"replay" mode, where each record's stream time is computed in the plan as a running max in
pipe order. Reading an output topic (or the metrics) runs the plan if records were piped since
the last run, and appends the output caused by the new records to the output topics.
"""

from __future__ import annotations

import time
from collections import deque
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Callable, Iterable, NamedTuple

import attrs

from streamsdsl.errors import InvalidArgumentError, InvalidTypeError, RecordError, TopologyError
from streamsdsl.compiler.carry import ObservedCarry
from streamsdsl.compiler.columns import SOURCE_POSITION
from streamsdsl.compiler.modes import STREAM_TIME_OBSERVATION, ReplayCarry
from streamsdsl.runtime.config import DriverConfig
from streamsdsl.runtime.errors import NoSinkError, StreamsError
from streamsdsl.runtime.metrics import TASK_METRICS, Metrics, log_dropped, observed_metrics
from streamsdsl.runtime.session import require_state_store
from streamsdsl.runtime.stores import ReadOnlyKeyValueStore, ReadOnlySessionStore, ReadOnlyWindowStore, StoreEntry
from streamsdsl.records import RAW_RECORD_DDL

#: The records the driver replays: the raw record schema plus the pipe position.
_RECORDS_DDL = f"{RAW_RECORD_DDL}, {SOURCE_POSITION} bigint"
from streamsdsl.dsl.serdes import DEFAULT_SERDE, Serde, SessionWindowedSerde, TimeWindowedSerde, check_serde

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from streamsdsl import ir
    from streamsdsl.compiler import CompiledTopology
    from streamsdsl.compiler.plan import CompiledSink
    from streamsdsl.ir.topology import Topology

__all__ = ["KeyValue", "TestInputTopic", "TestOutputTopic", "TestRecord", "TopologyTestDriver"]

AnySerde = Serde | SessionWindowedSerde | TimeWindowedSerde
_MISSING: Any = object()


class KeyValue(NamedTuple):
    """A key and a value, as Kafka Streams' ``KeyValue``."""

    key: Any
    value: Any


def _headers(value: Any) -> tuple[tuple[str, bytes | None], ...]:
    if value is None:
        return ()
    items = value.items() if isinstance(value, dict) else value
    return tuple((str(k), None if v is None else bytes(v)) for k, v in items)


@attrs.frozen
class TestRecord:
    """A record piped into or read from the driver: key, value, timestamp (ms) and headers."""

    __test__ = False  # not a pytest test class

    key: Any
    value: Any
    timestamp: int | None = None
    headers: tuple[tuple[str, bytes | None], ...] = attrs.field(default=(), converter=_headers)

    @property
    def key_value(self) -> KeyValue:
        return KeyValue(self.key, self.value)


@attrs.frozen
class _Raw:
    topic: str
    key: bytes | None
    value: bytes | None
    timestamp: int
    headers: tuple[tuple[str, bytes | None], ...]


class TestInputTopic:
    """Pipes records into one source topic of a `TopologyTestDriver`."""

    __test__ = False

    def __init__(self, driver: TopologyTestDriver, topic: str, key_serde: Serde, value_serde: Serde,
                 start_timestamp: int, auto_advance_ms: int) -> None:
        self._driver = driver
        self.topic = topic
        self._key_serde = key_serde
        self._value_serde = value_serde
        self._current_time = start_timestamp
        self._advance = auto_advance_ms

    def _next_time(self, timestamp: int | None) -> int:
        if timestamp is not None:
            if isinstance(timestamp, bool) or not isinstance(timestamp, int):
                raise InvalidTypeError(f"'timestamp' must be an int (epoch milliseconds), got {timestamp!r}.")
            if timestamp < 0:
                raise InvalidArgumentError(f"'timestamp' must be >= 0 ms (got {timestamp}).")
            return timestamp
        now = self._current_time
        self._current_time += self._advance
        return now

    def pipe_input(self, key: Any, value: Any = _MISSING, timestamp: int | None = None, *, headers: Any = None) -> None:
        """Pipe one record: ``pipe_input(key, value[, timestamp])``, ``pipe_input(value)`` (null
        key) or ``pipe_input(TestRecord(...))``."""
        if value is _MISSING:
            if isinstance(key, TestRecord):
                record = key
                self._pipe(record.key, record.value, record.timestamp, record.headers)
                return
            key, value = None, key
        self._pipe(key, value, timestamp, headers)

    def _pipe(self, key: Any, value: Any, timestamp: int | None, headers: Any) -> None:
        self._driver._append(
            _Raw(self.topic, self._key_serde.serialize(key), self._value_serde.serialize(value),
                 self._next_time(timestamp), _headers(headers))
        )

    def pipe_key_value_list(self, key_values: Iterable[tuple[Any, Any]], start_timestamp: int | None = None,
                            advance_ms: int = 0) -> None:
        """Pipe ``(key, value)`` pairs; timestamps from ``start_timestamp`` advancing by ``advance_ms``."""
        ts = start_timestamp
        for k, v in key_values:
            self._pipe(k, v, ts, None)
            if ts is not None:
                ts += advance_ms

    def pipe_value_list(self, values: Iterable[Any]) -> None:
        for v in values:
            self._pipe(None, v, None, None)

    def pipe_record_list(self, records: Iterable[TestRecord]) -> None:
        for r in records:
            self._pipe(r.key, r.value, r.timestamp, r.headers)

    def advance_time(self, ms: int) -> None:
        """Advance this topic's clock used for records piped without a timestamp."""
        self._current_time += ms


class TestOutputTopic:
    """Reads what the topology wrote to one sink topic."""

    __test__ = False

    def __init__(self, driver: TopologyTestDriver, topic: str, key_serde: Callable[[], AnySerde],
                 value_serde: Callable[[], Serde]) -> None:
        self._driver = driver
        self.topic = topic
        # The sink's serdes come from the plan: resolved at the first read, which plans the
        # topology anyway (creating the topic does not plan it a second time).
        self._serdes_of = (key_serde, value_serde)
        self._serdes: tuple[AnySerde, Serde] | None = None

    def _queue(self) -> deque[_Raw]:
        self._driver._process()
        return self._driver._outputs.setdefault(self.topic, deque())

    def _decode(self, raw: _Raw) -> TestRecord:
        if self._serdes is None:
            self._serdes = (self._serdes_of[0](), self._serdes_of[1]())
        key_serde, value_serde = self._serdes
        return TestRecord(key_serde.deserialize(raw.key), value_serde.deserialize(raw.value),
                          raw.timestamp, raw.headers)

    def read_record(self) -> TestRecord:
        """The next record; raises ``LookupError`` when the topic is empty (as Kafka's driver)."""
        q = self._queue()
        if not q:
            raise LookupError(f"Empty topic: {self.topic}")
        return self._decode(q.popleft())

    def read_key_value(self) -> KeyValue:
        return self.read_record().key_value

    def read_value(self) -> Any:
        return self.read_record().value

    def read_records_to_list(self) -> list[TestRecord]:
        q = self._queue()
        out = [self._decode(r) for r in q]
        q.clear()
        return out

    def read_key_values_to_list(self) -> list[KeyValue]:
        return [r.key_value for r in self.read_records_to_list()]

    def read_values_to_list(self) -> list[Any]:
        return [r.value for r in self.read_records_to_list()]

    def read_key_values_to_map(self) -> dict[Any, Any]:
        """The latest value per key (a tombstone removes the key), as Kafka's ``readKeyValuesToMap``."""
        out: dict[Any, Any] = {}
        for kv in self.read_key_values_to_list():
            if kv.value is None:
                out.pop(kv.key, None)
            else:
                out[kv.key] = kv.value
        return out

    def is_empty(self) -> bool:
        return not self._queue()

    def get_queue_size(self) -> int:
        return len(self._queue())


class TopologyTestDriver:
    """Run a `Topology` on Spark without a broker (see the module docs).

    Parameters
    ----------
    topology
        The topology to run.
    config
        Optional settings: ``default.deserialization.exception.handler`` (``log_and_fail`` or
        ``log_and_continue``), ``errors.dead.letter.topic`` (where ``log_and_continue`` writes
        the records it skips), and ``spark.*`` keys for the SparkSession when the driver creates it.
    spark
        A SparkSession to use (default: the active one, or a new local one with the settings
        streamsdsl needs; one per process).
    initial_wall_clock_time_ms
        The driver's mock wall-clock time at start (default: now); see `advance_wall_clock_time`.

    Examples
    --------
    >>> from streamsdsl import StreamsBuilder, Serdes, Consumed, Produced
    >>> b = StreamsBuilder()
    >>> b.stream("in", Consumed.with_serdes(Serdes.String(), Serdes.String())).map_values(str.upper).to("out")
    >>> with TopologyTestDriver(b.build()) as driver:
    ...     driver.create_input_topic("in").pipe_input("k", "hello", 5)
    ...     driver.create_output_topic("out").read_records_to_list()
    [TestRecord(key='k', value='HELLO', timestamp=5, headers=())]
    """

    def __init__(self, topology: Topology, config: dict[str, Any] | None = None, *,
                 spark: SparkSession | None = None, initial_wall_clock_time_ms: int | None = None) -> None:
        from streamsdsl.ir.topology import Topology as _Topology

        if not isinstance(topology, _Topology):
            raise InvalidTypeError(
                f"'topology' must be a Topology from StreamsBuilder.build() (got {type(topology).__name__})."
            )
        if not topology.sinks:
            raise NoSinkError(
                "the topology has no sink, so the driver would run nothing and no output topic could be read: "
                "add .to(topic) where its records should go."
            )
        self.topology = topology
        self.config = DriverConfig.from_mapping(config)
        if spark is None:
            from streamsdsl.runtime.session import get_session

            spark = get_session(conf=self.config.spark_conf)
        if topology.store_names:
            require_state_store(spark)
        self._spark = spark
        self._handler = self.config.deserialization_handler
        self._dlq_topic = self.config.dead_letter_topic
        self._records: list[_Raw] = []
        self._offsets: list[int] = []  # per piped record: its offset in its topic
        self._processed = 0
        self._outputs: dict[str, deque[_Raw]] = {}
        self._metrics = Metrics()
        self._carry = ReplayCarry()
        self._compiled: CompiledTopology | None = None
        self._closed = False
        self._wall_clock_ms = _duration_ms(initial_wall_clock_time_ms, "initial_wall_clock_time_ms") \
            if initial_wall_clock_time_ms is not None else int(time.time() * 1000)

    # -- context manager ------------------------------------------------------------------------
    def __enter__(self) -> TopologyTestDriver:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        self._closed = True

    # -- topics ---------------------------------------------------------------------------------
    def _source_for(self, topic: str) -> ir.SourceNode:
        for s in self.topology.sources:
            if topic in s.topics:
                return s
        raise TopologyError(
            f"Unknown topic {topic!r}: the topology reads {list(self.topology.source_topics)}."
        )

    def create_input_topic(self, topic: str, key_serde: Serde | None = None, value_serde: Serde | None = None, *,
                           start_timestamp: int | None = None, auto_advance_ms: int = 0) -> TestInputTopic:
        """An input topic; serdes default to the ones the topology's source consumes with."""
        source = self._source_for(topic)
        start = int(time.time() * 1000) if start_timestamp is None else start_timestamp
        return TestInputTopic(self, topic, key_serde or source.key_serde or DEFAULT_SERDE,
                              value_serde or source.value_serde or DEFAULT_SERDE, start, auto_advance_ms)

    def create_output_topic(self, topic: str, key_serde: AnySerde | None = None,
                            value_serde: Serde | None = None) -> TestOutputTopic:
        """An output topic; serdes default to the ones the topology's sink writes with
        (windowed keys are read back as `Windowed`)."""
        if self._dlq_topic is not None and topic == self._dlq_topic:
            from streamsdsl.dsl.serdes import Serdes

            dlq_key, dlq_value = key_serde or Serdes.Bytes(), value_serde or Serdes.Bytes()
            return TestOutputTopic(self, topic, lambda: dlq_key, lambda: dlq_value)
        if topic not in self.topology.sink_topics:
            raise TopologyError(f"Unknown topic {topic!r}: the topology writes {list(self.topology.sink_topics)}.")
        if key_serde is not None and not isinstance(key_serde, (SessionWindowedSerde, TimeWindowedSerde)):
            key_serde = check_serde(key_serde, "key_serde")

        def sink() -> CompiledSink:
            found = self._compile().sink_for_topic(topic)
            assert found is not None, topic
            return found

        def key() -> AnySerde:
            if key_serde is None:
                return sink().key_deserializer()
            if isinstance(key_serde, (SessionWindowedSerde, TimeWindowedSerde)):
                return key_serde
            return sink().key_codec.with_serde(key_serde).reader()  # type: ignore[no-any-return]

        return TestOutputTopic(self, topic, key, lambda: value_serde or sink().value_serde)

    def metrics(self) -> dict[str, float]:
        """Task-level metrics: ``dropped-records-total``, ``emit-final-records-total``,
        ``emit-final-latency-max`` and ``emit-final-latency-avg`` (KIP-825)."""
        self._process()
        snapshot = self._metrics.snapshot()
        return {name: snapshot[name] for name in TASK_METRICS}

    def advance_wall_clock_time(self, advance: int | timedelta) -> None:
        """Advance the driver's (mock) wall-clock time by ``advance`` (ms or a ``timedelta``) and
        run the records piped so far, as Kafka's driver commits when its wall clock moves.

        No streamsdsl operator reads wall-clock time: stream time drives every window, and the
        driver, as Kafka's, emits on-close results without the wall-clock emit interval. The
        method is here so that tests ported from Kafka Streams run unchanged."""
        ms = _duration_ms(advance, "advance")
        self._wall_clock_ms += ms
        self._process()

    # -- state stores ---------------------------------------------------------------------------
    def get_key_value_store(self, name: str) -> ReadOnlyKeyValueStore:
        """The store of an unwindowed aggregation (``count``, ``reduce``, ``aggregate``), read-only."""
        return ReadOnlyKeyValueStore(name, self._store_reader(name, "key-value"))

    def get_window_store(self, name: str) -> ReadOnlyWindowStore:
        """The store of a time- or sliding-window aggregation, read-only."""
        return ReadOnlyWindowStore(name, self._store_reader(name, "window"))

    def get_session_store(self, name: str) -> ReadOnlySessionStore:
        """The store of a session-window aggregation, read-only."""
        return ReadOnlySessionStore(name, self._store_reader(name, "session"))

    def _store_reader(self, name: str, kind: str) -> Callable[[], list[StoreEntry]]:
        from streamsdsl import ir

        nodes = [n for n in self.topology.nodes if name in n.stores]
        if not nodes:
            raise TopologyError(f"Unknown state store {name!r}: the topology's stores are "
                                f"{list(self.topology.store_names)}.")
        node = nodes[0]
        windows = getattr(node, "windows", None)
        actual = ("key-value" if windows is None else "session" if isinstance(node, ir.SessionAggregateNode)
                  or type(windows).__name__ == "SessionWindows" else "window")
        if actual != kind:
            method = {"key-value": "get_key_value_store", "window": "get_window_store",
                      "session": "get_session_store"}[actual]
            raise TopologyError(f"State store {name!r} is a {actual} store (of {node.name}): read it with {method}().")
        return lambda: self._store_entries(node)

    def _store_entries(self, node: ir.Node) -> list[StoreEntry]:
        """What the aggregation ``node`` holds after the records piped so far."""
        from streamsdsl.compiler.modes import native_store

        self._process()
        frame = self._compile().frames.get(node.name)
        if frame is None:  # not upstream of any sink: never run
            return []
        key, value = frame.key.serde, frame.value
        if node.name in self._carry.native_inputs:
            return [StoreEntry(key.from_internal(r["key"]), 0, 0, value.from_internal(r["value"]), r["timestamp"])
                    for r in native_store(self._spark, self._carry, node, value.spark_type)]
        return [StoreEntry(key.from_internal(k), w["start"], w["end"], value.from_internal(w["agg"]), w["ts"])
                for k, windows in self._carry.states.get(node.name, ()) for w in windows]

    # -- running --------------------------------------------------------------------------------
    def _append(self, raw: _Raw) -> None:
        if self._closed:
            raise TopologyError("This TopologyTestDriver is closed.")
        self._offsets.append(sum(1 for r in self._records if r.topic == raw.topic))
        self._records.append(raw)

    def _compile(self, records: DataFrame | None = None) -> CompiledTopology:
        """The plan of a run over ``records`` (the records piped since the previous run), or
        without records the plan's sinks and serdes."""
        from pyspark.sql import functions as F

        from streamsdsl.compiler import PlanMode, compile_topology

        if records is None:
            if self._compiled is None:
                self._compiled = self._compile(self._spark.createDataFrame([], _RECORDS_DDL))
            return self._compiled
        from streamsdsl.compiler.jvm_operator import operator_scope

        with operator_scope(self.config.operator):  # streamsdsl.operator: which operator runs built-ins
            return compile_topology(
                self.topology, lambda n: records.filter(F.col("topic").isin(list(n.topics))), mode=PlanMode.REPLAY,
                deserialization_handler=self._handler, carry=self._carry,
            )

    def _process(self) -> None:
        """Run the records piped since the previous run, on the state that run left.

        If a record fails, the records piped before it are run (their output stays readable),
        the failed record is consumed, and its `RecordError` is raised, once."""
        if self._processed == len(self._records):
            return
        start = self._processed
        try:
            self._run(start, len(self._records))
        except RecordError as error:
            failed = error.position if error.position is not None and start <= error.position else start
            if failed > start:
                self._run(start, failed)
            self._processed = failed + 1
            raise error.located(self._records[failed].topic, 0, self._offsets[failed]) from error.__cause__

    def _locate(self, node: str, position: int) -> tuple[str, int, int]:
        """A piped record's topic, partition and offset from its pipe position."""
        return self._records[position].topic, 0, self._offsets[position]

    def _run(self, start: int, end: int) -> None:
        """One replay of records ``start`` to ``end`` (exclusive): outputs, metrics, carry."""
        from streamsdsl.compiler.columns import DEAD_LETTER_SINK, FINAL_KEY_ORDER, OUTPUT_POSITION, SINK_INDEX

        rows = [(r.key, r.value, r.topic, 0, self._offsets[i], r.timestamp, [(k, v) for k, v in r.headers], i)
                for i, r in enumerate(self._records[start:end], start=start)]
        compiled = self._compile(self._spark.createDataFrame(rows, _RECORDS_DDL))
        if self._compiled is None:
            self._compiled = compiled  # its sinks, serdes and frames serve `_compile()`
        if compiled.output is None:
            self._processed = end
            return
        try:
            collected = compiled.output.collect()
            observed = observed_metrics(compiled.output)
            carry = _next_carry(compiled, observed, self._carry, end)
        except Exception as exc:
            error = RecordError.find(exc)
            if error is None:
                raise StreamsError(f"the topology failed: {_spark_cause(exc)}") from exc
            raise error from exc
        finally:
            compiled.release()
        self._carry = carry
        self._metrics.add_observations(observed)
        log_dropped(observed, self._locate)
        fresh = sorted(collected, key=lambda r: (r[SOURCE_POSITION], list(r[OUTPUT_POSITION] or []),
                                                 r[FINAL_KEY_ORDER] or "", r[SINK_INDEX]))
        topics = {s.index: s.topic for s in compiled.sinks}
        for row in fresh:
            if row[SINK_INDEX] == DEAD_LETTER_SINK:
                if self._dlq_topic is None:
                    continue
                topic = self._dlq_topic
            else:
                topic = topics[row[SINK_INDEX]]
            raw = _Raw(
                topic,
                None if row["key"] is None else bytes(row["key"]),
                None if row["value"] is None else bytes(row["value"]),
                row["timestamp"],
                tuple((h["key"], None if h["value"] is None else bytes(h["value"])) for h in (row["headers"] or [])),
            )
            self._outputs.setdefault(raw.topic, deque()).append(raw)
        self._processed = end


def _duration_ms(value: Any, name: str) -> int:
    """A non-negative duration in ms from an int or a ``timedelta``."""
    if isinstance(value, timedelta):
        ms = value // timedelta(milliseconds=1)
    elif isinstance(value, int) and not isinstance(value, bool):
        ms = value
    else:
        raise InvalidTypeError(f"'{name}' must be milliseconds (an int) or a datetime.timedelta (got {value!r}).")
    if ms < 0:
        raise InvalidArgumentError(f"'{name}' must be >= 0 ms (got {ms} ms): time never moves backwards.")
    return ms


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


def _next_carry(compiled: CompiledTopology, observed: dict[str, dict[str, Any]], before: ReplayCarry,
                first_position: int) -> ReplayCarry:
    """What the next run starts from: each processor's keys' state and stream time, and each
    native aggregation's input rows, as this run left them."""
    replay = compiled.replay
    assert replay is not None
    stream_times = dict(before.stream_times)
    for name, row in observed.items():
        if name.startswith(STREAM_TIME_OBSERVATION):
            node = name[len(STREAM_TIME_OBSERVATION):]
            old = list(stream_times.get(node, ())) or [-1] * len(row)
            stream_times[node] = tuple(max(o, -1 if t is None else int(t)) for o, t in zip(old, row.values()))
    states = {node: carried.rows(observed) if isinstance(carried, ObservedCarry) else [tuple(r) for r in carried.collect()]
              for node, carried in replay.carried_states.items()}
    return ReplayCarry(
        first_position,
        states,
        stream_times,
        {node: [tuple(r) for r in df.collect()] for node, df in replay.native_inputs.items()},
        {node: df.schema for node, df in replay.native_inputs.items()},
    )
