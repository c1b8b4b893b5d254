"""Lowering of global tables and of a stream's join with one.

Kafka Streams keeps a global table in every instance, filled by a thread of its own: the table
is read up to its end before the stream is processed at start, later updates apply in arrival
order, and the table's records are not a stream-time input. On Spark the table is **state keyed
by the table's key**, in one operator per join over the union of the table topic's records and
the stream's records re-keyed by the key selector (the operator of a stream–table join,
`streamsdsl.compiler.joins`, with the stream's own key carried through and restored on output):
every stream record meets the whole table, wherever its key's state lives, and the state is
checkpointed with the query's (a restart does not re-read the table).

* **Micro-batches** (streaming): the global table's source reads from the earliest offset and
  without admission control (`streamsdsl.runtime.wiring`), so the first micro-batch holds the
  whole table as it is when the query starts; within a micro-batch a key's table records are
  applied before its stream records. A stream record therefore sees the table as of the end of
  the table offsets of its own micro-batch: the first batch bootstraps, as Kafka's global thread
  does, and a later update is seen by the stream records of the batch that reads it and after
  (Kafka: by the records processed after the global thread applied it).
* **No stream time**: the table's source has no event-time watermark, so its timestamps move no
  window, grace or join; the operator's output carries the stream records' timestamps only.
* **The test driver** (replay): records in pipe order, as Kafka's TopologyTestDriver applies a
  global record as soon as it is piped.

The operator is the JVM operator (`streamsdsl.compiler.jvm_joins`: its Java port of the rules,
the Python operator's state row, the matched pairs out and the joiner afterwards a batch at a
time, a built-in joiner as Spark columns) when ``streamsdsl.operator`` allows it; the key
selector runs before it, as the Python operator's.
"""

from __future__ import annotations

from typing import Any, Iterator

import attrs
from pyspark.sql import Column, DataFrame, Row
from pyspark.sql import functions as F

from streamsdsl import ir
from streamsdsl.compiler.columns import CARRIED_STATE, CARRY, INPUT_INDEX, OUTPUT_POSITION, SOURCE_POSITION
from streamsdsl.compiler.frame import Frame, KeyCodec
from streamsdsl.compiler.joins import STREAM_SIDE, TABLE_SIDE, KeyedOperator, KeyedOperatorConfig, _operator_input
from streamsdsl.compiler.joins import _table_records, run_keyed_operator, table_state_at_start
from streamsdsl.compiler.jvm_joins import JvmJoin, apply_joiner, joiner_label, run_jvm_join
from streamsdsl.compiler.jvm_operator import Backend
from streamsdsl.compiler.lowering import Lowering
from streamsdsl.compiler.python_ops import map_python
from streamsdsl.operators.descriptions import GlobalTableJoinDescription, description_of
from streamsdsl.semantics.stream_table import StreamTableJoin, global_join_step, table_update
from streamsdsl.values.serdes import JsonSerde, PlanSerde

__all__ = ["GlobalJoinConfig", "GlobalJoinOperator"]

#: The column that keeps a stream record's own key while it is keyed by the table's key.
_STREAM_KEY = "_stream_key"


@attrs.frozen
class GlobalJoinConfig(KeyedOperatorConfig):
    """What the global-table join's operator needs: ``key`` is the table's key serde (the
    operator's key), ``stream_key`` the stream's key codec (the output's key)."""

    stream_key: KeyCodec
    stream_value: PlanSerde
    table_value: PlanSerde
    joiner: Any = None

    @property
    def stream_type(self) -> str:
        """The type of a stream record in the operator's input: its own key and its value."""
        return f"struct<k:{self.stream_key.spark_type},v:{self.stream_value.spark_type}>"

    @property
    def state_type(self) -> str:
        return f"struct<table_key:{self.key.spark_type},value:{self.table_value.spark_type},ts:bigint>"


class GlobalJoinOperator(KeyedOperator):
    """One state row per table key: the global table's current value and its timestamp; a stream
    record (keyed by its selected table key) is joined with it (`global_join_step`)."""

    def __init__(self, config: GlobalJoinConfig) -> None:
        super().__init__(config)
        self.spec = StreamTableJoin(config.kind)  # type: ignore[arg-type]

    def init(self, handle: Any) -> None:
        self.state = handle.getValueState(self.config.state_name, f"value {self.config.table_value.spark_type}, ts bigint")

    def handleInputRows(self, key: Any, rows: Iterator[Row], timerValues: Any) -> Iterator[Row]:  # noqa: N802,N803
        cfg: GlobalJoinConfig = self.config
        data = [r.asDict() for r in rows]
        if cfg.replay:  # pipe order, as Kafka's driver applies a global record when it is piped
            data.sort(key=lambda r: (r[SOURCE_POSITION], r[OUTPUT_POSITION] or []))
        else:  # the batch's table records first: a stream record sees the table at the batch's end
            data.sort(key=lambda r: (r[INPUT_INDEX] != TABLE_SIDE, r["timestamp"], r[SOURCE_POSITION],
                                     r[OUTPUT_POSITION] or []))
        kcell = key[0]
        table_key = cfg.key.from_internal(kcell)
        tv = cfg.table_value
        state = start = table_state_at_start(data, cfg.replay, self.state, tv)
        for r in data:
            ts = r["timestamp"]
            if r[INPUT_INDEX] == TABLE_SIDE:
                state = table_update(state, table_key, tv.from_internal(r["value"]["t"]), ts).state
                continue
            kcell_out, stream_value = r["value"]["s"]["k"], r["value"]["s"]["v"]
            k = cfg.stream_key.from_cell(kcell_out)
            value = cfg.stream_value.from_internal(stream_value)
            yield from self._joined(lambda: global_join_step(self.spec, state, k, table_key, value, ts, cfg.joiner),
                                    k, kcell_out, r)
        if cfg.replay:
            if state is not None:
                carried = {"table_key": kcell, "value": tv.to_internal(state.value), "ts": state.ts}
                yield self.out(None, None, -1, [], -1, [], None, CARRY, None, carried)
        else:
            self._keep_table(state, start)


