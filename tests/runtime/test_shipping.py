"""What streamsdsl ships to a cluster whose Python lacks it (`streamsdsl.runtime.shipping`), and
the settings and ``spark-submit`` options that ship it, without Spark (the standalone cluster's
test, `integration/test_standalone_cluster.py`, runs them on Spark)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

from streamsdsl.cli import main as cli_main
from streamsdsl.runtime.session import CODEGEN_DEFAULTS, JAR_DEFAULTS, LOCAL_DEFAULTS, REQUIRED_CONF, configure_spark
from streamsdsl.runtime.session import submit_options
from streamsdsl.runtime.shipping import PROVIDED, PYTHONPATH_CONF, build, distributions, ship_settings
from streamsdsl.testing.standalone import bare_python


class _Builder:
    """A stand-in for ``SparkSession.builder``: records what is configured."""

    def __init__(self, **options: str) -> None:
        self._options = {k.replace("_", "."): v for k, v in options.items()}

    def config(self, key: str, value: str) -> _Builder:
        self._options[key] = value
        return self


def test_ships_streamsdsl_and_what_it_adds_to_pyspark() -> None:
    """streamsdsl's requirements, transitively, without PySpark's own (pandas, pyarrow, protobuf
    are the cluster's) and without extras."""
    names = [d.metadata["Name"].lower() for d in distributions()]
    assert names == ["streamsdsl", "attrs", "confluent-kafka"]
    assert not PROVIDED & set(names)


def test_pure_python_in_one_zip_native_code_in_archives_named_after_their_package() -> None:
    bundle = build()
    (zip_path,) = bundle.py_files
    with zipfile.ZipFile(zip_path) as z:
        names = z.namelist()
    tops = {n.split("/")[0] for n in names}
    assert tops == {"streamsdsl", "attr", "attrs"}
    assert "streamsdsl/__init__.py" in names and "streamsdsl/log4j2.properties" in names
    assert not [n for n in names if "__pycache__" in n]
    # each module's bytecode beside its source (a zip gets no bytecode cache), and nothing else compiled
    assert {n for n in names if n.endswith(".pyc")} == {n + "c" for n in names if n.endswith(".py")}
    archives = dict(reversed(a.split("#")) for a in bundle.archives)
    assert sorted(archives) == ["confluent_kafka", "confluent_kafka.libs"]
    with tarfile.open(archives["confluent_kafka"]) as t:  # the package's contents at the archive's root
        members = t.getnames()
    assert "__init__.py" in members and any(m.startswith("cimpl") and m.endswith(".so") for m in members)
    assert sorted(os.listdir(bundle.directory / "site")) == ["confluent_kafka", "confluent_kafka.libs"]
    assert bundle.python_tag == f"cp{sys.version_info.major}{sys.version_info.minor}-{os.uname().machine}"


def test_built_once_per_content() -> None:
    first = build()
    mtime = os.stat(first.py_files[0]).st_mtime_ns
    assert build() == first and os.stat(first.py_files[0]).st_mtime_ns == mtime


def test_a_python_without_streamsdsl_imports_it_from_the_bundle() -> None:
    """The bare interpreter (PySpark's dependencies only) cannot import streamsdsl, attrs or
    confluent-kafka; with the bundle's paths it imports all three, streamsdsl from the zip and
    confluent-kafka's native module (librdkafka from its ``.libs`` sibling)."""
    python = bare_python()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    probe = ("import streamsdsl, attrs, confluent_kafka; print(streamsdsl.__file__); "
             "print(confluent_kafka.libversion()[0])")
    bare = subprocess.run([python, "-c", probe], env=env, capture_output=True, text=True, cwd="/", check=False)
    assert bare.returncode == 1 and "No module named 'streamsdsl'" in bare.stderr
    bundle = build()
    shipped = subprocess.run([python, "-c", probe], env={**env, "PYTHONPATH": os.pathsep.join(bundle.python_path)},
                             capture_output=True, text=True, cwd="/", check=False)
    assert shipped.returncode == 0, shipped.stderr
    module, librdkafka = shipped.stdout.split()
    assert module == os.path.join(bundle.py_files[0], "streamsdsl", "__init__.pyc")  # its bytecode
    assert librdkafka.count(".") == 2


def test_a_module_from_the_zip_runs_its_bytecode_and_shows_its_source_in_a_traceback() -> None:
    """The bare interpreter imports streamsdsl's modules from the zip's bytecode (compiling
    nothing), and an error raised there shows the zip's member and its source line."""
    bundle = build()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    probe = ("import sys, traceback\n"
             "from streamsdsl.runtime import lifecycle\n"
             "print(lifecycle.__spec__.origin)\n"
             "try:\n"
             "    lifecycle.seconds(-1)\n"
             "except Exception:\n"
             "    traceback.print_exc(file=sys.stdout)\n")
    done = subprocess.run([bare_python(), "-B", "-c", probe], capture_output=True, text=True, cwd="/", check=False,
                          env={**env, "PYTHONPATH": os.pathsep.join(bundle.python_path)})
    assert done.returncode == 0, done.stderr
    origin, *trace = done.stdout.splitlines()
    assert origin == os.path.join(bundle.py_files[0], "streamsdsl", "runtime", "lifecycle.pyc")
    zip_name = os.path.basename(bundle.py_files[0])
    frame = next(i for i, line in enumerate(trace) if f"{zip_name}/streamsdsl/runtime/lifecycle.py" in line)
    assert "raise InvalidArgumentError" in trace[frame + 1]


def _yarn_container(tmp_path: Path) -> Path:
    """A YARN container's directory as a NodeManager makes it for ``--archives`` and ``--py-files``:
    each archive unpacked in a cache directory of its own (named after the archive file) and linked
    into the container under the archive's alias; the zip beside them."""
    bundle, container = build(), tmp_path / "container"
    container.mkdir()
    for number, archive in enumerate(bundle.archives):
        path, alias = archive.split("#")
        unpacked = tmp_path / "filecache" / str(number) / os.path.basename(path)
        unpacked.mkdir(parents=True)
        with tarfile.open(path) as tar:
            tar.extractall(unpacked, filter="data")
        (container / alias).symlink_to(unpacked, target_is_directory=True)
    for zip_file in bundle.py_files:
        shutil.copy(zip_file, container)
    return container


def test_on_yarn_the_driver_imports_confluent_kafka_linked_into_its_container(tmp_path: Path) -> None:
    """A driver in YARN's cluster mode: its script's directory, not the container's, is first on
    ``sys.path``, the zip on ``PYTHONPATH``, confluent-kafka a link into YARN's cache (where
    ``$ORIGIN/../confluent_kafka.libs`` is not). Importing streamsdsl from the zip makes
    confluent-kafka importable from the container, librdkafka loaded from its linked ``.libs``."""
    container = _yarn_container(tmp_path)
    probe = ("import streamsdsl, confluent_kafka; print(streamsdsl.__file__); print(confluent_kafka.__file__); "
             "print(confluent_kafka.libversion()[0])")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = os.pathsep.join(str(container / os.path.basename(z)) for z in build().py_files)
    done = subprocess.run([bare_python(), "-c", probe], env=env, capture_output=True, text=True, cwd="/", check=False)
    assert done.returncode == 0, done.stderr
    module, kafka, version = done.stdout.split()
    assert module.startswith(str(container)) and kafka == str(container / "confluent_kafka" / "__init__.py")
    assert version.count(".") == 2


def test_on_yarn_an_executor_loads_librdkafka_linked_beside_confluent_kafka(tmp_path: Path) -> None:
    """A YARN executor's Python worker: the container's directory first on ``sys.path`` (Spark's
    files directory), streamsdsl from a zip elsewhere (on one machine, the bundle's own path).
    Without streamsdsl, confluent-kafka linked into the container fails to find librdkafka;
    after importing streamsdsl it loads."""
    container = _yarn_container(tmp_path)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    alone = subprocess.run([bare_python(), "-c", "import confluent_kafka"], env=env, capture_output=True, text=True,
                           cwd=container, check=False)
    assert alone.returncode == 1 and "librdkafka" in alone.stderr and "cannot open shared object" in alone.stderr
    env["PYTHONPATH"] = os.pathsep.join(build().py_files)
    probe = ("import sys; sys.path.insert(0, '.'); import streamsdsl, confluent_kafka; "
             "print(confluent_kafka.__file__); print(confluent_kafka.libversion()[0])")
    done = subprocess.run([bare_python(), "-c", probe], env=env, capture_output=True, text=True, cwd=container,
                          check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split()[0] == str(container / "confluent_kafka" / "__init__.py")


@pytest.mark.parametrize(("master", "ship", "shipped"), [
    ("local[2]", None, False), ("local-cluster[2,1,1024]", None, False), ("spark://h:7077", None, True),
    ("yarn", None, True), ("k8s://https://h:6443", None, True), ("local[2]", True, True), ("yarn", False, False),
])
def test_shipped_on_a_clusters_master_or_when_asked(master: str, ship: bool | None, shipped: bool) -> None:
    assert bool(ship_settings({}, master, ship)) is shipped


def test_settings_keep_the_users_entries_first() -> None:
    bundle = build()
    settings = ship_settings({"spark.submit.pyFiles": "/app/lib.zip", PYTHONPATH_CONF: "/opt/extra"}, "yarn")
    assert settings["spark.submit.pyFiles"] == f"/app/lib.zip,{bundle.py_files[0]}"
    assert settings["spark.files"] == bundle.py_files[0]
    assert settings["spark.archives"] == ",".join(bundle.archives)
    assert settings[PYTHONPATH_CONF] == os.pathsep.join(["/opt/extra", *bundle.python_path])
    assert ship_settings({**settings}, "yarn") == {}  # already shipped: nothing to add


def test_configure_spark_ships_to_the_builders_cluster_master() -> None:
    bundle = build()
    on_cluster = configure_spark(_Builder(spark_master="spark://h:7077"))._options
    assert on_cluster["spark.submit.pyFiles"] == bundle.py_files[0]
    assert on_cluster["spark.archives"] == ",".join(bundle.archives)
    local = configure_spark(_Builder(spark_master="local[2]"))._options
    assert "spark.submit.pyFiles" not in local and "spark.archives" not in local
    assert configure_spark(_Builder(spark_master="local[2]"), ship=True)._options["spark.archives"] == ",".join(
        bundle.archives)


def test_streamsdsl_ship_prints_the_spark_submit_options(capsys: pytest.CaptureFixture[str]) -> None:
    """``spark-submit $(streamsdsl ship) app.py``: the jars, the bundle and the settings a session
    of the user's own needs, on one line that the shell's word splitting of ``$(...)`` cuts into
    exactly those arguments."""
    assert cli_main(["ship"]) == 0
    line = capsys.readouterr().out.strip()
    options = line.split()
    split_by_bash = subprocess.run(["bash", "-c", 'printf "%s\n" $(cat)'], input=line, capture_output=True,
                                   text=True, check=True, cwd="/").stdout.splitlines()
    assert split_by_bash == options
    assert options == submit_options()
    bundle = build()
    assert options[:2] == ["--jars", options[1]] and options[1].split(",")[0].endswith("streamsdsl-operator.jar")
    assert options[2:6] == ["--py-files", bundle.py_files[0], "--archives", ",".join(bundle.archives)]
    confs = [options[i + 1] for i, o in enumerate(options) if o == "--conf"]
    assert confs[0] == f"{PYTHONPATH_CONF}={os.pathsep.join(bundle.python_path)}"
    assert {c.split("=", 1)[0] for c in confs[1:]} >= set(REQUIRED_CONF)
    assert cli_main(["ship", "extra"]) == 2


def test_configure_spark_on_a_connect_builder_ships_nothing() -> None:
    """A Spark Connect builder: the jars, the bundle and the workers' Python are the server's
    (a client's value is refused), so only the session settings streamsdsl needs are set."""
    options = configure_spark(_Builder(spark_remote="sc://127.0.0.1:15002"))._options
    assert {k: options[k] for k in REQUIRED_CONF} == REQUIRED_CONF
    assert not {"spark.jars", "spark.submit.pyFiles", "spark.archives", "spark.pyspark.python"} & set(options)


def test_the_checkpoint_file_manager_in_the_jar_is_set_where_the_jar_is_loaded() -> None:
    """`JAR_DEFAULTS` (the checkpoint's local files written with Java's file API) come with the
    operator's jar: in ``configure_spark`` and ``streamsdsl ship`` unless the user set the key,
    never on a Spark Connect builder (the server's class path is its own)."""
    (key, value), = JAR_DEFAULTS.items()
    assert value == "io.streamsdsl.jvm.LocalCheckpointFileManager"
    assert configure_spark(_Builder(spark_master="local[2]"))._options[key] == value
    mine = "org.apache.spark.sql.execution.streaming.checkpointing.FileContextBasedCheckpointFileManager"
    assert configure_spark(_Builder(**{"spark_master": "local[2]", key.replace(".", "_"): mine}))._options[key] == mine
    assert f"{key}={value}" in submit_options()
    assert key not in configure_spark(_Builder(spark_remote="sc://127.0.0.1:15002"))._options


def test_the_cache_of_generated_code_holds_2000_classes_unless_the_user_says_otherwise() -> None:
    """`CODEGEN_DEFAULTS` (Spark's cache of compiled generated classes: 2,000 instead of Spark's
    100) in the sessions streamsdsl builds, on a cluster's master too, in ``configure_spark`` and
    ``streamsdsl ship`` unless the user set the key; not on a Spark Connect builder (a static
    setting of the server)."""
    key = "spark.sql.codegen.cache.maxEntries"
    assert CODEGEN_DEFAULTS == {key: "2000"} and LOCAL_DEFAULTS[key] == "2000"
    from streamsdsl.runtime.session import CLUSTER_DEFAULTS

    assert CLUSTER_DEFAULTS[key] == "2000"
    assert configure_spark(_Builder(spark_master="local[2]"))._options[key] == "2000"
    assert configure_spark(_Builder(**{"spark_master": "local[2]", key.replace(".", "_"): "50"}))._options[key] == "50"
    assert f"{key}=2000" in submit_options()
    assert key not in configure_spark(_Builder(spark_remote="sc://127.0.0.1:15002"))._options

