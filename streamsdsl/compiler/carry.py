"""How a test-driver run hands a stateful operator's key states to the next run.

A replay's operator emits one `CARRY` row per key with the key's state after the run. The
driver needs those rows after the run, apart from the operator's records. Two ways:

* **Observed** (the common case): the rows are gathered by an observation right after the
  operator (``collect_list`` of each row as JSON), so the run's one job returns them with its
  records — no cached intermediate result, no second job.
* **Cached**: the operator's output is persisted and the carry rows are collected by a second,
  cheap job over the cache. Needed when the operator's records reach the output by more than one
  path (a fan-out below it): the output job would run the operator once per path, and the
  cache keeps it to one run (user functions run once per record), or by none (a store read).
  Also used when a state type has no exact JSON round trip here.
"""

from __future__ import annotations

import base64
import functools
from typing import TYPE_CHECKING, Any

import attrs
from pyspark.sql import Column, DataFrame, Row
from pyspark.sql import functions as F
from pyspark.sql import types as T

from streamsdsl.compiler.columns import CARRIED_STATE, CARRY, EVENT_METRIC, OUTPUT_POSITION, POSITION_TYPE, SOURCE_POSITION
from streamsdsl.compiler.local_rows import local_frame, struct_type

if TYPE_CHECKING:
    from streamsdsl.compiler.plan import CompiledTopology

__all__ = ["CARRY_OBSERVATION", "ObservedCarry", "carry_out", "next_carry", "sink_paths", "with_carried_states"]

#: Prefix of the observations that carry an operator's key states to the next run.
CARRY_OBSERVATION = "streamsdsl-carry:state:"


_SCALARS = (T.LongType, T.IntegerType, T.ShortType, T.ByteType, T.DoubleType, T.FloatType, T.BooleanType,
            T.StringType, T.BinaryType, T.NullType)


def _round_trips(dtype: T.DataType) -> bool:
    """Whether Spark's ``to_json`` of ``dtype`` decodes back exactly with `_decode`."""
    if isinstance(dtype, T.StructType):
        return all(_round_trips(f.dataType) for f in dtype.fields)
    if isinstance(dtype, T.ArrayType):
        return _round_trips(dtype.elementType)
    return isinstance(dtype, _SCALARS)


def _decode(value: Any, dtype: T.DataType) -> Any:
    """A JSON value written by Spark's ``to_json`` as ``collect()`` would return it."""
    if value is None:
        return None
    if isinstance(dtype, T.StructType):
        return Row(*dtype.names)(*(_decode(value.get(f.name), f.dataType) for f in dtype.fields))
    if isinstance(dtype, T.ArrayType):
        return [_decode(v, dtype.elementType) for v in value]
    if isinstance(dtype, T.BinaryType):
        return bytearray(base64.b64decode(value))
    if isinstance(dtype, (T.DoubleType, T.FloatType)):
        return float(value)
    return value


@attrs.frozen
class ObservedCarry:
    """An operator's carry rows, gathered by the observation ``name`` as JSON of ``(key, state)``."""

    name: str
    ddl: str

    def rows(self, observed: dict[str, dict[str, Any]]) -> list[tuple[Any, Any]]:
        import json

        row_type = struct_type(self.ddl)
        found = (observed.get(self.name) or {}).get("rows") or []
        return [tuple(_decode(json.loads(text), row_type)) for text in found]


def sink_paths(topology: Any, node: str) -> int:
    """How many paths lead from ``node`` to the topology's sinks (each is one read of its records
    by the output job)."""
    from streamsdsl import ir

    if topology is None:
        return -1
    children: dict[str, list[str]] = {}
    kinds: dict[str, Any] = {}
    for n in topology.topological_order():
        kinds[n.name] = n
        for p in n.parents:
            children.setdefault(p, []).append(n.name)

    @functools.lru_cache(maxsize=None)
    def paths(name: str) -> int:
        own = 1 if isinstance(kinds.get(name), ir.SinkNode) else 0
        return own + sum(paths(c) for c in children.get(name, ()))

    return paths(node)


