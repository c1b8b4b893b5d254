"""docs/deploy-kubernetes.md's ``spark-submit --master k8s://...``, run against a mock Kubernetes API server.

No Kubernetes cluster runs here. The command of the page's "Submit" section is taken from the page
itself and run by a shell against fabric8's mock API server in CRUD mode
(`streamsdsl.testing.kubernetes.KubernetesMock`: it stores what a client creates and answers
reads, but runs nothing), with the image the deploy test builds (`integration.test_deploy_image`)
and four words changed or added for this machine: the master's URL (``k8s://http://127.0.0.1:<port>``),
the image's name, ``spark-submit``'s path, and
``--conf spark.kubernetes.submission.waitAppCompletion=false`` (no pod runs, so the submit must
not wait for it). What the submit asked Kubernetes for is then read back: the driver pod (its
image, service account, the entry point's ``driver`` command with the application's ``local://``
path and arguments, the mounted configuration), the config map holding Spark's settings, the
driver's service. That the image runs that command is `integration.test_deploy_image`'s part.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from integration.test_deploy_image import image  # noqa: F401 - the deploy test's image, built once
from streamsdsl.testing.kubernetes import KubernetesMock
from streamsdsl.testing.standalone import spark_home

pytestmark = [pytest.mark.integration, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[1]
DOCS_MASTER = "k8s://https://kubernetes.example.com:6443"
DOCS_IMAGE = "registry.example.com/orders-app:0.1.0"
NO_WAIT = "--conf spark.kubernetes.submission.waitAppCompletion=false"
APP_ARGS = ["local:///opt/streamsdsl/app/app.py", "--bootstrap-servers", "kafka.streams.svc:9092",
            "--state-dir", "/checkpoints/orders-app"]


def docs_command() -> str:
    """The first ``bash`` block of the "Submit" section of docs/deploy-kubernetes.md, its lines joined."""
    text = (ROOT / "docs" / "deploy-kubernetes.md").read_text()
    body = text.split("\n## Submit\n", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```bash\n(.*?)```", body, re.DOTALL)
    assert block is not None, "no bash block in the Submit section of docs/deploy-kubernetes.md"
    return " ".join(line.rstrip("\\").strip() for line in block.group(1).strip().splitlines())


def local_command(docs: str, master: str, image_tag: str) -> str:
    """The docs' command against ``master`` with ``image_tag``, not waiting for the driver."""
    assert docs.startswith("spark-submit ") and DOCS_MASTER in docs and DOCS_IMAGE in docs, docs
    out = docs.replace(DOCS_MASTER, master).replace(DOCS_IMAGE, image_tag)
    out = out.replace(" local:///", f" {NO_WAIT} local:///", 1)
    return shlex.quote(os.path.join(spark_home(), "bin", "spark-submit")) + out[len("spark-submit"):]


def test_the_docs_submit_command_is_the_one_this_file_runs() -> None:
    """The page's command, word for word, is what `submitted` runs, but for the master's URL, the
    image's name, spark-submit's path and the added ``waitAppCompletion=false``."""
    docs = docs_command()
    assert docs == (f"spark-submit --master {DOCS_MASTER} --deploy-mode cluster --name orders-app "
                    "--conf spark.kubernetes.namespace=streams "
                    "--conf spark.kubernetes.authenticate.driver.serviceAccountName=spark "
                    f"--conf spark.kubernetes.container.image={DOCS_IMAGE} --conf spark.executor.instances=2 "
                    "--conf spark.executor.cores=1 --conf spark.executor.memory=2g " + " ".join(APP_ARGS))
    local = local_command(docs, "k8s://http://127.0.0.1:1", "img:1").split(" ")
    changed = docs.replace(DOCS_MASTER, "k8s://http://127.0.0.1:1").replace(DOCS_IMAGE, "img:1").split(" ")
    assert local[1:] == [*changed[1:-len(APP_ARGS)], *NO_WAIT.split(" "), *APP_ARGS]


@pytest.fixture(scope="module")
def api() -> Iterator[KubernetesMock]:
    with KubernetesMock() as running:
        yield running


