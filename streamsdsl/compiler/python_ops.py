"""Stateless Python steps, run vectorized: Arrow record batches in, Arrow record batches out.

Each step is a function ``(key, value) -> list of (key, value)`` on plain Python values; the
runner decodes the key/value cells of a batch, applies the step row by row, encodes the
results, and appends the result's position to `OUTPUT_POSITION` where one record can become
several.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Iterator

from pyspark.sql import DataFrame
from pyspark.sql.types import StructField, StructType, _parse_datatype_string

from streamsdsl.compiler.columns import OUTPUT_POSITION, SOURCE_POSITION
from streamsdsl.compiler.frame import Frame, KeyCodec
from streamsdsl.errors import UserFunctionError
from streamsdsl.operators.functions import result_error as record_result_error
from streamsdsl.values.serdes import PlanSerde

RowFn = Callable[[Any, Any], Iterable[tuple[Any, Any]]]


def result_error(processor: str, function: str, exc: BaseException, key: str, position: int | None) -> Exception:
    """The error (to raise in a worker) for a user function's result its serde cannot hold."""
    return record_result_error(processor, function, exc, key, position).in_worker()


def _schema_with(df: DataFrame, key_type: str, value_type: str) -> StructType:
    fields = []
    for f in df.schema.fields:
        if f.name == "key":
            fields.append(StructField("key", _parse_datatype_string(key_type), True))
        elif f.name == "value":
            fields.append(StructField("value", _parse_datatype_string(value_type), True))
        else:
            fields.append(f)
    return StructType(fields)


def apply_python(
    frame: Frame,
    processor: str,
    fn: RowFn,
    *,
    out_key: KeyCodec | None = None,
    out_value: PlanSerde | None = None,
    multi: bool = False,
    function: str = "user function",
) -> Frame:
    """Apply ``fn`` to every data row of ``frame``.

    ``out_key`` / ``out_value`` give the new encodings when the step changes the key / value
    (``None``: the cell is passed through unchanged). ``multi`` marks steps that may emit
    several records per input (their position is appended to `OUTPUT_POSITION`). ``function``
    names the user function in errors (e.g. "predicate").
    """
    in_key, in_value = frame.key, frame.value
    key_codec = out_key or in_key
    value_serde = out_value or in_value
    schema = _schema_with(frame.df, key_codec.spark_type, value_serde.spark_type)
    change_key, change_value = out_key is not None, out_value is not None

    def run(batches: Iterator[Any]) -> Iterator[Any]:
        import pyarrow as pa
        from pyspark.sql.pandas.types import to_arrow_schema

        arrow_schema = to_arrow_schema(schema)
        for batch in batches:
            out: list[dict[str, Any]] = []
            for row in batch.to_pylist():
                k = in_key.from_cell(row["key"])
                v = in_value.from_internal(row["value"])
                try:
                    results = list(fn(k, v))
                except Exception as exc:  # noqa: BLE001 - re-raised with the processor and the record
                    raise UserFunctionError.of(processor, function, exc, k, row[SOURCE_POSITION]).in_worker() from exc
                for i, (nk, nv) in enumerate(results):
                    new = dict(row)
                    try:
                        if change_key:
                            new["key"] = key_codec.to_cell(nk)
                        if change_value:
                            new["value"] = value_serde.to_internal(nv)
                    except Exception as exc:  # noqa: BLE001 - a result its serde cannot hold
                        raise result_error(processor, function, exc, repr(k), row[SOURCE_POSITION]) from exc
                    if multi:
                        new[OUTPUT_POSITION] = [*(row[OUTPUT_POSITION] or []), i]
                    out.append(new)
            yield pa.RecordBatch.from_pylist(out, schema=arrow_schema)

    return frame.with_df(frame.df.mapInArrow(run, schema), key=key_codec, value=value_serde)
