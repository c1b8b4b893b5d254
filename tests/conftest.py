"""Shared fixtures: one SparkSession per test run, and a driver factory."""

from __future__ import annotations

import os
from typing import Any, Callable

import pytest
from hypothesis import settings

from streamsdsl import Consumed, Serdes, StreamsBuilder, Topology

#: Under CI (``CI`` set, as ``.ci/run`` runs) the property tests draw hypothesis' fixed,
#: derandomized examples: a CI run fails on a change, not on an unlucky draw. Local runs keep
#: drawing new examples; an input one of them finds stays in its test as an ``@example``.
settings.register_profile("ci", derandomize=True, database=None)
if os.environ.get("CI"):
    settings.load_profile("ci")


@pytest.fixture(scope="session")
def spark_session() -> Any:
    """The worker's SparkSession (local[2], RocksDB state)."""
    from streamsdsl.runtime.session import get_session

    return get_session()


@pytest.fixture
def spark(spark_session: Any) -> Any:
    """The shared SparkSession with one shuffle partition, set for each test (an xdist worker
    may run an integration file, two partitions, on the same session before): the unit tests'
    inputs are a few records, and a second partition only doubles the tasks of every stage
    (about a quarter of a Spark test's time). The integration suite (its own fixture) and the
    local-cluster tests run with two."""
    spark_session.conf.set("spark.sql.shuffle.partitions", "1")
    return spark_session


@pytest.fixture(params=["python", "jvm"])
def operator(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run the test on both operators of the built-in aggregations (``streamsdsl.operator``):
    the Python operator, and the JVM operator (``jvm``: the test fails if it cannot load)."""
    from streamsdsl.jvm import OPERATOR_ENV

    monkeypatch.setenv(OPERATOR_ENV, request.param)
    return str(request.param)


@pytest.fixture()
def jvm_operator(monkeypatch: pytest.MonkeyPatch) -> str:
    """Run the test's built-in aggregations on the JVM operator only. For a test whose subject is
    not the operator (event time past a join, a property against the core), one Spark run is
    enough: the Python operator runs the kernels the direct engine runs, and the JVM operator is
    compared with them record for record in ``tests/jvm/test_jvm_operator.py``."""
    from streamsdsl.jvm import OPERATOR_ENV

    monkeypatch.setenv(OPERATOR_ENV, "jvm")
    return "jvm"


@pytest.fixture(autouse=True)
def _spark_engine_where_needed(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """A test marked ``spark_engine`` (it needs Spark: Column expressions, the plan) or run on
    both operators or on the JVM one (the ``operator`` and ``jvm_operator`` fixtures: the
    operators are Spark's) runs its drivers on the Spark engine; every other test on the test run's (``STREAMSDSL_TEST_ENGINE``, else ``direct``)."""
    from streamsdsl.runtime.engines import ENGINE_ENV

    on_operators = {"operator", "jvm_operator"} & set(request.fixturenames)
    if request.node.get_closest_marker("spark_engine") is not None or on_operators:
        request.getfixturevalue("spark")
        monkeypatch.setenv(ENGINE_ENV, "spark")


@pytest.fixture()
def engine(_spark_engine_where_needed: None) -> str:
    """The test driver's engine of this test."""
    from streamsdsl.runtime.engines import engine_choice

    return engine_choice(None).value


@pytest.fixture()
def run_driver(request: pytest.FixtureRequest, engine: str) -> Callable[..., Any]:
    """Pipe records into a topology through the TopologyTestDriver and read one output topic.

    ``run_driver(topology, records, out="out")`` → list of TestRecord; ``records`` are
    ``(topic, key, value, timestamp)`` tuples (topic may be omitted for a single-input topology).
    """
    from streamsdsl.runtime.driver import TopologyTestDriver

    spark = request.getfixturevalue("spark") if engine == "spark" else None

    def run(topology: Topology, records: list[tuple[Any, ...]], out: str | list[str] = "out",
            key_serde: Any = None, value_serde: Any = None, with_metrics: bool = False) -> Any:
        with TopologyTestDriver(topology, engine=engine, spark=spark) as driver:
            inputs: dict[str, Any] = {}
            for rec in records:
                topic, rest = (rec[0], rec[1:]) if len(rec) == 4 else (topology.source_topics[0], rec)
                if topic not in inputs:
                    inputs[topic] = driver.create_input_topic(topic)
                key, value, ts = rest
                inputs[topic].pipe_input(key, value, ts)
            outs = [out] if isinstance(out, str) else out
            results = [driver.create_output_topic(o, key_serde, value_serde).read_records_to_list() for o in outs]
            result = results[0] if isinstance(out, str) else results
            if with_metrics:
                return result, driver.metrics()
            return result

    return run


@pytest.fixture()
def strings() -> Consumed:
    """String keys and values."""
    return Consumed.with_serdes(Serdes.String(), Serdes.String())


@pytest.fixture()
def builder() -> StreamsBuilder:
    return StreamsBuilder()
