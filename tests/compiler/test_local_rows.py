"""`local_frame`: the driver's rows (a replay's records, the state it carries between runs) as a
DataFrame the JVM reads alone: the same rows as ``createDataFrame(list)`` for every type the
replay carries, no Python worker in its plan, and an empty one is not pruned with what is above
it. `cached_frame`: a plan continued from a cache reads the cache, observations inside it
included."""

from __future__ import annotations

from typing import Any

import pytest

from streamsdsl.compiler.columns import POSITION_TYPE, SOURCE_POSITION
from streamsdsl.compiler.local_rows import local_frame
from streamsdsl.records import RAW_RECORD_DDL

pytestmark = pytest.mark.spark

#: The driver's raw records: binary keys and values, None, headers (an array of structs), positions.
RECORDS = [(b"k", b"v", "in", 0, 0, 5, [("h", b"1"), ("g", None)], 0),
           (None, None, "other", 0, 1, -1, [], 1),
           (b"", b"\x00\xff", "in", 0, 2, 1 << 40, [("h", b"")], 2)]
RECORDS_DDL = f"{RAW_RECORD_DDL}, {SOURCE_POSITION} bigint"
#: A carried state: a struct with a map, an array of structs, a nested null and a long's bounds.
STATE_DDL = (f"key string, state struct<started: boolean, stream_time: bigint, schedule: string, "
             f"stores: array<struct<name: string, entries: map<string, binary>>>, at: {POSITION_TYPE}>")
STATES = [("a", {"started": True, "stream_time": (1 << 63) - 1, "schedule": "[]",
                 "stores": [{"name": "s", "entries": {"x": b"1", "y": None}}], "at": [1, 2]}),
          ("b", (False, -(1 << 63), None, [], None)),
          (None, None)]


@pytest.mark.parametrize("rows, ddl", [(RECORDS, RECORDS_DDL), (STATES, STATE_DDL)], ids=["records", "state"])
def test_the_same_rows_as_create_data_frame(spark: Any, rows: list[Any], ddl: str) -> None:
    """Every value of every row comes back as `createDataFrame` gives it (same schema, same order)."""
    mine, theirs = local_frame(spark, rows, ddl), spark.createDataFrame(rows, ddl)
    assert mine.schema == theirs.schema
    assert mine.collect() == theirs.collect()
    assert len(mine.collect()) == len(rows)


def test_read_by_the_jvm_alone(spark: Any) -> None:
    """The plan scans an RDD of the JVM's rows: no Python RDD in its lineage, no Python worker
    reads it (``createDataFrame(list)``'s has one)."""
    def lineage(df: Any) -> str:
        return str(df._jdf.queryExecution().toRdd().toDebugString())

    mine = lineage(local_frame(spark, RECORDS, RECORDS_DDL))
    assert "PythonRDD" in lineage(spark.createDataFrame(RECORDS, RECORDS_DDL))
    assert "PythonRDD" not in mine and "ParallelCollectionRDD" in mine, mine


def test_an_empty_frame_is_not_pruned(spark: Any) -> None:
    """No rows: the optimizer does not know it is empty (as with the Python RDD it replaces), so
    a global aggregate and an observation above it still run and report."""
    from pyspark.sql import Observation
    from pyspark.sql import functions as F

    empty = local_frame(spark, [], STATE_DDL)
    assert empty.schema == spark.createDataFrame([], STATE_DDL).schema
    seen = Observation("seen")
    assert empty.observe(seen, F.count(F.lit(1)).alias("n")).agg(F.max("key").alias("m")).collect()[0]["m"] is None
    assert seen.get == {"n": 0}
    assert "LocalRelation" not in empty.groupBy("key").count()._jdf.queryExecution().optimizedPlan().toString()


def test_a_plan_continued_from_the_cache(spark: Any) -> None:
    """`cached_frame` of a persisted DataFrame: its analysed plan is the cache's relation alone
    (not the steps beneath it), the steps built on it give the rows the DataFrame gives, the
    rows are computed once for two jobs (a counting UDF's accumulator), and an observation
    inside the cached plan reports through a job run on the continued plan. An uncached
    DataFrame comes back as it is."""
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    from streamsdsl.compiler.local_rows import cached_frame
    from streamsdsl.runtime.metrics import observed_metrics

    calls = spark.sparkContext.accumulator(0)

    def counted(key: Any) -> Any:
        calls.add(1)
        return key

    udf = F.udf(counted, "string", useArrow=False)
    base = local_frame(spark, STATES, STATE_DDL).select(udf("key").alias("key"), "state")
    base = base.observe("inside", F.count(F.lit(1)).alias("n"))
    assert cached_frame(base) is base  # not cached
    df = base.persist(StorageLevel.MEMORY_ONLY)
    try:
        continued = cached_frame(df)
        assert continued.schema == df.schema
        analyzed = continued._jdf.queryExecution().analyzed()
        assert analyzed.nodeName() == "InMemoryRelation" and analyzed.children().isEmpty()
        above = continued.filter(F.col("key").isNotNull()).select("key")
        assert sorted(r["key"] for r in above.collect()) == ["a", "b"]
        assert observed_metrics(above)["inside"] == {"n": 3}
        assert sorted(continued.collect(), key=str) == sorted(df.collect(), key=str)
        assert calls.value == 3  # the UDF ran once per row: both jobs read the cache
    finally:
        df.unpersist()
