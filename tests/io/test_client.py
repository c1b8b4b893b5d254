"""`OffsetClient`'s end probe on a Tansu-compatible broker, with fake consumers (no broker)."""

from __future__ import annotations

import time
from typing import Any

import pytest

from streamsdsl.io import client as client_module
from streamsdsl.io.client import OffsetClient
from streamsdsl.io.options import KafkaSourceOptions


class _Eof:
    """A message that says the partition ends at ``offset``."""

    def __init__(self, topic: str, partition: int, offset: int) -> None:
        self._tp, self._offset = (topic, partition), offset

    def topic(self) -> str:
        return self._tp[0]

    def partition(self) -> int:
        return self._tp[1]

    def offset(self) -> int:
        return self._offset

    def error(self) -> Any:
        from confluent_kafka import KafkaError

        return KafkaError(KafkaError._PARTITION_EOF)


class _Consumer:
    """A probe consumer: ``answers`` is what each consume() returns; it stalls when empty."""

    def __init__(self, answers: list[list[Any]]) -> None:
        self.answers, self.closed, self.assigned = answers, False, []

    def assign(self, tps: list[Any]) -> None:
        self.assigned = [(tp.topic, tp.partition, tp.offset) for tp in tps]

    def consume(self, n: int, timeout: float) -> list[Any]:
        if self.answers:
            return self.answers.pop(0)
        time.sleep(timeout)
        return []

    def unassign(self) -> None:
        pass

    def close(self) -> None:
        self.closed = True


def test_a_stalled_probe_starts_over_on_a_fresh_client(monkeypatch: pytest.MonkeyPatch) -> None:
    """A probe client that gets no answer at all (it knew a topic that was deleted and re-created)
    is replaced after `_PROBE_STALL_S`, not after the whole poll timeout, and the fresh client's
    answer is the partition's end."""
    monkeypatch.setattr(client_module, "_PROBE_STALL_S", 0.3)
    options = KafkaSourceOptions.from_options(
        {"kafka.bootstrap.servers": "h:1", "subscribe": "t", "kafka.broker.compat": "tansu",
         "kafkaConsumer.pollTimeoutMs": "60000"}, streaming=True)
    stalled, fresh = _Consumer([]), _Consumer([[_Eof("t", 0, 10)]])
    made = iter([stalled, fresh])
    offsets = OffsetClient(options)
    monkeypatch.setattr(offsets, "_probe_consumer", lambda: offsets._probe or setattr(offsets, "_probe", next(made)) or offsets._probe)
    start = time.monotonic()
    assert offsets._probe_true_ends({("t", 0): (0, 10)}) == {("t", 0): 10}
    assert time.monotonic() - start < 5, "the probe waited for the poll timeout"
    assert stalled.closed and fresh.assigned == [("t", 0, 9)]
