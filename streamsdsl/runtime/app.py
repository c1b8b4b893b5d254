"""The application runner: `KafkaStreams` runs a topology Kafka → Spark → Kafka.

`KafkaStreams` mirrors Kafka Streams' class of the same name. It reads the topology's source
topics with the ``streamsdsl-kafka`` data source (`streamsdsl.io.source`), or with
Spark's JVM Kafka connector when ``kafka.connector`` is ``"jvm"``, runs the
whole topology as **one** Spark Structured Streaming query, and writes each sink's records
to its topic with the ``streamsdsl-kafka`` batch writer (`streamsdsl.io.sink`), once
per micro-batch. Offsets and operator state live in a Spark checkpoint under
``state.dir/application.id/checkpoint``: a new `KafkaStreams` with the same
``application.id`` and ``state.dir`` resumes where the previous one stopped.

The configuration is validated by `streamsdsl.runtime.config.StreamsConfig`; the JVM
connector lives in `streamsdsl.runtime.jvm_connector`, the sink in
`streamsdsl.runtime.kafka_sink`, the errors in `streamsdsl.runtime.errors`, what a failed query raises in
`streamsdsl.runtime.failures`.

Delivery is **at-least-once** (a batch interrupted before its checkpoint commit, by a crash or
``kill -9``, is written again after the restart) or, with ``processing.guarantee =
exactly_once_v2``, exactly-once for ``read_committed`` consumers (`streamsdsl.runtime.kafka_sink`).

Examples
--------
>>> from streamsdsl import KafkaStreams, StreamsBuilder
>>> builder = StreamsBuilder()
>>> builder.stream("orders").to("orders-copy")
>>> app = KafkaStreams(builder.build(), {
...     "application.id": "copy-orders",
...     "bootstrap.servers": "localhost:9092",
...     "commit.interval.ms": 200,
... })
>>> app.state()
<State.CREATED: 'CREATED'>
>>> app.start()  # doctest: +SKIP
>>> app.process_all_available()  # doctest: +SKIP
>>> app.close()  # doctest: +SKIP
True
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import threading
import time
from collections.abc import Callable, Mapping
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from streamsdsl.errors import InvalidTypeError, NotYetAttributes, StreamsDslError
from streamsdsl.io.leases import ClientLease
from streamsdsl.ir.topology import Topology
from streamsdsl.runtime.config import Connector, StreamsConfig, StreamsConfigError
from streamsdsl.runtime.connect import is_connect
from streamsdsl.jvm import CheckpointOperatorError
from streamsdsl.runtime.errors import IllegalStateError, NoSinkError, StreamsError
from streamsdsl.runtime.failures import locate, query_error
from streamsdsl.runtime.topics import check_topics, source_partitions
from streamsdsl.runtime.wiring import application_session, prepare_session, start_query
from streamsdsl.runtime.kafka_sink import KafkaTopicSink
from streamsdsl.runtime.lifecycle import CONNECT_TERMINATION_WAIT_S, MAX_REPLACEMENTS, State, StreamThreadExceptionResponse
from streamsdsl.runtime.lifecycle import check_callable, progress_listener, seconds as _seconds, transition_path
from streamsdsl.runtime.metrics import Metrics, QueryMetrics, completed_batch, log_progress
from streamsdsl.runtime.operations import MetricsPublisher
from streamsdsl.runtime.queries import StoreQueryParameters, StoreReader, store_view
from streamsdsl.runtime.state_stores import release_state_stores

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.streaming import StreamingQuery

    from streamsdsl.compiler import CompiledTopology

__all__ = ["MAX_REPLACEMENTS", "KafkaStreams", "State", "StreamThreadExceptionResponse"]

log = logging.getLogger("streamsdsl")


class KafkaStreams(NotYetAttributes):
    """Run a topology against Kafka as one Spark streaming query (Kafka Streams' ``KafkaStreams``).

    Parameters
    ----------
    topology : Topology
        From ``StreamsBuilder.build()``.
    config : mapping
        Configuration keys (see `StreamsConfig` and the docs page *Kafka in and out*):
        ``application.id`` and ``bootstrap.servers`` are required.
    spark : SparkSession, optional
        The session to run on; by default `streamsdsl.runtime.session.get_session` with the
        ``spark.*`` settings of ``config``.

    Raises
    ------
    StreamsConfigError
        If a configuration key is missing, unknown or invalid.
    streamsdsl.runtime.errors.NoSinkError
        If the topology has no sink, no processor and no named store: nothing would run (a
        ``TopologyError`` and a ``StreamsConfigError``, as in the test driver).

    Examples
    --------
    >>> from streamsdsl import StreamsBuilder
    >>> builder = StreamsBuilder()
    >>> builder.stream("in").to("out")
    >>> KafkaStreams(builder.build(), {"bootstrap.servers": "localhost:9092"})
    Traceback (most recent call last):
    ...
    streamsdsl.runtime.config.StreamsConfigError: 'application.id' is required: ...
    >>> KafkaStreams(builder.build(), {"application.id": "copy", "bootstrap.servers": "localhost:9092",
    ...                                "processing.guarantee": "exactly_once"})
    Traceback (most recent call last):
    ...
    streamsdsl.runtime.config.StreamsConfigError: 'processing.guarantee' = 'exactly_once' was removed in Kafka Streams 4.0 ...
    """

    State = State

    def __init__(self, topology: Topology, config: Mapping[str, Any], *, spark: SparkSession | None = None) -> None:
        if not isinstance(topology, Topology):
            raise InvalidTypeError(
                f"'topology' must be a Topology from StreamsBuilder.build() (got {type(topology).__name__})."
            )
        if not topology.sinks and not topology.runs_unread():
            raise NoSinkError("the topology has no sink: add .to(topic) somewhere to run it.") from None
        self.config = StreamsConfig.from_mapping(config)
        #: The topology as it runs: ``streamsdsl.window.idle.close.ms`` set on its on-close aggregations.
        self.topology = topology.with_idle_close(self.config.idle_close_ms)
        self._spark = spark
        self._state = State.CREATED
        self._lock = threading.RLock()
        self._query: StreamingQuery | None = None
        self._compiled: CompiledTopology | None = None
        self._store_reader: StoreReader | None = None
        self._metrics: QueryMetrics | None = None
        #: The metrics after each batch, published to Spark's metrics system (`streamsdsl.runtime.operations`).
        self._publisher = MetricsPublisher(self.config.application_id)
        self._sink: KafkaTopicSink | None = None
        #: The lease of the Kafka clients the executors keep for this run (released by close()).
        self._lease: ClientLease | None = None
        self._listener: Any = None
        self._error: BaseException | None = None
        self._state_listener: Callable[[State, State], Any] | None = None
        self._exception_handler: Callable[[StreamsDslError], StreamThreadExceptionResponse] | None = None
        self._failure_lock = threading.RLock()
        #: run id -> whether its failure replaced the query (a replacement keeps the query id, as
        #: it restarts on the same checkpoint; each run has its own run id)
        self._handled: dict[str, bool] = {}
        self._replacements = 0  # REPLACE_THREAD restarts since the last micro-batch that made progress

    def __repr__(self) -> str:
        return f"KafkaStreams(application.id={self.config.application_id!r}, state={self.state().value})"

    def __enter__(self) -> KafkaStreams:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # -- handlers ---------------------------------------------------------------------------
    def set_state_listener(self, listener: Callable[[State, State], Any]) -> None:
        """Call ``listener(new_state, old_state)`` on every `State` transition (Kafka Streams'
        ``setStateListener``).

        The listener runs on the thread that causes the transition (the caller of `start`
        or `close`, or the thread that handles a query failure), while the state lock is held;
        an exception it raises is logged and ignored.

        Parameters
        ----------
        listener : callable
            Takes two positional arguments: the new and the old `State`.

        Raises
        ------
        IllegalStateError
            If the application was already started (or closed).
        InvalidTypeError
            If ``listener`` is not a callable taking two positional arguments.

        Examples
        --------
        >>> from streamsdsl import StreamsBuilder
        >>> builder = StreamsBuilder()
        >>> builder.stream("in").to("out")
        >>> app = KafkaStreams(builder.build(), {"application.id": "copy", "bootstrap.servers": "localhost:9092"})
        >>> app.set_state_listener(lambda new, old: print(f"{old.value} -> {new.value}"))
        >>> app.close()
        CREATED -> PENDING_SHUTDOWN
        PENDING_SHUTDOWN -> NOT_RUNNING
        True
        >>> app.set_state_listener(print)
        Traceback (most recent call last):
        ...
        streamsdsl.runtime.errors.IllegalStateError: Can only set the state listener before calling start() ...
        """
        check_callable(listener, "listener", 2, "listener(new_state, old_state)")
        with self._lock:
            self._require_created("the state listener")
            self._state_listener = listener

    def set_uncaught_exception_handler(
        self, handler: Callable[[StreamsDslError], StreamThreadExceptionResponse]
    ) -> None:
        """Decide what happens when the query fails (Kafka Streams' ``setUncaughtExceptionHandler``).

        When the query fails, ``handler(error)`` is called with the streamsdsl error the
        failure converts to (a `streamsdsl.errors.UserFunctionError` or
        `streamsdsl.errors.RecordError` naming the processor and the record when a record
        failed, else a `StreamsError`; Spark's error is its ``__cause__``), and returns a
        `StreamThreadExceptionResponse`: ``SHUTDOWN_CLIENT`` and ``SHUTDOWN_APPLICATION`` move
        the application to ``ERROR``; ``REPLACE_THREAD`` restarts the query from its checkpoint
        (at most `MAX_REPLACEMENTS` times in a row without progress). A handler that raises or returns something else counts as
        ``SHUTDOWN_CLIENT``.

        Without a handler a failure moves the application to ``ERROR``, and
        `process_all_available` and `await_termination` raise the error.

        Parameters
        ----------
        handler : callable
            Takes one positional argument (the error), returns a `StreamThreadExceptionResponse`.

        Raises
        ------
        IllegalStateError
            Once the application has started (or closed): set the handler before `start`.
        InvalidTypeError
            If ``handler`` is not a callable taking one positional argument.

        Examples
        --------
        A handler that restarts the query after a failure, unless a record failed:

        >>> from streamsdsl import RecordError, StreamsBuilder
        >>> def on_failure(error):
        ...     if isinstance(error, RecordError):
        ...         return StreamThreadExceptionResponse.SHUTDOWN_CLIENT
        ...     return StreamThreadExceptionResponse.REPLACE_THREAD
        >>> b = StreamsBuilder()
        >>> b.stream("orders").map_values(str.upper).to("orders-upper")
        >>> app = KafkaStreams(b.build(), {"application.id": "upper", "bootstrap.servers": "broker:9092"})
        >>> app.set_uncaught_exception_handler(on_failure)
        >>> app.set_uncaught_exception_handler(lambda: None)
        Traceback (most recent call last):
        ...
        streamsdsl.errors.InvalidTypeError: 'handler' must be a callable handler(exception) -> ...
        """
        check_callable(handler, "handler", 1, "handler(exception) -> StreamThreadExceptionResponse")
        with self._lock:
            self._require_created("the uncaught exception handler")
            self._exception_handler = handler

    def _require_created(self, what: str) -> None:
        if self._state is not State.CREATED:
            raise IllegalStateError(
                f"Can only set {what} before calling start() (state is {self._state.value})."
            )

    # -- lifecycle --------------------------------------------------------------------------
    def start(self) -> None:
        """Start the streaming query; resumes from the checkpoint when there is one.

        Raises
        ------
        IllegalStateError
            If called more than once (create a new `KafkaStreams` to restart).
        MissingTopicError
            If a source, sink or dead-letter topic does not exist.
        streamsdsl.runtime.errors.TopologyChangedError
            If the checkpoint was written by a topology whose stateful part differs from this one
            (an added, removed or changed aggregation or window, or a re-keying before one); the
            message names the change and the fix (``streamsdsl reset --application-id ...``, or
            `clean_up` before `start`). Stateless changes are accepted.
        streamsdsl.jvm.CheckpointOperatorError
            If the checkpoint's aggregations ran on the other operator (``streamsdsl.operator``).

        After `MissingTopicError`, ``TopologyChangedError`` and ``CheckpointOperatorError`` nothing
        was started and the application stays ``CREATED``: it may be started again (for example
        after `clean_up`).
        """
        from streamsdsl.runtime.warmup import start_python_workers

        with self._lock:
            if self._state is not State.CREATED:
                raise IllegalStateError(
                    f"start() can only be called once (state is {self._state.value}); to restart, create a new "
                    f"KafkaStreams with the same 'application.id' ({self.config.application_id!r}): it resumes "
                    "from the checkpoint."
                )
            spark = self._session()
            prepare_session(spark, self.config)
            check_topics(self.config, self.topology)
            start_python_workers(spark)  # in the background, while the query is planned
            os.makedirs(self.config.app_dir, exist_ok=True)
            self._metrics = QueryMetrics(on_progress=self._log_progress, locate=functools.partial(locate, self.topology))
            self._lease = ClientLease.create(prefix=f"streamsdsl-{self.config.application_id}-clients-")
            self._sink = KafkaTopicSink(self.config, self._lease.path)
            self._listener = progress_listener(self.config.application_id, lambda: self._metrics,
                                               self._on_query_terminated)
            spark.streams.addListener(self._listener)
            self._publisher.register(spark)
            resumed = os.path.isdir(os.path.join(self.config.checkpoint_location, "commits"))
            try:
                self._query, self._compiled = self._start_query(spark)
            except (StreamsConfigError, CheckpointOperatorError):
                # A check of the checkpoint failed before the query started: nothing runs, and the
                # application stays CREATED (clean_up() then start() begins afresh, as in Kafka Streams).
                self._remove_listener()
                self._publisher.close()
                self._metrics = self._sink = None
                self._release_clients(None)
                raise
            except BaseException:
                # The query failed to start (before or after the checkpoint's checks passed): it
                # was starting (REBALANCING), then PENDING_ERROR -> ERROR.
                self._transition(State.REBALANCING)
                self._stopped(State.ERROR)
                self._release_clients(None)
                raise
            self._transition(State.RUNNING)
        ui = None if is_connect(spark) else spark.sparkContext.uiWebUrl  # Spark Connect: the server's UI
        log.info(
            "KafkaStreams %r started (%s checkpoint %s); reading %s, writing %s; Spark UI: %s",
            self.config.application_id,
            "resuming from" if resumed else "new",
            self.config.checkpoint_location,
            ", ".join(self.topology.source_topics)
            + (" with Spark's JVM Kafka connector" if self.config.connector is Connector.JVM else ""),
            ", ".join(self.topology.sink_topics),
            ui or "disabled (spark.ui.enabled=false)",
        )
        if self._publisher.endpoint:
            log.info("KafkaStreams %r metrics (Prometheus): %s", self.config.application_id, self._publisher.endpoint)

    def _start_query(self, spark: SparkSession) -> tuple[StreamingQuery, CompiledTopology]:
        """Start the topology's query on the checkpoint (also used to replace a failed query)."""
        assert self._sink is not None and self._metrics is not None
        return start_query(spark, self.topology, self.config, self._lease, self._sink, self._metrics,
                           before_start=self._check_topology)

    def _check_topology(self, operators: dict[str, Any]) -> None:
        """Compare the topology's stateful part with the checkpoint's and store its fingerprint
        (`streamsdsl.runtime.checkpoint.check_topology`); ``operators`` is the compiler's report.
        Then the query starts: ``REBALANCING`` (as Kafka Streams' threads get their partitions)."""
        from streamsdsl.runtime.checkpoint import check_topology
        from streamsdsl.runtime.fingerprint import topology_fingerprint

        check_topology(self.config.checkpoint_location, topology_fingerprint(self.topology, operators),
                       application_id=self.config.application_id, state_dir=self.config.state_dir)
        self._transition(State.REBALANCING)

    def close(self, timeout: float | timedelta | None = None) -> bool:
        """Stop the application: let a running micro-batch finish, stop the query, then close every Kafka
        client it created, in the driver and in Spark's Python workers (which outlive the query).

        Parameters
        ----------
        timeout : float or timedelta, optional
            Seconds to wait; ``None`` waits until the query has stopped (then up to 30 s for the clients).

        Returns
        -------
        bool
            True if the query stopped and the clients closed within ``timeout`` (``close(Duration)``).
        """
        seconds = _seconds(timeout)
        deadline = None if seconds is None else time.monotonic() + seconds
        with self._lock:
            if self._state is State.CREATED:
                self._transition(State.NOT_RUNNING)
                return True
            query = self._query
            if query is not None and self._state.is_running_or_rebalancing() and self._exception_handler is None \
                    and not query.isActive and query.exception() is not None:
                self._stopped(State.ERROR)  # it failed before close(): RUNNING -> PENDING_ERROR -> ERROR
            stopped = query is None or self._state.has_completed_shutdown()
            if not stopped and self._state.is_running_or_rebalancing():
                self._transition(State.PENDING_SHUTDOWN)
        if stopped or query is None:
            return self._release_clients(deadline)
        # A micro-batch interrupted half-way is replayed after a restart (duplicates): wait for
        # the running trigger to finish first, but only that one: with a backlog the next trigger
        # starts at once, and waiting for an idle moment would drain the whole backlog.
        running = completed_batch(query) + 1
        while query.isActive and query.status.get("isTriggerActive") and completed_batch(query) < running:
            if deadline is not None and time.monotonic() >= deadline:
                break
            time.sleep(0.02)
        stopper = threading.Thread(target=self._stop_query, args=(query,), name="streamsdsl-close", daemon=True)
        stopper.start()
        stopper.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
        if stopper.is_alive():
            return False
        return self._release_clients(deadline)

    def _release_clients(self, deadline: float | None) -> bool:
        """Release the run's client lease: each Python worker closes the Kafka clients it kept for this
        application (`streamsdsl.io.leases`). True once all have by ``deadline`` (None: 30 s, then True)."""
        lease, self._lease, seconds = self._lease, None, 30.0 if deadline is None else max(0.0, deadline - time.monotonic())
        return lease is None or lease.release(seconds, owner=f"KafkaStreams {self.config.application_id!r}") \
            or deadline is None

    def _stop_query(self, query: StreamingQuery) -> None:
        try:
            query.stop()
            release_state_stores(self._spark, query.runId, self.config.checkpoint_location)  # as Kafka Streams closes its stores
        except Exception as exc:  # noqa: BLE001 - recorded and logged
            self._error = exc
        if self._metrics is not None:
            self._metrics.refresh()
        # Kafka Streams: PENDING_SHUTDOWN -> NOT_RUNNING only (close() put a query failed before it in ERROR).
        failure = self._error or query.exception()
        if failure is not None and self._state is State.PENDING_SHUTDOWN:
            log.error("KafkaStreams %r: the query failed while it shut down: %s", self.config.application_id, failure)
        self._stopped(State.NOT_RUNNING)
        log.info("KafkaStreams %r stopped (%s)", self.config.application_id, self._state.value)

    def await_termination(self, timeout: float | timedelta | None = None) -> bool:
        """Wait until the query stops (``close()`` from another thread, or a failure).

        Returns
        -------
        bool
            True if the query has terminated, False if ``timeout`` seconds passed first.

        Raises
        ------
        StreamsError
            If the query failed.
        """
        self._require_started("await_termination")
        seconds = _seconds(timeout)
        deadline = None if seconds is None else time.monotonic() + seconds
        while True:
            query = self._require_started("await_termination")
            try:
                if deadline is None:
                    query.awaitTermination()
                    return True
                return bool(query.awaitTermination(max(0.0, deadline - time.monotonic())))
            except Exception as exc:
                if self._handle_failure(query, exc):
                    continue  # replaced (REPLACE_THREAD): wait for the new query
                raise self._failure(exc) from exc

    def process_all_available(self) -> None:
        """Block until every record available in the source topics when called is processed.

        Also waits for the no-data micro-batch in which Spark fires the timers of windows the last
        batch closed. Meant for tests and examples; with an unbounded input it may not return.

        Raises
        ------
        IllegalStateError
            If the application is not running.
        StreamsError
            If the query failed (for example a record ``log_and_fail`` could not deserialize;
            the message names topic, partition and offset).
        """
        query = self._require_started("process_all_available")
        if not query.isActive and query.exception() is None:
            raise IllegalStateError(f"process_all_available() needs a running application (state is "
                                    f"{self.state().value}).")
        from streamsdsl.runtime.streaming import await_event_time_timers, process_all_available

        while True:
            try:
                process_all_available(query, self.topology)
                break
            except Exception as exc:
                if self._handle_failure(query, exc):
                    query = self._require_started("process_all_available")  # replaced: go on with it
                    continue
                raise self._failure(exc) from exc
        await_event_time_timers(query, self.topology)
        if self._metrics is not None:
            self._metrics.refresh()

    def state(self) -> State:
        """The current `State` (``ERROR`` as soon as the query has failed)."""
        with self._lock:
            query = self._query
            if (self._state.is_running_or_rebalancing() and query is not None
                    and self._exception_handler is None and not query.isActive):
                # With a handler, the failure is handled (and the state moved) by _handle_failure.
                if query.exception() is not None:
                    self._stopped(State.ERROR)
            return self._state

    def clean_up(self) -> None:
        """Delete the application's checkpoint and state: the next start begins afresh (Kafka
        Streams' ``cleanUp()``; ``streamsdsl reset`` from the shell).

        Removes ``state.dir/application.id/checkpoint`` (source offsets, commits, operator state,
        the topology fingerprint) and ``state.dir/application.id`` when nothing else is in it
        (`streamsdsl.runtime.checkpoint.reset_application`). Allowed before `start` (also after a
        ``TopologyChangedError``, then `start` again) and after `close`.

        Raises
        ------
        IllegalStateError
            If the application is running.
        """
        from streamsdsl.runtime.checkpoint import reset_application

        with self._lock:
            if not (self._state.has_not_started() or self._state.has_completed_shutdown()):
                raise IllegalStateError("clean_up() needs a stopped application: call close() first.")
        removal = reset_application(self.config.application_id, self.config.state_dir)
        for path, note in removal.removed:
            log.info("KafkaStreams %r clean_up(): removed %s (%s)", self.config.application_id, path, note)

    def store(self, params: StoreQueryParameters) -> Any:
        """A read-only view of a named store (Kafka Streams' interactive queries):
        ``app.store(StoreQueryParameters.from_name_and_type("counts", QueryableStoreTypes.key_value_store()))``.

        Every named store is queryable (``Materialized.as_``, ``StreamsBuilder.add_state_store``);
        each answer is the state of the last committed micro-batch, read from the checkpoint once
        per batch (`streamsdsl.runtime.queries`); an unnamed store is refused with the fix.

        Raises
        ------
        IllegalStateError
            Before `start`.
        InvalidStateStoreError
            No such store, another type of store, or a store that is not queryable.
        """
        self._require_started("store")
        if self._store_reader is None or self._store_reader.compiled is not self._compiled:
            self._store_reader = StoreReader(self._session(), self.config.checkpoint_location, self._compiled)
        return store_view(self._store_reader, params)

    @property
    def streaming_query(self) -> StreamingQuery | None:
        """The underlying Spark `StreamingQuery` (None before `start`). Not ``query``: that is
        Kafka Streams' interactive query (``KafkaStreams.query(StateQueryRequest)``), not here yet."""
        return self._query

    # -- internals --------------------------------------------------------------------------
    def _session(self) -> SparkSession:
        """The application's session (built on first use: `application_session`)."""
        if self._spark is None:
            self._spark = application_session(self.config, functools.partial(source_partitions, self.config,
                                                                              self.topology))
        return self._spark

    def _require_started(self, what: str) -> StreamingQuery:
        if self._query is None:
            raise IllegalStateError(f"{what}() needs a started application: call start() first.")
        return self._query

    def _failure(self, exc: BaseException, *, stop: bool = True) -> StreamsDslError:
        """The error a failed query raises (`streamsdsl.runtime.failures.query_error`). Moves to
        ``ERROR`` unless ``stop`` is False."""
        if stop:
            self._stopped(State.ERROR)
        return query_error(exc, self.topology, self.config.application_id)

    def _stopped(self, state: State) -> None:
        """Enter ``state`` (``ERROR`` or ``NOT_RUNNING``, through ``PENDING_ERROR`` or
        ``PENDING_SHUTDOWN``): the query no longer reports progress, its metrics are removed."""
        with self._lock:
            self._transition(state)
            self._remove_listener()
            self._publisher.close()

    def _transition(self, state: State) -> None:
        """Move to ``state`` by Kafka Streams' transitions (`transition_path`), telling the state
        listener of each step; the one place the state changes."""
        with self._lock:
            for step in transition_path(self._state, state):
                old, self._state = self._state, step
                listener = self._state_listener
                if listener is None:
                    continue
                try:
                    listener(step, old)
                except Exception:  # noqa: BLE001 - a listener must not break the application
                    log.exception("KafkaStreams %r: the state listener raised on %s -> %s (ignored)",
                                  self.config.application_id, old.value, step.value)

    # -- query failures -----------------------------------------------------------------------
    def _handle_failure(self, query: StreamingQuery, exc: BaseException) -> bool:
        """Handle the failure of ``query`` once, whoever sees it first (the query listener's
        thread, `process_all_available`, `await_termination`). Returns True if the handler answered
        ``REPLACE_THREAD`` and a new query now runs on the checkpoint (`_replace`); False if the
        application stopped (``SHUTDOWN_CLIENT``, ``SHUTDOWN_APPLICATION``, no handler, a handler that
        failed, too many replacements in a row, or a close under way)."""
        run_id = str(query.runId)
        with self._failure_lock:
            done = self._handled.get(run_id)
            if done is None:
                done = self._handled[run_id] = self._respond(query, exc)
            return done

    def _respond(self, query: StreamingQuery, exc: BaseException) -> bool:
        with self._lock:
            if self._query is not query or self._state not in (State.RUNNING, State.REBALANCING):
                return False  # closing (or already stopped): close()/the caller settle the state
            handler = self._exception_handler
            if handler is None:
                self._stopped(State.ERROR)
                return False
        error = self._failure(exc, stop=False)
        if error.__cause__ is None:
            error.__cause__ = exc
        try:
            response = handler(error)
        except Exception:  # noqa: BLE001 - a broken handler shuts the client down
            log.exception("KafkaStreams %r: the uncaught exception handler raised; shutting down",
                          self.config.application_id)
            response = StreamThreadExceptionResponse.SHUTDOWN_CLIENT
        if not isinstance(response, StreamThreadExceptionResponse):
            log.error("KafkaStreams %r: the uncaught exception handler returned %r, not a "
                      "StreamThreadExceptionResponse; shutting down", self.config.application_id, response)
            response = StreamThreadExceptionResponse.SHUTDOWN_CLIENT
        if response is StreamThreadExceptionResponse.REPLACE_THREAD and self._replace(query, error):
            return True
        log.error("KafkaStreams %r failed (%s): %s", self.config.application_id, response.value, error)
        self._stopped(State.ERROR)
        return False

    def _replace(self, query: StreamingQuery, error: BaseException) -> bool:
        """``REPLACE_THREAD``: start a new query on the checkpoint (it retries the failed
        micro-batch), unless `MAX_REPLACEMENTS` replacements in a row made no progress (a record
        that always fails would otherwise loop for ever: then the client shuts down)."""
        with self._lock:
            if self._replacements >= MAX_REPLACEMENTS:
                log.error("KafkaStreams %r: %d replacements in a row made no progress; shutting down instead of "
                          "REPLACE_THREAD", self.config.application_id, self._replacements)
                return False
            self._replacements += 1
            log.warning("KafkaStreams %r: replacing the failed query (REPLACE_THREAD, %d of %d in a row) after: %s",
                        self.config.application_id, self._replacements, MAX_REPLACEMENTS, error)
            self._transition(State.REBALANCING)
            assert self._spark is not None
            try:
                self._query, self._compiled = self._start_query(self._spark)
            except Exception:  # noqa: BLE001 - the replacement failed: shut down
                log.exception("KafkaStreams %r: the replacement query failed to start", self.config.application_id)
                return False
            self._transition(State.RUNNING)
            return True

    def _on_query_terminated(self, run_id: str, message: str | None) -> None:
        """The query listener saw a query of this session terminate (on its own thread)."""
        with self._lock:
            query = self._query
        if message is None or query is None or str(query.runId) != run_id:
            return
        try:
            exc: BaseException = query.exception() or StreamsError(message)
        except Exception:  # noqa: BLE001 - the session may be gone
            exc = StreamsError(message)
        try:
            self._handle_failure(query, exc)
        except Exception:  # noqa: BLE001 - on a background thread: log, never raise
            log.exception("KafkaStreams %r: handling the query failure failed", self.config.application_id)

    def _remove_listener(self) -> None:
        if self._listener is not None and self._spark is not None:
            self._listener.terminated.wait(CONNECT_TERMINATION_WAIT_S if is_connect(self._spark) else 0)
            with contextlib.suppress(Exception):  # the session may already be stopped
                self._spark.streams.removeListener(self._listener)
            self._listener = None

    # -- progress and metrics ---------------------------------------------------------------
    def metrics(self) -> dict[str, float]:
        """Application metrics (KIP-825 names where Kafka Streams has one).

        Returns
        -------
        dict of str to float
            ``dropped-records-total`` (late records and, with ``log_and_continue``, records
            that could not be deserialized), ``emit-final-records-total``,
            ``emit-final-latency-max``, ``emit-final-latency-avg``, ``input-records-total``,
            ``batches-total``, ``output-records-total`` (records written to sink topics),
            ``dead-letter-records-total``, and over the micro-batches of the last minute
            ``process-total`` (= ``input-records-total``), ``process-rate``,
            ``process-latency-avg``, ``-max``, ``commit-latency-avg``, ``-max`` and
            ``records-lag-max`` (`streamsdsl.runtime.operations.OperationsMetrics`; docs page
            *Operations*). A running application also publishes them to Spark's metrics system.
        """
        if self._metrics is not None:
            self._metrics.refresh()
        return self._totals()

    def _totals(self) -> dict[str, float]:
        """`metrics` as counted so far (no wait for a progress report still to come)."""
        return self._publisher.totals(Metrics.snapshot(self._metrics or QueryMetrics()), self._sink)

    def _log_progress(self, progress: Any, observed: Mapping[str, Mapping[str, Any]] | None = None) -> None:
        """Log one micro-batch's progress (called once per batch by `QueryMetrics`)."""
        self._replacements = 0  # a batch completed: the query makes progress again
        sink = self._sink
        log_progress(self.config.application_id, progress, sink.emitted.pop(progress.batchId, 0) if sink else 0,
                     observed)
        self._publisher.publish(progress, self._totals)
