"""The Processor API in the TopologyTestDriver (``KStream.process`` / ``process_values``,
``StreamsBuilder.add_state_store``, punctuators): exact records, timestamps, stores, errors, and
describe() as Kafka Streams prints it."""

from __future__ import annotations

from typing import Any

import pytest

from streamsdsl import Consumed, Produced, Serdes, StreamsBuilder, Stores, TopologyError, TopologyTestDriver
from streamsdsl.errors import PunctuationError, UserFunctionError
from streamsdsl.processor import FixedKeyProcessor, Processor, PunctuationType, Record
from streamsdsl.runtime.driver import KeyValue

STRINGS = Consumed.with_serdes(Serdes.String(), Serdes.String())
STREAM, WALL = PunctuationType.STREAM_TIME, PunctuationType.WALL_CLOCK_TIME


def kv_store(name: str, value_serde: Any = None) -> Any:
    return Stores.key_value_store_builder(Stores.persistent_key_value_store(name), Serdes.String(),
                                          value_serde or Serdes.Long())


class Dedup(Processor):
    """Forwards the first record of each value; forgets values last seen 10 ms of stream time ago."""

    def init(self, context: Any) -> None:
        self.context = context
        self.seen = context.get_state_store("seen")
        context.schedule(10, STREAM, self.purge)

    def process(self, record: Record) -> None:
        if self.seen.get(record.value) is None:
            self.context.forward(record)
        self.seen.put(record.value, record.timestamp)

    def purge(self, now: int) -> None:
        with self.seen.all() as entries:
            old = [e.key for e in entries if e.value <= now - 10]
        for key in old:
            self.seen.delete(key)


class Ticks(Processor):
    """Forwards each record with the task's stream time as its value, and a ``tick`` record
    every 100 ms of stream time."""

    def init(self, context: Any) -> None:
        self.context = context
        context.schedule(100, STREAM, lambda t: context.forward(Record("tick", str(t), t)))

    def process(self, record: Record) -> None:
        self.context.forward(record.with_value(str(self.context.current_stream_time_ms())))


def dedup_topology() -> Any:
    b = StreamsBuilder()
    b.add_state_store(kv_store("seen"))
    b.stream("in", STRINGS).process(Dedup, "seen", named="dedup").to("out", Produced.with_serdes(Serdes.String(),
                                                                                               Serdes.String()))
    return b.build()


def outputs(driver: TopologyTestDriver, topic: str = "out", key_serde: Any = None, value_serde: Any = None) -> list:
    out = driver.create_output_topic(topic, key_serde or Serdes.String(), value_serde or Serdes.String())
    return [(r.key, r.value, r.timestamp) for r in out.read_records_to_list()]


class TestDedup:
    @pytest.mark.streaming_host
    def test_first_occurrences_and_stream_time_purge(self, spark: Any) -> None:
        """A duplicate is dropped until a stream-time purge (after the record that moves stream
        time, as Kafka punctuates after processing) has forgotten its value."""
        with TopologyTestDriver(dedup_topology(), spark=spark) as d:
            i = d.create_input_topic("in")
            for key, value, ts in (("a", "x", 1), ("b", "x", 2), ("c", "y", 5), ("d", "x", 9), ("e", "x", 25),
                                   ("f", "y", 26)):
                i.pipe_input(key, value, ts)
            # e: x was last seen at 9, purged only by the punctuation at 25, after e; y (5) was purged then
            assert outputs(d) == [("a", "x", 1), ("c", "y", 5), ("f", "y", 26)]
            assert list(d.get_key_value_store("seen").all()) == [KeyValue("x", 25), KeyValue("y", 26)]
            i.pipe_input("g", "x", 40)  # x seen at 25: dropped; the punctuation at 40 purges y (26)
            i.pipe_input("h", "y", 41)
            assert outputs(d) == [("h", "y", 41)]
            assert list(d.get_key_value_store("seen").all()) == [KeyValue("x", 40), KeyValue("y", 41)]

    def test_describe_shows_the_processor_and_its_store(self) -> None:
        """describe() prints the processor with its store, as Kafka Streams does."""
        assert str(dedup_topology().describe()) == (
            "Topologies:\n"
            "   Sub-topology: 0\n"
            "    Source: KSTREAM-SOURCE-0000000000 (topics: [in])\n"
            "      --> dedup\n"
            "    Processor: dedup (stores: [seen])\n"
            "      --> KSTREAM-SINK-0000000001\n"
            "      <-- KSTREAM-SOURCE-0000000000\n"
            "    Sink: KSTREAM-SINK-0000000001 (topic: out)\n"
            "      <-- dedup\n\n")

    def test_a_failed_record_leaves_no_trace_in_the_store(self, spark: Any) -> None:
        """A record whose processing fails rolls back what it wrote to the store."""
        class Failing(Processor):
            def init(self, context: Any) -> None:
                self.seen = context.get_state_store("seen")

            def process(self, record: Record) -> None:
                self.seen.put(record.key, record.timestamp)
                if record.value == "boom":
                    raise ValueError("boom")

        b = StreamsBuilder()
        b.add_state_store(kv_store("seen"))
        b.stream("in", STRINGS).process(Failing, "seen", named="failing")
        with TopologyTestDriver(b.build(), spark=spark) as d:
            i = d.create_input_topic("in")
            i.pipe_input("a", "ok", 1)
            i.pipe_input("b", "boom", 2)
            with pytest.raises(UserFunctionError) as info:
                d.get_key_value_store("seen").all()
            assert str(info.value) == ("failing: the process raised ValueError: boom (record at topic in partition 0 "
                                       "offset 1, key 'b')")
            assert list(d.get_key_value_store("seen").all()) == [KeyValue("a", 1)]


