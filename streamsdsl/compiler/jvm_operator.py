"""The JVM operator: built-in aggregations on a Java ``StatefulProcessor`` (``jvm/src``), applied
through py4j (on Spark Connect: the jar's SQL extension), producing the same rows as the Python
operator (`streamsdsl.compiler.processors`).

`builtin_form` recognises an aggregation the JVM operator can run (``count()``,
``reduce(operator.add | max | min)`` on Long / Integer / Double values, the
`streamsdsl.dsl.aggregations.Aggregations` helpers, and cogroups of those helpers) and describes
it as a `JvmAggregate`: per input the aggregator op and the Spark column of its number (a JSON
field is extracted here, in the plan). `OperatorChoices.choose` applies the compile's
``streamsdsl.operator`` setting (`streamsdsl.compiler.plan.CompileOptions`) and the session's
ability to load the jar, and records the decision as data (`OperatorChoice`: a `Backend` and a
reason), which ``explain()``, the log and the fingerprint read. `apply_jvm` runs the operator
on the prepared input: through py4j on a classic session, as a hint the jar's SQL extension
(`CONNECT_EXTENSION`) replaces on a Spark Connect session.
"""

from __future__ import annotations

import builtins
import enum
import json
import logging
import operator
from collections.abc import Mapping
from typing import Any

import attrs
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import DoubleType, LongType, StructField, StructType, TimestampType

from streamsdsl import ir
from streamsdsl.compiler.columns import EVENT_TIME_OUT, JVM_PROTOCOL, NUMBER
from streamsdsl.compiler.local_rows import is_connect
from streamsdsl.dsl.aggregations import BuiltinAggregator, BuiltinInitializer, BuiltinMerger
from streamsdsl.values.serdes import (
    BytesSerde,
    DoubleSerde,
    IntegerSerde,
    JsonSerde,
    LongSerde,
    PlanSerde,
    StringSerde,
)
from streamsdsl.jvm import CheckpointOperatorError, JvmOperatorError, Operator, default_operator, jar_path

__all__ = ["Backend", "JvmAggregate", "OperatorChoice", "OperatorChoices", "apply_jvm", "builtin_form",
           "check_checkpoint"]

log = logging.getLogger("streamsdsl")

#: The Java entry point (``jvm/src/main/java/io/streamsdsl/jvm/AggregateOperator.java``).
JAVA_CLASS = "io.streamsdsl.jvm.AggregateOperator"
#: The jar's JSON validity check of a source's bytes (`json_check`).
JSON_CHECK_CLASS = "io.streamsdsl.jvm.JsonCheck"
#: The jar's builder of a source record's deserialization error (`deserialization_message`).
RECORD_ERRORS_CLASS = "io.streamsdsl.jvm.RecordErrors"
#: The jar's drop counter of a streaming plan's drop points (`drop_counter`).
DROP_COUNTER_CLASS = "io.streamsdsl.jvm.DropCounter"
#: The jar's Spark SQL extension, the JVM operator of Spark Connect sessions (``spark.sql.extensions``):
#: it replaces the hint `OPERATOR_HINT` by the operator and answers `PROTOCOL_FUNCTION`.
CONNECT_EXTENSION = "io.streamsdsl.jvm.StreamsDslExtensions"
#: The hint ``apply_jvm`` puts on the operator input of a Connect session (the spec and output schema JSON).
OPERATOR_HINT = "streamsdsl_operator"
#: The extension's SQL function returning the jar's contract version.
PROTOCOL_FUNCTION = "streamsdsl_jvm_protocol"
#: The Python-JVM contract version the Java side must report (`streamsdsl.compiler.columns.JVM_CONTRACT`).
PROTOCOL = JVM_PROTOCOL

_available: dict[int, str | None] = {}
_warned: set[str] = set()

_REDUCERS = {operator.add: "RSUM", builtins.max: "RMAX", builtins.min: "RMIN"}
_KEY_KINDS = {StringSerde: "string", LongSerde: "long", IntegerSerde: "int", DoubleSerde: "double",
              BytesSerde: "bytes", JsonSerde: "json"}
