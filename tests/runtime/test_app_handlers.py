"""`KafkaStreams.set_state_listener` and `set_uncaught_exception_handler` without a broker:
argument checks, "only before start()", the CREATED -> PENDING_SHUTDOWN -> NOT_RUNNING
notification, the enum and Kafka Streams' state transitions."""

from __future__ import annotations

from typing import Any

import pytest

from streamsdsl import StreamsBuilder
from streamsdsl.errors import InvalidTypeError
from streamsdsl.runtime import app as app_module
from streamsdsl.runtime.app import KafkaStreams, State, StreamThreadExceptionResponse
from streamsdsl.runtime.errors import IllegalStateError
from streamsdsl.runtime.lifecycle import transition_path


def _app() -> KafkaStreams:
    builder = StreamsBuilder()
    builder.stream("in").to("out")
    return KafkaStreams(builder.build(), {"application.id": "handlers", "bootstrap.servers": "localhost:9092"})


def test_enum_has_kafka_streams_names_and_is_exported() -> None:
    """The response enum has Kafka Streams' three names, in order, and is in __all__."""
    assert [r.value for r in StreamThreadExceptionResponse] == [
        "REPLACE_THREAD", "SHUTDOWN_CLIENT", "SHUTDOWN_APPLICATION"]
    assert "StreamThreadExceptionResponse" in app_module.__all__


def test_state_has_kafka_streams_states() -> None:
    """State lists Kafka Streams' seven states in its order, REBALANCING and PENDING_ERROR included."""
    assert [s.value for s in State] == ["CREATED", "REBALANCING", "RUNNING", "PENDING_SHUTDOWN", "NOT_RUNNING",
                                        "PENDING_ERROR", "ERROR"]


def test_state_transitions_are_kafka_streams() -> None:
    """is_valid_transition holds exactly Kafka Streams' transitions (KafkaStreams.State's
    constructor: CREATED(1, 3), REBALANCING(2, 3, 5), RUNNING(1, 2, 3, 5), PENDING_SHUTDOWN(4),
    NOT_RUNNING, PENDING_ERROR(6), ERROR), RUNNING -> RUNNING aside (a no-op here)."""
    states = list(State)
    legal = {(old.value, new.value) for old in states for new in states if old.is_valid_transition(new)}
    kafka = {0: (1, 3), 1: (2, 3, 5), 2: (1, 3, 5), 3: (4,), 4: (), 5: (6,), 6: ()}
    assert legal == {(states[o].value, states[n].value) for o, targets in kafka.items() for n in targets}
    assert [s.value for s in states if s.is_running_or_rebalancing()] == ["REBALANCING", "RUNNING"]
    assert [s.value for s in states if s.is_shutting_down()] == ["PENDING_SHUTDOWN", "PENDING_ERROR"]
    assert [s.value for s in states if s.has_completed_shutdown()] == ["NOT_RUNNING", "ERROR"]


def test_transition_paths_take_kafka_streams_steps() -> None:
    """ERROR is reached through PENDING_ERROR, NOT_RUNNING through PENDING_SHUTDOWN; a stopped
    application, and a shutdown under way, cannot reach ERROR."""
    assert transition_path(State.RUNNING, State.ERROR) == [State.PENDING_ERROR, State.ERROR]
    assert transition_path(State.REBALANCING, State.ERROR) == [State.PENDING_ERROR, State.ERROR]
    assert transition_path(State.RUNNING, State.NOT_RUNNING) == [State.PENDING_SHUTDOWN, State.NOT_RUNNING]
    assert transition_path(State.CREATED, State.NOT_RUNNING) == [State.PENDING_SHUTDOWN, State.NOT_RUNNING]
    assert transition_path(State.CREATED, State.RUNNING) == []
    assert transition_path(State.PENDING_SHUTDOWN, State.ERROR) == []
    assert transition_path(State.ERROR, State.NOT_RUNNING) == []
    assert transition_path(State.NOT_RUNNING, State.ERROR) == []


def test_listener_notified_on_close_before_start() -> None:
    """close() before start() notifies CREATED -> PENDING_SHUTDOWN -> NOT_RUNNING exactly once."""
    app = _app()
    seen: list[tuple[State, State]] = []
    app.set_state_listener(lambda new, old: seen.append((new, old)))
    assert app.close() is True
    assert app.close() is True
    assert seen == [(State.PENDING_SHUTDOWN, State.CREATED), (State.NOT_RUNNING, State.PENDING_SHUTDOWN)]
    assert app.state() is State.NOT_RUNNING


