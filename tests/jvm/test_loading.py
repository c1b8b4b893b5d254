"""Loading the JVM operator into sessions streamsdsl does not create: the visible fallback without
the jar and the ``jvm`` choice's error. (The jar shipping to executors on a real multi-process
cluster is tested in ``integration/test_local_cluster.py``, whose one local-cluster session runs
every local-cluster check of the test run.)

Each test runs in a fresh interpreter: a process has one SparkSession, and the shared one of the
test run already has the jar."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.spark

PRELUDE = """
import logging, sys
from streamsdsl import explain
from streamsdsl.runtime.session import REQUIRED_CONF
from tests.jvm._loading_app import EXPECTED, run, topology
"""


def _python(code: str, timeout: int = 300) -> subprocess.CompletedProcess[str]:
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable,
           "PYTHONPATH": root}
    env.pop("STREAMSDSL_OPERATOR", None)
    return subprocess.run([sys.executable, "-c", PRELUDE + textwrap.dedent(code)], capture_output=True, text=True,
                          timeout=timeout, env=env, cwd=root)


class TestLoading:
    def test_session_without_the_jar(self) -> None:
        """A session built without the jar: ``auto`` runs the Python operator and says so (log,
        explain); ``jvm`` fails with a message saying how to load the jar."""
        proc = _python("""
            from pyspark.sql import SparkSession
            from streamsdsl.jvm import JvmOperatorError
            builder = SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false").config(
                "spark.sql.shuffle.partitions", "1")
            for k, v in REQUIRED_CONF.items():
                builder = builder.config(k, v)
            spark = builder.getOrCreate()
            logging.basicConfig(level=logging.WARNING, stream=sys.stdout, format="LOG %(message)s")
            assert run(spark, {}) == EXPECTED
            text = explain(topology(), spark, mode="simple")
            try:
                run(spark, {"streamsdsl.operator": "jvm"})
            except JvmOperatorError as exc:
                print("ERROR", exc)
        """)
        assert proc.returncode == 0, proc.stderr[-3000:]
        out = proc.stdout
        assert "LOG streamsdsl: built-in aggregations run on the Python operator: the JVM operator is unavailable" in out
        assert "Python operator (count, session windows; the JVM operator is unavailable: the session did not " \
               "load the jar: build it with streamsdsl.configure_spark(builder)" in out
        assert "ERROR KSTREAM-AGGREGATE-0000000002: streamsdsl.operator is 'jvm' but the JVM operator cannot run" in out
