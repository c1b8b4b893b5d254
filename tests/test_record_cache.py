"""The record cache as a setting (``statestore.cache.max.bytes``), as in Kafka Streams: with 0
every store write is forwarded; by default the cache is flushed after every record. Each test
runs on both engines of the driver (``make_driver``, the streamsdsl pytest plugin)."""

from __future__ import annotations

from typing import Any

import pytest

from streamsdsl import Consumed, Materialized, Serdes, SessionWindows, StreamsBuilder, TimeWindows
from streamsdsl.runtime.config import DriverConfig, StreamsConfig, StreamsConfigError
from streamsdsl.semantics.kernels import FlushPolicy

pytestmark = pytest.mark.spark

STRINGS = Consumed.with_serdes(Serdes.String(), Serdes.String())
NO_CACHE = {"statestore.cache.max.bytes": 0}


def _sessions(make_driver: Any, config: dict[str, Any] | None, records: list[tuple[str, int]],
              cogroup: bool = False) -> list[tuple[Any, ...]]:
    b = StreamsBuilder()
    grouped = b.stream("in", STRINGS).group_by_key()
    windows = SessionWindows.of_inactivity_gap_and_grace(10, 0)
    if cogroup:
        table = grouped.cogroup(lambda k, v, a: a + 1).windowed_by(windows).aggregate(lambda: 0, lambda k, a, b: a + b)
    else:
        table = grouped.windowed_by(windows).count()
    table.to_stream().to("out")
    with make_driver(b.build(), config) as d:
        topic = d.create_input_topic("in")
        for key, ts in records:
            topic.pipe_input(key, "v", ts)
        return [(r.key.key, r.key.window.start, r.key.window.end, r.value, r.timestamp)
                for r in d.create_output_topic("out").read_records_to_list()]


@pytest.mark.parametrize("cogroup", [False, True], ids=["count", "cogroup"])
def test_no_cache_forwards_the_tombstone_of_a_session_rewritten_in_place(make_driver: Any, cogroup: bool) -> None:
    """A record inside an existing session [0, 10]: Kafka removes the session and puts the merged
    one with the same bounds (KStreamSessionWindowAggregate.process). Without a cache both writes
    are forwarded (the tombstone, then the new count); with the cache only the new count."""
    records = [("a", 0), ("a", 10), ("a", 5)]
    cached = _sessions(make_driver, None, records, cogroup)
    uncached = _sessions(make_driver, NO_CACHE, records, cogroup)
    first = [("a", 0, 0, 1, 0), ("a", 0, 0, None, 0), ("a", 0, 10, 2, 10)]
    assert cached == [*first, ("a", 0, 10, 3, 10)]
    assert uncached == [*first, ("a", 0, 10, None, 10), ("a", 0, 10, 3, 10)]


def test_no_cache_forwards_a_tombstone_for_an_absent_table_key(make_driver: Any) -> None:
    """A materialized table source: a tombstone for a key the table does not hold is forwarded
    without a cache (Kafka's TimestampedTupleForwarder forwards every write) and not with one
    (an unmaterialized source forwards every record either way)."""
    def run(config: dict[str, Any] | None) -> list[tuple[Any, ...]]:
        b = StreamsBuilder()
        b.table("in", STRINGS, materialized=Materialized.as_("table")).to_stream().to("out")
        with make_driver(b.build(), config) as d:
            topic = d.create_input_topic("in")
            topic.pipe_input("a", "x", 1)
            topic.pipe_input("b", None, 2)
            topic.pipe_input("a", None, 3)
            return [(r.key, r.value, r.timestamp) for r in d.create_output_topic("out").read_records_to_list()]

    assert run(None) == [("a", "x", 1), ("a", None, 3)]
    assert run(NO_CACHE) == [("a", "x", 1), ("b", None, 2), ("a", None, 3)]


