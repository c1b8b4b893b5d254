"""The topology's metrics (KIP-825 names), read from the plan's observations.

Each operator counts what it drops and what it emits on close with Spark's ``observe()``
(`streamsdsl.compiler.columns.OBSERVED_FIELDS`). A streaming query reports the observations
per micro-batch in its progress (``StreamingQueryProgress.observedMetrics``); the test driver's
batch job reports them once for the whole run (`observed_metrics`). A streaming plan counts its
drop points with the jar's counters instead where it can (`drain_counters`, read per batch by
the sink and handed to `QueryMetrics` as observations of the same names).
"""

from __future__ import annotations

import json
import logging
import math
import threading
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from streamsdsl.records import DROP_REASONS
from streamsdsl.compiler.columns import (
    MERGED_OBSERVATION_PREFIX,
    OBSERVATION_PREFIX,
    OBSERVED_DROPPED,
    OBSERVED_DROPPED_RECORDS,
    OBSERVED_EMITTED_FINAL,
    OBSERVED_LATENCY_MAX,
    OBSERVED_LATENCY_SUM,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.streaming import StreamingQuery

__all__ = ["TASK_METRICS", "Locate", "Metrics", "QueryMetrics", "drain_counters", "dropped_in", "log_dropped",
           "log_progress", "observed_metrics", "progress_observations", "rows_per_second"]

log = logging.getLogger("streamsdsl")
#: One line per micro-batch (`KafkaStreams` logs it at INFO): silence it alone with
#: ``logging.getLogger("streamsdsl.progress").setLevel(logging.WARNING)``.
progress_log = logging.getLogger("streamsdsl.progress")

#: Where a dropped record came from: ``(node, source position) -> (topic, partition, offset)``.
Locate = Callable[[str, int], tuple[str, int, int]]


def log_dropped(observed: Mapping[str, Mapping[str, Any]], locate: Locate) -> None:
    """One warning per dropped record of ``observed``, in source order, as Kafka Streams writes
    one (the processor, the reason, topic, partition, offset, timestamp), and one line per point
    for the records beyond the logged maximum."""
    drops: list[tuple[int, str, str, Any]] = []
    for name, row in observed.items():
        if not name.startswith(OBSERVATION_PREFIX):
            continue
        records = row.get(OBSERVED_DROPPED_RECORDS) or []
        node, _, part = name[len(OBSERVATION_PREFIX):].rpartition(":")
        reason = DROP_REASONS.get(part, "Skipping record")
        drops.extend((int(r["position"]), node, reason, r) for r in records)
        more = int(row.get(OBSERVED_DROPPED) or 0) - len(records)
        if more > 0:
            log.warning("%s: %s: %d more records of this run are counted in dropped-records-total, not logged.",
                        node, reason, more)
    for position, node, reason, record in sorted(drops, key=lambda d: d[0]):
        topic, partition, offset = locate(node, position)
        detail = f" reason=[{record['detail']}]" if record["detail"] else ""
        log.warning("%s: %s. topic=[%s] partition=[%s] offset=[%s] timestamp=[%s]%s", node, reason, topic,
                    partition, offset, record["timestamp"], detail)


def observed_metrics(df: DataFrame) -> dict[str, dict[str, Any]]:
    """The observations of the last action run on ``df`` (by name; a point no row reached can
    be missing: it counts as zero)."""
    from streamsdsl.runtime.connect import connect_observations, is_connect

    if is_connect(df.sparkSession):  # no py4j: the observations came with the action's result
        return _points(connect_observations(df))
    found = df._jdf.queryExecution().observedMetrics()  # type: ignore[union-attr]
    out: dict[str, dict[str, Any]] = {}
    entries = found.iterator()
    while entries.hasNext():
        entry = entries.next()
        out[str(entry._1())] = json.loads(entry._2().json())
    return _points(out)


def _points(observed: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """``observed`` with each observation of several points (`MERGED_OBSERVATION_PREFIX`) read as
    the points' own observations."""
    out: dict[str, dict[str, Any]] = {}
    for name, row in observed.items():
        if name.startswith(MERGED_OBSERVATION_PREFIX):
            out.update({point: dict(fields) for point, fields in row.items() if fields is not None})
        else:
            out[name] = dict(row)
    return out


#: Kafka Streams' task-level metric names the operators report (KIP-825); a streaming query also
#: reports ``input-records-total`` and ``batches-total``.
TASK_METRICS = ("dropped-records-total", "emit-final-records-total", "emit-final-latency-max",
                "emit-final-latency-avg")


def progress_observations(progress: Any) -> dict[str, dict[str, Any]]:
    """The observations a streaming query's progress report carries, by name."""
    return _points({name: row.asDict(recursive=True) for name, row in (progress.observedMetrics or {}).items()})


def drain_counters(counters: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """What the plan's drop counters (``io.streamsdsl.jvm.DropCounter``'s accumulators, by
    observation name: `streamsdsl.compiler.plan.CompiledTopology.counters`) counted since they were
    last drained, as observations of the points that dropped records; the counters are left at zero."""
    out: dict[str, dict[str, Any]] = {}
    for name, counted in counters.items():
        drained = counted.drain()
        dropped = int(drained.count())
        if dropped == 0:
            continue
        records = [{"position": int(r.getLong(0)), "timestamp": None if r.isNullAt(1) else int(r.getLong(1)),
                    "detail": None if r.isNullAt(2) else str(r.getString(2))} for r in drained.records()]
        out[name] = {OBSERVED_DROPPED: dropped, OBSERVED_EMITTED_FINAL: 0, OBSERVED_LATENCY_SUM: 0.0,
                     OBSERVED_LATENCY_MAX: None, OBSERVED_DROPPED_RECORDS: records}
    return out


def dropped_in(observed: Mapping[str, Mapping[str, Any]]) -> int:
    """The records streamsdsl's operators dropped, according to ``observed``."""
    return sum(int(row.get(OBSERVED_DROPPED) or 0) for name, row in observed.items()
               if name.startswith(OBSERVATION_PREFIX))


class Metrics:
    """Thread-safe running totals of a topology's metrics."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.dropped = 0
        self.emitted_final = 0
        self.latency_sum = 0.0
        self.latency_max = -math.inf
        self.input_rows = 0
        self.batches = 0

    def add_observations(self, observed: Mapping[str, Mapping[str, Any]]) -> None:
        """Add the streamsdsl observations of one run or micro-batch (others are ignored)."""
        with self._lock:
            self.dropped += dropped_in(observed)
            for name, row in observed.items():
                emitted = int(row.get(OBSERVED_EMITTED_FINAL) or 0)
                if emitted and name.startswith(OBSERVATION_PREFIX):
                    self.emitted_final += emitted
                    self.latency_sum += float(row.get(OBSERVED_LATENCY_SUM) or 0.0)
                    self.latency_max = max(self.latency_max, float(row[OBSERVED_LATENCY_MAX]))

    def add_counts(self, dropped: int, latencies: list[int] | tuple[int, ...]) -> None:
        """Add ``dropped`` dropped records and one emit-final record per latency (ms)."""
        with self._lock:
            self.dropped += dropped
            if latencies:
                self.emitted_final += len(latencies)
                self.latency_sum += float(sum(latencies))
                self.latency_max = max(self.latency_max, float(max(latencies)))

    def snapshot(self) -> dict[str, float]:
        """``dropped-records-total``, ``emit-final-records-total``, ``emit-final-latency-max`` and
        ``-avg`` (NaN before the first on-close record), ``input-records-total``, ``batches-total``."""
        with self._lock:
            emitted = self.emitted_final
            task = (float(self.dropped), float(emitted), self.latency_max if emitted else math.nan,
                    self.latency_sum / emitted if emitted else math.nan)
            return {
                **dict(zip(TASK_METRICS, task)),
                "input-records-total": float(self.input_rows),
                "batches-total": float(self.batches),
            }


#: How far (in batch ids) behind the highest counted report `QueryMetrics` still counts a late one.
COUNTED_WINDOW = 1_000


class QueryMetrics(Metrics):
    """The metrics of one streaming query, accumulated from its progress reports, each counted
    once (by batch id) whichever way it arrives: a progress listener, or `refresh`, together with
    what the plan's drop counters counted in that batch (`batch_written`); ``on_progress`` is
    called once for each newly counted report with the batch's observations (e.g. to log it)."""

    def __init__(self, on_progress: Callable[[Any, Mapping[str, Mapping[str, Any]]], None] | None = None,
                 locate: Locate | None = None) -> None:
        super().__init__()
        self._on_progress = on_progress
        self._locate = locate
        #: The batch ids counted (those above `_highest` - `COUNTED_WINDOW`), and the highest: a
        #: batch's report may arrive after a later one's (`refresh` reads ``recentProgress`` while
        #: the listener's delivery of an earlier report is still on its way) and is counted then.
        self._seen: set[int] = set()
        self._highest = -1
        self._written = -1
        self._progress_lock = threading.Lock()
        #: The drop counters' observations of the batches written whose progress is not counted yet.
        self._counted: dict[int, dict[str, Any]] = {}
        self.query: StreamingQuery | None = None
        #: Called like ``on_progress``, before it, by name (one per name however often a query is
        #: started: a sink that counts its writes from the observations,
        #: `streamsdsl.runtime.connect.ConnectBatchWriter`).
        self.observers: dict[str, Callable[[Any, Mapping[str, Mapping[str, Any]]], None]] = {}

    def add_progress(self, progress: Any) -> bool:
        """Count one micro-batch's progress; False if it was counted before."""
        with self._progress_lock:
            batch_id = int(progress.batchId)
            if self._is_counted(batch_id):
                return False
            self._seen.add(batch_id)
            self._highest = max(self._highest, batch_id)
            if len(self._seen) > 2 * COUNTED_WINDOW:
                self._seen = {b for b in self._seen if b > self._highest - COUNTED_WINDOW}
            observed = {**progress_observations(progress), **self._counted.pop(batch_id, {})}
            for batch in [b for b in self._counted if b <= self._highest - COUNTED_WINDOW]:
                del self._counted[batch]
            self.add_observations(observed)
            if self._locate is not None:
                log_dropped(observed, self._locate)
            with self._lock:
                self.input_rows += int(progress.numInputRows or 0)
                self.batches += 1
        for observer in list(self.observers.values()):
            observer(progress, observed)
        if self._on_progress is not None:
            self._on_progress(progress, observed)
        return True

    def _is_counted(self, batch_id: int) -> bool:
        return batch_id in self._seen or batch_id <= self._highest - COUNTED_WINDOW

    def batch_written(self, batch_id: int, counted: Mapping[str, Mapping[str, Any]] | None = None) -> None:
        """The sink finished micro-batch ``batch_id`` (its progress follows shortly); ``counted``:
        what the plan's drop counters counted in it (`drain_counters`), read with its progress."""
        with self._progress_lock:
            self._written = max(self._written, batch_id)
            if counted:
                self._counted[batch_id] = dict(counted)

    def refresh(self, timeout_s: float = 10.0) -> None:
        """Count the query's recent progress reports, waiting (up to ``timeout_s``) for those of
        the micro-batches the sink has written: Spark reports a batch's progress right after it
        commits, so it can trail ``processAllAvailable()`` by a moment."""
        query = self.query
        if query is None:
            return
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                recent = query.recentProgress
            except Exception:  # noqa: BLE001 - the session may be gone
                return
            for progress in recent:
                self.add_progress(progress)
            with self._progress_lock:
                done = self._written < 0 or self._is_counted(self._written)
            if done or time.monotonic() >= deadline or not query.isActive:
                return
            time.sleep(0.05)

    def snapshot(self) -> dict[str, float]:
        self.refresh()
        return super().snapshot()


def completed_batch(query: Any) -> int:
    """The id of the last micro-batch a streaming query completed (-1 if none yet)."""
    try:
        progress = query.lastProgress
    except Exception:  # noqa: BLE001 - the session may be gone
        return -1
    return -1 if progress is None else int(progress.batchId)


def rows_per_second(rows: int, duration_ms: int) -> str:
    """A micro-batch's rate as the progress line shows it: whole rows per second from 100 on,
    else three significant digits (a slow batch of a few rows is not ``0 rows/s``).

    Examples
    --------
    >>> rows_per_second(500, 210), rows_per_second(37, 3_000), rows_per_second(3, 9_000), rows_per_second(0, 0)
    ('2381', '12.3', '0.333', '0')
    """
    if rows <= 0 or duration_ms <= 0:
        return "0"
    rate = rows * 1000 / duration_ms
    return f"{rate:.0f}" if rate >= 100 else f"{rate:.3g}" if rate >= 1 else f"{rate:.3f}".rstrip("0").rstrip(".")


def log_progress(application_id: str, progress: Any, emitted: int,
                 observed: Mapping[str, Mapping[str, Any]] | None = None) -> None:
    """Log one micro-batch's line on ``streamsdsl.progress``: input rows and their rate
    (`rows_per_second`), state rows, dropped records (``observed``, the batch's observations:
    by default its progress's, plus the rows Spark's state operators dropped by the watermark),
    records written to sink topics, duration."""
    ops = progress.stateOperators or []
    observed = progress_observations(progress) if observed is None else observed
    dropped = dropped_in(observed) + sum(int(op.numRowsDroppedByWatermark or 0) for op in ops)
    rows, duration = int(progress.numInputRows or 0), int(progress.batchDuration or 0)
    progress_log.info(
        "%s batch %d: %d input rows (%s rows/s), %d state rows, %d dropped, %d emitted, %d ms",
        application_id, progress.batchId, rows, rows_per_second(rows, duration),
        sum(int(op.numRowsTotal or 0) for op in ops), dropped, emitted, duration,
    )
