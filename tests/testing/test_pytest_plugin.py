"""The pytest plugin's SparkSession (`streamsdsl.testing.pytest_plugin`), without Spark."""

from __future__ import annotations

from typing import Any

import pytest

from streamsdsl.testing import pytest_plugin


def test_the_plugin_builds_its_session_with_one_partition(monkeypatch: pytest.MonkeyPatch) -> None:
    """With no session active the plugin's session is built with `SESSION_CONF` (one shuffle
    partition, one partition for a DataFrame built from a list); `get_session` returns an active
    session unchanged, so a session of the user's own keeps its settings."""
    from streamsdsl.runtime import session

    asked: list[Any] = []
    monkeypatch.setattr(session, "get_session", lambda conf=None: asked.append(conf) or "the session")
    fixture = pytest_plugin._streamsdsl_spark._get_wrapped_function()
    assert list(fixture()) == ["the session"]
    assert asked == [{"spark.sql.shuffle.partitions": "1", "spark.default.parallelism": "1"}]
    assert pytest_plugin.SESSION_CONF == asked[0]
