"""Running a compiled topology as one Spark streaming query.

The whole topology (every sink) is one query; each micro-batch is handed to a `BatchSink`
through ``foreachBatch``: the rows of each sink topic, and the dead-letter records of the
``log_and_continue`` handler. Metrics come from the query's progress (`QueryMetrics`).
"""

from __future__ import annotations

import datetime
import logging
import time
from typing import TYPE_CHECKING, Any, Callable, Protocol

from streamsdsl.compiler.event_time import STREAMING_SETTINGS, fires_event_time_timers
from streamsdsl.compiler import CompiledSink, CompiledTopology, PlanMode, compile_topology
from streamsdsl.semantics.kernels import FlushPolicy
from streamsdsl.compiler.columns import (
    DEAD_LETTER_SINK,
    EVENT_TIME_SHIFT_MS,
    OUTPUT_POSITION,
    SINK_INDEX,
    SOURCE_POSITION,
)
from streamsdsl.dsl.options import DeserializationHandler
from streamsdsl.ir.processors import ProcessNode
from streamsdsl.records import DLQ_HEADERS
from streamsdsl.errors import TopologyError
from streamsdsl.runtime.connect import WRITES_OBSERVATION, ConnectUnsupportedError, is_connect, start_on_server
from streamsdsl.runtime.metrics import QueryMetrics, drain_counters
from streamsdsl.runtime.session import require_state_store

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.streaming import StreamingQuery

    from streamsdsl.compiler.lowering import RawSource
    from streamsdsl.ir.topology import Topology

log = logging.getLogger("streamsdsl")

__all__ = ["SINK_COLUMNS", "BatchSink", "check_real_time", "real_time_refusal", "start_streaming"]

#: Columns of a sink's rows handed to a `BatchSink` (RAW_SINK_DDL), before the order columns.
SINK_COLUMNS = ("key", "value", "timestamp", "headers")


class BatchSink(Protocol):
    """Receives, per micro-batch, the serialized rows of one sink topic (`SINK_COLUMNS` plus
    `SOURCE_POSITION` and `OUTPUT_POSITION`, which give the records' order).

    A sink may also define ``write_dead_letters(rows, batch_id)``: it then receives the raw
    records the ``log_and_continue`` handler skipped, with Kafka Streams' error headers and the
    columns ``source_topic``, ``source_partition``, ``source_offset``. On a Spark Connect
    session the micro-batch function runs in a Python process of the server: a sink that runs
    there defines ``connect_writer(sinks, dead_letters)``, returning a picklable function of
    ``(batch, batch_id)`` that writes the whole batch
    (`streamsdsl.runtime.connect.ConnectBatchWriter`).
    """

    def write_batch(self, sink: CompiledSink, rows: DataFrame, batch_id: int) -> None: ...


def _dead_letter_view(rows: DataFrame) -> DataFrame:
    """Dead-letter rows with their source coordinates read back from the error headers."""
    from pyspark.sql import functions as F

    def header(name: str) -> Any:
        return F.element_at(F.filter("headers", lambda h: h["key"] == F.lit(name)), 1)["value"].cast("string")

    return rows.select(
        *SINK_COLUMNS,
        header(DLQ_HEADERS[2]).alias("source_topic"),
        header(DLQ_HEADERS[3]).cast("int").alias("source_partition"),
        header(DLQ_HEADERS[4]).cast("bigint").alias("source_offset"),
    )


