"""``TopologyTestDriver``: run a topology without a broker, record by record.

Like Kafka Streams' driver, records are processed in ``pipe_input`` order across all topics,
stream time advances with every record, and what a record causes is forwarded before the next
record is processed (the record cache is flushed after every record, unless
``statestore.cache.max.bytes`` is 0: then every store write is forwarded).

Two engines run the topology (`streamsdsl.runtime.engines`): ``engine="direct"`` (the default)
in the test process, on the same kernels as the Spark operators, with no JVM; ``engine="spark"``
the topology's **compiled Spark plan** (the same lowering and the same stateful operators as in
streaming) as a batch job over the records piped since its previous run. The environment
variable ``STREAMSDSL_TEST_ENGINE`` switches every driver of a process. Reading an output topic
(or the metrics, or a store) runs the records piped since the last read.
"""

from __future__ import annotations

import time
from collections import deque
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Callable, Iterable

import attrs

from streamsdsl._validation import validate_topic
from streamsdsl.errors import InvalidArgumentError, InvalidTypeError, TopologyError
from streamsdsl.runtime.config import DriverConfig
from streamsdsl.runtime.engines import DirectDriverEngine, Engine, RawRecord, SinkSerdes, SparkDriverEngine
from streamsdsl.runtime.engines import StreamingDriverEngine
from streamsdsl.runtime.engines import _Failed, engine_choice
from streamsdsl.runtime.errors import IllegalStateError, NoSinkError
from streamsdsl.runtime.stores import KeyValue, ReadOnlyKeyValueStore, ReadOnlySessionStore, ReadOnlyWindowStore, StoreEntry
from streamsdsl.runtime.stores import ValueAndTimestamp
from streamsdsl.values.serdes import DEFAULT_SERDE, Serde, SessionWindowedSerde, TimeWindowedSerde, check_serde

from streamsdsl import ir

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from streamsdsl.ir.topology import Topology

__all__ = ["KeyValue", "TestInputTopic", "TestOutputTopic", "TestRecord", "TopologyTestDriver", "ValueAndTimestamp"]

