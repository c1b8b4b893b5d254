"""One error model: a failure while a record is processed reaches the test driver's user as a
StreamsDslError whose message names the processor, the record and the cause; records piped
before it keep their output, and the error is raised once."""

from __future__ import annotations

from typing import Any

import pytest

from streamsdsl import Consumed, Produced, RecordDeserializationError, RecordSerializationError, SerializationError
from streamsdsl import KeyValue, Serdes, SessionWindows, StreamsBuilder, StreamsDslError
from streamsdsl.errors import UserFunctionError
from streamsdsl.runtime.driver import TopologyTestDriver

pytestmark = pytest.mark.spark

STRINGS = Consumed.with_serdes(Serdes.String(), Serdes.String())


def _fail(value: Any) -> Any:
    if value == "bad":
        raise ZeroDivisionError("division by zero")
    return value


def _pipe_and_read(spark: Any, topology: Any, records: list[tuple[str, str, int]], engine: str | None = None
                   ) -> tuple[Any, list[Any]]:
    """Pipe ``records``, read "out"; return the error raised and the records read before/after."""
    with TopologyTestDriver(topology, spark=spark, **({"engine": engine} if engine else {})) as d:
        i, o = d.create_input_topic("in"), d.create_output_topic("out")
        for k, v, ts in records:
            i.pipe_input(k, v, ts)
        with pytest.raises(StreamsDslError) as caught:
            o.read_records_to_list()
        after = [(r.key, r.value) for r in o.read_records_to_list()]  # no second raise
    return caught.value, after


