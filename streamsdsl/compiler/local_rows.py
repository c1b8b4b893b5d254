"""A DataFrame of rows the driver holds (a replay's records, the state it carries between runs),
read by the JVM alone.

PySpark's ``createDataFrame(list)`` makes a Python RDD: every job that scans it unpickles its
rows in a Python worker, ≈ 65 ms a job here for a few rows (a test driver's read runs several
such jobs). `local_frame` converts the rows to Arrow in the driver (as Spark Connect's
``createDataFrame`` does) and hands them to the JVM as an RDD of its own rows: no Python worker
reads them, and the optimizer sees an opaque relation, as it saw the Python RDD (a local
relation would be folded into the plan at optimization time, and an empty one pruned with the
observations above it).

`cached_frame` continues a plan from a persisted DataFrame's cache: the replay caches what it
reads twice, and every step built on the cache is analysed over the cache alone instead of the
whole plan beneath it.
"""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING, Any, Sequence

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

__all__ = ["cached_frame", "is_connect", "local_frame", "struct_type"]


def is_connect(spark: Any) -> bool:
    """Whether ``spark`` is a Spark Connect session (``pyspark.sql.connect.session.SparkSession``,
    built with ``SparkSession.builder.remote(...)``), told by its class alone."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


@lru_cache(maxsize=256)
def struct_type(ddl: str) -> StructType:
    """The `StructType` of a DDL string of fields (``"key string, state ..."``), parsed once per
    string: the replay builds the same few each read. Shared: not to be modified."""
    from pyspark.sql.types import StructType, _parse_datatype_string

    parsed = _parse_datatype_string(ddl)
    assert isinstance(parsed, StructType), ddl
    return parsed


def local_frame(spark: SparkSession, rows: Sequence[Any], schema: str | StructType) -> DataFrame:
    """A DataFrame of ``rows`` (tuples, `Row`s or dicts in ``schema``'s field order; nested
    structs as tuples or dicts) with ``schema`` (a DDL string or a `StructType`): what
    ``spark.createDataFrame(rows, schema)`` gives, without a Python worker to read it."""
    from pyspark.sql import DataFrame
    from pyspark.sql.types import StructType

    if is_connect(spark):
        return spark.createDataFrame(list(rows), schema)  # Connect sends them as Arrow already
    struct = schema if isinstance(schema, StructType) else struct_type(schema)
    from pyspark.sql.conversion import LocalDataToArrowConversion
    from pyspark.sql.pandas.types import to_arrow_schema

    rows = list(rows)
    table = (LocalDataToArrowConversion.convert(rows, struct, False) if rows
             else to_arrow_schema(struct, timezone="UTC").empty_table())
    local = spark.createDataFrame(table, struct)._jdf
    jdf = spark._jsparkSession.internalCreateDataFrame(local.queryExecution().toRdd(), local.schema(), False)
    return DataFrame(jdf, spark)


def cached_frame(df: DataFrame) -> DataFrame:
    """A DataFrame whose plan is the cache of ``df`` (persisted before: its `InMemoryRelation`)
    rather than ``df``'s plan: the same columns and rows, read from the same cache. Spark
    analyses each step of a plan as it is built, and some of its rules walk the whole plan each
    time; a replay builds a few hundred steps over plans of hundreds of nodes, so continuing
    from the cache makes each later step's analysis cheaper (docs/performance.md: a test
    driver's read of four stream joins, 15 % less CPU). What Spark does at run time does not
    change: it would read the cache in place of ``df``'s plan anyway, observations inside it
    included. ``df`` itself on Spark Connect (whose plans are analysed when they run) or when
    it is not cached."""
    from pyspark.sql import DataFrame

    spark = df.sparkSession
    if is_connect(spark):
        return df
    session = spark._jsparkSession
    cached = session.sharedState().cacheManager().lookupCachedData(df._jdf)
    if cached.isEmpty():
        return df
    relation = cached.get().cachedRepresentation()
    return DataFrame(spark._jvm.org.apache.spark.sql.classic.Dataset.ofRows(session, relation), spark)