@pytest.fixture(scope="module")
def submitted(api: KubernetesMock, image: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:  # noqa: F811
    """The docs' command run once: the objects it created in the namespace ``streams``."""
    command = local_command(docs_command(), api.master, image["tag"])
    started = time.monotonic()
    done = subprocess.run(["bash", "-c", command], cwd=tmp_path_factory.mktemp("k8s-submit"), env=api.environment(),
                          capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, f"spark-submit failed (exit code {done.returncode}):\n{done.stderr[-4000:]}"
    return {"pods": api.objects("pods", "streams"), "configmaps": api.objects("configmaps", "streams"),
            "services": api.objects("services", "streams"), "stderr": done.stderr, "image": image["tag"],
            "seconds": time.monotonic() - started}


def _properties(text: str) -> dict[str, str]:
    """A Java properties file's entries (``key=value``, ``\\``-escapes undone, comments left out)."""
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            key, value = re.split(r"(?<!\\)=", line, maxsplit=1)
            out[re.sub(r"\\(.)", r"\1", key)] = re.sub(r"\\(.)", r"\1", value)
    return out


def test_the_submit_creates_one_driver_pod_of_the_image(submitted: dict[str, Any]) -> None:
    """One pod, the driver (no executor: only a running driver asks for them), from the deploy
    test's image, run by the service account ``spark``, whose container runs the entry point's
    ``driver`` command on the application's ``local://`` path and arguments, never restarted."""
    (pod,) = submitted["pods"]
    assert pod["metadata"]["name"].startswith("orders-app-") and pod["metadata"]["name"].endswith("-driver")
    assert {k: pod["metadata"]["labels"][k] for k in ("spark-role", "spark-app-name")} == {
        "spark-role": "driver", "spark-app-name": "orders-app"}
    spec = pod["spec"]
    (container,) = spec["containers"]
    assert (spec["serviceAccountName"], spec["restartPolicy"], container["image"]) == (
        "spark", "Never", submitted["image"])
    assert container["args"] == ["driver", "--properties-file", "/opt/spark/conf/spark.properties",
                                 "--class", "org.apache.spark.deploy.PythonRunner", *APP_ARGS]
    assert "Deployed Spark application orders-app" in submitted["stderr"]


def test_the_driver_reads_the_submits_settings_from_a_config_map(submitted: dict[str, Any]) -> None:
    """Spark's settings travel in a config map mounted at ``/opt/spark/conf`` in the driver pod:
    the image, the executors' number and size, the namespace, cluster mode; nothing is shipped
    (no ``--py-files``, ``--archives`` or ``--jars``: the image has streamsdsl, its jar and the
    Kafka connector)."""
    (pod,), (config_map,) = submitted["pods"], submitted["configmaps"]
    name = config_map["metadata"]["name"]
    volumes = {v["name"]: v for v in pod["spec"]["volumes"]}
    mounts = {m["mountPath"]: m["name"] for m in pod["spec"]["containers"][0]["volumeMounts"]}
    assert volumes[mounts["/opt/spark/conf"]]["configMap"]["name"] == name
    assert config_map["metadata"]["ownerReferences"][0]["name"] == pod["metadata"]["name"]
    settings = _properties(config_map["data"]["spark.properties"])
    assert {k: settings[k] for k in (
        "spark.kubernetes.container.image", "spark.executor.instances", "spark.executor.cores",
        "spark.executor.memory", "spark.kubernetes.namespace", "spark.submit.deployMode", "spark.app.name",
        "spark.kubernetes.authenticate.driver.serviceAccountName", "spark.kubernetes.resource.type")} == {
        "spark.kubernetes.container.image": submitted["image"], "spark.executor.instances": "2",
        "spark.executor.cores": "1", "spark.executor.memory": "2g", "spark.kubernetes.namespace": "streams",
        "spark.submit.deployMode": "cluster", "spark.app.name": "orders-app",
        "spark.kubernetes.authenticate.driver.serviceAccountName": "spark", "spark.kubernetes.resource.type": "python"}
    assert settings.get("spark.submit.pyFiles", "") == ""
    assert not {"spark.archives", "spark.jars", "spark.files"} & set(settings), sorted(settings)


def test_the_executors_reach_the_driver_through_its_service(submitted: dict[str, Any]) -> None:
    """The driver's service, which the executors connect to (``spark.driver.host``), selects the
    driver pod and exposes the driver's and its block manager's ports."""
    (pod,), (service,), (config_map,) = submitted["pods"], submitted["services"], submitted["configmaps"]
    settings = _properties(config_map["data"]["spark.properties"])
    assert settings["spark.driver.host"] == f"{service['metadata']['name']}.streams.svc"
    selector = service["spec"]["selector"]
    assert all(pod["metadata"]["labels"].get(k) == v for k, v in selector.items()) and selector
    ports = {p["port"] for p in service["spec"]["ports"]}
    assert {int(settings["spark.driver.port"]), int(settings["spark.driver.blockManager.port"])} <= ports


def test_stopping_the_mock_server_leaves_no_process_or_file(api: KubernetesMock, submitted: dict[str, Any]) -> None:
    """`KubernetesMock.stop` ends the server's process group and removes its directory."""
    assert api._process is not None
    group = api._process.pid
    api.stop()
    with pytest.raises(ProcessLookupError):
        os.killpg(group, 0)
    assert not api.directory.exists()
