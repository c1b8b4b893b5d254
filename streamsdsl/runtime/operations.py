"""Operations: an application's metrics in Spark's metrics system, and its Prometheus endpoint.

A running `KafkaStreams` publishes Kafka Streams' metrics (``process-total``,
``dropped-records-total``, ``records-lag``, ...) as a Spark metrics source named
``streamsdsl.<application.id>`` (``io.streamsdsl.jvm.StreamsMetricsSource`` in the jar), which
every sink configured in Spark's metrics system reports: Spark's ``PrometheusServlet`` on the
driver's UI with `METRICS_DEFAULTS`, JMX, Graphite, CSV. The jar also serves the same metrics
with Prometheus labels on the driver's UI at `PROMETHEUS_PATH`.

What a metric means on micro-batches is computed here, in plain Python, from each batch's
progress report (`OperationsMetrics`); `MetricsPublisher` hands one batch's values to the
JVM in one call. Nothing here imports pyspark.
"""

from __future__ import annotations

import json
import logging
import math
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from typing import Any

__all__ = ["METRICS_DEFAULTS", "PROMETHEUS_PATH", "SAMPLE_WINDOW_MS", "SOURCE_CLASS", "MetricsPublisher",
           "OperationsMetrics", "batch_latencies", "offsets", "records_lag"]

log = logging.getLogger("streamsdsl")

#: Spark settings streamsdsl gives the sessions it builds or configures (unless the caller sets
#: them): Spark's Prometheus servlet on the driver's UI at ``/metrics/prometheus`` (every source
#: of the driver's metrics system, streamsdsl's included), Spark's own per-query source
#: (``spark.streaming.<query>``: input and processing rate, latency, watermark, state rows), and
#: the application's name instead of its run's id (``local-1795933382949``) as the metrics'
#: namespace, so that a restarted application keeps its series. They are read when the
#: SparkContext starts: a running session cannot be given them (``spark.conf.set`` accepts the
#: keys and changes nothing). The executors' summary, ``/metrics/executors/prometheus``
#: (``spark.ui.prometheus.enabled``), is on by default in Spark 4.
METRICS_DEFAULTS: dict[str, str] = {
    "spark.metrics.conf.*.sink.prometheusServlet.class": "org.apache.spark.metrics.sink.PrometheusServlet",
    "spark.metrics.conf.*.sink.prometheusServlet.path": "/metrics/prometheus",
    "spark.sql.streaming.metricsEnabled": "true",
    "spark.metrics.namespace": "${spark.app.name}",
}

#: The jar's labelled Prometheus endpoint on the driver's UI (every running application's metrics).
PROMETHEUS_PATH = "/metrics/streamsdsl/prometheus"

#: The jar's class of the metrics source.
SOURCE_CLASS = "io.streamsdsl.jvm.StreamsMetricsSource"

#: The window of the averages, maxima and rates, in ms: Kafka's default, two samples
#: (``metrics.num.samples``) of 30 s (``metrics.sample.window.ms``).
SAMPLE_WINDOW_MS = 60_000

_NO_OFFSET = ("", "null", "None")


def offsets(text: str | Mapping[str, Any] | None) -> dict[tuple[str, int], int]:
    """The ``{(topic, partition): offset}`` of a source's offsets in a progress report, JSON of
    both Kafka connectors (``{"topic": {"0": 42}}``); empty when the source reported none.

    Examples
    --------
    >>> offsets('{"orders": {"0": 42, "1": 7}}')
    {('orders', 0): 42, ('orders', 1): 7}
    >>> offsets("null"), offsets(None)
    ({}, {})
    """
    if text is None or (isinstance(text, str) and text.strip() in _NO_OFFSET):
        return {}
    parsed = json.loads(text) if isinstance(text, str) else text
    if not isinstance(parsed, Mapping):
        return {}
    out: dict[tuple[str, int], int] = {}
    for topic, parts in parsed.items():
        if isinstance(parts, Mapping):
            for part, offset in parts.items():
                if isinstance(offset, int) and str(part).lstrip("-").isdigit():
                    out[(str(topic), int(part))] = offset
    return out