class TestPunctuation:
    def test_wall_clock_punctuator_forwards_the_store_size(self, spark: Any) -> None:
        """advance_wall_clock_time fires the wall-clock punctuators due, with the system time;
        a forward from a punctuator carries the timestamp it is given."""
        class Sizes(Processor):
            def init(self, context: Any) -> None:
                self.context, self.store = context, context.get_state_store("keys")
                context.schedule(1000, WALL, self.report)

            def process(self, record: Record) -> None:
                self.store.put(record.key, record.timestamp)

            def report(self, now: int) -> None:
                self.context.forward(Record("size", str(self.store.approximate_num_entries()), now))

        b = StreamsBuilder()
        b.add_state_store(kv_store("keys"))
        b.stream("in", STRINGS).process(Sizes, "keys").to("out", Produced.with_serdes(Serdes.String(), Serdes.String()))
        with TopologyTestDriver(b.build(), initial_wall_clock_time_ms=10_000, spark=spark) as d:
            i = d.create_input_topic("in")
            i.pipe_input("a", "v", 1)
            i.pipe_input("b", "v", 2)
            d.advance_wall_clock_time(999)
            assert outputs(d) == []
            d.advance_wall_clock_time(1)
            i.pipe_input("c", "v", 3)
            d.advance_wall_clock_time(2500)
            assert outputs(d) == [("size", "2", 11_000), ("size", "3", 13_500)]

    @pytest.mark.streaming_host
    def test_stream_time_punctuator_sees_the_task_stream_time(self, spark: Any) -> None:
        """Stream time is the largest timestamp the task has read: an out-of-order record does
        not move it back, and the punctuator is called with it."""
        b = StreamsBuilder()
        b.stream("in", STRINGS).process(Ticks).to("out", Produced.with_serdes(Serdes.String(), Serdes.String()))
        with TopologyTestDriver(b.build(), spark=spark) as d:
            i = d.create_input_topic("in")
            for ts in (50, 20, 150, 199, 200):
                i.pipe_input("k", "v", ts)
            assert outputs(d) == [("k", "50", 50), ("tick", "50", 50), ("k", "50", 20), ("k", "150", 150),
                                  ("tick", "150", 150), ("k", "199", 199), ("k", "200", 200), ("tick", "200", 200)]

    def test_punctuator_failure(self, spark: Any) -> None:
        """A punctuator that raises names the processor and the punctuation."""
        class Bad(Processor):
            def init(self, context: Any) -> None:
                context.schedule(10, WALL, self.tick)

            def tick(self, now: int) -> None:
                raise RuntimeError("no")

        b = StreamsBuilder()
        b.stream("in", STRINGS).process(Bad, named="bad")
        with TopologyTestDriver(b.build(), initial_wall_clock_time_ms=0, spark=spark) as d:
            with pytest.raises(PunctuationError) as info:
                d.advance_wall_clock_time(10)
            assert str(info.value) == "bad: the punctuator raised RuntimeError: no (wall-clock-time punctuation at 10 ms)"


    @pytest.mark.every_host
    def test_stream_time_punctuator_failure(self, spark: Any) -> None:
        """A stream-time punctuator that raises names the processor and the punctuation, on every
        host (on Spark it leaves its task's worker as a record's error does)."""
        class Late(Processor):
            def init(self, context: Any) -> None:
                self.context = context
                context.schedule(5, STREAM, self.tick)

            def process(self, record: Record) -> None:
                self.context.forward(record)

            def tick(self, now: int) -> None:
                if now >= 10:
                    raise RuntimeError("late")

        b = StreamsBuilder()
        b.stream("in", STRINGS).process(Late, named="late").to("out", Produced.with_serdes(Serdes.String(),
                                                                                          Serdes.String()))
        with TopologyTestDriver(b.build(), spark=spark) as d:
            i = d.create_input_topic("in")
            for key, ts in (("a", 1), ("b", 5), ("c", 12)):
                i.pipe_input(key, "v", ts)
            with pytest.raises(PunctuationError) as info:
                d.advance_wall_clock_time(0)  # runs the records piped so far
            assert str(info.value) == "late: the punctuator raised RuntimeError: late (stream-time punctuation at 12 ms)"
            # the records before the failed one are delivered once; the failed one left no output
            assert outputs(d) == [("a", "v", 1), ("b", "v", 5)]


