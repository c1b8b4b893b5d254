"""Integration tests of the ``streamsdsl-kafka`` source and sink against a real broker.

Every streaming query runs with ``trigger(availableNow=True)`` and collects its
micro-batches with ``foreachBatch``, so the assertions are exact (records, offsets and
the number of micro-batches).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from streamsdsl.io.partition_reader import RAW_RECORD_SCHEMA
from streamsdsl.records import RAW_RECORD_DDL, RAW_SINK_DDL
from streamsdsl.testing.local_kafka import ConsumedRecord, LocalKafka

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, Row, SparkSession

Record = tuple[Any, ...]

pytestmark = pytest.mark.integration


def _headers(raw: Any) -> list[tuple[str, bytes]] | None:
    if raw is None:
        return None
    return [(h["key"], bytes(h["value"]) if h["value"] is not None else None) for h in raw]


def _row(r: Row) -> Record:
    """A source row as ``(key, value, topic, partition, offset, timestamp, headers)``."""
    return (
        bytes(r["key"]) if r["key"] is not None else None,
        bytes(r["value"]) if r["value"] is not None else None,
        r["topic"],
        r["partition"],
        r["offset"],
        r["timestamp"],
        _headers(r["headers"]),
    )


def _expected(topic: str, records: list[tuple[Any, ...]], first_offsets: dict[int, int] | None = None) -> list[Record]:
    """Source rows a list of explicitly partitioned produced records must give."""
    next_offset = dict(first_offsets or {})
    out = []
    for rec in records:
        key, value, ts, partition = rec[:4]
        headers = list(rec[4]) if len(rec) == 5 and rec[4] else None
        offset = next_offset.get(partition, 0)
        next_offset[partition] = offset + 1
        out.append((key, value, topic, partition, offset, ts, headers))
    return sorted(out, key=lambda r: (r[3], r[4]))


def _stream(spark: SparkSession, kafka: LocalKafka, topic: str, **options: Any) -> DataFrame:
    reader = (
        spark.readStream.format("streamsdsl-kafka")
        .option("kafka.bootstrap.servers", kafka.bootstrap_servers)
        .option("subscribe", topic)
    )
    for name, value in options.items():
        reader = reader.option(name, value)
    return reader.load()


def _run_available_now(df: DataFrame, checkpoint: Path) -> list[list[Record]]:
    """Run ``df`` to the end with ``availableNow``; return each micro-batch's rows, sorted."""
    batches: list[list[Record]] = []

    def collect(batch: DataFrame, batch_id: int) -> None:
        batches.append(sorted((_row(r) for r in batch.collect()), key=lambda r: (r[2], r[3], r[4])))

    query = (
        df.writeStream.foreachBatch(collect)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    try:
        assert query.awaitTermination(60), "the availableNow query did not finish within 60 s"
    finally:
        query.stop()
    assert query.exception() is None
    return batches


def _flat(batches: list[list[Record]]) -> list[Record]:
    return sorted((r for b in batches for r in b), key=lambda r: (r[2], r[3], r[4]))


@pytest.mark.spark
class TestStreamingSource:
    """The streaming reader through real Structured Streaming queries."""

    def test_reads_exactly_the_produced_records(
        self, spark: SparkSession, kafka: LocalKafka, new_topic: Callable[..., str], tmp_path: Path
    ) -> None:
        """Keys, values, partitions, offsets, timestamps and headers arrive unchanged, once each."""
        topic = new_topic(3)
        records = [
            (b"a", b"1", 1_000, 0, [("trace", b"t1"), ("n", b"")]),
            (b"b", b"2", 1_001, 1),
            (None, b"no-key", 1_002, 2),
            (b"a", None, 1_003, 0),  # tombstone
            (b"c", b'{"x": 1}', 2_000, 1, [("h", b"\x00\xff")]),
            (b"d", b"", 1_500, 2),
            (b"e", b"5", 3_000, 0),
        ]
        kafka.produce(topic, records)

        batches = _run_available_now(_stream(spark, kafka, topic, startingOffsets="earliest"), tmp_path / "ckpt")

        assert len(batches) == 1
        assert batches[0] == _expected(topic, records)

    def test_max_offsets_per_trigger_splits_into_micro_batches(
        self, spark: SparkSession, kafka: LocalKafka, new_topic: Callable[..., str], tmp_path: Path
    ) -> None:
        """30 offsets over 3 partitions with maxOffsetsPerTrigger=12: batches of 12, 12 and 6."""
        topic = new_topic(3)
        records = [(f"k{i}".encode(), f"v{i}".encode(), 10_000 + i, i % 3) for i in range(30)]
        kafka.produce(topic, records)

        df = _stream(spark, kafka, topic, startingOffsets="earliest", maxOffsetsPerTrigger=12)
        batches = _run_available_now(df, tmp_path / "ckpt")

        assert [len(b) for b in batches] == [12, 12, 6]
        assert [[sum(1 for r in b if r[3] == p) for p in range(3)] for b in batches] == [
            [4, 4, 4],
            [4, 4, 4],
            [2, 2, 2],
        ]
        assert _flat(batches) == _expected(topic, records)

    def test_restart_resumes_at_first_unconsumed_offset(
        self, spark: SparkSession, kafka: LocalKafka, new_topic: Callable[..., str], tmp_path: Path
    ) -> None:
        """A second run on the same checkpoint reads exactly the records produced after the first."""
        topic = new_topic(3)
        first = [(f"k{i}".encode(), f"v{i}".encode(), 1_000 + i, i % 3) for i in range(7)]
        kafka.produce(topic, first)
        checkpoint = tmp_path / "ckpt"

        run1 = _run_available_now(_stream(spark, kafka, topic, startingOffsets="earliest"), checkpoint)
        second = [(f"n{i}".encode(), f"w{i}".encode(), 5_000 + i, (i + 1) % 3) for i in range(5)]
        kafka.produce(topic, second)
        run2 = _run_available_now(_stream(spark, kafka, topic, startingOffsets="earliest"), checkpoint)

        assert _flat(run1) == _expected(topic, first)
        # partition 0 had offsets 0..2, 1 had 0..1, 2 had 0..1 after the first run
        assert _flat(run2) == _expected(topic, second, first_offsets={0: 3, 1: 2, 2: 2})

    def test_starting_offsets_latest_reads_only_new_records(
        self, spark: SparkSession, kafka: LocalKafka, new_topic: Callable[..., str], tmp_path: Path
    ) -> None:
        """``startingOffsets=latest`` skips what exists when the query starts."""
        topic = new_topic(2)
        old = [(b"old", b"x", 1, 0), (b"old", b"y", 2, 1), (b"old", b"z", 3, 1)]
        kafka.produce(topic, old)
        checkpoint = tmp_path / "ckpt"

        run1 = _run_available_now(_stream(spark, kafka, topic, startingOffsets="latest"), checkpoint)
        new = [(b"new", b"1", 10, 1), (b"new", b"2", 11, 0)]
        kafka.produce(topic, new)
        run2 = _run_available_now(_stream(spark, kafka, topic, startingOffsets="latest"), checkpoint)

        assert _flat(run1) == []  # Spark may run one empty first batch; it holds no records
        assert _flat(run2) == _expected(topic, new, first_offsets={0: 1, 1: 2})

    def test_starting_offsets_per_partition_json(
        self, spark: SparkSession, kafka: LocalKafka, new_topic: Callable[..., str], tmp_path: Path
    ) -> None:
        """JSON offsets: an explicit offset, -2 (earliest) and -1 (latest) per partition."""
        topic = new_topic(3)
        records = [(f"k{i}".encode(), f"v{i}".encode(), 100 + i, i % 3) for i in range(12)]
        kafka.produce(topic, records)
        starting = json.dumps({topic: {"0": 2, "1": -2, "2": -1}})

        batches = _run_available_now(_stream(spark, kafka, topic, startingOffsets=starting), tmp_path / "ckpt")

        expected = [r for r in _expected(topic, records) if (r[3] == 0 and r[4] >= 2) or r[3] == 1]
        assert _flat(batches) == expected


@pytest.mark.spark
class TestBatchSource:
    """``spark.read`` over a fixed offset range."""

    def test_reads_between_starting_and_ending_offsets(
        self, spark: SparkSession, kafka: LocalKafka, new_topic: Callable[..., str]
    ) -> None:
        """``[startingOffsets, endingOffsets)`` per partition; schema equals RAW_RECORD_DDL."""
        topic = new_topic(2)
        records = [(f"k{i}".encode(), f"v{i}".encode(), 100 + i, i % 2) for i in range(10)]
        kafka.produce(topic, records)

        df = (
            spark.read.format("streamsdsl-kafka")
            .option("kafka.bootstrap.servers", kafka.bootstrap_servers)
                .option("subscribe", topic)
            .option("startingOffsets", json.dumps({topic: {"0": 1, "1": -2}}))
            .option("endingOffsets", json.dumps({topic: {"0": 4, "1": -1}}))
            .load()
        )
        rows = sorted((_row(r) for r in df.collect()), key=lambda r: (r[3], r[4]))

        assert df.schema == spark.createDataFrame([], RAW_RECORD_DDL).schema == RAW_RECORD_SCHEMA
        assert rows == [r for r in _expected(topic, records) if (r[3] == 0 and 1 <= r[4] < 4) or r[3] == 1]


@pytest.mark.spark
class TestSink:
    """The writer: exact records in the topic, read back with ``consume_all``."""

    def test_batch_write_keeps_keys_values_tombstones_timestamps_headers(
        self, spark: SparkSession, kafka: LocalKafka, new_topic: Callable[..., str]
    ) -> None:
        """Rows of RAW_SINK_DDL become records in order; a null value is a tombstone."""
        topic = new_topic(1)
        rows = [
            (b"k1", b"v1", 1_000, None),
            (b"k2", None, 1_001, None),  # tombstone
            (None, b"no-key", 1_002, [("h", b"x"), ("h2", b"")]),
            (b"k1", b"v1-again", 5_000, None),
        ]
        df = spark.createDataFrame(rows, RAW_SINK_DDL).coalesce(1)

        (
            df.write.format("streamsdsl-kafka")
            .mode("append")
            .option("kafka.bootstrap.servers", kafka.bootstrap_servers)
            .option("topic", topic)
            .save()
        )

        assert kafka.consume_all(topic) == [
            ConsumedRecord(key, value, ts, 0, offset, headers)
            for offset, (key, value, ts, headers) in enumerate(rows)
        ]

    def test_batch_write_accepts_strings_and_timestamp_type(
        self, spark: SparkSession, kafka: LocalKafka, new_topic: Callable[..., str]
    ) -> None:
        """String key/value are written as UTF-8; a timestamp column becomes epoch ms (µs truncated)."""
        topic = new_topic(1)
        df = spark.sql(
            "SELECT 'k' AS key, 'välue' AS value, TIMESTAMP '2024-01-02 03:04:05.006789' AS timestamp"
        )

        df.write.format("streamsdsl-kafka").mode("append").option(
            "kafka.bootstrap.servers", kafka.bootstrap_servers
        ).option("topic", topic).save()

        assert kafka.consume_all(topic) == [
            ConsumedRecord(b"k", "välue".encode(), 1_704_164_645_006, 0, 0, None)
        ]

    def test_streaming_copy_topic_to_topic(
        self, spark: SparkSession, kafka: LocalKafka, new_topic: Callable[..., str], tmp_path: Path
    ) -> None:
        """Source → sink copies every record with key, value, timestamp and headers, same partition by key."""
        source, sink = new_topic(3), new_topic(3)
        records = [(f"key{i % 4}".encode(), f"v{i}".encode(), 7_000 + i, None) for i in range(12)]
        records.append((b"key1", None, 9_999, None, [("h", b"1")]))
        kafka.produce(source, records)

        query = (
            _stream(spark, kafka, source, startingOffsets="earliest")
            .select("key", "value", "timestamp", "headers")
            .writeStream.format("streamsdsl-kafka")
            .option("kafka.bootstrap.servers", kafka.bootstrap_servers)
            .option("topic", sink)
            .option("checkpointLocation", str(tmp_path / "ckpt"))
            .trigger(availableNow=True)
            .start()
        )
        try:
            assert query.awaitTermination(60)
        finally:
            query.stop()

        copied = kafka.consume_all(sink)
        original = kafka.consume_all(source)
        assert len(copied) == len(records)
        assert sorted(((r.key, r.value, r.timestamp, r.headers) for r in copied), key=repr) == sorted(
            ((r.key, r.value, r.timestamp, r.headers) for r in original), key=repr
        )
        # both producers use the Java client's murmur2 partitioner
        assert sorted((r.key, r.partition) for r in copied) == sorted((r.key, r.partition) for r in original)


@pytest.mark.spark
class TestOptions:
    """Invalid options fail at query start; the option checks themselves are in ``tests/io``."""

    def test_error_reaches_the_spark_user(self, spark: SparkSession) -> None:
        """Through Spark the error arrives wrapped, with the option's name and the fix in its text."""
        from pyspark.errors import AnalysisException

        with pytest.raises(AnalysisException) as info:
            spark.read.format("streamsdsl-kafka").option("subscribe", "t").load().collect()
        assert (
            "KafkaOptionError: option 'kafka.bootstrap.servers' is required, e.g. "
            ".option('kafka.bootstrap.servers', 'localhost:9092')."
        ) in str(info.value)

    def test_sink_schema_error_reaches_the_spark_user(self, spark: SparkSession) -> None:
        """A sink input column it does not take fails the write, naming the column."""
        df = spark.createDataFrame([(b"v", "t")], "value binary, topic string")
        with pytest.raises(Exception) as info:
            df.write.format("streamsdsl-kafka").mode("append").option("kafka.bootstrap.servers", "h:1").option(
                "topic", "t"
            ).save()
        assert (
            "KafkaSinkOptionError: the streamsdsl-kafka sink takes the columns key, value, timestamp, headers "
            "(streamsdsl.records.RAW_SINK_DDL); drop or rename 'topic'."
        ) in str(info.value)


class TestPooledReader:
    """`read_partition` with the worker's consumer pool, in this process and on a real cluster."""

    @staticmethod
    def _read(topic: str, start: int, end: int, kafka: LocalKafka, pool: Any) -> list[tuple[Any, ...]]:
        from streamsdsl.io.options import KafkaSourceOptions
        from streamsdsl.io.partition_reader import KafkaInputPartition, read_partition

        opts = KafkaSourceOptions.from_options(
            {"kafka.bootstrap.servers": kafka.bootstrap_servers, "subscribe": topic},
            streaming=True,
        )
        rows = []
        for batch in read_partition(KafkaInputPartition(topic, 0, start, end, opts), pool):
            d = batch.to_pydict()
            rows += list(zip(d["key"], d["value"], d["offset"], d["timestamp"]))
        return rows

    def test_one_consumer_reads_successive_and_earlier_ranges(
        self, kafka: LocalKafka, new_topic: Callable[..., str]
    ) -> None:
        """Three reads of one partition (the next range, then back to an earlier one) share one
        consumer, each reading exactly its range; the consumer is kept after each read. The pause
        after each read lets the consumer's end-of-partition event arrive: a stale one must not
        end the next read early."""
        import time

        from streamsdsl.io.consumer_pool import ConsumerPool

        topic = new_topic(1)
        kafka.produce(topic, [(f"k{i}".encode(), f"v{i}".encode(), 1_000 + i, 0) for i in range(10)])
        pool = ConsumerPool()

        ranges = [(0, 4), (4, 10), (2, 5)]
        reads = []
        consumers = []
        for start, end in ranges:
            reads.append(self._read(topic, start, end, kafka, pool))
            time.sleep(0.5)
            assert len(pool) == 1
            (entry,) = pool._entries.values()
            consumers.append(entry.consumer)

        assert reads == [
            [(f"k{i}".encode(), f"v{i}".encode(), i, 1_000 + i) for i in range(start, end)] for start, end in ranges
        ]
        assert consumers[0] is consumers[1] is consumers[2]
        pool.close_all()
