"""Where `local_kafka`'s broker comes from: the choice, the start, and the controls.

`_select_broker` decides, from ``prefer=``, ``STREAMSDSL_BROKER``, ``BOOTSTRAP_SERVERS`` and a
probe of the Docker engine, which broker to run and logs one INFO line saying which and why.
Every broker it starts is Apache Kafka `KAFKA_VERSION` (KRaft, one node): `_container_broker`
runs the registry image, or when none can be pulled an image built locally with no pull from
the cached jars and a ``jlink`` JRE (`streamsdsl.testing.kafka_dist`); `_process_broker` runs
the same jars as a JVM child process. Both wait until the broker answers metadata requests and
stop it on exit. `_ProcessControl` and `_ContainerControl` pause, stop and restart it for
`LocalKafka`'s fault-test controls.

The user-facing side, `LocalKafka`, `local_kafka()` and the ``dev-broker`` command, is in
`streamsdsl.testing.local_kafka`, which re-exports the constants and `BrokerStartError`.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import attrs

from streamsdsl.errors import InvalidArgumentError
from streamsdsl.testing import kafka_dist
from streamsdsl.testing.kafka_dist import KAFKA_VERSION, BrokerStartError

__all__ = [
    "BOOTSTRAP_ENV",
    "BROKER_ENV",
    "DEFAULT_KAFKA_IMAGE",
    "IMAGE_ENV",
    "KAFKA_VERSION",
    "BrokerStartError",
]

#: Environment variable naming an external broker to use instead of starting one.
BOOTSTRAP_ENV = "BOOTSTRAP_SERVERS"
#: Environment variable forcing one kind of broker: "external", "container" (alias "docker"),
#: "process" or "auto" (the default order).
BROKER_ENV = "STREAMSDSL_BROKER"
#: Environment variable naming the Kafka image of the container broker.
IMAGE_ENV = "STREAMSDSL_KAFKA_IMAGE"
#: The Kafka image used when ``STREAMSDSL_KAFKA_IMAGE`` is not set (KRaft, no ZooKeeper): the
#: release the process broker and the locally built image run too.
DEFAULT_KAFKA_IMAGE = f"apache/kafka:{KAFKA_VERSION}"
_KINDS = ("external", "container", "process")
_KINDS_BY_NAME = {
    "external": "external",
    "container": "container",
    "docker": "container",
    "process": "process",
}
#: Settings of the Tansu broker, removed with it: refused with what replaced them.
_REMOVED_KIND = "tansu"
_REMOVED_COMPAT_ENV = "STREAMSDSL_BROKER_COMPAT"
_DEFAULT_DOCKER_HOST = "unix:///var/run/docker.sock"

# The one documented logger of the broker choice (docs/kafka.md; the integration suite's and
# `dev_broker_main`'s handlers listen on it), whichever module logs the line.
logger = logging.getLogger("streamsdsl.testing.local_kafka")


# -- broker control ----------------------------------------------------------------------
def _thread_states(pid: int) -> list[str]:
    """The scheduler state letter of each thread of ``pid`` (``T`` when stopped), from /proc."""
    states = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(OSError):  # a thread that ended meanwhile
            stat = (task / "stat").read_text()
            states.append(stat[stat.rindex(")") + 2])
    return states


def _wait_for_threads(pid: int, *, stopped: bool, timeout: float = 10.0) -> None:
    """Wait until every thread of ``pid`` is stopped (or none is), where /proc exists."""
    if not Path(f"/proc/{pid}/task").is_dir():
        return
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        states = _thread_states(pid)
        if all((s in "Tt") == stopped for s in states):
            return
        time.sleep(0.01)
    logger.warning("broker process %d: threads not all %s after %.0f s", pid,
                   "stopped" if stopped else "running", timeout)


class _ProcessControl:
    """The Kafka broker run as a JVM child process: SIGSTOP/SIGCONT, terminate, start again.

    ``argv`` starts the broker on a formatted log directory, so a restart keeps every topic.
    """

    def __init__(self, argv: list[str]) -> None:
        self._argv = argv
        self._log = tempfile.TemporaryFile()
        self._proc: subprocess.Popen[bytes] | None = None
        self.paused = False

    def start(self) -> None:
        if self.running():
            return
        self._proc = subprocess.Popen(
            self._argv, stdin=subprocess.DEVNULL, stdout=self._log, stderr=subprocess.STDOUT
        )
        self.paused = False

    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def pause(self) -> None:
        """SIGSTOP, then wait until every thread of the JVM has stopped.

        A group stop is not instantaneous: each thread stops when it next runs, and on a loaded
        machine a network thread can still answer a request in between.
        """
        if not self.paused:
            assert self._proc is not None
            os.kill(self._proc.pid, signal.SIGSTOP)
            self.paused = True
            _wait_for_threads(self._proc.pid, stopped=True)

    def unpause(self) -> None:
        if self.paused:
            assert self._proc is not None
            os.kill(self._proc.pid, signal.SIGCONT)
            self.paused = False
            _wait_for_threads(self._proc.pid, stopped=False)

    def stop(self) -> None:
        """SIGTERM (Kafka's controlled shutdown), SIGKILL after 30 s."""
        proc = self._proc
        if proc is None or proc.poll() is not None:
            return
        self.unpause()  # a stopped process would keep SIGTERM pending
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    def failure(self) -> str | None:
        if self._proc is None or self._proc.poll() is None:
            return None
        return f"the broker process exited with code {self._proc.returncode} before answering\n{self.output()}"

    def output(self) -> str:
        """The end of the broker's output (warnings and errors)."""
        self._log.seek(0)
        return "broker output:\n" + self._log.read()[-3000:].decode(errors="replace")

    def close(self) -> None:
        try:
            self.stop()
        finally:
            self._log.close()


class _ContainerControl:
    """A broker container started by testcontainers: docker pause/unpause, stop, start again."""

    def __init__(self, container: Any, *, stop_timeout: int) -> None:
        self._container = container  # testcontainers DockerContainer, already started
        self._stop_timeout = stop_timeout
        self.paused = False

    def _wrapped(self) -> Any:
        return self._container.get_wrapped_container()

    def start(self) -> None:
        if not self.running():
            self._wrapped().start()
        self.paused = False

    def running(self) -> bool:
        wrapped = self._wrapped()
        wrapped.reload()
        return bool(wrapped.status in ("running", "paused"))

    def pause(self) -> None:
        if not self.paused:
            self._wrapped().pause()
            self.paused = True

    def unpause(self) -> None:
        if self.paused:
            self._wrapped().unpause()
            self.paused = False

    def stop(self) -> None:
        if self.running():
            self.unpause()
            self._wrapped().stop(timeout=self._stop_timeout)

    def failure(self) -> str | None:
        wrapped = self._wrapped()
        wrapped.reload()
        if wrapped.status not in ("exited", "dead"):
            return None
        code = wrapped.attrs.get("State", {}).get("ExitCode")
        tail = wrapped.logs(tail=40).decode(errors="replace")
        return f"the broker container {wrapped.short_id} exited with code {code} before answering\nlogs:\n{tail}"

    def close(self, timeout: float = 30.0) -> None:
        """Remove the container and wait until the engine no longer lists it.

        A paused container is unpaused first (the engine may otherwise keep a paused one in
        "removal in progress" for a while after ``docker rm -f`` returned)."""
        import docker.errors

        with contextlib.suppress(docker.errors.APIError):
            self.unpause()
        wrapped = self._wrapped()
        self._container.stop()  # docker rm -f (and its volumes)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                wrapped.reload()
            except docker.errors.NotFound:
                return
            time.sleep(0.1)
        logger.warning("the broker container %s was still listed %.0f s after its removal", wrapped.short_id, timeout)


# -- broker selection -------------------------------------------------------------------
def _docker_host() -> str:
    """The Docker engine address that the probe, the docker SDK and testcontainers all use."""
    return os.environ.get("DOCKER_HOST", "").strip() or _DEFAULT_DOCKER_HOST


def _docker_answers(timeout: float = 1.0) -> bool:
    """Return True when a Docker engine answers ``/_ping`` within ``timeout`` seconds.

    Probes ``DOCKER_HOST`` (default ``unix:///var/run/docker.sock``) directly: the docker SDK
    leaks a socket, a ``ResourceWarning``, when the engine is absent. Never raises.
    """
    host = _docker_host()
    try:
        if host.startswith("unix://"):
            path = host[len("unix://") :]
            if not os.path.exists(path):
                return False
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            target: Any = path
        elif host.startswith("tcp://"):
            hostport = host[len("tcp://") :].rstrip("/")
            h, _, p = hostport.rpartition(":")
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            target = (h, int(p))
        else:
            return False
        with sock:
            sock.settimeout(timeout)
            sock.connect(target)
            sock.sendall(b"GET /_ping HTTP/1.0\r\nHost: docker\r\n\r\n")
            reply = sock.recv(64)
        return reply.startswith(b"HTTP/") and b" 200" in reply.split(b"\r\n", 1)[0]
    except Exception:  # noqa: BLE001 - any failure means "no usable engine"
        return False


class _DockerEngine:
    """The few Docker calls the selection needs (the docker SDK on ``DOCKER_HOST``).

    Unit tests replace it with a fake of the same shape (``has_image``, ``pull``,
    ``build_kafka_image``, ``close``).
    """

    def __init__(self) -> None:
        import docker

        self._client = docker.DockerClient(base_url=_docker_host(), timeout=120)

    def has_image(self, ref: str) -> bool:
        import docker

        try:
            self._client.images.get(ref)
        except docker.errors.ImageNotFound:
            return False
        return True

    def pull(self, ref: str) -> None:
        self._client.images.pull(ref)

    def build_kafka_image(self, libs: Path, tag: str) -> None:
        """Build ``tag`` from Kafka's jars and a ``jlink`` JRE, ``FROM scratch``: nothing is pulled."""
        with tempfile.TemporaryDirectory(prefix="streamsdsl-kafka-image-") as tmp:
            kafka_dist.write_image_context(Path(tmp), libs)
            self._client.images.build(path=tmp, tag=tag, pull=False, rm=True, forcerm=True)

    def close(self) -> None:
        self._client.close()


def _short_error(exc: BaseException, limit: int = 160) -> str:
    """One line of an error, its end kept (where Docker puts the cause: "... no such host")."""
    text = " ".join(str(getattr(exc, "explanation", None) or exc or type(exc).__name__).split())
    return text if len(text) <= limit else "…" + text[-(limit - 1) :]


def _forced_kind(prefer: str | None) -> tuple[str | None, str]:
    """The broker kind forced by ``prefer`` or ``STREAMSDSL_BROKER``, and which of them forced it."""
    removed = (
        f"{_REMOVED_KIND!r} was removed with the Tansu broker: the local broker is Apache Kafka {KAFKA_VERSION}, "
        "and 'process' runs it as a JVM child process"
    )
    if prefer is not None:
        if prefer == _REMOVED_KIND:
            raise InvalidArgumentError(f"'prefer' = {removed}: use prefer='process'.")
        if prefer not in _KINDS_BY_NAME:
            raise InvalidArgumentError(
                f"'prefer' must be one of None, {', '.join(repr(k) for k in _KINDS_BY_NAME)} (got {prefer!r})."
            )
        return _KINDS_BY_NAME[prefer], f"prefer={prefer!r}"
    env = os.environ.get(BROKER_ENV, "").strip().lower()
    if env in ("", "auto"):
        return None, ""
    if env == _REMOVED_KIND:
        raise InvalidArgumentError(f"{BROKER_ENV} = {removed}: set {BROKER_ENV}=process.")
    if env not in _KINDS_BY_NAME:
        raise InvalidArgumentError(
            f"{BROKER_ENV} must be one of auto, {', '.join(_KINDS_BY_NAME)} (got {env!r}); "
            f"unset it to let local_kafka() choose."
        )
    return _KINDS_BY_NAME[env], f"{BROKER_ENV}={env}"


@attrs.frozen
class _Plan:
    """Which broker `local_kafka` starts, and the one log line that says why.

    ``local_image`` is true when ``image`` is the locally built one (`kafka_dist.image_tag`),
    configured through its own environment rather than the registry image's.
    """

    kind: str = attrs.field(validator=attrs.validators.in_(_KINDS))
    message: str
    image: str | None = None
    bootstrap_servers: str | None = None
    local_image: bool = False


def _disable_ryuk() -> None:
    from testcontainers.core.config import testcontainers_config

    os.environ["TESTCONTAINERS_RYUK_DISABLED"] = "true"
    testcontainers_config.ryuk_disabled = True


def _ryuk_or_disable(engine: Any) -> None:
    """Keep testcontainers' Ryuk (the reaper) when its image is here or pullable, else disable it.

    Our ``finally`` removes the container either way; Ryuk only adds cleanup after a kill -9.
    """
    from testcontainers.core.config import testcontainers_config

    if testcontainers_config.ryuk_disabled:
        return
    ryuk = testcontainers_config.ryuk_image
    if engine.has_image(ryuk):
        return
    try:
        engine.pull(ryuk)
    except Exception as exc:  # noqa: BLE001 - no registry: run without the reaper
        logger.debug("%s could not be pulled (%s): TESTCONTAINERS_RYUK_DISABLED=true", ryuk, _short_error(exc))
        _disable_ryuk()


def _select_container(engine: Any, host: str, forced_by: str) -> _Plan:
    image = os.environ.get(IMAGE_ENV, "").strip() or DEFAULT_KAFKA_IMAGE
    suffix = f" ({forced_by})" if forced_by else ""
    if engine.has_image(image):
        _ryuk_or_disable(engine)
        return _Plan("container", f"running {image} in a container: a Docker engine answers at {host} "
                     f"and the image is present locally{suffix}", image=image)
    try:
        logger.debug("pulling %s", image)
        engine.pull(image)
    except Exception as exc:  # noqa: BLE001 - a failed pull is never fatal
        pull_error = _short_error(exc)
    else:
        _ryuk_or_disable(engine)
        return _Plan("container",
                     f"running {image} in a container: a Docker engine answers at {host} and the image was pulled"
                     f"{suffix}", image=image)
    libs = kafka_dist.kafka_libs()  # missing jars: an error naming the command, whatever runs next
    try:
        tag = kafka_dist.image_tag(libs)
        if engine.has_image(tag):
            how = "already built"
        else:
            engine.build_kafka_image(libs, tag)
            how = "built now from the cached jars and a jlink JRE, no pull"
    except Exception as exc:  # noqa: BLE001 - fall back to the process (or fail if forced)
        if forced_by:
            raise BrokerStartError(
                f"{forced_by} needs a broker container, but {image} could not be pulled ({pull_error}) and the "
                f"local Kafka image could not be built ({_short_error(exc, 400)}). Set {IMAGE_ENV} to an image "
                f"present locally, or use {BROKER_ENV}=process."
            ) from exc
        return _Plan("process", f"{image} could not be pulled ({pull_error}) and the local Kafka image could not "
                     f"be built ({_short_error(exc)}): running Kafka {KAFKA_VERSION} as a JVM process")
    _ryuk_or_disable(engine)
    return _Plan("container", f"{image} could not be pulled ({pull_error}): running Kafka {KAFKA_VERSION} in a "
                 f"container of the local image {tag} ({how}){suffix}", image=tag, local_image=True)


def _select_broker(prefer: str | None = None) -> _Plan:
    """Decide which broker to run and log one INFO line saying which and why."""
    plan = _choose(prefer)
    logger.info("%s", plan.message)
    return plan


def _choose(prefer: str | None) -> _Plan:
    if os.environ.get(_REMOVED_COMPAT_ENV, "").strip():
        raise InvalidArgumentError(
            f"{_REMOVED_COMPAT_ENV} was removed with the Tansu broker: every broker local_kafka() uses is read up "
            f"to its high watermark, which Apache Kafka reports exactly; unset {_REMOVED_COMPAT_ENV}."
        )
    forced, forced_by = _forced_kind(prefer)
    external = os.environ.get(BOOTSTRAP_ENV, "").strip()
    if forced == "external" or (forced is None and external):
        if not external:
            raise BrokerStartError(f"{forced_by} needs {BOOTSTRAP_ENV}=host:port in the environment.")
        why = forced_by or f"{BOOTSTRAP_ENV} is set"
        return _Plan("external", f"using the external broker at {external}: {why}", bootstrap_servers=external)
    if forced == "process":
        return _Plan("process", f"running Kafka {KAFKA_VERSION} as a JVM process: {forced_by}")
    host = _docker_host()
    if not _docker_answers():
        if forced == "container":
            raise BrokerStartError(
                f"{forced_by} needs a Docker engine, but none answers at {host}: start Docker (or point "
                f"DOCKER_HOST at one), or use {BROKER_ENV}=process for Kafka as a JVM process."
            )
        return _Plan("process", f"no Docker engine answers at {host}: running Kafka {KAFKA_VERSION} as a JVM process")
    engine = _engine_factory()
    try:
        return _select_container(engine, host, forced_by)
    finally:
        engine.close()


#: Builds the `_DockerEngine`; unit tests replace it with a fake.
_engine_factory: Callable[[], Any] = _DockerEngine


def _free_ports() -> tuple[int, int]:
    """Two distinct free loopback ports (the broker's and the controller's), both bound at once."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as a, socket.socket(socket.AF_INET, socket.SOCK_STREAM) as b:
        a.bind(("127.0.0.1", 0))
        b.bind(("127.0.0.1", 0))
        return int(a.getsockname()[1]), int(b.getsockname()[1])


def _wait_for_metadata(bootstrap: str, timeout: float, failure: Callable[[], str | None] | None = None) -> None:
    """Poll metadata until the broker answers; fail early when ``failure()`` reports it died."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    deadline = time.monotonic() + timeout
    next_check = 0.0
    last: Exception | None = None
    while time.monotonic() < deadline:
        if failure is not None and time.monotonic() >= next_check:
            problem = failure()
            if problem is not None:
                raise BrokerStartError(problem)
            next_check = time.monotonic() + 0.5
        try:
            admin.list_topics(timeout=0.5)
            return
        except Exception as exc:  # noqa: BLE001 - keep polling until the deadline
            last = exc
            time.sleep(0.05)
    raise BrokerStartError(f"no broker answered metadata requests on {bootstrap} within {timeout} s: {last}")


def _wait_for_leaders(bootstrap: str, timeout: float) -> None:
    """Wait until every partition on the broker answers a ListOffsets request.

    A restarted broker answers metadata requests before it leads its partitions again (measured:
    ``NOT_LEADER_FOR_PARTITION`` from a consumer's first offsets request right after a restart).
    """
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import AdminClient, OffsetSpec

    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    deadline = time.monotonic() + timeout
    last: Exception | None = None
    while time.monotonic() < deadline:
        try:
            meta = admin.list_topics(timeout=5)
            wanted = {TopicPartition(name, p): OffsetSpec.latest()
                      for name, topic in meta.topics.items() for p in topic.partitions}
            for future in (admin.list_offsets(wanted, request_timeout=5).values() if wanted else ()):
                future.result()
            return
        except Exception as exc:  # noqa: BLE001 - not leading yet: ask again until the deadline
            last = exc
            time.sleep(0.1)
    raise BrokerStartError(f"the broker at {bootstrap} did not lead its partitions within {timeout} s: {last}")


def _kafka_env(port: int, controller_port: int) -> dict[str, str]:
    """The registry image's environment: a single-node KRaft broker (broker + controller) on 127.0.0.1."""
    return {
        "KAFKA_NODE_ID": "1",
        "KAFKA_PROCESS_ROLES": "broker,controller",
        "KAFKA_LISTENERS": f"PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}",
        "KAFKA_ADVERTISED_LISTENERS": f"PLAINTEXT://127.0.0.1:{port}",
        "KAFKA_LISTENER_SECURITY_PROTOCOL_MAP": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
        "KAFKA_CONTROLLER_LISTENER_NAMES": "CONTROLLER",
        "KAFKA_INTER_BROKER_LISTENER_NAME": "PLAINTEXT",
        "KAFKA_CONTROLLER_QUORUM_VOTERS": f"1@127.0.0.1:{controller_port}",
        "KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR": "1",
        "KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR": "1",
        "KAFKA_TRANSACTION_STATE_LOG_MIN_ISR": "1",
        "KAFKA_SHARE_COORDINATOR_STATE_TOPIC_REPLICATION_FACTOR": "1",
        "KAFKA_SHARE_COORDINATOR_STATE_TOPIC_MIN_ISR": "1",
        "KAFKA_GROUP_INITIAL_REBALANCE_DELAY_MS": "0",
        "KAFKA_LOG_RETENTION_MS": "-1",  # as kafka_dist.server_properties: old event times stay
        "KAFKA_NUM_PARTITIONS": "1",
        "KAFKA_LOG_DIRS": "/tmp/kraft-combined-logs",
        "KAFKA_HEAP_OPTS": "-Xmx512m -Xms256m",
        "CLUSTER_ID": kafka_dist.random_cluster_id(),
    }


@attrs.frozen
class _Started:
    """A broker we started that answers metadata requests, and the control that stops it."""

    bootstrap_servers: str
    kind: str
    control: Any
    image: str | None = None


@contextlib.contextmanager
def _running(started: _Started, timeout: float) -> Iterator[_Started]:
    """Wait for a started broker, yield it, and always stop it."""
    try:
        _wait_for_metadata(started.bootstrap_servers, timeout, started.control.failure)
        yield started
    finally:
        started.control.close()


@contextlib.contextmanager
def _process_broker(timeout: float) -> Iterator[_Started]:
    """Kafka as a JVM child process: format a new log directory in a temporary directory, start
    the broker on it, and remove the directory when the broker has stopped."""
    libs = kafka_dist.kafka_libs()
    java = kafka_dist.java_executable()
    port, controller_port = _free_ports()
    workdir = Path(tempfile.mkdtemp(prefix="streamsdsl-kafka-"))
    try:
        properties = workdir / "server.properties"
        properties.write_text(kafka_dist.server_properties(port, controller_port, str(workdir / "logs")))
        log4j = workdir / "log4j2.properties"
        log4j.write_text(kafka_dist.LOG4J2_PROPERTIES)
        formatting = subprocess.run(
            kafka_dist.format_argv(java, libs, log4j, properties, kafka_dist.random_cluster_id()),
            stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=max(timeout, 60.0), check=False,
        )
        if formatting.returncode != 0:
            raise BrokerStartError(
                f"formatting the Kafka log directory failed (exit code {formatting.returncode}):\n"
                f"{(formatting.stdout + formatting.stderr)[-2000:]}"
            )
        control = _ProcessControl(kafka_dist.broker_argv(java, libs, log4j, properties))
        control.start()
        with _running(_Started(f"127.0.0.1:{port}", "process", control), timeout) as running:
            yield running
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


@contextlib.contextmanager
def _container_broker(plan: _Plan, timeout: float) -> Iterator[_Started]:
    from testcontainers.core.container import DockerContainer

    assert plan.image is not None
    port, controller_port = _free_ports()
    container = DockerContainer(plan.image).with_kwargs(network_mode="host")
    environment = (kafka_dist.image_environment(port, controller_port) if plan.local_image
                   else _kafka_env(port, controller_port))
    for key, value in environment.items():
        container = container.with_env(key, value)
    try:
        container.start()
    except Exception as exc:
        with contextlib.suppress(Exception):
            container.stop()
        raise BrokerStartError(f"the broker container ({plan.image}) did not start: {_short_error(exc, 400)}") from exc
    control = _ContainerControl(container, stop_timeout=30)
    started = _Started(f"127.0.0.1:{port}", "container", control, image=plan.image)
    with _running(started, timeout) as running:
        yield running