class TestRecordErrors:
    def test_stateless_function(self, spark: Any) -> None:
        """A mapper that raises: processor, record coordinates, key and cause in the message; the
        record before it keeps its output and the error is raised once."""
        b = StreamsBuilder()
        b.stream("in", STRINGS).map_values(_fail).to("out")
        error, after = _pipe_and_read(spark, b.build(), [("k1", "good", 1), ("k2", "bad", 2)])
        assert isinstance(error, UserFunctionError)
        assert str(error) == ("KSTREAM-MAPVALUES-0000000001: the mapper raised ZeroDivisionError: division by zero "
                              "(record at topic in partition 0 offset 1, key 'k2')")
        assert isinstance(error.__cause__, Exception)
        assert after == [("k1", "good")]

    @pytest.mark.spark_engine("a Column after the step: the Spark plan, which Spark's optimizer could reorder")
    @pytest.mark.parametrize("step", ["map_values", "map", "select_key", "filter"])
    def test_function_runs_before_a_later_column_filter(self, spark: Any, step: str) -> None:
        """A Python step runs for every record that reaches it, even when a later step's
        `Column` filter drops them all: Spark's optimizer neither pushes that filter below the
        step nor prunes its result (Kafka Streams calls the function, and its error is raised)."""
        from pyspark.sql import functions as F

        b = StreamsBuilder()
        stream = b.stream("in", STRINGS)
        applied = {"map_values": lambda s: s.map_values(_fail),
                   "map": lambda s: s.map(lambda k, v: (k, _fail(v))),
                   "select_key": lambda s: s.select_key(lambda k, v: _fail(v)),
                   "filter": lambda s: s.filter(lambda k, v: _fail(v) == "good")}[step](stream)
        applied.filter(F.col("timestamp") < 0).to("out")
        error, after = _pipe_and_read(spark, b.build(), [("k1", "good", 1), ("k2", "bad", 2)], engine="spark")
        assert isinstance(error, UserFunctionError)
        assert "ZeroDivisionError: division by zero (record at topic in partition 0 offset 1, key 'k2')" in str(error)
        assert after == []

    def test_metrics_and_queue_size_do_not_reraise(self, spark: Any) -> None:
        """After the read that raised, get_queue_size(), metrics() and a further read answer
        (the error is raised once), and the driver goes on with records piped after it."""
        b = StreamsBuilder()
        b.stream("in", STRINGS).map_values(_fail).to("out")
        with TopologyTestDriver(b.build(), spark=spark) as d:
            i, o = d.create_input_topic("in"), d.create_output_topic("out")
            i.pipe_input("k1", "good", 1)
            i.pipe_input("k2", "bad", 2)
            with pytest.raises(UserFunctionError):
                o.read_records_to_list()
            assert d.metrics()["dropped-records-total"] == 0.0
            assert o.get_queue_size() == 1
            assert o.read_key_values_to_list() == [KeyValue("k1", "good")]
            i.pipe_input("k3", "fine", 3)
            assert o.get_queue_size() == 1
            assert d.metrics()["dropped-records-total"] == 0.0

    def test_aggregator(self, spark: Any) -> None:
        """An aggregator that raises is named as the aggregator of its processor."""
        b = StreamsBuilder()
        b.stream("in", STRINGS).group_by_key().aggregate(lambda: "", lambda k, v, a: a + _fail(v)).to_stream().to("out")
        error, after = _pipe_and_read(spark, b.build(), [("k", "good", 1), ("k", "bad", 2)])
        assert str(error) == ("KSTREAM-AGGREGATE-0000000002: the aggregator raised ZeroDivisionError: division by zero "
                              "(record at topic in partition 0 offset 1, key 'k')")
        assert after == [("k", "good")]

    def test_reducer(self, spark: Any) -> None:
        """A reducer that raises is named as the reducer."""
        b = StreamsBuilder()
        b.stream("in", STRINGS).group_by_key().reduce(lambda a, v: a + _fail(v)).to_stream().to("out")
        error, _ = _pipe_and_read(spark, b.build(), [("k", "good", 1), ("k", "bad", 2)])
        assert str(error).startswith("KSTREAM-REDUCE-0000000002: the reducer raised ZeroDivisionError")

    def test_initializer(self, spark: Any) -> None:
        """An initializer that raises is named as the initializer."""
        b = StreamsBuilder()
        b.stream("in", STRINGS).group_by_key().aggregate(lambda: _fail("bad"), lambda k, v, a: a).to_stream().to("out")
        error, _ = _pipe_and_read(spark, b.build(), [("k", "v", 1)])
        assert str(error) == ("KSTREAM-AGGREGATE-0000000002: the initializer raised ZeroDivisionError: division by "
                              "zero (record at topic in partition 0 offset 0, key 'k')")

    def test_merger(self, spark: Any) -> None:
        """A session merger that raises (a record joins an existing session) is named as the merger."""
        b = StreamsBuilder()
        (b.stream("in", STRINGS).group_by_key().windowed_by(SessionWindows.with_gap(5))
         .aggregate(lambda: "", lambda k, v, a: a + v, lambda k, a1, a2: _fail("bad")).to_stream().to("out"))
        error, after = _pipe_and_read(spark, b.build(), [("k", "x", 0), ("k", "y", 3)])
        assert str(error) == ("KSTREAM-AGGREGATE-0000000002: the merger raised ZeroDivisionError: division by zero "
                              "(record at topic in partition 0 offset 1, key 'k')")
        assert [v for _, v in after] == ["x"]


    def test_deserializer(self, spark: Any) -> None:
        """Bytes the source's value serde cannot read: the source, the record and the reason."""
        b = StreamsBuilder()
        b.stream("in", Consumed.with_serdes(Serdes.String(), Serdes.Long())).to("out")
        with TopologyTestDriver(b.build(), spark=spark) as d:
            i, o = d.create_input_topic("in", value_serde=Serdes.Bytes()), d.create_output_topic("out")
            i.pipe_input("k1", Serdes.Long().serialize(7), 1)
            i.pipe_input("k2", b"oops", 2)
            with pytest.raises(RecordDeserializationError) as caught:
                o.read_records_to_list()
            assert [(r.key, r.value) for r in o.read_records_to_list()] == [("k1", 7)]
        assert str(caught.value) == (
            "KSTREAM-SOURCE-0000000000: Serdes.Long() cannot deserialize the record value: expected 8 bytes, got 4. "
            "Fix the producer or consume the topic with a matching serde (Consumed.with_serdes), or skip such records "
            "with default.deserialization.exception.handler=log_and_continue (errors.dead.letter.topic keeps them) "
            "(record at topic in partition 0 offset 1, key 'k2')")
        assert isinstance(caught.value, SerializationError)

    @pytest.mark.parametrize("engine_name", ["direct", "spark"])
    def test_malformed_json_names_where_it_breaks_and_the_handler(self, spark: Any, engine_name: str) -> None:
        """Bytes a JSON serde cannot read: the error says where the JSON breaks (byte, line,
        column) and names the handler and the dead-letter option that would skip and keep such
        records, in both engines alike."""
        b = StreamsBuilder()
        b.stream("in").to("out")  # JSON keys and values: the key is shown as the engines' key 'k' alike
        with TopologyTestDriver(b.build(), engine=engine_name, spark=spark) as d:
            d.create_input_topic("in", value_serde=Serdes.Bytes()).pipe_input("k", b'{"a": 1 "b": 2}', 1)
            with pytest.raises(RecordDeserializationError) as caught:
                d.create_output_topic("out").read_records_to_list()
        assert str(caught.value) == (
            "KSTREAM-SOURCE-0000000000: Serdes.Json() cannot deserialize the record value: not valid UTF-8 JSON: "
            "Expecting ',' delimiter at byte 8 (line 1, column 9). Fix the producer or consume the topic with a "
            "matching serde (Consumed.with_serdes), or skip such records with "
            "default.deserialization.exception.handler=log_and_continue (errors.dead.letter.topic keeps them) "
            "(record at topic in partition 0 offset 0, key 'k')")

    def test_key_deserializer(self, spark: Any) -> None:
        """An unreadable key: the message names the key as the part that failed (and no key)."""
        b = StreamsBuilder()
        b.stream("in", Consumed.with_serdes(Serdes.Long(), Serdes.String())).to("out", Produced.with_serdes(
            Serdes.Long(), Serdes.String()))
        with TopologyTestDriver(b.build(), spark=spark) as d:
            d.create_input_topic("in", key_serde=Serdes.Bytes()).pipe_input(b"\xff", "v", 1)
            with pytest.raises(RecordDeserializationError) as caught:
                d.create_output_topic("out", key_serde=Serdes.Long()).read_records_to_list()
        assert str(caught.value).startswith("KSTREAM-SOURCE-0000000000: Serdes.Long() cannot deserialize the "
                                            "record key: expected 8 bytes, got 1.")
        assert str(caught.value).endswith("(record at topic in partition 0 offset 0)")

    def test_serializer_at_sink(self, spark: Any) -> None:
        """A sink's Serdes.Long() fed a string: the sink, the record and the serde's reason."""
        b = StreamsBuilder()
        b.stream("in", STRINGS).to("out", Produced.with_serdes(Serdes.String(), Serdes.Long()))
        error, after = _pipe_and_read(spark, b.build(), [("k", "text", 1)])
        assert isinstance(error, RecordSerializationError)
        assert str(error) == (
            "KSTREAM-SINK-0000000001: cannot write the record value: Serdes.Long() cannot serialize str 'text': "
            "expected int. Give the sink a serde for this type (Produced.with_serdes) or map the value to the type "
            "its serde writes (record at topic in partition 0 offset 0, key 'k')")
        assert after == []

    @pytest.mark.parametrize("aggregate", [False, True])
    def test_bad_output_type(self, spark: Any, aggregate: bool) -> None:
        """A function returning a value its serde cannot hold (a set for JSON) names the function."""
        b = StreamsBuilder()
        stream = b.stream("in", STRINGS)
        if aggregate:
            stream.group_by_key().aggregate(lambda: 0, lambda k, v, a: {v}).to_stream().to("out")
            name, function = "KSTREAM-AGGREGATE-0000000002", "aggregator"
        else:
            stream.map_values(lambda v: {v}).to("out")
            name, function = "KSTREAM-MAPVALUES-0000000001", "mapper"
        error, _ = _pipe_and_read(spark, b.build(), [("k", "x", 1)])
        assert isinstance(error, RecordSerializationError)
        assert str(error).startswith(f"{name}: the {function} returned a result its serde cannot hold: Serdes.Json() "
                                     "cannot encode set {'x'}: Object of type set is not JSON serializable.")
        assert str(error).endswith("(record at topic in partition 0 offset 0, key 'k')")


