"""The progress listener tells when its query's termination was delivered (`KafkaStreams`
waits for that before removing it from a Spark Connect session, whose listener bus deadlocks
when the last listener is removed while an event is on its way)."""

from __future__ import annotations

import math
import threading
import types
from typing import Any

import pytest

from streamsdsl.runtime.lifecycle import _LISTENER_WRAPPER, _JsonEvents, progress_listener


def test_termination_sets_the_listeners_own_event_and_hands_a_failure_on() -> None:
    failures: list[tuple[str, str]] = []
    handed = threading.Event()

    def on_terminated(run_id: str, error: str) -> None:
        failures.append((run_id, error))
        handed.set()

    first = progress_listener("app", lambda: None, on_terminated)
    second = progress_listener("app", lambda: None, on_terminated)
    assert not first.terminated.is_set()
    first.onQueryTerminated(types.SimpleNamespace(runId="r1", exception="boom"))
    assert first.terminated.is_set() and not second.terminated.is_set()
    assert handed.wait(10) and failures == [("r1", "boom")]
    second.onQueryTerminated(types.SimpleNamespace(runId="r2", exception=None))
    assert second.terminated.is_set() and failures == [("r1", "boom")]


class _BothReadings:
    """Called by the JVM with each event (PySpark's listener interface): keeps each progress
    report read both ways, PySpark's own (`fromJObject`) and the listener's (`_JsonEvents`)."""

    def __init__(self) -> None:
        self.pairs: list[tuple[Any, Any]] = []
        self.done = threading.Event()

    def onQueryStarted(self, jevent: Any) -> None:  # noqa: N802 - the Java interface's names
        pass

    def onQueryProgress(self, jevent: Any) -> None:  # noqa: N802
        from pyspark.sql.streaming.listener import QueryProgressEvent

        got: list[Any] = []
        recorder = types.SimpleNamespace(onQueryProgress=lambda event: got.append(event.progress))
        _JsonEvents(recorder).onQueryProgress(jevent)
        self.pairs.append((QueryProgressEvent.fromJObject(jevent).progress, *got))

    def onQueryIdle(self, jevent: Any) -> None:  # noqa: N802
        pass

    def onQueryTerminated(self, jevent: Any) -> None:  # noqa: N802
        self.done.set()

    class Java:
        implements = ["org.apache.spark.sql.streaming.PythonStreamingQueryListener"]


@pytest.mark.spark_engine("reads the progress reports of a Spark streaming query")
def test_a_report_read_from_its_json_is_the_one_pyspark_builds(spark: Any, tmp_path: Any) -> None:
    """The listener reads each progress report from its JSON (one call into the JVM, where
    PySpark's own bridge makes about a thousand): the same batch, name, input rows, durations,
    state operators and observations (numbers, a null, a NaN, a list of structs), by
    `progress_observations` as `QueryMetrics` reads them. Each end of a Java map's iteration
    costs PySpark's bridge an exception, converted by class look-ups: 0.6 s a report measured."""
    from pyspark import SparkContext
    from pyspark.java_gateway import ensure_callback_server_started
    from pyspark.sql import functions as F

    from streamsdsl.runtime.metrics import progress_observations

    (tmp_path / "in").mkdir()
    for i in range(2):
        (tmp_path / "in" / f"{i}.json").write_text("".join(f'{{"k": "k{j % 3}", "v": {j}}}\n' for j in range(i * 5, i * 5 + 5)))
    stream = (spark.readStream.schema("k string, v long").option("maxFilesPerTrigger", 1).json(str(tmp_path / "in"))
              .observe("streamsdsl-test", F.count(F.lit(1)).alias("rows"), F.max("v").alias("newest"),
                       F.max(F.lit(None).cast("long")).alias("none"), F.max(F.lit(float("nan"))).alias("nan"),
                       F.collect_list(F.struct("k", "v")).alias("records"))
              .groupBy("k").count())
    readings = _BothReadings()
    ensure_callback_server_started(SparkContext._gateway)
    jlistener = getattr(SparkContext._jvm, _LISTENER_WRAPPER)(readings)
    spark.streams._jsqm.addListener(jlistener)
    try:
        query = (stream.writeStream.queryName("json_progress").format("memory").outputMode("update")
                 .option("checkpointLocation", str(tmp_path / "cp")).start())
        query.processAllAvailable()
        query.stop()
        assert readings.done.wait(30)
    finally:
        spark.streams._jsqm.removeListener(jlistener)
    assert len(readings.pairs) >= 2
    for pyspark_own, from_json in readings.pairs:
        assert (from_json.batchId, from_json.name, from_json.numInputRows, from_json.durationMs) == (
            pyspark_own.batchId, pyspark_own.name, pyspark_own.numInputRows, pyspark_own.durationMs)
        assert [(s.numRowsTotal, s.numRowsUpdated, s.customMetrics) for s in from_json.stateOperators] == [
            (s.numRowsTotal, s.numRowsUpdated, s.customMetrics) for s in pyspark_own.stateOperators]
        mine, theirs = progress_observations(from_json), progress_observations(pyspark_own)
        assert mine.keys() == theirs.keys() == {"streamsdsl-test"}
        nan_mine, nan_theirs = mine["streamsdsl-test"].pop("nan"), theirs["streamsdsl-test"].pop("nan")
        # Spark's JSON writes a NaN double as "NaN" (so does `recentProgress`, which `QueryMetrics.refresh`
        # reads): the metrics read their doubles with float()
        assert nan_mine == "NaN" and math.isnan(float(nan_mine)) and math.isnan(nan_theirs)
        assert mine == theirs
    first = progress_observations(readings.pairs[0][1])["streamsdsl-test"]
    values = sorted(r["v"] for r in first["records"])  # one file a batch, either first
    assert values in ([0, 1, 2, 3, 4], [5, 6, 7, 8, 9])
    assert (first["rows"], first["newest"], first["none"]) == (5, values[-1], None)