def test_no_cache_forwards_a_materialized_join_delete_of_an_absent_row(make_driver: Any) -> None:
    """A left table-table join with a materialized result: a left tombstone of a key the left
    table never held, while the right table holds it, gives a null result for a row that never
    existed. The cached store drops that delete; without a cache it is forwarded."""
    def run(config: dict[str, Any] | None) -> list[tuple[Any, ...]]:
        b = StreamsBuilder()
        left, right = b.table("left", STRINGS), b.table("right", STRINGS)
        (left.left_join(right, lambda lv, rv: f"{lv}+{rv}", materialized=Materialized.as_("joined"))
         .to_stream().to("out"))
        with make_driver(b.build(), config) as d:
            d.create_input_topic("right").pipe_input("a", "y", 1)
            d.create_input_topic("left").pipe_input("a", None, 2)
            d.create_input_topic("left").pipe_input("a", "x", 3)
            return [(r.key, r.value, r.timestamp) for r in d.create_output_topic("out").read_records_to_list()]

    assert run(None) == [("a", "x+y", 3)]
    assert run(NO_CACHE) == [("a", None, 2), ("a", "x+y", 3)]


def test_no_cache_filtered_table_forwards_no_change_of_nothing_into_a_join(make_driver: Any) -> None:
    """A KTable.filter before an inner table–table join: a value that fails for a key the
    filter never passed gives no output, cache or not (Kafka's KTableFilter sends old values,
    its parent having a store, and drops a change whose new and old values both fail); a
    value that passed before and then fails deletes the joined row."""
    def run(config: dict[str, Any] | None) -> list[tuple[Any, ...]]:
        b = StreamsBuilder()
        left = b.table("in", STRINGS).filter(lambda k, v: " " not in v)
        left.join(b.table("other", STRINGS), lambda lv, rv: f"{lv}+{rv}").to_stream().to("out")
        with make_driver(b.build(), config) as d:
            d.create_input_topic("other").pipe_input("b", "ab", 14)
            for value, ts in (("x y", 23), ("xy", 24), ("x z", 25)):
                d.create_input_topic("in").pipe_input("b", value, ts)
            return [(r.key, r.value, r.timestamp) for r in d.create_output_topic("out").read_records_to_list()]

    assert run(None) == run(NO_CACHE) == [("b", "xy+ab", 24), ("b", None, 25)]


def test_cogroup_window_another_input_expired_is_kept_by_the_cache_only(make_driver: Any) -> None:
    """A time-windowed cogroup (oracle case 197bb19b1746): stream two's record at 25 expires
    [0, 10) for stream two; stream one's record at 7 is on time for stream one. With the cache,
    Kafka's cache still returns the window and the record adds to it; without it, Kafka's store
    (its time the fastest input's) hides it and the window starts again."""
    def run(config: dict[str, Any] | None) -> list[tuple[Any, ...]]:
        b = StreamsBuilder()
        one, two = b.stream("one", STRINGS).group_by_key(), b.stream("two", STRINGS).group_by_key()
        (one.cogroup(lambda k, v, a: a + 1).cogroup(two, lambda k, v, a: a + 10)
         .windowed_by(TimeWindows.of_size_with_no_grace(10)).aggregate(lambda: 0).to_stream().to("out"))
        with make_driver(b.build(), config) as d:
            for topic, ts in (("two", 5), ("two", 25), ("one", 7)):
                d.create_input_topic(topic).pipe_input("k", "v", ts)
            return [(r.key.window.start, r.value, r.timestamp)
                    for r in d.create_output_topic("out").read_records_to_list()]

    assert run(None) == [(0, 10, 5), (20, 10, 25), (0, 11, 7)]
    assert run(NO_CACHE) == [(0, 10, 5), (20, 10, 25), (0, 1, 7)]