class TestProcessValues:
    @pytest.mark.streaming_host
    def test_keeps_keys_and_needs_no_repartition(self, spark: Any) -> None:
        """process_values forwards values under the same key; a grouping after it reads no repartition."""
        class Length(FixedKeyProcessor):
            def init(self, context: Any) -> None:
                self.context = context

            def process(self, record: Record) -> None:
                self.context.forward(record.with_value(len(record.value)))

        b = StreamsBuilder()
        (b.stream("in", STRINGS).process_values(Length).group_by_key().count().to_stream()
         .to("out", Produced.with_serdes(Serdes.String(), Serdes.Long())))
        topology = b.build()
        assert "repartition" not in str(topology.describe())
        assert "Processor: KSTREAM-PROCESSVALUES-0000000001 (stores: [])" in str(topology.describe())
        with TopologyTestDriver(topology, spark=spark) as d:
            i = d.create_input_topic("in")
            i.pipe_input("a", "xyz", 1)
            i.pipe_input("a", "xy", 2)
            assert outputs(d, value_serde=Serdes.Long()) == [("a", 1, 1), ("a", 2, 2)]

    def test_process_then_group_repartitions(self, spark: Any) -> None:
        """process may change keys: a grouping after it reads a repartition topic."""
        class Swap(Processor):
            def init(self, context: Any) -> None:
                self.context = context

            def process(self, record: Record) -> None:
                self.context.forward(Record(record.value, record.key, record.timestamp))

        b = StreamsBuilder()
        (b.stream("in", STRINGS).process(Swap).group_by_key().count().to_stream()
         .to("out", Produced.with_serdes(Serdes.String(), Serdes.Long())))
        topology = b.build()
        assert "KSTREAM-AGGREGATE-STATE-STORE-0000000002-repartition" in str(topology.describe())
        with TopologyTestDriver(topology, spark=spark) as d:
            i = d.create_input_topic("in")
            i.pipe_input("a", "x", 1)
            i.pipe_input("b", "x", 2)
            assert outputs(d, value_serde=Serdes.Long()) == [("x", 1, 1), ("x", 2, 2)]


class TestWindowStore:
    def test_per_key_count_in_a_tumbling_window_store(self, spark: Any) -> None:
        """A processor counting per key and 10 ms window in a window store (the oracle's menu)."""
        class WindowCount(Processor):
            def init(self, context: Any) -> None:
                self.context, self.store = context, context.get_state_store("counts")

            def process(self, record: Record) -> None:
                start = record.timestamp - record.timestamp % 10
                count = (self.store.fetch(record.key, start) or 0) + 1
                self.store.put(record.key, count, start)
                self.context.forward(record.with_value(f"{start}:{count}"))

        b = StreamsBuilder()
        b.add_state_store(Stores.window_store_builder(Stores.persistent_window_store("counts", 100, 10, False),
                                                      Serdes.String(), Serdes.Long()))
        b.stream("in", STRINGS).process(WindowCount, "counts").to("out", Produced.with_serdes(Serdes.String(),
                                                                                              Serdes.String()))
        with TopologyTestDriver(b.build(), spark=spark) as d:
            i = d.create_input_topic("in")
            for key, ts in (("a", 1), ("a", 5), ("b", 7), ("a", 12)):
                i.pipe_input(key, "v", ts)
            assert outputs(d) == [("a", "0:1", 1), ("a", "0:2", 5), ("b", "0:1", 7), ("a", "10:1", 12)]
            with d.get_window_store("counts").fetch("a", 0, 20) as it:
                assert list(it) == [KeyValue(0, 2), KeyValue(10, 1)]


