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
           "seconds"]

log = logging.getLogger("streamsdsl")


class State(enum.StrEnum):
    """Lifecycle of a `KafkaStreams` instance (Kafka Streams' ``KafkaStreams.State``).

    ``CREATED`` → ``start()`` → ``RUNNING`` → ``close()`` → ``PENDING_SHUTDOWN`` →
    ``NOT_RUNNING``. A query that fails moves to ``ERROR`` (a terminal state: ``close()``
    leaves it there). ``close()`` before ``start()`` goes from ``CREATED`` to ``NOT_RUNNING``.
    ``REBALANCING`` is Kafka Streams' state while a thread is replaced; streamsdsl does not
    enter it yet (see `StreamThreadExceptionResponse`).

    Examples
    --------
    >>> [s.value for s in State]
    ['CREATED', 'REBALANCING', 'RUNNING', 'PENDING_SHUTDOWN', 'NOT_RUNNING', 'ERROR']
    """

    CREATED = "CREATED"
    REBALANCING = "REBALANCING"
    RUNNING = "RUNNING"
    PENDING_SHUTDOWN = "PENDING_SHUTDOWN"
    NOT_RUNNING = "NOT_RUNNING"
    ERROR = "ERROR"


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
        shuts down instead (``ERROR``).
    ``SHUTDOWN_CLIENT``
        Stop this application instance: its state becomes ``ERROR``.
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


def progress_listener(query_name: str, metrics: Callable[[], Any], on_terminated: Callable[[str, str], None]) -> Any:
    """A `StreamingQueryListener` handing the progress of the query named ``query_name`` to
    ``metrics()`` (a `streamsdsl.runtime.metrics.QueryMetrics`, or None), and a failed query's
    run id and error to ``on_terminated`` (on a thread of its own)."""
    from pyspark.sql.streaming import StreamingQueryListener

    class ProgressListener(StreamingQueryListener):
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
            # Handled on a thread of its own: the handler may restart the query, which must not
            # happen on Spark's listener thread.
            if event.exception is not None:
                threading.Thread(target=on_terminated, args=(str(event.runId), event.exception),
                                 name="streamsdsl-failure", daemon=True).start()

    return ProgressListener()
