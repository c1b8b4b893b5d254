"""A Kafka broker for development and tests, and small produce/consume helpers.

`local_kafka` picks, in this order, and logs one INFO line saying which broker and why:

1. an external broker named by the environment variable ``BOOTSTRAP_SERVERS``;
2. when a Docker engine answers (``DOCKER_HOST``, default ``unix:///var/run/docker.sock``),
   a container run by testcontainers with host networking on a free 127.0.0.1 port: the
   Kafka image ``STREAMSDSL_KAFKA_IMAGE`` (default ``apache/kafka:4.4.0``, single-node
   KRaft) when it is present locally or can be pulled, else an image built locally with no
   pull from the cached Kafka jars and a ``jlink`` JRE (``FROM scratch``, built once, tagged
   ``streamsdsl/kafka-broker:4.4.0-<hash>``). A failed pull is never an error.
   testcontainers' Ryuk reaper is disabled when its image cannot be had; the container is
   removed when the ``with`` block ends either way;
3. without Docker, Apache Kafka 4.4.0 as a JVM child process (KRaft, one node) on free
   loopback ports, its log directory in a temporary directory removed at the end.

Every broker started here is Apache Kafka 4.4.0. The process and the local image run the jars
that ``streamsdsl kafka-jars`` (``make install``) resolved from Maven Central into the user's
cache (`streamsdsl.testing.kafka_dist`); without them `local_kafka` fails with an error that
names that command. ``STREAMSDSL_BROKER`` (``external``, ``container``/``docker``,
``process`` or ``auto``) forces one kind, as ``prefer=`` does for one call.

The choice, the start and the controls of the broker are in `streamsdsl.testing.brokers`.

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
import logging
import signal
import sys
import time
import uuid
from collections.abc import Iterator, Sequence
from typing import Any, NamedTuple

from streamsdsl.errors import InvalidArgumentError
from streamsdsl.testing.brokers import (
    _KINDS,
    BOOTSTRAP_ENV,
    BROKER_ENV,
    DEFAULT_KAFKA_IMAGE,
    IMAGE_ENV,
    KAFKA_VERSION,
    BrokerStartError,
    _container_broker,
    _process_broker,
    _select_broker,
    _wait_for_leaders,
    _wait_for_metadata,
)
from streamsdsl.testing.kafka_dist import KafkaJarsMissingError

# integration/test_local_broker.py reads these private names on this module.
from streamsdsl.testing.brokers import _docker_answers, _docker_host, _KINDS_BY_NAME  # noqa: F401, E402, I001

__all__ = [
    "BROKER_ENV",
    "DEFAULT_KAFKA_IMAGE",
    "IMAGE_ENV",
    "KAFKA_VERSION",
    "BrokerControlError",
    "BrokerStartError",
    "KafkaJarsMissingError",
    "ConsumedRecord",
    "LocalKafka",
    "dev_broker_main",
    "local_kafka",
    "main",
]

# The logger of the INFO line saying which broker (`streamsdsl.testing.brokers` logs it on this name).
logger = logging.getLogger(__name__)

#: A record to produce: ``(key, value, timestamp_ms, partition)`` or
#: ``(key, value, timestamp_ms, partition, headers)``; ``partition`` may be ``None`` (the
#: producer's partitioner decides), ``headers`` is a list of ``(str, bytes)``.
ProduceRecord = tuple[Any, ...]


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
    kind : {"external", "container", "process"}
        Where the broker runs: named by ``BOOTSTRAP_SERVERS`` (not ours to control), a
        container we started, or Kafka as our JVM child process.
    image : str, optional
        The container's image (``kind == "container"`` only).

    Attributes
    ----------
    bootstrap_servers, kind, image
        As given.
    """

    def __init__(
        self,
        bootstrap_servers: str,
        *,
        kind: str = "external",
        image: str | None = None,
        control: Any = None,
    ) -> None:
        if kind not in _KINDS:
            raise InvalidArgumentError(f"broker kind must be one of {_KINDS} (got {kind!r}).")
        self.bootstrap_servers = bootstrap_servers
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
        wait until it answers metadata requests and leads every partition again (``timeout``
        seconds, default 30; 120 for a container).

        The broker keeps its log directory: every topic and record is there after the restart
        (the process runs again on the same directory, the container is started again).
        """
        control = self._controlled("restart")
        self._drop_producer()
        control.stop()
        control.start()
        if timeout is None:
            timeout = 120.0 if self.kind == "container" else 30.0
        started = time.monotonic()
        _wait_for_metadata(self.bootstrap_servers, timeout, control.failure)
        _wait_for_leaders(self.bootstrap_servers, max(1.0, timeout - (time.monotonic() - started)))

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

            self._cached_producer = Producer(
                {
                    "bootstrap.servers": self.bootstrap_servers,
                    "acks": "all",
                    "enable.idempotence": True,
                    "partitioner": "murmur2_random",
                    # errors only: a broker just started answers the producer-id request with
                    # "coordinator load in progress" for a moment, a warning librdkafka retries
                    # (produce() still raises when a record is not delivered)
                    "log_level": 3,
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
        return f"LocalKafka(bootstrap_servers={self.bootstrap_servers!r}, kind={self.kind!r}{image})"

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
    def consume_all(self, topic: str, *, timeout: float = 30.0) -> list[ConsumedRecord]:
        """Read every record of ``topic`` from the beginning of each partition.

        Uses ``assign()`` (no consumer group, ``read_uncommitted``). Reads until every
        partition has reported its end (its high watermark).

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
            while len(at_end) < len(partitions):
                if time.monotonic() > deadline:
                    raise TimeoutError(
                        f"consume_all({topic!r}) did not reach the end of partitions "
                        f"{sorted(set(partitions) - at_end)} within {timeout} s"
                    )
                for m in consumer.consume(10_000, 0.05):
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