_NUMERIC = (LongSerde, IntegerSerde, DoubleSerde)
_MERGE_OF = {"count": "ADD", "sum": "ADD", "min": "MIN", "max": "MAX"}


class Backend(enum.Enum):
    """What runs a stateful node."""

    JVM = "jvm"
    PYTHON = "python"
    NATIVE = "native"


#: Why the joins run on the Python operator.
JOINS_ON_PYTHON = "joins run on the Python operator; the JVM operator has no port of this join yet"
#: Why a join continuing a backfill runs on the Python operator.
CONTINUES_ON_PYTHON = ("continuing a backfill: the Python operator's joins start from its state (the JVM join "
                       "operator takes no initial state)")

_LABELS = {Backend.JVM: "JVM operator", Backend.PYTHON: "Python operator", Backend.NATIVE: "Spark native aggregation"}


@attrs.frozen
class OperatorChoice:
    """Which operator runs one stateful node, and why (``str()``: how ``explain()`` and the log
    show it, e.g. ``JVM operator (count, session windows)``)."""

    backend: Backend
    reason: str = ""

    def __str__(self) -> str:
        label = _LABELS[self.backend]
        return f"{label} ({self.reason})" if self.reason else label


class OperatorChoices:
    """The operator choices of one compile: the ``streamsdsl.operator`` setting it follows
    (``None``: `streamsdsl.jvm.default_operator`) and what each stateful node got (`by_node`)."""

    def __init__(self, operator: Operator | str | None = None) -> None:
        self.operator = default_operator() if operator is None else Operator(operator)
        self.by_node: dict[str, OperatorChoice] = {}

    def record(self, node: str, backend: Backend, reason: str = "") -> None:
        """Note which operator runs ``node``."""
        self.by_node[node] = OperatorChoice(backend, reason)

    def forget(self, node: str) -> None:
        """``node``'s operator is not part of the plan (a suppress node runs the aggregation it
        follows in its place)."""
        self.by_node.pop(node, None)

    def choose(self, node: str, form: Any, spark: Any, kind: str) -> Any:
        """The form (a `JvmAggregate`, a `streamsdsl.compiler.jvm_joins.JvmJoin`: anything with a
        ``label``) to run ``node`` with on the JVM operator, or None for the Python operator (``form``
        a string: why the JVM operator cannot run it), following the ``streamsdsl.operator``
        setting; records the decision."""
        if isinstance(form, str):
            self.record(node, Backend.PYTHON, f"{kind}: {form}")
            return None
        if self.operator is Operator.PYTHON:
            self.record(node, Backend.PYTHON, f"{form.label}, {kind}; streamsdsl.operator=python")
            return None
        reason = _unavailable(spark)
        if reason is None:
            self.record(node, Backend.JVM, f"{form.label}, {kind}")
            return form
        if self.operator is Operator.JVM:
            raise JvmOperatorError(f"{node}: streamsdsl.operator is 'jvm' but the JVM operator cannot run: {reason}.")
        self.record(node, Backend.PYTHON, f"{form.label}, {kind}; the JVM operator is unavailable: {reason}")
        if reason not in _warned:
            _warned.add(reason)
            log.warning("streamsdsl: built-in aggregations run on the Python operator: the JVM operator is "
                        "unavailable (%s).", reason)
        return None


@attrs.frozen(eq=False)
class JvmAggregate:
    """An aggregation in the JVM operator's terms: per input the aggregator op (``COUNT``,
    ``SUM``, ``MIN``, ``MAX``, reduce's ``RSUM``/``RMIN``/``RMAX``) and its number column; the
    session merger op; whether it computes in doubles and starts from null; a label."""

    ops: tuple[str, ...]
    numbers: tuple[Column | None, ...]
    merge: str | None
    double: bool
    init_null: bool
    label: str