def test_listener_that_raises_is_logged_and_ignored(caplog: pytest.LogCaptureFixture) -> None:
    """A listener that raises does not stop the transition; the error is logged."""
    app = _app()

    def listener(new: State, old: State) -> None:
        raise ValueError("boom")

    app.set_state_listener(listener)
    assert app.close() is True
    assert app.state() is State.NOT_RUNNING
    assert [r.getMessage() for r in caplog.records if r.name == "streamsdsl"] == [
        "KafkaStreams 'handlers': the state listener raised on CREATED -> PENDING_SHUTDOWN (ignored)",
        "KafkaStreams 'handlers': the state listener raised on PENDING_SHUTDOWN -> NOT_RUNNING (ignored)"]


@pytest.mark.parametrize("bad", [None, 3, "listener"])
def test_state_listener_must_be_callable(bad: Any) -> None:
    """A non-callable listener is rejected with InvalidTypeError naming 'listener'."""
    with pytest.raises(InvalidTypeError) as info:
        _app().set_state_listener(bad)
    assert str(info.value) == (
        f"'listener' must be a callable listener(new_state, old_state) (got {type(bad).__name__}).")


def test_state_listener_must_take_two_arguments() -> None:
    """A one-argument listener is rejected with a message naming 'listener' and its signature."""
    def one(new):  # type: ignore[no-untyped-def]
        pass

    with pytest.raises(InvalidTypeError) as info:
        _app().set_state_listener(one)
    assert str(info.value) == (
        "'listener' must be a callable listener(new_state, old_state), taking 2 positional arguments "
        "(got test_state_listener_must_take_two_arguments.<locals>.one(new)).")


def test_state_listener_accepts_varargs_and_defaults() -> None:
    """Callables that can take two positional arguments are accepted (varargs, defaults, methods)."""
    app = _app()
    for listener in (lambda *args: None, lambda new, old, extra=None: None, {}.__setitem__):
        app.set_state_listener(listener)
        assert app._state_listener is listener


def test_handler_must_take_one_argument() -> None:
    """A handler taking no argument, or two, is rejected with InvalidTypeError naming 'handler'."""
    app = _app()
    with pytest.raises(InvalidTypeError, match=r"^'handler' must be a callable handler\(exception\) -> "
                                               r"StreamThreadExceptionResponse, taking 1 positional argument "):
        app.set_uncaught_exception_handler(lambda: None)
    with pytest.raises(InvalidTypeError, match=r"^'handler' must be a callable .*taking 1 positional argument"):
        app.set_uncaught_exception_handler(lambda a, b: None)
    with pytest.raises(InvalidTypeError) as info:
        app.set_uncaught_exception_handler(StreamThreadExceptionResponse.REPLACE_THREAD)
    assert str(info.value) == ("'handler' must be a callable handler(exception) -> StreamThreadExceptionResponse "
                               "(got StreamThreadExceptionResponse).")


@pytest.mark.parametrize("state", [State.RUNNING, State.NOT_RUNNING, State.ERROR])
def test_setters_rejected_after_start(state: State) -> None:
    """Both setters raise IllegalStateError once the application has left CREATED."""
    app = _app()
    app._state = state  # as if started (no broker here)
    with pytest.raises(IllegalStateError) as info:
        app.set_state_listener(lambda new, old: None)
    assert str(info.value) == f"Can only set the state listener before calling start() (state is {state.value})."
    with pytest.raises(IllegalStateError) as info:
        app.set_uncaught_exception_handler(lambda exc: StreamThreadExceptionResponse.SHUTDOWN_CLIENT)
    assert str(info.value) == (
        f"Can only set the uncaught exception handler before calling start() (state is {state.value}).")


def test_setters_rejected_after_close_before_start() -> None:
    """After close() (CREATED -> PENDING_SHUTDOWN -> NOT_RUNNING) the setters are rejected too."""
    app = _app()
    app.close()
    with pytest.raises(IllegalStateError):
        app.set_uncaught_exception_handler(lambda exc: StreamThreadExceptionResponse.SHUTDOWN_CLIENT)


class _FailedQuery:
    """Stands for a failed Spark query (``_handle_failure`` reads its run id only)."""

    runId = "run-1"


def _worker_error(processor: str, position: int) -> Exception:
    """What Spark raises when a worker's record failed: its text carries the RecordError."""
    from streamsdsl.errors import UserFunctionError

    carried = UserFunctionError(processor, "ZeroDivisionError: division by zero", function="mapper", key="'k2'",
                                position=position)
    return Exception(f"Job aborted: {carried.in_worker()}")