class TestStrictDriver:
    def test_misspelled_config_key_says_did_you_mean(self, spark: Any) -> None:
        """The driver validates its config as KafkaStreams does: an unknown key fails with a hint."""
        from streamsdsl.runtime.config import StreamsConfigError

        b = StreamsBuilder()
        b.stream("in").to("out")
        with pytest.raises(StreamsConfigError, match=r"^unknown configuration key 'errors.dead.letter.topik' "
                                                     r"\(did you mean 'errors.dead.letter.topic'\?\)"):
            TopologyTestDriver(b.build(), {"errors.dead.letter.topik": "dlq"}, spark=spark)

    def test_topology_without_sink_is_rejected(self, spark: Any) -> None:
        """A topology without a sink would run nothing: the driver says so when it is created, with
        KafkaStreams' error (NoSinkError: a TopologyError and a StreamsConfigError)."""
        from streamsdsl import TopologyError
        from streamsdsl.runtime.config import StreamsConfigError
        from streamsdsl.runtime.errors import NoSinkError

        b = StreamsBuilder()
        b.stream("in").filter(lambda k, v: True)
        with pytest.raises(NoSinkError, match=r"^the topology has no sink") as caught:
            TopologyTestDriver(b.build(), spark=spark)
        assert isinstance(caught.value, TopologyError) and isinstance(caught.value, StreamsConfigError)