def _number_column(serde: PlanSerde, field: str | None, value_type: type) -> Column | None:
    """The Spark column of a helper's number: what `BuiltinAggregator.number` returns."""
    spark_type = "double" if value_type is float else "bigint"
    struct_type = DoubleType() if value_type is float else LongType()
    if field is not None:
        if isinstance(serde, JsonSerde):
            return F.from_json(F.col("value"), StructType([StructField(field, struct_type)])).getField(field)
        return F.lit(None).cast(spark_type)  # never a dict: never a number
    if isinstance(serde, JsonSerde):
        wrapped = F.concat(F.lit('{"v":'), F.col("value"), F.lit("}"))
        return F.from_json(wrapped, StructType([StructField("v", struct_type)])).getField("v")
    if isinstance(serde, DoubleSerde) and value_type is int:
        return F.lit(None).cast(spark_type)  # a float is not an int
    if isinstance(serde, _NUMERIC):
        return F.col("value").cast(spark_type)
    return F.lit(None).cast(spark_type)


def _fn(value: Any) -> Any:
    return value.fn if isinstance(value, ir.UserFn) else None


def _helper_input(aggregator: Any, serde: PlanSerde) -> tuple[str, Column | None, type] | str:
    if not isinstance(aggregator, BuiltinAggregator):
        return "a Python aggregator"
    if aggregator.field is None and not isinstance(serde, (*_NUMERIC, JsonSerde, StringSerde, BytesSerde)):
        return f"values of {serde!r}"
    if aggregator.field is not None and not isinstance(serde, (JsonSerde, StringSerde, BytesSerde, *_NUMERIC)):
        return f"values of {serde!r}"
    if aggregator.op == "count":
        return "COUNT", None, aggregator.value_type
    return aggregator.op.upper(), _number_column(serde, aggregator.field, aggregator.value_type), aggregator.value_type


def builtin_form(spec: ir.AggSpec | None, value_serdes: tuple[PlanSerde, ...], value_out: PlanSerde,
                 key_serde: PlanSerde, sessions: bool, *, cogroup: Any = None) -> JvmAggregate | str:
    """The aggregation as a `JvmAggregate`, or why the JVM operator cannot run it.

    ``spec`` is the node's aggregation (``None`` for a cogroup, given as the
    `ir.CogroupAggregateNode` ``cogroup``); ``value_serdes`` are its inputs' value serdes."""
    if type(key_serde) not in _KEY_KINDS:
        return f"keys of {key_serde!r}"
    if not isinstance(value_out, _NUMERIC):
        return f"an aggregate written with {value_out!r}"
    if cogroup is not None:
        init, merger = _fn(cogroup.initializer), _fn(cogroup.merger)
        if not isinstance(init, BuiltinInitializer):
            return "a Python initializer"
        parts = [_helper_input(_fn(a), s) for a, s in zip(cogroup.aggregators, value_serdes)]
        bad = next((p for p in parts if isinstance(p, str)), None)
        if bad is not None:
            return bad
        types = {p[2] for p in parts} | {init.value_type}  # type: ignore[index]
        if len(types) != 1:
            return "built-in aggregators of different value types"
        if sessions and not isinstance(merger, BuiltinMerger):
            return "a Python merger"
        double = types == {float}
        return _checked(JvmAggregate(
            tuple(p[0] for p in parts), tuple(p[1] for p in parts),  # type: ignore[index]
            _MERGE_OF[merger.op] if sessions else None, double, not init.zero,
            "cogroup of " + ", ".join(p[0].lower() for p in parts)), value_out)  # type: ignore[index]
    serde = value_serdes[0]
    if isinstance(spec, ir.CountAgg):
        return _checked(JvmAggregate(("COUNT",), (None,), "ADD" if sessions else None, False, False, "count"),
                        value_out)
    if isinstance(spec, ir.ReduceAgg):
        op = _REDUCERS.get(_fn(spec.reducer))  # type: ignore[call-overload]
        if op is None:
            return "a Python reducer"
        if not isinstance(serde, _NUMERIC) or value_out != serde:
            return f"reduce of {serde!r} values into {value_out!r}"
        double = isinstance(serde, DoubleSerde)
        column = F.col("value").cast("double" if double else "bigint")
        name = {"RSUM": "reduce(operator.add)", "RMAX": "reduce(max)", "RMIN": "reduce(min)"}[op]
        return _checked(JvmAggregate((op,), (column,), op if sessions else None, double, True, name), value_out)
    if isinstance(spec, ir.AggregateAgg):
        init, merger = _fn(spec.initializer), _fn(spec.merger)
        part = _helper_input(_fn(spec.aggregator), serde)
        if isinstance(part, str):
            return part
        if not isinstance(init, BuiltinInitializer) or init.value_type is not part[2]:
            return "a Python initializer"
        if sessions and not isinstance(merger, BuiltinMerger):
            return "a Python merger"
        label = f"Aggregations.{part[0].lower()}"
        return _checked(JvmAggregate((part[0],), (part[1],), _MERGE_OF[merger.op] if sessions else None,
                                     part[2] is float, not init.zero, label), value_out)
    return "a Python aggregation"