def test_shutdown_application_moves_to_error_with_the_handler_given_the_error(caplog: pytest.LogCaptureFixture) -> None:
    """SHUTDOWN_APPLICATION: the handler gets the located UserFunctionError (Spark's error as its
    __cause__) once; the application moves RUNNING -> ERROR and logs the response."""
    from streamsdsl.errors import UserFunctionError

    builder = StreamsBuilder()
    builder.stream("in").map_values(str.upper).to("out")
    app = KafkaStreams(builder.build(), {"application.id": "handlers", "bootstrap.servers": "localhost:9092"})
    seen: list[tuple[State, State]] = []
    errors: list[BaseException] = []

    def handler(error: BaseException) -> StreamThreadExceptionResponse:
        errors.append(error)
        return StreamThreadExceptionResponse.SHUTDOWN_APPLICATION

    app.set_state_listener(lambda new, old: seen.append((new, old)))
    app.set_uncaught_exception_handler(handler)
    query = _FailedQuery()
    app._state, app._query = State.RUNNING, query  # type: ignore[assignment]  # as if started (no broker here)
    spark_error = _worker_error("KSTREAM-MAPVALUES-0000000001", 3 << 40 | 7)
    assert app._handle_failure(query, spark_error) is False  # type: ignore[arg-type]
    assert app._handle_failure(query, spark_error) is False  # type: ignore[arg-type]  # handled once
    assert app.state() is State.ERROR
    assert seen == [(State.PENDING_ERROR, State.RUNNING), (State.ERROR, State.PENDING_ERROR)]
    assert [type(e) for e in errors] == [UserFunctionError]
    expected = ("KSTREAM-MAPVALUES-0000000001: the mapper raised ZeroDivisionError: division by zero "
                "(record at topic in partition 3 offset 7, key 'k2')")
    assert str(errors[0]) == expected
    assert errors[0].__cause__ is spark_error
    assert [r.getMessage() for r in caplog.records if r.name == "streamsdsl"] == [
        f"KafkaStreams 'handlers' failed (SHUTDOWN_APPLICATION): {expected}"]


@pytest.mark.parametrize(("processor", "topic"), [
    ("KSTREAM-MAPVALUES-0000000002", "b"),  # before the merge: only "b" reaches it
    ("KSTREAM-MAPVALUES-0000000004", "a|b"),  # after the merge: either topic (the position has no topic)
    ("KSTREAM-SOURCE-0000000000", "a"),
])
def test_failure_names_the_topic_of_a_multi_topic_topology(processor: str, topic: str) -> None:
    """A two-topic topology: the failed record's topic is the one source topic upstream of the
    processor that failed (no longer "?"), the candidates when the processor follows the merge."""
    builder = StreamsBuilder()
    a = builder.stream("a")
    a.merge(builder.stream("b").map_values(str.upper)).map_values(str.lower).to("out")
    app = KafkaStreams(builder.build(), {"application.id": "two", "bootstrap.servers": "localhost:9092"})
    assert [n.name for n in app.topology.nodes][:5] == [
        "KSTREAM-SOURCE-0000000000", "KSTREAM-SOURCE-0000000001", "KSTREAM-MAPVALUES-0000000002",
        "KSTREAM-MERGE-0000000003", "KSTREAM-MAPVALUES-0000000004"]
    error = app._failure(_worker_error(processor, 1 << 40 | 5), stop=False)
    assert str(error) == (f"{processor}: the mapper raised ZeroDivisionError: division by zero "
                          f"(record at topic {topic} partition 1 offset 5, key 'k2')")
    assert (error.topic, error.partition, error.offset) == (topic, 1, 5)


def test_topology_without_sink_is_the_drivers_error() -> None:
    """KafkaStreams rejects a sink-less topology with the driver's NoSinkError: a TopologyError
    and (as before) a StreamsConfigError."""
    from streamsdsl import TopologyError
    from streamsdsl.runtime.config import StreamsConfigError
    from streamsdsl.runtime.errors import NoSinkError

    builder = StreamsBuilder()
    builder.stream("in").filter(lambda k, v: True)
    with pytest.raises(NoSinkError) as info:
        KafkaStreams(builder.build(), {"application.id": "nosink", "bootstrap.servers": "localhost:9092"})
    assert str(info.value) == "the topology has no sink: add .to(topic) somewhere to run it."
    assert isinstance(info.value, TopologyError) and isinstance(info.value, StreamsConfigError)
