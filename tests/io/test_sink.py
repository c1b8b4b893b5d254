"""The sink's input schema check (`streamsdsl.io.sink.validate_sink_schema`): pyspark types, no session."""

from __future__ import annotations

import pytest
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from streamsdsl.io import KafkaSinkOptionError
from streamsdsl.io.sink import validate_sink_schema


def _schema(**columns: object) -> StructType:
    return StructType([StructField(name, dt, True) for name, dt in columns.items()])  # type: ignore[arg-type]


def _rejection(**columns: object) -> tuple[object, ...]:
    with pytest.raises(KafkaSinkOptionError) as info:
        validate_sink_schema(_schema(**columns))
    return info.value.args


HEADERS = ArrayType(StructType([StructField("key", StringType()), StructField("value", BinaryType())]))


class TestSinkSchema:
    """Only key, value, timestamp and headers, with usable types; value is required."""

    def test_sink_rejects_unknown_columns(self) -> None:
        """The sink takes only key, value, timestamp, headers."""
        assert _rejection(value=BinaryType(), topic=StringType()) == (
            "the streamsdsl-kafka sink takes the columns key, value, timestamp, headers "
            "(streamsdsl.records.RAW_SINK_DDL); drop or rename 'topic'.",
        )

    def test_value_is_required(self) -> None:
        """A schema without ``value`` is rejected."""
        assert _rejection(key=BinaryType()) == (
            "the streamsdsl-kafka sink needs a 'value' column (binary or string; null = tombstone).",
        )

    def test_wrong_column_type(self) -> None:
        """A column of the wrong type is named with the accepted types and a cast."""
        assert _rejection(value=BinaryType(), timestamp=IntegerType()) == (
            "column 'timestamp' of the streamsdsl-kafka sink must be long (epoch milliseconds) or timestamp "
            "(got int); cast it, e.g. col('timestamp').cast('binary').",
        )

    def test_wrong_headers_type(self) -> None:
        """Headers must be an array of ``struct<key:string,value:binary>``."""
        assert _rejection(value=BinaryType(), headers=ArrayType(StringType())) == (
            "column 'headers' of the streamsdsl-kafka sink must be array<struct<key:string,value:binary>> "
            "(got array<string>); cast it, e.g. col('headers').cast('binary').",
        )

    @pytest.mark.parametrize(
        "schema",
        [
            _schema(key=BinaryType(), value=BinaryType(), timestamp=LongType(), headers=HEADERS),
            _schema(key=StringType(), value=StringType(), timestamp=TimestampType()),
            _schema(value=BinaryType()),
        ],
        ids=["raw-sink-ddl", "strings-and-timestamp", "value-only"],
    )
    def test_accepted_schemas(self, schema: StructType) -> None:
        """RAW_SINK_DDL, string key/value with a timestamp column, and a lone value pass."""
        validate_sink_schema(schema)