def _checked(form: JvmAggregate, value_out: PlanSerde) -> JvmAggregate | str:
    if form.double and not isinstance(value_out, DoubleSerde):
        return f"a float aggregate written with {value_out!r}"
    return form


def _unavailable(spark: Any) -> str | None:
    """Why ``spark`` cannot run the JVM operator (None: it can)."""
    if is_connect(spark):
        return _unavailable_over_connect(spark)
    key = id(spark.sparkContext._jsc)
    if key not in _available:
        try:
            protocol = getattr(spark._jvm, JAVA_CLASS).protocol()
            _available[key] = None if protocol == PROTOCOL else (
                f"the session loaded a jar of another streamsdsl version (protocol {protocol}, expected {PROTOCOL})")
        except Exception:  # noqa: BLE001 - py4j: the class is not on the classpath
            try:
                jar_path()
                _available[key] = ("the session did not load the jar: build it with streamsdsl.configure_spark(builder) "
                                   "or pass --jars \"$(streamsdsl jar-path)\"")
            except JvmOperatorError:
                _available[key] = "the jar is not built (no JDK 17 at install: see `python jvm/build.py`)"
    return _available[key]


def _unavailable_over_connect(spark: Any) -> str | None:
    """Why the Spark Connect session ``spark`` cannot run the JVM operator (None: it can): the
    server must load the jar's SQL extension (`CONNECT_EXTENSION`), which answers
    ``streamsdsl_jvm_protocol()`` with its contract version; asked once per server session."""
    key = f"connect:{spark.session_id}"
    if key not in _available:
        try:
            protocol = spark.sql(f"SELECT {PROTOCOL_FUNCTION}() AS protocol").head()[0]
            _available[key] = None if protocol == PROTOCOL else (
                f"the Spark Connect server loaded a jar of another streamsdsl version (protocol {protocol}, "
                f"expected {PROTOCOL})")
        except Exception as e:  # noqa: BLE001 - the function is unknown: the extension is not loaded
            if "UNRESOLVED_ROUTINE" not in str(e) and PROTOCOL_FUNCTION not in str(e):
                raise
            _available[key] = (
                "the Spark Connect server does not load streamsdsl's SQL extension: start it with "
                f"--jars \"$(streamsdsl jar-path)\" --conf spark.sql.extensions={CONNECT_EXTENSION} "
                "(docs/connect.md)")
    return _available[key]


def json_check(col: Column) -> Column | None:
    """The jar's JSON validity check of a bytes column (``io.streamsdsl.jvm.JsonCheck``): true for
    one RFC 8259 text in valid UTF-8, and for null. One pass over the bytes, where Spark's
    ``try_parse_json`` builds a Variant of every record. None when the active session has not
    loaded the jar (the caller falls back to ``try_parse_json``)."""
    return _jar_column(JSON_CHECK_CLASS, "valid", col)


