"""Serdes as Spark column expressions: bytes → internal column and back.

One rule per serde class (``functools.singledispatch``; the serde classes live in the pure-Python
DSL layer, so the Spark side of each is registered here): String, Json and Bytes compile to
native expressions, Long and Integer to native hex arithmetic, Double to native length checks
plus a vectorized (Arrow) conversion, and a user's `CustomSerde` keeps the wire bytes as its
column, checked once at the source by a vectorized call of its ``deserialize``.

A record that cannot be deserialized fails the query with an error naming the serde, topic,
partition and offset (Kafka Streams' ``log_and_fail``), raised natively by ``raise_error``.
"""

from __future__ import annotations

import struct
from functools import singledispatch
from typing import Any, Callable

import attrs
import pyarrow as pa
from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql.functions import arrow_udf

from streamsdsl.compiler.arrow_cells import PLAIN_JSON_INTEGER
from streamsdsl.compiler.frame import KeyCodec, SessionKeyCodec
from streamsdsl.compiler.jvm_operator import deserialization_message, json_check
from streamsdsl.values.serdes import (
    BytesSerde,
    CustomSerde,
    FixedWidthSerde,
    IntegerSerde,
    JsonSerde,
    LongSerde,
    PlanSerde,
    StringSerde,
)
from streamsdsl.errors import DESERIALIZATION_HINT, NOT_JSON, InvalidArgumentError, OperationNotDefinedError


def _arrow_map(fn: Callable[[Any], Any], return_type: str) -> Any:
    """A vectorized (Arrow batch) UDF applying ``fn`` to each non-null element."""
    from pyspark.sql.pandas.types import to_arrow_type
    from pyspark.sql.types import _parse_datatype_string

    arrow_type = to_arrow_type(_parse_datatype_string(return_type))

    @arrow_udf(return_type)  # type: ignore[misc]
    def apply(values: pa.Array) -> pa.Array:
        return pa.array([None if v is None else fn(v) for v in values.to_pylist()], type=arrow_type)

    return apply


def _big_endian(col: Column, hex_digits: int) -> Column:
    """An integral column as ``hex_digits / 2`` bytes, big-endian (two's complement for a bigint)."""
    return F.unhex(F.lpad(F.hex(col), hex_digits, "0"))


def _no_rule(serde: PlanSerde, what: str) -> OperationNotDefinedError:
    return OperationNotDefinedError(f"No Spark {what} rule for {serde!r} ({type(serde).__name__}).")


# --- bytes → column, without validation ----------------------------------------------------------


def _unchanged(serde: PlanSerde, col: Column) -> Column:
    return col


def _column_rule(what: str) -> Any:
    """A rule per serde class between bytes and the internal column (``singledispatch``): a serde
    without one raises `_no_rule`; Bytes and Custom serdes keep the bytes as their column."""

    @singledispatch
    def rule(serde: PlanSerde, col: Column) -> Column:
        raise _no_rule(serde, what)

    rule.register(BytesSerde, _unchanged)
    rule.register(CustomSerde, _unchanged)
    return rule


_decode = _column_rule("decoding")


@_decode.register(StringSerde)
def _(serde: StringSerde, col: Column) -> Column:
    # bytes that are not UTF-8 read with U+FFFD, as Kafka's StringDeserializer reads them (Spark's
    # rule is Python's, the direct engine's); valid text costs one pass over its bytes
    return F.make_valid_utf8(col.cast("string"))


@_decode.register(JsonSerde)
def _(serde: JsonSerde, col: Column) -> Column:
    # checked before it is read (`deserialization_check`): valid UTF-8
    return col.cast("string")


@_decode.register(LongSerde)
def _(serde: LongSerde, col: Column) -> Column:
    # conv(..., -10) reads the 16 hex digits as a signed 64-bit two's complement number
    return F.conv(F.hex(col), 16, -10).cast("bigint")


