"""The faults a production run meets, against the test broker (issue 14).

* The application process is killed (SIGKILL, the whole process group: driver, JVM, Python
  workers) at random points and restarted on its checkpoint. At-least-once: exact final counts,
  no record lost, at most one micro-batch of duplicate output per crash, counts never go
  backwards. Exactly-once (issue 27): a ``read_committed`` reader sees every (key, count) once,
  exact final counts, counts never go back. One process runs both applications, so that the
  two guarantees share the kills and the process starts (each start is a Python and a Spark
  JVM).
* The broker is frozen for a few seconds mid-stream (``LocalKafka.pause``): nothing lost,
  nothing duplicated.
* The broker is frozen longer than the source's poll timeout (``task.timeout.ms``): the
  application fails with `KafkaBrokerTimeoutError` naming the broker and the option, state
  ``ERROR``.
* The input topic is deleted and re-created while the application runs: the next trigger fails
  with `KafkaTopicRecreatedError` (well within one poll timeout) naming the fix.

The crash tests run the applications in a subprocess (``integration/fault_app.py``) and drain
them in the shared session; the other tests run it in the shared session. Every wait is bounded.
"""

from __future__ import annotations

import os
import random
import re
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

import pytest

from integration.fault_app import AppSpec, count_topology
from streamsdsl.errors import StreamsDslError
from streamsdsl.io.errors import KafkaBrokerTimeoutError, KafkaTopicRecreatedError
from streamsdsl.runtime.app import KafkaStreams, State
from streamsdsl.runtime.lifecycle import StreamThreadExceptionResponse
from streamsdsl.testing.local_kafka import LocalKafka

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from streamsdsl.ir.topology import Topology

pytestmark = [pytest.mark.integration]

T = 1_700_000_000_000  # base timestamp (ms): librdkafka stamps 0 with the current time
APP = Path(__file__).with_name("fault_app.py")


# -- helpers --------------------------------------------------------------------------------
def _produce_keyed(kafka: LocalKafka, topic: str, n: int, keys: int, partitions: int, *, first: int = 0) -> None:
    """``n`` records over ``keys`` keys ``k000``...; each key always on partition ``key % partitions``."""
    kafka.produce(
        topic,
        [(f"k{i % keys:03d}".encode(), b"x", T + i, (i % keys) % partitions) for i in range(first, first + n)],
        timeout=120,
    )


def _counts(kafka: LocalKafka, sink: str) -> list[tuple[str, int]]:
    """The sink's records as ``(key, count)``, in output order (one partition)."""
    out = []
    for r in kafka.consume_all(sink, timeout=60):
        assert r.key is not None and r.value is not None
        out.append((r.key.decode(), int.from_bytes(r.value, "big", signed=True)))
    return out


def _assert_counts_never_go_back(out: list[tuple[str, int]]) -> None:
    last: dict[str, int] = {}
    for key, count in out:
        assert count >= last.get(key, 0), f"count of {key} went back from {last[key]} to {count}"
        last[key] = count


def _ends(kafka: LocalKafka, topic: str, isolation: str) -> int:
    """Partition 0's end: the high watermark (``read_uncommitted``; it grows as the application
    writes) or the last stable offset (``read_committed``, below every open transaction)."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": kafka.bootstrap_servers, "group.id": f"faults-{uuid.uuid4().hex}",
                         "isolation.level": isolation})
    try:
        return int(consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=30, cached=False)[1])
    finally:
        consumer.close()


def _committed(kafka: LocalKafka, topic: str, timeout: float = 60) -> list[tuple[bytes | None, bytes | None]]:
    """Every record of partition 0 a ``read_committed`` consumer reads, as (key, value), in order."""
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    consumer = Consumer({"bootstrap.servers": kafka.bootstrap_servers, "group.id": f"eos-{uuid.uuid4().hex}",
                         "isolation.level": "read_committed", "enable.partition.eof": True,
                         "enable.auto.commit": False, "fetch.wait.max.ms": 50})
    out: list[tuple[bytes | None, bytes | None]] = []
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        deadline = time.monotonic() + timeout
        while True:
            assert time.monotonic() < deadline, f"read_committed of {topic} did not reach its end"
            m = consumer.poll(0.2)
            if m is None:
                continue
            if m.error() is not None:
                if m.error().code() == KafkaError._PARTITION_EOF:
                    return out
                raise AssertionError(str(m.error()))
            out.append((m.key(), m.value()))
    finally:
        consumer.close()


def _committed_counts(kafka: LocalKafka, topic: str) -> list[tuple[str, int]]:
    """The sink's records as ``(key, count)`` as a ``read_committed`` consumer reads them."""
    out = []
    for key, value in _committed(kafka, topic):
        assert key is not None and value is not None
        out.append((key.decode(), int.from_bytes(value, "big", signed=True)))
    return out


