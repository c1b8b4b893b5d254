"""The application's lifecycle vocabulary (Kafka Streams' names): its `State`, what an uncaught
exception handler answers (`StreamThreadExceptionResponse`), argument checks of the lifecycle
methods, and the query listener that feeds `KafkaStreams` its progress and failures."""

from __future__ import annotations

import enum
import inspect
import logging
import threading
from datetime import timedelta
from typing import Any, Callable

from streamsdsl.errors import InvalidArgumentError, InvalidTypeError


__all__ = ["MAX_REPLACEMENTS", "State", "StreamThreadExceptionResponse", "check_callable", "progress_listener",
           "seconds", "transition_path"]

log = logging.getLogger("streamsdsl")


class State(enum.StrEnum):
    """Lifecycle of a `KafkaStreams` instance (Kafka Streams' ``KafkaStreams.State``), with Kafka
    Streams' legal transitions (`is_valid_transition`)::

        CREATED -> REBALANCING, PENDING_SHUTDOWN
        REBALANCING -> RUNNING, PENDING_SHUTDOWN, PENDING_ERROR
        RUNNING -> REBALANCING, PENDING_SHUTDOWN, PENDING_ERROR
        PENDING_SHUTDOWN -> NOT_RUNNING
        PENDING_ERROR -> ERROR

    ``start()`` goes ``CREATED`` → ``REBALANCING`` (once the checkpoint's checks passed, while
    Spark plans and starts the query: Kafka Streams rebalances while its threads get their
    partitions) → ``RUNNING``. ``close()`` goes ``PENDING_SHUTDOWN`` → ``NOT_RUNNING`` (also
    before ``start()``). A query that fails goes ``PENDING_ERROR`` → ``ERROR``, a terminal
    state (``close()`` leaves it there); a failed query that an uncaught exception handler
    replaces goes ``RUNNING`` → ``REBALANCING`` → ``RUNNING`` (`StreamThreadExceptionResponse`).

    Examples
    --------
    >>> [s.value for s in State]
    ['CREATED', 'REBALANCING', 'RUNNING', 'PENDING_SHUTDOWN', 'NOT_RUNNING', 'PENDING_ERROR', 'ERROR']
    >>> State.RUNNING.is_valid_transition(State.PENDING_ERROR), State.RUNNING.is_valid_transition(State.ERROR)
    (True, False)
    >>> State.REBALANCING.is_running_or_rebalancing(), State.PENDING_ERROR.has_completed_shutdown()
    (True, False)
    """

    CREATED = "CREATED"
    REBALANCING = "REBALANCING"
    RUNNING = "RUNNING"
    PENDING_SHUTDOWN = "PENDING_SHUTDOWN"
    NOT_RUNNING = "NOT_RUNNING"
    PENDING_ERROR = "PENDING_ERROR"
    ERROR = "ERROR"

    def is_valid_transition(self, new_state: State) -> bool:
        """Whether Kafka Streams allows moving from this state to ``new_state``."""
        return new_state in _TRANSITIONS[self]

    def is_running_or_rebalancing(self) -> bool:
        """``RUNNING`` or ``REBALANCING`` (Kafka Streams' ``isRunningOrRebalancing``)."""
        return self in (State.RUNNING, State.REBALANCING)

    def is_shutting_down(self) -> bool:
        """``PENDING_SHUTDOWN`` or ``PENDING_ERROR`` (Kafka Streams' ``isShuttingDown``)."""
        return self in (State.PENDING_SHUTDOWN, State.PENDING_ERROR)

    def has_completed_shutdown(self) -> bool:
        """``NOT_RUNNING`` or ``ERROR`` (Kafka Streams' ``hasCompletedShutdown``)."""
        return self in (State.NOT_RUNNING, State.ERROR)

    def has_not_started(self) -> bool:
        """``CREATED`` (Kafka Streams' ``hasNotStarted``)."""
        return self is State.CREATED


#: Kafka Streams' legal transitions (``KafkaStreams.State``'s constructor arguments).
_TRANSITIONS: dict[State, frozenset[State]] = {
    State.CREATED: frozenset({State.REBALANCING, State.PENDING_SHUTDOWN}),
    State.REBALANCING: frozenset({State.RUNNING, State.PENDING_SHUTDOWN, State.PENDING_ERROR}),
    State.RUNNING: frozenset({State.REBALANCING, State.PENDING_SHUTDOWN, State.PENDING_ERROR}),
    State.PENDING_SHUTDOWN: frozenset({State.NOT_RUNNING}),
    State.NOT_RUNNING: frozenset(),
    State.PENDING_ERROR: frozenset({State.ERROR}),
    State.ERROR: frozenset(),
}


