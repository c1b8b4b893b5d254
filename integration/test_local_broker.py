"""The brokers `local_kafka` starts: produce/consume, pause/unpause, stop and restart.

Every broker is Apache Kafka 4.4.0. The process broker (a JVM child process) always runs; the
container broker runs when a Docker engine answers (the registry image when one is present or
pullable, else the image built locally from the cached jars). No Spark: each test takes a few
seconds, most of them the broker's start.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import time
from collections.abc import Iterator

import pytest

from streamsdsl.testing.local_kafka import BrokerControlError, LocalKafka, local_kafka

pytestmark = pytest.mark.integration

lk = importlib.import_module("streamsdsl.testing.local_kafka")

NO_DOCKER = (
    f"no Docker engine answers at {lk._docker_host()}: the container broker is tested where Docker runs "
    "(CI starts one); the process broker is tested here"
)


@pytest.fixture(scope="class", params=["process", pytest.param("container", marks=pytest.mark.skipif(
    not lk._docker_answers(), reason=NO_DOCKER))])
def broker(request: pytest.FixtureRequest) -> Iterator[LocalKafka]:
    """A broker of each kind started for the tests of a class (not the session's ``kafka``): each
    test uses its own topic and leaves the broker running, so they share one start (≈ 6 s each)."""
    with local_kafka(prefer=request.param) as kafka:
        yield kafka


def topics(kafka: LocalKafka, timeout: float = 5.0) -> set[str]:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": kafka.bootstrap_servers, "log_level": 0})
    return {t for t in admin.list_topics(timeout=timeout).topics if not t.startswith("__")}


def answers(kafka: LocalKafka, timeout: float = 1.5) -> bool:
    """True when the broker answers a metadata request within ``timeout`` seconds."""
    try:
        topics(kafka, timeout)
    except Exception:  # noqa: BLE001 - KafkaException: timed out / transport failure
        return False
    return True


RECORDS = [(f"k{i}".encode(), f"v{i}".encode(), 1_000 + i, i % 2) for i in range(10)]


def values(kafka: LocalKafka, topic: str) -> list[bytes | None]:
    return [r.value for r in kafka.consume_all(topic)]


class TestBrokerKinds:
    """Each kind of broker carries records and can be frozen, stopped and restarted."""

    def test_produce_and_consume(self, broker: LocalKafka) -> None:
        """Records produced to two partitions are read back exactly, in partition/offset order."""
        broker.create_topic("produced", partitions=2)
        broker.produce("produced", RECORDS)
        assert values(broker, "produced") == [f"v{i}".encode() for i in (0, 2, 4, 6, 8, 1, 3, 5, 7, 9)]
        assert broker.bootstrap_servers.startswith("127.0.0.1:")
        if broker.kind == "process":
            assert broker.image is None
        else:
            assert broker.kind == "container"
            assert broker.image == "apache/kafka:4.4.0" or str(broker.image).startswith("streamsdsl/kafka-broker:4.4.0-")

    def test_pause_freezes_and_unpause_resumes_without_loss(self, broker: LocalKafka) -> None:
        """While paused nothing answers; after unpause the records are all there and new ones go in."""
        broker.create_topic("paused", partitions=2)
        broker.produce("paused", RECORDS[:5])
        broker.pause()
        broker.pause()  # pausing a paused broker does nothing
        try:
            assert not answers(broker)
        finally:
            broker.unpause()
        broker.unpause()  # nor does unpausing a running one
        broker.produce("paused", RECORDS[5:])
        assert sorted(values(broker, "paused")) == sorted(v for _, v, _, _ in RECORDS)

    def test_stop_broker_then_restart_on_the_same_address(self, broker: LocalKafka) -> None:
        """stop_broker() is an outage; restart() brings the broker back on the same address, with its
        topics and records (the process and the container keep their log directory)."""
        address = broker.bootstrap_servers
        broker.create_topic("restarted", partitions=2)
        broker.produce("restarted", RECORDS[:3])
        before = topics(broker)
        broker.stop_broker()
        broker.stop_broker()  # stopping a stopped broker does nothing
        assert not answers(broker)
        with pytest.raises(BrokerControlError) as info:
            broker.pause()
        assert str(info.value) == f"pause(): the broker at {address} is stopped; call restart() to start it again."
        broker.restart()
        assert broker.bootstrap_servers == address
        assert "restarted" in before and topics(broker) == before
        assert values(broker, "restarted") == [b"v0", b"v2", b"v1"]
        broker.produce("restarted", RECORDS[3:4])
        assert values(broker, "restarted") == [b"v0", b"v2", b"v1", b"v3"]

    def test_restart_a_paused_broker(self, broker: LocalKafka) -> None:
        """restart() also works on a paused broker (it is resumed and stopped first)."""
        broker.create_topic("paused-then-restarted", partitions=1)
        broker.pause()
        started = time.monotonic()
        broker.restart()
        assert time.monotonic() - started < 30
        assert answers(broker)

    def test_controls_after_the_block_ended(self) -> None:
        """Once local_kafka()'s block has ended, controls say the broker is gone."""
        with local_kafka(prefer="process") as kafka:
            pass
        with pytest.raises(BrokerControlError, match=r"is gone \(its local_kafka\(\) block has ended\)"):
            kafka.unpause()
        assert not answers(kafka)


@pytest.mark.skipif(not lk._docker_answers(), reason=NO_DOCKER)
class TestContainerBroker:
    """What only the container broker does."""

    def test_container_is_removed_after_the_block_even_when_paused(self) -> None:
        """The container runs with host networking and is removed on exit, also from the paused state."""
        import docker

        with contextlib.closing(docker.DockerClient(base_url=lk._docker_host())) as client:

            def containers() -> set[str]:
                # of every broker image: the session's own broker may be a container of the same image
                return {c.id for c in client.containers.list(all=True)}

            before = containers()
            with local_kafka(prefer="container") as kafka:
                kafka.pause()
                during = containers()
            left = containers()
        assert len(during - before) == 1, (before, during)  # this block's broker
        assert left == before


class TestSessionBroker:
    """The session's ``kafka`` fixture runs the kind the environment asks for."""

    def test_session_broker_kind(self, kafka: LocalKafka) -> None:
        """STREAMSDSL_BROKER forces the kind; else BOOTSTRAP_SERVERS, else a container when Docker answers
        (CI starts Docker, so CI's integration suite runs against a container), else the process."""
        forced = os.environ.get("STREAMSDSL_BROKER", "").strip().lower()
        if forced not in ("", "auto"):
            expected = lk._KINDS_BY_NAME[forced]
        elif os.environ.get("BOOTSTRAP_SERVERS", "").strip():
            expected = "external"
        else:
            expected = "container" if lk._docker_answers() else "process"
        assert kafka.kind == expected
