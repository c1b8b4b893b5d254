"""Metrics of a streaming query come from observe(), off the data path: drops of records that
sit at the same partition and offset of two different topics are both counted."""

from __future__ import annotations

from typing import Any

import pytest

from streamsdsl import Consumed, Serdes, SessionWindows, StreamsBuilder
from streamsdsl.runtime.streaming import start_streaming
from streamsdsl.testing.files import FileTopic
from tests._support import Collect

pytestmark = pytest.mark.spark

STRINGS = Consumed.with_serdes(Serdes.String(), Serdes.String())


def _merged(b: StreamsBuilder) -> Any:
    return b.stream("a", STRINGS).merge(b.stream("b", STRINGS))


def _run(spark: Any, tmp_path: Any, topology: Any, batches: list[tuple[str, list[tuple[Any, Any, int]]]]) -> Any:
    topic = FileTopic(str(tmp_path / "in"))
    for name, records in batches:
        topic.append(name, records, Serdes.String(), Serdes.String())
    out = Collect()
    query, _, metrics = start_streaming(topology, lambda n: topic.read_stream(spark, n.topics), out,
                                        checkpoint_location=str(tmp_path / "checkpoint"))
    try:
        query.processAllAvailable()
    finally:
        query.stop()
    return out, metrics.snapshot()


class TestDropsAtTheSamePositionOfTwoTopics:
    @pytest.mark.usefixtures("operator")
    def test_session_operator_counts_both_late_records(self, spark: Any, tmp_path: Any) -> None:
        """a-0 offset 1 and b-0 offset 1 are both too late for their session: two drops."""
        b = StreamsBuilder()
        _merged(b).group_by_key().windowed_by(SessionWindows.with_gap(10)).count().to_stream().to("out")
        out, metrics = _run(spark, tmp_path, b.build(), [
            ("a", [("k", "x", 100)]), ("b", [("k", "x", 100)]),
            ("a", [("k", "late", 0)]), ("b", [("k", "late", 0)]),
        ])
        assert metrics["dropped-records-total"] == 2.0
        assert [v for _, _, v, _ in out.records][-1] == 2

    def test_native_count_counts_both_null_keys(self, spark: Any, tmp_path: Any) -> None:
        """A null key at offset 1 of each topic: the native count drops and counts both."""
        b = StreamsBuilder()
        _merged(b).group_by_key().count().to_stream().to("out")
        out, metrics = _run(spark, tmp_path, b.build(), [
            ("a", [("k", "x", 100), (None, "x", 101)]), ("b", [("k", "x", 100), (None, "x", 101)]),
        ])
        assert metrics["dropped-records-total"] == 2.0
        assert metrics["input-records-total"] == 4.0
        assert [(k, v) for _, k, v, _ in out.records] == [("k", 1), ("k", 2)]
