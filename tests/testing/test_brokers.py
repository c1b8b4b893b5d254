"""Unit tests of `streamsdsl.testing.brokers`: which broker `local_kafka` picks, and why.

No Docker and no broker needed: the Docker probe and engine are replaced by fakes.
"""

from __future__ import annotations

import hashlib
import logging
import os
from pathlib import Path
from typing import Any

import pytest

from streamsdsl.errors import InvalidArgumentError
from streamsdsl.testing import brokers

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

    def build_tansu_image(self, binary: str, tag: str) -> None:
        self.calls.append(("build_tansu_image", binary, tag))
        if self.build_error is not None:
            raise self.build_error
        self.present.add(tag)

    def close(self) -> None:
        self.closed = True


@pytest.fixture
def binary(tmp_path: Path) -> str:
    """A stand-in for the Tansu binary (its content decides the image tag)."""
    path = tmp_path / "tansu"
    path.write_bytes(b"not really tansu")
    return str(path)


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch, binary: str) -> pytest.MonkeyPatch:
    """A clean environment: no broker variables, a fake Docker host that answers, Ryuk not yet decided."""
    from testcontainers.core.config import testcontainers_config

    for name in ("BOOTSTRAP_SERVERS", "STREAMSDSL_BROKER", "STREAMSDSL_KAFKA_IMAGE", "STREAMSDSL_BROKER_COMPAT",
                 "TESTCONTAINERS_RYUK_DISABLED"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("DOCKER_HOST", HOST)
    monkeypatch.setattr(testcontainers_config, "_ryuk_disabled", None)
    monkeypatch.setattr(testcontainers_config, "ryuk_image", RYUK)
    monkeypatch.setattr(brokers, "_docker_answers", lambda timeout=1.0: True)
    monkeypatch.setattr(brokers, "_tansu_binary", lambda: binary)
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
        """BOOTSTRAP_SERVERS wins over Docker; its compat comes from STREAMSDSL_BROKER_COMPAT."""
        env.setenv("BOOTSTRAP_SERVERS", "broker:9092")
        env.setenv("STREAMSDSL_BROKER_COMPAT", "tansu")
        env.setattr(brokers, "_engine_factory", lambda: pytest.fail("Docker must not be asked"))
        plan = select(caplog)
        assert (plan.kind, plan.compat, plan.bootstrap_servers, plan.image) == ("external", "tansu", "broker:9092", None)
        assert info_lines(caplog) == [
            "using the external broker at broker:9092 (compat tansu): BOOTSTRAP_SERVERS is set"
        ]

    def test_process_when_no_docker_engine_answers(self, env: pytest.MonkeyPatch,
                                                   caplog: pytest.LogCaptureFixture) -> None:
        """Without Docker the Tansu process runs, and the line names the Docker host probed."""
        env.setattr(brokers, "_docker_answers", lambda timeout=1.0: False)
        env.setattr(brokers, "_engine_factory", lambda: pytest.fail("Docker must not be asked"))
        plan = select(caplog)
        assert (plan.kind, plan.compat, plan.image) == ("process", "tansu", None)
        assert info_lines(caplog) == [
            f"no Docker engine answers at {HOST}: running the bundled Tansu broker as a process"
        ]

    def test_kafka_image_present_locally(self, env: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
        """A Kafka image already on the engine is used without a pull."""
        engine = use_engine(env, FakeEngine(present={"apache/kafka:4.1.0", RYUK}))
        plan = select(caplog)
        assert (plan.kind, plan.compat, plan.image) == ("container", "kafka", "apache/kafka:4.1.0")
        assert info_lines(caplog) == [
            f"running apache/kafka:4.1.0 in a container: a Docker engine answers at {HOST} "
            "and the image is present locally"
        ]
        assert ("pull", "apache/kafka:4.1.0") not in engine.calls
        assert engine.closed

    def test_kafka_image_pulled(self, env: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
        """A pullable Kafka image is pulled and used; Ryuk stays enabled when its image is here."""
        engine = use_engine(env, FakeEngine(present={RYUK}, pullable={"apache/kafka:4.1.0"}))
        plan = select(caplog)
        assert (plan.kind, plan.compat, plan.image) == ("container", "kafka", "apache/kafka:4.1.0")
        assert info_lines(caplog) == [
            f"running apache/kafka:4.1.0 in a container: a Docker engine answers at {HOST} and the image was pulled"
        ]
        assert engine.calls == [("has_image", "apache/kafka:4.1.0"), ("pull", "apache/kafka:4.1.0"),
                                ("has_image", RYUK)]
        assert "TESTCONTAINERS_RYUK_DISABLED" not in os.environ

    def test_image_from_environment(self, env: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
        """STREAMSDSL_KAFKA_IMAGE names the Kafka image."""
        env.setenv("STREAMSDSL_KAFKA_IMAGE", "confluentinc/cp-kafka:8.0.0")
        use_engine(env, FakeEngine(present={"confluentinc/cp-kafka:8.0.0", RYUK}))
        plan = select(caplog)
        assert plan.image == "confluentinc/cp-kafka:8.0.0"

    def test_failed_pull_builds_and_runs_the_tansu_image(self, env: pytest.MonkeyPatch, binary: str,
                                                         caplog: pytest.LogCaptureFixture) -> None:
        """No registry: the pull fails, the Tansu image is built (no pull) and Ryuk is disabled."""
        from testcontainers.core.config import testcontainers_config

        tag = brokers._tansu_image_tag(binary)
        engine = use_engine(env, FakeEngine())
        plan = select(caplog)
        assert (plan.kind, plan.compat, plan.image) == ("container", "tansu", tag)
        assert info_lines(caplog) == [
            f"apache/kafka:4.1.0 could not be pulled ({NO_HOST}): running the bundled Tansu broker as a "
            f"local image ({tag}, built now, no pull)"
        ]
        assert engine.calls == [
            ("has_image", "apache/kafka:4.1.0"), ("pull", "apache/kafka:4.1.0"),
            ("has_image", tag), ("build_tansu_image", binary, tag),
            ("has_image", RYUK), ("pull", RYUK),
        ]
        assert os.environ["TESTCONTAINERS_RYUK_DISABLED"] == "true"
        assert testcontainers_config.ryuk_disabled is True
        assert engine.closed

    def test_tansu_image_built_once(self, env: pytest.MonkeyPatch, binary: str,
                                    caplog: pytest.LogCaptureFixture) -> None:
        """An image already built for this binary is reused, not rebuilt."""
        tag = brokers._tansu_image_tag(binary)
        engine = use_engine(env, FakeEngine(present={tag}))
        plan = select(caplog)
        assert plan.image == tag
        assert not [c for c in engine.calls if c[0] == "build_tansu_image"]
        assert info_lines(caplog)[0].endswith(f"running the bundled Tansu broker as a local image ({tag}, already built)")

    def test_user_disabled_ryuk_is_not_probed(self, env: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
        """TESTCONTAINERS_RYUK_DISABLED=true set by the user: the Ryuk image is not looked for."""
        env.setenv("TESTCONTAINERS_RYUK_DISABLED", "true")
        engine = use_engine(env, FakeEngine(present={"apache/kafka:4.1.0"}))
        select(caplog)
        assert engine.calls == [("has_image", "apache/kafka:4.1.0")]

    def test_build_failure_falls_back_to_the_process(self, env: pytest.MonkeyPatch,
                                                     caplog: pytest.LogCaptureFixture) -> None:
        """Docker answers but neither image can be had: the Tansu process, with both reasons."""
        use_engine(env, FakeEngine(build_error=RuntimeError("no space left on device")))
        plan = select(caplog)
        assert (plan.kind, plan.compat) == ("process", "tansu")
        assert info_lines(caplog) == [
            f"apache/kafka:4.1.0 could not be pulled ({NO_HOST}) and the Tansu image could not be built "
            "(no space left on device): running the bundled Tansu broker as a process"
        ]

    def test_exactly_one_info_line(self, env: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
        """Pull failures of the Kafka and Ryuk images add DEBUG lines only."""
        use_engine(env, FakeEngine())
        select(caplog)
        assert len(info_lines(caplog)) == 1
        assert [r.levelno for r in caplog.records if r.name == brokers.logger.name].count(logging.INFO) == 1


class TestForcedKind:
    """``prefer=`` and ``STREAMSDSL_BROKER`` force one kind of broker."""

    @pytest.mark.parametrize("value", ["process", "tansu"])
    def test_process_from_environment_skips_docker(self, env: pytest.MonkeyPatch, value: str,
                                                   caplog: pytest.LogCaptureFixture) -> None:
        """STREAMSDSL_BROKER=process runs the process even when Docker answers and BOOTSTRAP_SERVERS is set."""
        env.setenv("STREAMSDSL_BROKER", value)
        env.setenv("BOOTSTRAP_SERVERS", "broker:9092")
        env.setattr(brokers, "_docker_answers", lambda timeout=1.0: pytest.fail("Docker must not be probed"))
        plan = select(caplog)
        assert plan.kind == "process"
        assert info_lines(caplog) == [f"running the bundled Tansu broker as a process: STREAMSDSL_BROKER={value}"]

    def test_prefer_overrides_the_environment(self, env: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
        """prefer= wins over STREAMSDSL_BROKER."""
        env.setenv("STREAMSDSL_BROKER", "container")
        plan = select(caplog, prefer="tansu")
        assert plan.kind == "process"
        assert info_lines(caplog) == ["running the bundled Tansu broker as a process: prefer='tansu'"]

    @pytest.mark.parametrize("prefer", ["docker", "container"])
    def test_forced_container_names_the_reason(self, env: pytest.MonkeyPatch, prefer: str,
                                               caplog: pytest.LogCaptureFixture) -> None:
        """prefer='docker' (alias 'container') runs a container and says it was forced."""
        use_engine(env, FakeEngine(present={"apache/kafka:4.1.0", RYUK}))
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
            "point DOCKER_HOST at one), or use STREAMSDSL_BROKER=process for the Tansu process."
        )

    def test_forced_container_when_no_image_can_be_had_fails(self, env: pytest.MonkeyPatch, binary: str) -> None:
        """A forced container does not fall back to the process."""
        use_engine(env, FakeEngine(build_error=RuntimeError("boom")))
        with pytest.raises(brokers.BrokerStartError) as info:
            brokers._select_broker("docker")
        tag = brokers._tansu_image_tag(binary)
        assert str(info.value) == (
            f"prefer='docker' needs a broker container, but apache/kafka:4.1.0 could not be pulled ({NO_HOST}) "
            f"and the Tansu image {tag} could not be built (boom). Set STREAMSDSL_KAFKA_IMAGE to an image present "
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
            "'prefer' must be one of None, 'external', 'container', 'docker', 'process', 'tansu' (got 'kafka')."
        )

    def test_unknown_environment_value(self, env: pytest.MonkeyPatch) -> None:
        """An unknown STREAMSDSL_BROKER value names the variable and how to undo it."""
        env.setenv("STREAMSDSL_BROKER", "podman")
        with pytest.raises(InvalidArgumentError) as info:
            brokers._select_broker(None)
        assert str(info.value) == (
            "STREAMSDSL_BROKER must be one of auto, external, container, docker, process, tansu (got 'podman'); "
            "unset it to let local_kafka() choose."
        )

    def test_auto_is_the_default_order(self, env: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
        """STREAMSDSL_BROKER=auto forces nothing."""
        env.setenv("STREAMSDSL_BROKER", "auto")
        env.setattr(brokers, "_docker_answers", lambda timeout=1.0: False)
        assert select(caplog).kind == "process"


class TestHelpers:
    """Small pieces of the selection."""

    def test_tansu_image_tag_is_the_binary_hash(self, tmp_path: Path) -> None:
        """Same content, same tag; another binary, another tag."""
        a, b, c = tmp_path / "a", tmp_path / "b", tmp_path / "c"
        a.write_bytes(b"tansu 0.6.0")
        b.write_bytes(b"tansu 0.6.0")
        c.write_bytes(b"tansu 0.7.0")
        tag = brokers._tansu_image_tag(str(a))
        assert tag == "streamsdsl/tansu-broker:" + hashlib.sha256(b"tansu 0.6.0").hexdigest()[:12]
        assert brokers._tansu_image_tag(str(b)) == tag
        assert brokers._tansu_image_tag(str(c)) != tag

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