@_decode.register(IntegerSerde)
def _(serde: IntegerSerde, col: Column) -> Column:
    unsigned = F.conv(F.hex(col), 16, 10).cast("bigint")
    return F.when(unsigned >= 2**31, unsigned - 2**32).otherwise(unsigned).cast("int")


@_decode.register(FixedWidthSerde)
def _(serde: FixedWidthSerde, col: Column) -> Column:
    fmt, width = serde.fmt, serde.width
    # Wrong-length input yields null here; the native length check raises the real error
    # (a UDF is evaluated for every row of a batch, also those the check rejects).
    return _arrow_map(lambda b: struct.unpack(fmt, b)[0] if len(b) == width else None, serde.spark_type)(col)


# --- which bytes a serde cannot read ----------------------------------------------------------------


@singledispatch
def _invalid(serde: PlanSerde, col: Column) -> tuple[Column, Column] | None:
    """(condition, reason) for bytes ``serde`` cannot read; None when every byte string is valid."""
    raise _no_rule(serde, "validation")


@_invalid.register(BytesSerde)
@_invalid.register(StringSerde)
def _(serde: PlanSerde, col: Column) -> None:
    return None  # any bytes (a String reads them with U+FFFD)


@_invalid.register(FixedWidthSerde)
def _(serde: FixedWidthSerde, col: Column) -> tuple[Column, Column]:
    return (
        col.isNotNull() & (F.length(col) != serde.width),
        F.concat(F.lit(f"expected {serde.width} bytes, got "), F.length(col).cast("string")),
    )


@_invalid.register(JsonSerde)
def _(serde: JsonSerde, col: Column) -> tuple[Column, Column]:
    valid = json_check(col)
    if valid is None:  # a session without the jar: Spark's parser (duplicate object keys are invalid there)
        valid = F.try_parse_json(col.cast("string")).isNotNull()
    return col.isNotNull() & ~valid, F.lit(NOT_JSON)


@_invalid.register(CustomSerde)
def _(serde: CustomSerde, col: Column) -> tuple[Column, Column]:
    inner = serde.inner

    def failure(data: bytes) -> str | None:
        try:
            inner.deserialize(bytes(data))
        except Exception as exc:  # noqa: BLE001 - any failure of user code is the reason
            return f"{type(exc).__name__}: {exc}"
        return None

    reason = _arrow_map(failure, "string")(col)
    return col.isNotNull() & reason.isNotNull(), reason


# --- column → bytes of the same serde ---------------------------------------------------------------


_encode = _column_rule("encoding")


@_encode.register(StringSerde)
@_encode.register(JsonSerde)
def _(serde: PlanSerde, col: Column) -> Column:
    return F.encode(col, "UTF-8")


@_encode.register(LongSerde)
def _(serde: LongSerde, col: Column) -> Column:
    return _big_endian(col, 16)


@_encode.register(IntegerSerde)
def _(serde: IntegerSerde, col: Column) -> Column:
    return _big_endian(col.cast("bigint").bitwiseAND(0xFFFFFFFF), 8)


@_encode.register(FixedWidthSerde)
def _(serde: FixedWidthSerde, col: Column) -> Column:
    fmt = serde.fmt
    return _arrow_map(lambda v: struct.pack(fmt, v), "binary")(col)


# --- the compiler's entry points ---------------------------------------------------------------


@attrs.frozen(eq=False)
class RecordContext:
    """Where a record failure happens, for its error: the processor (its Kafka Streams name) and
    the record's columns (source position; the key as JSON text when it is known)."""

    processor: str
    position: Column
    key_json: Column | None = None
    #: the source's one topic, when it reads one: the error names it without reading the
    #: record's ``topic`` column (which the plan then does not read at all)
    topic: str | None = None


def _column_or_unknown(name: str) -> Column:
    return F.coalesce(F.col(name).cast("string"), F.lit("?"))