@pytest.mark.every_host
class TestDropLog:
    def test_each_skipped_or_dropped_record_is_logged(self, spark: Any, caplog: pytest.LogCaptureFixture) -> None:
        """As Kafka Streams: one warning per skipped record, in source order, with the processor,
        the reason, topic, partition, offset and timestamp (log_and_continue, null key, late)."""
        b2 = StreamsBuilder()
        (b2.stream("in", Consumed.with_serdes(Serdes.String(), Serdes.Json())).group_by_key()
         .windowed_by(SessionWindows.of_inactivity_gap_and_grace(5, 0)).count().to_stream().map(lambda k, v: (k.key, v)).to("out"))
        config = {"default.deserialization.exception.handler": "log_and_continue"}
        with caplog.at_level("WARNING", logger="streamsdsl"), TopologyTestDriver(b2.build(), config, spark=spark) as d:
            i = d.create_input_topic("in", Serdes.Bytes(), Serdes.Bytes())
            i.pipe_input(b"a", b"1", 100)
            i.pipe_input(None, b"2", 101)
            i.pipe_input(b"a", b"3", 1)
            i.pipe_input(b"\xff", b"x", 102)
            assert d.create_output_topic("out").get_queue_size() == 1
            assert d.metrics()["dropped-records-total"] == 3.0
        assert [r.getMessage() for r in caplog.records if r.name == "streamsdsl"] == [
            "KSTREAM-AGGREGATE-0000000002: Skipping record due to null key or value. topic=[in] partition=[0] "
            "offset=[1] timestamp=[101]",
            "KSTREAM-AGGREGATE-0000000002: Skipping record for expired window. topic=[in] partition=[0] offset=[2] "
            "timestamp=[1]",
            "KSTREAM-SOURCE-0000000000: Skipping record that could not be deserialized (log_and_continue). "
            "topic=[in] partition=[0] offset=[3] timestamp=[102] reason=[Serdes.Json() cannot deserialize the "
            "record value: not valid UTF-8 JSON]",
        ]


