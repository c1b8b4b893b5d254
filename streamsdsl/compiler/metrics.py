"""The plan's metrics: where a lowered plan counts the records each node drops (and logs the
first of them) and its emit-final records, as Spark observations or as the jar's counters.

`DropMetrics` is the half of `streamsdsl.compiler.lowering.Lowering` that the rules call to count:
`DropMetrics.observe` (a point that only counts) and `DropMetrics.drop_counted` (a point that drops
and counts); the runners read what they count (`streamsdsl.runtime.metrics`).
"""

from __future__ import annotations

from typing import Any, ClassVar

import attrs
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.classic.column import Column as ClassicColumn

from streamsdsl.compiler.columns import (
    MAX_LOGGED_DROPS,
    OBSERVED_DROPPED,
    OBSERVED_DROPPED_RECORDS,
    OBSERVED_EMITTED_FINAL,
    OBSERVED_LATENCY_MAX,
    OBSERVED_LATENCY_SUM,
    SOURCE_POSITION,
    merged_observation_name,
    observation_name,
)
from streamsdsl.compiler.frame import Frame
from streamsdsl.compiler.jvm_operator import drop_counter

__all__ = ["DropMetrics"]


class DropMetrics:
    """Counting what a plan drops and emits final, per node (a base of `Lowering`, which sets
    `frames` and `topology`: a drop point joins the one right before it only where nothing else
    reads that point's output)."""

    #: Whether drop points are counted by the jar's counters (`drop_counted`) rather than observed.
    counts_drops: ClassVar[bool] = False
    frames: dict[str, Frame]
    topology: Any

    def __init__(self) -> None:
        #: `drop_counted` outputs, by id: (the output, the DataFrame before its drop points, the
        #: points), so that a drop point right after another one joins it (`drop_counted`).
        self._drop_chains: dict[int, tuple[DataFrame, DataFrame, tuple[_DropPoint, ...]]] = {}
        #: The drop points counted by a counter of the jar (`drop_counted`), by observation name:
        #: (the counter's name in the plan, the ``io.streamsdsl.jvm.DropCounter``).
        self.counters: dict[str, tuple[str, Any]] = {}
        self._counter_serial = 0
        #: The drop points observed with ``observe`` even where a counter could count them (set
        #: by `compile_topology`: points whose counter the plan would hold twice).
        self.observed_points: frozenset[str] = frozenset()
    def observe(self, df: DataFrame, node: str, part: str, *, dropped: Column,
                final_latency: Column | None = None, detail: Column | None = None,
                position: Column | None = None) -> DataFrame:
        """Count, as rows pass this point, the records ``node`` drops (``dropped``: how many each
        row stands for, null for none) and its emit-final records (``final_latency``: the row's
        latency, null for other rows); see `streamsdsl.compiler.columns.OBSERVED_FIELDS`. The
        first `MAX_LOGGED_DROPS` dropped records (position, timestamp, ``detail``) are observed
        too, for the runners' one log warning per dropped record."""
        return df.observe(observation_name(node, part),
                          *_observed_fields(dropped, final_latency, detail, position))

    def drop_counted(self, df: DataFrame, node: str, keep: Column, part: str = "input",
                     detail: Column | None = None, position: Column | None = None) -> DataFrame:
        """Keep the rows where ``keep`` holds; count (and log) the others as dropped by ``node``.

        Each point's ``keep`` is computed into a flag column first, which its observation and its
        filter read: the observation runs outside Spark's generated code, on rows Spark
        materializes, and reads the flag rather than every column ``keep`` reads. A point right
        after another one (`_joins_chain`: e.g. a repartition's null-key drop and the aggregation
        right after it) joins it: both flags are computed in one projection, one observation
        counts both points (`merged_observation_name`) and one filter follows it, the later point counting only the rows
        the earlier ones keep (its flag is null for the others, so ``keep`` is evaluated only on
        the rows the point sees, as with one filter per point). The counts, the logged records
        and the rows kept are the same as with a filter per point; the plan has one break in
        Spark's generated code instead of one per point, materializes narrower rows, and Spark's
        optimizer does not copy a computed key (``selectKey``) into an earlier filter, where it
        would be evaluated twice.

        Where the mode counts drops so (`counts_drops`: streaming) and the session has loaded the
        jar, the points are counted by its counters (`_drop_counters`) in a projection inside
        Spark's generated code instead of an observation, with the same counts and records."""
        point = _DropPoint(node, part, keep, detail, position)
        chain = self._joins_chain(df, node)
        base, points = (chain[1], (*chain[2], point)) if chain is not None else (df, (point,))
        flags = [f"{_KEEP_FLAG}{i}" for i in range(len(points))]
        records = [f"{_DROPPED_RECORD}{i}" for i in range(len(points))]
        computed: list[Column] = []
        for i, p in enumerate(points):
            computed.append((p.keep if i == 0 else F.when(F.col(flags[i - 1]), p.keep)).alias(flags[i]))
        names = [observation_name(p.node, p.part) for p in points]
        counters = self._drop_counters(base, names)
        if counters is not None:
            # the counters count inside Spark's generated code, in a projection of their own
            # that the filter reads: as they are not deterministic, Spark neither pushes the
            # filter below the flags' projection nor merges the two, which would evaluate each
            # flag's expression once per use. A row that every point keeps (the last flag is true
            # only then) takes one test; the counters are called only for the others (a call
            # for every row cost P1 ≈ 8% of its time), each point's in turn until one drops the
            # row (its counter returns false), with the dropped record built only then.
            calls = [ClassicColumn(counter.apply(udf_name, F.col(flag)._jc, _dropped_record(p.detail, p.position)._jc))
                     for flag, p, (udf_name, counter) in zip(flags, points, counters)]
            counted = calls[0]
            for call in calls[1:]:
                counted = counted & call
            out = base.select("*", *computed).select(
                "*", F.when(F.col(flags[-1]), F.lit(True)).otherwise(counted).alias(_COUNTED))
            result = out.filter(F.col(_COUNTED)).drop(*flags, _COUNTED)
            self._drop_chains[id(result)] = (result, base, points)
            return result
        # each point's dropped record (null for the rows it keeps) is computed in the same
        # generated projection as the flags: the observation's list then reads one column per
        # row instead of evaluating the record's expression outside the generated code
        for flag, record, p in zip(flags, records, points):
            computed.append(F.when(~F.col(flag), _dropped_record(p.detail, p.position)).alias(record))
        out = base.select("*", *computed)
        fields = [_observed_fields(F.when(~F.col(flag), F.lit(1)), None, p.detail, p.position,
                                   record=F.col(record))
                  for flag, record, p in zip(flags, records, points)]
        if len(points) == 1:
            out = out.observe(names[0], *fields[0])
        else:
            # one observation of all the points: each is an operator outside Spark's generated
            # code that handles every row, so one costs about half of two
            out = out.observe(merged_observation_name(names),
                              *[F.struct(*f).alias(name) for f, name in zip(fields, names)])
        # (the last flag alone is true exactly where all are; the filter reads every flag so that
        # Spark does not project the earlier ones away between the observations, copying each row)
        kept = F.col(flags[0])
        for flag in flags[1:]:
            kept = kept & F.col(flag)
        result = out.filter(kept).drop(*flags, *records)
        self._drop_chains[id(result)] = (result, base, points)
        return result

    def _drop_counters(self, df: DataFrame, names: list[str]) -> list[tuple[str, Any]] | None:
        """A counter (`streamsdsl.compiler.jvm_operator.drop_counter`) for each drop point of
        ``names``, registered in `counters`; None where the points are observed instead: in a mode
        that does not count drops so (`counts_drops`), for a point `observed_points` names, or
        without the jar."""
        if not self.counts_drops or any(name in self.observed_points for name in names):
            return None
        spark = df.sparkSession
        made = [drop_counter(spark, MAX_LOGGED_DROPS) for _ in names]
        if any(c is None for c in made):
            return None
        out = []
        for name, counter in zip(names, made):
            udf_name = f"{_COUNTER_UDF}{self._counter_serial}"
            self._counter_serial += 1
            self.counters[name] = (udf_name, counter)
            out.append((udf_name, counter))
        return out

    def _joins_chain(self, df: DataFrame, node: str) -> tuple[DataFrame, DataFrame, tuple[_DropPoint, ...]] | None:
        """The drop points ``df`` is the result of (`drop_counted`), when ``node``'s point can join
        them: ``df`` is the frame of one lowered node whose only child is ``node``, so that nothing
        else reads ``df`` (another reader would see the earlier observations twice)."""
        chain = self._drop_chains.get(id(df))
        if chain is None or chain[0] is not df or self.topology is None:
            return None
        holders = [name for name, f in self.frames.items() if f.df is df or f.table_records is df]
        if len(holders) != 1 or tuple(self.topology.children(holders[0])) != (node,):
            return None
        return chain


