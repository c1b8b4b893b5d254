"""Joins on the JVM operator: the join kernel's Java port finds the matched pairs, the joiner runs
afterwards over them, a batch at a time.

A join the JVM operator runs is a `JvmJoin`: which join (``stream_table``, ``stream_stream``,
``table_table``: the Java side's ``JoinOperator`` picks its processor by it), its kind (inner,
left, outer) and what the join kind needs besides (``params``: windows, grace, ...). The operator
reads the same input as the Python operator (both sides' records in one frame: ``key``, ``value``
a struct of the left and the right input's value, `INPUT_INDEX` 0 / 1, the positions) and
emits the **matched pairs** (`pair_schema`): rows of `OPERATOR_OUTPUT_FIELDS` whose ``value`` is a
struct of the left value and the right value (`PAIR_FIELDS`; a side without a match null; a null
``value``: a tombstone of the join's result), with Kafka's output key, timestamp and order
(`SOURCE_POSITION` / `OUTPUT_POSITION` of the record that caused it), drop events and, in the
driver's replay, the key's carried state (`CARRY`), as every operator.

`run_jvm_join` runs it (the replay's carried state, the drops counted, the metric rows split
off); `apply_joiner` then makes the joined values: a built-in joiner
(`streamsdsl.dsl.joiners.Joiners`) as Spark columns, a Python joiner once per Arrow batch (an
Arrow UDF of the key, the two values and the position), each record's failure reported as the
Python operator reports it (`streamsdsl.errors.UserFunctionError`: the processor, the record,
the cause).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import attrs
import pyarrow as pa
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import StructField, StructType, TimestampType, _parse_datatype_string

from streamsdsl.compiler.carry import carry_out, with_carried_states
from streamsdsl.compiler.columns import CARRIED_STATE, DROPPED, EVENT_METRIC, EVENT_TIME_OUT, EVENT_VALUE
from streamsdsl.compiler.columns import FINAL_KEY_ORDER, FRAME_COLUMNS, HEADERS_TYPE, INPUT_INDEX
from streamsdsl.compiler.columns import OPERATOR_OUTPUT_FIELDS, OUTPUT_POSITION, PAIR_FIELDS, POSITION_TYPE
from streamsdsl.compiler.columns import SOURCE_POSITION
from streamsdsl.compiler.event_time import stateful_downstream
from streamsdsl.compiler.jvm_operator import CONTINUES_ON_PYTHON, OPERATOR_HINT, _jar_column
from streamsdsl.compiler.local_rows import is_connect
from streamsdsl.errors import UserFunctionError
from streamsdsl.operators.functions import result_error
from streamsdsl.semantics.joiners import JoinerWithKey
from streamsdsl.values.serdes import CustomSerde, IntegerSerde, JsonSerde, LongSerde, PlanSerde, StringSerde

__all__ = ["JOIN_CLASS", "JvmJoin", "apply_joiner", "apply_jvm_join", "joiner_label", "null_json_values", "pair_schema",
           "run_jvm_join"]

#: The Java entry point of the joins (``jvm/src/main/java/io/streamsdsl/jvm/JoinOperator.java``).
JOIN_CLASS = "io.streamsdsl.jvm.JoinOperator"

#: The jar's ``Joiners.merge()`` of two JSON texts (``jvm/src/main/java/io/streamsdsl/jvm/JsonJoin.java``).
JSON_JOIN_CLASS = "io.streamsdsl.jvm.JsonJoin"

_LEFT, _RIGHT = PAIR_FIELDS


@attrs.frozen
class JvmJoin:
    """A join in the JVM operator's terms: ``join`` names the Java processor (``stream_table``,
    ...), ``kind`` is ``inner``, ``left`` or ``outer``, ``params`` what the join kind needs besides
    (JSON-able: windows, grace, ...). ``label`` is how ``explain()`` names it."""

    join: str
    kind: str
    params: Mapping[str, Any] = attrs.field(factory=dict)

    @property
    def label(self) -> str:
        return f"{self.join.replace('_', '-')} join"


def pair_schema(key_type: str, left_type: str, right_type: str, *, state_type: str | None = None,
                event_time_out: bool = False) -> StructType:
    """The matched pairs' rows (`OPERATOR_OUTPUT_FIELDS`, ``value`` the pair); with
    ``state_type`` (the driver's replay) `CARRIED_STATE` of that type last, and
    `EVENT_TIME_OUT` after all when a stateful operator is below (streaming)."""
    types = {"key": key_type, "value": f"struct<{_LEFT}:{left_type},{_RIGHT}:{right_type}>", "timestamp": "bigint",
             "headers": HEADERS_TYPE, SOURCE_POSITION: "bigint", OUTPUT_POSITION: POSITION_TYPE,
             FINAL_KEY_ORDER: "string", "_event_metric": "string", "_event_value": "double"}
    ddl = ", ".join(f"{f} {types[f]}" for f in OPERATOR_OUTPUT_FIELDS)
    if state_type is not None:
        ddl += f", {CARRIED_STATE} {state_type}"
    schema = _parse_datatype_string(ddl)
    if event_time_out:
        schema = StructType([*schema.fields, StructField(EVENT_TIME_OUT, TimestampType())])
    return schema


def _not_json_null(cell: Column) -> Column:
    """A JSON text cell, null where the text is JSON's ``null``."""
    is_null = (F.length(cell) < 64) & cell.rlike(r"^[ \t\n\r]*null[ \t\n\r]*$")
    return F.when(is_null, F.lit(None)).otherwise(cell)


def null_json_values(inp: DataFrame, left: PlanSerde, right: PlanSerde, *, key: PlanSerde | None = None) -> DataFrame:
    """The join's input with a JSON ``null`` value (the text of a JSON value that is null) made a
    null cell on each JSON side (a field of the value struct after the two sides' is kept as it
    is): the Python operator decodes it to ``None``, a null value (a
    dropped stream record, a table's tombstone); the JVM operator sees only the cell. With a
    JSON ``key`` serde, a JSON ``null`` key too (a null key: Kafka's rules for it)."""
    pair = F.col("value")
    names = inp.schema["value"].dataType.fieldNames()  # type: ignore[attr-defined]
    if isinstance(key, JsonSerde):
        inp = inp.withColumn("key", _not_json_null(F.col("key")))
    if not any(isinstance(serde, JsonSerde) for serde in (left, right)):
        return inp
    fields = []
    for name, serde in zip(names, (left, right)):
        cell = pair.getField(name)
        fields.append((_not_json_null(cell) if isinstance(serde, JsonSerde) else cell).alias(name))
    fields += [pair.getField(name).alias(name) for name in names[2:]]  # a join kind's own fields, unchanged
    return inp.withColumn("value", F.when(pair.isNotNull(), F.struct(*fields)))


def apply_jvm_join(inp: DataFrame, node: str, join: JvmJoin, schema: StructType, *, replay: bool,
                   state_name: str, state_type: str | None = None) -> DataFrame:
    """The JVM join operator over ``inp`` (the join's input), its rows of ``schema``
    (`pair_schema`): through py4j on a classic session, as the hint the jar's SQL extension
    replaces on a Spark Connect session. `EVENT_TIME_OUT` is dropped after it when ``schema``
    has it (it has named the rows' event time for the operators below)."""
    event_time_out = EVENT_TIME_OUT in schema.fieldNames()
    spec = {"node": node, "state_name": state_name, "replay": replay, "event_time_out": event_time_out,
            "join": join.join, "kind": join.kind, "params": dict(join.params),
            "state_schema": None if state_type is None else _parse_datatype_string(state_type).json()}
    if spec["state_schema"] is None:
        del spec["state_schema"]
    spark = inp.sparkSession
    if is_connect(spark):
        out = inp.hint(OPERATOR_HINT, json.dumps(spec), schema.json())
    else:
        out = DataFrame(getattr(spark._jvm, JOIN_CLASS).apply(inp._jdf, json.dumps(spec), schema.json()), spark)
    return out.drop(EVENT_TIME_OUT) if event_time_out else out


def run_jvm_join(lowering: Any, inp: DataFrame, node: str, join: JvmJoin, *, key_type: str, left_type: str,
                 right_type: str, state_type: str, state_name: str, carried_side: int,
                 stateful_below: bool | None = None, out_key_type: str | None = None,
                 carried_key: Column | None = None, stored_type: str | None = None) -> DataFrame:
    """The matched pairs of the join ``node`` (frame columns, ``value`` the pair): the operator
    over ``inp``, in the driver's replay with the key states carried from the previous run (on
    input side ``carried_side``) and handed to the next; its drops counted (and logged) at the
    node's ``input`` point, as the Python operator's.

    ``out_key_type``: the type of the output's keys when they are not the operator's (a
    global-table join outputs the stream's keys); then ``carried_key`` is the Column of a carry
    row that holds the operator's key. ``stored_type``: the streaming state row's type when it
    is not the carried state's (``state_type``)."""
    if lowering.continues(node):  # a lowering's bug: its state would be lost
        raise AssertionError(f"{node}: the JVM join operator takes no initial state; {CONTINUES_ON_PYTHON}")
    from streamsdsl.compiler.lowering import PlanMode

    replay = lowering.mode is PlanMode.REPLAY
    below = stateful_downstream(lowering.topology, node) if stateful_below is None else stateful_below
    if replay:
        inp = with_carried_states(lowering, inp, node, key_type, state_type, **{INPUT_INDEX: F.lit(carried_side)})
    schema = pair_schema(out_key_type or key_type, left_type, right_type, state_type=state_type if replay else None,
                         event_time_out=not replay and below)
    out = apply_jvm_join(inp, node, join, schema, replay=replay, state_name=state_name,
                         state_type=stored_type or state_type)
    if replay:
        out = carry_out(lowering, out, node, F.col("key") if carried_key is None else carried_key, key_type,
                        state_type)
    metric = F.col(EVENT_METRIC)
    out = lowering.observe(out, node, "input", dropped=F.when(metric == DROPPED, F.col(EVENT_VALUE)))
    return out.filter(metric.isNull()).select(*FRAME_COLUMNS)


def joiner_label(joiner: Any, node: str, *, key: PlanSerde, left: PlanSerde, right: PlanSerde,
                 value_out: PlanSerde) -> str:
    """How ``explain()`` names the joiner's run after the JVM operator (`apply_joiner`)."""
    from streamsdsl.dsl.joiners import BuiltinJoiner

    if isinstance(joiner, BuiltinJoiner):
        if builtin_column(joiner.op, node, key, left, right, value_out) is not None:
            return f"{joiner.name} as Spark columns"
        return f"{joiner.name} per Arrow batch (values Spark cannot write as Python does)"
    return "Python joiner per Arrow batch"


def apply_joiner(pairs: DataFrame, node: str, joiner: Any, *, key: PlanSerde, left: PlanSerde, right: PlanSerde,
                 value_out: PlanSerde) -> DataFrame:
    """The joined records of ``pairs`` (`run_jvm_join`'s rows): ``value`` the joiner's result of
    the pair, written with ``value_out``; a tombstone (a null pair) stays one. ``joiner`` is the
    join's user function as the kernels take it (a function of the two values, or a
    `JoinerWithKey`); a built-in joiner (`streamsdsl.dsl.joiners.BuiltinJoiner`) is Spark
    columns, with no Python at all."""
    from streamsdsl.dsl.joiners import BuiltinJoiner

    if isinstance(joiner, BuiltinJoiner):
        column = builtin_column(joiner.op, node, key, left, right, value_out)
        if column is not None:
            return pairs.withColumn("value", F.when(F.col("value").isNotNull(), column))
    return _python_joiner(pairs, node, joiner, key, left, right, value_out)


#: The serdes whose column a JSON text is made of by Spark exactly as ``json_dumps`` writes its value.
_JSON_TEXT = (JsonSerde, StringSerde, LongSerde, IntegerSerde)


def _json_text(cell: Column, serde: PlanSerde) -> Column:
    """The JSON text of a value cell (``null`` for a null cell): a JSON value's own text, Spark's
    ``to_json`` of a string or an integer, spelled as ``json_dumps`` writes it."""
    if isinstance(serde, JsonSerde):
        return F.coalesce(cell, F.lit("null"))
    spelled = F.regexp_extract(F.to_json(F.array(cell)), r"^\[(.*)\]$", 1)
    if not isinstance(serde, StringSerde):
        return spelled
    # Spark's JSON writer spells a control character's escape in upper case (\u001F), json_dumps in
    # lower case: the escapes with a letter (those not preceded by an escaped backslash) lowered
    for hex_digits in ("000B", "000E", "000F", "001A", "001B", "001C", "001D", "001E", "001F"):
        spelled = F.regexp_replace(spelled, rf"(?<!\\)((?:\\\\)*)\\u{hex_digits}", rf"$1\\u{hex_digits.lower()}")
    # a string without a character JSON escapes is its text within quotes (no JSON writer per row)
    return F.when(~cell.rlike(r'[\x00-\x1f"\\]'), F.concat(F.lit('"'), cell, F.lit('"'))).otherwise(spelled)


def _as(cell: Column, serde: PlanSerde, value_out: PlanSerde) -> Column | None:
    """A value cell written with ``value_out`` (its Python value unchanged), or None when Spark
    cannot write it exactly as the Python joiner would."""
    if type(serde) is type(value_out) and not isinstance(serde, CustomSerde):
        return cell
    if isinstance(value_out, JsonSerde) and isinstance(serde, _JSON_TEXT):
        return F.when(cell.isNotNull(), _json_text(cell, serde))
    return None


def builtin_column(op: str, node: str, key: PlanSerde, left: PlanSerde, right: PlanSerde,
                   value_out: PlanSerde) -> Column | None:
    """The built-in joiner ``op`` (`streamsdsl.dsl.joiners.BuiltinJoiner`) of the pair column
    ``value`` as a Spark column written with ``value_out``, or None where Spark cannot make
    exactly the Python joiner's result (a double's text, bytes, a user's serde; ``merge``
    without the jar): the Python joiner runs then."""
    lcell, rcell = F.col("value").getField(_LEFT), F.col("value").getField(_RIGHT)
    if op == "left":
        return _as(lcell, left, value_out)
    if op == "right":
        return _as(rcell, right, value_out)
    if not isinstance(value_out, JsonSerde) or not isinstance(left, _JSON_TEXT) or not isinstance(right, _JSON_TEXT):
        return None
    if op == "pair":
        return F.concat(F.lit("["), _json_text(lcell, left), F.lit(","), _json_text(rcell, right), F.lit("]"))
    if not isinstance(left, JsonSerde) or not isinstance(right, JsonSerde) or not isinstance(key, _JSON_TEXT):
        return None  # merge: two JSON objects; a key the error can name
    merged = _jar_column(JSON_JOIN_CLASS, "merge", lcell, rcell)
    which = _jar_column(JSON_JOIN_CLASS, "notObject", lcell, rcell)
    if merged is None or which is None:
        return None
    key_json = F.concat(F.lit("["), F.col("key"), F.lit("]")) if isinstance(key, JsonSerde) \
        else F.to_json(F.array(F.col("key")))
    error = _jar_column(JSON_JOIN_CLASS, "mergeError", F.lit(node), which, key_json,
                      F.col(SOURCE_POSITION).cast("string"))
    return F.when(which.isNotNull(), F.raise_error(error)).otherwise(merged)  # type: ignore[arg-type]


def _python_joiner(pairs: DataFrame, node: str, joiner: Any, key: PlanSerde, left: PlanSerde, right: PlanSerde,
                   value_out: PlanSerde) -> DataFrame:
    """``joiner`` over the pairs, one Python call per Arrow batch (an Arrow UDF: only the key, the
    two values and the position travel to the Python worker, and the new ``value`` back; the
    other columns stay in the JVM): the values decoded, the joiner called per pair in the
    batch's order, the results encoded."""
    from pyspark.sql.functions import arrow_udf
    from pyspark.sql.pandas.types import to_arrow_type

    with_key = isinstance(joiner, JoinerWithKey)
    fn = joiner.fn if with_key else joiner
    arrow_type = to_arrow_type(_parse_datatype_string(value_out.spark_type))

    @arrow_udf(value_out.spark_type)  # type: ignore[misc]
    def join(present_col: pa.Array, keys_col: pa.Array, lefts_col: pa.Array, rights_col: pa.Array,
             positions_col: pa.Array) -> pa.Array:
        present, keys, positions = present_col.to_pylist(), keys_col.to_pylist(), positions_col.to_pylist()
        lefts, rights = lefts_col.to_pylist(), rights_col.to_pylist()
        out: list[Any] = []
        for i, there in enumerate(present):
            if not there:
                out.append(None)
                continue
            try:  # the key is decoded for a joiner that takes it, else only for an error
                result = fn(key.from_internal(keys[i]), left.from_internal(lefts[i]),
                            right.from_internal(rights[i])) if with_key \
                    else fn(left.from_internal(lefts[i]), right.from_internal(rights[i]))
            except Exception as exc:  # noqa: BLE001 - re-raised with the processor and the record
                k = key.from_internal(keys[i])
                raise UserFunctionError.of(node, "joiner", exc, k, positions[i]).in_worker() from exc
            try:
                out.append(value_out.to_internal(result))
            except Exception as exc:  # noqa: BLE001 - a result its serde cannot hold
                k = key.from_internal(keys[i])
                raise result_error(node, "joiner", exc, repr(k), positions[i]).in_worker() from exc
        return pa.array(out, type=arrow_type)

    pair = F.col("value")
    return pairs.withColumn("value", join(pair.isNotNull(), F.col("key"), pair.getField(_LEFT), pair.getField(_RIGHT),
                                          F.col(SOURCE_POSITION)))