@pytest.mark.parametrize(("grace", "first"), [(5, (0, 1, 7)), (6, (0, 2, 9))])
def test_cogroup_window_hidden_by_the_greatest_window_start_put_without_the_cache(
        make_driver: Any, grace: int, first: tuple[int, int, int]) -> None:
    """A hopping-window cogroup without the cache (size 10, advance 3; oracle case
    2851cd2fc7c6): stream two counts a at 9, stream one c at 17, whose last window starts at 15,
    the store's time. Stream two's record of a at 7, piped in a later run of the driver, is on
    time for stream two. With grace 5 the store hides a's [0, 10) (0 < 15 - 15 + 1), which
    starts again: 1; with grace 6 it does not, whatever the greatest stream time (17): 2."""
    b = StreamsBuilder()
    one, two = b.stream("one", STRINGS).group_by_key(), b.stream("two", STRINGS).group_by_key()
    (one.cogroup(lambda k, v, a: a + 1).cogroup(two, lambda k, v, a: a + 1)
     .windowed_by(TimeWindows.of_size_and_grace(10, grace).advance_by(3)).aggregate(lambda: 0)
     .to_stream().to("out"))
    with make_driver(b.build(), NO_CACHE) as d:
        for topic, key, ts in (("two", "a", 9), ("one", "c", 17)):
            d.create_input_topic(topic).pipe_input(key, "v", ts)
        out = d.create_output_topic("out")
        assert len(out.read_records_to_list()) == 4 + 3
        d.create_input_topic("two").pipe_input("a", "v", 7)
        assert [(r.key.window.start, r.value, r.timestamp) for r in out.read_records_to_list()] == [
            first, (3, 2, 9), (6, 2, 9)]


def test_cogroup_session_the_store_time_closed_is_final_for_every_input(make_driver: Any) -> None:
    """A session-windowed cogroup (gap 2, grace 5; oracle case 234cb66c1139): stream one's
    record at 14, for key b, moves the store's time (the fastest input's) past a's [6, 6];
    stream two's record of a at 4 is on time for stream two and within [6, 6]'s gap, but [6, 6]
    is final: the record starts [4, 4], cache or not (Kafka's uncached store hides [6, 6];
    Kafka's cache merges it without a tombstone, docs/differences.md, Session windows)."""
    def run(config: dict[str, Any] | None) -> list[tuple[Any, ...]]:
        b = StreamsBuilder()
        one, two = b.stream("one", STRINGS).group_by_key(), b.stream("two", STRINGS).group_by_key()
        (one.cogroup(lambda k, v, a: a + v).cogroup(two, lambda k, v, a: a + v.upper())
         .windowed_by(SessionWindows.of_inactivity_gap_and_grace(2, 5))
         .aggregate(lambda: "", lambda k, a, b: a + "|" + b).to_stream().to("out"))
        with make_driver(b.build(), config) as d:
            for topic, key, value, ts in (("one", "a", "x", 6), ("one", "b", "y", 14), ("two", "a", "z", 4)):
                d.create_input_topic(topic).pipe_input(key, value, ts)
            return [(r.key.key, r.key.window.start, r.key.window.end, r.value, r.timestamp)
                    for r in d.create_output_topic("out").read_records_to_list()]

    expected = [("a", 6, 6, "x", 6), ("b", 14, 14, "y", 14), ("a", 4, 4, "Z", 4)]
    assert run(None) == run(NO_CACHE) == expected


@pytest.mark.parametrize("kind", ["outer", "inner"])
def test_map_values_none_of_a_value_reaches_a_join(make_driver: Any, kind: str) -> None:
    """A KTable map_values whose mapper returns None before a table-table join: the source
    holds the key, so Kafka's KTableMapValues forwards Change(None, None) into the join, cache
    or not (oracle case af0946f5be2c): outer joins None with the other side, inner deletes; the
    source's tombstone of the key is forwarded too (the source held it)."""
    def run(config: dict[str, Any] | None) -> list[tuple[Any, ...]]:
        b = StreamsBuilder()
        left = b.table("in", STRINGS).map_values(lambda v: None if v == "x" else v)
        joiner = lambda lv, rv: f"{lv}+{rv}"  # noqa: E731
        right = b.table("other", STRINGS)
        (left.outer_join(right, joiner) if kind == "outer" else left.join(right, joiner)).to_stream().to("out")
        with make_driver(b.build(), config) as d:
            other, inp = d.create_input_topic("other"), d.create_input_topic("in")
            other.pipe_input("a", "x", 53)
            inp.pipe_input("a", "x", 56)
            inp.pipe_input("a", None, 58)
            return [(r.key, r.value, r.timestamp) for r in d.create_output_topic("out").read_records_to_list()]

    expected = {"outer": [("a", "None+x", 53), ("a", "None+x", 56), ("a", "None+x", 58)],
                "inner": [("a", None, 56), ("a", None, 58)]}[kind]
    assert run(None) == run(NO_CACHE) == expected


