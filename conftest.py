"""The whole test run's collection order, for ``make test``'s pytest-xdist workers.

``make test`` runs ``pytest -n 2 --dist loadfile``: each test file goes whole to one worker (its
module fixtures run once), and a worker that runs integration tests starts its own broker. The
integration suite's files, the longest, come first, so that the workers' last files are short
unit tests and neither waits long for the other at the end.

(``--dist loadgroup`` cannot keep the integration suite on one worker with pytest 9.2: xdist 3.8
marks a test's group by rewriting ``item._nodeid``, which pytest 9.2's ``nodeid`` no longer reads.)
"""

from __future__ import annotations

import pytest


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    integration = [item for item in items if item.nodeid.startswith("integration/")]
    rest = [item for item in items if not item.nodeid.startswith("integration/")]
    items[:] = integration + rest