def _source_error(context: RecordContext, cause: Column, extra: list[Column]) -> Column:
    """A native ``raise_error`` whose message is a source record's
    `streamsdsl.errors.RecordDeserializationError` in its travelling form (a readable line plus
    the structured payload `RecordError.find` reads), built from Spark expressions: what the jar's
    ``RecordErrors`` builds in one call, for a session without the jar. The row still has the
    record's ``partition`` and ``offset`` (and ``topic``, unless the context names it)."""
    topic = _topic(context)
    fields = [F.lit("RecordDeserializationError").alias("kind"), F.lit(context.processor).alias("processor"),
              cause.alias("cause"), context.position.cast("bigint").alias("position"), topic.alias("topic"),
              F.col("partition").cast("int").alias("partition"), F.col("offset").cast("bigint").alias("offset")]
    where = F.concat(F.lit("topic "), F.coalesce(topic, F.lit("?")), F.lit(" partition "),
                     _column_or_unknown("partition"), F.lit(" offset "), _column_or_unknown("offset"))
    if context.key_json is not None:
        fields.append(context.key_json.alias("key_json"))
    return F.raise_error(F.concat(
        F.lit(f"{context.processor}: "), cause, F.lit(" (record at "), where, F.lit(") [streamsdsl-error]"),
        F.to_json(F.struct(*fields, *extra)), F.lit("[/streamsdsl-error]"),
    ))


def _topic(context: RecordContext) -> Column:
    return F.lit(context.topic) if context.topic is not None else F.col("topic")


def key_as_json(col: Column, serde: PlanSerde | None = None) -> Column:
    """A key column as JSON text of a one-element array (how errors carry the key). A JSON
    serde's column already holds JSON text: it is put in the array as it is (not as a string,
    which would show the key ``'k'`` as ``'"k"'``)."""
    if isinstance(serde, JsonSerde):
        return F.concat(F.lit("["), col, F.lit("]"))
    return F.to_json(F.array(col))


#: Bytes of a malformed JSON record the error carries, to say where it breaks (`json_error_at`).
_JSON_ERROR_PREFIX = 65_536


def deserialization_error(what: str, serde: PlanSerde, reason: Column, context: RecordContext,
                          data: Column | None = None) -> Column:
    """The ``log_and_fail`` error of a source record ``serde`` cannot read: a
    `streamsdsl.errors.RecordDeserializationError` naming the source, the record, the reason and
    the handler that would skip it. For a JSON serde the error also carries the record's first
    bytes (``data``), from which `RecordError.find` says where the JSON breaks."""
    cause = F.concat(F.lit(f"{serde!r} cannot deserialize the record {what}: "), reason, F.lit(DESERIALIZATION_HINT))
    data = data if data is not None and isinstance(serde, JsonSerde) else None
    # the jar builds the message in one call, which keeps the check's generated code small
    # (the expressions below, inlined into the filter, made P1's job 5% slower)
    message = deserialization_message(
        F.lit(context.processor), cause, context.position.cast("bigint").cast("string"), _topic(context),
        F.col("partition").cast("int").cast("string"), F.col("offset").cast("bigint").cast("string"),
        context.key_json if context.key_json is not None else F.lit(None).cast("string"),
        data if data is not None else F.lit(None).cast("binary"))
    if message is not None:
        return F.raise_error(message)
    extra = []
    if data is not None:
        extra = [F.base64(F.substring(data, 1, _JSON_ERROR_PREFIX)).alias("data_b64"),
                 F.length(data).alias("data_length")]
    return _source_error(context, cause, extra)


def deserialization_check(col: Column, serde: PlanSerde, what: str, context: RecordContext) -> Column | None:
    """A condition that is true for bytes ``serde`` can read and raises the
    `streamsdsl.errors.RecordDeserializationError` for the others (None: every byte string is
    valid). Evaluated once per record, as a flag that a filter reads (`streamsdsl.compiler.
    lowering`), so that the value column stays a plain decode and each expression reading it
    does not re-run the check (Spark would inline a ``CASE WHEN`` in the value's own column into
    every consumer)."""
    invalid = _invalid(serde, col)
    if invalid is None:
        return None
    bad, reason = invalid
    return F.when(bad, deserialization_error(what, serde, reason, context, col)).otherwise(F.lit(True))