def _chars_counted(make_driver: Any, config: dict[str, Any] | None, rekey: bool) -> list[tuple[Any, ...]]:
    """Each value's characters counted per key in hopping windows (size 10, advance 5):
    ``flat_map_values`` (same sub-topology) or a key-changing ``flat_map`` (a repartition)."""
    b = StreamsBuilder()
    stream = b.stream("in", STRINGS)
    if rekey:
        stream = stream.flat_map(lambda k, v: [(k, c) for c in v])
    else:
        stream = stream.flat_map_values(list)
    windows = TimeWindows.of_size_with_no_grace(10).advance_by(5)
    stream.group_by_key().windowed_by(windows).count().to_stream().to("out")
    with make_driver(b.build(), config) as d:
        topic = d.create_input_topic("in")
        topic.pipe_input("a", "xyz", 7)
        topic.pipe_input("a", "pq", 8)
        return [(r.key.key, r.key.window.start, r.value, r.timestamp)
                for r in d.create_output_topic("out").read_records_to_list()]


class TestOneFlushPerInputRecord:
    """Kafka's TopologyTestDriver commits, and so flushes the record cache, once per record its
    task processes: the source record with everything it causes in its sub-topology, or one
    record of a repartition topic."""

    def test_flat_map_values_forwards_each_window_once_per_input_record(self, make_driver: Any) -> None:
        """The three characters of "xyz" update windows [0, 10) and [5, 15) three times each:
        with the cache each window is forwarded once, with its last count; without it every write."""
        assert _chars_counted(make_driver, None, rekey=False) == [
            ("a", 0, 3, 7), ("a", 5, 3, 7), ("a", 0, 5, 8), ("a", 5, 5, 8)]
        assert _chars_counted(make_driver, NO_CACHE, rekey=False) == [
            ("a", s, n, 7) for n in (1, 2, 3) for s in (0, 5)] + [("a", s, n, 8) for n in (4, 5) for s in (0, 5)]

    def test_records_through_a_repartition_are_flushed_one_by_one(self, make_driver: Any) -> None:
        """A key-changing flat_map writes to a repartition topic; the task processes and commits
        each of its records apart, so every update is forwarded, cache or not."""
        every = [("a", s, n, 7) for n in (1, 2, 3) for s in (0, 5)] + [("a", s, n, 8) for n in (4, 5) for s in (0, 5)]
        assert _chars_counted(make_driver, None, rekey=True) == every
        assert _chars_counted(make_driver, NO_CACHE, rekey=True) == every


