"""`streamsdsl.compiler.scan`: a large replay's running maxima and the record that passes each
close threshold, computed per block of positions, are what one window over every record and a
join of every pending record with every record compute (checked against those definitions in
Python, with blocks of two positions)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql import functions as F

from streamsdsl.compiler import scan
from streamsdsl.compiler.columns import CLOSE_THRESHOLD, OUTPUT_POSITION, SOURCE_POSITION, STREAM_TIME

pytestmark = pytest.mark.spark


def _persist(df: Any) -> Any:
    return df.persist()


@settings(max_examples=4, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(rows=st.lists(st.tuples(st.sampled_from(["a", "b"]), st.one_of(st.none(), st.integers(0, 30))), max_size=14))
def test_running_maxima_is_the_window(spark: Any, rows: list[tuple[str, int | None]]) -> None:
    """Per group, in position order: the largest value up to each row (inclusive) and before it
    (exclusive), nulls where there is none, as a window over the whole group gives them."""
    df = spark.createDataFrame([(g, i, v) for i, (g, v) in enumerate(rows)], "g string, pos long, v long")
    out, _ = scan.running_maxima(df, ["pos"], F.floor(F.col("pos") / 2), {"upto": (F.col("v"), True),
                                                                         "before": (F.col("v"), False)}, _persist, ("g",))
    got = sorted((r["pos"], r["upto"], r["before"]) for r in out.collect())
    want = []
    for i, (g, _) in enumerate(rows):
        earlier = [v for j, (h, v) in enumerate(rows) if h == g and j < i and v is not None]
        mine = earlier + ([rows[i][1]] if rows[i][1] is not None else [])
        want.append((i, max(mine, default=None), max(earlier, default=None)))
    assert got == want


@settings(max_examples=8, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(timestamps=st.lists(st.integers(0, 12), max_size=14), thresholds=st.lists(st.integers(-2, 14), max_size=8),
       initial=st.integers(-1, 8))
def test_first_passing_is_the_first_record_past_the_threshold(spark: Any, monkeypatch: pytest.MonkeyPatch,
                                                              timestamps: list[int], thresholds: list[int],
                                                              initial: int) -> None:
    """Per pending threshold, the first record in pipe order whose stream time (a running max
    from ``initial``) is past it, or none: the smallest of the records a join would match."""
    monkeypatch.setattr(scan, "SCAN_BLOCK", 2)
    times, now = [], initial
    for ts in timestamps:
        times.append((now, max(now, ts)))
        now = max(now, ts)
    records = spark.createDataFrame([(i, [0], after, before) for i, (before, after) in enumerate(times)],
                                    f"{SOURCE_POSITION} long, {OUTPUT_POSITION} array<long>, {STREAM_TIME} long, _before long")
    pending = spark.createDataFrame(list(enumerate(thresholds)), f"_pending long, {CLOSE_THRESHOLD} long")
    at = F.struct(F.col(SOURCE_POSITION).alias("p"), F.col(STREAM_TIME).alias("t"))
    got = {r["_pending"]: (r["_at"]["p"], r["_at"]["t"]) for r in
           scan.first_passing(_persist, pending, records, at, F.col("_before"), initial).collect()}
    want = {}
    for n, threshold in enumerate(thresholds):
        past = [(i, after) for i, (_, after) in enumerate(times) if after > threshold]
        if past:
            want[n] = past[0]
    assert got == want