def _assert_exactly_once(out: list[tuple[str, int]], expected: dict[str, int]) -> None:
    """Exact final counts, every (key, count) once, counts never going back."""
    assert {key: count for key, count in out} == expected
    duplicates = [pair for pair, n in Counter(out).items() if n > 1]
    assert duplicates == [], duplicates[:10]
    _assert_counts_never_go_back(out)


def _wait_for(condition: Callable[[], bool], timeout: float, what: str, poll: float = 0.25) -> float:
    """Wait until ``condition()``; returns the seconds waited, fails the test after ``timeout``."""
    started = time.monotonic()
    while not condition():
        if time.monotonic() - started > timeout:
            pytest.fail(f"{what}: not within {timeout} s")
        time.sleep(poll)
    return time.monotonic() - started


def _private_temp(env: dict[str, str], directory: Path) -> dict[str, str]:
    """``env`` for a Spark application that will be killed: its JVM's temporary files
    (``java.io.tmpdir``: the native libraries RocksDB and lz4 extract, 15 MB a JVM, and Spark's
    artifact directory) and Spark's local directories (``SPARK_LOCAL_DIRS``: the block manager's
    and the driver's scratch directories) in ``directory``. A JVM deletes those when it exits,
    but not when it is killed -9; in the test's own directory they go with it."""
    from streamsdsl.testing.jvm_options import with_options

    directory.mkdir(parents=True, exist_ok=True)
    return {**with_options(env, "SPARK_SUBMIT_OPTS", (f"-Djava.io.tmpdir={directory}",)),
            "SPARK_LOCAL_DIRS": str(directory)}


class _AppProcess:
    """``fault_app.py`` in its own process group (so a kill takes its JVM and workers with it),
    its temporary files beside its log (`_private_temp`)."""

    def __init__(self, args: list[str], log_path: Path) -> None:
        self.log_path = log_path
        self._log = log_path.open("wb")
        self.proc = subprocess.Popen(
            [sys.executable, str(APP), *args],
            stdout=self._log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            env=_private_temp(dict(os.environ), log_path.with_suffix(".tmp")),
        )

    def output(self) -> str:
        return self.log_path.read_text(errors="replace")

    def kill(self) -> None:
        """SIGKILL the whole process group (our child's pid is its group id) and reap it."""
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:  # pragma: no cover - exited meanwhile
                pass
        self.proc.wait(timeout=30)
        self._log.close()

    def wait_running(self, timeout: float) -> None:
        _wait_for(lambda: "RUNNING" in self.output() or self.proc.poll() is not None, timeout, "application start")
        assert self.proc.poll() is None, f"the application exited:\n{self.output()[-3000:]}"


# -- SIGKILL and restart, both guarantees in one process group ---------------------------------
KEYS = 200
RECORDS = 12_000  # 60 per key, 3 partitions
MAX_OFFSETS = 800  # per micro-batch: 15 batches; one batch emits at most min(800, KEYS) records
EOS_KEYS = 50
EOS_RECORDS = 3_000  # 60 per key, 3 partitions
EOS_MAX_OFFSETS = 400  # per micro-batch: 8 batches
CRASHES = 3


