"""The whole test run's collection order, for ``make test``'s pytest-xdist workers.

``make test`` runs ``pytest -n 3 --dist loadfile``: each test file goes whole to one worker (its
module fixtures run once), and a worker that runs integration tests starts its own broker. The
workers take files in collection order as they become free, so the order decides when the run
ends: the longest files first (longest-processing-time-first scheduling), so that the last files
are short and no worker waits long for the others at the end. A file's length is its time in
the last full run on this machine (``tests/durations.json``, written by ``tools/test_durations.py``
from ``build/test-results.xml``); a file not in it is estimated from its Spark tests.

The Spark driver JVMs the tests start (the applications the integration suite starts as
processes, which inherit the environment) compile with C1 only and collect with the serial
collector (`streamsdsl.testing.jvm_options`, through ``SPARK_SUBMIT_OPTS``): such a JVM lives
seconds to minutes, and C2's compilations and G1's threads cost a quarter of the CPU time of a
Spark test file on this 2-core machine. Each worker's shared session, the one JVM that lives as
long as the run, compiles with every tier again, C2 for its hottest methods only
(`jvm_options.LONG_LIVED_DRIVER`, ``tests/_support.worker_session_conf``). Applications keep
the JVM's defaults: this is the test run's setting only.

(``--dist loadgroup`` cannot keep the integration suite on one worker with pytest 9.2: xdist 3.8
marks a test's group by rewriting ``item._nodeid``, which pytest 9.2's ``nodeid`` no longer reads.)
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest


#: Fixtures of a test that runs Spark (`tests/conftest.py`).
SPARK_FIXTURES = frozenset({"spark", "spark_session", "operator", "jvm_operator"})

#: Seconds per file of the last full run (``tools/test_durations.py``).
DURATIONS = Path(__file__).parent / "tests" / "durations.json"

#: The estimate of a file the durations do not name: seconds per Spark test, per other test, and
#: for an integration file (a broker, an application: tens of seconds each).
SPARK_TEST_S, OTHER_TEST_S, INTEGRATION_FILE_S = 1.5, 0.02, 30.0


def pytest_configure(config: pytest.Config) -> None:
    """The short-lived JVMs' options added to ``SPARK_SUBMIT_OPTS`` (read by Spark's launcher for
    ``spark-submit``, which PySpark's gateway and the applications run) before any session
    starts (each xdist worker runs this too), after the user's own options."""
    from streamsdsl.testing.jvm_options import with_options

    os.environ.update(with_options(os.environ, "SPARK_SUBMIT_OPTS"))


def file_durations() -> dict[str, float]:
    """The recorded seconds per test file, or none when the file is missing or unreadable."""
    try:
        data = json.loads(DURATIONS.read_text())
    except (OSError, ValueError):
        return {}
    return {str(f): float(s) for f, s in data.get("files", {}).items()}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Whole files, longest first (recorded or estimated seconds; ties in collection order)."""
    files: dict[str, list[pytest.Item]] = {}
    for item in items:
        files.setdefault(item.nodeid.split("::", 1)[0], []).append(item)
    recorded = file_durations()

    def estimate(path: str) -> float:
        if path in recorded:
            return recorded[path]
        file_items = files[path]
        spark = sum(1 for item in file_items if item.get_closest_marker("spark") is not None
                    or SPARK_FIXTURES & set(getattr(item, "fixturenames", ())))
        base = INTEGRATION_FILE_S if path.startswith("integration/") else 0.0
        return base + spark * SPARK_TEST_S + (len(file_items) - spark) * OTHER_TEST_S

    order = sorted(files, key=lambda f: -estimate(f))
    items[:] = [item for f in order for item in files[f]]
