"""The progress line `KafkaStreams` logs per micro-batch (issue 26, item 2: real rates)."""

from __future__ import annotations

import logging
from types import SimpleNamespace

import pytest

from streamsdsl import KafkaStreams, StreamsBuilder


def _app() -> KafkaStreams:
    b = StreamsBuilder()
    b.stream("in").to("out")
    return KafkaStreams(b.build(), {"application.id": "rates", "bootstrap.servers": "localhost:9092"})


def _progress(rows: int, duration_ms: int) -> SimpleNamespace:
    state = SimpleNamespace(numRowsTotal=4, numRowsDroppedByWatermark=0)
    return SimpleNamespace(batchId=7, numInputRows=rows, batchDuration=duration_ms, processedRowsPerSecond=0.0,
                           stateOperators=[state], observedMetrics={})


class TestProgressLine:
    @pytest.mark.parametrize(("rows", "ms", "rate"), [(3, 9_000, "0.333"), (37, 3_000, "12.3"), (500, 210, "2381"),
                                                      (0, 40, "0")])
    def test_the_rate_is_rows_over_the_batch_duration(self, caplog: pytest.LogCaptureFixture, rows: int, ms: int,
                                                       rate: str) -> None:
        """The rate is the batch's rows over its duration, shown with three significant digits
        below 100 rows/s: a slow batch of a few rows shows its rate, not ``0 rows/s`` (Spark's
        ``processedRowsPerSecond`` is 0 here, as it is for such batches)."""
        caplog.set_level(logging.INFO, logger="streamsdsl")
        _app()._log_progress(_progress(rows, ms))
        assert [(r.name, r.getMessage()) for r in caplog.records] == [(
            "streamsdsl.progress",
            f"rates batch 7: {rows} input rows ({rate} rows/s), 4 state rows, 0 dropped, 0 emitted, {ms} ms",
        )]

    def test_progress_lines_can_be_silenced_alone(self, caplog: pytest.LogCaptureFixture) -> None:
        """The per-batch line goes to the ``streamsdsl.progress`` logger: setting it to WARNING
        silences the progress and keeps the application's other INFO lines."""
        caplog.set_level(logging.INFO, logger="streamsdsl")
        logging.getLogger("streamsdsl.progress").setLevel(logging.WARNING)
        try:
            _app()._log_progress(_progress(3, 9_000))
        finally:
            logging.getLogger("streamsdsl.progress").setLevel(logging.NOTSET)
        assert caplog.records == []