def transition_path(old: State, new: State) -> list[State]:
    """The states `KafkaStreams` passes through from ``old`` to reach ``new`` (``new`` last), by
    Kafka Streams' transitions: ``ERROR`` through ``PENDING_ERROR``, ``NOT_RUNNING`` through
    ``PENDING_SHUTDOWN``. Empty when ``old`` is ``new`` or ``new`` cannot be reached from ``old``
    (a stopped application stays stopped; a shutdown under way ends in ``NOT_RUNNING``).

    Examples
    --------
    >>> [s.value for s in transition_path(State.RUNNING, State.ERROR)]
    ['PENDING_ERROR', 'ERROR']
    >>> [s.value for s in transition_path(State.CREATED, State.NOT_RUNNING)]
    ['PENDING_SHUTDOWN', 'NOT_RUNNING']
    >>> transition_path(State.ERROR, State.NOT_RUNNING), transition_path(State.PENDING_SHUTDOWN, State.ERROR)
    ([], [])
    """
    if old is new:
        return []
    if old.is_valid_transition(new):
        return [new]
    for step in (State.PENDING_ERROR, State.PENDING_SHUTDOWN):
        if old.is_valid_transition(step) and step.is_valid_transition(new):
            return [step, new]
    return []


#: ``REPLACE_THREAD`` restarts in a row, without a completed micro-batch, before shutting down.
MAX_REPLACEMENTS = 3


class StreamThreadExceptionResponse(enum.StrEnum):
    """What an uncaught exception handler asks for (Kafka Streams'
    ``StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse``).

    ``REPLACE_THREAD``
        Kafka Streams replaces the failed thread. Here the failed Spark query is replaced by a
        new one on the same checkpoint, which retries the failed micro-batch (state moves
        ``RUNNING`` → ``REBALANCING`` → ``RUNNING``). After `MAX_REPLACEMENTS` replacements in a
        row without a completed micro-batch (a record that always fails), the application
        shuts down instead (``PENDING_ERROR`` → ``ERROR``).
    ``SHUTDOWN_CLIENT``
        Stop this application instance: its state becomes ``PENDING_ERROR``, then ``ERROR``.
    ``SHUTDOWN_APPLICATION``
        Kafka Streams stops every instance of the application; a streamsdsl application is
        one Spark query, so this is the same as ``SHUTDOWN_CLIENT``.

    Examples
    --------
    >>> StreamThreadExceptionResponse.REPLACE_THREAD
    <StreamThreadExceptionResponse.REPLACE_THREAD: 'REPLACE_THREAD'>
    >>> [r.value for r in StreamThreadExceptionResponse]
    ['REPLACE_THREAD', 'SHUTDOWN_CLIENT', 'SHUTDOWN_APPLICATION']
    """

    REPLACE_THREAD = "REPLACE_THREAD"
    SHUTDOWN_CLIENT = "SHUTDOWN_CLIENT"
    SHUTDOWN_APPLICATION = "SHUTDOWN_APPLICATION"


def check_callable(value: Any, name: str, arity: int, shape: str) -> None:
    """Raise `InvalidTypeError` naming ``name`` unless ``value`` can be called with ``arity``
    positional arguments."""
    if not callable(value):
        raise InvalidTypeError(f"'{name}' must be a callable {shape} (got {type(value).__name__}).")
    try:
        signature = inspect.signature(value)
    except (TypeError, ValueError):  # some builtins have no signature: accept them
        return
    try:
        signature.bind(*([None] * arity))
    except TypeError:
        raise InvalidTypeError(
            f"'{name}' must be a callable {shape}, taking {arity} positional argument{'s' if arity > 1 else ''} "
            f"(got {getattr(value, '__qualname__', type(value).__name__)}{signature})."
        ) from None


def seconds(timeout: float | timedelta | None, name: str = "timeout") -> float | None:
    if timeout is None:
        return None
    if isinstance(timeout, timedelta):
        timeout = timeout.total_seconds()
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout < 0:
        raise InvalidArgumentError(f"'{name}' must be seconds >= 0 or a timedelta (got {timeout!r}).")
    return float(timeout)


