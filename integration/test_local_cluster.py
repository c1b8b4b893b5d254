"""Both connectors, both guarantees and the JVM operator on ``local-cluster[2,1,1024]``: a driver
and two executor JVMs, each with its own Python workers (issue 27, item 4; PLATFORM.md: what
ships code to executors is tested once there).

One subprocess (`integration.local_cluster_source`, run once by `local_cluster_run`: a local
cluster starts in ≈ 30 s) reads with streamsdsl's source, runs an application on Spark's
connector, an exactly-once count and the JVM operator; the tests below check its results. They live in one
file so that ``make test``'s xdist workers (``--dist loadfile``) run that subprocess once.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from integration.local_cluster_source import local_cluster_run
from integration.test_faults import _assert_exactly_once, _committed_counts
from integration.fault_app import count_topology
from streamsdsl.testing.local_kafka import LocalKafka

pytestmark = [pytest.mark.integration, pytest.mark.cluster]


# -- streamsdsl's Kafka source ------------------------------------------------------------------
@pytest.mark.slow
def test_streaming_read_on_a_multi_process_cluster(
    kafka: LocalKafka, new_topic: Callable[..., str], tmp_path_factory: pytest.TempPathFactory
) -> None:
    """On ``local-cluster[2,1,1024]`` (two executor JVMs, their own Python workers, pooled
    consumers reused across micro-batches there) a rate-limited availableNow query reads every
    record exactly once, in batches of maxOffsetsPerTrigger."""
    out, records = local_cluster_run(kafka, new_topic, tmp_path_factory)
    assert (out["finished"], out["error"], out["executors"]) == (True, None, 2)
    assert [len(b) for b in out["batches"]] == [10, 10, 10, 10]
    got = sorted((tuple(r) for b in out["batches"] for r in b), key=lambda r: (r[2], r[3]))
    # partition i % 2, offset i // 2
    expected = [(k.decode(), v.decode(), p, i // 2, ts) for i, (k, v, ts, p) in enumerate(records)]
    assert got == sorted(expected, key=lambda r: (r[2], r[3]))


# -- Spark's Kafka connector -----------------------------------------------------------------
@pytest.mark.slow
def test_jvm_connector_on_a_multi_process_cluster(
    kafka: LocalKafka, new_topic: Callable[..., str], tmp_path_factory: pytest.TempPathFactory
) -> None:
    """On ``local-cluster[2,1,1024]`` (two executor JVMs: the connector's jars reach them through
    ``spark.jars`` from the user's cache) an application with ``kafka.connector = "jvm"`` copies
    every record once, upper-cased, keeping keys, partitions' order and timestamps (the same
    subprocess run as the Python source's test in test_kafka_io.py)."""
    out, records = local_cluster_run(kafka, new_topic, tmp_path_factory)
    assert out["executors"] == 2
    assert out["jvm_app"] == {"closed": True, "state": "NOT_RUNNING", "input": 40.0, "output": 40.0}
    got = sorted((r.key, r.value, r.timestamp) for r in kafka.consume_all(out["sink"]))
    assert got == sorted((k, v.upper(), ts) for k, v, ts, _ in records)


# -- exactly-once --------------------------------------------------------------------------------
def _marker(kafka: LocalKafka, group: str, topic: str) -> dict[str, Any] | None:
    """The exactly-once marker the task group ``group`` committed (its offset's metadata)."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": kafka.bootstrap_servers, "group.id": group,
                         "isolation.level": "read_committed", "enable.auto.commit": False})
    try:
        tp = consumer.committed([TopicPartition(topic, 0)], timeout=30)[0]
    finally:
        consumer.close()
    return json.loads(tp.metadata) if tp.offset >= 0 and tp.metadata else None


@pytest.mark.slow
def test_exactly_once_on_a_multi_process_cluster(
    kafka: LocalKafka, new_topic: Callable[..., str], tmp_path_factory: pytest.TempPathFactory
) -> None:
    """On ``local-cluster[2,1,1024]`` (two executor JVMs with their own Python workers) the
    exactly-once application counts 1,200 records in micro-batches of 300: the executors' tasks
    wrote in transactions (each task group's marker names the query and a micro-batch, with the
    records it wrote, together the 4 batches x 40 keys), and a ``read_committed`` reader sees
    every count once and the exact final counts. (The local cluster's one session also runs the
    connectors' tests: `integration.local_cluster_source`.)"""
    run, _ = local_cluster_run(kafka, new_topic, tmp_path_factory)
    eos = run["eos_app"]
    assert (eos["closed"], eos["state"]) == (True, "NOT_RUNNING")
    source, sink, app_id = run["eos_source"], run["eos_sink"], run["eos_app_id"]

    out = _committed_counts(kafka, sink)
    _assert_exactly_once(out, {f"k{k:03d}": 30 for k in range(40)})
    assert len(out) == 4 * 40  # every batch updates every key once
    with open(Path(eos["state_dir"]) / app_id / "checkpoint" / "metadata", encoding="utf-8") as f:
        query_id = json.loads(f.readline())["id"]
    (sink_name,) = [n.name for n in count_topology(source, sink).sinks]
    markers = [_marker(kafka, f"{app_id}-{sink_name}-{p}", sink) for p in range(2)]  # 2 shuffle partitions
    assert all(m is not None and m["query"] == query_id for m in markers), markers
    assert sorted(m["batch"] for m in markers if m) == [3, 3]
    assert sum(m["records"] for m in markers if m) == 40  # batch 3 updated every key once


# -- the JVM operator and Python processors in the executors --------------------------------------
@pytest.mark.slow
def test_code_ships_to_executors_on_a_multi_process_cluster(
    kafka: LocalKafka, new_topic: Callable[..., str], tmp_path_factory: pytest.TempPathFactory
) -> None:
    """In the local cluster's one session, configured with ``streamsdsl.configure_spark``: the JVM
    operator runs in the executors and gives the exact records, and so does the test driver's
    replay of the same count on the Python operator (its per-key host there); a JSON source's check and its error
    message (the jar's static methods in the generated code) run there; a streaming query's packing step
    and Python processor ship there and give the exact records of both micro-batches; and the
    clicks-and-users application (`tests._quiet_table`) closes all 20 sessions there too,
    although its users table stays quiet."""
    from tests.jvm._loading_app import EXPECTED, STREAMING_EXPECTED

    run, _ = local_cluster_run(kafka, new_topic, tmp_path_factory)
    operator = run["operator"]
    assert run["executors"] == 2
    # a JSON source's check and its error, built by the jar in the executors' generated code
    assert operator["source_checks"] == {"kept": 400, "error": (
        "KSTREAM-SOURCE-0000000000: Serdes.Json() cannot deserialize the record value: not valid UTF-8 JSON: "
        "Expecting ':' delimiter at byte 6 (line 1, column 7). Fix the producer or consume the topic with a "
        "matching serde (Consumed.with_serdes), or skip such records with "
        "default.deserialization.exception.handler=log_and_continue (errors.dead.letter.topic keeps them) "
        "(record at topic in partition 0 offset 399)")}
    assert [tuple(r) for r in operator["driver"]] == EXPECTED
    assert [tuple(r) for r in operator["driver_python"]] == EXPECTED
    assert operator["explain_jvm"] is True
    assert operator["streaming"] == STREAMING_EXPECTED
    assert (operator["quiet_sessions"], operator["quiet_as_expected"]) == (20, True)


@pytest.mark.slow
def test_user_processor_on_a_multi_process_cluster(
    kafka: LocalKafka, new_topic: Callable[..., str], tmp_path_factory: pytest.TempPathFactory
) -> None:
    """A user processor with a store (`tests._processor_app`: a task per partition of two, each
    with its own store and stream-time punctuation) runs its kernel in the executors' Python
    workers and writes exactly what it writes on ``local[2]``."""
    from tests import _processor_app

    run, _ = local_cluster_run(kafka, new_topic, tmp_path_factory)
    assert run["executors"] == 2
    assert [tuple(r) for r in run["processors"]] == _processor_app.expected()


@pytest.mark.slow
def test_global_table_join_on_a_multi_process_cluster(
    kafka: LocalKafka, new_topic: Callable[..., str], tmp_path_factory: pytest.TempPathFactory
) -> None:
    """A stream joined with a global table (`tests._global_table_app`: the table bootstrapped in
    the first micro-batch, updated while the query runs, its timestamps far ahead of the stream's)
    runs its operator in the executors' Python workers, two shuffle partitions over two executor
    JVMs, and writes exactly what it writes on ``local[*]``."""
    from tests import _global_table_app

    run, _ = local_cluster_run(kafka, new_topic, tmp_path_factory)
    assert run["executors"] == 2
    assert [tuple(r) for r in run["global_tables"]["enriched"]] == _global_table_app.ENRICHED
    assert run["global_tables"]["counts"] == _global_table_app.COUNTS
    assert run["global_tables"]["store"] == _global_table_app.STORE