def start_streaming(
    topology: Topology,
    raw_source: RawSource,
    sink: BatchSink,
    *,
    checkpoint_location: str,
    trigger: dict[str, Any] | None = None,
    metrics: QueryMetrics | None = None,
    query_name: str | None = None,
    deserialization_handler: DeserializationHandler | str = DeserializationHandler.LOG_AND_FAIL,
    operator: str | None = None,
    before_start: Callable[[dict[str, Any]], None] | None = None,
    flush: FlushPolicy = FlushPolicy.PER_RECORD,
    application_id: str | None = None,
    initial_state: Any = None,
) -> tuple[StreamingQuery, CompiledTopology, QueryMetrics]:
    """Compile ``topology`` in streaming mode and start it as one query.

    ``trigger`` is passed to ``DataStreamWriter.trigger`` (e.g. ``{"processingTime": "1 second"}``
    or ``{"availableNow": True}``). ``operator`` is ``streamsdsl.operator`` (``auto``, ``jvm``,
    ``python``; None: its default): which operator runs the built-in aggregations. The returned `QueryMetrics` is fed
    by the query's progress. ``before_start`` is called with the compiler's operator report
    (``{stateful node: which operator runs it}``) after the plan compiled and the checkpoint's
    operators were checked, before the query starts (`KafkaStreams` checks the topology's
    fingerprint there). ``application_id``: what a user processor's ``context.application_id()``
    returns (None: ``query_name``, else the test driver's default). ``initial_state``: the state a
    backfill ended with (a `streamsdsl.compiler.modes.ReplayCarry`), which the stateful operators
    start from in the query's first micro-batch (`streamsdsl.runtime.backfill`).
    """
    from pyspark import StorageLevel

    from streamsdsl.compiler.jvm_operator import check_checkpoint
    from streamsdsl.compiler.plan import CompileOptions

    compiled = compile_topology(topology, raw_source,
                                CompileOptions(PlanMode.STREAMING, operator, deserialization_handler, flush=flush,
                                               application_id=application_id or query_name, carry=initial_state,
                                               checkpoint_location=checkpoint_location))
    operators = compiled.operators
    check_checkpoint(checkpoint_location, operators)  # a switch of operator: a clear error, not Spark's
    if compiled.output is None:
        raise TopologyError("The topology has no sink: add .to(topic) somewhere to run it.")
    if before_start is not None:
        before_start(dict(operators))
    if topology.store_names or any(isinstance(n, ProcessNode) for n in topology.nodes):  # a processor's task state
        require_state_store(compiled.output.sparkSession)
    metrics = metrics or QueryMetrics()
    sinks = compiled.sinks
    dead_letters = compiled.dead_letters and hasattr(sink, "write_dead_letters")

    counters = compiled.counters

    def each_batch(batch: DataFrame, batch_id: int) -> None:
        try:
            write_batch(batch, batch_id)
        except Exception as error:
            interruption = _interruption(error)
            if interruption is None:
                raise
            raise QueryStopInterruptedBatch(interruption) from None

    def write_batch(batch: DataFrame, batch_id: int) -> None:
        for counted in counters.values():
            counted.reset()  # what a failed attempt of this batch counted
        batch = batch.persist(StorageLevel.MEMORY_AND_DISK)
        try:
            if not sinks:  # what runs unread (a processor, a named store): the whole batch must run
                batch.count()
            if dead_letters:
                dead = batch.filter(batch[SINK_INDEX] == DEAD_LETTER_SINK)
                if not dead.isEmpty():
                    sink.write_dead_letters(_dead_letter_view(dead), batch_id)  # type: ignore[attr-defined]
            for s in sinks:
                rows = batch.filter(batch[SINK_INDEX] == s.index).select(*SINK_COLUMNS, SOURCE_POSITION, OUTPUT_POSITION)
                sink.write_batch(s, rows, batch_id)
            metrics.batch_written(batch_id, drain_counters(counters))
        finally:
            batch.unpersist()

    batch_function: Callable[[DataFrame, int], None] = each_batch
    output = compiled.output
    connect = is_connect(output.sparkSession)
    if connect:
        # over Spark Connect the function is pickled and runs in a Python process of the server
        connect_writer = getattr(sink, "connect_writer", None)
        if connect_writer is None:
            raise ConnectUnsupportedError(
                f"{type(sink).__name__} cannot write micro-batches on a Spark Connect session: Spark Connect runs "
                "the micro-batch function in a Python process of the server, and this sink has no connect_writer("
                "sinks, dead_letters) giving a picklable function for it (docs/connect.md).")
        connect_function = connect_writer(sinks, dead_letters)
        # what it writes is counted in the plan: the query's progress brings the counts back
        output = connect_function.observe_writes(output)
        add_written = getattr(sink, "add_written", None)
        if add_written is not None:  # one observer, also when the query is started again
            metrics.observers[WRITES_OBSERVATION] = (
                lambda progress, observed: add_written(progress.batchId, *connect_function.written(observed)))
        batch_function = connect_function
    if trigger and "realTime" in trigger:
        check_real_time(topology, compiled)
        real_time_writer = getattr(sink, "real_time_writer", None)
        if real_time_writer is None:
            raise TopologyError(f"{type(sink).__name__} cannot write a real-time query: Spark's real-time mode "
                                "refuses foreachBatch sinks; only Spark's Kafka sink (KafkaStreams) writes one.")
        writer = real_time_writer(output, sinks).outputMode("update")
    else:
        writer = output.writeStream.outputMode("update").foreachBatch(batch_function)
    writer = writer.option("checkpointLocation", checkpoint_location)
    if query_name:
        writer = writer.queryName(query_name)
    if trigger:
        writer = writer.trigger(**trigger)
    # the global watermark is the largest of the plan's, and every operator sees it: no reused
    # exchange hides a branch's watermark (streamsdsl.compiler.event_time). Spark keeps a query's
    # watermark policy in its checkpoint, so a restarted query keeps the one it began with
    for key, value in STREAMING_SETTINGS:
        compiled.output.sparkSession.conf.set(key, value)
    query = start_on_server(writer.start) if connect else writer.start()
    metrics.query = query
    return query, compiled, metrics


