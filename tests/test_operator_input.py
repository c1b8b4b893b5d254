"""The Python operator's input (`records_by_key`): a partition's records grouped by key in Arrow
before the shuffle, and what the processor makes of a key whose records come in several groups."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest

from streamsdsl import Consumed, Serdes, SessionWindow, SessionWindows, StreamsBuilder, Windowed
from streamsdsl.compiler.operator_input import _pack_batches, records_by_key
from streamsdsl.runtime.streaming import start_streaming
from streamsdsl.testing.files import FileTopic
from tests._support import Collect

BATCH = pa.RecordBatch.from_pydict({
    "key": ["b", "a", "b", "c", "a"],
    "value": ["b1", "a1", "b2", None, "a2"],
    "_meta": [[10, 0], [11, 1], [12, 2], [13, 3], [14, 4]],
})


def _rows(batches: list[pa.RecordBatch]) -> list[dict[str, Any]]:
    return [row for b in batches for row in b.to_pylist()]


class TestPackBatches:
    def test_one_row_per_key_with_its_records_in_input_order(self) -> None:
        out = list(_pack_batches(iter([BATCH]), max_rows=100, max_bytes=1 << 20))
        assert _rows(out) == [
            {"key": "a", "value": ["a1", "a2"], "_meta": [[11, 1], [14, 4]]},
            {"key": "b", "value": ["b1", "b2"], "_meta": [[10, 0], [12, 2]]},
            {"key": "c", "value": [None], "_meta": [[13, 3]]},
        ]
        assert out[0].schema.field("value").type == pa.list_(pa.string())

    def test_held_input_is_cut_at_max_rows_and_empty_batches_are_skipped(self) -> None:
        """A key with records on both sides of a cut gets one row on each side."""
        parts = [BATCH.slice(0, 0), BATCH.slice(0, 2), BATCH.slice(2, 3), BATCH.slice(5, 0)]
        out = list(_pack_batches(iter(parts), max_rows=2, max_bytes=1 << 20))
        assert [b.to_pydict()["key"] for b in out] == [["a", "b"], ["a", "b", "c"]]
        assert _rows(out)[3] == {"key": "b", "value": ["b2"], "_meta": [[12, 2]]}

    def test_max_bytes_cuts_too(self) -> None:
        out = list(_pack_batches(iter([BATCH.slice(0, 1), BATCH.slice(1, 4)]), max_rows=100, max_bytes=1))
        assert [b.num_rows for b in out] == [1, 3]


@pytest.mark.spark
class TestRecordsByKey:
    def test_packed_and_unpacked_hold_the_same_records(self, spark: Any) -> None:
        df = spark.createDataFrame([("b", "b1", 0), ("a", "a1", 1), ("b", "b2", 2), ("a", "a2", 3)],
                                   "key string, value string, n bigint").coalesce(1)
        packed = sorted(tuple(r) for r in records_by_key(df, pack=True).collect())
        assert packed == [("a", ["a1", "a2"], [1, 3]), ("b", ["b1", "b2"], [0, 2])]
        unpacked = sorted(tuple(r) for r in records_by_key(df, pack=False).collect())
        assert unpacked == [("a", ["a1"], [1]), ("a", ["a2"], [3]), ("b", ["b1"], [0]), ("b", ["b2"], [2])]

    def test_a_key_arrow_cannot_sort_is_not_packed(self, spark: Any) -> None:
        df = spark.createDataFrame([((1,), "x"), ((1,), "y")], "key struct<id:int>, value string").coalesce(1)
        rows = records_by_key(df, pack=True)
        assert "MapInArrow" not in rows._jdf.queryExecution().analyzed().toString()
        assert sorted(r.value for r in rows.collect()) == [["x"], ["y"]]


@pytest.mark.spark
def test_records_are_applied_in_source_order_whatever_their_input_order(spark: Any, tmp_path: Any,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """The Python operator applies a key's records in source (offset) order, not in the order
    they reach it: here the file holds them in reverse. Session gap 10, grace 100, values
    concatenated: p@0, q@5, r@40, s@22, t@30 → [0, 5] "pq" and [22, 40] "srt" (t merges [22]
    and [40] in Kafka's (end, start) order, then is aggregated); another order gives other
    strings (in file order: "qp" and "str")."""
    import pyarrow.parquet as pq

    from streamsdsl.jvm import OPERATOR_ENV

    monkeypatch.setenv(OPERATOR_ENV, "python")
    b = StreamsBuilder()
    (b.stream("clicks", Consumed.with_serdes(Serdes.String(), Serdes.String())).group_by_key()
     .windowed_by(SessionWindows.of_inactivity_gap_and_grace(10, 100))
     .aggregate(lambda: "", lambda k, v, a: a + v, lambda k, a, b: a + b).to_stream().to("sessions"))
    topic = FileTopic(str(tmp_path / "in"))
    topic.append("clicks", [("a", "p", 0), ("a", "q", 5), ("a", "r", 40), ("a", "s", 22), ("a", "t", 30)],
                 Serdes.String(), Serdes.String())
    (path,) = tmp_path.glob("in/*.parquet")
    table = pq.read_table(path)
    pq.write_table(table.take(list(reversed(range(table.num_rows)))), path)
    out = Collect()
    q, _, _ = start_streaming(b.build(), lambda n: topic.read_stream(spark, n.topics), out,
                              checkpoint_location=str(tmp_path / "cp"))
    q.processAllAvailable()
    q.stop()
    # Kafka Streams' record cache flushed once: the net change of the batch per session
    assert sorted((k, v, ts) for _, k, v, ts in out.records) == [
        (Windowed("a", SessionWindow(0, 5)), "pq", 5), (Windowed("a", SessionWindow(22, 40)), "srt", 40)]


class TestFoldedRecordsInTheProcessor:
    """The streaming processor hands a key's records to the kernel in one fold: a user
    function's error still names the processor, the function and the record (no Spark: an
    in-memory state handle)."""

    def test_a_failing_aggregator_names_its_record(self) -> None:
        from pyspark.sql import Row

        from streamsdsl.compiler.processors import META, AggregateConfig, AggregateInput
        from streamsdsl.compiler.processors import StreamingAggregateProcessor
        from streamsdsl.errors import RecordFailure
        from streamsdsl.operators.codecs import SessionKeyCodec
        from streamsdsl.semantics.aggregation import AggFunctions
        from streamsdsl.semantics.session import SessionWindowing

        def agg(k: Any, v: Any, a: int) -> int:
            if v == "bad":
                raise ValueError("bad value")
            return a + 1

        class Handle:
            def getValueState(self, name: str, schema: str) -> Any:  # noqa: N802
                return type("State", (), {"get": lambda s: None, "update": lambda s, v: None,
                                          "clear": lambda s: None})()

        config = AggregateConfig("KSTREAM-AGGREGATE-0000000002", SessionKeyCodec(Serdes.String()), Serdes.Long(),
                                 SessionWindowing(10, 0), (AggregateInput(Serdes.String(), AggFunctions(
                                     lambda: 0, agg, lambda k, a, b: a + b)),))
        processor = StreamingAggregateProcessor(config, "windows binary")
        processor.init(Handle())  # type: ignore[arg-type]
        assert processor.folds
        row = Row("key", "value", META, "headers")("k", ["ok", "bad"], [[5, 40], [6, 41]], [None, None])
        watermark = type("Timers", (), {"getCurrentWatermarkInMs": lambda s: -1})()
        with pytest.raises(RecordFailure, match=r"^KSTREAM-AGGREGATE-0000000002: the aggregator raised ValueError: "
                                                r"bad value \(record at position 41, key 'k'\)"):
            list(processor.handleInputRows(("k",), iter([row]), watermark))
