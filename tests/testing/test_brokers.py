"""Unit tests of `streamsdsl.testing.brokers`: which broker `local_kafka` picks, and why.

No Docker and no broker needed: the Docker probe and engine are replaced by fakes.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

import pytest

from streamsdsl.errors import InvalidArgumentError
from streamsdsl.testing import brokers, kafka_dist

HOST = "unix:///tmp/streamsdsl-test-docker.sock"
NO_HOST = (
    'Get "https://registry-1.docker.io/v2/": dial tcp: lookup registry-1.docker.io on 10.0.0.53:53: no such host'
)
RYUK = "testcontainers/ryuk:0.8.1"


class PullError(Exception):
    """Shaped like docker's APIError: the daemon's message is in ``explanation``."""

    def __init__(self, explanation: str) -> None:
        super().__init__(f"500 Server Error: Internal Server Error ({explanation!r})")
        self.explanation = explanation


class FakeEngine:
    """The `_DockerEngine` calls, recorded; images in ``present`` exist, ``pullable`` can be pulled."""

    def __init__(self, present: set[str] | None = None, pullable: set[str] | None = None,
                 build_error: Exception | None = None) -> None:
        self.present = set(present or ())
        self.pullable = set(pullable or ())
        self.build_error = build_error
        self.calls: list[tuple[str, ...]] = []
        self.closed = False

    def has_image(self, ref: str) -> bool:
        self.calls.append(("has_image", ref))
        return ref in self.present

    def pull(self, ref: str) -> None:
        self.calls.append(("pull", ref))
        if ref not in self.pullable:
            raise PullError(NO_HOST)
        self.present.add(ref)

    def build_kafka_image(self, libs: Path, tag: str) -> None:
        self.calls.append(("build_kafka_image", str(libs), tag))
        if self.build_error is not None:
            raise self.build_error
        self.present.add(tag)

    def close(self) -> None:
        self.closed = True


@pytest.fixture
def libs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A stand-in for the resolved Kafka jars, in a cache of the test's own (STREAMSDSL_CACHE_DIR)."""
    monkeypatch.setenv("STREAMSDSL_CACHE_DIR", str(tmp_path / "cache"))
    path = tmp_path / "cache" / "kafka-4.4.0" / "libs"
    path.mkdir(parents=True)
    (path / "kafka_2.13-4.4.0.jar").write_bytes(b"not really kafka")
    return path


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch, libs: Path) -> pytest.MonkeyPatch:
    """A clean environment: no broker variables, a fake Docker host that answers, Ryuk not yet decided."""
    from testcontainers.core.config import testcontainers_config

    for name in ("BOOTSTRAP_SERVERS", "STREAMSDSL_BROKER", "STREAMSDSL_KAFKA_IMAGE", "STREAMSDSL_BROKER_COMPAT",
                 "TESTCONTAINERS_RYUK_DISABLED"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("DOCKER_HOST", HOST)
    monkeypatch.setattr(testcontainers_config, "_ryuk_disabled", None)
    monkeypatch.setattr(testcontainers_config, "ryuk_image", RYUK)
    monkeypatch.setattr(brokers, "_docker_answers", lambda timeout=1.0: True)
    return monkeypatch


def use_engine(monkeypatch: pytest.MonkeyPatch, engine: FakeEngine) -> FakeEngine:
    monkeypatch.setattr(brokers, "_engine_factory", lambda: engine)
    return engine


def info_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == brokers.logger.name and r.levelno == logging.INFO]


def select(caplog: pytest.LogCaptureFixture, prefer: str | None = None) -> Any:
    caplog.set_level(logging.DEBUG, logger=brokers.logger.name)
    return brokers._select_broker(prefer)


