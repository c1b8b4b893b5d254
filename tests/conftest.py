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
    """The worker's SparkSession (local[2], RocksDB state, `worker_session_conf`: the metrics
    settings, one partition for a DataFrame built from a list)."""
    from streamsdsl.runtime.session import get_session
    from tests._support import worker_session_conf

    return get_session(conf=worker_session_conf())


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


#: The conformance suite: the test files whose drivers run on every host (`HOSTS`).
CONFORMANCE = (
    "tests/test_driver_sessions.py", "tests/test_driver_time_windows.py", "tests/test_driver_stream.py",
    "tests/test_cogroup.py", "tests/test_joins.py", "tests/test_stream_joins.py", "tests/test_table_joins.py",
    "tests/test_grouped_tables.py", "tests/test_windowed_group_by.py", "tests/test_repartition_joins.py",
    "tests/test_suppress.py", "tests/test_driver_errors.py", "tests/test_driver_stores.py",
    "tests/test_record_cache.py", "tests/test_processors.py", "tests/test_with_key.py",
    "tests/test_foreach_print.py", "tests/test_branched_repartition.py", "tests/test_versioned_tables.py",
    "tests/test_global_tables.py",
)
#: Where a conformance test's TopologyTestDriver runs its topology: the engine and the operator of
#: the built-in aggregations (``streamsdsl.operator``): the direct engine, the Spark plan in
#: replay on the Python operator and on the JVM operator, and the plan as a streaming query
#: (``engine="streaming"``, a micro-batch per piped record).
HOSTS = {"direct": ("direct", "auto"), "spark": ("spark", "python"), "spark-jvm": ("spark", "jvm"),
         "streaming": ("streaming", "auto")}
#: Which conformance tests run on the Spark hosts: ``sample`` (`make test`: the tests marked
#: ``every_host`` on ``spark`` and ``spark-jvm``; the first test of each class, and of each file's
#: module-level tests, on one of them, the classes of a file taking them in turn; the tests marked
#: ``streaming_host`` on ``streaming``) or ``all``
#: (`make test-hosts`: every test on every Spark host, the ``streaming_host`` tests on ``streaming``).
HOSTS_ENV = "STREAMSDSL_TEST_HOSTS"


def _first_line(cls: type) -> int:
    """Where a test class's first test is in its file (classes without tests last)."""
    lines = [f.__code__.co_firstlineno for name, f in vars(cls).items() if name.startswith("test_") and callable(f)]
    return min(lines, default=1 << 30)


def _hosts_of(metafunc: pytest.Metafunc) -> list[str]:
    """The hosts a conformance test runs on (`HOSTS_ENV`)."""
    definition, fixtures = metafunc.definition, set(metafunc.fixturenames)
    if not {"spark", "run_driver"} & fixtures:
        return []  # no driver that could run on Spark (an API or a value test)
    engine_parameter = any("engine" in m.args[0] for m in definition.iter_markers("parametrize"))
    own_query = "streaming" in f"{metafunc.cls.__name__ if metafunc.cls else ''} {metafunc.function.__name__}".lower()
    if {"operator", "jvm_operator"} & fixtures or engine_parameter or own_query \
            or definition.get_closest_marker("spark_engine") is not None:
        return []  # the test picks its engine and operators itself, or runs its own streaming query
    streaming = ["streaming"] if definition.get_closest_marker("streaming_host") is not None else []
    if os.environ.get(HOSTS_ENV, "sample") == "all" or definition.get_closest_marker("every_host") is not None:
        return ["direct", "spark", "spark-jvm", *streaming]
    owner = metafunc.cls or metafunc.module
    tests = [f for name, f in vars(owner).items() if name.startswith("test_") and callable(f)]
    first = min(tests, key=lambda f: f.__code__.co_firstlineno) if tests else None
    if first is not metafunc.function:
        return ["direct", *streaming]
    # the first test of each class, the classes of a file taking the Spark hosts in turn
    classes = sorted((c for c in vars(metafunc.module).values() if isinstance(c, type) and c.__name__.startswith("Test")
                      and c.__module__ == metafunc.module.__name__), key=_first_line)
    index = classes.index(metafunc.cls) if metafunc.cls in classes else 0
    return ["direct", ("spark", "spark-jvm")[index % 2], *streaming]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """A conformance test runs once per host (`HOSTS`): its ``host`` parameter."""
    path = metafunc.definition.nodeid.split("::", 1)[0]
    if path in CONFORMANCE:
        hosts = _hosts_of(metafunc)
        if hosts:
            if "host" not in metafunc.fixturenames:
                metafunc.fixturenames.append("host")
            metafunc.parametrize("host", hosts, indirect=True)


@pytest.fixture
def host(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """The conformance test's host (`HOSTS`): every driver of the test runs there."""
    from streamsdsl.jvm import OPERATOR_ENV
    from streamsdsl.runtime.engines import ENGINE_ENV

    name = str(request.param)
    engine, operator = HOSTS[name]
    if engine != "direct":
        request.getfixturevalue("spark")
    monkeypatch.setenv(ENGINE_ENV, engine)
    monkeypatch.setenv(OPERATOR_ENV, operator)
    return name


@pytest.fixture(autouse=True)
def _on_host(request: pytest.FixtureRequest) -> None:
    """A conformance test's ``host`` is set up before its other fixtures read the engine."""
    callspec = getattr(request.node, "callspec", None)
    if callspec is not None and "host" in callspec.params:
        request.getfixturevalue("host")


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

    spark = request.getfixturevalue("spark") if engine != "direct" else None

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
