"""``processing.guarantee = exactly_once_v2`` against the test broker (issue 27, item 3).

What a ``read_committed`` consumer of the sink sees, under the faults exactly-once is for:

* the application SIGKILLed three times at seeded random points and restarted on its
  checkpoint: every (key, count) once, exact final counts, counts never go back (in
  ``integration/test_faults.py``, whose process runs it beside the at-least-once application);
* the broker restarted while a transaction is open: the same;
* a second instance with the same ``application.id`` fences the first, which stops at its next
  micro-batch with `KafkaProducerFencedError` and writes nothing more;
* a transaction open longer than ``transaction.timeout.ms`` (the broker frozen during a large
  write): `KafkaTransactionTimeoutError` naming the option; nothing of the batch is visible.

The protocol is in ``docs/kafka.md`` (*Exactly-once*).
"""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from integration.fault_app import AppSpec, count_topology
from integration.test_faults import (
    _AppProcess,
    _assert_exactly_once,
    _committed,
    _committed_counts,
    _ends,
    _produce_keyed,
    _wait_for,
)
from streamsdsl import Consumed, Produced, Serdes, StreamsBuilder
from streamsdsl.io.errors import KafkaTransactionTimeoutError
from streamsdsl.runtime.app import KafkaStreams, State
from streamsdsl.runtime.lifecycle import StreamThreadExceptionResponse
from streamsdsl.testing.local_kafka import LocalKafka

pytestmark = [pytest.mark.integration]

T = 1_700_000_000_000


