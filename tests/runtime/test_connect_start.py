"""`streamsdsl.runtime.connect.start_on_server`: a query whose micro-batch process did not connect
back to a busy Spark Connect server in Spark's fixed 10 s is started again; nothing else is."""

from __future__ import annotations

import pytest

from streamsdsl.runtime.connect import START_ATTEMPTS, WORKER_DID_NOT_CONNECT, start_on_server

TIMED_OUT = RuntimeError(f"pyspark.errors.exceptions.connect.SparkException: {WORKER_DID_NOT_CONNECT}.\n\n"
                         "Caused by: java.net.SocketTimeoutException: Timed out while waiting for the Python "
                         "worker to connect back")


class Starts:
    """A `DataStreamWriter.start` that answers with ``answers`` in turn, counting its calls."""

    def __init__(self, *answers: object) -> None:
        self.answers = list(answers)
        self.calls = 0

    def __call__(self) -> object:
        self.calls += 1
        answer = self.answers.pop(0)
        if isinstance(answer, BaseException):
            raise answer
        return answer


def test_a_start_the_server_refused_for_a_late_worker_is_started_again_after_a_growing_pause() -> None:
    pauses: list[float] = []
    start = Starts(TIMED_OUT, TIMED_OUT, "query")
    assert start_on_server(start, pause_s=0.5, sleep=pauses.append) == "query"
    assert start.calls == 3
    assert pauses == [0.5, 1.0]


def test_the_last_attempts_error_is_raised_as_it_is() -> None:
    start = Starts(*[TIMED_OUT] * START_ATTEMPTS)
    with pytest.raises(RuntimeError) as raised:
        start_on_server(start, sleep=lambda s: None)
    assert raised.value is TIMED_OUT
    assert start.calls == START_ATTEMPTS == 5


def test_any_other_error_is_raised_at_once() -> None:
    other = RuntimeError("[STREAMING_QUERY_ALREADY_ACTIVE] ...")
    start = Starts(other, "query")
    with pytest.raises(RuntimeError) as raised:
        start_on_server(start, sleep=lambda s: None)
    assert raised.value is other
    assert start.calls == 1


def test_attempts_must_be_a_positive_int() -> None:
    with pytest.raises(ValueError, match="'attempts' must be an int >= 1"):
        start_on_server(lambda: None, attempts=0)