AnySerde = Serde | SessionWindowedSerde | TimeWindowedSerde
_MISSING: Any = object()


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
            RawRecord(self.topic, self._key_serde.serialize(key), self._value_serde.serialize(value),
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

    def _queue(self) -> deque[RawRecord]:
        self._driver._process()
        return self._driver._outputs.setdefault(self.topic, deque())

    def _decode(self, raw: RawRecord) -> TestRecord:
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
        """The latest value per key, as Kafka's ``readKeyValuesToMap``: a key whose latest record is
        a tombstone maps to ``None``; a record without a key fails (Kafka's
        ``IllegalStateException``), after the records before it were read."""
        out: dict[Any, Any] = {}
        while not self.is_empty():
            kv = self.read_key_value()
            if kv.key is None:
                raise IllegalStateError(f"Null keys not allowed with read_key_values_to_map (topic "
                                        f"{self.topic!r}): read its records with read_key_values_to_list().")
            out[kv.key] = kv.value
        return out

    def is_empty(self) -> bool:
        return not self._queue()

    def get_queue_size(self) -> int:
        return len(self._queue())


class TopologyTestDriver:
    """Run a `Topology` without a broker (see the module docs).

    Parameters
    ----------
    topology
        The topology to run.
    config
        Optional settings: ``default.deserialization.exception.handler`` (``log_and_fail`` or
        ``log_and_continue``), ``errors.dead.letter.topic`` (where ``log_and_continue`` writes
        the records it skips), ``statestore.cache.max.bytes`` (0: forward every store write),
        and ``spark.*`` keys for the SparkSession when the Spark engine creates it.
    engine
        ``"direct"`` (in the test process, no Spark) or ``"spark"`` (the compiled Spark plan);
        default: the environment variable ``STREAMSDSL_TEST_ENGINE``, else ``"direct"``.
    spark
        The Spark engine's SparkSession (default: the active one, or a new local one with the
        settings streamsdsl needs; one per process). The direct engine does not use it.
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
                 engine: Engine | str | None = None, spark: SparkSession | None = None,
                 initial_wall_clock_time_ms: int | None = None) -> None:
        from streamsdsl.ir.topology import Topology as _Topology

        if not isinstance(topology, _Topology):
            raise InvalidTypeError(
                f"'topology' must be a Topology from StreamsBuilder.build() (got {type(topology).__name__})."
            )
        if not topology.sinks and not topology.runs_unread():
            raise NoSinkError(
                "the topology has no sink, so the driver would run nothing and no output topic could be read: "
                "add .to(topic) where its records should go."
            )
        self.config = DriverConfig.from_mapping(config)
        #: The topology as it runs: ``streamsdsl.window.idle.close.ms`` set on its on-close aggregations.
        self.topology = topology = topology.with_idle_close(self.config.idle_close_ms)
        self.engine = engine_choice(engine)
        self._wall_clock_ms = _duration_ms(initial_wall_clock_time_ms, "initial_wall_clock_time_ms") \
            if initial_wall_clock_time_ms is not None else int(time.time() * 1000)
        self._engine: DirectDriverEngine | SparkDriverEngine | StreamingDriverEngine = (
            DirectDriverEngine(topology, self.config, self._wall_clock_ms) if self.engine is Engine.DIRECT
            else SparkDriverEngine(topology, self.config, spark, self._wall_clock_ms) if self.engine is Engine.SPARK
            else StreamingDriverEngine(topology, self.config, spark))
        self._dlq_topic = self.config.dead_letter_topic
        self._records: list[RawRecord] = []
        self._offsets: list[int] = []  # per piped record: its offset in its topic
        self._topic_sizes: dict[str, int] = {}
        self._processed = 0
        self._outputs: dict[str, deque[RawRecord]] = {}
        self._closed = False

    # -- context manager ------------------------------------------------------------------------
    def __enter__(self) -> TopologyTestDriver:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        """Close the driver; a topology with ``foreach`` or ``print`` first runs the records
        piped since the last read, so that their actions have run for every piped record."""
        try:
            if not self._closed and any(isinstance(n, ir.ForeachNode) for n in self.topology.nodes):
                self._process()
        finally:
            self._closed = True
            self._engine.close()

    # -- topics ---------------------------------------------------------------------------------
    def _source_for(self, topic: str) -> ir.SourceNode:
        """The source reading ``topic``: the one naming it, or the one whose pattern matches it
        in full (Kafka's driver routes a topic to a pattern source the same way)."""
        validate_topic(topic, "topic")
        found = self.topology.sources_reading(topic)
        if len(found) > 1:  # only two patterns can both match (the builder refuses the rest)
            first, other = (s.pattern.pattern for s in found[:2] if s.pattern is not None)
            raise TopologyError(
                f"Topic {topic} is already matched for another regex pattern {first} and hence cannot be matched "
                f"to this regex pattern {other} any more. A topic is read by one source: narrow the patterns.")
        if not found:
            patterns = [p.pattern for p in self.topology.source_patterns]
            raise TopologyError(
                f"Unknown topic {topic!r}: the topology reads {list(self.topology.source_topics)}"
                + (f" and the topics matching {patterns} in full" if patterns else "") + ".")
        return found[0]

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
            from streamsdsl.values.serdes import Serdes

            dlq_key, dlq_value = key_serde or Serdes.Bytes(), value_serde or Serdes.Bytes()
            return TestOutputTopic(self, topic, lambda: dlq_key, lambda: dlq_value)
        if topic not in self.topology.sink_topics:
            raise TopologyError(f"Unknown topic {topic!r}: the topology writes {list(self.topology.sink_topics)}.")
        if key_serde is not None and not isinstance(key_serde, (SessionWindowedSerde, TimeWindowedSerde)):
            key_serde = check_serde(key_serde, "key_serde")

        def sink() -> SinkSerdes:
            return self._engine.sink(topic)

        def key() -> AnySerde:
            if key_serde is None:
                return sink().key_reader()
            if isinstance(key_serde, (SessionWindowedSerde, TimeWindowedSerde)):
                return key_serde
            return sink().key_codec.with_serde(key_serde).reader()  # type: ignore[no-any-return]

        return TestOutputTopic(self, topic, key, lambda: value_serde or sink().value_serde)

    def metrics(self) -> dict[str, float]:
        """Task-level metrics: ``dropped-records-total``, ``emit-final-records-total``,
        ``emit-final-latency-max`` and ``emit-final-latency-avg`` (KIP-825)."""
        self._process()
        return self._engine.metrics()

    def advance_wall_clock_time(self, advance: int | timedelta) -> None:
        """Advance the driver's (mock) wall-clock time by ``advance`` (ms or a ``timedelta``): run
        the records piped so far, then fire the processors' wall-clock punctuators due
        (``PunctuationType.WALL_CLOCK_TIME``), as Kafka's driver does.

        Only idle close reads wall-clock time among the DSL operators: an aggregation with
        ``EmitStrategy.on_window_close(idle_close=...)`` (or ``streamsdsl.window.idle.close.ms``)
        first closes every key's open windows once no record has reached it for that long. Otherwise
        stream time drives every window, and the driver, as Kafka's, emits on-close results
        without the wall-clock emit interval."""
        ms = _duration_ms(advance, "advance")
        self._process()
        self._wall_clock_ms += ms
        try:
            out = self._engine.advance_wall_clock(self._wall_clock_ms)
        except _Failed as failure:
            self._deliver(failure.output)
            raise failure.error from failure.error.__cause__
        self._deliver(out)

    # -- state stores ---------------------------------------------------------------------------
    def get_key_value_store(self, name: str) -> ReadOnlyKeyValueStore:
        """A key-value store, read-only: an unwindowed aggregation's (``count``, ``reduce``,
        ``aggregate``), a table's (``StreamsBuilder.table`` or ``to_table`` with a store, as
        ``Materialized.as_`` names it or a join creates it) or a materialized table–table join's:
        the latest value per key."""
        if self.topology.state_store(name) is not None:
            return self._processor_store(name, "key-value")
        return ReadOnlyKeyValueStore(name, self._store_reader(name, "key-value"))

    def get_timestamped_key_value_store(self, name: str) -> ReadOnlyKeyValueStore:
        """`get_key_value_store` whose values are `ValueAndTimestamp` (the value and the timestamp
        stored with it), as Kafka's ``getTimestampedKeyValueStore``."""
        return ReadOnlyKeyValueStore(name, self._store_reader(name, "key-value"), timestamped=True)

    def get_window_store(self, name: str) -> ReadOnlyWindowStore:
        """A window store, read-only: a time- or sliding-window aggregation's, or one of a
        stream–stream join's two (each side's buffered records, a window per record from its
        timestamp, the join window's size long, as Kafka Streams' join stores)."""
        if self.topology.state_store(name) is not None:
            return self._processor_store(name, "window")
        return ReadOnlyWindowStore(name, self._store_reader(name, "window"))

    def get_timestamped_window_store(self, name: str) -> ReadOnlyWindowStore:
        """`get_window_store` whose values are `ValueAndTimestamp`, as Kafka's
        ``getTimestampedWindowStore``."""
        return ReadOnlyWindowStore(name, self._store_reader(name, "window"), timestamped=True)

    def get_session_store(self, name: str) -> ReadOnlySessionStore:
        """The store of a session-window aggregation, read-only."""
        if self.topology.state_store(name) is not None:
            return self._processor_store(name, "session")
        return ReadOnlySessionStore(name, self._store_reader(name, "session"))

    def _processor_store(self, name: str, kind: str) -> Any:
        """A processor's store (``StreamsBuilder.add_state_store``): the store itself, as Kafka's
        driver returns it (reads and writes), running the records piped so far before each call."""
        builder = self.topology.state_store(name)
        assert builder is not None
        actual = "key-value" if builder.kind == "timestamped-key-value" else builder.kind
        if actual != kind:
            method = {"key-value": "get_key_value_store", "window": "get_window_store",
                      "session": "get_session_store"}[actual]
            raise TopologyError(f"State store {name!r} is a {builder.kind} store (added with add_state_store): read it "
                                f"with {method}().")
        return _LiveStore(self, name)

    def _store_reader(self, name: str, kind: str) -> Callable[[], list[StoreEntry]]:
        from streamsdsl.errors import OperationNotDefinedError

        nodes = [n for n in self.topology.nodes if name in n.stores]
        if not nodes:
            raise TopologyError(f"Unknown state store {name!r}: the topology's stores are "
                                f"{list(self.topology.store_names)}.")
        node = nodes[0]  # the node that holds it (parents come first: a table before the joins reading it)
        if isinstance(node, ir.StreamStreamJoinNode) and name == node.outer_store:
            raise OperationNotDefinedError(
                f"State store {name!r} is the shared outer-join store of the stream-stream join {node.name} (the "
                "records that wait for their window to close, in Kafka's internal layout): the test driver "
                f"does not read it; read the join's window stores {node.this_store!r} and {node.other_store!r} with "
                "get_window_store().")
        windows = getattr(node, "windows", None)
        actual = ("key-value" if windows is None else "session" if isinstance(node, ir.SessionAggregateNode)
                  or type(windows).__name__ == "SessionWindows" else "window")
        if actual != kind:
            method = {"key-value": "get_key_value_store", "window": "get_window_store",
                      "session": "get_session_store"}[actual]
            raise TopologyError(f"State store {name!r} is a {actual} store (of {node.name}): read it with {method}().")

        def read() -> list[StoreEntry]:
            self._process()
            return self._engine.store_entries(node, name)

        return read

    # -- running --------------------------------------------------------------------------------
    def _append(self, raw: RawRecord) -> None:
        if self._closed:
            raise TopologyError("This TopologyTestDriver is closed.")
        offset = self._topic_sizes.get(raw.topic, 0)
        self._topic_sizes[raw.topic] = offset + 1
        self._offsets.append(offset)
        self._records.append(raw)

    def _process(self) -> None:
        """Run the records piped since the previous run, on the state that run left.

        If a record fails, the records piped before it are run (their output stays readable),
        the failed record is consumed, and its `RecordError` is raised, once."""
        if self._processed == len(self._records):
            return
        start, end = self._processed, len(self._records)
        try:
            out = self._engine.run(self._records, self._offsets, start, end)
        except _Failed as failure:
            self._deliver(failure.output)
            error = failure.error
            failed = error.position if error.position is not None and start <= error.position else start
            self._processed = failed + 1
            raise error.located(self._records[failed].topic, 0, self._offsets[failed]) from error.__cause__
        self._deliver(out)
        self._processed = end

    def _deliver(self, records: list[RawRecord]) -> None:
        for raw in records:
            self._outputs.setdefault(raw.topic, deque()).append(raw)


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


class _LiveStore:
    """A processor's store as the driver returns it: every method call first runs the records
    piped so far (as Kafka's driver has processed them by then), then calls the store's."""

    def __init__(self, driver: TopologyTestDriver, name: str) -> None:
        self._driver, self._name = driver, name

    def __getattr__(self, attr: str) -> Any:
        driver = self._driver
        driver._process()
        target = getattr(driver._engine.processor_store(self._name), attr)
        if not callable(target):
            return target

        def call(*args: Any, **kwargs: Any) -> Any:
            driver._process()
            return target(*args, **kwargs)

        return call

    def __repr__(self) -> str:
        return f"<state store {self._name!r} of the test driver>"