class _CrashRun(NamedTuple):
    """What the sinks of the two applications of `crash_run` hold, and when."""

    at_least_once: list[tuple[str, int]]  #: the at-least-once sink, every record in order
    ends_at_kill: list[int]  #: its end offset after each kill
    exactly_once: list[tuple[str, int]]  #: the exactly-once sink as a read_committed reader sees it
    committed_at_kill: list[int]  #: its last stable offset after each kill
    committed_at_end: int  #: its last stable offset after the drain


@pytest.fixture(scope="module")
def crash_run(kafka: LocalKafka, kafka_session: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> _CrashRun:
    """Two `count()` applications, one ``at_least_once`` and one ``exactly_once_v2`` (each with
    its own topics, ``application.id`` and ``state.dir``), run side by side in one process
    (``fault_app.py``: one driver, one JVM, its Python workers), killed -9 as a process group
    CRASHES times, each time at a seeded random point after both wrote in that run (often
    inside a task's transaction), started again on their checkpoints in a new process; after
    the last kill, restarted on their checkpoints in this process's session and drained."""
    rng = random.Random(14)
    tmp = tmp_path_factory.mktemp("crash")
    suffix = uuid.uuid4().hex[:6]
    specs = []
    for guarantee, name, records, keys, max_offsets in (
        ("at_least_once", "crash", RECORDS, KEYS, MAX_OFFSETS),
        ("exactly_once_v2", "eos-crash", EOS_RECORDS, EOS_KEYS, EOS_MAX_OFFSETS),
    ):
        source, sink = f"{name}-in-{suffix}", f"{name}-out-{suffix}"
        kafka.create_topic(source, 3)
        kafka.create_topic(sink, 1)
        _produce_keyed(kafka, source, records, keys, 3)
        specs.append(AppSpec(guarantee, source, sink, f"{name}-{suffix}", str(tmp / name), max_offsets))
    at_least_once, exactly_once = specs
    args = ["--bootstrap", kafka.bootstrap_servers, *(arg for spec in specs for arg in spec.args())]

    ends_at_kill, committed_at_kill = [], []
    for run in range(CRASHES):
        before = [_ends(kafka, spec.sink, "read_uncommitted") for spec in specs]
        app = _AppProcess(args, tmp / f"run-{run}.log")
        try:
            app.wait_running(180)
            # Progress of both in this run (each wrote at least once), then a random point.
            _wait_for(lambda: all(_ends(kafka, spec.sink, "read_uncommitted") > end  # noqa: B023
                                  for spec, end in zip(specs, before, strict=True))  # noqa: B023
                      or app.proc.poll() is not None, 180, f"output of run {run}", poll=0.1)  # noqa: B023
            assert app.proc.poll() is None, f"run {run} exited:\n{app.output()[-3000:]}"
            time.sleep(rng.uniform(0.0, 1.5))
        finally:
            app.kill()
        ends_at_kill.append(_ends(kafka, at_least_once.sink, "read_uncommitted"))
        committed_at_kill.append(_ends(kafka, exactly_once.sink, "read_committed"))

    apps = [KafkaStreams(count_topology(spec.source, spec.sink), spec.config(kafka.bootstrap_servers),
                         spark=kafka_session) for spec in specs]
    try:
        for app in apps:
            app.start()
        for app in apps:
            app.process_all_available()
    finally:
        for app in apps:
            if app.state() is not State.CREATED:
                assert app.close(120) and app.state() is State.NOT_RUNNING, app.state()
    return _CrashRun(
        at_least_once=_counts(kafka, at_least_once.sink),
        ends_at_kill=ends_at_kill,
        exactly_once=_committed_counts(kafka, exactly_once.sink),
        committed_at_kill=committed_at_kill,
        committed_at_end=_ends(kafka, exactly_once.sink, "read_committed"),
    )


@pytest.mark.slow
def test_sigkill_at_random_points_and_restart_loses_nothing(crash_run: _CrashRun) -> None:
    """The at-least-once application of `crash_run`, killed -9 CRASHES times at random points
    after it made progress in that run and restarted on its checkpoint each time, then drained.
    Final count of every key exact, no input record lost, duplicate output records <= one
    micro-batch's output per crash, each key's counts never go backwards in output order."""
    out = crash_run.at_least_once
    assert {key: count for key, count in out} == {f"k{k:03d}": RECORDS // KEYS for k in range(KEYS)}  # nothing lost
    _assert_counts_never_go_back(out)
    duplicates = len(out) - len(set(out))
    per_batch = min(MAX_OFFSETS, KEYS)
    assert duplicates <= CRASHES * per_batch, (duplicates, crash_run.ends_at_kill)
    # The crashes hit a running stream: the last restart still had input to count.
    assert crash_run.ends_at_kill[-1] < len(out), crash_run.ends_at_kill


@pytest.mark.slow
def test_sigkill_three_times_read_committed_sees_every_count_once(crash_run: _CrashRun) -> None:
    """The exactly-once application of `crash_run` (killed -9 with the at-least-once one, three
    times, each at a seeded random point after it wrote in that run, often inside a task's
    transaction; restarted on its checkpoint, then drained). A ``read_committed`` reader of the
    sink: 0 duplicates, 0 lost (each key's final count exact), counts never go back."""
    _assert_exactly_once(crash_run.exactly_once, {f"k{k:03d}": EOS_RECORDS // EOS_KEYS for k in range(EOS_KEYS)})
    # The crashes hit a running stream: the last restart still had input to count.
    assert crash_run.committed_at_kill[-1] < crash_run.committed_at_end, crash_run.committed_at_kill


# -- the broker frozen, briefly and for too long ------------------------------------------------
@pytest.mark.spark
def test_broker_paused_mid_stream_loses_and_duplicates_nothing(
    kafka: LocalKafka,
    new_topic: Callable[..., str],
    streams_config: Callable[..., dict[str, object]],
    app_factory: Callable[[Topology, dict[str, Any]], KafkaStreams],
) -> None:
    """A 5 s freeze of the broker (SIGSTOP / docker pause) while micro-batches run: the source
    and the sink wait (within the poll and flush timeouts), then go on: exact counts, and
    every (key, count) written once."""
    source, sink = new_topic(3), new_topic(1)
    _produce_keyed(kafka, source, 1_200, 60, 3)
    app = app_factory(count_topology(source, sink), streams_config("pause", {"max.offsets.per.trigger": 200}))
    app.start()
    try:
        _wait_for(lambda: _ends(kafka, sink, "read_uncommitted") > 0, 120, "first output")
        kafka.pause()
        time.sleep(5)
    finally:
        kafka.unpause()
    app.process_all_available()
    assert app.state() is State.RUNNING
    assert app.close(60)

    out = _counts(kafka, sink)
    assert {key: count for key, count in out} == {f"k{k:03d}": 20 for k in range(60)}
    _assert_counts_never_go_back(out)
    assert len(out) == len(set(out))  # no duplicates


TIMEOUT_MESSAGE = re.compile(
    r"could not (fetch metadata of topic '[^']+'|fetch the offsets of [\w.-]+|read [\w.-]+ at offset \d+ "
    r"\(planned up to \d+\)) from the broker at 'bootstrap.servers' = (?P<bootstrap>[\d.:]+) within "
    r"kafkaConsumer.pollTimeoutMs = 5000 ms \(.+\)\. Check that the broker is running and reachable, or raise "
    r"'kafkaConsumer.pollTimeoutMs' \(KafkaStreams: 'task.timeout.ms'\) to wait longer\."
)


@pytest.mark.spark
def test_broker_unreachable_beyond_the_poll_timeout_fails_naming_broker_and_option(
    kafka: LocalKafka,
    new_topic: Callable[..., str],
    streams_config: Callable[..., dict[str, object]],
    app_factory: Callable[[Topology, dict[str, Any]], KafkaStreams],
) -> None:
    """The broker frozen past ``task.timeout.ms`` = 5 s: the application fails within about
    that time with `KafkaBrokerTimeoutError` naming ``bootstrap.servers`` and the option; the
    uncaught exception handler gets that error; state ``ERROR``."""
    source, sink = new_topic(3), new_topic(1)
    _produce_keyed(kafka, source, 300, 30, 3)
    app = app_factory(count_topology(source, sink), streams_config("outage", {"task.timeout.ms": 5_000}))
    seen: list[StreamsDslError] = []
    app.set_uncaught_exception_handler(
        lambda error: seen.append(error) or StreamThreadExceptionResponse.SHUTDOWN_CLIENT
    )
    app.start()
    app.process_all_available()
    kafka.pause()
    try:
        waited = _wait_for(lambda: app.state() is State.ERROR, 60, "state ERROR after the outage")
    finally:
        kafka.unpause()

    assert waited < 5 + 30  # the poll timeout, plus a trigger and Spark's failure handling on 2 busy cores
    assert len(seen) == 1 and isinstance(seen[0], KafkaBrokerTimeoutError), seen
    match = TIMEOUT_MESSAGE.fullmatch(str(seen[0]))
    assert match is not None, str(seen[0])
    assert match["bootstrap"] == kafka.bootstrap_servers
    with pytest.raises(KafkaBrokerTimeoutError) as info:
        app.await_termination(30)
    assert str(info.value) == str(seen[0])


# -- the topic deleted and re-created -------------------------------------------------------
def _delete_topics(kafka: LocalKafka, topics: list[str]) -> None:
    """Delete ``topics`` with the admin API and wait until the broker no longer lists them."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": kafka.bootstrap_servers})
    for future in admin.delete_topics(topics, operation_timeout=30).values():
        future.result(timeout=60)
    _wait_for(lambda: not set(topics) & set(admin.list_topics(timeout=10).topics), 60, "topic deletion")


@pytest.mark.spark
def test_topic_deleted_and_recreated_is_detected_with_its_fix(
    kafka: LocalKafka,
    new_topic: Callable[..., str],
    streams_config: Callable[..., dict[str, object]],
    app_factory: Callable[[Topology, dict[str, Any]], KafkaStreams],
) -> None:
    """The input topic deleted and re-created (3 partitions, 10 records each, fewer than the
    100 per partition the application has read): the application fails well within one poll
    timeout (``task.timeout.ms`` = 60 s) with `KafkaTopicRecreatedError` naming the fix. The
    topics are deleted with the admin API and created again on the session's broker."""
    source, sink = new_topic(3), new_topic(1)
    _produce_keyed(kafka, source, 300, 30, 3)
    config = streams_config("recreated", {"task.timeout.ms": 60_000})

    app = app_factory(count_topology(source, sink), config)
    app.start()
    app.process_all_available()

    _delete_topics(kafka, [source, sink])
    kafka.create_topic(source, 3)
    kafka.create_topic(sink, 1)
    recreated = time.monotonic()
    _produce_keyed(kafka, source, 30, 30, 3, first=1_000)  # 10 per partition
    _wait_for(lambda: app.state() is State.ERROR, 60, "state ERROR after the re-creation")
    detected = time.monotonic() - recreated

    with pytest.raises(KafkaTopicRecreatedError) as info:
        app.await_termination(30)
    assert detected < 30, detected  # the next triggers, not the 60 s poll timeout (0 or 10 records seen)
    assert re.fullmatch(
        rf"partition {re.escape(source)}-[012] now ends at offset (\d+) \(it holds \[0, \1\)\), below offset 100 it "
        r"had reached before: the topic was deleted and re-created \(or the broker lost its data\)\. Set the source "
        r"option 'failOnDataLoss' to 'false' to go on from the new topic's earliest offset, or reset the "
        r"application to start afresh \(close it, call KafkaStreams.clean_up\(\) and start it again; a plain "
        r"query: a new checkpoint\)\.",
        str(info.value),
    ), str(info.value)
