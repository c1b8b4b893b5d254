"""The ``streamsdsl-kafka`` data source on Spark's Python Data Source API: readers and registration.

The source reads Kafka topics with confluent-kafka and yields rows of
`RAW_RECORD_DDL` (``timestamp`` in epoch milliseconds). It works
without Spark's JVM Kafka connector.

* **Streaming** (``spark.readStream``, `KafkaStreamReader`): offsets live in the Spark
  checkpoint as JSON, ``{"topic": {"0": 23, "1": 7}}`` (partition ids as strings; the offset
  is the next one to read). One Spark input partition per Kafka partition with new data;
  admission control (``maxOffsetsPerTrigger``) and ``Trigger.AvailableNow`` are supported. A
  restarted query resumes exactly at the first offset its checkpoint has not committed.
* **Topic patterns** (``subscribePattern``): every micro-batch's planning (`latestOffset`) lists
  the brokers' topics; a topic or partition that was not in the previous batch's offsets starts
  at its earliest offset (the new offsets enter the checkpoint with that batch).
* **Batch** (``spark.read``, `KafkaBatchReader`): reads ``[startingOffsets, endingOffsets)``.

The options are listed in `streamsdsl.io.options`; the offset arithmetic is in
`streamsdsl.io.offsets`, the broker requests in `streamsdsl.io.client` and the reading of
one partition in `streamsdsl.io.partition_reader`. `KafkaDataSource` also writes (see
`streamsdsl.io.sink`).

Examples
--------
>>> from streamsdsl.io import register
>>> register(spark)  # doctest: +SKIP
>>> df = (spark.readStream.format("streamsdsl-kafka")  # doctest: +SKIP
...       .option("kafka.bootstrap.servers", "127.0.0.1:9092")
...       .option("subscribe", "orders")
...       .option("startingOffsets", "earliest")
...       .load())
"""

from __future__ import annotations

import logging
import threading
import weakref
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    InputPartition,
)
from pyspark.sql.types import StructType

try:  # pyspark >= 4.2
    from pyspark.sql.streaming.datasource import (
        ReadAllAvailable,
        ReadLimit,
        ReadMaxRows,
        SupportsTriggerAvailableNow,
    )
except ImportError:  # pragma: no cover - older pyspark: no admission control / AvailableNow
    ReadLimit = object  # type: ignore[assignment,misc]

    class ReadAllAvailable:  # type: ignore[no-redef]
        """Placeholder for pyspark < 4.2."""

    class ReadMaxRows:  # type: ignore[no-redef]
        """Placeholder for pyspark < 4.2."""

        def __init__(self, max_rows: int) -> None:
            self.max_rows = max_rows

    class SupportsTriggerAvailableNow:  # type: ignore[no-redef]
        """Placeholder for pyspark < 4.2."""


from streamsdsl.io.client import ClientHolder
from streamsdsl.io.errors import KafkaOptionError, KafkaSinkOptionError, topic_recreated
from streamsdsl.io.offsets import (
    EARLIEST,
    LATEST,
    OffsetsJson,
    TopicPartitionKey,
    batch_end,
    moved_back,
    offsets_from_json,
    offsets_to_json,
    plan_ranges,
    requested_offsets,
)
from streamsdsl.io.options import KafkaSinkOptions, KafkaSourceOptions
from streamsdsl.io.partition_reader import RAW_RECORD_SCHEMA, KafkaInputPartition, read_partition
from streamsdsl.io.sink import KafkaBatchWriter, KafkaStreamWriter, validate_sink_schema

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import SparkSession

__all__ = [
    "SOURCE_NAME",
    "KafkaBatchReader",
    "KafkaDataSource",
    "KafkaStreamReader",
    "register",
]

#: The short name under which `register` makes the data source available.
SOURCE_NAME = "streamsdsl-kafka"

log = logging.getLogger(__name__)


class _RangeReader:
    """Mixin: ``read`` of both readers (runs in an executor's Python worker)."""

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """Read one planned offset range (runs in an executor's Python worker)."""
        assert isinstance(partition, KafkaInputPartition)
        return read_partition(partition)


