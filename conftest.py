"""The whole test run's collection order, for ``make test``'s pytest-xdist workers.

``make test`` runs ``pytest -n 2 --dist loadfile``: each test file goes whole to one worker (its
module fixtures run once), and a worker that runs integration tests starts its own broker. The
integration suite's files, the longest, come first, then the files with the most Spark tests, so
that the workers' last files are short unit tests and neither waits long for the other at the end.

(``--dist loadgroup`` cannot keep the integration suite on one worker with pytest 9.2: xdist 3.8
marks a test's group by rewriting ``item._nodeid``, which pytest 9.2's ``nodeid`` no longer reads.)
"""

from __future__ import annotations

import pytest


#: Fixtures of a test that runs Spark (`tests/conftest.py`).
SPARK_FIXTURES = frozenset({"spark", "spark_session", "operator", "jvm_operator"})


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Whole files in this order: the integration suite's (in collection order), then the others
    by their number of Spark tests, most first (ties in collection order). The workers take files in this order as
    they become free, so the long files start early and the last ones are short: the files of
    the direct engine's and the unit tests (1,180 tests in ≈ 15 s) fill the end."""
    files: dict[str, list[pytest.Item]] = {}
    for item in items:
        files.setdefault(item.nodeid.split("::", 1)[0], []).append(item)

    def spark_tests(file_items: list[pytest.Item]) -> int:
        return sum(1 for item in file_items if item.get_closest_marker("spark") is not None
                   or SPARK_FIXTURES & set(getattr(item, "fixturenames", ())))

    order = sorted(files, key=lambda f: (0, 0) if f.startswith("integration/") else (1, -spark_tests(files[f])))
    items[:] = [item for f in order for item in files[f]]