class TestBuildErrors:
    def test_a_store_not_added(self) -> None:
        """A processor naming a store that was not added is refused when the topology is built."""
        b = StreamsBuilder()
        b.stream("in").process(Dedup, "seen", named="dedup")
        with pytest.raises(TopologyError) as info:
            b.build()
        assert str(info.value) == (
            "Invalid topology: state store 'seen' of processor dedup is not added yet. Add it with "
            "builder.add_state_store(Stores.key_value_store_builder(Stores.persistent_key_value_store('seen'), "
            "key_serde, value_serde)) (or a window or session store builder).")

    def test_a_dsl_store(self) -> None:
        """Connecting a processor to a DSL operator's store is refused with the reason."""
        b = StreamsBuilder()
        from streamsdsl import Materialized
        b.stream("in").group_by_key().count(materialized=Materialized.as_("counts"))
        b.stream("other").process(Dedup, "counts", named="p")
        with pytest.raises(TopologyError, match="which is the store of KSTREAM-AGGREGATE-0000000001"):
            b.build()

    def test_supplier_must_be_callable_without_arguments(self) -> None:
        """The supplier is checked when process() is written."""
        with pytest.raises(TypeError) as info:
            StreamsBuilder().stream("in").process(lambda x: x)
        assert str(info.value) == "'supplier' must accept no arguments; lambda x has 1 required (x). Use lambda: ..."

    def test_store_names_added_by_the_supplier(self) -> None:
        """A supplier with stores() adds and connects them (Kafka's ConnectedStoreProvider)."""
        class Provided(Dedup):
            @staticmethod
            def stores() -> list[Any]:
                return [kv_store("seen")]

        b = StreamsBuilder()
        b.stream("in", STRINGS).process(Provided, named="p").to("out")
        assert "Processor: p (stores: [seen])" in str(b.build().describe())


class TestContextInTheDriver:
    def test_metadata_application_and_task(self, spark: Any) -> None:
        """record_metadata() is the piped record's topic, partition 0 and offset; the driver is one
        task, 0_0; the application id is the config's (Kafka's driver's default without one)."""
        class Meta(Processor):
            def init(self, context: Any) -> None:
                self.context = context

            def process(self, record: Record) -> None:
                c = self.context
                m = c.record_metadata()
                c.forward(record.with_value(f"{m.topic}/{m.partition}/{m.offset} {c.application_id()} {c.task_id()}"))

        b = StreamsBuilder()
        b.stream("in", STRINGS).process(Meta).to("out", Produced.with_serdes(Serdes.String(), Serdes.String()))
        with TopologyTestDriver(b.build(), spark=spark) as d:
            i = d.create_input_topic("in")
            i.pipe_input("a", "v", 1)
            i.pipe_input("b", "v", 2)
            assert outputs(d) == [("a", "in/0/0 dummy-topology-test-driver-app-id 0_0", 1),
                                  ("b", "in/0/1 dummy-topology-test-driver-app-id 0_0", 2)]
        with TopologyTestDriver(b.build(), {"application.id": "my-app"}, spark=spark) as d:
            d.create_input_topic("in").pipe_input("a", "v", 1)
            assert outputs(d)[0][1] == "in/0/0 my-app 0_0"