def invalid_bytes(col: Column, serde: PlanSerde) -> tuple[Column, Column]:
    """(condition, reason) that is true for bytes ``serde`` cannot read; never true for null."""
    return _invalid(serde, col) or (F.lit(False), F.lit(""))


def deserialize(col: Column, serde: PlanSerde, what: str, context: RecordContext) -> Column:
    """Bytes column → the serde's internal column; invalid bytes raise a
    `streamsdsl.errors.RecordDeserializationError` (see `deserialization_error`)."""
    invalid = _invalid(serde, col)
    if invalid is None:
        return _decode(serde, col)
    bad, reason = invalid
    return F.when(bad, deserialization_error(what, serde, reason, context, col)).otherwise(_decode(serde, col))


def decode(col: Column, serde: PlanSerde) -> Column:
    """Bytes column → the serde's internal column, without validation (see ``invalid_bytes``)."""
    return _decode(serde, col)


def serialize_value(col: Column, internal: PlanSerde, target: PlanSerde, context: RecordContext | None = None,
                    what: str = "value") -> Column:
    """Internal column held as ``internal`` → bytes of ``target`` (null stays null). A value
    ``target`` cannot write raises a `streamsdsl.errors.RecordSerializationError` naming
    ``context``'s processor (the sink) and the record."""
    if internal == target:
        return _encode(target, col)
    if context is None:
        return _convert_udf(internal, target)(col)
    key_json = context.key_json if context.key_json is not None else F.lit(None).cast("string")
    return _sink_convert_udf(internal, target, context.processor, what)(col, context.position, key_json)


def serialize_key(col: Column, codec: KeyCodec, target: PlanSerde, context: RecordContext | None = None) -> Column:
    """Key column → bytes; windowed keys use Kafka Streams' wire layout."""
    if not codec.windowed:
        return serialize_value(col, codec.serde, target, context, "key")
    inner = serialize_value(col.getField("key"), codec.serde, target, context, "key")
    inner = F.coalesce(inner, F.lit(b"").cast("binary"))
    end = _big_endian(col.getField("end"), 16)
    start = _big_endian(col.getField("start"), 16)
    if isinstance(codec, SessionKeyCodec):
        return F.when(col.isNull(), F.lit(None).cast("binary")).otherwise(F.concat(inner, end, start))
    return F.when(col.isNull(), F.lit(None).cast("binary")).otherwise(F.concat(inner, start))


def _convert_udf(internal: PlanSerde, target: PlanSerde) -> Any:
    return _arrow_map(lambda v: target.serialize(internal.from_internal(v)), "binary")


def _sink_convert_udf(internal: PlanSerde, target: PlanSerde, processor: str, what: str) -> Any:
    """A vectorized conversion to ``target``'s bytes whose failure names the sink and the record."""

    @arrow_udf("binary")  # type: ignore[misc]
    def apply(values: pa.Array, positions: pa.Array, keys: pa.Array) -> pa.Array:
        import json

        from streamsdsl.operators.functions import sink_write_error

        out: list[bytes | None] = []
        for v, position, key_json in zip(values.to_pylist(), positions.to_pylist(), keys.to_pylist()):
            if v is None:
                out.append(None)
                continue
            try:
                out.append(target.serialize(internal.from_internal(v)))
            except Exception as exc:  # noqa: BLE001 - re-raised with the sink and the record
                key = None if key_json is None else repr(json.loads(key_json)[0])
                raise sink_write_error(processor, what, exc, key, position).in_worker() from exc
        return pa.array(out, type=pa.binary())

    return apply


