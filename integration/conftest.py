"""Fixtures for the integration tests: one broker and one SparkSession per test run."""

from __future__ import annotations

import itertools
import logging
import uuid
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import pytest

from streamsdsl.runtime.app import KafkaStreams, State
from streamsdsl.testing.local_kafka import KAFKA_VERSION, LocalKafka, local_kafka

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from streamsdsl.ir.topology import Topology


_BROKER_LINE = pytest.StashKey[str]()


@pytest.fixture(scope="session")
def kafka(pytestconfig: pytest.Config) -> Iterator[LocalKafka]:
    """A running broker: ``BOOTSTRAP_SERVERS``, a container when Docker answers (the Kafka image, else
    the local Kafka image built with no pull), or Kafka as a JVM process; ``STREAMSDSL_BROKER``
    forces one kind.

    Which broker and why is logged, and repeated at the end of the run's summary.
    """
    reasons: list[str] = []
    handler = logging.Handler(logging.INFO)
    handler.emit = lambda record: reasons.append(record.getMessage())  # type: ignore[method-assign]
    logger = logging.getLogger("streamsdsl.testing.local_kafka")
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)  # the choice is an INFO line; the root logger may drop it
    try:
        with local_kafka() as broker:
            logger.removeHandler(handler)
            logger.setLevel(level)
            image = f", {broker.image}" if broker.image else ""
            line = f"integration broker: {broker.kind} at {broker.bootstrap_servers} (Kafka {KAFKA_VERSION}{image})"
            if reasons:
                line += f": {reasons[0]}"
            logging.getLogger(__name__).info("%s", line)
            pytestconfig.stash[_BROKER_LINE] = line
            yield broker
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


def pytest_sessionfinish(session: pytest.Session) -> None:
    """On a pytest-xdist worker: hand the broker's line to the controller, which prints it."""
    line = session.config.stash.get(_BROKER_LINE, None)
    if line is not None and hasattr(session.config, "workeroutput"):
        session.config.workeroutput["broker_line"] = line


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: object) -> None:
    """On the pytest-xdist controller: keep the line each worker with a broker handed over."""
    line = getattr(node, "workeroutput", {}).get("broker_line")
    if line is not None:
        previous = node.config.stash.get(_BROKER_LINE, None)
        node.config.stash[_BROKER_LINE] = line if previous is None else f"{previous}\n{line}"


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, exitstatus: int, config: pytest.Config) -> None:
    """Name the integration tests' broker (kind, image, why) at the end of the run."""
    line = config.stash.get(_BROKER_LINE, None)
    if line is not None:
        terminalreporter.write_line(line)


@pytest.fixture(scope="session")
def kafka_session(kafka: LocalKafka) -> Iterator[SparkSession]:
    """The worker's SparkSession, with the ``streamsdsl-kafka`` data source registered, warmed up.

    It depends on ``kafka`` only so that the broker outlives the session: the Python
    workers keep producers open until the session stops.
    """
    from streamsdsl.io import register
    from streamsdsl.runtime.session import get_session
    from tests._support import worker_session_conf

    # The worker's one session, whichever suite builds it (`worker_session_conf`): integration/
    # test_operations.py reads its Prometheus endpoint.
    session = get_session(conf=worker_session_conf())
    register(session)
    # Warm up once (Python worker daemon, planner imports: ~10 s on a cold session) so that
    # each test's duration measures the test, not the session's first Python job.
    topic = f"warm-up-{uuid.uuid4().hex[:8]}"
    kafka.create_topic(topic, 1)
    kafka.produce(topic, [(b"k", b"v", 0, 0)])
    (
        session.read.format("streamsdsl-kafka")
        .option("kafka.bootstrap.servers", kafka.bootstrap_servers)
        .option("subscribe", topic)
        .load()
        .collect()
    )
    yield session
    session.stop()


@pytest.fixture
def spark(kafka_session: SparkSession) -> SparkSession:
    """The shared session, as an application's: two shuffle partitions, set for each test (the
    unit tests' fixture sets one; an xdist worker runs files of both suites on one session)."""
    kafka_session.conf.set("spark.sql.shuffle.partitions", "2")
    return kafka_session


@pytest.fixture
def app_factory(spark: SparkSession) -> Iterator[Callable[[Topology, dict[str, Any]], KafkaStreams]]:
    """Factory: ``app_factory(topology, config)`` is a `KafkaStreams` on the shared session; each
    is closed at the end of the test."""
    apps: list[KafkaStreams] = []

    def make(topology: Topology, config: dict[str, Any]) -> KafkaStreams:
        app = KafkaStreams(topology, config, spark=spark)
        apps.append(app)
        return app

    yield make
    for app in apps:
        if app.state() not in (State.CREATED, State.NOT_RUNNING, State.ERROR):
            app.close(60)


_topic_counter = itertools.count()


@pytest.fixture
def new_topic(kafka: LocalKafka, request: pytest.FixtureRequest) -> Callable[..., str]:
    """Factory: ``new_topic(partitions=1)`` creates a fresh, uniquely named topic."""

    def make(partitions: int = 1) -> str:
        base = "".join(c if c.isalnum() else "-" for c in request.node.name)[:80]
        name = f"{base}-{next(_topic_counter)}-{uuid.uuid4().hex[:6]}"
        kafka.create_topic(name, partitions)
        return name

    return make


@pytest.fixture
def streams_config(kafka: LocalKafka, tmp_path_factory: pytest.TempPathFactory) -> Callable[..., dict[str, object]]:
    """Factory: ``streams_config(app_id, overrides=None)`` is a `KafkaStreams` configuration for
    the test broker: a unique ``application.id`` starting with ``app_id``, a fresh ``state.dir``,
    a 50 ms trigger, plus ``overrides`` (a dict of configuration keys)."""
    return lambda app_id, overrides=None: make_streams_config(kafka, tmp_path_factory, app_id, overrides)


def make_streams_config(
    kafka: LocalKafka,
    tmp_path_factory: pytest.TempPathFactory,
    app_id: str,
    overrides: dict[str, object] | None = None,
) -> dict[str, object]:
    """See `streams_config` (usable from module-scoped fixtures)."""
    config: dict[str, object] = {
        "application.id": f"{app_id}-{uuid.uuid4().hex[:6]}",
        "bootstrap.servers": kafka.bootstrap_servers,
        "state.dir": str(tmp_path_factory.mktemp("state")),
        "commit.interval.ms": 50,
    }
    config.update(overrides or {})
    return config