def records_lag(sources: Iterable[Any]) -> dict[tuple[str, int], int]:
    """Kafka's ``records-lag`` per topic-partition after a micro-batch: the partition's end offset
    when the batch was planned (the source's ``latestOffset``) minus the offset the batch read to
    (its ``endOffset``, the next record to read), never below 0. A source that did not report
    its latest offsets contributes nothing.

    Parameters
    ----------
    sources : iterable
        The progress report's sources (``StreamingQueryProgress.sources``: each with
        ``latestOffset`` and ``endOffset`` JSON).

    Examples
    --------
    >>> from types import SimpleNamespace as Source
    >>> records_lag([Source(latestOffset='{"t": {"0": 10, "1": 5}}', endOffset='{"t": {"0": 4, "1": 5}}')])
    {('t', 0): 6, ('t', 1): 0}
    """
    lag: dict[tuple[str, int], int] = {}
    for source in sources:
        latest = offsets(getattr(source, "latestOffset", None))
        end = offsets(getattr(source, "endOffset", None))
        for tp, high in latest.items():
            if tp in end:
                lag[tp] = max(0, high - end[tp])
    return dict(sorted(lag.items()))


def batch_latencies(progress: Any) -> tuple[int, int]:
    """``(process, commit)`` latency of one micro-batch in ms, from its ``durationMs``: the time
    Spark ran the batch's plan, from reading its records to writing its output (``addBatch``),
    and the time it took to commit the batch (writing its offsets, ``walCommit``, and its commit
    log entry, ``commit``; the state stores commit inside ``addBatch``'s tasks).

    Examples
    --------
    >>> from types import SimpleNamespace as Progress
    >>> batch_latencies(Progress(durationMs={"addBatch": 180, "walCommit": 12, "commit": 9, "triggerExecution": 230}))
    (180, 21)
    """
    durations = getattr(progress, "durationMs", None) or {}
    return int(durations.get("addBatch") or 0), int(durations.get("walCommit") or 0) + int(durations.get("commit") or 0)


class _Window:
    """Samples ``(time ms, value)`` of the last `SAMPLE_WINDOW_MS`."""

    def __init__(self, window_ms: int) -> None:
        self.window_ms = window_ms
        self.samples: deque[tuple[float, float]] = deque()

    def add(self, at_ms: float, value: float) -> None:
        self.samples.append((at_ms, value))

    def recent(self, now_ms: float) -> list[float]:
        while self.samples and self.samples[0][0] <= now_ms - self.window_ms:
            self.samples.popleft()
        return [v for _, v in self.samples]


class OperationsMetrics:
    """The metrics a running application publishes, from its micro-batches' progress reports.

    Kafka Streams' meanings, on micro-batches:

    - ``process-total``: records read from the source topics and run through the topology (every
      record of a batch is processed, also the ones an operator then drops); ``process-rate``:
      those of the batches that ended in the last `SAMPLE_WINDOW_MS`, per second (since the first
      batch, while the application is younger than that).
    - ``process-latency-avg``, ``-max`` (ms): Kafka Streams times each record's ``process()``;
      a micro-batch processes its records together, so each record waits for its whole batch:
      the latency is the batch's ``addBatch`` time (`batch_latencies`), per batch with input in
      the window, not per record.
    - ``commit-latency-avg``, ``-max`` (ms): the batches' commit (`batch_latencies`), every batch
      in the window.
    - ``records-lag`` per topic-partition and ``records-lag-max``: `records_lag` of the last batch.

    Averages and maxima are NaN when no batch in the window had one (Kafka reports NaN too).
    """

    def __init__(self, window_ms: int = SAMPLE_WINDOW_MS, *, clock: Any = None) -> None:
        self._clock = clock or (lambda: time.time() * 1000.0)
        self._lock = threading.Lock()
        self._started = self._clock()
        self._processed = _Window(window_ms)
        self._process_latency = _Window(window_ms)
        self._commit_latency = _Window(window_ms)
        self.lag: dict[tuple[str, int], int] = {}

    def add_progress(self, progress: Any) -> None:
        """Count one micro-batch's progress report (call once per batch)."""
        now = self._clock()
        process, commit = batch_latencies(progress)
        rows = int(getattr(progress, "numInputRows", 0) or 0)
        with self._lock:
            self._processed.add(now, rows)
            if rows > 0:
                self._process_latency.add(now, process)
            self._commit_latency.add(now, commit)
            self.lag = records_lag(getattr(progress, "sources", None) or [])

    def values(self) -> dict[str, float]:
        """``process-rate``, ``process-latency-avg``/``-max``, ``commit-latency-avg``/``-max`` and
        ``records-lag-max`` now (the lag per partition is `lag`)."""
        now = self._clock()
        with self._lock:
            processed = self._processed.recent(now)
            span_s = min(self._processed.window_ms, max(now - self._started, 1.0)) / 1000.0
            process, commit = self._process_latency.recent(now), self._commit_latency.recent(now)
            lag_max = max(self.lag.values()) if self.lag else math.nan
        return {
            "process-rate": sum(processed) / span_s,
            "process-latency-avg": _avg(process),
            "process-latency-max": max(process, default=math.nan),
            "commit-latency-avg": _avg(commit),
            "commit-latency-max": max(commit, default=math.nan),
            "records-lag-max": float(lag_max),
        }