class KafkaStreamReader(ClientHolder, _RangeReader, DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Micro-batch reader: offsets in the checkpoint, admission control, AvailableNow.

    Parameters
    ----------
    options : KafkaSourceOptions
        The validated reader options.
    """

    def __init__(self, options: KafkaSourceOptions) -> None:
        super().__init__(options)
        self._target: dict[TopicPartitionKey, int] | None = None
        self._last_latest: dict[TopicPartitionKey, int] | None = None

    def initialOffset(self) -> OffsetsJson:
        """Offsets a new query starts at, from ``startingOffsets``."""
        tps = self._client.partitions()
        wanted = requested_offsets(self._options.starting_offsets, tps, "startingOffsets", default=EARLIEST)
        return offsets_to_json(self._client.resolve(wanted))

    def getDefaultReadLimit(self) -> ReadLimit:
        """``ReadMaxRows(maxOffsetsPerTrigger)`` when the option is set, else all available."""
        if self._options.max_offsets_per_trigger is not None:
            return ReadMaxRows(self._options.max_offsets_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        """Fix the end offsets of an ``availableNow`` run: data produced later is not read."""
        self._target = self._client.latest(self._client.partitions())

    def latestOffset(self, start: OffsetsJson, limit: ReadLimit) -> OffsetsJson:
        """End offsets of the next micro-batch, capped by ``limit`` and the AvailableNow target.

        A partition whose end on the broker is below the query's position was re-created
        (`moved_back`): that fails the query (`KafkaTopicRecreatedError`) unless
        ``failOnDataLoss`` is false; then this batch ends that partition at its earliest
        offset (reading nothing of it) and the next batch reads the new topic from there.
        """
        begin = offsets_from_json(start)
        latest = self._target if self._target is not None else self._client.latest(self._client.partitions())
        moved = moved_back(begin, latest)
        if moved:  # asked again: a reset is decided on two answers of the broker, not one
            moved = moved_back(begin, {**latest, **self._client.latest(list(moved))})
        self._last_latest = dict(latest)
        new = [tp for tp in latest if tp not in begin]
        begin_all = {**self._client.earliest(new), **begin}
        max_rows = int(limit.max_rows) if isinstance(limit, ReadMaxRows) else None
        end = batch_end(begin_all, latest, max_rows)
        if moved:
            lows = self._client.earliest(list(moved))
            if self._options.fail_on_data_loss:
                (topic, part), high = min(moved.items())
                raise topic_recreated(topic, part, begin[(topic, part)], lows[(topic, part)], high)
            for (topic, part), low in sorted(lows.items()):
                log.warning(
                    "streamsdsl-kafka: %s-%d now ends at %d, below the query's offset %d: the topic was re-created; "
                    "reading it again from its earliest offset %d (failOnDataLoss=false)",
                    topic, part, moved[(topic, part)], begin[(topic, part)], low,
                )
            end.update(lows)
        return offsets_to_json(end)

    def reportLatestOffset(self) -> OffsetsJson | None:
        """The broker's end offsets seen by the last `latestOffset` (for progress)."""
        return offsets_to_json(self._last_latest) if self._last_latest is not None else None

    def partitions(self, start: OffsetsJson, end: OffsetsJson) -> Sequence[InputPartition]:
        """One input partition per Kafka partition with offsets in ``[start, end)``."""
        begin = offsets_from_json(start)
        stop = dict(sorted(offsets_from_json(end).items()))
        begin.update(self._client.earliest([tp for tp in stop if tp not in begin]))
        return [KafkaInputPartition(*r, self._options) for r in plan_ranges(begin, stop)]

    def commit(self, end: OffsetsJson) -> None:
        """Nothing to do: offsets live in the Spark checkpoint, not in Kafka."""

    def stop(self) -> None:
        """Close the driver-side clients."""
        self._close_client()


class KafkaBatchReader(ClientHolder, _RangeReader, DataSourceReader):
    """Batch reader over ``[startingOffsets, endingOffsets)``.

    Parameters
    ----------
    options : KafkaSourceOptions
        The validated reader options.
    """

    def partitions(self) -> Sequence[InputPartition]:
        """Resolve the offset ranges now (on the driver); one input partition per Kafka partition."""
        opts = self._options
        try:
            tps = self._client.partitions()
            missing = [t for t in opts.topics if not any(tp[0] == t for tp in tps)]
            if missing:
                raise KafkaOptionError(
                    f"option 'subscribe' names topics that do not exist on "
                    f"{opts.bootstrap_servers}: {', '.join(missing)}."
                )
            start = self._client.resolve(
                requested_offsets(opts.starting_offsets, tps, "startingOffsets", default=EARLIEST)
            )
            end = self._client.resolve(requested_offsets(opts.ending_offsets, tps, "endingOffsets", default=LATEST))
        finally:
            self._close_client()
        parts: list[InputPartition] = [KafkaInputPartition(*r, opts) for r in plan_ranges(start, end)]
        # Spark needs at least one partition to build a (possibly empty) plan; `tps` is not
        # empty here unless a pattern matches no topic (every subscribed topic exists).
        return parts or [KafkaInputPartition(tps[0][0] if tps else "", 0, 0, 0, opts)]


class KafkaDataSource(DataSource):
    """Kafka as a Spark data source: batch and streaming reads and writes.

    Reads yield `RAW_RECORD_SCHEMA`; writes take `RAW_SINK_DDL` (see `streamsdsl.io.sink`).
    """

    @classmethod
    def name(cls) -> str:
        """The format name, ``"streamsdsl-kafka"``."""
        return SOURCE_NAME

    def schema(self) -> StructType:
        """`RAW_RECORD_SCHEMA`; a user-specified schema is not allowed."""
        return RAW_RECORD_SCHEMA

    def _check_schema(self, schema: StructType) -> None:
        if schema != RAW_RECORD_SCHEMA:
            raise KafkaOptionError(
                "the streamsdsl-kafka source has a fixed schema (streamsdsl.records.RAW_RECORD_DDL); "
                f"remove the .schema(...) call (got {schema.simpleString()})."
            )

    def _sink_options(self, schema: StructType) -> KafkaSinkOptions:
        options = KafkaSinkOptions.from_options(self.options)
        validate_sink_schema(schema)
        return options

    def reader(self, schema: StructType) -> DataSourceReader:
        """Batch reader (``spark.read.format("streamsdsl-kafka")``)."""
        self._check_schema(schema)
        return KafkaBatchReader(KafkaSourceOptions.from_options(self.options, streaming=False))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        """Streaming reader (``spark.readStream.format("streamsdsl-kafka")``)."""
        self._check_schema(schema)
        return KafkaStreamReader(KafkaSourceOptions.from_options(self.options, streaming=True))

    def writer(self, schema: StructType, overwrite: bool) -> KafkaBatchWriter:
        """Batch writer (``df.write.format("streamsdsl-kafka")``), see `streamsdsl.io.sink`."""
        if overwrite:
            raise KafkaSinkOptionError(
                "save mode 'overwrite' is not possible for Kafka (a topic cannot be truncated); "
                "use .mode('append')."
            )
        return KafkaBatchWriter(self._sink_options(schema))

    def streamWriter(self, schema: StructType, overwrite: bool) -> KafkaStreamWriter:
        """Streaming writer (``df.writeStream.format("streamsdsl-kafka")``); any output mode appends."""
        return KafkaStreamWriter(self._sink_options(schema))


_registered: weakref.WeakKeyDictionary[Any, bool] = weakref.WeakKeyDictionary()
_register_lock = threading.Lock()


def register(spark: SparkSession) -> None:
    """Register the ``streamsdsl-kafka`` data source on ``spark`` (once per session).

    Parameters
    ----------
    spark : SparkSession
        The session; `get_session` gives one.
    """
    with _register_lock:
        try:
            if _registered.get(spark):
                return
        except TypeError:  # pragma: no cover - session not weak-referenceable
            pass
        spark.dataSource.register(KafkaDataSource)
        try:
            _registered[spark] = True
        except TypeError:  # pragma: no cover
            pass