#: Spark operators that run Python (a Python UDF, ``mapInArrow``, ...): their class names contain one
#: of these. Spark's real-time mode refuses them (its operator allowlist).
_PYTHON_OPERATORS = ("Python", "InArrow", "InPandas")


def real_time_refusal(topology: Topology, compiled: CompiledTopology) -> str | None:
    """Why ``compiled`` cannot run in Spark's real-time mode (PySpark 4.2), or None.

    Spark 4.2's real-time mode runs stateless plans (projections, filters, broadcast joins with
    static data) from its Kafka source to its Kafka sink; it refuses stateful operators, shuffles
    and every Python operator (``STREAMING_REAL_TIME_MODE.OPERATOR_OR_SINK_NOT_IN_ALLOWLIST``).
    """
    stateful = sorted(compiled.operators) + sorted(n.name for n in topology.nodes if isinstance(n, ProcessNode))
    if stateful or topology.store_names:
        names = ", ".join(stateful or sorted(topology.store_names))
        return (f"the topology has state ({names}): Spark's real-time mode runs stateless queries only (in Spark "
                "4.2; aggregations, deduplication and transformWithState come in Spark 4.3)")
    if is_connect(compiled.output.sparkSession):  # type: ignore[union-attr]
        return None  # no plan to read here: Spark's own check refuses at start
    output = compiled.output
    # what explain() prints: a streaming plan is planned for explain only (executedPlan raises)
    plan = output.sparkSession._jvm.PythonSQLUtils.explainString(  # type: ignore[union-attr]
        output._jdf.queryExecution(), "simple")  # type: ignore[union-attr]
    operators = sorted({word for word in _plan_operators(plan) if any(p in word for p in _PYTHON_OPERATORS)})
    if operators:
        return (f"a step runs a Python function (Spark operators {', '.join(operators)}): Spark's real-time mode "
                "runs no Python operator. Give filter/map_values/... pyspark Columns (F.col(\"value\") > 0) instead "
                "of lambdas")
    if "Exchange" in plan or "StateStore" in plan:
        return ("the plan shuffles its records (a regroup, a repartition or a join that is not a broadcast): "
                "Spark's real-time mode runs no shuffle (in Spark 4.2)")
    return None


def _plan_operators(plan: str) -> list[str]:
    r"""The operator names of a physical plan's text, one per line.

    >>> _plan_operators("== Physical Plan ==\n*(3) Project [key#1]\n+- ArrowEvalPython [apply(value#2)]\n"
    ...                 "   +- MapInArrow run(key#3), false\n      :  +- *(1) Filter (value#4 > 0)")
    ['==', 'Project', 'ArrowEvalPython', 'MapInArrow', 'Filter']
    """
    names = []
    for line in plan.splitlines():
        words = line.replace("+-", " ").replace(":-", " ").replace("*(", " (").split()
        words = [w for w in words if w not in (":", "|") and not w.startswith("(")]
        if words:
            names.append(words[0])
    return names


def check_real_time(topology: Topology, compiled: CompiledTopology) -> None:
    """Refuse (`TopologyError`, naming why) a topology Spark's real-time mode cannot run."""
    refusal = real_time_refusal(topology, compiled)
    if refusal is not None:
        raise TopologyError(f"'streamsdsl.trigger' = 'real_time' cannot run this topology: {refusal}. Use the "
                            "default micro-batch trigger for it.")