class TestOnEveryHost:
    """What a host of the kernel must get right beyond one processor after a source: the task's
    stream time from records that never reach the processor, a forward to one child, a store
    written by the driver, a processor below an aggregation."""

    @pytest.mark.every_host
    @pytest.mark.streaming_host
    def test_records_filtered_before_the_processor_move_stream_time(self, spark: Any) -> None:
        """Kafka's task reads every record of its partitions: a record filtered out before the
        processor still moves the task's stream time, and the task punctuates after it."""
        b = StreamsBuilder()
        (b.stream("in", STRINGS).filter(lambda k, v: v != "skip").process(Ticks)
         .to("out", Produced.with_serdes(Serdes.String(), Serdes.String())))
        with TopologyTestDriver(b.build(), spark=spark) as d:
            i = d.create_input_topic("in")
            for key, value, ts in (("a", "v", 50), ("b", "skip", 120), ("c", "v", 130), ("d", "skip", 260),
                                   ("e", "v", 210)):
                i.pipe_input(key, value, ts)
            assert outputs(d) == [("a", "50", 50), ("tick", "50", 50), ("tick", "120", 120), ("c", "130", 130),
                                  ("tick", "260", 260), ("e", "260", 210)]

    @pytest.mark.every_host
    def test_forward_to_one_child(self, spark: Any) -> None:
        """``forward(record, child_name)`` reaches that child only; ``forward(record)`` every child,
        in the order the processor forwards (depth first)."""
        class Route(Processor):
            def init(self, context: Any) -> None:
                self.context = context

            def process(self, record: Record) -> None:
                self.context.forward(record.with_value("both:" + record.value))
                self.context.forward(record.with_value("small:" + record.value), "small")
                if len(record.value) > 1:
                    self.context.forward(record.with_value("big:" + record.value), "big")

        b = StreamsBuilder()
        routed = b.stream("in", STRINGS).process(Route, named="route")
        strings = Produced.with_serdes(Serdes.String(), Serdes.String())
        routed.map_values(lambda v: v, name="small").to("small-out", strings)
        routed.map_values(lambda v: v, name="big").to("big-out", strings)
        with TopologyTestDriver(b.build(), spark=spark) as d:
            i = d.create_input_topic("in")
            i.pipe_input("a", "x", 1)
            i.pipe_input("b", "yy", 2)
            assert outputs(d, "small-out") == [("a", "both:x", 1), ("a", "small:x", 1), ("b", "both:yy", 2),
                                               ("b", "small:yy", 2)]
            assert outputs(d, "big-out") == [("a", "both:x", 1), ("b", "both:yy", 2), ("b", "big:yy", 2)]

    @pytest.mark.every_host
    def test_the_driver_writes_a_processor_store(self, spark: Any) -> None:
        """The driver's store of a processor is the task's store: a value the test puts is what
        the processor reads next (Kafka's driver returns the store itself)."""
        with TopologyTestDriver(dedup_topology(), spark=spark) as d:
            i = d.create_input_topic("in")
            i.pipe_input("a", "x", 1)
            d.get_key_value_store("seen").put("y", 2)
            i.pipe_input("b", "y", 3)
            i.pipe_input("c", "z", 4)
            assert outputs(d) == [("a", "x", 1), ("c", "z", 4)]
            assert list(d.get_key_value_store("seen").all()) == [KeyValue("x", 1), KeyValue("y", 3), KeyValue("z", 4)]

    @pytest.mark.streaming_host
    @pytest.mark.every_host
    def test_a_processor_below_a_count(self, spark: Any) -> None:
        """A processor reading a count's changelog keeps the largest count per key in its store
        and forwards a new maximum."""
        class Maximum(Processor):
            def init(self, context: Any) -> None:
                self.context, self.store = context, context.get_state_store("max")

            def process(self, record: Record) -> None:
                best = self.store.get("all")
                if best is None or record.value > best:
                    self.store.put("all", record.value)
                    self.context.forward(Record(record.key, str(record.value), record.timestamp))

        b = StreamsBuilder()
        b.add_state_store(kv_store("max"))
        (b.stream("in", STRINGS).group_by_key().count().to_stream().process(Maximum, "max")
         .to("out", Produced.with_serdes(Serdes.String(), Serdes.String())))
        with TopologyTestDriver(b.build(), spark=spark) as d:
            i = d.create_input_topic("in")
            for key, ts in (("a", 1), ("b", 2), ("b", 3), ("a", 4), ("a", 5)):
                i.pipe_input(key, "v", ts)
            assert outputs(d) == [("a", "1", 1), ("b", "2", 3), ("a", "3", 5)]
            assert list(d.get_key_value_store("max").all()) == [KeyValue("all", 3)]