def deserialization_message(processor: Column, cause: Column, position: Column, topic: Column, partition: Column,
                            offset: Column, key_json: Column, data: Column) -> Column | None:
    """The message of a source record's deserialization error, built by the jar in one call
    (``io.streamsdsl.jvm.RecordErrors``: the readable line and the payload
    `streamsdsl.errors.RecordError.find` reads; ``position``, ``partition`` and ``offset`` as
    decimal text, ``key_json`` and ``data`` may be null). None when the active session has not
    loaded the jar (the caller builds the same message from Spark expressions)."""
    return _jar_column(RECORD_ERRORS_CLASS, "deserializationMessage", processor, cause, position, topic, partition,
                       offset, key_json, data)


def _jar_column(owner: str, method: str, *cols: Column) -> Column | None:
    """``owner.method(cols...)``, a Column the jar builds; None without the jar."""
    from pyspark.sql import SparkSession
    from pyspark.sql.classic.column import Column as ClassicColumn

    spark = SparkSession.getActiveSession()
    if spark is None or not all(isinstance(c, ClassicColumn) for c in cols) or _unavailable(spark) is not None:
        return None
    return ClassicColumn(getattr(getattr(spark._jvm, owner), method)(*[c._jc for c in cols]))


def drop_counter(spark: Any, max_records: int) -> Any | None:
    """A new counter of one drop point (``io.streamsdsl.jvm.DropCounter``, registered with
    ``spark``'s context as an accumulator; at most ``max_records`` dropped records kept), or None
    when ``spark`` has not loaded the jar (the caller observes the point with ``observe``)."""
    if is_connect(spark) or _unavailable(spark) is not None:
        return None
    return getattr(spark._jvm, DROP_COUNTER_CLASS).create(spark.sparkContext._jsc.sc(), max_records)


def _key_kind(serde: PlanSerde) -> str:
    return _KEY_KINDS[type(serde)]


def _windowing_json(windowing: Any) -> dict[str, Any]:
    from streamsdsl.semantics.session import SessionWindowing
    from streamsdsl.semantics.sliding import SlidingWindowing
    from streamsdsl.semantics.timewindow import TimeWindowing

    if isinstance(windowing, SessionWindowing):
        return {"kind": "session", "gap": windowing.gap, "grace": windowing.grace, "cached": windowing.cached}
    if isinstance(windowing, TimeWindowing):
        return {"kind": "time", "size": windowing.size, "advance": windowing.advance, "grace": windowing.grace}
    if isinstance(windowing, SlidingWindowing):
        return {"kind": "sliding", "time_difference": windowing.time_difference, "grace": windowing.grace}
    return {"kind": "none"}


def apply_jvm(inp: DataFrame, config: Any, form: JvmAggregate, schema: StructType, *, replay: bool,
              event_time_out: bool = False, initial_state: DataFrame | None = None) -> DataFrame:
    """Run the JVM operator over ``inp`` (the operator input: `NUMBER` and the presence of the
    value in ``value``) and return its output rows (``schema``: the Python operator's). With
    ``event_time_out`` (streaming, a stateful operator below) it names its rows' event time as
    Spark's ``eventTimeColumnName`` (`streamsdsl.compiler.event_time`). ``initial_state``
    (streaming continuing a backfill): rows ``(key, state)`` the operator starts from."""
    spec = {
        "node": config.node, "state_name": config.state_name, "replay": replay, "event_time_out": event_time_out, "emit_on_close": config.emit_on_close,
        "windowed_key": config.key.windowed, "key_kind": _key_kind(config.key.serde),
        "out_type": config.value_out.spark_type, "windowing": _windowing_json(config.windowing),
        "ops": list(form.ops), "merge": form.merge, "double": form.double, "init_null": form.init_null,
        "repartitioned": [i.repartitioned for i in config.inputs],
        "idle_close_ms": getattr(config, "idle_close_ms", None),
        "idle_channel": getattr(config, "idle_channel", None),
        "stream_time_floor": getattr(config, "stream_time_floor", -1),
    }
    if event_time_out:
        schema = StructType([*schema.fields, StructField(EVENT_TIME_OUT, TimestampType())])
    spark = inp.sparkSession
    if is_connect(spark):  # no py4j: the server's SQL extension replaces the hint by the operator
        if initial_state is not None:
            raise JvmOperatorError(f"{config.node}: continuing a backfill over Spark Connect runs on the Python "
                                   "operator (the JVM operator's hint takes no initial state): set "
                                   "streamsdsl.operator=python.")
        out = inp.hint(OPERATOR_HINT, json.dumps(spec), schema.json())
    elif initial_state is not None:
        out = DataFrame(getattr(spark._jvm, JAVA_CLASS).apply(inp._jdf, json.dumps(spec), schema.json(),
                                                              initial_state._jdf), spark)
    else:
        out = DataFrame(getattr(spark._jvm, JAVA_CLASS).apply(inp._jdf, json.dumps(spec), schema.json()), spark)
    return out.drop(EVENT_TIME_OUT) if event_time_out else out


