"""A streaming query's metrics count each micro-batch's report once, in whatever order the two
ways it arrives deliver it: the progress listener (Spark's listener bus, behind the query under
load) and `QueryMetrics.refresh` (the query's ``recentProgress``, which keeps the last few)."""

from __future__ import annotations

import types
from typing import Any

from streamsdsl.compiler.columns import OBSERVED_DROPPED, observation_name
from streamsdsl.runtime.metrics import COUNTED_WINDOW, QueryMetrics


def _report(batch_id: int, dropped: int = 0) -> Any:
    """A progress report of ``batch_id`` whose observation counts ``dropped`` records."""
    row = types.SimpleNamespace(asDict=lambda recursive: {OBSERVED_DROPPED: dropped})
    return types.SimpleNamespace(batchId=batch_id, numInputRows=dropped,
                                 observedMetrics={observation_name("KSTREAM-AGGREGATE-0000000001", "input"): row})


def test_a_report_delivered_after_later_ones_is_counted_once() -> None:
    """The drop of batch 3 reaches the metrics after batches 4 to 7 were counted from
    ``recentProgress``: it is counted then, and once."""
    metrics = QueryMetrics()
    for batch in (4, 5, 6, 7):
        assert metrics.add_progress(_report(batch))
    assert metrics.add_progress(_report(3, dropped=1))
    assert not metrics.add_progress(_report(3, dropped=1)) and not metrics.add_progress(_report(6))
    assert metrics.snapshot()["dropped-records-total"] == 1.0
    assert metrics.snapshot()["batches-total"] == 5.0


def test_the_drop_counters_of_a_late_report_are_kept_for_it() -> None:
    """What the plan's drop counters counted in a batch (`batch_written`) waits for that batch's
    report, also when a later batch's report is counted first."""
    metrics = QueryMetrics()
    counted = {observation_name("KSTREAM-AGGREGATE-0000000001", "input"): {OBSERVED_DROPPED: 2}}
    metrics.batch_written(3, counted)
    metrics.batch_written(4)
    metrics.add_progress(_report(4))
    metrics.add_progress(_report(3))
    assert metrics.snapshot()["dropped-records-total"] == 2.0


def test_only_a_window_of_batch_ids_is_remembered() -> None:
    """Batch ids far behind the highest counted are taken as counted (the set stays bounded)."""
    metrics = QueryMetrics()
    for batch in range(3 * COUNTED_WINDOW):
        metrics.add_progress(_report(batch))
    assert len(metrics._seen) <= 2 * COUNTED_WINDOW
    assert not metrics.add_progress(_report(5, dropped=1))
    assert metrics.add_progress(_report(3 * COUNTED_WINDOW, dropped=1))
    assert metrics.snapshot()["dropped-records-total"] == 1.0
