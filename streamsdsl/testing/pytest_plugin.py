"""A pytest plugin that runs a test on both engines of the `TopologyTestDriver`.

Loaded automatically when streamsdsl is installed (entry point ``pytest11``). A test that asks
for the ``driver_engine`` fixture runs twice, once per engine; ``make_driver`` builds a driver
on that engine::

    def test_counts(make_driver):
        with make_driver(topology) as driver:
            ...

The Spark run shares one SparkSession per test session: the active one, or one streamsdsl
builds with `SESSION_CONF` (one partition where Spark would make two: a test's few records in
two partitions only double the tasks of every stage). A test marked
``@pytest.mark.streamsdsl_engines("direct")`` runs on the engines named only;
``streamsdsl_engines("direct", "spark", "streaming")`` adds the streaming engine (the plan as a
streaming query, a micro-batch per piped record: seconds per test, so not by default).
"""

from __future__ import annotations

from typing import Any, Callable, Iterator

import pytest

#: The settings of the session the plugin builds when no session is active (a session of the
#: user's own is used as it is): one shuffle partition and one partition for a DataFrame built
#: from a list (the driver's input and the state it carries between reads). A test pipes a few
#: records; a second partition only doubles the tasks of each stage, which is most of a Spark
#: engine test's time (streamsdsl's own suite runs with the same two settings).
SESSION_CONF: dict[str, str] = {"spark.sql.shuffle.partitions": "1", "spark.default.parallelism": "1"}

#: The engines a ``driver_engine`` test runs on by default, and every engine it may name.
ENGINES = ("direct", "spark")
KNOWN_ENGINES = ("direct", "spark", "streaming")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "streamsdsl_engines(*engines): the TopologyTestDriver engines a test using driver_engine runs on")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "driver_engine" not in metafunc.fixturenames:
        return
    marker = metafunc.definition.get_closest_marker("streamsdsl_engines")
    engines = tuple(marker.args) if marker is not None and marker.args else ENGINES
    unknown = [e for e in engines if e not in KNOWN_ENGINES]
    if unknown:
        raise pytest.UsageError(f"streamsdsl_engines: unknown engine(s) {unknown}; use {list(KNOWN_ENGINES)}.")
    metafunc.parametrize("driver_engine", engines, indirect=True)


@pytest.fixture()
def driver_engine(request: pytest.FixtureRequest) -> str:
    """The engine this run of the test uses: ``direct``, ``spark`` or ``streaming``."""
    return str(request.param)


@pytest.fixture(scope="session")
def _streamsdsl_spark() -> Iterator[Any]:
    from streamsdsl.runtime.session import get_session

    yield get_session(conf=SESSION_CONF)


@pytest.fixture()
def make_driver(request: pytest.FixtureRequest, driver_engine: str) -> Callable[..., Any]:
    """``make_driver(topology, config=None, **kwargs)``: a `TopologyTestDriver` on this run's engine."""
    from streamsdsl.runtime.driver import TopologyTestDriver

    spark = request.getfixturevalue("_streamsdsl_spark") if driver_engine != "direct" else None

    def make(topology: Any, config: dict[str, Any] | None = None, **kwargs: Any) -> TopologyTestDriver:
        return TopologyTestDriver(topology, config, engine=driver_engine, spark=spark, **kwargs)

    return make