def prepare_input(df: DataFrame, form: JvmAggregate, index: int = 0) -> DataFrame:
    """One input's rows for the JVM operator: ``value`` reduced to its presence, its number in
    `NUMBER` (typed as the aggregation computes)."""
    number = form.numbers[index]
    kind = "double" if form.double else "bigint"
    return df.withColumn(NUMBER, (number if number is not None else F.lit(None)).cast(kind)).withColumn(
        "value", F.when(F.col("value").isNotNull(), F.lit(True)))


#: Spark's name of the JVM ``transformWithState`` operator in a checkpoint's state metadata.
_JVM_EXEC = "transformWithStateExec"


def _checkpoint_jvm_operators(checkpoint: str) -> int | None:
    """How many JVM ``transformWithState`` operators a (local) checkpoint's state metadata
    records; None when there is no state yet or the checkpoint is not on the local disk."""
    import glob
    import os

    if "://" in checkpoint and not checkpoint.startswith("file:"):
        return None
    root = os.path.join(checkpoint.removeprefix("file:"), "state")
    found = None
    for operator_dir in glob.glob(os.path.join(root, "*")):
        files = sorted(glob.glob(os.path.join(operator_dir, "_metadata", "v*", "[0-9]*")))
        if not files:
            continue
        try:
            with open(files[-1], encoding="utf-8") as f:
                text = f.read()
        except OSError:
            continue
        found = (found or 0) + (f'"operatorName":"{_JVM_EXEC}"' in text)
    return found


def check_checkpoint(checkpoint: str, report: Mapping[str, OperatorChoice]) -> None:
    """Raise `CheckpointOperatorError` when the checkpoint's stateful operators (aggregations,
    stream–table joins) ran on the other operator than this run would use (Spark would fail with
    ``STREAMING_STATEFUL_OPERATOR_NOT_MATCH_IN_STATE_METADATA``).

    The checkpoint records operator *instances*: Spark plans an operator once per branch that
    reads its output (two sinks below one aggregation), so one node can have several. A
    checkpoint with JVM instances and none now, with none and some now, or with fewer than this
    run's JVM nodes, was written with another choice; more instances than nodes is left to
    Spark's own check."""
    written = _checkpoint_jvm_operators(checkpoint)
    if written is None:
        return
    now = [node for node, how in report.items() if how.backend is Backend.JVM]
    if (written > 0) == bool(now) and written >= len(now):
        return
    python = [node for node, how in report.items() if how.backend is Backend.PYTHON]
    if written > len(now):
        fix = ("set streamsdsl.operator to 'jvm' (or 'auto' with the jar loaded) to continue from it" if python
               else "run it with the streamsdsl version that wrote it")
        what = f"{written} stateful operator(s) on the JVM operator; this run puts {len(now)} there"
    else:
        fix = "set streamsdsl.operator to 'python' to continue from it"
        what = f"{written} stateful operator(s) on the JVM operator; this run puts {len(now)} there ({', '.join(now)})"
    raise CheckpointOperatorError(
        f"the checkpoint {checkpoint} was written with {what}: Spark cannot continue one operator's state on the "
        f"other. To keep the state, {fix}; or start from a new checkpoint (a new application.id)."
    )
