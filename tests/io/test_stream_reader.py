"""`KafkaStreamReader.latestOffset` on a partition whose end fell below the query's position
(the topic was deleted and re-created), with a fake driver client (no broker)."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from streamsdsl.io.errors import KafkaTopicRecreatedError, find_source_error
from streamsdsl.io.offsets import TopicPartitionKey
from streamsdsl.io.options import KafkaSourceOptions
from streamsdsl.io.source import KafkaStreamReader, ReadAllAvailable, ReadMaxRows


class FakeClient:
    """The broker's partitions with ``(low, high)`` watermarks; counts `latest` calls."""

    def __init__(self, marks: dict[TopicPartitionKey, tuple[int, int]]) -> None:
        self.marks = marks
        self.latest_calls = 0

    def partitions(self) -> list[TopicPartitionKey]:
        return sorted(self.marks)

    def earliest(self, tps: Sequence[TopicPartitionKey]) -> dict[TopicPartitionKey, int]:
        return {tp: self.marks[tp][0] for tp in tps}

    def latest(self, tps: Sequence[TopicPartitionKey]) -> dict[TopicPartitionKey, int]:
        self.latest_calls += 1
        return {tp: self.marks[tp][1] for tp in tps}

    def close(self) -> None:
        pass


def _reader(marks: dict[TopicPartitionKey, tuple[int, int]], **options: str) -> tuple[KafkaStreamReader, FakeClient]:
    opts = KafkaSourceOptions.from_options(
        {"kafka.bootstrap.servers": "h:9092", "subscribe": "t", **options}, streaming=True
    )
    reader = KafkaStreamReader(opts)
    client = FakeClient(marks)
    reader._client_obj = client  # type: ignore[assignment]
    return reader, client


def test_partition_ending_below_the_checkpoint_fails_the_next_trigger() -> None:
    """The broker restarted empty and the topic was re-created with 12 records: the query (at
    3305 on t-2) fails at once with the re-created error, asked twice before deciding."""
    reader, client = _reader({("t", 0): (0, 4000), ("t", 1): (0, 3500), ("t", 2): (0, 12)})

    with pytest.raises(KafkaTopicRecreatedError) as info:
        reader.latestOffset({"t": {"0": 3300, "1": 3400, "2": 3305}}, ReadAllAvailable())

    assert info.value.args == (
        "partition t-2 now ends at offset 12 (it holds [0, 12)), below offset 3305 it had reached before: the "
        "topic was deleted and re-created (or the broker lost its data). Set the source option "
        "'failOnDataLoss' to 'false' to go on from the new topic's earliest offset, or reset the application "
        "to start afresh (close it, call KafkaStreams.clean_up() and start it again; a plain query: a new "
        "checkpoint).",
    )
    assert client.latest_calls == 2


def test_without_fail_on_data_loss_the_partition_restarts_at_its_earliest_offset() -> None:
    """failOnDataLoss=false: this batch ends t-2 at its earliest offset (nothing of it is read),
    the next one reads the new topic from there; the other partitions go on (rate limit kept)."""
    reader, _ = _reader({("t", 0): (0, 4000), ("t", 2): (0, 12)}, failOnDataLoss="false")
    start = {"t": {"0": 3300, "2": 3305}}

    end = reader.latestOffset(start, ReadMaxRows(100))

    assert end == {"t": {"0": 3400, "2": 0}}
    assert reader.partitions(start, end)[0].__repr__() == "KafkaInputPartition(t-0 [3300, 3400))"
    assert len(reader.partitions(start, end)) == 1
    assert reader.latestOffset(end, ReadMaxRows(100)) == {"t": {"0": 3498, "2": 2}}  # shared by backlog


def test_partitions_at_or_beyond_the_checkpoint_are_not_a_reset() -> None:
    """An end equal to the position (nothing new) or a new partition is no reset."""
    reader, client = _reader({("t", 0): (0, 3300), ("t", 1): (0, 5)})

    assert reader.latestOffset({"t": {"0": 3300}}, ReadAllAvailable()) == {"t": {"0": 3300, "1": 5}}
    assert client.latest_calls == 1


def test_source_error_is_found_in_a_spark_error() -> None:
    """A traceback line of a source error in Spark's error text gives the error back."""
    spark_text = (
        "[STREAM_FAILED] Query [id = 1, runId = 2] terminated with exception: [PYTHON_STREAMING_DATA_SOURCE_"
        "RUNTIME_ERROR] Failed when Python streaming data source perform latestOffset: Traceback (most recent "
        "call last):\n  File ...\nstreamsdsl.io.errors.KafkaTopicRecreatedError: partition t-2 now ends at "
        "offset 12 (...)\n\tat org.apache.spark..."
    )

    found = find_source_error(RuntimeError(spark_text))

    assert isinstance(found, KafkaTopicRecreatedError)
    assert found.args == ("partition t-2 now ends at offset 12 (...)",)


class FlakyMeta:
    """A metadata client whose first ``failures`` requests raise (a broker restarting)."""

    def __init__(self, failures: int) -> None:
        self.failures = failures

    def get_watermark_offsets(self, tp: object, timeout: float, cached: bool) -> tuple[int, int]:
        if self.failures:
            self.failures -= 1
            raise RuntimeError("KafkaError{code=_DESTROY_BROKER,val=-137}")
        return (0, 7)

    def close(self) -> None:
        pass


def test_driver_requests_are_retried_on_new_clients_until_the_poll_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    """Errors during a broker restart are retried (fresh clients); only a broker away for the
    whole poll timeout fails, naming the broker and the option."""
    from streamsdsl.io import client as client_module
    from streamsdsl.io.client import OffsetClient
    from streamsdsl.io.errors import KafkaBrokerTimeoutError

    monkeypatch.setattr(client_module, "_RETRY_BACKOFF_S", 0.01)
    opts = KafkaSourceOptions.from_options(
        {"kafka.bootstrap.servers": "h:9092", "subscribe": "t", "kafkaConsumer.pollTimeoutMs": "300"}, streaming=True
    )
    flaky = FlakyMeta(failures=3)
    client = OffsetClient(opts)
    monkeypatch.setattr(client, "_meta", lambda: flaky)
    assert client.watermarks([("t", 0)]) == {("t", 0): (0, 7)}

    flaky.failures = 10_000
    with pytest.raises(KafkaBrokerTimeoutError) as info:
        client.watermarks([("t", 0)])
    assert info.value.args == (
        "could not fetch the offsets of t-0 from the broker at 'bootstrap.servers' = h:9092 within "
        "kafkaConsumer.pollTimeoutMs = 300 ms (KafkaError{code=_DESTROY_BROKER,val=-137}). Check that the broker "
        "is running and reachable, or raise 'kafkaConsumer.pollTimeoutMs' (KafkaStreams: 'task.timeout.ms') to "
        "wait longer.",
    )