#: JSON's whitespace, which may surround a JSON text (a ``Serdes.Json()`` source keeps the text it read).
_JSON_SPACE = "[ \\t\\n\\r]*"


def _json_as(col: Column, target: PlanSerde) -> Column | None:
    """A ``Serdes.Json()`` column's values as ``target``'s column, natively, exactly as
    ``json.loads`` reads them: a JSON string as a ``String``, a JSON integer as a ``Long`` or an
    ``Integer``; a JSON ``null`` is a null. A plain string or integer is cut out of its text
    (the column holds valid JSON: a ``Serdes.Json()`` source checks it, the steps write it), any
    other text read by Spark's JSON reader (a conditional branch: only those rows pay for
    it). A value of another kind fails the query naming the serde and the value (the serdes' own
    refusal). None for the other serdes."""
    if type(target) is StringSerde:
        kind, shape = "str", f'^{_JSON_SPACE}"'
        # a valid JSON text within quotes and without a backslash is one string without an escape
        plain = col.startswith('"') & col.endswith('"') & ~col.contains("\\") & (F.length(col) >= 2)
        cut = col.substr(F.lit(2), F.length(col) - 2)
    elif type(target) in (LongSerde, IntegerSerde):
        kind, shape = "int", f"^{_JSON_SPACE}-?(0|[1-9][0-9]*){_JSON_SPACE}$"
        plain, cut = col.rlike(PLAIN_JSON_INTEGER), col.try_cast("bigint")  # its text is the value
        if type(target) is IntegerSerde:
            plain, cut = plain & cut.between(-(1 << 31), (1 << 31) - 1), cut.cast("int")
    else:
        return None
    value = F.from_json(F.concat(F.lit("["), col, F.lit("]")), f"array<{target.spark_type}>")[0]
    shaped = col.rlike(shape)
    refused = F.concat(F.lit(f"{target!r} holds {kind} values (got the JSON value "), col, F.lit(")."))
    too_large = F.concat(F.lit(f"{target!r} cannot hold the integer "), col, F.lit(": it is out of range."))
    return (F.when(col.isNull(), F.lit(None).cast(target.spark_type))
            .when(plain, cut)
            .when(col.rlike(f"^{_JSON_SPACE}null{_JSON_SPACE}$"), F.lit(None).cast(target.spark_type))
            .when(shaped & value.isNotNull(), value)
            .otherwise(F.raise_error(F.when(shaped, too_large).otherwise(refused))))  # type: ignore[arg-type]


def convert_column(col: Column, internal: PlanSerde, target: PlanSerde) -> Column:
    """Re-encode an internal column from ``internal`` to ``target`` (e.g. Json → Long): natively
    from ``Json`` to ``String``, ``Long`` and ``Integer`` (`_json_as`), else cell by cell in an
    Arrow UDF."""
    if internal == target:
        return col
    native = _json_as(col, target) if isinstance(internal, JsonSerde) else None
    if native is not None:
        return native
    return _arrow_map(lambda v: target.to_internal(internal.from_internal(v)), target.spark_type)(col)


def serialize_python(col: Column, serde: PlanSerde, what: str) -> Column:
    """A column of values as Python reads them (structs and maps as dicts, arrays as lists) →
    the bytes ``serde.serialize`` writes of each (null stays null); a value it cannot write
    raises `InvalidArgumentError` naming ``what`` (the column) and the value."""

    @arrow_udf("binary")  # type: ignore[misc]
    def apply(values: pa.Array) -> pa.Array:
        out: list[bytes | None] = []
        for v in values.to_pylist(maps_as_pydicts="strict"):
            try:
                out.append(None if v is None else serde.serialize(v))
            except Exception as exc:  # noqa: BLE001 - re-raised naming the column and the value
                raise InvalidArgumentError(
                    f"{what}: {v!r} cannot be written with {serde!r}: {exc}. Give the column as the serde reads "
                    "it, or as bytes.") from exc
        return pa.array(out, type=pa.binary())

    return apply(col)
