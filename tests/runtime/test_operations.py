"""The operations metrics (issue 40, item 4): what each metric means on micro-batches, computed
from progress reports (`streamsdsl.runtime.operations`), and the jar's metrics source that Spark's
metrics system and the labelled Prometheus endpoint report."""

from __future__ import annotations

import json
import math
import urllib.request
from types import SimpleNamespace
from typing import Any

import pytest

from streamsdsl.runtime.operations import (
    METRICS_DEFAULTS,
    SOURCE_CLASS,
    MetricsPublisher,
    OperationsMetrics,
    batch_latencies,
    offsets,
    records_lag,
)


def _source(latest: Any, end: Any) -> SimpleNamespace:
    return SimpleNamespace(latestOffset=latest, endOffset=end)


def _progress(rows: int, add_batch: int, wal: int = 0, commit: int = 0, sources: list[Any] | None = None
              ) -> SimpleNamespace:
    return SimpleNamespace(numInputRows=rows, durationMs={"addBatch": add_batch, "walCommit": wal, "commit": commit},
                           sources=sources or [])


class FakeClock:
    def __init__(self) -> None:
        self.ms = 1_000_000.0

    def __call__(self) -> float:
        return self.ms


class TestRecordsLag:
    def test_lag_is_latest_minus_end_per_partition(self) -> None:
        """Kafka's records-lag: the partition's end offset when the batch was planned minus the
        next offset to read, per topic-partition, over every source, sorted."""
        sources = [
            _source('{"orders": {"0": 120, "1": 40, "2": 7}}', '{"orders": {"0": 100, "1": 40, "2": 7}}'),
            _source('{"refunds": {"0": 3}}', '{"refunds": {"0": 1}}'),
        ]
        assert records_lag(sources) == {("orders", 0): 20, ("orders", 1): 0, ("orders", 2): 0, ("refunds", 0): 2}

    def test_a_source_without_its_latest_offsets_has_no_lag(self) -> None:
        """A source that did not report latestOffset (JSON null, py4j's None as text, missing)
        contributes nothing; a partition only in one of the two is left out."""
        assert records_lag([_source("null", '{"t": {"0": 5}}'), _source("None", '{"t": {"1": 5}}'),
                            _source(None, '{"t": {"2": 5}}'), SimpleNamespace()]) == {}
        assert records_lag([_source('{"t": {"0": 9, "1": 4}}', '{"t": {"0": 9}}')]) == {("t", 0): 0}

    def test_lag_is_never_negative(self) -> None:
        """A partition re-created below the batch's end (failOnDataLoss=false) has lag 0, not < 0."""
        assert records_lag([_source('{"t": {"0": 3}}', '{"t": {"0": 10}}')]) == {("t", 0): 0}

    def test_offsets_json_of_both_connectors(self) -> None:
        """Both connectors write {"topic": {"partition": offset}}; dicts (progress JSON) work too."""
        assert offsets('{"a.b-c": {"10": 5, "2": 0}}') == {("a.b-c", 10): 5, ("a.b-c", 2): 0}
        assert offsets({"t": {"0": 1}}) == {("t", 0): 1}
        assert offsets("[1, 2]") == {}