#: Seconds `KafkaStreams` waits, on a Spark Connect session, for its query's termination to reach
#: its listener (`progress_listener`'s ``terminated``) before removing the listener: PySpark's
#: Connect listener bus joins its event thread while holding the lock that thread takes to
#: deliver an event, so removing the last listener while the termination is on its way
#: deadlocks both.
CONNECT_TERMINATION_WAIT_S = 10.0


def progress_listener(query_name: str, metrics: Callable[[], Any], on_terminated: Callable[[str, str], None]) -> Any:
    """A `StreamingQueryListener` handing the progress of the query named ``query_name`` to
    ``metrics()`` (a `streamsdsl.runtime.metrics.QueryMetrics`, or None), and a failed query's
    run id and error to ``on_terminated`` (on a thread of its own)."""
    from pyspark.sql.streaming import StreamingQueryListener

    class ProgressListener(StreamingQueryListener):
        #: Set once a query's termination was delivered (`KafkaStreams` waits for it before
        #: removing the listener from a Spark Connect session).
        terminated: threading.Event

        def onQueryStarted(self, event: Any) -> None:
            pass

        def onQueryProgress(self, event: Any) -> None:
            try:
                current = metrics()
                if event.progress.name == query_name and current is not None:
                    current.add_progress(event.progress)
            except Exception:  # noqa: BLE001 - never let logging break the query
                log.debug("progress listener failed", exc_info=True)

        def onQueryIdle(self, event: Any) -> None:
            pass

        def onQueryTerminated(self, event: Any) -> None:
            self.terminated.set()
            # Handled on a thread of its own: the handler may restart the query, which must not
            # happen on Spark's listener thread.
            if event.exception is not None:
                threading.Thread(target=on_terminated, args=(str(event.runId), event.exception),
                                 name="streamsdsl-failure", daemon=True).start()

        @property
        def _jlistener(self) -> Any:
            """The JVM side of this listener in a classic session (PySpark's
            ``PythonStreamingQueryListenerWrapper``) around `_JsonEvents` instead of PySpark's
            own bridge; a Spark Connect session never reads it."""
            if not hasattr(self, "_jlistenerobj"):
                from pyspark import SparkContext

                wrapper = getattr(SparkContext._jvm, _LISTENER_WRAPPER)
                self._jlistenerobj = wrapper(_JsonEvents(self))
            return self._jlistenerobj

    listener = ProgressListener()
    listener.terminated = threading.Event()
    return listener


#: PySpark's JVM listener around a Python object implementing its listener interface.
_LISTENER_WRAPPER = "org.apache.spark.sql.streaming.PythonStreamingQueryListenerWrapper"


class _JsonEvents:
    """The Python object a classic session's JVM calls with each streaming query event
    (py4j, PySpark's ``PythonStreamingQueryListener`` interface), handing ``listener`` its
    events: a progress report read from its JSON (one call into the JVM), the start and idle
    events not at all (`progress_listener`'s ignores them).

    PySpark's own bridge builds a progress report from the JVM object field by field: about a
    thousand py4j calls a report, each end of a Java map's iteration an exception that PySpark
    converts by looking classes up on the driver's class path (measured: 0.6 s a report, on
    the listener thread and the driver's JVM, for every registered listener and every query's
    report; `recentProgress` reads the JSON, as this does)."""

    def __init__(self, listener: Any) -> None:
        self.listener = listener

    def onQueryStarted(self, jevent: Any) -> None:  # noqa: N802 - the Java interface's names
        pass

    def onQueryProgress(self, jevent: Any) -> None:  # noqa: N802
        import json

        from pyspark.sql.streaming.listener import QueryProgressEvent, StreamingQueryProgress

        try:
            progress = StreamingQueryProgress.fromJson(json.loads(jevent.progress().json()))
        except Exception:  # noqa: BLE001 - never let a listener break the query
            log.debug("could not read a progress report", exc_info=True)
            return
        self.listener.onQueryProgress(QueryProgressEvent(progress))

    def onQueryIdle(self, jevent: Any) -> None:  # noqa: N802
        pass

    def onQueryTerminated(self, jevent: Any) -> None:  # noqa: N802
        from pyspark.sql.streaming.listener import QueryTerminatedEvent

        self.listener.onQueryTerminated(QueryTerminatedEvent.fromJObject(jevent))

    class Java:
        implements = ["org.apache.spark.sql.streaming.PythonStreamingQueryListener"]
