"""The interpreter of Spark's Python workers, and a quiet session (issue 26, items 1 and 2).

One subprocess starts one SparkSession the way the docs say (``streamsdsl.configure_spark``),
with ``PYSPARK_PYTHON`` unset and a ``python3`` first on the ``PATH`` that cannot import
streamsdsl (what Spark starts its workers with when nobody says otherwise). In that one
session it checks: the workers run this interpreter; workers that run the ``PATH`` ``python3``
fail with one `PythonWorkerError` naming ``PYSPARK_PYTHON``; a failing record prints at most a few
lines on stderr; the session prints no WARN while it starts.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest


ROOT = Path(__file__).resolve().parents[2]

#: A ``sitecustomize`` that makes streamsdsl unimportable (the ``python3`` on the PATH of a
#: machine where streamsdsl is installed in a virtualenv only).
BLOCK_STREAMSDSL = """
import sys

class _NoStreamsDsl:
    def find_spec(self, name, path=None, target=None):
        if name == "streamsdsl" or name.startswith("streamsdsl."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, _NoStreamsDsl())
"""

APP = """
import os, sys
from pyspark.sql import SparkSession
import streamsdsl
from streamsdsl import StreamsBuilder, TopologyTestDriver
from streamsdsl.runtime.session import PythonWorkerError

def mark(text):
    print(text, file=sys.stderr, flush=True)

def run(mapper):
    b = StreamsBuilder()
    b.stream("in").map_values(mapper).to("out")
    with TopologyTestDriver(b.build(), engine="spark", spark=spark) as driver:
        driver.create_input_topic("in").pipe_input("k", "v", 1_000)
        return driver.create_output_topic("out").read_values_to_list()

spark = streamsdsl.configure_spark(SparkSession.builder.master("local[1]").config(
    "spark.sql.shuffle.partitions", "1")).getOrCreate()
mark("SESSION-READY")
print("workers:", spark.sparkContext.parallelize([0], 1).map(lambda _: __import__("sys").executable).collect()
      == [sys.executable])
print("upper:", run(lambda v: v.upper()))

mark("WORKER-ERROR")
spark.sparkContext.pythonExec = "python3"  # as a session built without configure_spark
try:
    run(lambda v: v.upper())
except Exception as exc:
    print("error:", type(exc).__name__, isinstance(exc, streamsdsl.StreamsDslError))
    print("message:", str(exc))
spark.sparkContext.pythonExec = sys.executable

