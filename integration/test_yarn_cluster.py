"""The YARN line of docs/deploy.md, run against a YARN cluster whose Python lacks streamsdsl (issue 40, item 5).

One `YarnCluster` per run of this file: Hadoop's MiniYARNCluster (a ResourceManager and a
NodeManager, the way Spark's own ``YarnClusterSuite`` tests YARN) in a JVM process of its own, its
``yarn-site.xml`` in ``HADOOP_CONF_DIR``, and a ``spark-defaults.conf`` in ``SPARK_CONF_DIR`` with
what a YARN cluster's gateway machine configures once (Spark's jars from the installed PySpark,
``spark.yarn.jars=local:...``, small containers). The command of the docs' "YARN" section is taken
from docs/deploy.md itself and run by a shell with three words put in for this machine (the
cluster's Python is `bare_python`, the environment with PySpark's dependencies only; ``streamsdsl
ship`` is ``python -m streamsdsl.cli ship`` in the checkout's root; ``app.py`` is `integration.standalone_app`, the
standalone cluster's application: a Kafka source, a stream–table join, the JVM operator's session
count, a Python aggregation, the Kafka sink, on the session ``spark-submit`` made)::

    spark-submit --master yarn --deploy-mode cluster \\
        --conf spark.pyspark.python=/opt/cluster-python/bin/python \\
        --conf spark.pyspark.driver.python=/opt/cluster-python/bin/python \\
        $(streamsdsl ship) app.py

In cluster mode the driver runs in the ApplicationMaster's container and its Python is the
cluster's too: it imports streamsdsl from the shipped zip and confluent-kafka from the archives
YARN linked into the container. The application's JSON line is the driver container's ``stdout``.
It runs twice, once per step of the standalone test's input, the second run restarting from the
first's checkpoint; the records written after each are compared with the test driver's for the
same input.

The cluster and the application take minutes of CPU (a ResourceManager, a NodeManager, the
ApplicationMaster's driver and two executors, each a JVM): they run with ``STREAMSDSL_RUN_YARN=1``,
as ``make run-yarn`` does, and ``make test`` runs only the check of the docs' command.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from integration.standalone_app import ROLES, steps
from integration.test_standalone_cluster import _driver_outputs, _outputs, _produce, _written
from streamsdsl.testing.local_kafka import LocalKafka
from streamsdsl.testing.standalone import bare_python, spark_home
from streamsdsl.testing.yarn import YarnCluster

pytestmark = [pytest.mark.integration, pytest.mark.cluster, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[1]
APP = Path(__file__).with_name("standalone_app.py")
#: The environment variable that runs the cluster's tests (``make run-yarn``); without it only the
#: docs' command is checked.
RUN_ENV = "STREAMSDSL_RUN_YARN"
#: The cluster's Python in the docs' command, replaced by `bare_python` here.
DOCS_PYTHON = "/opt/cluster-python/bin/python"
#: ``streamsdsl ship`` of this checkout: run in its root (``python -m`` imports it from there), not
#: with ``PYTHONPATH``, which spark-submit would hand to the application's containers.
SHIP = f"$(cd {shlex.quote(str(ROOT))} && {shlex.quote(sys.executable)} -m streamsdsl.cli ship)"


def docs_command(section: str = "YARN") -> str:
    """The first ``bash`` block of ``## <section>`` in docs/deploy.md, its continued lines joined."""
    text = (ROOT / "docs" / "deploy.md").read_text()
    body = text.split(f"\n## {section}\n", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```bash\n(.*?)```", body, re.DOTALL)
    assert block is not None, f"no bash block in the {section} section of docs/deploy.md"
    return " ".join(line.rstrip("\\").strip() for line in block.group(1).strip().splitlines())


def local_command(docs: str, app_args: str) -> str:
    """The docs' command with this machine's words: the cluster's Python, ``streamsdsl ship``,
    ``spark-submit`` and ``app.py`` (with the application's argument)."""
    out = docs.replace(DOCS_PYTHON, shlex.quote(bare_python()))
    out = out.replace("$(streamsdsl ship)", SHIP)
    out = re.sub(r"^spark-submit ", shlex.quote(os.path.join(spark_home(), "bin", "spark-submit")) + " ", out)
    assert out.endswith(" app.py"), docs
    return out[: -len("app.py")] + f"{shlex.quote(str(APP))} {shlex.quote(app_args)}"


def test_the_docs_yarn_command_is_the_one_this_file_runs() -> None:
    """docs/deploy.md's YARN command is, word for word, the one `runs` hands to a shell, but for
    the cluster's Python, ``streamsdsl ship`` and the application's path and argument."""
    docs = docs_command()
    assert docs == ("spark-submit --master yarn --deploy-mode cluster "
                    f"--conf spark.pyspark.python={DOCS_PYTHON} --conf spark.pyspark.driver.python={DOCS_PYTHON} "
                    "$(streamsdsl ship) app.py")
    python = shlex.quote(bare_python())
    local = local_command(docs, "{}").split(" ")
    assert local[1:] == [*docs.replace(DOCS_PYTHON, python).replace("$(streamsdsl ship)", SHIP).split(" ")[1:-1],
                         shlex.quote(str(APP)), "'{}'"]


@pytest.fixture(scope="module")
def yarn() -> Iterator[YarnCluster]:
    if os.environ.get(RUN_ENV) != "1":
        pytest.skip(f"the YARN cluster's tests run with {RUN_ENV}=1 (make run-yarn): they take minutes of CPU")
    with YarnCluster() as running:
        yield running


@pytest.fixture(scope="module")
def runs(yarn: YarnCluster, kafka: LocalKafka, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The docs' command run twice, once per step of the input, the second restarting from the
    first's checkpoint: each run's JSON line (from its driver container's stdout) and how long its
    submit took, the outputs after each."""
    work = tmp_path_factory.mktemp("yarn-submit")  # the submit's working directory: not the checkout
    topics = {role: f"yarn-{role}-{os.getpid()}" for role in ROLES}
    for topic in topics.values():
        kafka.create_topic(topic, 2)
    args = {"bootstrap": kafka.bootstrap_servers, "topics": topics, "state_dir": str(work / "state"),
            "application_id": f"yarn-{os.getpid()}", "own_session": True}
    command = local_command(docs_command(), json.dumps(args))
    out: dict[str, Any] = {"apps": [], "submit_seconds": [], "outputs": [], "written": [], "stderr": []}
    for step in steps():
        _produce(kafka, topics, step)
        started = time.monotonic()
        done = subprocess.run(["bash", "-c", command], cwd=work, env=yarn.environment(), capture_output=True,
                              text=True, timeout=600, stdin=subprocess.DEVNULL)
        out["submit_seconds"].append(time.monotonic() - started)
        applications = yarn.applications()
        logs = yarn.container_logs(applications[-1]) if applications else {}
        driver = next((text for name, text in logs.items() if name.endswith("_000001/stdout")), "")
        lines = [line for line in driver.splitlines() if line.startswith("{")]
        assert done.returncode == 0 and lines, (
            f"spark-submit failed (exit code {done.returncode}):\n{done.stderr[-4000:]}\n"
            + "\n".join(f"--- {name}\n{text[-3000:]}" for name, text in logs.items()))
        out["apps"].append(json.loads(lines[-1]))
        out["stderr"].append(done.stderr)
        out["outputs"].append(_outputs(kafka, topics))
        out["written"].append(_written(kafka, topics))
    out["applications"] = yarn.applications()
    return out


def test_the_yarn_application_writes_the_drivers_records(runs: dict[str, Any]) -> None:
    """Submitted with the docs' command, once per step, the application writes exactly what the
    test driver writes for the same input: after the first step, the driver's records of the first
    step's input; after the restart from the checkpoint, those of both (each enriched order once,
    every closed session once, each region's revenue): nothing lost, nothing repeated."""
    for after, parts in ((0, steps()[:1]), (1, steps())):
        for role, records in _driver_outputs(*parts).items():
            got = runs["outputs"][after][role]
            missing, extra = [r for r in records if r not in got], [r for r in got if r not in records]
            assert got == records, f"after step {after + 1}, {role}: missing {missing}, extra {extra}"
    first, second = runs["apps"]
    assert first["metrics"]["output-records-total"] == runs["written"][0]
    assert second["metrics"]["output-records-total"] == runs["written"][1] - runs["written"][0]


def test_the_driver_ran_in_a_yarn_container_on_the_clusters_python(runs: dict[str, Any], yarn: YarnCluster) -> None:
    """Cluster mode: each run's driver ran in its ApplicationMaster's container with the cluster's
    Python (no streamsdsl installed), importing streamsdsl from the shipped zip and confluent-kafka
    (native) from the archives YARN linked into the container; two executors; two applications."""
    root = str(yarn.directory.resolve())
    for app, stderr in zip(runs["apps"], runs["stderr"]):
        assert (app["master"], app["deploy_mode"], app["executors"], app["state"]) == (
            "yarn", "cluster", 2, "NOT_RUNNING")
        assert app["python"] == bare_python()
        driver = app["imported"]["driver"]
        assert driver["streamsdsl"].startswith(root) and driver["streamsdsl"].endswith("-py.zip/streamsdsl/__init__.py")
        assert driver["confluent_kafka"].startswith(root) and "/container_" in driver["confluent_kafka"]
        assert "final status: SUCCEEDED" in stderr
    assert len(runs["applications"]) == 2


def test_the_executors_load_confluent_kafka_from_yarns_links(runs: dict[str, Any], yarn: YarnCluster) -> None:
    """On the executors, confluent-kafka comes from the archive YARN unpacked in its cache and
    linked into the container, whose librdkafka streamsdsl loads first (its ``$ORIGIN/..``
    leads into the cache, not the container). streamsdsl comes from a shipped zip: on this one
    machine the bundle's own path (``spark.executorEnv.PYTHONPATH``) exists too and comes first."""
    root = str(yarn.directory.resolve())
    for app in runs["apps"]:
        for executor in app["imported"]["executors"]:
            assert executor["confluent_kafka"].startswith(root) and "/container_" in executor["confluent_kafka"]
            assert executor["streamsdsl"].endswith("-py.zip/streamsdsl/__init__.py"), executor


def test_stopping_the_cluster_leaves_no_process_or_file(yarn: YarnCluster, runs: dict[str, Any]) -> None:
    """`YarnCluster.stop` ends the cluster's JVM and every process of its containers (each in a
    session of its own), and removes the cluster's directory."""
    assert yarn._process is not None
    group = yarn._process.pid
    yarn.stop()
    with pytest.raises(ProcessLookupError):
        os.killpg(group, 0)
    assert yarn.processes() == [] and not yarn.directory.exists()