#: Prefix of the names of the drop counters' functions in a plan (one per counter).
_COUNTER_UDF = "streamsdsl_dropped_"


#: The column the drop counters compute: true for the rows all the points keep.
_COUNTED = "_counted"


#: Prefix of the flag columns `DropMetrics.drop_counted` computes (one per drop point).
_KEEP_FLAG = "_keep_"


#: Prefix of the dropped-record columns `DropMetrics.drop_counted` computes (one per drop point).
_DROPPED_RECORD = "_dropped_record_"


def _dropped_record(detail: Column | None, position: Column | None) -> Column:
    """What an observation keeps of a dropped record, for the runners' log warning."""
    position = position if position is not None else F.col(SOURCE_POSITION)
    return F.struct(position.alias("position"), F.col("timestamp").cast("bigint").alias("timestamp"),
                    (detail if detail is not None else F.lit(None).cast("string")).alias("detail"))


def _observed_fields(dropped: Column, final_latency: Column | None, detail: Column | None,
                     position: Column | None, *, record: Column | None = None) -> list[Column]:
    """The aggregates of one observation (`DropMetrics.observe`); ``record``: a column holding each
    dropped row's record (null for the others), computed before the observation."""
    listed = record if record is not None else F.when(dropped.isNotNull(), _dropped_record(detail, position))
    if final_latency is None:
        # a point without emit-final records: the values the aggregates below would give
        # (count 0, sum 0.0, max null) as constants, not aggregated per row
        final: list[Column] = [F.lit(0).cast("long").alias(OBSERVED_EMITTED_FINAL),
                               F.lit(0.0).alias(OBSERVED_LATENCY_SUM),
                               F.lit(None).cast("double").alias(OBSERVED_LATENCY_MAX)]
    else:
        final = [F.count(final_latency).alias(OBSERVED_EMITTED_FINAL),
                 F.coalesce(F.sum(final_latency), F.lit(0.0)).cast("double").alias(OBSERVED_LATENCY_SUM),
                 F.max(final_latency).cast("double").alias(OBSERVED_LATENCY_MAX)]
    return [F.coalesce(F.sum(dropped), F.lit(0)).cast("long").alias(OBSERVED_DROPPED), *final,
            F.slice(F.collect_list(listed), 1, MAX_LOGGED_DROPS).alias(
                OBSERVED_DROPPED_RECORDS)]


@attrs.frozen(eq=False)
class _DropPoint:
    """A point where `DropMetrics.drop_counted` drops (and counts) records."""

    node: str
    part: str
    keep: Column
    detail: Column | None
    position: Column | None