# -- read_committed helpers -------------------------------------------------------------------
class _OpenTransactionWatch:
    """Whether a transaction is open in partition 0 (its end is above its last stable offset),
    asked by two consumers kept open: a poll costs two requests, not two connections, so a
    transaction open for a few milliseconds is seen."""

    def __init__(self, kafka: LocalKafka, topic: str) -> None:
        from confluent_kafka import Consumer, TopicPartition

        self._tp = TopicPartition(topic, 0)
        self._consumers = [
            Consumer({"bootstrap.servers": kafka.bootstrap_servers, "group.id": f"eos-{uuid.uuid4().hex}",
                      "isolation.level": isolation})
            for isolation in ("read_uncommitted", "read_committed")]

    def ends(self) -> tuple[int, int]:
        """Partition 0's high watermark and last stable offset."""
        uncommitted, committed = (int(c.get_watermark_offsets(self._tp, timeout=30, cached=False)[1])
                                  for c in self._consumers)
        return uncommitted, committed

    def wait_open(self, committed_at_least: int, timeout: float) -> bool:
        """Poll every 5 ms until a transaction is open (True), or until ``committed_at_least``
        records are committed or ``timeout`` seconds passed (False)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            uncommitted, committed = self.ends()
            if uncommitted > committed:
                return True
            if committed >= committed_at_least:
                return False
            time.sleep(0.005)
        return False

    def close(self) -> None:
        for consumer in self._consumers:
            consumer.close()


# -- the broker restarted inside a transaction -----------------------------------------------------
def _eos_config(streams_config: Callable[..., dict[str, object]], name: str, **extra: object) -> dict[str, object]:
    return streams_config(name, {"processing.guarantee": "exactly_once_v2", **extra})


@pytest.mark.spark
def test_broker_restart_inside_a_transaction_loses_and_duplicates_nothing(
    kafka: LocalKafka,
    new_topic: Callable[..., str],
    streams_config: Callable[..., dict[str, object]],
    app_factory: Callable[..., KafkaStreams],
) -> None:
    """The broker is restarted (stopped, started on its log directory) at a moment a task's
    transaction is open (its records are in the log above the last stable offset). The write
    waits or fails and its micro-batch is run again (``REPLACE_THREAD``): a ``read_committed``
    reader sees every (key, count) once and the exact final counts."""
    source, sink = new_topic(3), new_topic(1)
    app = app_factory(count_topology(source, sink), _eos_config(
        streams_config, "eos-restart", **{"max.offsets.per.trigger": 1_500, "producer.transaction.timeout.ms": 60_000}))
    app.set_uncaught_exception_handler(lambda error: StreamThreadExceptionResponse.REPLACE_THREAD)
    app.start()
    # a task's transaction is open for milliseconds: rounds of input until one is seen open
    watch = _OpenTransactionWatch(kafka, sink)
    try:
        for rounds in range(1, 41):
            before = watch.ends()[1]
            _produce_keyed(kafka, source, 1_500, 300, 3, first=(rounds - 1) * 1_500)
            if watch.wait_open(before + 300, 60):  # else the round's 300 counts were committed
                break
        else:
            pytest.fail("no transaction of the sink was seen open in 40 rounds of input")
    finally:
        watch.close()
    kafka.restart()
    app.process_all_available()
    assert app.state() is State.RUNNING
    assert app.close(60)
    _assert_exactly_once(_committed_counts(kafka, sink), {f"k{k:03d}": 5 * rounds for k in range(300)})


# -- a zombie fenced -----------------------------------------------------------------------------
@pytest.mark.slow
def test_second_instance_fences_the_first(
    kafka: LocalKafka,
    new_topic: Callable[..., str],
    streams_config: Callable[..., dict[str, object]],
    app_factory: Callable[..., KafkaStreams],
    tmp_path: Path,
) -> None:
    """Instance A (a process) counts the first 600 records; instance B (this process, same
    ``application.id``, its own checkpoint) starts and fences A. New records arrive: A stops at
    its next micro-batch with `KafkaProducerFencedError` and writes nothing more; B writes
    every count. The sink, read_committed: A's output, then B's (each (key, count) of B once),
    exact final counts."""
    source, sink = new_topic(3), new_topic(1)
    _produce_keyed(kafka, source, 600, 30, 3)
    app_id = f"eos-zombie-{uuid.uuid4().hex[:6]}"
    zombie = _AppProcess([
        "--bootstrap", kafka.bootstrap_servers,
        *AppSpec("exactly_once_v2", source, sink, app_id, str(tmp_path / "a"), 10_000).args(),
    ], tmp_path / "a.log")
    try:
        zombie.wait_running(180)
        _wait_for(lambda: dict(_committed_counts(kafka, sink)) == {f"k{k:03d}": 20 for k in range(30)}, 180,
                  "A's counts of the first records")
        first = _committed_counts(kafka, sink)

        config = {**_eos_config(streams_config, "unused"), "application.id": app_id}
        b = app_factory(count_topology(source, sink), config)
        b.start()  # fences A
        b.process_all_available()
        _produce_keyed(kafka, source, 300, 30, 3, first=600)
        _wait_for(lambda: zombie.proc.poll() is not None, 120, "A stops")
        b.process_all_available()
        assert b.close(60)
    finally:
        zombie.kill()

    assert zombie.proc.returncode == 1
    stopped = [line for line in zombie.output().splitlines() if line.startswith("STOPPED")]
    assert len(stopped) == 1, zombie.output()[-3000:]
    assert re.fullmatch(
        rf"STOPPED ERROR KafkaProducerFencedError: KafkaStreams '{app_id}' was fenced before micro-batch \d+: "
        rf"another instance with the same application\.id started after this one \(consumer group '{app_id}-instance'\); "
        r"this instance is a zombie and stops without writing the batch\. Run one instance per application\.id "
        r"\(sharing its state\.dir\) at a time\.", stopped[0]), stopped[0]

    out = _committed_counts(kafka, sink)
    assert out[: len(first)] == first  # A wrote nothing after B started
    rest = out[len(first):]
    _assert_exactly_once(rest, {f"k{k:03d}": 30 for k in range(30)})
    assert {(f"k{k:03d}", 20) for k in range(30)} <= set(rest)  # B's own first counts (its own checkpoint)


# -- a transaction longer than transaction.timeout.ms --------------------------------------------------
TIMEOUT_MESSAGE = re.compile(
    r"the transaction of '(?P<tid>[\w.-]+)' \(micro-batch 0, topic '(?P<topic>[\w.-]+)'\) was open (?P<ms>\d+) ms, "
    r"longer than transaction\.timeout\.ms = 1000 ms: Kafka aborts a transaction it does not see committed within "
    r"that time, so the micro-batch fails and nothing of it is visible\. Raise the producer's "
    r"'transaction\.timeout\.ms' \(KafkaStreams: 'producer\.transaction\.timeout\.ms'; at most the broker's "
    r"transaction\.max\.timeout\.ms, 900000 by default\) or make micro-batches smaller \('max\.offsets\.per\.trigger'\)\."
    r"( \(.+\))?"
)


@pytest.mark.spark
def test_transaction_longer_than_its_timeout_fails_naming_the_option(
    kafka: LocalKafka,
    new_topic: Callable[..., str],
    streams_config: Callable[..., dict[str, object]],
    app_factory: Callable[..., KafkaStreams],
) -> None:
    """``producer.transaction.timeout.ms`` = 1000 and a micro-batch of 60,000 records in one
    task (one input partition, a copy topology); the broker is frozen for 2.5 s while the task's
    transaction is open. The application fails with `KafkaTransactionTimeoutError` naming the
    option and the fix; a ``read_committed`` reader sees none of the batch."""
    lost: list[str] = []
    for attempt in range(5):  # the broker must freeze while the transaction is open: a lost race is rerun
        source, sink = new_topic(1), new_topic(1)
        kafka.produce(source, [(f"k{i}".encode(), b"v" * 100, T + i, 0) for i in range(60_000)], timeout=120)
        builder = StreamsBuilder()
        builder.stream(source, Consumed.with_serdes(Serdes.String(), Serdes.String())).to(
            sink, Produced.with_serdes(Serdes.String(), Serdes.String()))
        app = app_factory(builder.build(), _eos_config(streams_config, "eos-timeout",
                                                       **{"producer.transaction.timeout.ms": 1_000}))
        seen: list[Any] = []
        app.set_uncaught_exception_handler(
            lambda error: seen.append(error) or StreamThreadExceptionResponse.SHUTDOWN_CLIENT)  # noqa: B023
        watch = _OpenTransactionWatch(kafka, sink)  # connected before the batch: a poll takes milliseconds
        try:
            app.start()
            if not watch.wait_open(60_000, 120):
                lost.append("committed before its transaction was seen open")
                app.close(60)
                continue
            kafka.pause()  # at once: the transaction is open for about a second
            try:
                time.sleep(2.5)
            finally:
                kafka.unpause()
        finally:
            watch.close()
        _wait_for(lambda: app.state() is State.ERROR  # noqa: B023
                  or _ends(kafka, sink, "read_committed") >= 60_000, 120, "state ERROR")  # noqa: B023
        if app.state() is not State.ERROR and not _committed(kafka, sink):
            # the broker aborted the transaction (its end passed the batch, nothing of it is
            # visible) before the application reported the failure: wait for the report
            _wait_for(lambda: app.state() is State.ERROR, 60, "state ERROR after the abort")  # noqa: B023
        if app.state() is State.ERROR:
            break
        lost.append("committed before the broker froze")
        app.close(60)
    else:
        pytest.fail(f"in 5 attempts the whole batch was committed before the broker froze: {lost}")
    assert len(seen) == 1 and isinstance(seen[0], KafkaTransactionTimeoutError), seen
    match = TIMEOUT_MESSAGE.fullmatch(str(seen[0]))
    assert match is not None, str(seen[0])
    assert match["topic"] == sink and int(match["ms"]) >= 1000
    assert _committed(kafka, sink) == []