class TestLatencies:
    def test_process_and_commit_latency_of_a_batch(self) -> None:
        """process = addBatch; commit = walCommit + commit (ms); missing durations count 0."""
        assert batch_latencies(_progress(5, 180, 12, 9)) == (180, 21)
        assert batch_latencies(SimpleNamespace(durationMs={"triggerExecution": 4})) == (0, 0)
        assert batch_latencies(SimpleNamespace()) == (0, 0)

    def test_avg_and_max_over_the_window(self) -> None:
        """Process latency counts batches with input only; commit latency every batch; both over
        the last 60 s (Kafka's two 30 s samples); NaN when the window holds none."""
        clock = FakeClock()
        metrics = OperationsMetrics(clock=clock)
        values = metrics.values()
        assert math.isnan(values["process-latency-avg"]) and math.isnan(values["commit-latency-max"])
        metrics.add_progress(_progress(10, 100, 5, 5))
        clock.ms += 1_000
        metrics.add_progress(_progress(0, 7, 1, 1))  # a no-data batch (timers): no record processed
        clock.ms += 1_000
        metrics.add_progress(_progress(30, 300, 20, 10))
        values = metrics.values()
        assert (values["process-latency-avg"], values["process-latency-max"]) == (200.0, 300.0)
        assert (values["commit-latency-avg"], values["commit-latency-max"]) == (14.0, 30.0)
        clock.ms += 58_500  # 60.5 s after the first batch: it leaves the window
        values = metrics.values()
        assert (values["process-latency-avg"], values["process-latency-max"]) == (300.0, 300.0)
        assert (values["commit-latency-avg"], values["commit-latency-max"]) == (16.0, 30.0)
        clock.ms += 2_000
        values = metrics.values()
        assert math.isnan(values["process-latency-avg"]) and math.isnan(values["commit-latency-avg"])

    def test_process_rate_over_the_window_or_since_start(self) -> None:
        """Records of the window's batches per second: over the time since the first batch while
        the application is younger than the window, then over the window."""
        clock = FakeClock()
        metrics = OperationsMetrics(clock=clock)
        clock.ms += 4_000
        metrics.add_progress(_progress(200, 10))
        assert metrics.values()["process-rate"] == 50.0  # 200 records in 4 s
        clock.ms += 116_000
        metrics.add_progress(_progress(600, 10))
        assert metrics.values()["process-rate"] == 10.0  # 600 records in the last 60 s

    def test_lag_of_the_last_batch(self) -> None:
        """records-lag and records-lag-max follow the last batch."""
        metrics = OperationsMetrics(clock=FakeClock())
        metrics.add_progress(_progress(1, 1, sources=[_source('{"t": {"0": 9, "1": 4}}', '{"t": {"0": 2, "1": 4}}')]))
        assert (metrics.lag, metrics.values()["records-lag-max"]) == ({("t", 0): 7, ("t", 1): 0}, 7.0)
        metrics.add_progress(_progress(1, 1, sources=[_source('{"t": {"0": 9, "1": 4}}', '{"t": {"0": 9, "1": 4}}')]))
        assert (metrics.lag, metrics.values()["records-lag-max"]) == ({("t", 0): 0, ("t", 1): 0}, 0.0)


class TestPayload:
    def test_one_update_per_batch_with_kafka_names(self) -> None:
        """After a batch the values are the application's totals, the sink's, process-total
        (= input-records-total) and the windowed values (NaN sent as null), with the lag list;
        unregistered, the batch is counted and nothing is sent."""
        publisher = MetricsPublisher("orders")
        publisher.operations = OperationsMetrics(clock=FakeClock())
        sink = SimpleNamespace(emitted_total=2, dead_letters=1)
        counted = {"input-records-total": 4.0, "dropped-records-total": 1.0, "emit-final-latency-max": math.nan}
        progress = _progress(4, 50, 3, 4, [_source('{"t": {"0": 4}}', '{"t": {"0": 4}}')])
        assert publisher.publish(progress, lambda: publisher.totals(counted, sink)) is None
        assert publisher.payload(publisher.totals(counted, sink)) == {
            "values": {
                "commit-latency-avg": 7.0, "commit-latency-max": 7.0, "dead-letter-records-total": 1.0,
                "dropped-records-total": 1.0, "emit-final-latency-max": None, "input-records-total": 4.0,
                "output-records-total": 2.0, "process-latency-avg": 50.0, "process-latency-max": 50.0,
                "process-rate": 4000.0, "process-total": 4.0, "records-lag-max": 0.0,
            },
            "lag": [["t", 0, 0]],
        }
        assert publisher.totals(counted, None)["output-records-total"] == 0.0

    def test_defaults_name_spark_settings(self) -> None:
        """The settings are Spark's keys for the Prometheus servlet, Spark's query source and a
        stable namespace."""
        assert METRICS_DEFAULTS == {
            "spark.metrics.conf.*.sink.prometheusServlet.class": "org.apache.spark.metrics.sink.PrometheusServlet",
            "spark.metrics.conf.*.sink.prometheusServlet.path": "/metrics/prometheus",
            "spark.sql.streaming.metricsEnabled": "true",
            "spark.metrics.namespace": "${spark.app.name}",
        }


