"""The whole test run's collection order and its split over pytest-xdist workers.

``make test`` runs ``pytest -n 2 --dist loadgroup``: every test of ``integration/`` goes to one
worker as one group (one broker and one application session per run), and is handed out first,
so that the other worker takes the unit tests meanwhile and neither waits for the other at the
end. Without xdist the order only puts the integration suite first.
"""

from __future__ import annotations

import pytest

INTEGRATION_GROUP = "integration"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    integration = [item for item in items if item.nodeid.startswith("integration/")]
    for item in integration:
        item.add_marker(pytest.mark.xdist_group(INTEGRATION_GROUP))
    rest = [item for item in items if not item.nodeid.startswith("integration/")]
    items[:] = integration + rest