@contextlib.contextmanager
def local_kafka(*, prefer: str | None = None, timeout: float | None = None) -> Iterator[LocalKafka]:
    """Yield a running broker as a `LocalKafka`; stop (and remove) it on exit if we started it.

    The choice, logged as one INFO line on the ``streamsdsl.testing.local_kafka`` logger:

    1. ``BOOTSTRAP_SERVERS`` set: that broker (``kind == "external"``);
    2. a Docker engine answers at ``DOCKER_HOST`` (default ``unix:///var/run/docker.sock``):
       a container with host networking on a free 127.0.0.1 port (``kind == "container"``):
       the Kafka image ``STREAMSDSL_KAFKA_IMAGE`` (default ``apache/kafka:4.4.0``, KRaft,
       single node) when it is present or can be pulled, else an image built locally with
       no pull from the cached jars and a ``jlink`` JRE; a failed pull is never an error;
    3. no Docker: Apache Kafka 4.4.0 as a JVM child process (``kind == "process"``).

    Parameters
    ----------
    prefer : {"external", "docker", "container", "process"}, optional
        Force one kind ("docker" = "container"). Without it the environment variable
        ``STREAMSDSL_BROKER`` (same values, or "auto") may force one.
    timeout : float, optional
        Seconds to wait for the broker to answer metadata requests (default 30, and 120 for
        a container: pulling or building an image comes first).

    Raises
    ------
    BrokerStartError
        If the chosen broker cannot be started or does not answer; `KafkaJarsMissingError`
        (a `BrokerStartError`) names ``streamsdsl kafka-jars`` when Kafka's jars are missing.
    InvalidArgumentError
        If ``prefer`` or ``STREAMSDSL_BROKER`` has an unknown value.
    """
    plan = _select_broker(prefer)
    if plan.kind == "external":
        assert plan.bootstrap_servers is not None
        _wait_for_metadata(plan.bootstrap_servers, timeout or 30.0)
        kafka = LocalKafka(plan.bootstrap_servers, kind="external")
        try:
            yield kafka
        finally:
            kafka.close()
        return
    if plan.kind == "process":
        starting = _process_broker(timeout or 30.0)
    else:
        starting = _container_broker(plan, timeout or 120.0)
    with starting as started:
        kafka = LocalKafka(started.bootstrap_servers, kind=started.kind, image=started.image, control=started.control)
        try:
            yield kafka
        finally:
            try:
                kafka.close()
            finally:
                kafka._control = None  # later control calls say the broker is gone


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
        description=f"Start a local Apache Kafka {KAFKA_VERSION} broker (a container when Docker answers, "
        "else a JVM process) until Ctrl-C.",
    )
    parser.add_argument(
        "--prefer",
        choices=("docker", "container", "process"),
        default=None,
        help="force a broker kind: docker = container (default: STREAMSDSL_BROKER, else auto)",
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