def _global_table_source(self: Lowering, node: ir.GlobalTableSourceNode) -> Frame:
    """The table topic's records (a null key dropped and counted), without an event-time
    watermark: a global table is not a stream-time input. Its joins read them."""
    from streamsdsl.compiler.lowering import _source

    records = _table_records(self, _source(self, node, event_time=False), node.name)
    return attrs.evolve(records, table_records=records.df)


def _global_table_join(self: Lowering, node: ir.GlobalTableJoinNode) -> Frame:
    stream, table = self.parent(node, 0), self.parent(node, 1)
    d: GlobalTableJoinDescription = description_of(node, [stream, table], self.topology)
    table_node = self.topology.node(node.parents[1])
    # the state variable is the global store's name: interactive queries find the table by it
    config = GlobalJoinConfig(node.name, node.kind, d.table_key, value_out=d.value, stream_key=stream.key,
                              stream_value=d.stream_value, table_value=d.table_value, joiner=d.joiner,
                              state_name=table_node.store)
    selector = d.key_selector
    keyed = map_python(stream.with_df(stream.df.withColumn(_STREAM_KEY, F.col("key"))), node.name,
                       lambda k, v: (selector(k, v), v), out_key=KeyCodec(d.table_key), function="key selector")
    stream_in = keyed.df.select(
        "key", F.struct(F.struct(F.col(_STREAM_KEY).alias("k"), F.col("value").alias("v")).cast(config.stream_type)
                        .alias("s"),
                        F.lit(None).cast(d.table_value.spark_type).alias("t")).alias("value"),
        "timestamp", "headers", SOURCE_POSITION, OUTPUT_POSITION, F.lit(STREAM_SIDE).alias(INPUT_INDEX))
    table_df: DataFrame = table.table_records if table.table_records is not None else table.df
    table_in = _operator_input(table.with_df(table_df), TABLE_SIDE, d.table_key, config.stream_type,
                               d.table_value.spark_type)
    inp = stream_in.unionByName(table_in)
    form = JvmJoin("global_table", node.kind, {"stream_key_json": isinstance(stream.key.serde, JsonSerde)})
    if stream.key.windowed:  # the joiner's key is a window (KeyCodec.from_cell), known to the Python operator
        jvm = None
        self.choices.record(node.name, Backend.PYTHON, f"{form.label}, {node.kind}; a windowed stream's keys")
    else:
        jvm = self.choices.choose(node.name, form, inp.sparkSession, node.kind)
    if jvm is None:
        out = run_keyed_operator(self, inp, config, GlobalJoinOperator, TABLE_SIDE,
                                 out_key_type=stream.key.spark_type, carried_key=F.col(CARRIED_STATE)["table_key"])
        return Frame(out, stream.key, d.value)
    how = joiner_label(d.joiner, node.name, key=stream.key.serde, left=d.stream_value, right=d.table_value,
                       value_out=d.value)
    self.choices.record(node.name, Backend.JVM, f"{jvm.label}, {node.kind}; {how}")
    pairs = run_jvm_join(self, _null_json(inp, d.table_key, d.stream_value, d.table_value), node.name, jvm,
                         key_type=d.table_key.spark_type, left_type=d.stream_value.spark_type,
                         right_type=d.table_value.spark_type, state_type=config.state_type,
                         state_name=config.state_name, carried_side=TABLE_SIDE, out_key_type=stream.key.spark_type,
                         carried_key=F.col(CARRIED_STATE)["table_key"],
                         stored_type=f"struct<value:{d.table_value.spark_type},ts:bigint>")
    return Frame(apply_joiner(pairs, node.name, d.joiner, key=stream.key.serde, left=d.stream_value,
                              right=d.table_value, value_out=d.value), stream.key, d.value)


def _null_json(inp: DataFrame, table_key: PlanSerde, stream_value: PlanSerde, table_value: PlanSerde) -> DataFrame:
    """The JVM operator's input with JSON's ``null`` (the text) a null cell where the Python
    operator decodes it to ``None``: the selected table key, the stream record's value (dropped),
    the table's value (a delete); the stream's own key stays as it is (the output keeps it; the
    operator reads a JSON ``null`` key as null itself: ``stream_key_json``)."""
    from streamsdsl.compiler.jvm_joins import _not_json_null

    def cell(column: Column, serde: PlanSerde) -> Column:
        return _not_json_null(column) if isinstance(serde, JsonSerde) else column

    stream = F.col("value")["s"]
    value = F.struct(F.when(stream.isNotNull(), F.struct(stream["k"].alias("k"), cell(stream["v"], stream_value)
                                                         .alias("v"))).alias("s"),
                     cell(F.col("value")["t"], table_value).alias("t"))
    return inp.withColumn("key", cell(F.col("key"), table_key)).withColumn("value", value)
