"""Loading the JVM operator into sessions streamsdsl does not create: the visible fallback without
the jar, the ``jvm`` choice's error, and a real multi-process cluster (the jar ships to executors).

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
from streamsdsl import Consumed, Serdes, SessionWindows, StreamsBuilder, TopologyTestDriver, explain
from streamsdsl.runtime.session import REQUIRED_CONF

def topology():
    b = StreamsBuilder()
    b.stream("in", Consumed.with_serdes(Serdes.String(), Serdes.String())).group_by_key().windowed_by(
        SessionWindows.with_gap(5)).count().to_stream().to("out")
    return b.build()

def run(spark, config):
    with TopologyTestDriver(topology(), config, engine="spark", spark=spark) as driver:
        topic = driver.create_input_topic("in")
        for k, ts in [("a", 0), ("a", 3), ("b", 1), ("a", 20)]:
            topic.pipe_input(k, "v", ts)
        return [(r.key.key, r.key.window.start, r.key.window.end, r.value)
                for r in driver.create_output_topic("out").read_records_to_list()]

EXPECTED = [("a", 0, 0, 1), ("a", 0, 0, None), ("a", 0, 3, 2), ("b", 1, 1, 1), ("a", 20, 20, 1)]
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

    @pytest.mark.cluster
    def test_code_ships_to_executors_on_a_local_cluster(self) -> None:
        """On ``local-cluster[2,1,1024]`` (a driver and two executor JVMs with their own Python
        workers), in one session configured with ``streamsdsl.configure_spark``: the JVM operator
        runs in the executors, and a streaming query's packing step and Python processor ship
        there and give the exact records: batch 0 [0, 5] "pq" and [1, 1] "x"; batch 1 a
        tombstone for [0, 5], then [0, 12] "pqr" and [30, 30] "y". And the clicks-and-users
        application (`tests._quiet_table`) closes all 20 sessions there too, although its users
        table stays quiet."""
        proc = _python("""
            from pyspark.sql import SparkSession
            import streamsdsl, tempfile
            from streamsdsl.runtime.streaming import start_streaming
            from streamsdsl.testing.files import FileTopic
            from tests._support import Collect
            builder = SparkSession.builder.master("local-cluster[2,1,1024]").config("spark.ui.enabled", "false")
            spark = streamsdsl.configure_spark(builder.config("spark.sql.shuffle.partitions", "2")).getOrCreate()
            assert run(spark, {"streamsdsl.operator": "jvm"}) == EXPECTED
            print("EXECUTORS", spark.sparkContext._jsc.sc().getExecutorMemoryStatus().size())
            assert "JVM operator (count, session windows)" in explain(topology(), spark, mode="simple")

            b = StreamsBuilder()
            (b.stream("clicks", Consumed.with_serdes(Serdes.String(), Serdes.String())).group_by_key()
             .windowed_by(SessionWindows.with_gap(10)).aggregate(lambda: "", lambda k, v, a: a + v, lambda k, a, b: a + b)
             .to_stream().to("sessions"))
            d = tempfile.mkdtemp()
            topic = FileTopic(d + "/in")
            topic.append("clicks", [("a", "p", 0), ("b", "x", 1), ("a", "q", 5)], Serdes.String(), Serdes.String())
            topic.append("clicks", [("a", "r", 12), ("b", "y", 30)], Serdes.String(), Serdes.String())
            out = Collect()
            q, _, _ = start_streaming(b.build(), lambda n: topic.read_stream(spark, n.topics), out,
                                      checkpoint_location=d + "/cp")
            q.processAllAvailable()
            q.stop()
            for batch, k, v, ts in sorted(out.records, key=repr):
                print("RECORD", batch, k.key, k.window.start, k.window.end, v, ts)
            from tests import _quiet_table
            sessions = _quiet_table.run(spark)
            print("QUIET", len(sessions), sessions == _quiet_table.expected_sessions())
            spark.stop()
        """, timeout=600)
        assert proc.returncode == 0, proc.stderr[-3000:]
        assert "EXECUTORS 3" in proc.stdout  # the driver's block manager and two executors
        assert [line for line in proc.stdout.splitlines() if line.startswith("RECORD")] == [
            "RECORD 0 a 0 5 pq 5", "RECORD 0 b 1 1 x 1",
            "RECORD 1 a 0 12 pqr 12", "RECORD 1 a 0 5 None 5", "RECORD 1 b 30 30 y 30"]
        assert "QUIET 20 True" in proc.stdout
