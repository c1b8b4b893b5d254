"""A file-backed stand-in for a topic, for streaming tests and the test driver's streaming engine.

Each :meth:`FileTopic.append` writes one Parquet file of raw records; a streaming query reading
it with ``max_files_per_trigger=1`` sees exactly one micro-batch per append, in order. The
records go through the same source lowering (deserialization, watermark) as Kafka records.
"""

from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING, Any, Iterable

from streamsdsl.records import RAW_RECORD_DDL
from streamsdsl.values.serdes import Serde

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


class FileTopic:
    """A directory of Parquet batches holding records of one or more topics."""

    def __init__(self, directory: str) -> None:
        self.directory = directory
        os.makedirs(directory, exist_ok=True)
        self._offsets: dict[tuple[str, int], int] = {}
        self._files = len([f for f in os.listdir(directory) if f.endswith(".parquet")])

    def append(self, topic: str, records: Iterable[tuple[Any, Any, int]], key_serde: Serde, value_serde: Serde,
               partition: int = 0) -> None:
        """Write one micro-batch: ``(key, value, timestamp_ms)`` records serialized with the serdes."""
        self.append_topics(((topic, key, value, ts) for key, value, ts in records), key_serde, value_serde, partition)

    def append_topics(self, records: Iterable[tuple[str, Any, Any, int]], key_serde: Serde, value_serde: Serde,
                      partition: int = 0) -> None:
        """Write one micro-batch of records of several topics: ``(topic, key, value,
        timestamp_ms)``, each topic's in the order given."""
        self._write([self._row(topic, key_serde.serialize(key), value_serde.serialize(value), ts, [], partition)
                     for topic, key, value, ts in records])

    def _write(self, rows: list[dict[str, Any]]) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        table = pa.Table.from_pylist(rows, schema=_arrow_schema())
        name = os.path.join(self.directory, f"batch-{self._files:08d}.parquet")
        # written under a hidden name (Spark's file listing skips names starting with "." or
        # "_"), then renamed: a running query that lists the directory meanwhile sees no file
        # it could find gone when it reads it
        temporary = os.path.join(self.directory, f".batch-{self._files:08d}.parquet.tmp")
        pq.write_table(table, temporary)
        # Spark's file source takes files in modification-time order; two files written within
        # the file system's timestamp granularity could be taken in either order. Give each file
        # a strictly later time than every file before it.
        stamp = max(time.time_ns(), self._last_mtime_ns() + 10_000_000)
        os.utime(temporary, ns=(stamp, stamp))
        os.replace(temporary, name)
        self._files += 1

    def append_raw(self, records: Iterable[tuple[str, bytes | None, bytes | None, int, Any]],
                   partition: int = 0) -> None:
        """Write one micro-batch of serialized records: ``(topic, key bytes, value bytes,
        timestamp_ms, headers)``, headers as ``(name, bytes | None)`` pairs."""
        self._write([self._row(topic, key, value, ts, [{"key": k, "value": v} for k, v in headers], partition)
                     for topic, key, value, ts, headers in records])

    def _row(self, topic: str, key: bytes | None, value: bytes | None, ts: int, headers: list[Any],
             partition: int) -> dict[str, Any]:
        offset = self._offsets.get((topic, partition), 0)
        self._offsets[(topic, partition)] = offset + 1
        return {"key": key, "value": value, "topic": topic, "partition": partition, "offset": offset,
                "timestamp": ts, "headers": headers}

    def _last_mtime_ns(self) -> int:
        stamps = [os.stat(os.path.join(self.directory, f)).st_mtime_ns
                  for f in os.listdir(self.directory) if f.endswith(".parquet")]
        return max(stamps, default=0)

    def read_stream(self, spark: SparkSession, topics: Iterable[str] | None = None) -> DataFrame:
        """A streaming DataFrame of the raw records, one file per micro-batch."""
        from pyspark.sql import functions as F

        df = spark.readStream.schema(RAW_RECORD_DDL).option("maxFilesPerTrigger", 1).parquet(self.directory)
        if topics is not None:
            df = df.filter(F.col("topic").isin(list(topics)))
        return df


def _arrow_schema() -> Any:
    from pyspark.sql.pandas.types import to_arrow_schema
    from pyspark.sql.types import _parse_datatype_string

    return to_arrow_schema(_parse_datatype_string(RAW_RECORD_DDL))