mark("FAILING-RECORD")
try:
    run(lambda v: 1 // 0)
except Exception as exc:
    print("record error:", type(exc).__name__)

mark("STOP-MID-BATCH")
import tempfile, threading, time
from streamsdsl import Serdes
from streamsdsl.runtime.streaming import start_streaming
from streamsdsl.testing.files import FileTopic

work = tempfile.mkdtemp()
topic = FileTopic(os.path.join(work, "in"))
topic.append("in", [("k", "v", 1)], Serdes.String(), Serdes.String())
writing = threading.Event()

class SlowSink:  # still writing when the query stops: its next JVM call is interrupted
    def write_batch(self, sink, rows, batch_id):
        writing.set()
        time.sleep(2)
        rows.count()

b = StreamsBuilder()
b.stream("in").map_values(lambda v: v.upper()).to("out")
query, _, _ = start_streaming(b.build(), lambda n: topic.read_stream(spark, n.topics), SlowSink(),
                              checkpoint_location=os.path.join(work, "checkpoint"))
writing.wait(120)
query.stop()
print("stopped mid-batch:", query.isActive, query.exception())
mark("DONE")
"""


@pytest.fixture(scope="module")
def app_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    """Run `APP` in a fresh interpreter whose PATH ``python3`` lacks streamsdsl; its stdout, stderr."""
    bin_dir = tmp_path_factory.mktemp("bin")
    block = tmp_path_factory.mktemp("block")
    (block / "sitecustomize.py").write_text(BLOCK_STREAMSDSL)
    python3 = bin_dir / "python3"
    python3.write_text(f'#!/bin/sh\nPYTHONPATH="{block}${{PYTHONPATH:+:$PYTHONPATH}}" exec "{sys.executable}" "$@"\n')
    python3.chmod(0o755)
    check = subprocess.run(["python3", "-c", "import streamsdsl"], env={**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"},
                           capture_output=True, text=True)
    assert "No module named 'streamsdsl'" in check.stderr  # the PATH python3 cannot import streamsdsl
    env = {k: v for k, v in os.environ.items() if k not in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON",
                                                            "STREAMSDSL_SPARK_LOG_LEVEL")}
    env.update(PATH=f"{bin_dir}:{os.environ['PATH']}", PYTHONPATH=str(ROOT))
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(APP)], capture_output=True, text=True,
                          timeout=600, env=env, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout, proc.stderr


class TestPythonWorkerErrorText:
    """`python_worker_error` reads a Spark error's text (no Spark needed)."""

    def test_the_same_interpreter_asks_to_install_the_module(self) -> None:
        """Workers that run this very interpreter and miss a module: install it (or fix the
        path); PYSPARK_PYTHON would not help."""
        from streamsdsl.runtime.session import python_worker_error

        error = python_worker_error(
            RuntimeError("PythonException: ... ModuleNotFoundError: No module named 'myapp.functions'"),
            sys.executable)
        assert error is not None and str(error) == (
            "Spark's Python workers cannot import 'myapp' (ModuleNotFoundError: No module named 'myapp.functions'): "
            f"the workers run the same interpreter as the driver ({sys.executable}), so install 'myapp' into it, "
            "or check PYTHONPATH and spark.executorEnv.PYTHONPATH.")

    def test_a_cause_deep_in_the_chain_is_found(self) -> None:
        """The import error may sit in a cause of the error PySpark raises."""
        from streamsdsl.runtime.session import PythonWorkerError, python_worker_error

        try:
            try:
                raise RuntimeError("ImportError: cannot import name 'descriptor' from 'google.protobuf' (unknown)")
            except RuntimeError as inner:
                raise RuntimeError("[PYTHON_EXCEPTION] the query failed") from inner
        except RuntimeError as outer:
            error = python_worker_error(outer, "/usr/bin/python3")
        assert isinstance(error, PythonWorkerError)
        assert str(error).startswith("Spark's Python workers cannot import 'google' (ImportError: cannot import name "
                                     "'descriptor' from 'google.protobuf'): they run /usr/bin/python3, ")

    def test_the_text_ends_at_the_module_name(self) -> None:
        """What follows the module's name is left out: the file of an ``ImportError``, and the
        parenthesis of Python's ``-m`` error when a worker's module itself cannot be imported."""
        from streamsdsl.runtime.session import python_worker_error

        error = python_worker_error(RuntimeError(
            "/usr/bin/python3: Error while finding module specification for 'streamsdsl.runtime.some_daemon' "
            "(ModuleNotFoundError: No module named 'streamsdsl')"), "/usr/bin/python3")
        assert str(error).startswith("Spark's Python workers cannot import 'streamsdsl' (ModuleNotFoundError: "
                                     "No module named 'streamsdsl'): they run /usr/bin/python3, ")

    def test_other_errors_are_not_worker_errors(self) -> None:
        """An error without an import failure is left to the other rules."""
        from streamsdsl.runtime.session import python_worker_error

        assert python_worker_error(RuntimeError("[DIVIDE_BY_ZERO] Division by zero."), "python3") is None


class TestSettings:
    """What `configure_spark` adds to a builder (no session is built)."""

    class Builder:
        """A stand-in for ``SparkSession.builder``."""

        def __init__(self, **options: str) -> None:
            self._options = dict(options)

        def config(self, key: str, value: str) -> "TestSettings.Builder":
            self._options[key] = value
            return self

    def test_the_builders_interpreter_wins_and_becomes_pyspark_python(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """``spark.pyspark.python`` on the builder wins over ``PYSPARK_PYTHON`` (as with
        spark-submit) and is made effective through the environment variable PySpark reads."""
        import streamsdsl

        monkeypatch.setenv("PYSPARK_PYTHON", "/env/python")
        b = streamsdsl.configure_spark(self.Builder(**{"spark.pyspark.python": "/conf/python"}))
        assert (b._options["spark.pyspark.python"], os.environ["PYSPARK_PYTHON"]) == ("/conf/python", "/conf/python")

    def test_the_environment_is_kept_else_this_interpreter(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """Without the setting, ``PYSPARK_PYTHON`` is kept; without both, this interpreter (here
        without the launcher of a local master: tests/runtime/test_python_launcher.py)."""
        import streamsdsl

        monkeypatch.setenv("STREAMSDSL_PYTHON_LAUNCHER", "off")

        monkeypatch.setenv("PYSPARK_PYTHON", "/env/python")
        assert streamsdsl.configure_spark(self.Builder())._options["spark.pyspark.python"] == "/env/python"
        monkeypatch.delenv("PYSPARK_PYTHON")
        assert streamsdsl.configure_spark(self.Builder())._options["spark.pyspark.python"] == sys.executable
        assert os.environ["PYSPARK_PYTHON"] == sys.executable

    def test_the_log4j_configuration_joins_the_users_options_unless_they_name_one(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """streamsdsl's log4j2 file is appended to the JVM options the builder has (the executors'
        too, on a local master); options that already name a log4j configuration, and a console
        progress setting the user chose, are kept as they are."""
        import streamsdsl
        from streamsdsl.runtime.session import log4j2_config_path

        monkeypatch.setenv("PYSPARK_PYTHON", sys.executable)  # configure_spark sets it
        monkeypatch.setenv("STREAMSDSL_CLASS_ARCHIVE", "off")  # tests/runtime/test_class_archive.py
        option = f"-Dlog4j2.configurationFile=file:{log4j2_config_path()}"
        b = streamsdsl.configure_spark(self.Builder(**{"spark.master": "local[2]",
                                                       "spark.driver.extraJavaOptions": "-Xss4m"}))
        assert b._options["spark.driver.extraJavaOptions"] == f"-Xss4m {option}"
        assert b._options["spark.executor.extraJavaOptions"] == option
        assert b._options["spark.ui.showConsoleProgress"] == "false"
        own = "-Dlog4j2.configurationFile=/etc/mine.properties"
        b = streamsdsl.configure_spark(self.Builder(**{"spark.master": "yarn", "spark.driver.extraJavaOptions": own,
                                                       "spark.ui.showConsoleProgress": "true"}))
        assert b._options["spark.driver.extraJavaOptions"] == own
        assert "spark.executor.extraJavaOptions" not in b._options
        assert b._options["spark.ui.showConsoleProgress"] == "true"
        assert os.path.isfile(log4j2_config_path())


@pytest.mark.spark
class TestWorkerPython:
    def test_configure_spark_runs_the_workers_on_this_interpreter(self, app_run: tuple[str, str]) -> None:
        """``configure_spark`` sets the workers' interpreter to the running one (``PYSPARK_PYTHON``
        was unset): a user function runs, although the PATH ``python3`` lacks streamsdsl."""
        out, _ = app_run
        assert "workers: True\n" in out
        assert "upper: ['V']\n" in out

    def test_workers_without_streamsdsl_fail_with_one_error_naming_the_fix(self, app_run: tuple[str, str]) -> None:
        """Workers that run the PATH ``python3`` fail with one `PythonWorkerError` (a
        ``StreamsDslError``) naming the module, the interpreter and ``PYSPARK_PYTHON``."""
        out, _ = app_run
        assert "error: PythonWorkerError True\n" in out
        message = out.split("message: ", 1)[1].splitlines()[0]
        assert message == (
            "Spark's Python workers cannot import 'streamsdsl' (ModuleNotFoundError: No module named 'streamsdsl'): "
            f"they run python3, not the interpreter running streamsdsl ({sys.executable}). On one machine, set "
            f"PYSPARK_PYTHON (or the Spark setting spark.pyspark.python) to {sys.executable} before the SparkSession "
            "is built, or build it with streamsdsl.configure_spark(builder), which does that. On a cluster whose "
            "Python lacks streamsdsl, ship it: streamsdsl does when it builds the session for a cluster's master "
            "(spark.master spark://..., yarn, k8s://...) and in streamsdsl.configure_spark(builder, ship=True); for a "
            "session of your own, spark-submit $(streamsdsl ship) app.py (docs/deploy.md)."
        )


@pytest.mark.spark
class TestQuietSession:
    def test_a_failing_record_prints_a_few_lines(self, app_run: tuple[str, str]) -> None:
        """A record whose user function raises: the `UserFunctionError` is raised, and Spark prints
        at most two lines on stderr (no Java or Python stack trace)."""
        out, err = app_run
        assert "record error: UserFunctionError\n" in out
        printed = err.split("FAILING-RECORD\n", 1)[1].split("STOP-MID-BATCH\n", 1)[0].splitlines()
        assert len(printed) <= 2, "\n".join(printed)
        assert [line.split(" ", 2)[2] for line in printed] == [
            "ERROR Executor: Exception in task 0.0 in stage 3.0 (TID 3)",
            "ERROR TaskSetManager: Task 0 in stage 3.0 failed 1 times; aborting job",
        ]

    def test_a_worker_without_streamsdsl_prints_a_few_lines(self, app_run: tuple[str, str]) -> None:
        """The workers' import error, which streamsdsl reports as a `PythonWorkerError`: Spark
        prints no stack trace for it either."""
        _, err = app_run
        printed = err.split("WORKER-ERROR\n", 1)[1].split("FAILING-RECORD\n", 1)[0].splitlines()
        assert len(printed) <= 2, "\n".join(printed)

    def test_a_query_stopped_mid_batch_stops_quietly(self, app_run: tuple[str, str]) -> None:
        """``query.stop()`` while the sink's ``foreachBatch`` call waits: its next JVM call is
        interrupted, and the query stops without an error and without printing anything. Before,
        py4j's long error text made Spark's stream thread die of a ``StackOverflowError`` in
        ``StreamExecution.isInterruptionException`` (1,024 lines of stack on stderr)."""
        out, err = app_run
        assert "stopped mid-batch: False None\n" in out
        printed = err.split("STOP-MID-BATCH\n", 1)[1].split("DONE\n", 1)[0].splitlines()
        assert printed == []

    def test_the_session_starts_without_warnings(self, app_run: tuple[str, str]) -> None:
        """No WARN line, no console progress bar and no log4j banner while the session starts and
        runs (the JVM's own lines aside: ``WARNING: Using incubator modules``, and on Java 25
        ``WARNING: package sun.security.action not in java.base`` for Spark's own ``--add-opens``
        of a package that JDK no longer has)."""
        _, err = app_run
        lines = [line for line in err.split("WORKER-ERROR\n", 1)[0].splitlines()
                 if not line.startswith(("WARNING: Using incubator modules", "WARNING: package sun.security.action "))]
        assert lines == ["SESSION-READY"]