class TestSelection:
    """Which broker `local_kafka` picks, and the one INFO line that says why."""

    def test_external_broker_when_bootstrap_servers_is_set(self, env: pytest.MonkeyPatch,
                                                            caplog: pytest.LogCaptureFixture) -> None:
        """BOOTSTRAP_SERVERS wins over Docker."""
        env.setenv("BOOTSTRAP_SERVERS", "broker:9092")
        env.setattr(brokers, "_engine_factory", lambda: pytest.fail("Docker must not be asked"))
        plan = select(caplog)
        assert (plan.kind, plan.bootstrap_servers, plan.image) == ("external", "broker:9092", None)
        assert info_lines(caplog) == ["using the external broker at broker:9092: BOOTSTRAP_SERVERS is set"]

    @pytest.mark.parametrize("value", ["kafka", "tansu"])
    def test_removed_compat_variable_is_refused(self, env: pytest.MonkeyPatch, value: str) -> None:
        """STREAMSDSL_BROKER_COMPAT went with the Tansu broker: set, it is refused with the reason."""
        env.setenv("BOOTSTRAP_SERVERS", "broker:9092")
        env.setenv("STREAMSDSL_BROKER_COMPAT", value)
        with pytest.raises(InvalidArgumentError) as info:
            brokers._select_broker(None)
        assert str(info.value) == (
            "STREAMSDSL_BROKER_COMPAT was removed with the Tansu broker: every broker local_kafka() uses is read "
            "up to its high watermark, which Apache Kafka reports exactly; unset STREAMSDSL_BROKER_COMPAT."
        )

    def test_process_when_no_docker_engine_answers(self, env: pytest.MonkeyPatch,
                                                   caplog: pytest.LogCaptureFixture) -> None:
        """Without Docker Kafka runs as a JVM process, and the line names the Docker host probed."""
        env.setattr(brokers, "_docker_answers", lambda timeout=1.0: False)
        env.setattr(brokers, "_engine_factory", lambda: pytest.fail("Docker must not be asked"))
        plan = select(caplog)
        assert (plan.kind, plan.image) == ("process", None)
        assert info_lines(caplog) == [f"no Docker engine answers at {HOST}: running Kafka 4.4.0 as a JVM process"]

    def test_kafka_image_present_locally(self, env: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
        """A Kafka image already on the engine is used without a pull."""
        engine = use_engine(env, FakeEngine(present={"apache/kafka:4.4.0", RYUK}))
        plan = select(caplog)
        assert (plan.kind, plan.image, plan.local_image) == ("container", "apache/kafka:4.4.0", False)
        assert info_lines(caplog) == [
            f"running apache/kafka:4.4.0 in a container: a Docker engine answers at {HOST} "
            "and the image is present locally"
        ]
        assert ("pull", "apache/kafka:4.4.0") not in engine.calls
        assert engine.closed

    def test_kafka_image_pulled(self, env: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
        """A pullable Kafka image is pulled and used; Ryuk stays enabled when its image is here."""
        engine = use_engine(env, FakeEngine(present={RYUK}, pullable={"apache/kafka:4.4.0"}))
        plan = select(caplog)
        assert (plan.kind, plan.image, plan.local_image) == ("container", "apache/kafka:4.4.0", False)
        assert info_lines(caplog) == [
            f"running apache/kafka:4.4.0 in a container: a Docker engine answers at {HOST} and the image was pulled"
        ]
        assert engine.calls == [("has_image", "apache/kafka:4.4.0"), ("pull", "apache/kafka:4.4.0"),
                                ("has_image", RYUK)]
        assert "TESTCONTAINERS_RYUK_DISABLED" not in os.environ

    def test_image_from_environment(self, env: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
        """STREAMSDSL_KAFKA_IMAGE names the Kafka image."""
        env.setenv("STREAMSDSL_KAFKA_IMAGE", "confluentinc/cp-kafka:8.0.0")
        use_engine(env, FakeEngine(present={"confluentinc/cp-kafka:8.0.0", RYUK}))
        plan = select(caplog)
        assert plan.image == "confluentinc/cp-kafka:8.0.0"

    def test_failed_pull_builds_and_runs_the_local_image(self, env: pytest.MonkeyPatch, libs: Path,
                                                         caplog: pytest.LogCaptureFixture) -> None:
        """No registry: the pull fails, the local Kafka image is built (no pull) and Ryuk is disabled."""
        from testcontainers.core.config import testcontainers_config

        tag = kafka_dist.image_tag(libs)
        engine = use_engine(env, FakeEngine())
        plan = select(caplog)
        assert (plan.kind, plan.image, plan.local_image) == ("container", tag, True)
        assert info_lines(caplog) == [
            f"apache/kafka:4.4.0 could not be pulled ({NO_HOST}): running Kafka 4.4.0 in a container of the local "
            f"image {tag} (built now from the cached jars and a jlink JRE, no pull)"
        ]
        assert engine.calls == [
            ("has_image", "apache/kafka:4.4.0"), ("pull", "apache/kafka:4.4.0"),
            ("has_image", tag), ("build_kafka_image", str(libs), tag),
            ("has_image", RYUK), ("pull", RYUK),
        ]
        assert os.environ["TESTCONTAINERS_RYUK_DISABLED"] == "true"
        assert testcontainers_config.ryuk_disabled is True
        assert engine.closed

    def test_local_image_built_once(self, env: pytest.MonkeyPatch, libs: Path,
                                    caplog: pytest.LogCaptureFixture) -> None:
        """An image already built from these jars is reused, not rebuilt."""
        tag = kafka_dist.image_tag(libs)
        engine = use_engine(env, FakeEngine(present={tag}))
        plan = select(caplog)
        assert plan.image == tag
        assert not [c for c in engine.calls if c[0] == "build_kafka_image"]
        assert info_lines(caplog)[0].endswith(f"running Kafka 4.4.0 in a container of the local image {tag} (already built)")

    def test_local_image_needs_the_jars(self, env: pytest.MonkeyPatch, libs: Path) -> None:
        """No registry and no resolved jars: the error names the command that resolves them."""
        libs.joinpath("kafka_2.13-4.4.0.jar").unlink()
        libs.rmdir()
        use_engine(env, FakeEngine())
        with pytest.raises(kafka_dist.KafkaJarsMissingError) as info:
            brokers._select_broker(None)
        assert str(info.value) == (
            f"Apache Kafka 4.4.0's jars are not in {libs}: run `streamsdsl kafka-jars` (or `make install`) once to "
            "resolve them from Maven Central with mvn, or set BOOTSTRAP_SERVERS=host:port to use a running broker."
        )
        assert isinstance(info.value, brokers.BrokerStartError)

    def test_user_disabled_ryuk_is_not_probed(self, env: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
        """TESTCONTAINERS_RYUK_DISABLED=true set by the user: the Ryuk image is not looked for."""
        env.setenv("TESTCONTAINERS_RYUK_DISABLED", "true")
        engine = use_engine(env, FakeEngine(present={"apache/kafka:4.4.0"}))
        select(caplog)
        assert engine.calls == [("has_image", "apache/kafka:4.4.0")]

    def test_build_failure_falls_back_to_the_process(self, env: pytest.MonkeyPatch,
                                                     caplog: pytest.LogCaptureFixture) -> None:
        """Docker answers but neither image can be had: Kafka as a JVM process, with both reasons."""
        use_engine(env, FakeEngine(build_error=RuntimeError("no space left on device")))
        plan = select(caplog)
        assert plan.kind == "process"
        assert info_lines(caplog) == [
            f"apache/kafka:4.4.0 could not be pulled ({NO_HOST}) and the local Kafka image could not be built "
            "(no space left on device): running Kafka 4.4.0 as a JVM process"
        ]

    def test_exactly_one_info_line(self, env: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
        """Pull failures of the Kafka and Ryuk images add DEBUG lines only."""
        use_engine(env, FakeEngine())
        select(caplog)
        assert len(info_lines(caplog)) == 1
        assert [r.levelno for r in caplog.records if r.name == brokers.logger.name].count(logging.INFO) == 1


class TestForcedKind:
    """``prefer=`` and ``STREAMSDSL_BROKER`` force one kind of broker."""

    def test_process_from_environment_skips_docker(self, env: pytest.MonkeyPatch,
                                                   caplog: pytest.LogCaptureFixture) -> None:
        """STREAMSDSL_BROKER=process runs the process even when Docker answers and BOOTSTRAP_SERVERS is set."""
        env.setenv("STREAMSDSL_BROKER", "process")
        env.setenv("BOOTSTRAP_SERVERS", "broker:9092")
        env.setattr(brokers, "_docker_answers", lambda timeout=1.0: pytest.fail("Docker must not be probed"))
        plan = select(caplog)
        assert plan.kind == "process"
        assert info_lines(caplog) == ["running Kafka 4.4.0 as a JVM process: STREAMSDSL_BROKER=process"]

    def test_prefer_overrides_the_environment(self, env: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
        """prefer= wins over STREAMSDSL_BROKER."""
        env.setenv("STREAMSDSL_BROKER", "container")
        plan = select(caplog, prefer="process")
        assert plan.kind == "process"
        assert info_lines(caplog) == ["running Kafka 4.4.0 as a JVM process: prefer='process'"]

    def test_removed_tansu_kind_is_refused(self, env: pytest.MonkeyPatch) -> None:
        """'tansu' went with the Tansu broker: refused in prefer= and STREAMSDSL_BROKER with what replaced it."""
        with pytest.raises(InvalidArgumentError) as info:
            brokers._select_broker("tansu")
        assert str(info.value) == (
            "'prefer' = 'tansu' was removed with the Tansu broker: the local broker is Apache Kafka 4.4.0, and "
            "'process' runs it as a JVM child process: use prefer='process'."
        )
        env.setenv("STREAMSDSL_BROKER", "Tansu")
        with pytest.raises(InvalidArgumentError) as info:
            brokers._select_broker(None)
        assert str(info.value) == (
            "STREAMSDSL_BROKER = 'tansu' was removed with the Tansu broker: the local broker is Apache Kafka 4.4.0, "
            "and 'process' runs it as a JVM child process: set STREAMSDSL_BROKER=process."
        )

    @pytest.mark.parametrize("prefer", ["docker", "container"])
    def test_forced_container_names_the_reason(self, env: pytest.MonkeyPatch, prefer: str,
                                               caplog: pytest.LogCaptureFixture) -> None:
        """prefer='docker' (alias 'container') runs a container and says it was forced."""
        use_engine(env, FakeEngine(present={"apache/kafka:4.4.0", RYUK}))
        plan = select(caplog, prefer=prefer)
        assert plan.kind == "container"
        assert info_lines(caplog)[0].endswith(f"the image is present locally (prefer={prefer!r})")

    def test_forced_container_without_docker_fails(self, env: pytest.MonkeyPatch) -> None:
        """A forced container with no engine is an error that says what to do."""
        env.setenv("STREAMSDSL_BROKER", "container")
        env.setattr(brokers, "_docker_answers", lambda timeout=1.0: False)
        with pytest.raises(brokers.BrokerStartError) as info:
            brokers._select_broker(None)
        assert str(info.value) == (
            f"STREAMSDSL_BROKER=container needs a Docker engine, but none answers at {HOST}: start Docker (or "
            "point DOCKER_HOST at one), or use STREAMSDSL_BROKER=process for Kafka as a JVM process."
        )

    def test_forced_container_when_no_image_can_be_had_fails(self, env: pytest.MonkeyPatch) -> None:
        """A forced container does not fall back to the process."""
        use_engine(env, FakeEngine(build_error=RuntimeError("boom")))
        with pytest.raises(brokers.BrokerStartError) as info:
            brokers._select_broker("docker")
        assert str(info.value) == (
            f"prefer='docker' needs a broker container, but apache/kafka:4.4.0 could not be pulled ({NO_HOST}) "
            "and the local Kafka image could not be built (boom). Set STREAMSDSL_KAFKA_IMAGE to an image present "
            "locally, or use STREAMSDSL_BROKER=process."
        )

    def test_forced_external_needs_bootstrap_servers(self, env: pytest.MonkeyPatch) -> None:
        """prefer='external' without BOOTSTRAP_SERVERS says which variable to set."""
        with pytest.raises(brokers.BrokerStartError) as info:
            brokers._select_broker("external")
        assert str(info.value) == "prefer='external' needs BOOTSTRAP_SERVERS=host:port in the environment."

    def test_unknown_prefer(self, env: pytest.MonkeyPatch) -> None:
        """An unknown prefer= value lists the accepted ones."""
        with pytest.raises(InvalidArgumentError) as info:
            brokers._select_broker("kafka")
        assert str(info.value) == (
            "'prefer' must be one of None, 'external', 'container', 'docker', 'process' (got 'kafka')."
        )

    def test_unknown_environment_value(self, env: pytest.MonkeyPatch) -> None:
        """An unknown STREAMSDSL_BROKER value names the variable and how to undo it."""
        env.setenv("STREAMSDSL_BROKER", "podman")
        with pytest.raises(InvalidArgumentError) as info:
            brokers._select_broker(None)
        assert str(info.value) == (
            "STREAMSDSL_BROKER must be one of auto, external, container, docker, process (got 'podman'); "
            "unset it to let local_kafka() choose."
        )

    def test_auto_is_the_default_order(self, env: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
        """STREAMSDSL_BROKER=auto forces nothing."""
        env.setenv("STREAMSDSL_BROKER", "auto")
        env.setattr(brokers, "_docker_answers", lambda timeout=1.0: False)
        assert select(caplog).kind == "process"


class TestHelpers:
    """Small pieces of the selection."""

    def test_local_image_tag_follows_the_jars(self, tmp_path: Path) -> None:
        """The same jars give the same tag (version first); another jar set, another tag."""
        a, b = tmp_path / "a", tmp_path / "b"
        for libs in (a, b):
            libs.mkdir()
            (libs / "kafka_2.13-4.4.0.jar").write_bytes(b"kafka")
        tag = kafka_dist.image_tag(a)
        assert tag.startswith("streamsdsl/kafka-broker:4.4.0-") and len(tag) == len("streamsdsl/kafka-broker:4.4.0-") + 12
        assert kafka_dist.image_tag(b) == tag
        (b / "kafka-clients-4.4.0.jar").write_bytes(b"clients")
        assert kafka_dist.image_tag(b) != tag

    def test_free_ports_are_two_distinct_loopback_ports(self) -> None:
        """The broker's and the controller's ports never coincide (both are bound at once)."""
        for _ in range(20):
            port, controller_port = brokers._free_ports()
            assert port != controller_port and 0 < port < 65536 and 0 < controller_port < 65536

    def test_short_error_keeps_the_cause_at_the_end(self) -> None:
        """Docker puts the cause last: a long message is cut at the front."""
        text = brokers._short_error(PullError("x" * 300 + " no such host"), limit=40)
        assert text == "…" + ("x" * 300 + " no such host")[-39:]
        assert text.endswith("no such host") and len(text) == 40

    def test_docker_probe_honours_docker_host(self, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
        """The probe asks DOCKER_HOST; a socket path that does not exist means no engine."""
        monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/absent.sock")
        assert brokers._docker_host() == f"unix://{tmp_path}/absent.sock"
        assert brokers._docker_answers() is False
        monkeypatch.delenv("DOCKER_HOST")
        assert brokers._docker_host() == "unix:///var/run/docker.sock"

    def test_the_choice_is_logged_on_the_local_kafka_logger(self) -> None:
        """The documented logger of the choice is ``streamsdsl.testing.local_kafka``, wherever it is logged from."""
        assert brokers.logger.name == "streamsdsl.testing.local_kafka"
