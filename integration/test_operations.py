"""A running application's metrics read from the driver's Prometheus endpoints over HTTP.

The application counts records in 10 s windows emitted on close from a two-partition topic
(every record on partition 0), with one late record, two records per micro-batch
(``max.offsets.per.trigger``), on both connectors. After `KafkaStreams.process_all_available`
the endpoints hold its exact counts: Spark's ``PrometheusServlet`` (``/metrics/prometheus``,
enabled by `streamsdsl.runtime.operations.METRICS_DEFAULTS`, which the shared session is built
with) and the jar's labelled endpoint (``/metrics/streamsdsl/prometheus``); after ``close()``
neither lists the application.
"""

from __future__ import annotations

import re
import urllib.request
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pytest

from streamsdsl import Consumed, EmitStrategy, Produced, Serdes, StreamsBuilder, TimeWindows
from streamsdsl.runtime.app import KafkaStreams, State
from streamsdsl.runtime.operations import METRICS_DEFAULTS, PROMETHEUS_PATH, batch_latencies, records_lag
from streamsdsl.testing.local_kafka import LocalKafka

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from streamsdsl.ir.topology import Topology

pytestmark = [pytest.mark.integration, pytest.mark.spark]

T = 1_700_000_000_000  # a base timestamp (ms)


def _scrape(url: str) -> dict[str, float]:
    """The samples of a Prometheus text page: ``{name{labels}: value}``."""
    with urllib.request.urlopen(url, timeout=30) as response:
        assert response.status == 200
        body = response.read().decode()
    samples = {}
    for line in body.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            samples[name] = float(value)
    return samples


def _spark_name(app_id: str, metric: str) -> str:
    """What Spark's PrometheusServlet calls one of our metrics (namespace: the session's app name),
    ``metric`` ending in its type label."""
    name, brace, labels = metric.partition("{")
    return re.sub(r"[^A-Za-z0-9_]", "_", f"metrics_streamsdsl_driver_streamsdsl_{app_id}_{name}") + brace + labels


