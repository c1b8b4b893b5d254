"""Event time past a stateful operator in a streaming query.

Spark computes one global watermark from the event-time columns of a plan. A source's is its
records' timestamps; a ``transformWithState`` operator's is the column it names as its
``eventTimeColumnName``, which gives the operators below it a watermark again (SPARK-49676).
streamsdsl's operators emit it (`EVENT_TIME_OUT`) when a stateful operator is below them:

* its value is the output record's timestamp, raised to the watermark when older, plus
  `EVENT_TIME_SHIFT_MS`: Spark fails a query whose operator emits a row whose event time is at
  or below the watermark (``EMITTING_ROWS_OLDER_THAN_WATERMARK_NOT_ALLOWED``), while Kafka
  Streams forwards late records for the next operator to drop by its own grace, and a record
  whose timestamp equals stream time is not late at all. Every event-time column of the plan
  (the sources' too) is shifted by the same 1 ms and watermarked with a delay of 1 ms, which
  Spark carries to the operators' columns: the watermark stays the largest timestamp. The record keeps its own timestamp (``timestamp``), which is what the
  next operator's rules read; the column is dropped right after the operator, so no Spark
  operator below filters rows by it (PLATFORM.md's late-data trap);
* the query runs with ``spark.sql.streaming.multipleWatermarkPolicy = max``: the global
  watermark is the largest of the plan's, as Kafka's stream time is the largest timestamp a task
  has seen, and an input that stays quiet (a table written once, a rarely written side of a
  join) does not hold back the windows of the others. Every operator's event time is at most the
  largest source timestamp, so the global watermark is the sources' largest timestamp;
* and with ``spark.sql.exchange.reuse = false``: where two branches of a topology share an
  operator's input (a join's output written to a topic *and* regrouped into windows; two
  aggregations of one grouped stream), Spark plans the shared part once per branch and lets the
  second read the first's shuffle (a ``ReusedExchange``). Spark's watermark propagation cannot
  see through that node: the operators above it get no watermark at all, and their windows
  close only when a later record of their own key arrives. Without the reuse each branch
  shuffles its own input and every operator gets the watermark.

Nothing here changes a plan whose stateful operators have none below them.
"""

from __future__ import annotations

import datetime
from typing import Any, Iterator

from pyspark.sql import DataFrame, GroupedData, Row
from pyspark.sql.streaming.stateful_processor import StatefulProcessor, StatefulProcessorHandle
from pyspark.sql.types import StructField, StructType, TimestampType

from streamsdsl import ir
from streamsdsl.compiler.columns import EVENT_TIME_OUT, EVENT_TIME_SHIFT_MS
from streamsdsl.compiler.replay_host import replay_map

__all__ = ["STATEFUL_NODES", "STREAMING_SETTINGS", "WATERMARK_POLICY", "EventTimeOut", "fires_event_time_timers", "stateful",
           "stateful_downstream", "transform_with_state"]

#: The session setting and value every streamsdsl streaming query runs with (see the module).
WATERMARK_POLICY = ("spark.sql.streaming.multipleWatermarkPolicy", "max")

#: The session settings a streaming query starts with (see the module): Spark copies the
#: session's settings when the query's thread starts, so they stay set on the session.
STREAMING_SETTINGS = (WATERMARK_POLICY, ("spark.sql.exchange.reuse", "false"))

_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)

#: The operators that keep state (a materialized table source is one too).
STATEFUL_NODES = (ir.AggregateNode, ir.CogroupAggregateNode, ir.StreamTableJoinNode, ir.GlobalTableJoinNode,
                  ir.TableTableJoinNode,
                  ir.ForeignKeyJoinNode,
                  ir.StreamStreamJoinNode, ir.TableGroupByNode, ir.GroupedTableAggregateNode, ir.SuppressNode,
                  ir.ProcessNode)


def stateful(node: Any) -> bool:
    """Whether ``node`` keeps state on Spark (an operator of `STATEFUL_NODES`, or a
    materialized table source)."""
    return isinstance(node, STATEFUL_NODES) or (
        isinstance(node, (ir.TableSourceNode, ir.StreamToTableNode)) and node.materialized)


def fires_event_time_timers(topology: Any) -> bool:
    """Whether a streaming query of ``topology`` has operators that act on the watermark alone
    (windows closing or expiring, a stream–stream join's held records, a suppress buffer, a
    stream–table join's grace buffer): after
    a micro-batch that moved the watermark, Spark runs one more, without data, where they fire."""
    return any(getattr(node, "windows", None) is not None or isinstance(node, (ir.SuppressNode, ir.StreamStreamJoinNode))
               or getattr(node, "grace_ms", None) is not None
               for node in topology.nodes)


