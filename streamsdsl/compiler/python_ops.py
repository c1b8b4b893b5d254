"""Stateless Python steps, run vectorized: Arrow record batches in, Arrow record batches out.

A step that gives one record per record (``map``, ``map_values``, ``select_key``, a table's
``filter`` / ``map_values``) or keeps or drops it (``filter``, a branch) runs as an Arrow UDF
(`map_python`, `filter_python`): only the key, the value and the source position travel to the
Python worker, and only the changed cells back. A step that may give several records or runs an
action (``flat_map``, ``peek``, ``foreach``) is a function ``(key, value) -> list of (key,
value)`` run through ``mapInArrow`` (`apply_python`): the key and value columns decoded, the
other columns kept as Arrow arrays and taken by row index, and the result's position appended
to `OUTPUT_POSITION` where one record can become several.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Iterator

import pyarrow as pa
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import StructField, StructType, _parse_datatype_string

from streamsdsl.compiler.arrow_cells import python_values
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


def _position(batch: Any, row: int) -> int | None:
    """The `SOURCE_POSITION` of a batch's row, for an error."""
    position: int | None = batch.column(SOURCE_POSITION)[row].as_py()
    return position


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
        key_at, value_at = arrow_schema.get_field_index("key"), arrow_schema.get_field_index("value")
        output_at = arrow_schema.get_field_index(OUTPUT_POSITION)
        for batch in batches:
            # column by column: only the key and value cells become Python values; the other
            # columns stay Arrow arrays, taken by row index when a step drops or repeats records
            keys, values = batch.column(key_at).to_pylist(), batch.column(value_at).to_pylist()
            rows: list[int] = []
            new_keys: list[Any] = []
            new_values: list[Any] = []
            sub: list[int] = []
            for i, (cell, internal) in enumerate(zip(keys, values)):
                k = in_key.from_cell(cell)
                v = in_value.from_internal(internal)
                try:
                    results = list(fn(k, v))
                except Exception as exc:  # noqa: BLE001 - re-raised with the processor and the record
                    raise UserFunctionError.of(processor, function, exc, k, _position(batch, i)).in_worker() \
                        from exc
                for j, (nk, nv) in enumerate(results):
                    try:
                        if change_key:
                            new_keys.append(key_codec.to_cell(nk))
                        if change_value:
                            new_values.append(value_serde.to_internal(nv))
                    except Exception as exc:  # noqa: BLE001 - a result its serde cannot hold
                        raise result_error(processor, function, exc, repr(k), _position(batch, i)) from exc
                    rows.append(i)
                    sub.append(j)
            if len(rows) != batch.num_rows or multi:
                batch = batch.take(pa.array(rows, type=pa.int64()))
            columns = list(batch.columns)
            if change_key:
                columns[key_at] = pa.array(new_keys, type=arrow_schema.field(key_at).type)
            if change_value:
                columns[value_at] = pa.array(new_values, type=arrow_schema.field(value_at).type)
            if multi:
                columns[output_at] = pa.array([[*(before or []), j] for before, j in
                                               zip(columns[output_at].to_pylist(), sub)],
                                              type=arrow_schema.field(output_at).type)
            yield pa.RecordBatch.from_arrays(columns, schema=arrow_schema)

    return frame.with_df(frame.df.mapInArrow(run, schema), key=key_codec, value=value_serde)


PairFn = Callable[[Any, Any], tuple[Any, Any]]


def _record_udf(frame: Frame, processor: str, function: str, fn: Callable[[Any, Any], Any], spark_type: str,
                encode: Callable[[Any], Any]) -> Column:
    """``encode(fn(key, value))`` per record as a column: an Arrow UDF over the key, the value and
    the position (the other columns stay in the JVM), the same error model as `apply_python`.

    Not deterministic for Spark: the optimizer must neither push a later step's filter below the
    call nor prune a result no later step reads (Kafka Streams calls the function for every
    record that reaches the step, and its error or side effect happens)."""
    from pyspark.sql.functions import arrow_udf
    from pyspark.sql.pandas.types import to_arrow_type

    in_key, in_value = frame.key, frame.value
    arrow_type = to_arrow_type(_parse_datatype_string(spark_type))

    @arrow_udf(spark_type)  # type: ignore[misc]
    def call(keys_col: pa.Array, values_col: pa.Array, positions_col: pa.Array) -> pa.Array:
        out: list[Any] = []
        keys = python_values(in_key.serde, keys_col) if not in_key.windowed else \
            [in_key.from_cell(cell) for cell in keys_col.to_pylist()]
        for i, (k, v) in enumerate(zip(keys, python_values(in_value, values_col))):
            try:
                result = fn(k, v)
            except Exception as exc:  # noqa: BLE001 - re-raised with the processor and the record
                raise UserFunctionError.of(processor, function, exc, k, positions_col[i].as_py()).in_worker() \
                    from exc
            try:
                out.append(encode(result))
            except Exception as exc:  # noqa: BLE001 - a result its serde cannot hold
                raise result_error(processor, function, exc, repr(k), positions_col[i].as_py()) from exc
        return pa.array(out, type=arrow_type)

    column: Column = call.asNondeterministic()(F.col("key"), F.col("value"), F.col(SOURCE_POSITION))
    return column


def map_python(
    frame: Frame,
    processor: str,
    fn: PairFn,
    *,
    out_key: KeyCodec | None = None,
    out_value: PlanSerde | None = None,
    function: str = "user function",
) -> Frame:
    """Apply ``fn``, one ``(key, value)`` result per record, to every data row of ``frame``.

    An Arrow UDF (`_record_udf`): only the key, the value and the position travel to the Python
    worker, and only the changed cells (``out_key`` / ``out_value`` not ``None``; both as a
    struct) come back; the other columns stay in the JVM, in their rows. Where a step may drop or
    repeat records, `apply_python` (every column through ``mapInArrow``) runs it.
    """
    key_codec, value_serde = out_key or frame.key, out_value or frame.value
    change_key, change_value = out_key is not None, out_value is not None
    changed = [(name, t) for name, t, change in (("key", key_codec.spark_type, change_key),
                                                 ("value", value_serde.spark_type, change_value)) if change]
    spark_type = changed[0][1] if len(changed) == 1 else f"struct<{','.join(f'{n}:{t}' for n, t in changed)}>"

    def encode(pair: tuple[Any, Any]) -> Any:
        nk, nv = pair
        if change_key and change_value:
            return {"key": key_codec.to_cell(nk), "value": value_serde.to_internal(nv)}
        return key_codec.to_cell(nk) if change_key else value_serde.to_internal(nv)

    result = _record_udf(frame, processor, function, fn, spark_type, encode)
    if change_key and change_value:
        cells = "_mapped"
        df = frame.df.withColumn(cells, result)
        df = df.select(*[F.col(cells).getField(c).alias(c) if c in ("key", "value") else F.col(c)
                         for c in frame.df.columns])
    else:
        df = frame.df.withColumn("key" if change_key else "value", result)
    return frame.with_df(df, key=key_codec, value=value_serde)


def filter_python(frame: Frame, processor: str, keep: Callable[[Any, Any], Any], *,
                  function: str = "predicate") -> Frame:
    """Keep the data rows of ``frame`` for which ``keep(key, value)`` is true: an Arrow UDF of
    booleans (`_record_udf`), then Spark's filter."""
    kept = _record_udf(frame, processor, function, lambda k, v: bool(keep(k, v)), "boolean", lambda b: b)
    return frame.with_df(frame.df.filter(kept))
