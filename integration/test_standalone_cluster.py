"""A real Spark standalone cluster whose workers lack streamsdsl (issue 40, items 1 and 2).

One `StandaloneCluster` per run of this file: a master and two workers started from the installed
PySpark as separate processes, whose Python (`bare_python`) has PySpark's dependencies only. The
application of `integration.standalone_app` (a Kafka source, a stream–table join, the JVM
operator's session count, a Python aggregation, the Kafka sink) runs on it in two steps, each a
new driver process started outside the checkout (so no Python imports streamsdsl from the working
directory):

1. ``python standalone_app.py`` (client mode): its config names the master and the workers'
   interpreter, nothing else about Spark; streamsdsl builds the session and ships itself;
2. ``spark-submit $(streamsdsl ship) standalone_app.py``: a session of the application's own
   (``SparkSession.builder.getOrCreate()``), given streamsdsl by the printed options, restarting
   from the first step's checkpoint.

The tests compare what both steps wrote with the test driver's output for the same input, and
check that the session sized its shuffle to the topics and that the executors ran the bare Python
(without shipping they fail with `PythonWorkerError`: tests/runtime/test_worker_python.py). Everything runs once
(`_runs`); the tests read its results. They live in one file so that ``make test``'s xdist
workers (``--dist loadfile``) start one cluster.
"""

from __future__ import annotations

import http.server
import json
import os
import shlex
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from integration.standalone_app import BASE, ROLES, build_topology, steps
from streamsdsl import Serdes, TopologyTestDriver
from streamsdsl.testing.jvm_options import SHORT_LIVED
from streamsdsl.testing.local_kafka import LocalKafka
from streamsdsl.testing.standalone import ClusterError, StandaloneCluster, bare_python, spark_home

pytestmark = [pytest.mark.integration, pytest.mark.cluster, pytest.mark.slow]

APP = Path(__file__).with_name("standalone_app.py")


@pytest.fixture(scope="module")
def cluster() -> Iterator[StandaloneCluster]:
    with StandaloneCluster(workers=2, cores=1, memory="1200m", python=bare_python(), java_options=SHORT_LIVED) as running:
        yield running