def stateful_downstream(topology: Any, name: str) -> bool:
    """Whether a stateful operator is below node ``name``."""
    if topology is None:
        return False
    todo, seen = list(topology.children(name)), set()
    while todo:
        child = todo.pop()
        if child not in seen:
            seen.add(child)
            if stateful(topology.node(child)):
                return True
            todo.extend(topology.children(child))
    return False


class EventTimeOut(StatefulProcessor):
    """``inner``'s rows with `EVENT_TIME_OUT` appended: the row's ``timestamp``, raised to the
    watermark when older (or the watermark, for a row without one), plus `EVENT_TIME_SHIFT_MS`."""

    def __init__(self, inner: StatefulProcessor, fields: list[str]) -> None:
        self.inner = inner
        self.fields = [*fields, EVENT_TIME_OUT]
        self._ts = fields.index("timestamp")

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.inner.init(handle)

    def _with_time(self, rows: Iterator[Row], watermark: int) -> Iterator[Row]:
        fields, ts_at = self.fields, self._ts
        floor = max(watermark, 0)
        for r in rows:
            ts = r[ts_at]
            row = tuple.__new__(Row, (*r, _EPOCH + datetime.timedelta(
                milliseconds=(floor if ts is None or ts < floor else ts) + EVENT_TIME_SHIFT_MS)))
            row.__fields__ = fields
            yield row

    def handleInputRows(self, key: Any, rows: Iterator[Row], timerValues: Any) -> Iterator[Row]:  # noqa: N802,N803
        watermark = timerValues.getCurrentWatermarkInMs()
        return self._with_time(self.inner.handleInputRows(key, rows, timerValues), watermark)

    def handleExpiredTimer(self, key: Any, timerValues: Any, expiredTimerInfo: Any) -> Iterator[Row]:  # noqa: N802,N803
        watermark = timerValues.getCurrentWatermarkInMs()
        return self._with_time(
            self.inner.handleExpiredTimer(key=key, timerValues=timerValues, expiredTimerInfo=expiredTimerInfo),
            watermark)

    def handleInitialState(self, key: Any, initialState: Any, timerValues: Any) -> None:  # noqa: N802,N803
        self.inner.handleInitialState(key, initialState, timerValues)

    def close(self) -> None:
        self.inner.close()


def transform_with_state(streaming: bool, topology: Any, node: str, grouped: GroupedData,
                         processor: StatefulProcessor, schema: StructType, time_mode: str, *,
                         stateful_below: bool | None = None, initial_state: GroupedData | None = None) -> DataFrame:
    """``grouped.transformWithState`` of ``processor`` (Update mode), emitting `EVENT_TIME_OUT`
    on a ``streaming`` plan where a stateful operator is below ``node`` (``stateful_below``:
    told, for an operator that is an inner stage of a node). There the operator runs in event time
    (its output's event time needs the watermark), unless ``time_mode`` is ``ProcessingTime``
    (an aggregation with idle close, whose timers are processing-time timers). ``initial_state``:
    the keys' state the operator starts from (a continued backfill's; its processor's
    ``handleInitialState`` stores it). A replay (not ``streaming``) runs ``processor`` per key
    without a state store (`streamsdsl.compiler.replay_host.replay_map`)."""
    if not streaming:
        if initial_state is not None:
            raise ValueError(f"{node}: a replay's operator takes its state as rows, not as an initial state")
        return replay_map(grouped, processor, schema)
    below = stateful_downstream(topology, node) if stateful_below is None else stateful_below
    if not below:
        return grouped.transformWithState(statefulProcessor=processor, outputStructType=schema,
                                          outputMode="Update", timeMode=time_mode, initialState=initial_state)
    wrapped = EventTimeOut(processor, schema.fieldNames())
    out_schema = StructType([*schema.fields, StructField(EVENT_TIME_OUT, TimestampType())])
    out = grouped.transformWithState(statefulProcessor=wrapped, outputStructType=out_schema, outputMode="Update",
                                     timeMode="ProcessingTime" if time_mode == "ProcessingTime" else "EventTime",
                                     eventTimeColumnName=EVENT_TIME_OUT, initialState=initial_state)
    return out.drop(EVENT_TIME_OUT)