#: What Spark takes as a query's stop in a ``foreachBatch`` function's error: the JVM call that
#: was interrupted (``StreamExecution.isInterruptionException``) and the exception's class names.
_PY4J_CALL_FAILED = "py4j.protocol.Py4JJavaError: An error occurred while calling"
_INTERRUPTIONS = ("java.lang.InterruptedException", "java.io.InterruptedIOException",
                  "java.nio.channels.ClosedByInterruptException")


class QueryStopInterruptedBatch(RuntimeError):
    """A micro-batch's JVM call was interrupted because its query is stopping (``close()``).

    Raised in place of py4j's error, whose text (a JVM stack trace, thousands of characters)
    Spark's stream thread matches with a regular expression that recurses once per character:
    the thread then dies of a ``StackOverflowError`` and prints 1,024 lines of stack. This text
    is short and still tells Spark the batch was interrupted by the stop, so the query ends
    without an error (the batch runs again after a restart)."""


def _interruption(error: BaseException) -> str | None:
    r"""The short text Spark reads as a stop for a py4j error (``Py4JJavaError``, known by its
    name: this module imports no py4j) naming an interruption (`_INTERRUPTIONS`), else None.

    >>> class Py4JJavaError(Exception): pass
    >>> _interruption(Py4JJavaError("An error occurred while calling o7.count.\n: "
    ...                             "java.lang.InterruptedException\n\tat java.base/..."))
    'py4j.protocol.Py4JJavaError: An error occurred while calling o7.count: java.lang.InterruptedException'
    >>> _interruption(Py4JJavaError("An error occurred while calling o7.count.\n: org.apache.spark.SparkException"))
    >>> _interruption(ValueError("java.lang.InterruptedException")) is None
    True
    """
    if type(error).__name__ != "Py4JJavaError":
        return None
    text = str(error)
    named = next((name for name in _INTERRUPTIONS if name in text), None)
    if named is None:
        return None
    call = text.split("An error occurred while calling", 1)[-1].strip().split("\n", 1)[0].rstrip(".")
    return f"{_PY4J_CALL_FAILED} {call}: {named}"


def process_all_available(query: StreamingQuery, topology: Topology) -> None:
    """``query.processAllAvailable()``, also for a topology with idle close: its aggregations run
    on processing-time timers, so Spark runs a micro-batch every trigger, with or without data
    (PLATFORM.md), and ``processAllAvailable`` never returns. Then: wait for a micro-batch that
    started after this call and found no new record in any source (everything available when
    called was read by the batches before it). A failed query raises as ``processAllAvailable``
    does."""
    if not topology.closes_idle:
        query.processAllAvailable()
        return
    called = time.time() * 1000
    while query.isActive:
        if any(p.numInputRows == 0 and (_event_ms(p.timestamp) or 0) >= called for p in query.recentProgress):
            return
        time.sleep(0.05)
    query.processAllAvailable()  # stopped: raises the query's error, if any


def await_event_time_timers(query: StreamingQuery, topology: Topology, timeout_s: float = 5.0) -> None:
    """After ``query.processAllAvailable()``: wait (up to ``timeout_s``) for the micro-batch
    that runs at the watermark the last data reached. Spark runs it, without data, right after
    a batch that moved the watermark, when an operator acts on the watermark alone (windows
    closing, a join's held records: `fires_event_time_timers`); ``processAllAvailable`` can
    return before it."""
    if not fires_event_time_timers(topology):
        return
    deadline = time.monotonic() + timeout_s
    while query.isActive and time.monotonic() < deadline:
        recent = query.recentProgress
        # progress reports event times shifted by EVENT_TIME_SHIFT_MS (streamsdsl.compiler.columns)
        seen = [_event_ms(p.eventTime.get("max")) - EVENT_TIME_SHIFT_MS
                for p in recent if p.eventTime and p.eventTime.get("max")]
        if not seen:
            return
        watermark = _event_ms(recent[-1].eventTime.get("watermark")) if recent[-1].eventTime else None
        if watermark is not None and watermark >= max(seen):
            return
        time.sleep(0.05)


def _event_ms(text: str | None) -> int | None:
    """Epoch milliseconds of a progress report's event time (``2024-01-01T09:02:05.000Z``)."""
    if not text:
        return None
    return int(datetime.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() * 1000)