def _avg(values: list[float]) -> float:
    return sum(values) / len(values) if values else math.nan


def _number(value: float) -> float | None:
    return None if math.isnan(value) else value


class MetricsPublisher:
    """An application's metrics after each micro-batch: counted (`OperationsMetrics`), merged with
    its totals (`totals`) and published to its source in the driver's metrics system
    (``streamsdsl.<application.id>``), which `register` adds and `close` removes; one JVM call
    per batch (`publish`). Without the jar or a JVM (Spark Connect) it counts but publishes
    nothing, and says why once.

    Parameters
    ----------
    application_id : str
        The source is named after it.
    """

    def __init__(self, application_id: str) -> None:
        self.application_id = application_id
        self.operations = OperationsMetrics()
        self._source: Any = None
        self._lock = threading.Lock()
        #: Why nothing is published (None while it is).
        self.unavailable: str | None = "not registered"
        #: The labelled endpoint's address (None without a UI).
        self.endpoint: str | None = None

    def register(self, spark: Any) -> None:
        """Count from now on (a new `operations`), register the source in ``spark``'s driver
        metrics system and serve `PROMETHEUS_PATH` on its UI; logs at INFO and publishes nothing
        when the session cannot (Spark Connect, the jar not loaded)."""
        from streamsdsl.compiler.jvm_operator import _unavailable  # whether the session loaded the jar, and why not
        from streamsdsl.runtime.connect import is_connect

        self.operations = OperationsMetrics()
        if is_connect(spark):
            self.unavailable = ("a Spark Connect session: the metrics live in the server's driver, which "
                                "the client cannot register a source in")
        else:
            self.unavailable = _unavailable(spark)
        if self.unavailable is not None:
            log.info("KafkaStreams %r: metrics are not published to Spark's metrics system (%s)",
                     self.application_id, self.unavailable)
            return
        jclass = getattr(spark._jvm, SOURCE_CLASS)
        with self._lock:
            self._source = jclass.register(self.application_id)
        if jclass.attachEndpoint(spark.sparkContext._jsc.sc()):
            ui = spark.sparkContext.uiWebUrl
            self.endpoint = f"{ui}{PROMETHEUS_PATH}" if ui else None

    def totals(self, counted: Mapping[str, float], sink: Any) -> dict[str, float]:
        """`KafkaStreams.metrics`: the operators' and the source's ``counted`` totals
        (`streamsdsl.runtime.metrics.Metrics.snapshot`), the ``sink``'s (``output-records-total``,
        ``dead-letter-records-total``; None: 0), ``process-total`` and `OperationsMetrics.values`."""
        out = dict(counted)
        out["output-records-total"] = float(sink.emitted_total) if sink is not None else 0.0
        out["dead-letter-records-total"] = float(sink.dead_letters) if sink is not None else 0.0
        out["process-total"] = float(out.get("input-records-total", 0.0))
        out.update(self.operations.values())
        return out

    def publish(self, progress: Any, totals: Callable[[], Mapping[str, float]]) -> dict[str, Any] | None:
        """Count one micro-batch's ``progress`` and publish the values after it: ``totals()``
        (`totals`' names) and the lag. Returns what was sent (None when nothing is published);
        a failure is logged, never raised (metrics must not stop the query)."""
        try:
            self.operations.add_progress(progress)
            with self._lock:
                if self._source is None:
                    return None
                payload = self.payload(totals())
                self._source.update(json.dumps(payload, allow_nan=False))
            return payload
        except Exception:  # noqa: BLE001 - logged; the query goes on
            log.warning("KafkaStreams %r: publishing the metrics of batch %s failed", self.application_id,
                        getattr(progress, "batchId", "?"), exc_info=True)
            return None

    def payload(self, totals: Mapping[str, float]) -> dict[str, Any]:
        """The update `publish` sends: ``{"values": {name: number or None}, "lag": [[topic,
        partition, lag], ...]}``."""
        lag = [[topic, partition, n] for (topic, partition), n in self.operations.lag.items()]
        return {"values": {k: _number(float(v)) for k, v in sorted(totals.items())}, "lag": lag}

    def close(self) -> None:
        """Remove the source from the metrics system (the application stopped); counting goes on."""
        with self._lock:
            source, self._source = self._source, None
        if source is not None:
            try:
                source.remove()
            except Exception:  # noqa: BLE001 - the session may already be stopped
                log.debug("removing the metrics source failed", exc_info=True)