class TestDropReasons:
    """Each drop is logged with Kafka Streams' reason and under the processor that drops it."""

    @pytest.mark.parametrize("engine", ["direct", pytest.param("spark", marks=pytest.mark.spark)])
    def test_null_values_and_late_records_of_aggregations_and_cogroups(
            self, engine: str, caplog: pytest.LogCaptureFixture, request: pytest.FixtureRequest) -> None:
        """A null value dropped by an unwindowed aggregation is "due to null key or value" (Kafka's
        ``KStreamAggregate``), not an expired window; a cogroup's drops are logged under the
        aggregate processor of the record's input (``COGROUPKSTREAM-AGGREGATE-…``), not its merge
        node: a null value of input ``b``, a null key of input ``a``, and a record of input ``b``
        too late for its time window."""
        from streamsdsl import TimeWindows

        spark = request.getfixturevalue("spark") if engine == "spark" else None
        s = Consumed.with_serdes(Serdes.String(), Serdes.String())
        b = StreamsBuilder()
        (b.stream("plain", s).group_by_key().aggregate(lambda: "", lambda k, v, a: a + v)
         .to_stream().to("out1"))
        ga, gb = b.stream("a", s).group_by_key(), b.stream("b", s).group_by_key()
        (ga.cogroup(lambda k, v, agg: agg + v).cogroup(gb, lambda k, v, agg: agg + v.upper()).aggregate(lambda: "")
         .to_stream().to("out2"))
        wa, wb = b.stream("wa", s).group_by_key(), b.stream("wb", s).group_by_key()
        (wa.cogroup(lambda k, v, agg: agg + v).cogroup(wb, lambda k, v, agg: agg + v)
         .windowed_by(TimeWindows.of_size_with_no_grace(10)).aggregate(lambda: "")
         .to_stream().map(lambda k, v: (k.key, v)).to("out3"))
        topology = b.build()
        with caplog.at_level("WARNING", logger="streamsdsl"), \
                TopologyTestDriver(topology, engine=engine, spark=spark) as d:
            topics = {t: d.create_input_topic(t) for t in ("plain", "a", "b", "wa", "wb")}
            topics["plain"].pipe_input("k", "x", 1)
            topics["plain"].pipe_input("k", None, 2)
            topics["b"].pipe_input("k", None, 3)
            topics["a"].pipe_input(None, "y", 4)
            topics["wb"].pipe_input("k", "z", 25)
            topics["wb"].pipe_input("k", "late", 5)
            assert [(r.key, r.value) for r in d.create_output_topic("out1").read_records_to_list()] == [("k", "x")]
            assert d.create_output_topic("out2").read_records_to_list() == []
            assert [(r.key, r.value) for r in d.create_output_topic("out3").read_records_to_list()] == [("k", "z")]
            assert d.metrics()["dropped-records-total"] == 4.0
        names = {n.name for n in topology.nodes}
        agg = next(n for n in sorted(names) if n.startswith("KSTREAM-AGGREGATE-"))
        cogroups = sorted((n for n in topology.nodes if n.name.startswith("COGROUPKSTREAM-MERGE-")),
                          key=lambda n: n.name)
        (a_agg, b_agg), (_, wb_agg) = cogroups[0].agg_names, cogroups[1].agg_names
        assert [r.getMessage() for r in caplog.records if r.name == "streamsdsl"] == [
            f"{agg}: Skipping record due to null key or value. topic=[plain] partition=[0] offset=[1] timestamp=[2]",
            f"{b_agg}: Skipping record due to null key or value. topic=[b] partition=[0] offset=[0] timestamp=[3]",
            f"{a_agg}: Skipping record due to null key or value. topic=[a] partition=[0] offset=[0] timestamp=[4]",
            f"{wb_agg}: Skipping record for expired window. topic=[wb] partition=[0] offset=[1] timestamp=[5]",
        ]