@pytest.mark.spark
class TestStreamingQuery:
    """A processor in a streaming query (`start_streaming`, the query `KafkaStreams` runs): one
    run of the task per micro-batch with its records."""

    class Remember(Processor):
        """The first record of each value (a store of the values seen), a tick per 100 ms of stream
        time, and the store's size by the wall clock."""

        def init(self, context: Any) -> None:
            self.context, self.seen = context, context.get_state_store("seen")
            context.schedule(100, STREAM, lambda t: context.forward(Record("tick", str(t), t)))
            context.schedule(1, WALL, lambda t: context.forward(Record("size", str(self.seen.approximate_num_entries()),
                                                                       t)))

        def process(self, record: Record) -> None:
            if self.seen.get(record.value) is None:
                self.context.forward(record)
            self.seen.put(record.value, record.timestamp)

    def test_restart_keeps_the_store_and_the_punctuation_schedule(self, spark: Any, tmp_path: Any) -> None:
        """Stopped and restarted from its checkpoint, a processor's task goes on with its store
        (a value seen before the restart is still a duplicate) and its punctuation schedule (the
        stream-time punctuator fires at the next multiple it had reached, not again from 0); the
        wall-clock punctuator fires at the end of a micro-batch, at the executor's system time."""
        import time

        from streamsdsl.io.files import FileTopic
        from streamsdsl.runtime.streaming import start_streaming
        from tests._support import Collect

        b = StreamsBuilder()
        b.add_state_store(kv_store("seen"))
        b.stream("in", STRINGS).process(self.Remember, "seen").to("out", Produced.with_serdes(Serdes.String(),
                                                                                              Serdes.String()))
        topology = b.build()
        topic, checkpoint, s = FileTopic(str(tmp_path / "in")), str(tmp_path / "checkpoint"), Serdes.String()

        def run(batches: list[list[tuple[str, str, int]]]) -> list[tuple[int, str, str, int]]:
            out = Collect()
            query, _, _ = start_streaming(topology, lambda n: topic.read_stream(spark, n.topics), out,
                                          checkpoint_location=checkpoint)
            try:
                for batch in batches:
                    topic.append("in", batch, s, s)
                    query.processAllAvailable()
            finally:
                query.stop()
            return out.records

        before = run([[("a", "x", 50)], [("b", "x", 120)]])
        restarted = int(time.time() * 1000)
        after = run([[("c", "y", 150)], [("d", "x", 210)]])
        assert [(k, v, ts) for _, k, v, ts in before if k != "size"] == [("a", "x", 50), ("tick", "50", 50),
                                                                        ("tick", "120", 120)]
        assert [(k, v, ts) for _, k, v, ts in after if k != "size"] == [("c", "y", 150), ("tick", "210", 210)]
        sizes = [(v, ts) for _, k, v, ts in after if k == "size"]
        assert sizes and {v for v, _ in sizes} == {"2"}
        assert all(restarted <= ts <= int(time.time() * 1000) for _, ts in sizes)
        assert len(sizes) == len({batch for batch, k, _, _ in after if k == "size"})  # at most one per micro-batch

    def test_a_task_per_partition(self, spark: Any) -> None:
        """Each partition is a task with its own store and stream-time punctuation; the context
        names the task and the record's partition and offset (the same run checks the executors
        of a local cluster: integration/test_local_cluster.py)."""
        from tests import _processor_app

        assert _processor_app.run(spark) == _processor_app.expected()

    def test_the_streaming_driver_reads_a_processor_store_from_the_checkpoint(self, spark: Any) -> None:
        """The test driver's streaming engine reads a processor's store from its query's
        checkpoint (the state of the last micro-batch), read-only."""
        from streamsdsl.errors import OperationNotDefinedError

        with TopologyTestDriver(dedup_topology(), engine="streaming", spark=spark) as d:
            i = d.create_input_topic("in")
            i.pipe_input("a", "x", 1)
            i.pipe_input("b", "y", 2)
            store = d.get_key_value_store("seen")
            assert (store.get("x"), store.approximate_num_entries()) == (1, 2)
            with pytest.raises(OperationNotDefinedError, match=r"^put\(\): the test driver's streaming engine reads"):
                store.put("z", 3)

    def test_explain_names_the_operator(self, spark: Any) -> None:
        """explain() shows the processor's transformWithState and names its operator."""
        from streamsdsl import explain

        text = explain(dedup_topology(), spark, mode="simple")
        assert "TransformWithStateInPySpark" in text
        assert text.endswith("== streamsdsl operators ==\n"
                             "dedup: Python operator (user processors run on the Python operator, one task per "
                             "partition)\n")


