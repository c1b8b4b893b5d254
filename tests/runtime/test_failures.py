"""`streamsdsl.runtime.failures.query_error` for failures that carry no record."""

from __future__ import annotations

from streamsdsl import StreamsBuilder
from streamsdsl.runtime.errors import StreamsError
from streamsdsl.runtime.failures import query_error


def _topology() -> object:
    b = StreamsBuilder()
    b.stream("in").to("out")
    return b.build()


def test_a_checkpoint_written_before_event_time_passed_operators_names_the_reset() -> None:
    """Spark's refusal of an operator whose checkpoint has another time mode (a checkpoint
    written before stateful operators passed event time on) becomes an error that says why and
    names ``streamsdsl reset`` with the application id."""
    spark = ("[STREAM_FAILED] Query [id = 1] terminated with exception: [STATE_STORE_INVALID_CONFIG_AFTER_RESTART] "
             "Cannot change timeMode from NoTime to EventTime between restarts. Please set timeMode to NoTime, or "
             "restart with a new checkpoint directory. SQLSTATE: 42K06\n=== Streaming Query ===\n...")
    error = query_error(RuntimeError(spark), _topology(), "orders-app")  # type: ignore[arg-type]
    assert isinstance(error, StreamsError)
    assert str(error).startswith("KafkaStreams 'orders-app' cannot continue from its checkpoint: it was written by a "
                                 "streamsdsl version in which a stateful operator (a join, a table) kept no event time")
    assert "Cannot change timeMode from NoTime to EventTime between restarts" in str(error)
    assert "`streamsdsl reset --application-id orders-app`" in str(error)


def test_another_failure_keeps_sparks_first_line() -> None:
    error = query_error(RuntimeError("[SOMETHING] went wrong\nmore"), _topology(), "a")  # type: ignore[arg-type]
    assert str(error) == "KafkaStreams 'a' failed: [SOMETHING] went wrong"