def carry_out(lowering: Any, out: DataFrame, node: str, key: Column, key_type: str, state_type: str) -> DataFrame:
    """``out`` without its carry rows; the rows go to ``lowering.carried_states[node]`` (observed,
    or cached when the output reads ``out`` other than once: see the module docstring)."""
    ddl = f"key {key_type}, state {state_type}"
    not_carry = F.col(EVENT_METRIC).isNull() | (F.col(EVENT_METRIC) != CARRY)
    if sink_paths(getattr(lowering, "topology", None), node) == 1 and _round_trips(struct_type(ddl)):
        name = f"{CARRY_OBSERVATION}{node}"
        rows = F.when(F.col(EVENT_METRIC) == CARRY, F.to_json(F.struct(key.alias("key"), F.col(CARRIED_STATE).alias("state"))))
        out = out.observe(name, F.collect_list(rows).alias("rows"))
        lowering.carried_states[node] = ObservedCarry(name, ddl)
        return out.filter(not_carry).drop(CARRIED_STATE)
    out = lowering.cached(out)  # read for the carried state and for the records
    lowering.carried_states[node] = out.filter(F.col(EVENT_METRIC) == CARRY).select(
        key.alias("key"), F.col(CARRIED_STATE).alias("state"))
    return out.filter(not_carry).drop(CARRIED_STATE)


def with_carried_states(lowering: Any, inp: DataFrame, node: str, key_type: str, state_type: str,
                        **columns: Column) -> DataFrame:
    """``inp`` with a `CARRIED_STATE` column (null on its records) and one row per key that the
    previous run left state for: the key, its state, position -1 (before every record of this
    run), ``columns`` (e.g. the input side), nulls elsewhere. The operator reads such a row first."""
    inp = inp.withColumn(CARRIED_STATE, F.lit(None).cast(state_type))
    rows = lowering.carry.states.get(node)
    if not rows:
        return inp
    states = local_frame(inp.sparkSession, rows, f"key {key_type}, state {state_type}")
    filler = {c: F.lit(None).cast(inp.schema[c].dataType) for c in inp.columns}
    filler.update({"key": F.col("key"), CARRIED_STATE: F.col("state"), SOURCE_POSITION: F.lit(-1).cast("bigint"),
                   OUTPUT_POSITION: F.array().cast(POSITION_TYPE), **columns})
    return inp.unionByName(states.select(*[filler[c].alias(c) for c in inp.columns]))


def next_carry(compiled: CompiledTopology, observed: dict[str, dict[str, Any]], before: Any,
                first_position: int, wall_clock: int = -1) -> Any:
    """What the next run starts from: each processor's keys' state and stream time, each
    native aggregation's input rows, as this run left them, and each idle-close aggregation's
    last input time (``wall_clock``, the run's, if the run brought it a record with a key)."""
    from streamsdsl.compiler.columns import IDLE_INPUT_OBSERVATION, STREAM_TIME_OBSERVATION
    from streamsdsl.compiler.modes import ReplayCarry

    replay = compiled.replay
    assert replay is not None
    stream_times = dict(before.stream_times)
    for name, row in observed.items():
        if name.startswith(STREAM_TIME_OBSERVATION):
            node = name[len(STREAM_TIME_OBSERVATION):]
            old = list(stream_times.get(node, ())) or [-1] * len(row)
            stream_times[node] = tuple(max(o, -1 if t is None else int(t)) for o, t in zip(old, row.values()))
    last_input_at = dict(before.idle_last_input_at)
    for name, row in observed.items():
        if name.startswith(IDLE_INPUT_OBSERVATION) and row.get("n"):
            last_input_at[name[len(IDLE_INPUT_OBSERVATION):]] = wall_clock
    # an observed operator whose output this run's job did not read (a table whose records only
    # joins read) did not run: it has no state (`SparkDriverEngine._table_in_join`)
    states = {node: carried.rows(observed) if isinstance(carried, ObservedCarry) else [tuple(r) for r in carried.collect()]
              for node, carried in replay.carried_states.items()
              if not isinstance(carried, ObservedCarry) or carried.name in observed}
    return ReplayCarry(
        first_position,
        states,
        stream_times,
        {node: [tuple(r) for r in df.collect()] for node, df in replay.native_inputs.items()},
        {node: df.schema for node, df in replay.native_inputs.items()},
        last_input_at,
    )