class TestConfig:
    def test_deprecated_name_and_the_flush_policy(self) -> None:
        """``cache.max.bytes.buffering`` is the deprecated name; 0 means every write is forwarded,
        any other size (or none) a cache flushed after every record."""
        assert DriverConfig.from_mapping({"cache.max.bytes.buffering": "0"}).flush is FlushPolicy.EVERY_WRITE
        assert DriverConfig.from_mapping({"statestore.cache.max.bytes": 10_485_760}).flush is FlushPolicy.PER_RECORD
        assert DriverConfig.from_mapping({}).flush is FlushPolicy.PER_RECORD

    def test_disagreeing_names_and_a_negative_size_are_refused(self) -> None:
        """Both names with different sizes, or a negative size, name the key and the fix."""
        with pytest.raises(StreamsConfigError) as caught:
            DriverConfig.from_mapping({"statestore.cache.max.bytes": 0, "cache.max.bytes.buffering": 100})
        assert str(caught.value) == ("'statestore.cache.max.bytes' (0) and its deprecated name "
                                     "'cache.max.bytes.buffering' (100) disagree; set only 'statestore.cache.max.bytes'.")
        with pytest.raises(StreamsConfigError, match=r"^'statestore.cache.max.bytes' must be an integer >= 0 \(got -1\)"):
            DriverConfig.from_mapping({"statestore.cache.max.bytes": -1})

    def test_streaming_config_takes_the_setting(self) -> None:
        """A streaming application's configuration takes it too: 0 forwards every write, unset
        the net change per micro-batch."""
        base = {"application.id": "a", "bootstrap.servers": "k:9092"}
        assert StreamsConfig.from_mapping({**base, "statestore.cache.max.bytes": 0}).flush is FlushPolicy.EVERY_WRITE
        assert StreamsConfig.from_mapping(base).flush is FlushPolicy.PER_RECORD


class TestStreaming:
    """The setting on a streaming query: one micro-batch holds every record."""

    def _run(self, spark: Any, tmp_path: Any, flush: FlushPolicy, build: Any) -> list[tuple[Any, ...]]:
        from tests._support import Collect
        from streamsdsl.records import RAW_RECORD_DDL
        from streamsdsl.runtime.streaming import start_streaming

        b = StreamsBuilder()
        build(b)
        rows = [(b"a", b"v", "in", 0, i, ts, []) for i, ts in enumerate((0, 10, 5))]
        directory = tmp_path / "in"
        spark.createDataFrame(rows, RAW_RECORD_DDL).write.parquet(str(directory))
        sink = Collect()
        query, _, _ = start_streaming(
            b.build(), lambda node: spark.readStream.schema(RAW_RECORD_DDL).parquet(str(directory)), sink,
            checkpoint_location=str(tmp_path / "checkpoint"), trigger={"availableNow": True}, flush=flush)
        query.awaitTermination()
        return [(k, v, ts) for _, k, v, ts in sink.records]

    def test_no_cache_forwards_every_write_of_one_micro_batch(self, spark: Any, tmp_path: Any) -> None:
        """Three records of one key in one micro-batch (sessions [0], [10], then 5 rewrites
        [0, 10]): without a cache every write is forwarded; with the cache the net change."""
        def sessions(b: StreamsBuilder) -> None:
            (b.stream("in", STRINGS).group_by_key().windowed_by(SessionWindows.of_inactivity_gap_and_grace(10, 0))
             .count().to_stream().map(lambda k, v: (f"{k.key}@{k.window.start}/{k.window.end}", v)).to("out"))

        every = self._run(spark, tmp_path / "every", FlushPolicy.EVERY_WRITE, sessions)
        net = self._run(spark, tmp_path / "net", FlushPolicy.PER_RECORD, sessions)
        assert every == [("a@0/0", 1, 0), ("a@0/0", None, 0), ("a@0/10", 2, 10), ("a@0/10", None, 10),
                         ("a@0/10", 3, 10)]
        assert net == [("a@0/10", 3, 10)]

    def test_no_cache_count_runs_on_the_operator(self, spark: Any, tmp_path: Any) -> None:
        """An unwindowed count forwards each record's count without a cache (Spark's own
        aggregation would forward only the batch's last)."""
        def counts(b: StreamsBuilder) -> None:
            b.stream("in", STRINGS).group_by_key().count().to_stream().to("out")

        assert self._run(spark, tmp_path / "every", FlushPolicy.EVERY_WRITE, counts) == [
            ("a", 1, 0), ("a", 2, 10), ("a", 3, 10)]
        assert self._run(spark, tmp_path / "net", FlushPolicy.PER_RECORD, counts) == [("a", 3, 10)]