@pytest.mark.parametrize("connector", ["python", "jvm"])
def test_prometheus_endpoints_of_a_running_application(
    kafka: LocalKafka,
    new_topic: Callable[..., str],
    streams_config: Callable[..., dict[str, object]],
    spark: SparkSession,
    app_factory: Callable[[Topology, dict[str, Any]], KafkaStreams],
    connector: str,
) -> None:
    """4 records processed, the late one dropped, one window emitted on close; the records lag
    2 after the first batch of two records, 0 on both partitions once caught up; the states
    REBALANCING, RUNNING, PENDING_SHUTDOWN, NOT_RUNNING; the metrics gone after close()."""
    conf = spark.sparkContext.getConf()
    assert {k: conf.get(k) for k in METRICS_DEFAULTS} == METRICS_DEFAULTS, "the session lacks METRICS_DEFAULTS"
    source, sink = new_topic(2), new_topic(1)
    builder = StreamsBuilder()
    (
        builder.stream(source, Consumed.with_serdes(Serdes.String(), Serdes.String()))
        .group_by_key()
        .windowed_by(TimeWindows.of_size_with_no_grace(10_000))
        .emit_strategy(EmitStrategy.on_window_close())
        .count()
        .to_stream()
        .to(sink, Produced.with_serdes(Serdes.String(), Serdes.Long()))
    )
    # a@25 s closes [0 s, 10 s) (emitted on close: count 2); a@3 s is late for it (dropped).
    kafka.produce(source, [(b"a", b"x", T + ts, 0) for ts in (1_000, 2_000, 25_000, 3_000)])
    app = app_factory(builder.build(), streams_config(f"operations-{connector}", {
        "kafka.connector": connector, "max.offsets.per.trigger": 2}))
    app_id = str(app.config.application_id)
    states: list[str] = []
    app.set_state_listener(lambda new, old: states.append(new.value))
    app.start()
    ui = spark.sparkContext.uiWebUrl
    assert ui is not None
    app.process_all_available()
    assert app.state() is State.RUNNING
    query = app.streaming_query
    assert query is not None
    assert [records_lag(p.sources) for p in query.recentProgress if p.numInputRows] == [
        {(source, 0): 2, (source, 1): 0}, {(source, 0): 0, (source, 1): 0}]
    metrics = app.metrics()
    assert (metrics["process-total"], metrics["records-lag-max"]) == (4.0, 0.0)

    ours = _scrape(ui + PROMETHEUS_PATH)
    label = f'application_id="{app_id}"'
    assert {k: v for k, v in ours.items() if label in k and "latency" not in k and "rate" not in k} == {
        f"streamsdsl_batches_total{{{label}}}": metrics["batches-total"],
        f"streamsdsl_dead_letter_records_total{{{label}}}": 0.0,
        f"streamsdsl_dropped_records_total{{{label}}}": 1.0,
        f"streamsdsl_emit_final_records_total{{{label}}}": 1.0,
        f"streamsdsl_input_records_total{{{label}}}": 4.0,
        f"streamsdsl_output_records_total{{{label}}}": 1.0,
        f"streamsdsl_process_total{{{label}}}": 4.0,
        f"streamsdsl_records_lag_max{{{label}}}": 0.0,
        f'streamsdsl_records_lag{{{label},topic="{source}",partition="0"}}': 0.0,
        f'streamsdsl_records_lag{{{label},topic="{source}",partition="1"}}': 0.0,
    }
    assert ours[f"streamsdsl_emit_final_latency_max{{{label}}}"] == metrics["emit-final-latency-max"]
    assert ours[f"streamsdsl_process_latency_max{{{label}}}"] == metrics["process-latency-max"]
    assert ours[f"streamsdsl_process_latency_max{{{label}}}"] >= ours[f"streamsdsl_process_latency_avg{{{label}}}"] > 0
    # A batch's commit can take under a millisecond (Spark reports whole ms): compared with the
    # batches' own reports, not with zero.
    commits = [batch_latencies(p)[1] for p in query.recentProgress]
    assert (ours[f"streamsdsl_commit_latency_max{{{label}}}"], ours[f"streamsdsl_commit_latency_avg{{{label}}}"]) == (
        metrics["commit-latency-max"], metrics["commit-latency-avg"]) == (max(commits), sum(commits) / len(commits))
    assert ours[f"streamsdsl_process_rate{{{label}}}"] > 0

    spark_page = _scrape(ui + "/metrics/prometheus")
    counters, gauges = '{type="counters"}', '{type="gauges"}'
    assert {name: spark_page.get(_spark_name(app_id, name)) for name in (
        f"process-total_Count{counters}", f"dropped-records-total_Count{counters}",
        f"emit-final-records-total_Count{counters}", f"records-lag.{source}.0_Value{gauges}",
        f"records-lag.{source}.1_Value{gauges}",
    )} == {
        f"process-total_Count{counters}": 4.0,
        f"dropped-records-total_Count{counters}": 1.0,
        f"emit-final-records-total_Count{counters}": 1.0,
        f"records-lag.{source}.0_Value{gauges}": 0.0,
        f"records-lag.{source}.1_Value{gauges}": 0.0,
    }
    # Spark's own source of the query (spark.sql.streaming.metricsEnabled), named after it.
    streaming = re.sub(r"[^A-Za-z0-9_]", "_", f"metrics_streamsdsl_driver_spark_streaming_{app_id}_")
    assert f'{streaming}inputRate_total_Value{{type="gauges"}}' in spark_page

    assert app.close(60)
    assert states == ["REBALANCING", "RUNNING", "PENDING_SHUTDOWN", "NOT_RUNNING"]
    assert not [k for k in _scrape(ui + PROMETHEUS_PATH) if label in k]
    assert not [k for k in _scrape(ui + "/metrics/prometheus") if _spark_name(app_id, "") in k]