@pytest.mark.spark
class TestMetricsSource:
    def test_source_in_the_driver_metrics_system_and_the_labelled_text(self, spark: Any) -> None:
        """The jar's source is registered under streamsdsl.<application.id>, takes one JSON update
        per batch (totals as counters, the rest gauges, a new partition's lag registered on the
        way), renders Prometheus text with labels, and is gone after remove()."""
        jvm = spark._jvm
        source = getattr(jvm, SOURCE_CLASS).register("ops-unit")
        try:
            metrics_system = jvm.org.apache.spark.SparkEnv.get().metricsSystem()
            assert metrics_system.getSourcesByName("streamsdsl.ops-unit").size() == 1
            source.update(json.dumps({"values": {"process-total": 3, "process-latency-avg": None},
                                      "lag": [["t\"x", 0, 2]]}))
            source.update(json.dumps({"values": {"process-total": 5, "process-latency-avg": 12.5},
                                      "lag": [["t\"x", 0, 0], ["t\"x", 1, 4]]}))
            assert source.value("process-total") == 5.0
            registry = source.metricRegistry()
            assert registry.getCounters().get("process-total").getCount() == 5
            assert registry.getGauges().get("records-lag.t\"x.1").getValue() == 4
            # Spark's registry got the partition added by the second update too (Spark's servlet).
            with urllib.request.urlopen(spark.sparkContext.uiWebUrl + "/metrics/prometheus", timeout=30) as page:
                spark_lines = [line for line in page.read().decode().splitlines() if "_ops_unit_" in line]
            assert sorted(spark_lines) == [
                'metrics_streamsdsl_driver_streamsdsl_ops_unit_process_latency_avg_Number{type="gauges"} 12.5',
                'metrics_streamsdsl_driver_streamsdsl_ops_unit_process_latency_avg_Value{type="gauges"} 12.5',
                'metrics_streamsdsl_driver_streamsdsl_ops_unit_process_total_Count{type="counters"} 5',
                'metrics_streamsdsl_driver_streamsdsl_ops_unit_records_lag_t_x_0_Number{type="gauges"} 0',
                'metrics_streamsdsl_driver_streamsdsl_ops_unit_records_lag_t_x_0_Value{type="gauges"} 0',
                'metrics_streamsdsl_driver_streamsdsl_ops_unit_records_lag_t_x_1_Number{type="gauges"} 4',
                'metrics_streamsdsl_driver_streamsdsl_ops_unit_records_lag_t_x_1_Value{type="gauges"} 4',
            ]
            text = getattr(jvm, SOURCE_CLASS).prometheusText()
            ours = [line for line in text.splitlines() if 'ops-unit' in line or line.startswith("# TYPE")]
            assert ours == [
                "# TYPE streamsdsl_process_latency_avg gauge",
                'streamsdsl_process_latency_avg{application_id="ops-unit"} 12.5',
                "# TYPE streamsdsl_process_total counter",
                'streamsdsl_process_total{application_id="ops-unit"} 5',
                "# TYPE streamsdsl_records_lag gauge",
                'streamsdsl_records_lag{application_id="ops-unit",topic="t\\"x",partition="0"} 0',
                'streamsdsl_records_lag{application_id="ops-unit",topic="t\\"x",partition="1"} 4',
            ]
            source.update(json.dumps({"values": {"process-total": 6}, "lag": []}))  # no lag reported
            assert "streamsdsl_records_lag{" not in getattr(jvm, SOURCE_CLASS).prometheusText()
        finally:
            source.remove()
        assert metrics_system.getSourcesByName("streamsdsl.ops-unit").size() == 0
        source.update(json.dumps({"values": {"late-total": 1}, "lag": []}))  # removed: ignored
        assert math.isnan(source.value("late-total"))
        assert "ops-unit" not in getattr(jvm, SOURCE_CLASS).prometheusText()
