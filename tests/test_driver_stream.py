"""Every KStream / KTable operation through the TopologyTestDriver, with exact output records."""

from __future__ import annotations

import re
from typing import Any

import pytest
from pyspark.sql import functions as F

from streamsdsl import Consumed, Grouped, Materialized, Produced, RecordDeserializationError, RecordSerializationError
from streamsdsl import Serdes, StreamsBuilder, TestRecord
from streamsdsl.runtime.driver import TopologyTestDriver
from streamsdsl.runtime.errors import IllegalStateError

pytestmark = pytest.mark.spark

R = TestRecord
INPUT = [("a", "apple", 10), ("b", "banana", 20), ("a", "avocado", 30), (None, "nokey", 40)]


def _strings() -> Consumed:
    return Consumed.with_serdes(Serdes.String(), Serdes.String())


class TestStatelessOperations:
    def test_filter_python(self, run_driver: Any) -> None:
        """filter keeps records whose predicate(key, value) is true, in order, with timestamps."""
        b = StreamsBuilder()
        b.stream("in", _strings()).filter(lambda k, v: v.startswith("a")).to("out")
        assert run_driver(b.build(), INPUT) == [R("a", "apple", 10), R("a", "avocado", 30)]

    @pytest.mark.spark_engine("pyspark Column expressions")
    def test_filter_column(self, run_driver: Any) -> None:
        """A Spark Column predicate compiles natively."""
        b = StreamsBuilder()
        b.stream("in", _strings()).filter(F.length("value") > 5).to("out")
        assert run_driver(b.build(), INPUT) == [R("b", "banana", 20), R("a", "avocado", 30)]

    def test_filter_not(self, run_driver: Any) -> None:
        """filter_not keeps records whose predicate is false."""
        b = StreamsBuilder()
        b.stream("in", _strings()).filter_not(lambda k, v: v.startswith("a")).to("out")
        assert run_driver(b.build(), INPUT) == [R("b", "banana", 20), R(None, "nokey", 40)]

    def test_map_values_python_changes_type(self, run_driver: Any) -> None:
        """map_values sees plain Python values; results are JSON by default, Long when produced so."""
        b = StreamsBuilder()
        b.stream("in", _strings()).map_values(len).to("out", Produced.with_serdes(Serdes.String(), Serdes.Long()))
        assert run_driver(b.build(), INPUT) == [
            R("a", 5, 10), R("b", 6, 20), R("a", 7, 30), R(None, 5, 40),
        ]

    @pytest.mark.spark_engine("pyspark Column expressions")
    def test_map_values_column(self, run_driver: Any) -> None:
        """A Column mapper keeps its Spark type (here string), compiled natively."""
        b = StreamsBuilder()
        b.stream("in", _strings()).map_values(F.upper("value")).to("out")
        assert run_driver(b.build(), INPUT[:2]) == [R("a", "APPLE", 10), R("b", "BANANA", 20)]

    def test_map_values_to_dict(self, run_driver: Any) -> None:
        """Python values that are dicts travel as JSON."""
        b = StreamsBuilder()
        b.stream("in", _strings()).map_values(lambda v: {"fruit": v, "n": len(v)}).to("out")
        assert run_driver(b.build(), INPUT[:1]) == [R("a", {"fruit": "apple", "n": 5}, 10)]

    def test_map(self, run_driver: Any) -> None:
        """map replaces key and value."""
        b = StreamsBuilder()
        b.stream("in", _strings()).map(lambda k, v: (v[0].upper(), f"{k}:{v}")).to("out")
        assert run_driver(b.build(), INPUT[:3]) == [
            R("A", "a:apple", 10), R("B", "b:banana", 20), R("A", "a:avocado", 30),
        ]

    def test_flat_map(self, run_driver: Any) -> None:
        """flat_map emits zero or more records per input, in the order returned."""
        b = StreamsBuilder()
        b.stream("in", _strings()).flat_map(lambda k, v: [(k, c) for c in v[:2]] if k != "b" else []).to("out")
        assert run_driver(b.build(), INPUT[:3]) == [
            R("a", "a", 10), R("a", "p", 10), R("a", "a", 30), R("a", "v", 30),
        ]

    def test_flat_map_values(self, run_driver: Any) -> None:
        """flat_map_values keeps the key and emits one record per value."""
        b = StreamsBuilder()
        b.stream("in", _strings()).flat_map_values(lambda v: v.split("n")).to("out")
        assert run_driver(b.build(), INPUT[1:2]) == [R("b", "ba", 20), R("b", "a", 20), R("b", "a", 20)]

    def test_select_key(self, run_driver: Any) -> None:
        """select_key sets the key from (key, value)."""
        b = StreamsBuilder()
        b.stream("in", _strings()).select_key(lambda k, v: v[:2]).to("out")
        assert run_driver(b.build(), INPUT[:2]) == [R("ap", "apple", 10), R("ba", "banana", 20)]

    @pytest.mark.spark_engine("pyspark Column expressions")
    def test_select_key_column(self, run_driver: Any) -> None:
        """A Column key selector compiles natively."""
        b = StreamsBuilder()
        b.stream("in", _strings()).select_key(F.substring("value", 1, 1)).to("out")
        assert run_driver(b.build(), INPUT[:2]) == [R("a", "apple", 10), R("b", "banana", 20)]

    def test_peek(self, run_driver: Any, tmp_path: Any) -> None:
        """peek forwards records unchanged and runs the action (here: appending to a file)."""
        log = tmp_path / "peek.log"

        def action(k: Any, v: Any) -> None:
            with open(log, "a") as f:
                f.write(f"{k}={v}\n")

        b = StreamsBuilder()
        b.stream("in", _strings()).peek(action).to("out")
        assert run_driver(b.build(), INPUT[:2]) == [R("a", "apple", 10), R("b", "banana", 20)]
        assert sorted(log.read_text().splitlines()) == ["a=apple", "b=banana"]

    def test_merge(self, run_driver: Any) -> None:
        """merge forwards the records of both streams, in pipe order."""
        b = StreamsBuilder()
        left = b.stream("left", _strings())
        right = b.stream("right", _strings()).map_values(str.upper)
        left.merge(right).to("out")
        records = [("left", "a", "x", 1), ("right", "b", "y", 2), ("left", "c", "z", 3)]
        assert run_driver(b.build(), records) == [R("a", "x", 1), R("b", "Y", 2), R("c", "z", 3)]

    def test_multiple_topics_one_source(self, run_driver: Any) -> None:
        """stream([t1, t2]) reads both topics."""
        b = StreamsBuilder()
        b.stream(["t1", "t2"], _strings()).to("out")
        assert run_driver(b.build(), [("t2", "k", "v2", 5), ("t1", "k", "v1", 6)]) == [R("k", "v2", 5), R("k", "v1", 6)]

    def test_branches_to_two_topics(self, spark: Any) -> None:
        """Two branches of one stage write independently to two topics."""
        b = StreamsBuilder()
        s = b.stream("in", _strings())
        s.filter(lambda k, v: k == "a").to("as")
        s.filter(lambda k, v: k != "a").to("others")
        with TopologyTestDriver(b.build(), spark=spark) as d:
            i = d.create_input_topic("in")
            for k, v, ts in INPUT:
                i.pipe_input(k, v, ts)
            assert d.create_output_topic("as").read_values_to_list() == ["apple", "avocado"]
            assert d.create_output_topic("others").read_key_values_to_list() == [("b", "banana"), (None, "nokey")]

    def test_headers_are_forwarded(self, spark: Any) -> None:
        """Record headers travel with the record."""
        b = StreamsBuilder()
        b.stream("in", _strings()).map_values(str.upper).to("out")
        with TopologyTestDriver(b.build(), spark=spark) as d:
            d.create_input_topic("in").pipe_input(R("k", "v", 7, {"trace": b"abc"}))
            assert d.create_output_topic("out").read_record() == R("k", "V", 7, [("trace", b"abc")])

    def test_user_function_error_names_processor(self, run_driver: Any) -> None:
        """An exception in a user function fails the read with a UserFunctionError naming the
        processor, the record and the cause (the Spark error chained)."""
        from streamsdsl.errors import UserFunctionError

        b = StreamsBuilder()
        b.stream("in", _strings()).map_values(lambda v: 1 // 0, name="divide").to("out")
        with pytest.raises(UserFunctionError) as caught:
            run_driver(b.build(), INPUT[:1])
        assert str(caught.value) == ("divide: the mapper raised ZeroDivisionError: integer division or modulo by zero "
                                     "(record at topic in partition 0 offset 0, key 'a')")
        assert caught.value.__cause__ is not None

    def test_bad_bytes_name_topic_partition_offset(self, spark: Any) -> None:
        """A record the source serde cannot read fails with topic, partition and offset named."""
        b = StreamsBuilder()
        b.stream("in", Consumed.with_serdes(Serdes.String(), Serdes.Long())).to("out")
        with TopologyTestDriver(b.build(), spark=spark) as d:
            d.create_input_topic("in", value_serde=Serdes.String()).pipe_input("k", "not a long", 1)
            with pytest.raises(RecordDeserializationError, match=r"^KSTREAM-SOURCE-0000000000: Serdes.Long\(\) cannot "
                                                                 r"deserialize the record value: expected 8 bytes, got 10"):
                d.create_output_topic("out").read_records_to_list()


class TestDriverApi:
    def test_output_topic_reads(self, spark: Any) -> None:
        """read_record / read_key_value / read_value / sizes behave as Kafka's TestOutputTopic."""
        b = StreamsBuilder()
        b.stream("in", _strings()).to("out")
        with TopologyTestDriver(b.build(), spark=spark) as d:
            i = d.create_input_topic("in", start_timestamp=1000, auto_advance_ms=5)
            i.pipe_key_value_list([("a", "1"), ("b", "2"), ("c", "3")])
            i.pipe_input("only-value")
            o = d.create_output_topic("out")
            assert o.get_queue_size() == 4 and not o.is_empty()
            assert o.read_record() == R("a", "1", 1000)
            assert o.read_key_value() == ("b", "2")
            assert o.read_value() == "3"
            assert o.read_records_to_list() == [R(None, "only-value", 1015)]
            assert o.is_empty()
            with pytest.raises(LookupError, match="Empty topic: out"):
                o.read_record()
            i.pipe_record_list([R("d", "4", 1)])
            assert o.read_key_values_to_list() == [("d", "4")]

    def test_read_key_values_to_map_as_kafka(self) -> None:
        """Kafka's readKeyValuesToMap: the latest value per key, a tombstone's key kept with
        ``None``; a record without a key fails, naming the topic and the method that reads it."""
        b = StreamsBuilder()
        b.stream("in", _strings()).to("out")
        with TopologyTestDriver(b.build()) as d:
            i, o = d.create_input_topic("in"), d.create_output_topic("out")
            i.pipe_key_value_list([("a", "1"), ("b", "2"), ("a", "3"), ("b", None)])
            assert o.read_key_values_to_map() == {"a": "3", "b": None}
            i.pipe_key_value_list([("c", "4"), (None, "5"), ("d", "6")])
            with pytest.raises(IllegalStateError, match=r"^Null keys not allowed with read_key_values_to_map "
                                                        r"\(topic 'out'\): read its records with "):
                o.read_key_values_to_map()
            assert o.read_key_values_to_list() == [("d", "6")]  # the records before it were read

    def test_unknown_topics(self, spark: Any) -> None:
        """Unknown input/output topics are rejected with the topology's topics listed."""
        from streamsdsl import TopologyError

        b = StreamsBuilder()
        b.stream("in").to("out")
        with TopologyTestDriver(b.build(), spark=spark) as d:
            with pytest.raises(TopologyError, match=r"Unknown topic 'nope': the topology reads \['in'\]"):
                d.create_input_topic("nope")
            with pytest.raises(TopologyError, match=r"Unknown topic 'x': the topology writes \['out'\]"):
                d.create_output_topic("x")


class TestAggregations:
    def test_count(self, run_driver: Any) -> None:
        """count: native Spark aggregation; one update per record, ts = max record ts so far;
        null keys dropped and counted."""
        b = StreamsBuilder()
        b.stream("in", _strings()).group_by_key().count().to_stream().to("out")
        records = [("a", "x", 10), ("b", "y", 5), ("a", "z", 3), (None, "n", 50), ("a", None, 60)]
        out, metrics = run_driver(b.build(), records, with_metrics=True)
        assert out == [R("a", 1, 10), R("b", 1, 5), R("a", 2, 10)]
        assert metrics["dropped-records-total"] == 2.0

    def test_count_after_a_key_change_counts_the_drops_of_both_points(self, run_driver: Any) -> None:
        """group_by a new key, then count: the repartition drops a record whose new key is null,
        the aggregation one whose value is null; both are counted (on Spark, one observation
        of both points, read back as the two)."""
        b = StreamsBuilder()
        (b.stream("in", _strings()).group_by(lambda k, v: None if k == "drop" else k.upper()).count()
         .to_stream().to("out"))
        records = [("a", "x", 10), ("drop", "y", 5), ("b", None, 7), ("a", "z", 3), ("drop", "w", 50)]
        out, metrics = run_driver(b.build(), records, with_metrics=True)
        assert out == [R("A", 1, 10), R("A", 2, 10)]
        assert metrics["dropped-records-total"] == 3.0

    def test_reduce_python(self, run_driver: Any) -> None:
        """reduce(reducer(agg, value)) with a Python function (stateful operator)."""
        b = StreamsBuilder()
        b.stream("in", _strings()).group_by_key().reduce(lambda agg, v: agg + "+" + v).to_stream().to("out")
        out, metrics = run_driver(b.build(), INPUT, with_metrics=True)
        assert out == [R("a", "apple", 10), R("b", "banana", 20), R("a", "apple+avocado", 30)]
        assert metrics["dropped-records-total"] == 1.0

    @pytest.mark.spark_engine("pyspark Column expressions")
    def test_reduce_column(self, run_driver: Any) -> None:
        """reduce given as a Spark aggregate Column compiles natively."""
        b = StreamsBuilder()
        b.stream("in", Consumed.with_serdes(Serdes.String(), Serdes.Long())).group_by_key().reduce(
            F.max("value")
        ).to_stream().to("out")
        records = [("a", 3, 1), ("a", 1, 2), ("a", 7, 3), ("b", 2, 4)]
        assert run_driver(b.build(), records) == [R("a", 3, 1), R("a", 3, 2), R("a", 7, 3), R("b", 2, 4)]

    def test_aggregate_python(self, run_driver: Any) -> None:
        """aggregate(initializer, aggregator(key, value, agg)): output type differs from input."""
        b = StreamsBuilder()
        (
            b.stream("in", _strings())
            .group_by_key()
            .aggregate(lambda: {"n": 0, "chars": 0}, lambda k, v, a: {"n": a["n"] + 1, "chars": a["chars"] + len(v)})
            .to_stream()
            .to("out")
        )
        records = [("a", "xx", 10), ("a", "yyy", 5), ("b", "z", 7)]
        assert run_driver(b.build(), records) == [
            R("a", {"n": 1, "chars": 2}, 10), R("a", {"n": 2, "chars": 5}, 10), R("b", {"n": 1, "chars": 1}, 7),
        ]

    @pytest.mark.spark_engine("pyspark Column expressions")
    def test_aggregate_column(self, run_driver: Any) -> None:
        """aggregate(None, F.sum('value')) compiles natively."""
        b = StreamsBuilder()
        b.stream("in", Consumed.with_serdes(Serdes.String(), Serdes.Long())).group_by_key().aggregate(
            None, F.sum("value")
        ).to_stream().to("out", Produced.with_serdes(Serdes.String(), Serdes.Long()))
        records = [("a", 3, 1), ("b", 1, 2), ("a", 7, 3)]
        assert run_driver(b.build(), records) == [R("a", 3, 1), R("b", 1, 2), R("a", 10, 3)]

    def test_group_by_changes_key(self, run_driver: Any) -> None:
        """group_by(selector) regroups by the new key (a repartition in Kafka Streams)."""
        b = StreamsBuilder()
        b.stream("in", _strings()).group_by(lambda k, v: v[0], Grouped.with_serdes(Serdes.String(), None)).count(
            materialized=Materialized.as_("by-letter")
        ).to_stream().to("out")
        assert run_driver(b.build(), INPUT) == [R("a", 1, 10), R("b", 1, 20), R("a", 2, 30), R("n", 1, 40)]

    def test_ktable_filter_emits_tombstones(self, run_driver: Any) -> None:
        """KTable.filter forwards a tombstone for a key whose new value fails the predicate."""
        b = StreamsBuilder()
        b.stream("in", _strings()).group_by_key().count().filter(lambda k, n: n % 2 == 1).to_stream().to("out")
        records = [("a", "x", 1), ("a", "x", 2), ("a", "x", 3)]
        assert run_driver(b.build(), records) == [R("a", 1, 1), R("a", None, 2), R("a", 3, 3)]

    @pytest.mark.spark_engine("pyspark Column expressions")
    def test_ktable_filter_not_and_column(self, run_driver: Any) -> None:
        """filter_not and a Column predicate on a table."""
        b = StreamsBuilder()
        b.stream("in", _strings()).group_by_key().count().filter_not(F.col("value") > 1).to_stream().to("out")
        assert run_driver(b.build(), [("a", "x", 1), ("a", "x", 2)]) == [R("a", 1, 1), R("a", None, 2)]

    def test_ktable_map_values(self, run_driver: Any) -> None:
        """KTable.map_values maps values; tombstones stay tombstones."""
        b = StreamsBuilder()
        table = b.stream("in", _strings()).group_by_key().count()
        table.filter(lambda k, n: n < 2).map_values(lambda n: f"count={n}").to_stream().to("out")
        records = [("a", "x", 1), ("a", "x", 2)]
        assert run_driver(b.build(), records) == [R("a", "count=1", 1), R("a", None, 2)]

    def test_incremental_reads(self, spark: Any) -> None:
        """Output is delivered as records are piped: reading twice yields only new records."""
        b = StreamsBuilder()
        b.stream("in", _strings()).group_by_key().count().to_stream().to("out")
        with TopologyTestDriver(b.build(), spark=spark) as d:
            i, o = d.create_input_topic("in"), d.create_output_topic("out")
            i.pipe_input("a", "x", 1)
            assert o.read_records_to_list() == [R("a", 1, 1)]
            i.pipe_input("a", "y", 2)
            i.pipe_input("b", "y", 2)
            assert o.read_records_to_list() == [R("a", 2, 2), R("b", 1, 2)]
            assert o.read_records_to_list() == []


class TestSelectedKeys:
    """A key selector's result is written with the key serde of the repartition it feeds, as
    Kafka Streams writes the selected key to the repartition topic with ``Grouped``'s serde."""

    def test_a_key_only_the_grouped_serde_can_write(self, run_driver: Any) -> None:
        """A key JSON cannot hold (a ``date``) is grouped with a serde that writes it."""
        import datetime

        class Day:
            def serialize(self, day: Any) -> bytes:
                return day.isoformat().encode()

            def deserialize(self, data: bytes) -> Any:
                return datetime.date.fromisoformat(data.decode())

        b = StreamsBuilder()
        days = b.stream("in", _strings()).group_by(lambda k, v: datetime.date(2026, 1, int(v)),
                                                    Grouped.with_serdes(Day(), Serdes.String()))
        days.count().to_stream().to("out", Produced.with_serdes(Day(), Serdes.Long()))
        records = [("a", "3", 1), ("b", "4", 2), ("c", "3", 5)]
        out = run_driver(b.build(), records, key_serde=Day(), value_serde=Serdes.Long())
        day = datetime.date
        assert out == [R(day(2026, 1, 3), 1, 1), R(day(2026, 1, 4), 1, 2), R(day(2026, 1, 3), 2, 5)]

    def test_a_key_the_grouped_serde_cannot_write_names_the_selector(self, run_driver: Any) -> None:
        b = StreamsBuilder()
        lengths = b.stream("in", _strings()).group_by(lambda k, v: len(v),
                                                      Grouped.with_serdes(Serdes.String(), Serdes.String()))
        lengths.count().to_stream().to("out")
        message = ("KSTREAM-KEY-SELECT-0000000001: the key selector returned a result its serde cannot hold: "
                   "Serdes.String() holds str values (got int: 3).")
        with pytest.raises(RecordSerializationError, match=re.escape(message)):
            run_driver(b.build(), [("a", "xyz", 1)])


class TestDeserializationHandlers:
    def test_log_and_continue_skips_counts_and_dead_letters(self, spark: Any) -> None:
        """log_and_continue: bad records are skipped (never crash, never vanish): counted in
        dropped-records-total and written raw to the dead-letter topic with error headers."""
        b = StreamsBuilder()
        b.stream("in", Consumed.with_serdes(Serdes.String(), Serdes.Long())).group_by_key().count().to_stream().to("out")
        config = {"default.deserialization.exception.handler": "log_and_continue", "errors.dead.letter.topic": "dlq"}
        with TopologyTestDriver(b.build(), config, spark=spark) as d:
            raw = d.create_input_topic("in", Serdes.String(), Serdes.Bytes())
            raw.pipe_input("a", Serdes.Long().serialize(1), 1)
            raw.pipe_input("a", b"oops", 2)
            raw.pipe_input("b", Serdes.Long().serialize(2), 3)
            assert d.create_output_topic("out").read_records_to_list() == [R("a", 1, 1), R("b", 1, 3)]
            dead = d.create_output_topic("dlq").read_records_to_list()
            assert d.metrics()["dropped-records-total"] == 1.0
        assert dead == [
            R(b"a", b"oops", 2, [
                ("__streams.errors.exception", b"org.apache.kafka.common.errors.SerializationException"),
                ("__streams.errors.message", b"Serdes.Long() cannot deserialize the record value: expected 8 bytes, got 4"),
                ("__streams.errors.topic", b"in"),
                ("__streams.errors.partition", b"0"),
                ("__streams.errors.offset", b"1"),
            ])
        ]

    def test_unknown_handler_rejected(self, spark: Any) -> None:
        """An unknown handler name is a clear configuration error when the driver is created."""
        from streamsdsl.runtime.config import StreamsConfigError as InvalidArgumentError

        b = StreamsBuilder()
        b.stream("in").to("out")
        with pytest.raises(InvalidArgumentError, match="'default.deserialization.exception.handler' must be "
                                                       "'log_and_fail' or 'log_and_continue' \\(got 'ignore'\\)"):
            TopologyTestDriver(b.build(), {"default.deserialization.exception.handler": "ignore"}, spark=spark)


class TestDirectEngineRefusals:
    def test_a_column_expression_is_refused_naming_the_node_and_the_fix(self, spark: Any) -> None:
        """The direct engine has no Spark to evaluate a pyspark Column: it refuses the topology
        when the driver is created, naming the node, the Column and both fixes."""
        from streamsdsl import OperationNotDefinedError

        b = StreamsBuilder()
        b.stream("in", _strings()).filter(F.col("value") != "x").to("out")
        with pytest.raises(OperationNotDefinedError) as caught:
            TopologyTestDriver(b.build(), engine="direct")
        message = str(caught.value)
        assert message.startswith("KSTREAM-FILTER-0000000001: a pyspark Column expression (")
        assert message.endswith("needs Spark to evaluate it, and the test driver's direct engine runs without Spark. Run "
                                "this topology with TopologyTestDriver(..., engine=\"spark\") (or "
                                "STREAMSDSL_TEST_ENGINE=spark), or pass a Python function instead of the Column.")

    def test_an_unknown_engine_names_the_choices(self) -> None:
        """engine= takes 'direct', 'spark' or 'streaming'; anything else says what each means."""
        from streamsdsl import InvalidArgumentError

        b = StreamsBuilder()
        b.stream("in", _strings()).to("out")
        with pytest.raises(InvalidArgumentError) as caught:
            TopologyTestDriver(b.build(), engine="flink")
        assert str(caught.value) == ("'engine' must be 'direct' (in the test process, no Spark), 'spark' (the "
                                     "compiled Spark plan) or 'streaming' (the compiled plan as a streaming query, "
                                     "a micro-batch per record) (got 'flink').")
