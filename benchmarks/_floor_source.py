"""Spark's floor for a streaming Python data source (P4): a source with the Kafka source's schema,
partitions and offsets that reads nothing — each ``read()`` yields one prebuilt 10,000-row Arrow
batch (records like P4's) over and over. A query on it pays everything Spark does for a Python
streaming source (the planner process per query, the offsets, one task per partition, the Arrow
batches into the JVM and into rows, the micro-batch) and nothing a Kafka reader does, so its
records/s bound what any Kafka reader on Spark's Python Data Source API can reach here.
"""

from __future__ import annotations

import json
from typing import Any, Iterator, Sequence

from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.types import StructType

from streamsdsl.io.partition_reader import RAW_RECORD_SCHEMA

FORMAT = "p4-spark-floor"
BATCH_ROWS = 10_000
#: Templates per partition, kept by the (reused) Python worker across queries.
_TEMPLATES: dict[int, Any] = {}


class _Range(InputPartition):
    def __init__(self, partition: int, start: int, end: int) -> None:
        self.partition, self.start, self.end = partition, start, end


def _template(partition: int) -> Any:
    """One batch of P4-like records (JSON values, ``user-…`` keys) in the source's Arrow schema."""
    import pyarrow as pa

    from streamsdsl.io.partition_reader import _raw_arrow_schema

    n = BATCH_ROWS
    values = [json.dumps({"id": i, "user": f"user-{i % 1000}", "amount": i % 97, "ok": True}).encode() for i in range(n)]
    schema = _raw_arrow_schema()
    return pa.RecordBatch.from_arrays([
        pa.array([f"user-{i % 1000}".encode() for i in range(n)], type=pa.binary()),
        pa.array(values, type=pa.binary()),
        pa.array(["floor"] * n, type=pa.string()),
        pa.array([partition] * n, type=pa.int32()),
        pa.array(range(n), type=pa.int64()),
        pa.array([1_700_000_000_000 + i for i in range(n)], type=pa.int64()),
        pa.array([[]] * n, type=schema.field("headers").type),
    ], schema=schema)


class _FloorStreamReader(DataSourceStreamReader):
    def __init__(self, options: dict[str, str]) -> None:
        self.partitions_n = int(options["partitions"])
        self.per_partition = int(options["records"]) // self.partitions_n

    def initialOffset(self) -> dict[str, int]:  # noqa: N802 - Spark's API
        return {str(p): 0 for p in range(self.partitions_n)}

    def latestOffset(self, start: dict[str, int], limit: Any) -> dict[str, int]:  # noqa: N802 - Spark's API
        return {str(p): self.per_partition for p in range(self.partitions_n)}

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> Sequence[InputPartition]:
        return [_Range(int(p), start[p], end[p]) for p in sorted(end, key=int) if end[p] > start[p]]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        batch = _TEMPLATES.get(partition.partition)
        if batch is None:
            batch = _TEMPLATES[partition.partition] = _template(partition.partition)
        remaining = partition.end - partition.start
        while remaining > 0:
            take = min(remaining, BATCH_ROWS)
            yield batch if take == BATCH_ROWS else batch.slice(0, take)
            remaining -= take

    def commit(self, end: dict[str, int]) -> None:
        pass


class FloorSource(DataSource):
    """``spark.readStream.format("p4-spark-floor").option("records", n).option("partitions", p)``."""

    @classmethod
    def name(cls) -> str:
        return FORMAT

    def schema(self) -> StructType:
        return RAW_RECORD_SCHEMA

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:  # noqa: N802 - Spark's API
        return _FloorStreamReader(self.options)
