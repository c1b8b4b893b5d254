"""A topology changed between two runs on one checkpoint: accepted when stateless, rejected at
``start()`` with `TopologyChangedError` when stateful, and ``streamsdsl reset`` to start afresh."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pytest

from streamsdsl import Consumed, Produced, Serdes, StreamsBuilder, TimeWindows
from streamsdsl.cli import main as cli
from streamsdsl.runtime.app import KafkaStreams, State
from streamsdsl.runtime.checkpoint import FINGERPRINT_FILE
from streamsdsl.runtime.errors import TopologyChangedError
from streamsdsl.testing.local_kafka import LocalKafka

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from streamsdsl.ir.topology import Topology

pytestmark = [pytest.mark.integration, pytest.mark.spark]

T = 1_699_999_200_000  # a base timestamp (ms): the start of an hour window
HOUR = 3_600_000
S = Serdes.String()


def _run(app: KafkaStreams) -> None:
    """Start, process everything available, close."""
    app.start()
    try:
        assert app.state() is State.RUNNING
        app.process_all_available()
    finally:
        assert app.close(60), "KafkaStreams.close() did not finish within 60 s"
    assert app.state() is State.NOT_RUNNING


def _counts(source: str, sink: str, *, stateless_change: bool = False, window: bool = False) -> Topology:
    builder = StreamsBuilder()
    stream = builder.stream(source, Consumed.with_serdes(S, S))
    if stateless_change:
        stream = stream.filter(lambda k, v: v is not None).map_values(lambda v: v.upper())
    grouped = stream.group_by_key()
    table = grouped.windowed_by(TimeWindows.of_size_with_no_grace(HOUR)).count() if window else grouped.count()
    out = table.to_stream()
    if window:
        out = out.select_key(lambda k, v: k.key)
    if stateless_change:
        out = out.map_values(lambda v: v)
    out.to(sink, Produced.with_serdes(S, Serdes.Long()))
    return builder.build()


def test_stateless_change_continues_stateful_change_fails_reset_starts_afresh(
    kafka: LocalKafka,
    new_topic: Callable[..., str],
    streams_config: Callable[..., dict[str, Any]],
    spark: SparkSession,
) -> None:
    """A count runs; restarted with filters and mappers added (names shift) it continues the
    counts exactly; restarted with a window added, start() raises TopologyChangedError before
    Spark starts and the application stays CREATED (nothing runs, the checkpoint is untouched);
    after ``streamsdsl reset`` the same object starts and counts everything from scratch."""
    source, sink, windowed_sink = new_topic(2), new_topic(1), new_topic(1)
    config = streams_config("topology-change")
    state_dir, app_id = str(config["state.dir"]), str(config["application.id"])
    checkpoint = os.path.join(state_dir, app_id, "checkpoint")

    def produce(keys: str, offset: int) -> None:
        kafka.produce(source, [(k.encode(), b"x", T + offset + i, i % 2) for i, k in enumerate(keys)])

    def read(topic: str) -> list[tuple[str, int]]:
        return [(r.key.decode(), Serdes.Long().deserialize(r.value)) for r in kafka.consume_all(topic)]

    # 1. The first topology: a count.
    produce("aaabbc", 0)
    _run(KafkaStreams(_counts(source, sink), config, spark=spark))
    assert dict(read(sink)) == {"a": 3, "b": 2, "c": 1}
    with open(os.path.join(checkpoint, FINGERPRINT_FILE), encoding="utf-8") as f:
        assert [op["name"] for op in json.load(f)["stateful_operators"]] == ["KSTREAM-AGGREGATE-0000000002"]

    # 2. A stateless change: accepted; the counts continue where they were.
    produce("abd", 10)
    written = len(read(sink))
    _run(KafkaStreams(_counts(source, sink, stateless_change=True), config, spark=spark))
    assert sorted(read(sink)[written:]) == [("a", 4), ("b", 3), ("d", 1)]
    with open(os.path.join(checkpoint, FINGERPRINT_FILE), encoding="utf-8") as f:
        assert [op["name"] for op in json.load(f)["stateful_operators"]] == ["KSTREAM-AGGREGATE-0000000004"]

    # 3. A window added: rejected at start(), before any query runs.
    app = KafkaStreams(_counts(source, windowed_sink, window=True), config, spark=spark)
    commits = sorted(os.listdir(os.path.join(checkpoint, "commits")))
    with pytest.raises(TopologyChangedError) as info:
        app.start()
    assert str(info.value).splitlines()[0] == (
        f"the topology of application.id {app_id!r} changed its stateful part since its checkpoint was written: "
        "KSTREAM-AGGREGATE-0000000002 (count): windows none -> TimeWindows(size=3600000ms, advance=3600000ms, "
        "grace=0ms)."
    )
    assert f"streamsdsl reset --application-id {app_id} --state-dir {state_dir}" in str(info.value)
    assert app.state() is State.CREATED and app.streaming_query is None
    assert sorted(os.listdir(os.path.join(checkpoint, "commits"))) == commits
    assert not any(q.name == app_id for q in spark.streams.active)

    # 4. Reset from the shell, then the same application starts afresh.
    assert cli(["reset", "--application-id", app_id, "--state-dir", state_dir]) == 0
    assert not os.path.exists(checkpoint)
    _run(app)
    assert dict(read(windowed_sink)) == {"a": 4, "b": 3, "c": 1, "d": 1}  # one hour window holds all
