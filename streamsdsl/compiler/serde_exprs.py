"""Serdes as Spark column expressions: bytes → internal column and back.

String, Json and Bytes compile to native expressions; the fixed-width numeric serdes use native
length checks and a vectorized (Arrow/pandas) conversion. A record that cannot be deserialized
fails the query with an error naming topic, partition and offset (Kafka Streams'
``log_and_fail``), raised natively by ``raise_error``.
"""

from __future__ import annotations

import struct
from typing import Any

import pyarrow as pa
from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql.functions import arrow_udf

from streamsdsl.compiler.frame import KeyCodec, SessionKeyCodec
from streamsdsl.dsl.serdes import Serde

_WIDTH = {"Long": 8, "Integer": 4, "Double": 8}
_FMT = {"Long": ">q", "Integer": ">i", "Double": ">d"}


def _arrow_map(fn: Any, return_type: str) -> Any:
    """A vectorized (Arrow batch) UDF applying ``fn`` to each non-null element."""
    from pyspark.sql.pandas.types import to_arrow_type
    from pyspark.sql.types import _parse_datatype_string

    arrow_type = to_arrow_type(_parse_datatype_string(return_type))

    @arrow_udf(return_type)  # type: ignore[misc]
    def apply(values: pa.Array) -> pa.Array:
        return pa.array([None if v is None else fn(v) for v in values.to_pylist()], type=arrow_type)

    return apply


def _unpack_udf(serde: Serde) -> Any:
    fmt, width = _FMT[serde.name], _WIDTH[serde.name]
    # Wrong-length input yields null here; the native length check raises the real error
    # (a UDF is evaluated for every row of a batch, also those the check rejects).
    return _arrow_map(lambda b: struct.unpack(fmt, b)[0] if len(b) == width else None, serde.spark_type)


def _pack_udf(serde: Serde) -> Any:
    fmt = _FMT[serde.name]
    return _arrow_map(lambda v: struct.pack(fmt, v), "binary")


def deserialization_error(what: str, serde: Serde, reason: Column) -> Column:
    """A native ``raise_error`` naming the record's coordinates (columns topic/partition/offset)."""
    return F.raise_error(
        F.concat(
            F.lit(f"Serdes.{serde.name}() cannot deserialize the record {what} at "),
            F.coalesce(F.col("topic"), F.lit("?")),
            F.lit("-"),
            F.coalesce(F.col("partition").cast("string"), F.lit("?")),
            F.lit(" offset "),
            F.coalesce(F.col("offset").cast("string"), F.lit("?")),
            F.lit(": "),
            reason,
            F.lit(". Fix the producer or consume the topic with a matching serde (Consumed.with_serdes)."),
        )
    )


def invalid_bytes(col: Column, serde: Serde) -> tuple[Column, Column]:
    """(condition, reason) that is true for bytes ``serde`` cannot read; never true for null."""
    if serde.name in _WIDTH:
        width = _WIDTH[serde.name]
        return (
            col.isNotNull() & (F.length(col) != width),
            F.concat(F.lit(f"expected {width} bytes, got "), F.length(col).cast("string")),
        )
    if serde.name == "Json":
        text = col.cast("string")
        return col.isNotNull() & F.try_parse_json(text).isNull(), F.lit("not valid UTF-8 JSON")
    if serde.name == "String":
        return col.isNotNull() & F.try_validate_utf8(col).isNull(), F.lit("not valid UTF-8")
    return F.lit(False), F.lit("")


def deserialize(col: Column, serde: Serde, what: str) -> Column:
    """Bytes column → the serde's internal column; invalid bytes raise a clear error."""
    bad, reason = invalid_bytes(col, serde)
    if serde.name == "Bytes":
        return col
    return F.when(bad, deserialization_error(what, serde, reason)).otherwise(decode(col, serde))


def decode(col: Column, serde: Serde) -> Column:
    """Bytes column → the serde's internal column, without validation (see ``invalid_bytes``)."""
    if serde.name in ("String", "Json"):
        value = col.cast("string")
    elif serde.name == "Bytes":
        value = col
    elif serde.name == "Long":
        # conv(..., -10) reads the 16 hex digits as a signed 64-bit two's complement number
        value = F.conv(F.hex(col), 16, -10).cast("bigint")
    elif serde.name == "Integer":
        unsigned = F.conv(F.hex(col), 16, 10).cast("bigint")
        value = F.when(unsigned >= 2**31, unsigned - 2**32).otherwise(unsigned).cast("int")
    else:
        value = _unpack_udf(serde)(col)
    return value


def serialize_value(col: Column, internal: Serde, target: Serde) -> Column:
    """Internal column held as ``internal`` → bytes of ``target`` (null stays null)."""
    if internal == target:
        if target.name in ("String", "Json"):
            return F.encode(col, "UTF-8")
        if target.name == "Bytes":
            return col
        if target.name == "Long":
            return F.unhex(F.lpad(F.hex(col), 16, "0"))
        if target.name == "Integer":
            return F.unhex(F.lpad(F.hex(col.cast("bigint").bitwiseAND(0xFFFFFFFF)), 8, "0"))
        return _pack_udf(target)(col)
    return _convert_udf(internal, target, windowed=None)(col)


def serialize_key(col: Column, codec: KeyCodec, target: Serde) -> Column:
    """Key column → bytes; windowed keys use Kafka Streams' wire layout."""
    if not codec.windowed:
        return serialize_value(col, codec.serde, target)
    inner = serialize_value(col.getField("key"), codec.serde, target)
    inner = F.coalesce(inner, F.lit(b"").cast("binary"))
    end = F.unhex(F.lpad(F.hex(col.getField("end")), 16, "0"))
    start = F.unhex(F.lpad(F.hex(col.getField("start")), 16, "0"))
    if isinstance(codec, SessionKeyCodec):
        return F.when(col.isNull(), F.lit(None).cast("binary")).otherwise(F.concat(inner, end, start))
    return F.when(col.isNull(), F.lit(None).cast("binary")).otherwise(F.concat(inner, start))


def _convert_udf(internal: Serde, target: Serde, windowed: str | None) -> Any:
    return _arrow_map(lambda v: target.serialize(internal.from_internal(v)), "binary")


def convert_column(col: Column, internal: Serde, target: Serde) -> Column:
    """Re-encode an internal column from ``internal`` to ``target`` (e.g. Json → Long)."""
    if internal == target:
        return col
    return _arrow_map(lambda v: target.to_internal(internal.from_internal(v)), target.spark_type)(col)
