"""streamsdsl over Spark Connect (issue 40, item 3): the tests of `integration.connect_suite` in a
Python process of their own.

PySpark refuses to start a Connect client in a process where a classic SparkSession runs
(``SESSION_ALREADY_EXIST``), and a ``make test`` worker has one as soon as it ran a classic Spark
test: so this test runs the suite with pytest in a new process (on this run's broker), and fails
with the suite's report unless every test of it passed.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from streamsdsl.testing.local_kafka import LocalKafka

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[1]


def test_the_spark_connect_suite_passes_in_a_process_of_its_own(kafka: LocalKafka) -> None:
    env = {**os.environ, "BOOTSTRAP_SERVERS": kafka.bootstrap_servers}
    env.pop("PYTEST_XDIST_WORKER", None)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:xdist", "-q", "-rfEs",
         "integration/connect_suite.py"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=1500, stdin=subprocess.DEVNULL,
    )
    report = done.stdout[-8000:] + done.stderr[-2000:]
    assert done.returncode == 0, report
    tests = len(re.findall(r"^def test_", (ROOT / "integration" / "connect_suite.py").read_text(), re.M))
    summary = done.stdout.strip().splitlines()[-1]
    assert re.fullmatch(rf"{tests} passed in .*", summary), report  # none skipped, none failed
