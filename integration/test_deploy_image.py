"""The deploy example's image (examples/deploy/Dockerfile, docs/deploy-kubernetes.md), built and run.

No registry answers here, so the official Spark image the Dockerfile starts from cannot be pulled:
the image is built ``FROM`` a local stand-in with the official image's layout
(`streamsdsl.testing.spark_image`), made ``FROM scratch`` of this machine's files, with the
documented commands::

    .venv/bin/python examples/deploy/build_context.py CONTEXT --app examples/deploy/app.py --offline
    docker build --build-arg SPARK_IMAGE=<stand-in> \\
        --build-arg PIP_OPTIONS="--no-index --find-links /tmp/streamsdsl/wheels" -t <tag> CONTEXT

Both images are tagged by a hash of what they are built from and built only when no image has
that tag: the first run on a machine builds them (≈ 1.5 min), later runs reuse them. The
application then runs in a container the way Spark's Kubernetes scheduler starts a driver pod
(the entry point's ``driver`` command, the application as a ``local://`` path in the image), on a
``local-cluster`` master (an executor JVM of its own, started from the image's Spark) and the
host's network, against the integration broker. What cannot run here
is ``spark-submit --master k8s://...`` itself: there is no Kubernetes cluster.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from integration.examples import load_example
from streamsdsl.testing.brokers import _docker_answers, _docker_host
from streamsdsl.testing.local_kafka import LocalKafka

pytestmark = [pytest.mark.integration, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[1]
DEPLOY = ROOT / "examples" / "deploy"
APP_REPOSITORY = "streamsdsl/deploy-example"
PIP_OPTIONS = "--no-index --find-links /tmp/streamsdsl/wheels"
#: The quickstart's orders (examples/quickstart.py): (order id, order, timestamp).
ORDERS = load_example("quickstart").ORDERS


def _app_image_tag(base: str) -> str:
    """``streamsdsl/deploy-example:<hash>``: the hash covers the base image, what the context is
    made of (streamsdsl's sources and build files, examples/deploy, the jars) and the installed
    versions of the requirements."""
    build_context = load_example("deploy/build_context")
    digest = hashlib.sha256(f"{base}\0".encode())
    for dist in build_context.requirements():
        digest.update(f"{dist.metadata['Name']}=={dist.version}\0".encode())
    from streamsdsl.runtime.jvm_connector import connector_jars

    tops = [ROOT / "streamsdsl", DEPLOY, ROOT / "pyproject.toml", ROOT / "setup.py", *map(Path, connector_jars())]
    for top in tops:
        files = [top] if top.is_file() else sorted(p for p in top.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
        for file in files:
            digest.update(f"{file.relative_to(ROOT) if file.is_relative_to(ROOT) else file.name}\0".encode())
            digest.update(hashlib.sha256(file.read_bytes()).digest())
    return f"{APP_REPOSITORY}:{digest.hexdigest()[:12]}"


def _docker(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["docker", "-H", _docker_host(), *args], capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL, check=False)


def _has_image(tag: str) -> bool:
    return _docker("image", "inspect", tag, timeout=60).returncode == 0


def _remove_other_tags(repository: str, keep: str) -> None:
    """Remove the images of ``repository`` other than ``keep`` (built from earlier sources: each
    holds ≈ 0.5 GB of its own); one a container still uses stays."""
    listed = _docker("images", repository, "--format", "{{.Repository}}:{{.Tag}}", timeout=60)
    for ref in listed.stdout.split():
        if ref != keep:
            _docker("rmi", ref, timeout=120)


@pytest.fixture(scope="module")
def image() -> dict[str, Any]:
    """The deploy example's image (and the stand-in base), built unless present; the build times
    when built by this run (else 0)."""
    if not _docker_answers():
        pytest.skip(f"no Docker engine answers at {_docker_host()}: the deploy image needs one to be built and run")
    if shutil.which("docker") is None:
        pytest.skip("the docker command line is not installed (apt-get install docker.io)")
    from streamsdsl.testing.spark_image import build_base_image

    started = time.monotonic()
    base = build_base_image()
    base_seconds = time.monotonic() - started
    tag = _app_image_tag(base)
    app_seconds = 0.0
    if not _has_image(tag):
        started = time.monotonic()
        with tempfile.TemporaryDirectory(prefix="streamsdsl-deploy-context-") as tmp:
            context = Path(tmp) / "context"
            subprocess.run([sys.executable, str(DEPLOY / "build_context.py"), str(context),
                            "--app", str(DEPLOY / "app.py"), "--offline"], check=True, cwd=ROOT,
                           capture_output=True, text=True, stdin=subprocess.DEVNULL)
            done = _docker("build", "--build-arg", f"SPARK_IMAGE={base}", "--build-arg", f"PIP_OPTIONS={PIP_OPTIONS}",
                           "-t", tag, str(context), timeout=900)
            assert done.returncode == 0, f"docker build failed:\n{done.stdout[-4000:]}\n{done.stderr[-4000:]}"
        app_seconds = time.monotonic() - started
    _remove_other_tags(APP_REPOSITORY, tag)
    _remove_other_tags(base.split(":")[0], base)
    return {"tag": tag, "base": base, "base_seconds": base_seconds, "app_seconds": app_seconds}


def test_the_image_has_streamsdsl_its_python_and_the_jars(image: dict[str, Any]) -> None:
    """In the image: Spark's Python processes run the virtual environment's Python 3.11 (the
    image's environment says so), which imports streamsdsl, confluent-kafka's native module and
    PySpark's own dependencies; the JVM operator's jar and Spark's Kafka connector are in
    /opt/spark/jars; the image runs as Spark's user (uid 185)."""
    probe = (
        "import json, os, sys, confluent_kafka, pandas, pyarrow, streamsdsl; from streamsdsl.jvm import jar_path; "
        "print(json.dumps({'python': sys.executable, 'version': sys.version_info[:2], 'uid': os.getuid(), "
        "'env': {k: os.environ.get(k) for k in ('PYSPARK_PYTHON', 'PYSPARK_DRIVER_PYTHON', 'SPARK_HOME')}, "
        "'librdkafka': confluent_kafka.libversion()[0], 'jar': jar_path(), "
        "'jars': sorted(j for j in os.listdir('/opt/spark/jars') if 'kafka' in j or 'streamsdsl' in j)}))"
    )
    done = _docker("run", "--rm", image["tag"], "/opt/streamsdsl/python/bin/python", "-c", probe, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    facts = json.loads(done.stdout.strip().splitlines()[-1])
    python = "/opt/streamsdsl/python/bin/python"
    assert facts["python"] == python and facts["version"] == [3, 11] and facts["uid"] == 185
    assert facts["env"] == {"PYSPARK_PYTHON": python, "PYSPARK_DRIVER_PYTHON": python, "SPARK_HOME": "/opt/spark"}
    assert facts["librdkafka"] == __import__("confluent_kafka").libversion()[0]
    assert facts["jar"].startswith("/opt/streamsdsl/python/lib/python3.11/site-packages/streamsdsl/jars/")
    assert "streamsdsl-operator.jar" in facts["jars"]
    assert any(j.startswith("spark-sql-kafka-0-10_2.13-") for j in facts["jars"]), facts["jars"]
    assert any(j.startswith("kafka-clients-") for j in facts["jars"]), facts["jars"]


def test_the_application_runs_as_a_driver_pod_would_run_it(image: dict[str, Any], kafka: LocalKafka) -> None:
    """The entry point's ``driver`` command (what Spark's Kubernetes scheduler runs in the driver
    pod: spark-submit in client mode) runs the image's application, ``local:///opt/streamsdsl/app/app.py``,
    on an executor of its own (``local-cluster``: a worker and an executor JVM started from the
    image's /opt/spark, whose Python workers run the image's environment), reading with Spark's
    Kafka connector from the image's jars, the count on the JVM operator, one record per
    micro-batch: it writes the quickstart's changelog, keys, values and timestamps."""
    suffix = uuid.uuid4().hex[:8]
    source, sink = f"deploy-orders-{suffix}", f"deploy-counts-{suffix}"
    kafka.create_topic(source, 1)
    kafka.create_topic(sink, 1)
    kafka.produce(source, [(k.encode(), json.dumps(v).encode(), t, 0) for k, v, t in ORDERS])
    done = _docker(
        "run", "--rm", "--network", "host", "-e", "SPARK_DRIVER_BIND_ADDRESS=127.0.0.1", image["tag"],
        "driver", "--master", "local-cluster[1,1,1024]", "--conf", "spark.driver.host=127.0.0.1",
        "--conf", "spark.sql.shuffle.partitions=1",
        "local:///opt/streamsdsl/app/app.py", "--bootstrap-servers", kafka.bootstrap_servers,
        "--input", source, "--output", sink, "--application-id", f"deploy-{suffix}", "--state-dir", "/tmp/state",
        "--connector", "jvm", "--max-offsets-per-trigger", "1", "--until-caught-up",
        timeout=600,
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    errors = "\n".join(line for line in done.stderr.splitlines() if not line.lstrip().startswith("at "))
    assert done.returncode == 0 and lines, f"exit code {done.returncode}:\n{done.stdout[-3000:]}\n{errors[-6000:]}"
    records = [(r.key.decode(), int.from_bytes(r.value, "big", signed=True), r.timestamp) for r in kafka.consume_all(sink)]
    assert records == [("alice", 1, 1_000), ("bob", 1, 2_000), ("alice", 2, 4_000), ("bob", 2, 5_000)]
    assert json.loads(lines[-1])["metrics"]["output-records-total"] == 4


def test_the_docs_show_the_dockerfile() -> None:
    """docs/deploy-kubernetes.md shows examples/deploy/Dockerfile as it is, from its first
    instruction (the header comment left out)."""
    dockerfile = (DEPLOY / "Dockerfile").read_text()
    page = (ROOT / "docs" / "deploy-kubernetes.md").read_text()
    block = page.split("```dockerfile\n", 1)[1].split("```\n", 1)[0]
    assert block == dockerfile[dockerfile.index("ARG SPARK_IMAGE="):]


def test_the_images_are_built_once(image: dict[str, Any]) -> None:
    """Both images carry the hash of what they were built from: a second build is skipped (the
    tags exist), and the base is the stand-in built FROM scratch, not a pulled image."""
    assert _has_image(image["base"]) and _has_image(image["tag"])
    from streamsdsl.testing.spark_image import base_image_tag, build_base_image

    started = time.monotonic()
    assert build_base_image() == image["base"] == base_image_tag()
    assert time.monotonic() - started < 10
    print(f"deploy image {image['tag']}: base {image['base_seconds']:.1f} s, application image {image['app_seconds']:.1f} s "
          f"(0 when present)", file=sys.stderr)