class TestExpiredPuts:
    @pytest.mark.every_host
    def test_a_put_of_an_expired_window_is_a_dropped_record(self, spark: Any) -> None:
        """An in-memory window store drops a put whose window has expired and counts it in
        dropped-records-total, as Kafka Streams' store does."""
        class Put(Processor):
            def init(self, context: Any) -> None:
                self.store = context.get_state_store("w")

            def process(self, record: Record) -> None:
                self.store.put(record.key, 1, record.timestamp - record.timestamp % 10)

        b = StreamsBuilder()
        b.add_state_store(Stores.window_store_builder(Stores.in_memory_window_store("w", 100, 10, False),
                                                      Serdes.String(), Serdes.Long()))
        b.stream("in", STRINGS).process(Put, "w", named="put")
        with TopologyTestDriver(b.build(), spark=spark) as d:
            i = d.create_input_topic("in")
            for key, ts in (("a", 500), ("b", 50), ("c", 450), ("d", 20)):
                i.pipe_input(key, "v", ts)
            with d.get_window_store("w").fetch_all(0, 1000) as it:
                assert [kv.value for kv in it] == [1, 1]
            assert d.metrics()["dropped-records-total"] == 2.0


class Split(Processor):
    """Forwards each record with ``!`` appended, and a tick every 5 ms of stream time."""

    def init(self, context: Any) -> None:
        self.context = context
        context.schedule(5, STREAM, lambda t: context.forward(Record("tick", str(t), t)))

    def process(self, record: Record) -> None:
        self.context.forward(record.with_value(record.value + "!"))


class TestOrder:
    """Where a processor's records and punctuations go among what one source record causes."""

    @pytest.mark.every_host
    def test_punctuation_after_every_record_of_its_source_record(self, spark: Any) -> None:
        """A source record that a flat_map makes two reaches the processor twice, then the task
        punctuates once; a sibling sink sees the two records in between."""
        b = StreamsBuilder()
        s = b.stream("in", STRINGS).flat_map_values(lambda v: [v, v + v])
        s.process(Split).to("out", Produced.with_serdes(Serdes.String(), Serdes.String()))
        s.to("raw", Produced.with_serdes(Serdes.String(), Serdes.String()))
        with TopologyTestDriver(b.build(), spark=spark) as d:
            i = d.create_input_topic("in")
            for key, value, ts in (("a", "x", 1), ("b", "y", 7), ("c", "z", 13)):
                i.pipe_input(key, value, ts)
            assert outputs(d) == [("a", "x!", 1), ("a", "xx!", 1), ("tick", "1", 1), ("b", "y!", 7), ("b", "yy!", 7),
                                  ("tick", "7", 7), ("c", "z!", 13), ("c", "zz!", 13), ("tick", "13", 13)]
            assert outputs(d, "raw") == [("a", "x", 1), ("a", "xx", 1), ("b", "y", 7), ("b", "yy", 7), ("c", "z", 13),
                                         ("c", "zz", 13)]

    @pytest.mark.every_host
    @pytest.mark.streaming_host
    def test_two_processors_in_a_row(self, spark: Any) -> None:
        """The second processor reads the first one's records and punctuations, in order, then
        punctuates itself (punctuators due at the same time fire in the order scheduled)."""
        b = StreamsBuilder()
        (b.stream("in", STRINGS).process(Split, named="one").process(Split, named="two")
         .to("out", Produced.with_serdes(Serdes.String(), Serdes.String())))
        with TopologyTestDriver(b.build(), spark=spark) as d:
            i = d.create_input_topic("in")
            for key, value, ts in (("a", "x", 1), ("b", "y", 7), ("c", "z", 13)):
                i.pipe_input(key, value, ts)
            assert outputs(d) == [("a", "x!!", 1), ("tick", "1!", 1), ("tick", "1", 1), ("b", "y!!", 7),
                                  ("tick", "7!", 7), ("tick", "7", 7), ("c", "z!!", 13), ("tick", "13!", 13),
                                  ("tick", "13", 13)]
