"""``streamsdsl.backfill``: a topology run once over history, as one Spark batch job.

The backfill is the Spark engine of the `TopologyTestDriver` (`SparkDriverEngine`) run over
bounded inputs instead of piped records: the same compiled plan in replay mode, the same
kernels, per-record stream time. What it writes is what the driver writes when the same
records are piped in the backfill's order (below): the same records, timestamps and tombstones.

**Inputs.** ``sources`` maps each source topic to

* a DataFrame with the columns ``key``, ``value`` and ``timestamp`` (optional ``partition``,
  ``offset`` and ``headers``). A ``binary`` key or value column holds the record's bytes as they
  are on the topic; any other column holds what the topic's serdes read (a `Serdes.String` value
  column of strings, a `Serdes.Long` one of longs, a JSON one of any value the JSON serde
  reads: numbers, strings, structs as objects, arrays), written to bytes with those serdes.
  ``timestamp`` is epoch milliseconds (a ``timestamp`` column is converted);
* or a `KafkaRange`: offsets or timestamps per partition of the topic, read as one batch.

**Order.** Kafka Streams processes one partition in offset order and, across partitions, the
one whose next record has the smallest timestamp. The backfill does the same: records with an
``offset`` (a Kafka range, or a DataFrame with that column) in offset order per
(topic, partition), merged across partitions and topics by the largest timestamp of their
partition so far (which is the order of Kafka's choice by the next record's timestamp), ties by
the topic's position in ``sources``, the partition and the offset; records without an offset
(a table of past events) in timestamp order, ties in the order the DataFrame's rows are read.
Like the driver, the backfill has one stream time, the whole input's (computed per block of
records in parallel: `streamsdsl.compiler.scan`).

**Continuing.** `Backfill.continue_streaming` returns a `KafkaStreams` that starts reading each
source where the backfill's Kafka range ended, with the state the backfill ended with
(`Backfill.final_state`): each stateful operator of the streaming query stores its keys' state
in its first micro-batch (``transformWithState``'s initial state, re-registering the timers of
the windows still open) and starts from the backfill's stream time. What the backfill cannot hand
on is refused per node, with the reason (`check_continuable`, `ContinuationError`).
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Union

import attrs

from streamsdsl.errors import InvalidArgumentError, InvalidTypeError, OperationNotDefinedError
from streamsdsl.ir.topology import Topology

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

    from streamsdsl.compiler import CompiledTopology
    from streamsdsl.compiler.modes import ReplayCarry
    from streamsdsl.runtime.app import KafkaStreams
    from streamsdsl.runtime.config import DriverConfig

__all__ = ["Backfill", "ContinuationError", "KafkaRange", "backfill"]

#: The column a source DataFrame must have.
REQUIRED_COLUMNS = ("key", "value", "timestamp")
_EARLIEST, _LATEST = "earliest", "latest"


class ContinuationError(OperationNotDefinedError):
    """A backfill cannot hand its state or offsets to a streaming application (the message says why
    and what to do instead)."""


def _bound(value: Any) -> str | int | dict[int, int]:
    if isinstance(value, str) and value in (_EARLIEST, _LATEST):
        return value
    if isinstance(value, bool) or not isinstance(value, (int, Mapping)):
        raise InvalidTypeError(
            f"a KafkaRange bound must be 'earliest', 'latest', an int (every partition) or a dict "
            f"{{partition: offset or epoch ms}} (got {value!r}).")
    if isinstance(value, int):
        return value
    out = {}
    for partition, at in value.items():
        if isinstance(partition, bool) or not isinstance(partition, int) or partition < 0 \
                or isinstance(at, bool) or not isinstance(at, int) or at < 0:
            raise InvalidArgumentError(
                f"a KafkaRange bound maps partitions (int >= 0) to offsets or epoch ms (int >= 0) "
                f"(got {partition!r}: {at!r}).")
        out[partition] = at
    return out


@attrs.frozen
class KafkaRange:
    """A bounded range of a Kafka topic: ``[start, end)`` per partition, by offset or by timestamp.

    ``start``/``end``: ``"earliest"``/``"latest"``, an int for every partition, or a dict
    ``{partition: value}`` (a partition the dict leaves out: earliest / latest). ``by``:
    ``"offset"`` (values are offsets) or ``"timestamp"`` (epoch ms: the range starts at the
    first record whose timestamp is at least ``start`` and ends before the first one at least
    ``end``, as Kafka's ``offsetsForTimes`` finds them). Build one with `KafkaRange.offsets` or
    `KafkaRange.timestamps`.

    Examples
    --------
    >>> KafkaRange.offsets("127.0.0.1:9092", start={0: 100, 1: 0}, end="latest")
    KafkaRange(bootstrap_servers='127.0.0.1:9092', start={0: 100, 1: 0}, end='latest', by='offset', config={})
    >>> KafkaRange.timestamps("127.0.0.1:9092", start=1_700_000_000_000, end=1_700_086_400_000).by
    'timestamp'
    """

    bootstrap_servers: str = attrs.field(validator=attrs.validators.instance_of(str))
    start: str | int | dict[int, int] = attrs.field(default=_EARLIEST, converter=_bound)
    end: str | int | dict[int, int] = attrs.field(default=_LATEST, converter=_bound)
    by: str = attrs.field(default="offset", validator=attrs.validators.in_(("offset", "timestamp")))
    #: librdkafka settings of the consumer (security, ...), without ``bootstrap.servers``.
    config: dict[str, str] = attrs.field(factory=dict, converter=dict)

    @classmethod
    def offsets(cls, bootstrap_servers: str, start: Any = _EARLIEST, end: Any = _LATEST, *,
                config: Mapping[str, str] | None = None) -> KafkaRange:
        """The offsets ``[start, end)`` of each partition."""
        return cls(bootstrap_servers, start, end, "offset", dict(config or {}))

    @classmethod
    def timestamps(cls, bootstrap_servers: str, start: Any = _EARLIEST, end: Any = _LATEST, *,
                   config: Mapping[str, str] | None = None) -> KafkaRange:
        """The records from the first with a timestamp ``>= start`` to before the first ``>= end``
        (epoch ms) of each partition."""
        return cls(bootstrap_servers, start, end, "timestamp", dict(config or {}))

    def resolve(self, topic: str) -> dict[int, tuple[int, int]]:
        """``{partition: (start, end)}``: the offsets of the range on the brokers now."""
        from confluent_kafka import Consumer, TopicPartition

        consumer = Consumer({**self.config, "bootstrap.servers": self.bootstrap_servers,
                             "group.id": "streamsdsl-backfill", "enable.auto.commit": False})
        try:
            meta = consumer.list_topics(topic, timeout=30).topics.get(topic)
            if meta is None or meta.error is not None or not meta.partitions:
                raise InvalidArgumentError(
                    f"topic {topic!r} does not exist on {self.bootstrap_servers}: a KafkaRange reads an existing topic.")
            partitions = sorted(meta.partitions)
            unknown = [p for bound in (self.start, self.end) if isinstance(bound, dict) for p in bound
                       if p not in meta.partitions]
            if unknown:
                raise InvalidArgumentError(f"topic {topic!r} has no partition {unknown[0]} (it has {len(partitions)}).")
            marks = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30) for p in partitions}

            def at(bound: Any, default: str) -> dict[int, int]:
                wanted = {p: (bound.get(p, default) if isinstance(bound, dict) else bound) for p in partitions}
                out = {p: marks[p][0] if w == _EARLIEST else marks[p][1] for p, w in wanted.items() if isinstance(w, str)}
                given = {p: w for p, w in wanted.items() if not isinstance(w, str)}
                if self.by == "offset":
                    out.update({p: min(max(w, marks[p][0]), marks[p][1]) for p, w in given.items()})
                elif given:
                    found = consumer.offsets_for_times([TopicPartition(topic, p, w) for p, w in given.items()], timeout=30)
                    out.update({tp.partition: marks[tp.partition][1] if tp.offset < 0 else tp.offset for tp in found})
                return out

            start, end = at(self.start, _EARLIEST), at(self.end, _LATEST)
        finally:
            consumer.close()
        backwards = [p for p in partitions if start[p] > end[p]]
        if backwards:
            p = backwards[0]
            raise InvalidArgumentError(
                f"the KafkaRange of topic {topic!r} ends before it starts on partition {p} "
                f"(start offset {start[p]}, end offset {end[p]}).")
        return {p: (start[p], end[p]) for p in partitions}

    def read(self, spark: SparkSession, topic: str, offsets: Mapping[int, tuple[int, int]]) -> DataFrame:
        """The records of ``offsets`` (`resolve`) as raw records, with the ``streamsdsl-kafka`` source."""
        from streamsdsl.io import SOURCE_NAME, register

        register(spark)
        start = {topic: {str(p): s for p, (s, _) in offsets.items()}}
        end = {topic: {str(p): e for p, (_, e) in offsets.items()}}
        return (spark.read.format(SOURCE_NAME).option("kafka.bootstrap.servers", self.bootstrap_servers)
                .options(**{f"kafka.{k}": v for k, v in self.config.items()})
                .option("subscribe", topic).option("startingOffsets", json.dumps(start))
                .option("endingOffsets", json.dumps(end)).load())


Source = Union["DataFrame", KafkaRange]


class Backfill(dict):  # type: ignore[type-arg]
    """What `backfill` wrote: a dict from each sink topic (and the dead-letter topic, when one is
    set) to a DataFrame of its records — ``key`` and ``value`` as the bytes the sink writes (a
    null value is a tombstone), ``timestamp`` (epoch ms) and ``headers`` — in the order the sink
    writes them. The plan runs when a DataFrame is first used, once for all topics (its output
    is cached until `release`).

    ``end_offsets``: per source topic read from a `KafkaRange`, ``{partition: next offset}``:
    where a streaming application continues (`continue_streaming`)."""

    def __init__(self, topology: Topology, frames: Mapping[str, DataFrame], compiled: CompiledTopology,
                 end_offsets: Mapping[str, Mapping[int, int]], cached: list[DataFrame]) -> None:
        super().__init__(frames)
        self.topology = topology
        self.compiled = compiled
        self.end_offsets = {t: dict(o) for t, o in end_offsets.items()}
        self._cached = cached
        self._final: ReplayCarry | None = None

    def write(self, bootstrap_servers: str, *, topics: Mapping[str, str] | None = None,
              config: Mapping[str, str] | None = None) -> None:
        """Produce every topic's records to Kafka, in order (one writer per topic), with the
        ``streamsdsl-kafka`` sink (keys partitioned as Kafka's Java producer does).
        ``topics``: a sink topic → the topic to write it to instead (default: the same name);
        ``config``: librdkafka producer settings."""
        from streamsdsl.io import SOURCE_NAME, register

        for topic, df in self.items():
            register(df.sparkSession)
            target = (topics or {}).get(topic, topic)
            (df.coalesce(1).write.format(SOURCE_NAME).option("kafka.bootstrap.servers", bootstrap_servers)
             .options(**{f"kafka.{k}": v for k, v in (config or {}).items()})
             .option("topic", target).mode("append").save())

    def final_state(self) -> ReplayCarry:
        """The state the backfill ended with (runs the plan if no DataFrame was used yet): per
        stateful operator its keys' state, as the driver's replay carries it from one run to the
        next (a native aggregation's as the one window its operator stores), and its stream time."""
        if self._final is None:
            self._final = _final_state(self.compiled)
        return self._final

    def continue_streaming(self, config: Mapping[str, Any], *, spark: SparkSession | None = None) -> KafkaStreams:
        """A `KafkaStreams` of the same topology whose sources start where the backfill's Kafka
        ranges ended (``end_offsets``) and whose stateful operators start from the backfill's
        final state (`final_state`) and stream time (not started: call ``start()``).

        Raises `ContinuationError` when that would not continue the backfill: a stateful node whose
        state the streaming operator cannot take (`check_continuable` names it and what is
        missing), a source the backfill read from a DataFrame (no Kafka offset follows it), or an
        application that already has a checkpoint (it resumes from there, whatever the backfill
        read)."""
        import os

        from streamsdsl.runtime.app import KafkaStreams

        check_continuable(self.topology, self.end_offsets)
        app = KafkaStreams(self.topology, config, spark=spark)
        check_continuable(self.topology, self.end_offsets, idle_close_ms=app.config.idle_close_ms)
        if os.path.exists(app.config.checkpoint_location):
            raise ContinuationError(
                f"application {app.config.application_id!r} already has a checkpoint ({app.config.checkpoint_location}): "
                "it resumes from its own offsets and state. Use a new 'application.id' (or 'state.dir') to continue the "
                "backfill.")
        offsets = {t: {str(p): o for p, o in parts.items()} for t, parts in self.end_offsets.items()}
        initial = self.final_state() if any(_stateful(n) for n in self.topology.nodes) else None
        app.config = attrs.evolve(app.config, starting_offsets=offsets, initial_state=initial)
        return app

    def release(self) -> None:
        """Unpersist what the backfill cached (its input and output, the replay's intermediates)."""
        for df in self._cached:
            df.unpersist()
        self.compiled.release()


#: What to do instead, at the end of a `ContinuationError` that refuses stateful nodes.
_INSTEAD = ("Run the application itself over the history instead: KafkaStreams with 'auto.offset.reset' = "
            "'earliest' and a new application.id replays the topics, builds the state and goes on streaming "
            "(docs/backfill.md).")


def _stateful(node: Any) -> bool:
    from streamsdsl.compiler.event_time import stateful

    return stateful(node)


def not_continuable(node: Any, idle_close_ms: int | None = None) -> str | None:
    """Why the streaming operator of stateful ``node`` cannot start from a backfill's state
    (``None``: it can; ``idle_close_ms``: the application's ``streamsdsl.window.idle.close.ms``)."""
    from streamsdsl import ir

    if isinstance(node, (ir.AggregateNode, ir.CogroupAggregateNode)):
        agg = getattr(node, "agg", None)
        if isinstance(getattr(agg, "reducer", None), ir.ColumnFn) or isinstance(getattr(agg, "aggregator", None),
                                                                              ir.ColumnFn):
            return ("a pyspark Column aggregation runs as Spark's own streaming aggregation, which takes no initial "
                    "state; aggregate with Python functions (or count()) to continue a backfill")
        emit = getattr(node, "emit", None)
        on_close = emit is not None and emit.emits_on_close
        if on_close and (emit.idle_close_ms is not None or idle_close_ms is not None):
            return ("idle close closes an aggregation's windows by the wall-clock time of its last record, which a "
                    "backfill (no wall clock) does not have; continue without idle close")
        return None
    if isinstance(node, (ir.TableSourceNode, ir.StreamToTableNode)):
        if getattr(node, "history_retention_ms", None) is not None:
            return "a versioned table's versions are not handed to the streaming operator yet"
        return None
    if isinstance(node, (ir.SuppressNode, ir.TableTableJoinNode)):
        return None
    if isinstance(node, ir.StreamTableJoinNode):
        if node.grace_ms is not None:
            return ("a stream-table join with a grace period: its buffer of waiting stream records is not handed to "
                    "the streaming operator yet")
        return None
    missing = {
        ir.StreamStreamJoinNode: "a stream-stream join's window stores (each side's records within the join window) "
                                 "are not handed to the streaming operator yet",
        ir.ForeignKeyJoinNode: "a foreign-key join's subscription and response stores are not handed to the "
                               "streaming operators yet",
        ir.GlobalTableJoinNode: "a global table's store is not handed to the streaming operator yet",
        ir.TableGroupByNode: "a table group-by's state (each key's current value, whose old value a change "
                             "subtracts) is not handed to the streaming operator yet",
        ir.GroupedTableAggregateNode: "a table aggregation's state (each group's aggregate) is not handed to the "
                                      "streaming operator yet",
        ir.ProcessNode: "a processor's task stores and punctuation schedule are not handed to the streaming operator "
                        "yet",
    }
    for kind, reason in missing.items():
        if isinstance(node, kind):
            return reason
    return "its state is not handed to the streaming operator yet"


def check_continuable(topology: Topology, end_offsets: Mapping[str, Any], *, idle_close_ms: int | None = None) -> None:
    """Raise `ContinuationError` unless a streaming application can continue a backfill of
    ``topology`` whose Kafka ranges ended at ``end_offsets`` (see `Backfill.continue_streaming`):
    it names each stateful node whose state its streaming operator cannot take, and why."""
    refused = [(n.name, reason) for n in topology.nodes if _stateful(n)
               for reason in [not_continuable(n, idle_close_ms)] if reason is not None]
    if refused:
        raise ContinuationError(
            "a streaming application cannot continue this backfill: "
            + "; ".join(f"{name}: {reason}" for name, reason in refused) + ". " + _INSTEAD)
    missing = [t for t in topology.source_topics if t not in end_offsets]
    if missing:
        raise ContinuationError(
            f"a streaming application cannot continue this backfill: it read topic {missing[0]!r} from a DataFrame, "
            "so no Kafka offset follows its last record. Backfill that topic from a KafkaRange, or start KafkaStreams "
            "yourself with 'auto.offset.reset' = 'latest'.")


def backfill(topology: Topology, sources: Mapping[str, Source], config: Mapping[str, Any] | None = None, *,
             spark: SparkSession | None = None) -> Backfill:
    """Run ``topology`` once over bounded inputs, as one Spark batch job; what its sinks write.

    Parameters
    ----------
    topology : Topology
        From ``StreamsBuilder.build()``.
    sources : dict
        Every source topic → a DataFrame of ``key``, ``value``, ``timestamp`` (optional
        ``partition``, ``offset``, ``headers``) or a `KafkaRange` (see the module docs for the
        columns' types and the order the records are processed in). A pattern source reads
        the topics given that it matches.
    config : dict, optional
        The keys of a `TopologyTestDriver`'s config (the application's): the deserialization
        handler, the dead-letter topic, ``streamsdsl.operator``, ``statestore.cache.max.bytes``,
        ``application.id`` and ``spark.*`` settings of a session it builds.
    spark : SparkSession, optional
        The session to run on (default: the active one, else a local one).

    Returns
    -------
    Backfill
        Sink topic → DataFrame of ``key``, ``value`` (bytes), ``timestamp``, ``headers``, in order.

    Examples
    --------
    >>> from streamsdsl import Consumed, Serdes, StreamsBuilder
    >>> b = StreamsBuilder()
    >>> b.stream("orders", Consumed.with_serdes(Serdes.String(), Serdes.Long())).group_by_key().count().to_stream().to("counts")
    >>> orders = spark.createDataFrame([("a", 5, 1), ("a", 7, 2)], "key string, value long, timestamp long")  # doctest: +SKIP
    >>> out = backfill(b.build(), {"orders": orders})  # doctest: +SKIP
    """
    from streamsdsl.ir.processors import ProcessNode
    from streamsdsl.runtime.config import DriverConfig
    from streamsdsl.runtime.engines import SparkDriverEngine

    if not isinstance(topology, Topology):
        raise InvalidTypeError(f"'topology' must be a Topology from StreamsBuilder.build() (got {type(topology).__name__}).")
    if not isinstance(sources, Mapping) or not sources:
        raise InvalidTypeError("'sources' must be a non-empty dict from each source topic to a DataFrame or a KafkaRange "
                               f"(got {sources!r}).")
    _check_topics(topology, sources)
    driver_config = DriverConfig.from_mapping(config)
    engine = SparkDriverEngine(topology, driver_config, spark, int(time.time() * 1000))
    spark = engine.spark
    cached: list[DataFrame] = []
    raw, end_offsets, positions = _raw_records(spark, topology, sources, cached)
    raw = raw.persist()
    cached.append(raw)
    processors = any(isinstance(n, ProcessNode) for n in topology.nodes)  # they read each record's coordinates
    compiled = engine.plan(raw, list(sources), _coordinates(raw) if processors else {}, positions)
    frames: dict[str, DataFrame] = {}
    if compiled.output is not None:
        output = compiled.output.persist()
        cached.append(output)
        frames = _by_topic(compiled, output, driver_config)
    for sink in compiled.sinks:
        frames.setdefault(sink.topic, _empty(spark))
    return Backfill(topology, frames, compiled, end_offsets, cached)


def _check_topics(topology: Topology, sources: Mapping[str, Any]) -> None:
    from pyspark.sql import DataFrame

    for topic, source in sources.items():
        if not isinstance(topic, str):
            raise InvalidTypeError(f"'sources' keys must be topic names (got {topic!r}).")
        if not isinstance(source, (DataFrame, KafkaRange)):
            raise InvalidTypeError(
                f"sources[{topic!r}] must be a DataFrame of key, value, timestamp or a KafkaRange "
                f"(got {type(source).__name__}).")
        if not topology.sources_reading(topic):
            raise InvalidArgumentError(f"sources[{topic!r}]: no source of the topology reads topic {topic!r} "
                                       f"(it reads {', '.join(map(repr, topology.source_topics)) or 'patterns only'}).")
        if isinstance(source, DataFrame):
            absent = [c for c in REQUIRED_COLUMNS if c not in source.columns]
            if absent:
                raise InvalidArgumentError(
                    f"sources[{topic!r}] lacks the column(s) {', '.join(absent)}: a backfill source has the columns "
                    "key, value, timestamp (epoch ms) and optionally partition, offset, headers.")
    missing = [t for t in topology.source_topics if t not in sources]
    if missing:
        raise InvalidArgumentError(
            f"'sources' has no input for topic {missing[0]!r}, which the topology reads: give a DataFrame (an empty one "
            "for no records) or a KafkaRange for every source topic.")


def _raw_records(spark: SparkSession, topology: Topology, sources: Mapping[str, Source],
                 cached: list[DataFrame]) -> tuple[DataFrame, dict[str, dict[int, int]], int]:
    """Every source's records as raw records (`RAW_RECORD_DDL`) in processing order
    (`SOURCE_POSITION`), and how many there are; what it persists on the way is appended to
    ``cached``. Over more than `scan.SCAN_BLOCK` records nothing puts all records into one task:
    the largest timestamp so far of each partition is a parallel prefix scan per block of offsets
    (`scan.running_maxima`), the order one sort over all partitions (`_numbered`); fewer are
    numbered in one window (fewer stages)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    from streamsdsl.compiler.columns import SOURCE_POSITION
    from streamsdsl.compiler import scan

    def cache(df: DataFrame) -> DataFrame:
        df = df.persist()
        cached.append(df)
        return df

    parts, ends = [], {}
    for index, (topic, source) in enumerate(sources.items()):
        if isinstance(source, KafkaRange):
            offsets = source.resolve(topic)
            ends[topic] = {p: e for p, (_, e) in offsets.items()}
            df = source.read(spark, topic, offsets).withColumn("_row", F.lit(0).cast("bigint"))
        else:
            df = _typed_source(topology, topic, source)
        parts.append(df.withColumn("_topic_index", F.lit(index)))
    union = parts[0]
    for df in parts[1:]:
        union = union.unionByName(df)
    union = cache(union)
    positions = union.count()
    large = scan.in_blocks(positions)
    with_offsets = [isinstance(s, KafkaRange) or "offset" in s.columns for s in sources.values()]
    if any(with_offsets) and large:
        # per (topic, partition) in offset order (records without one first), the largest timestamp so far
        block = F.coalesce(F.floor(F.col("offset") / F.lit(scan.SCAN_BLOCK)), F.lit(-1))
        union, _ = scan.running_maxima(union, [F.col("offset").asc_nulls_first()], block,
                                       {"_partition_time": (F.col("timestamp"), True)}, lambda df: df,  # cached
                                       ("topic", "partition"))
        order_time = F.when(F.col("offset").isNull(), F.col("timestamp")).otherwise(F.col("_partition_time"))
        union = union.withColumn("_order_time", order_time).drop("_partition_time")
    elif any(with_offsets):
        in_partition = Window.partitionBy("topic", "partition").orderBy("offset").rowsBetween(
            Window.unboundedPreceding, Window.currentRow)
        union = union.withColumn("_order_time", F.when(F.col("offset").isNull(), F.col("timestamp")).otherwise(
            F.max("timestamp").over(in_partition)))
    else:
        union = union.withColumn("_order_time", F.col("timestamp"))
    order = ["_order_time", "_topic_index", "partition", "offset", "timestamp", "_row"]
    if large:
        union = _numbered(union, order, cache)
    else:
        union = union.withColumn(SOURCE_POSITION, F.row_number().over(Window.orderBy(*order)) - 1)
    if not all(with_offsets):
        # a record without an offset gets its place in its (topic, partition), as the driver numbers them
        if large:  # its place in its block of positions plus the partition's records in the blocks before
            block = F.floor(F.col(SOURCE_POSITION) / F.lit(scan.SCAN_BLOCK))
            union = cache(union.withColumn("_block", block))
            earlier = Window.partitionBy("topic", "partition").orderBy("_block").rowsBetween(Window.unboundedPreceding, -1)
            starts = union.groupBy("topic", "partition", "_block").count().select(
                F.col("topic").alias("_topic"), F.col("partition").alias("_partition"), F.col("_block").alias("_from"),
                F.coalesce(F.sum("count").over(earlier), F.lit(0)).alias("_start"))
            union = union.join(F.broadcast(starts), (union["topic"] == starts["_topic"])
                               & union["partition"].eqNullSafe(starts["_partition"]) & (union["_block"] == starts["_from"]))
            within = Window.partitionBy("topic", "partition", "_block").orderBy(SOURCE_POSITION)
            numbered = F.col("_start") + F.row_number().over(within) - 1
        else:
            numbered = F.row_number().over(Window.partitionBy("topic", "partition").orderBy(SOURCE_POSITION)) - 1
        union = union.withColumn("offset", F.coalesce(F.col("offset"), numbered.cast("bigint")))
    return union.select("key", "value", "topic", "partition", "offset", "timestamp", "headers",
                        F.col(SOURCE_POSITION).cast("bigint").alias(SOURCE_POSITION)), ends, positions


def _numbered(df: DataFrame, order: list[str], cache: Any) -> DataFrame:
    """``df`` with `SOURCE_POSITION`: each row's place in ``order`` from 0 (what ``row_number()``
    over a window of all rows gives, less one), without one task holding all rows: Spark's sort
    ranges the rows over its partitions in order, and a row's place is its place in its partition
    plus the rows of the partitions before it (a table of one row per partition, broadcast)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    from streamsdsl.compiler.columns import SOURCE_POSITION

    rows = df.orderBy(*order).withColumn("_id", F.monotonically_increasing_id())  # partition << 33 | index
    rows = cache(rows.select("*", F.shiftrightunsigned("_id", 33).alias("_part"),
                             F.col("_id").bitwiseAND((1 << 33) - 1).alias("_index")))
    earlier = Window.orderBy("_part").rowsBetween(Window.unboundedPreceding, -1)
    starts = rows.groupBy("_part").count().select(
        "_part", F.coalesce(F.sum("count").over(earlier), F.lit(0)).alias("_start"))
    return rows.join(F.broadcast(starts), "_part").withColumn(
        SOURCE_POSITION, F.col("_start") + F.col("_index")).drop("_id", "_part", "_index", "_start")


def _typed_source(topology: Topology, topic: str, df: DataFrame) -> DataFrame:
    """A DataFrame source as raw records: key and value to bytes with the topic's serdes."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    from streamsdsl.compiler.columns import HEADERS_TYPE
    from streamsdsl.values.serdes import DEFAULT_SERDE

    node = topology.sources_reading(topic)[0]
    fields = {f.name: f.dataType for f in df.schema.fields}
    columns = []
    for what in ("key", "value"):
        serde = getattr(node, f"{what}_serde", None) or DEFAULT_SERDE
        columns.append(_to_bytes(F.col(what), fields[what], serde, topic, what).alias(what))
    ts = fields["timestamp"]
    if isinstance(ts, T.TimestampType | T.TimestampNTZType):
        timestamp = F.unix_millis(F.col("timestamp"))
    elif isinstance(ts, T.IntegralType):
        timestamp = F.col("timestamp").cast("bigint")
    else:
        raise InvalidTypeError(f"sources[{topic!r}]: 'timestamp' must be epoch milliseconds (a long) or a timestamp "
                               f"(got {ts.simpleString()}).")
    return df.select(
        *columns, F.lit(topic).alias("topic"),
        (F.col("partition").cast("int") if "partition" in fields else F.lit(0)).alias("partition"),
        (F.col("offset").cast("bigint") if "offset" in fields else F.lit(None).cast("bigint")).alias("offset"),
        timestamp.alias("timestamp"),
        (F.col("headers") if "headers" in fields else F.array().cast(HEADERS_TYPE)).cast(HEADERS_TYPE).alias("headers"),
        F.monotonically_increasing_id().alias("_row"))


def _to_bytes(col: Column, dtype: Any, serde: Any, topic: str, what: str) -> Column:
    """``col`` as the bytes of ``serde``: bytes as they are, a column of the serde's own Spark type
    natively, anything else by the serde's Python ``serialize`` of each value."""
    from pyspark.sql import types as T

    from streamsdsl.compiler.serde_exprs import serialize_python, serialize_value
    from streamsdsl.values.serdes import BytesSerde, CustomSerde, JsonSerde

    if isinstance(dtype, T.BinaryType | T.NullType):
        return col.cast("binary")
    if not isinstance(serde, JsonSerde | CustomSerde | BytesSerde) and dtype.simpleString() == serde.spark_type:
        return serialize_value(col, serde, serde)
    return serialize_python(col, serde, f"sources[{topic!r}] {what}")


def _coordinates(raw: DataFrame) -> dict[int, tuple[str, int]]:
    """Pipe position → (topic, offset), what a user processor's ``record_metadata()`` reads."""
    from streamsdsl.compiler.columns import SOURCE_POSITION

    return {r[0]: (r[1], r[2]) for r in raw.select(SOURCE_POSITION, "topic", "offset").collect()}


def _final_state(compiled: CompiledTopology) -> ReplayCarry:
    """The state the replay of ``compiled`` ended with (`Backfill.final_state`)."""
    from streamsdsl.compiler.modes import ReplayCarry, native_store
    from streamsdsl.compiler.carry import next_carry
    from streamsdsl.runtime.metrics import observed_metrics

    assert compiled.output is not None
    compiled.output.count()  # (cached) the observations of its run: carried states, stream times
    carry = next_carry(compiled, observed_metrics(compiled.output), ReplayCarry(), 0)
    spark = compiled.output.sparkSession
    states = dict(carry.states)
    for name in carry.native_inputs:
        # a native aggregation (Spark's own, in the replay) has no carried state: its value per
        # key is the one window (0, 0) the operator stores for an unwindowed aggregate
        node, frame = compiled.topology.node(name), compiled.frames[name]
        states[name] = [(r["key"], [(0, 0, r["value"], r["timestamp"], False)])
                        for r in native_store(spark, carry, node, frame.value.spark_type)]
    return ReplayCarry(0, states, carry.stream_times)


def _by_topic(compiled: CompiledTopology, output: DataFrame, config: DriverConfig) -> dict[str, DataFrame]:
    """Each topic's records of the plan's ``output``, in the order the driver reads them."""
    from pyspark.sql import functions as F

    from streamsdsl.compiler.columns import DEAD_LETTER_SINK, FINAL_KEY_ORDER, OUTPUT_POSITION, SINK_INDEX
    from streamsdsl.compiler.columns import SOURCE_POSITION

    indexes: dict[str, list[int]] = {}
    for sink in compiled.sinks:
        indexes.setdefault(sink.topic, []).append(sink.index)
    if config.dead_letter_topic is not None:
        indexes.setdefault(config.dead_letter_topic, []).append(DEAD_LETTER_SINK)
    order = [F.col(SOURCE_POSITION).asc_nulls_first(), F.col(OUTPUT_POSITION).asc_nulls_first(),
             F.col(FINAL_KEY_ORDER).asc_nulls_first(), F.col(SINK_INDEX)]
    return {topic: output.filter(F.col(SINK_INDEX).isin(found)).orderBy(*order)
            .select("key", "value", "timestamp", "headers") for topic, found in indexes.items()}


def _empty(spark: SparkSession) -> DataFrame:
    from streamsdsl.records import RAW_SINK_DDL

    return spark.createDataFrame([], RAW_SINK_DDL)
