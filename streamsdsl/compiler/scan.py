"""Replay: the running maxima of stream time without a window over every record.

The test driver's replay (`modes.ReplayLowering`) follows Kafka's TopologyTestDriver: one pipe
order, one stream time per node. Spark's window operator holds each window partition in one
task and buffers it whole, so a window over all records of a large run (a backfill of millions)
runs in one task and out of heap (its buffer spills every few thousand rows and reads each spill
file back through a buffer of its own). A run over more than `SCAN_BLOCK` source positions
computes the same values per block of positions, a block per window partition:

* `running_maxima`: a running max in pipe order is each block's own running max plus the largest
  value of the blocks before it (a parallel prefix scan over a table of one row per block);
* `first_passing`: the first record whose stream time passes a window's close threshold is the
  one whose step of stream time holds the threshold (stream time never decreases in pipe
  order), found in the block whose steps hold it, instead of a join of every pending window
  with every record.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from streamsdsl.compiler.columns import CLOSE_THRESHOLD, SOURCE_POSITION, STREAM_TIME

__all__ = ["SCAN_BLOCK", "first_passing", "in_blocks", "position_block", "running_maxima"]

#: Source positions per block: a replay over more positions than this computes its running
#: maxima per block (a smaller one in one window: fewer stages for the test driver's short runs).
SCAN_BLOCK = 1 << 14

_BLOCK = "_block"

Cache = Callable[[DataFrame], DataFrame]


def in_blocks(positions: int | None) -> bool:
    """Whether a replay over ``positions`` source positions (None: a few) computes per block."""
    return positions is not None and positions > SCAN_BLOCK


def position_block() -> Column:
    """The block of `SCAN_BLOCK` source positions a record is in."""
    return F.floor(F.col(SOURCE_POSITION) / F.lit(SCAN_BLOCK))


def running_maxima(df: DataFrame, order: Sequence[Any], block: Column, maxima: Mapping[str, tuple[Column, bool]],
                   cache: Cache, by: Sequence[str] = ()) -> tuple[DataFrame, DataFrame]:
    """``df`` with a column per entry of ``maxima`` (name → (value, inclusive)): the largest value
    of the rows before each row in ``order`` (per ``by``), the row's own included when
    ``inclusive``: what ``F.max(value).over(Window.partitionBy(*by).orderBy(*order)
    .rowsBetween(Window.unboundedPreceding, 0 if inclusive else -1))`` computes, without putting all
    rows of a ``by`` group into one window partition. ``block`` (non-decreasing in ``order``) cuts
    each group into blocks: a block's running maxima are computed in a window partition of its
    own, and the largest value of the group's earlier blocks (a table of one row per block,
    broadcast) is added: the same values.

    ``cache`` persists ``df`` (it is read twice: for the blocks' maxima and for the rows). Also
    returns the blocks' table: ``by`` columns, ``_block`` and each name (the block's largest value).
    """
    values = {f"_value{i}": v for i, (v, _) in enumerate(maxima.values())}
    df = cache(df.withColumn(_BLOCK, block).withColumns(values))
    local = Window.partitionBy(*by, _BLOCK).orderBy(*order)
    frames = {True: local.rowsBetween(Window.unboundedPreceding, Window.currentRow),
              False: local.rowsBetween(Window.unboundedPreceding, -1)}
    names = list(maxima)
    blocks = df.groupBy(*by, _BLOCK).agg(*[F.max(v).alias(n) for n, v in zip(names, values)])
    earlier = Window.partitionBy(*by).orderBy(_BLOCK).rowsBetween(Window.unboundedPreceding, -1)
    before = blocks.select(*[F.col(c).alias(f"_by{i}") for i, c in enumerate(by)], F.col(_BLOCK).alias("_earlier_block"),
                           *[F.max(n).over(earlier).alias(f"_earlier{i}") for i, n in enumerate(names)])
    out = df.withColumns({n: F.max(v).over(frames[maxima[n][1]]) for n, v in zip(names, values)})
    on = [out[c].eqNullSafe(before[f"_by{i}"]) for i, c in enumerate(by)] + [out[_BLOCK].eqNullSafe(before["_earlier_block"])]
    out = out.join(F.broadcast(before), on, "inner")
    out = out.withColumns({n: F.greatest(F.col(n), F.col(f"_earlier{i}")) for i, n in enumerate(names)})
    return out.drop(_BLOCK, "_earlier_block", *values, *[f"_by{i}" for i in range(len(by))],
                    *[f"_earlier{i}" for i in range(len(names))]), blocks


def first_passing(cache: Cache, pending: DataFrame, records: DataFrame, at: Column, before: Column,
                  initial: int) -> DataFrame:
    """Per pending record (``_pending``, `CLOSE_THRESHOLD`), ``_at`` (``at`` of the record) of the
    first of ``records`` in pipe order whose `STREAM_TIME` is past the threshold: what the join of
    every pending record with every record finds (the smallest ``at`` of those past it), without
    that join. ``records``' stream time never decreases in pipe order and ``before`` is the stream
    time of the record before each (``initial`` for the first). So the record sought is the step
    ``[before, stream time)`` holding the threshold (a threshold below ``initial``: the first
    record), and the steps are matched per block of positions: the block whose steps hold the
    threshold (a table of one row per block, broadcast), then a running max in that block."""
    steps = cache(records.filter(F.col(STREAM_TIME) > before).select(
        position_block().alias(_BLOCK), before.alias("_value"), F.lit(0).alias("_kind"),
        F.lit(None).cast("bigint").alias("_pending"), at.alias("_at"), F.col(STREAM_TIME).alias("_to")))
    ranges = steps.groupBy(_BLOCK).agg(F.min("_value").alias("_from"), F.max("_to").alias("_to"))
    threshold = F.col(CLOSE_THRESHOLD)
    placed = pending.select("_pending", threshold.alias("_value")).join(
        F.broadcast(ranges), (F.col("_value") >= F.col("_from")) & (F.col("_value") < F.col("_to")), "inner")
    placed = placed.select(_BLOCK, "_value", F.lit(1).alias("_kind"), "_pending",
                           F.lit(None).cast(steps.schema["_at"].dataType).alias("_at"))
    upto = Window.partitionBy(_BLOCK).orderBy("_value", "_kind").rowsBetween(Window.unboundedPreceding, Window.currentRow)
    last = F.max(F.when(F.col("_kind") == 0, F.struct("_value", "_at"))).over(upto)
    stepped = steps.drop("_to").unionByName(placed).withColumn("_last", last).filter(F.col("_kind") == 1)
    stepped = stepped.select("_pending", F.col("_last._at").alias("_at"))
    first = records.agg(F.min(at).alias("_at"))
    early = pending.filter(threshold < F.lit(initial)).select("_pending").crossJoin(F.broadcast(first))
    return stepped.unionByName(early.filter(F.col("_at").isNotNull()))
