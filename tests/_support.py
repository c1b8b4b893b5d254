"""Helpers shared by test modules (not fixtures)."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

from streamsdsl.compiler import CompiledSink
from streamsdsl.compiler.columns import OUTPUT_POSITION, SOURCE_POSITION
from streamsdsl.runtime.driver import TopologyTestDriver
from streamsdsl.semantics.reference import ReferenceResult


def worker_session_conf() -> dict[str, str]:
    """The settings of a test worker's shared SparkSession (``tests/conftest.py`` and
    ``integration/conftest.py`` build it, whichever runs first): the metrics settings (an xdist
    worker may run ``integration/test_operations.py``, which reads the Prometheus endpoint, on
    it; read when the SparkContext starts), and one partition for the DataFrames built from a
    list (``spark.default.parallelism``; the test driver's input and the state it carries between
    reads), as the pytest plugin users load builds its session (`pytest_plugin.SESSION_CONF`):
    a test's few records in two partitions only double the tasks of each stage below them (a
    read of four stream–stream joins ran 40 tasks, 7 % more CPU). Each suite's ``spark`` fixture
    sets its own shuffle partitions per test. The session's JVM lives as long as the worker and
    compiles with every tier of the JIT (`jvm_options.LONG_LIVED_DRIVER`), where the run's
    other, short-lived JVMs stop at C1."""
    from streamsdsl.runtime.operations import METRICS_DEFAULTS
    from streamsdsl.testing.jvm_options import LONG_LIVED_DRIVER
    from streamsdsl.testing.pytest_plugin import SESSION_CONF

    return {**METRICS_DEFAULTS, **SESSION_CONF, "spark.driver.extraJavaOptions": " ".join(LONG_LIVED_DRIVER)}


def assert_driver_equals_reference(spark: Any, topology: Any, inputs: list[tuple[Any, Any, int]],
                                   expected: ReferenceResult) -> None:
    """Pipe ``(key, value, ts)`` records into topic "in" and compare what topic "out" receives
    (windowed key, window, value, timestamp) and the drop / on-close counts with ``expected``."""
    with TopologyTestDriver(topology, spark=spark) as driver:
        topic = driver.create_input_topic("in")
        for k, v, ts in inputs:
            topic.pipe_input(k, v, ts)
        got = [
            (r.key.key, r.key.window.start, r.key.window.end, r.value, r.timestamp)
            for r in driver.create_output_topic("out").read_records_to_list()
        ]
        metrics = driver.metrics()
    assert got == [(o.key, o.start, o.end, o.value, o.timestamp) for o in expected.outputs]
    assert metrics["dropped-records-total"] == expected.dropped
    assert metrics["emit-final-records-total"] == expected.emitted_final


class Collect:
    """A BatchSink that decodes and keeps every record with its micro-batch id:
    ``records`` holds ``(batch id, key, value, timestamp)`` in output order, ``by_topic`` the
    same per output topic."""

    def __init__(self) -> None:
        self.records: list[tuple[int, Any, Any, int]] = []
        self.by_topic: dict[str, list[tuple[int, Any, Any, int]]] = {}

    def write_batch(self, sink: CompiledSink, rows: Any, batch_id: int) -> None:
        key_serde, value_serde = sink.key_deserializer(), sink.value_serde
        for r in rows.orderBy(SOURCE_POSITION, OUTPUT_POSITION).collect():
            record = (batch_id, None if r["key"] is None else key_serde.deserialize(bytes(r["key"])),
                      None if r["value"] is None else value_serde.deserialize(bytes(r["value"])), r["timestamp"])
            self.records.append(record)
            self.by_topic.setdefault(sink.topic, []).append(record)


def state_rows(spark: Any, checkpoint: str) -> dict[str, list[int]]:
    """The rows each stateful operator of a streaming query's checkpoint holds, read with
    Spark's state data source (``state-metadata``, then ``statestore`` per state variable and
    the registered timers): ``{"windows": [1], "join": [1, 1], "timers": [...], ...}``, one
    count per operator instance, in operator id order. Spark plans an operator once per branch
    below it, so one node can have several instances."""
    counts: dict[str, list[int]] = {}
    for meta in sorted(spark.read.format("state-metadata").load(checkpoint).collect(), key=lambda r: r.operatorId):
        props = json.loads(meta.operatorProperties or "{}")
        def read(option: str, value: str, operator: int = meta.operatorId) -> int:
            return int(spark.read.format("statestore").option("operatorId", operator).option(option, value)
                       .load(checkpoint).count())

        for var in props.get("stateVariables", []):
            if not var["stateName"].startswith("$"):
                counts.setdefault(var["stateName"], []).append(read("stateVarName", var["stateName"]))
        if props.get("timeMode") == "EventTime":
            counts.setdefault("timers", []).append(read("readRegisteredTimers", "true"))
    return counts


def fake_mvn(tmp_path: Path, monkeypatch: Any, body: str) -> None:
    """Put an executable ``mvn`` running the shell ``body`` first on PATH (its arguments in "$@")."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    mvn = bin_dir / "mvn"
    mvn.write_text(f"#!/bin/sh\n{body}\n")
    mvn.chmod(mvn.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