def _driver_env() -> dict[str, str]:
    """The drivers' environment: this interpreter (which has streamsdsl installed) for the driver,
    no master from the test run's environment."""
    env = {k: v for k, v in os.environ.items() if k not in ("STREAMSDSL_SPARK_MASTER", "PYTHONPATH")}
    env.update({"PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable})
    return env


def _run(argv: list[str], cwd: Path, what: str, cluster: StandaloneCluster) -> dict[str, Any]:
    done = subprocess.run(argv, cwd=cwd, env=_driver_env(), capture_output=True, text=True, timeout=400,
                          stdin=subprocess.DEVNULL)
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    assert done.returncode == 0 and lines, (
        f"{what} failed (exit code {done.returncode}):\n{done.stderr[-4000:]}\n{cluster.executor_logs()[-4000:]}")
    return dict(json.loads(lines[-1]))


@pytest.fixture(scope="module")
def runs(cluster: StandaloneCluster, kafka: LocalKafka, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Both steps of the application: their JSON lines, the outputs after each, the topics."""
    work = tmp_path_factory.mktemp("standalone-driver")  # the drivers' working directory: not the checkout
    topics = {role: f"standalone-{role}-{os.getpid()}" for role in ROLES}
    for topic in topics.values():
        kafka.create_topic(topic, 2)
    args = {"bootstrap": kafka.bootstrap_servers, "topics": topics, "state_dir": str(work / "state"),
            "application_id": f"standalone-{os.getpid()}", "master": cluster.master_url, "python": cluster.python}
    out: dict[str, Any] = {"topics": topics}
    first, second = steps()
    _produce(kafka, topics, first)
    out["client"] = _run([sys.executable, str(APP), json.dumps(args)], work, "the client-mode step", cluster)
    out["after_client"] = _outputs(kafka, topics)
    out["written_after_client"] = _written(kafka, topics)
    _produce(kafka, topics, second)
    ship = subprocess.run([sys.executable, "-m", "streamsdsl.cli", "ship"], capture_output=True, text=True, check=True,
                          env=_driver_env(), cwd=work).stdout.strip()
    out["ship_options"] = ship.split()
    # the line of docs/deploy.md, run by a shell: spark-submit ... $(streamsdsl ship) app.py
    submit = (f"{shlex.quote(os.path.join(spark_home(), 'bin', 'spark-submit'))} --master {cluster.master_url} "
              f"--conf spark.pyspark.python={shlex.quote(cluster.python)} "
              f"--conf spark.pyspark.driver.python={shlex.quote(sys.executable)} "
              f"$({shlex.quote(sys.executable)} -m streamsdsl.cli ship) {shlex.quote(str(APP))} "
              f"{shlex.quote(json.dumps({**args, 'own_session': True}))}")
    out["submit"] = _run(["bash", "-c", submit], work, "the spark-submit step", cluster)
    out["outputs"] = _outputs(kafka, topics)
    out["written"] = _written(kafka, topics)
    out["applications"] = cluster.applications()
    return out


def _produce(kafka: LocalKafka, topics: dict[str, str], step: list[tuple[str, str, Any, int, int]]) -> None:
    for role in ("customers", "orders"):
        kafka.produce(topics[role], [(k.encode(), json.dumps(v).encode(), t, p) for r, k, v, t, p in step if r == role])


def _outputs(kafka: LocalKafka, topics: dict[str, str]) -> dict[str, list[tuple[str, Any, int]]]:
    """The records of the output topics, in timestamp order; the revenue table's latest record per
    region (what a micro-batch writes of a table's changes depends on how the records fell into
    batches; its latest value does not)."""
    out = {role: sorted(((r.key.decode(), json.loads(r.value), r.timestamp) for r in kafka.consume_all(topics[role])),
                        key=lambda r: (r[2], r[0]))
           for role in ("enriched", "sessions")}
    latest = {r.key.decode(): (r.key.decode(), int.from_bytes(r.value, "big", signed=True), r.timestamp)
              for r in kafka.consume_all(topics["revenue"])}  # one region is on one partition, in offset order
    out["revenue"] = sorted(latest.values())
    return out


def _written(kafka: LocalKafka, topics: dict[str, str]) -> int:
    """How many records the output topics hold."""
    return sum(len(kafka.consume_all(topics[role])) for role in ("enriched", "sessions", "revenue"))


def _driver_outputs(*parts: list[tuple[str, str, Any, int, int]]) -> dict[str, list[tuple[str, Any, int]]]:
    topics = {role: role for role in ROLES}
    with TopologyTestDriver(build_topology(topics)) as driver:
        inputs = {r: driver.create_input_topic(r, Serdes.String(), Serdes.Json()) for r in ("customers", "orders")}
        outputs = {r: driver.create_output_topic(r, Serdes.String(), Serdes.Json()) for r in ("enriched", "sessions")}
        revenue = driver.create_output_topic("revenue", Serdes.String(), Serdes.Long())
        for part in parts:
            for role, key, value, timestamp, _ in part:
                inputs[role].pipe_input(key, value, timestamp)
        out = {r: sorted(((x.key, x.value, x.timestamp) for x in o.read_records_to_list()), key=lambda x: (x[2], x[0]))
               for r, o in outputs.items()}
        out["revenue"] = sorted({x.key: (x.key, x.value, x.timestamp) for x in revenue.read_records_to_list()}.values())
        return out


def test_both_steps_write_the_drivers_records(runs: dict[str, Any]) -> None:
    """On two workers whose Python lacks streamsdsl, the client-mode step and the spark-submit
    step restarted from its checkpoint write exactly what the test driver writes for the same
    input: each enriched order once (c4's, with no customer, not at all; c1's after the move in
    EU), every closed session once, and each region's revenue."""
    expected = _driver_outputs(*steps())
    for role, records in expected.items():
        got = runs["outputs"][role]
        missing, extra = [r for r in records if r not in got], [r for r in got if r not in records]
        assert got == records, f"{role}: missing {missing}, extra {extra}"
    assert len(expected["enriched"]) == 50 and len(expected["sessions"]) == 12 and len(expected["revenue"]) == 3
    assert ("c1", {"amount": 39, "region": "EU"}, BASE + 41_000) in expected["enriched"]


def test_the_first_step_alone_wrote_the_drivers_records_of_its_input(runs: dict[str, Any]) -> None:
    """What the client-mode step wrote before the restart is what the driver writes for the first
    step's input alone: the restart neither lost nor repeated a record."""
    for role, records in _driver_outputs(steps()[0]).items():
        got = runs["after_client"][role]
        missing, extra = [r for r in records if r not in got], [r for r in got if r not in records]
        assert got == records, f"{role}: missing {missing}, extra {extra}"


def test_client_mode_built_and_shipped_the_session(runs: dict[str, Any]) -> None:
    """The config named only the master and the workers' interpreter: the session streamsdsl built
    ran on the standalone master with both executors, the bare Python, the bundle on the Python
    path, and as many shuffle partitions as the source topics have partitions."""
    client = runs["client"]
    assert client["master"].startswith("spark://127.0.0.1:")
    assert (client["executors"], client["shuffle_partitions"], client["state"]) == (2, "2", "NOT_RUNNING")
    assert client["python"] == bare_python()
    assert client["py_files"].endswith("-py.zip") and "/ship/" in client["py_files"]
    assert client["metrics"]["output-records-total"] == runs["written_after_client"]


def test_spark_submit_with_the_ship_options_runs_a_session_of_its_own(runs: dict[str, Any]) -> None:
    """``spark-submit $(streamsdsl ship) app.py``: the application's own session (built by
    spark-submit's options alone) ran on both executors with the bare Python and read only the
    second step's records (it resumed from the checkpoint)."""
    submit, options = runs["submit"], runs["ship_options"]
    assert options[0::2][:3] == ["--jars", "--py-files", "--archives"]
    assert sorted(a.split("#")[1] for a in options[5].split(",")) == ["confluent_kafka", "confluent_kafka.libs"]
    assert (submit["executors"], submit["state"], submit["python"]) == (2, "NOT_RUNNING", bare_python())
    assert submit["metrics"]["output-records-total"] == runs["written"] - runs["written_after_client"]
    names = [app["name"] for app in runs["applications"]]
    assert len(names) == 2, names


class _OtherPage(http.server.BaseHTTPRequestHandler):
    """Another process's web page (a Spark UI's HTML) on the port the cluster chose for its master."""

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        body = b"<!DOCTYPE html><html><body>another Spark UI</body></html>"
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


def test_a_cluster_that_fails_to_start_leaves_nothing_behind() -> None:
    """A worker that cannot start (an invalid ``--memory``) fails `StandaloneCluster.start` with
    `ClusterError` carrying its log; the master it had started is stopped (its whole process
    group) and the cluster's directory removed. Before that, the web UI port the cluster chose
    was taken by another server (a port is free when chosen and can be taken before the master
    binds it): what answers there is not taken for the master, which exits rather than bind the
    next port, and starts again on two other ports."""
    cluster = StandaloneCluster(workers=1, memory="lots", python=bare_python(), start_timeout_s=60)
    other = http.server.HTTPServer(("127.0.0.1", cluster.ui_port), _OtherPage)
    threading.Thread(target=other.serve_forever, daemon=True).start()
    taken = cluster.ui_port
    try:
        assert cluster.state() is None  # an HTML page is not the master's state
        with pytest.raises(ClusterError, match=r"worker-0 exited with code \d+ .*\n--- worker-0:"):
            cluster.start()
    finally:
        other.shutdown()
        other.server_close()
    assert cluster.ui_port != taken  # the master started again, elsewhere
    assert not cluster.directory.exists()
    assert cluster.state() is None  # the master's web UI no longer answers


def test_stopping_the_cluster_stops_every_process_and_removes_its_files(cluster: StandaloneCluster,
                                                                        runs: dict[str, Any]) -> None:
    """After the applications ran: `StandaloneCluster.stop` ends the master, the workers and their
    executors (every process of their groups) and removes the work directories and logs."""
    groups = [p.pid for _, p in cluster._processes]
    assert len(groups) == 3
    cluster.stop()
    for group in groups:
        with pytest.raises(ProcessLookupError):
            os.killpg(group, 0)
    assert not cluster.directory.exists() and cluster.state() is None
