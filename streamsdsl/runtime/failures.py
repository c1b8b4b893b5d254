"""What a failed query raises, and where a failing record came from.

`query_error` turns the exception of a failed Spark query into the error `KafkaStreams` raises
(and hands its uncaught exception handler); `locate` turns a record's source position into its
topic, partition and offset. Both are pure: they read the topology, never the application's
state, which `KafkaStreams` changes itself.
"""

from __future__ import annotations

from streamsdsl.errors import RecordError, StreamsDslError
from streamsdsl.io.errors import find_source_error, find_transaction_error
from streamsdsl.ir.nodes import CogroupAggregateNode
from streamsdsl.ir.topology import Topology
from streamsdsl.runtime.errors import StreamsError
from streamsdsl.runtime.session import python_worker_error

__all__ = ["locate", "query_error"]


def query_error(exc: BaseException, topology: Topology, application_id: str) -> StreamsDslError:
    """The error a failed query raises: the `RecordError` a worker carried (with the record's
    topic, partition and offset from `locate`), else the Kafka source's error
    (`streamsdsl.io.errors.KafkaSourceError`: broker timeout, re-created topic), else the sink's
    transaction error (`streamsdsl.io.errors.KafkaTransactionError`: fenced, timed out), else a
    `streamsdsl.runtime.session.PythonWorkerError` when the Python workers cannot import
    streamsdsl or a package it needs (they run another interpreter), else (a checkpoint written
    before stateful operators passed event time on, `_OLD_TIME_MODE`) a `StreamsError` naming
    ``streamsdsl reset``, else a `StreamsError` with the first line of Spark's error."""
    error = RecordError.find(exc)
    if error is not None and error.topic is None and error.position is not None:
        return error.located(*locate(topology, error.processor, error.position))
    if error is not None:
        return error
    source_error = find_source_error(exc)  # the Kafka source failed (broker timeout, re-created topic)
    if source_error is not None:
        return source_error
    transaction_error = find_transaction_error(exc)  # exactly-once: fenced by a newer instance, a timeout
    if transaction_error is not None:
        return transaction_error
    worker_error = python_worker_error(exc)  # the workers' interpreter lacks streamsdsl (PYSPARK_PYTHON)
    if worker_error is not None:
        return worker_error
    text = str(exc).strip()
    if all(part in text for part in _OLD_TIME_MODE):
        spark_says = next(line for line in text.splitlines() if _OLD_TIME_MODE[0] in line)
        return StreamsError(
            f"KafkaStreams {application_id!r} cannot continue from its checkpoint: it was written by a streamsdsl "
            "version in which a stateful operator (a join, a table) kept no event time, and this version passes "
            "event time on from it to the windows and joins below it, which Spark cannot change in a checkpoint "
            f"({spark_says.strip()}). Reprocess the input from a new checkpoint: stop the application and run "
            f"`streamsdsl reset --application-id {application_id}` (with --state-dir if you set state.dir), or "
            "start it with a new application.id.")
    detail = text.splitlines()[0] if text else type(exc).__name__
    return StreamsError(f"KafkaStreams {application_id!r} failed: {detail}")


#: What Spark says when a checkpoint's ``transformWithState`` operator was written with another
#: time mode (before stateful operators passed event time on, `streamsdsl.compiler.event_time`).
_OLD_TIME_MODE = ("STATE_STORE_INVALID_CONFIG_AFTER_RESTART", "timeMode")


def locate(topology: Topology, node: str, position: int) -> tuple[str, int, int]:
    """A record's topic, partition and offset from its source position and ``node``, the
    processor that failed or dropped it.

    A streaming position (`streamsdsl.compiler.columns.SOURCE_POSITION`) is ``partition << 40
    | offset``: it does not say which topic the record was read from. The topic is the one
    source topic upstream of ``node`` (exact for a processor before a merge or join of several
    topics), else the candidates joined by ``|`` (a processor after such a merge; every source
    topic for a node the topology does not have). A cogroup's per-input aggregate processor
    (``agg_names``) reads its input's topics."""
    for n in topology.nodes:
        if isinstance(n, CogroupAggregateNode) and node in n.agg_names:
            node = n.parents[n.agg_names.index(node)]
    known = node in {n.name for n in topology.nodes}
    topics = topology.upstream_topics(node) if known else topology.source_topics
    topic = topics[0] if len(topics) == 1 else "|".join(topics) or "?"
    return topic, position >> 40, position & ((1 << 40) - 1)
