"""`KafkaStreams.set_state_listener` and `set_uncaught_exception_handler` against a real broker."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pytest

from streamsdsl import Consumed, Produced, Serdes, StreamsBuilder
from streamsdsl.errors import StreamsDslError, UserFunctionError
from streamsdsl.runtime.app import KafkaStreams, State, StreamThreadExceptionResponse
from streamsdsl.testing.local_kafka import LocalKafka

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from streamsdsl.ir.topology import Topology

pytestmark = [pytest.mark.integration, pytest.mark.spark]

T = 1_700_000_000_000  # a base timestamp (ms)
STRINGS = Consumed.with_serdes(Serdes.String(), Serdes.String())
STRINGS_OUT = Produced.with_serdes(Serdes.String(), Serdes.String())


def _fail_on_bad(value: str) -> str:
    if value == "bad":
        raise ZeroDivisionError("division by zero")
    return value.upper()


def _failing_topology(kafka: LocalKafka, new_topic: Callable[..., str]) -> tuple[Topology, str]:
    """in → map_values (raises on "bad") → out; ``in`` holds "good" then "bad"."""
    source, sink = new_topic(1), new_topic(1)
    builder = StreamsBuilder()
    builder.stream(source, STRINGS).map_values(_fail_on_bad).to(sink, STRINGS_OUT)
    kafka.produce(source, [(b"k1", b"good", T, 0), (b"k2", b"bad", T + 1, 0)])
    return builder.build(), source


class _Recorder:
    """Collects state transitions and handler calls (from any thread)."""

    def __init__(self, response: StreamThreadExceptionResponse) -> None:
        self.response = response
        self.states: list[tuple[State, State]] = []
        self.errors: list[BaseException] = []
        self.lock = threading.Lock()

    def on_state(self, new: State, old: State) -> None:
        with self.lock:
            self.states.append((new, old))

    def on_error(self, error: BaseException) -> StreamThreadExceptionResponse:
        with self.lock:
            self.errors.append(error)
        return self.response


def test_state_listener_sees_running_pending_shutdown_not_running(
    kafka: LocalKafka,
    new_topic: Callable[..., str],
    streams_config: Callable[..., dict[str, object]],
    spark: SparkSession,
) -> None:
    """start/process_all_available/close notify CREATED→REBALANCING→RUNNING→PENDING_SHUTDOWN→NOT_RUNNING."""
    source, sink = new_topic(1), new_topic(1)
    builder = StreamsBuilder()
    builder.stream(source, STRINGS).map_values(str.upper).to(sink, STRINGS_OUT)
    kafka.produce(source, [(b"k", b"v", T, 0)])
    app = KafkaStreams(builder.build(), streams_config("listener"), spark=spark)
    seen: list[tuple[State, State]] = []
    app.set_state_listener(lambda new, old: seen.append((new, old)))
    app.start()
    try:
        app.process_all_available()
    finally:
        assert app.close(60)
    assert seen == [
        (State.REBALANCING, State.CREATED),
        (State.RUNNING, State.REBALANCING),
        (State.PENDING_SHUTDOWN, State.RUNNING),
        (State.NOT_RUNNING, State.PENDING_SHUTDOWN),
    ]
    assert [(r.key, r.value) for r in kafka.consume_all(sink)] == [(b"k", b"V")]


def test_shutdown_client_handler_gets_user_function_error(
    kafka: LocalKafka,
    new_topic: Callable[..., str],
    streams_config: Callable[..., dict[str, object]],
    spark: SparkSession,
) -> None:
    """SHUTDOWN_CLIENT: the handler gets the UserFunctionError once; the app ends in ERROR."""
    recorder, expected, app = _fails_with_handler(kafka, new_topic, streams_config("shutdown"), spark,
                                                  StreamThreadExceptionResponse.SHUTDOWN_CLIENT)
    assert len(recorder.errors) == 1
    assert isinstance(recorder.errors[0], UserFunctionError)
    assert str(recorder.errors[0]) == expected
    assert app.state() is State.ERROR
    assert recorder.states == [(State.REBALANCING, State.CREATED), (State.RUNNING, State.REBALANCING),
                               (State.PENDING_ERROR, State.RUNNING), (State.ERROR, State.PENDING_ERROR)]


def _fails_with_handler(kafka: LocalKafka, new_topic: Callable[..., str], config: dict[str, object],
                        spark: SparkSession, response: StreamThreadExceptionResponse,
                        ) -> tuple[_Recorder, str, KafkaStreams]:
    """Run the failing topology with a handler answering ``response``; process_all_available
    must raise the mapper's error. Returns the recorder, that error's text and the closed app."""
    topology, source = _failing_topology(kafka, new_topic)
    app = KafkaStreams(topology, config, spark=spark)
    recorder = _Recorder(response)
    app.set_state_listener(recorder.on_state)
    app.set_uncaught_exception_handler(recorder.on_error)
    app.start()
    expected = (f"KSTREAM-MAPVALUES-0000000001: the mapper raised ZeroDivisionError: division by zero "
                f"(record at topic {source} partition 0 offset 1, key 'k2')")
    try:
        with pytest.raises(UserFunctionError) as raised:
            app.process_all_available()
        assert str(raised.value) == expected
    finally:
        app.close(60)
    return recorder, expected, app


def _fail_once(value: str, marker: str) -> str:
    """Fails on "bad" while ``marker`` exists, removing it: a transient failure."""
    import os

    if value == "bad" and os.path.exists(marker):
        os.remove(marker)
        raise ConnectionError("transient")
    return value.upper()


def test_replace_thread_restarts_the_query_from_its_checkpoint(
    kafka: LocalKafka,
    new_topic: Callable[..., str],
    streams_config: Callable[..., dict[str, object]],
    spark: SparkSession,
    tmp_path: Any,
) -> None:
    """REPLACE_THREAD after a transient failure: the query is replaced on its checkpoint, the
    failed micro-batch is retried, every record comes out, the app stays RUNNING."""
    marker = tmp_path / "fail-once"
    marker.write_text("x")
    source, sink = new_topic(1), new_topic(1)
    builder = StreamsBuilder()
    path = str(marker)
    builder.stream(source, STRINGS).map_values(lambda v: _fail_once(v, path)).to(sink, STRINGS_OUT)
    kafka.produce(source, [(b"k1", b"good", T, 0), (b"k2", b"bad", T + 1, 0)])
    app = KafkaStreams(builder.build(), streams_config("replace"), spark=spark)
    recorder = _Recorder(StreamThreadExceptionResponse.REPLACE_THREAD)
    app.set_state_listener(recorder.on_state)
    app.set_uncaught_exception_handler(recorder.on_error)
    app.start()
    try:
        app.process_all_available()
        assert app.state() is State.RUNNING
        out = sorted((r.key, r.value) for r in kafka.consume_all(sink))
    finally:
        app.close(60)
    assert {v for _, v in out} == {b"GOOD", b"BAD"}  # at least once: the failed batch may repeat "GOOD"
    assert (b"k2", b"BAD") in out
    assert [type(e) for e in recorder.errors] == [UserFunctionError]
    assert str(recorder.errors[0]).startswith("KSTREAM-MAPVALUES-0000000001: the mapper raised ConnectionError: "
                                              "transient (record at topic")
    assert recorder.states == [(State.REBALANCING, State.CREATED), (State.RUNNING, State.REBALANCING),
                               (State.REBALANCING, State.RUNNING),
                               (State.RUNNING, State.REBALANCING), (State.PENDING_SHUTDOWN, State.RUNNING),
                               (State.NOT_RUNNING, State.PENDING_SHUTDOWN)]


def test_replace_thread_gives_up_on_a_record_that_always_fails(
    kafka: LocalKafka,
    new_topic: Callable[..., str],
    streams_config: Callable[..., dict[str, object]],
    spark: SparkSession,
) -> None:
    """A record that fails every time: MAX_REPLACEMENTS replacements, then ERROR with the error."""
    from streamsdsl.runtime.app import MAX_REPLACEMENTS

    recorder, expected, app = _fails_with_handler(kafka, new_topic, streams_config("replace-fail"), spark,
                                                  StreamThreadExceptionResponse.REPLACE_THREAD)
    assert [str(e) for e in recorder.errors] == [expected] * (MAX_REPLACEMENTS + 1)
    assert app.state() is State.ERROR


def test_no_handler_keeps_todays_behaviour(
    kafka: LocalKafka,
    new_topic: Callable[..., str],
    streams_config: Callable[..., dict[str, object]],
    spark: SparkSession,
) -> None:
    """Without a handler a failure raises from process_all_available and the state is ERROR."""
    topology, _ = _failing_topology(kafka, new_topic)
    app = KafkaStreams(topology, streams_config("nohandler"), spark=spark)
    seen: list[tuple[State, State]] = []
    app.set_state_listener(lambda new, old: seen.append((new, old)))
    app.start()
    try:
        with pytest.raises(StreamsDslError) as raised:
            app.process_all_available()
        assert type(raised.value) is UserFunctionError
    finally:
        app.close(60)
    assert app.state() is State.ERROR
    assert seen == [(State.REBALANCING, State.CREATED), (State.RUNNING, State.REBALANCING),
                    (State.PENDING_ERROR, State.RUNNING), (State.ERROR, State.PENDING_ERROR)]
