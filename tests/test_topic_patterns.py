"""Topic patterns, ``builder.stream(re.compile("orders-.*"))`` (Kafka Streams' ``stream(Pattern)``):
validation and the overlap rules of Kafka's ``InternalTopologyBuilder`` (messages checked against
Kafka Streams 4.0), ``describe()`` exactly as Kafka prints it, the driver's routing of a topic to
the pattern that matches it (every engine), and the ``subscribePattern`` option of the
``streamsdsl-kafka`` source (topics listed and matched at each planning, new topics from their
earliest offset). The broker run is in integration/test_topic_patterns.py."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import pytest

from streamsdsl import Consumed, Serdes, StreamsBuilder
from streamsdsl.errors import InvalidArgumentError, InvalidTypeError, StreamsDslError, TopologyError
from streamsdsl.io.errors import KafkaOptionError, KafkaSourceError
from streamsdsl.io.offsets import TopicPartitionKey
from streamsdsl.io.options import KafkaSourceOptions
from streamsdsl.io.source import KafkaStreamReader, ReadAllAvailable

STRINGS = Consumed.with_serdes(Serdes.String(), Serdes.String())


def _orders_topology() -> Any:
    b = StreamsBuilder()
    b.stream(re.compile("orders-.*"), STRINGS).map_values(lambda v: v and v.upper()).to("out")
    return b.build()


class TestValidation:
    def test_flags_are_refused_with_the_inline_form(self) -> None:
        """Python's compile flags cannot reach Java's regular expressions (Spark's connector): the
        error names the flag and the inline form that both read."""
        with pytest.raises(InvalidArgumentError) as caught:
            StreamsBuilder().stream(re.compile("orders-.*", re.IGNORECASE))
        assert str(caught.value) == (
            "'topics' is a pattern compiled with flags (re.IGNORECASE): Spark's Kafka connector compiles the pattern "
            "as a Java regular expression, which receives no Python flags. Write them inline instead, e.g. "
            "re.compile('(?i)orders-.*') for re.IGNORECASE.")

    def test_inline_flags_are_accepted(self) -> None:
        """``(?i)`` in the pattern is the accepted form (``re.UNICODE`` is every str pattern's)."""
        b = StreamsBuilder()
        b.stream(re.compile("(?i)orders-.*")).to("out")
        assert b.build().sources[0].reads("ORDERS-eu")

    def test_bytes_pattern_and_other_types_are_refused(self) -> None:
        """A bytes pattern and a value that is neither a topic, a list nor a pattern are refused
        with what to write."""
        with pytest.raises(InvalidTypeError) as caught:
            StreamsBuilder().stream(re.compile(b"orders-.*"))  # type: ignore[arg-type]
        assert str(caught.value) == (
            "'topics' must be a str pattern (got the bytes pattern b'orders-.*'); write re.compile('orders-.*').")
        with pytest.raises(InvalidTypeError) as caught:
            StreamsBuilder().stream(42)  # type: ignore[arg-type]
        assert str(caught.value) == (
            "'topics' must be a topic name, a list of topic names or a compiled pattern, re.compile('orders-.*') "
            "(got int: 42).")

    @pytest.mark.parametrize("call", ["table", "to"])
    def test_a_pattern_is_only_for_stream(self, call: str) -> None:
        """A table and a sink read or write one topic: a pattern there says so."""
        b = StreamsBuilder()
        with pytest.raises(InvalidTypeError) as caught:
            if call == "table":
                b.table(re.compile("orders-.*"))  # type: ignore[arg-type]
            else:
                b.stream("in").to(re.compile("orders-.*"))  # type: ignore[arg-type]
        assert str(caught.value) == (
            "'topic' is a regular expression (re.compile('orders-.*')): only StreamsBuilder.stream() reads the "
            "topics a pattern matches (Kafka Streams' stream(Pattern)); here name one topic.")
        assert isinstance(caught.value, StreamsDslError) and isinstance(caught.value, TypeError)

    def test_a_list_naming_a_topic_twice_is_refused(self) -> None:
        """``stream([t, t])`` would read each record twice."""
        with pytest.raises(InvalidArgumentError, match=r"'topics' names a topic twice: \['a', 'a'\]"):
            StreamsBuilder().stream(["a", "a"])


class TestOverlap:
    """Kafka Streams' rules: a topic is read by one source (InternalTopologyBuilder), with its
    messages (Kafka 4.0: ``Invalid topology: <message>``)."""

    def test_pattern_matching_a_registered_topic(self) -> None:
        """Kafka: "Pattern orders-.* will match a topic that has already been registered by another source." """
        b = StreamsBuilder()
        b.stream("orders-1")
        with pytest.raises(TopologyError) as caught:
            b.stream(re.compile("orders-.*"))
        assert str(caught.value) == (
            "Pattern orders-.* will match a topic that has already been registered by another source: orders-1 "
            "(KSTREAM-SOURCE-0000000000). A topic is read by one source; narrow the pattern so that it does not "
            "match orders-1, or read orders-1 from the KStream of KSTREAM-SOURCE-0000000000.")

    @pytest.mark.parametrize("call", ["stream", "table"])
    def test_topic_matching_a_registered_pattern(self, call: str) -> None:
        """Kafka: "Topic orders-1 matches a Pattern already registered by another source." (a table too)."""
        b = StreamsBuilder()
        b.stream(re.compile("orders-.*"))
        with pytest.raises(TopologyError) as caught:
            getattr(b, call)("orders-1")
        assert str(caught.value) == (
            "Topic orders-1 matches a Pattern already registered by another source: orders-.* "
            "(KSTREAM-SOURCE-0000000000). A topic is read by one source; read it from the KStream of that pattern, "
            "or narrow the pattern.")

    def test_a_partial_match_is_no_match(self) -> None:
        """Kafka matches in full (``Matcher.matches()``): ``orders-.*`` does not claim ``old-orders-1``."""
        b = StreamsBuilder()
        b.stream(re.compile("orders-.*")).to("out")
        b.stream("old-orders-1").to("out")
        assert [s.reads("old-orders-1") for s in b.build().sources] == [False, True]

    def test_the_same_pattern_twice(self) -> None:
        """As for a topic: the second stream() of a pattern is refused (Kafka 4 merges them into
        one source; here the KStream of the first is reused)."""
        b = StreamsBuilder()
        b.stream(re.compile("o.*"))
        with pytest.raises(TopologyError, match=r"^Pattern o\.\* is already consumed by KSTREAM-SOURCE-0000000000; "
                           r"a pattern can be a source only once\. Reuse the KStream"):
            b.stream(re.compile("o.*"))


class TestDescribe:
    def test_pattern_is_printed_as_kafka_prints_it(self) -> None:
        """Kafka's ``Source.toString()`` prints ``Pattern.toString()``, without brackets (checked on
        Kafka Streams 4.0.0's describe() of the same topology)."""
        assert str(_orders_topology().describe()) == (
            "Topologies:\n"
            "   Sub-topology: 0\n"
            "    Source: KSTREAM-SOURCE-0000000000 (topics: orders-.*)\n"
            "      --> KSTREAM-MAPVALUES-0000000001\n"
            "    Processor: KSTREAM-MAPVALUES-0000000001 (stores: [])\n"
            "      --> KSTREAM-SINK-0000000002\n"
            "      <-- KSTREAM-SOURCE-0000000000\n"
            "    Sink: KSTREAM-SINK-0000000002 (topic: out)\n"
            "      <-- KSTREAM-MAPVALUES-0000000001\n\n")

    def test_pattern_is_data_and_a_topic_in_mermaid(self) -> None:
        """The description holds the pattern (Kafka's ``topicPattern()``, topics empty); Mermaid
        draws it as the source's topic."""
        d = _orders_topology().describe()
        source = d.subtopologies[0].nodes[0]
        assert (source.topics, source.pattern) == ((), "orders-.*")
        assert '    t0[/"orders-.*"/]\n    t1[/"out"/]\n    t0 --> n0\n' in d.to_mermaid()

    def test_a_list_of_topics_in_java_hash_set_order(self) -> None:
        """Kafka lists a source's topics from a ``HashSet`` copy: ``stream(["b", "a"])`` prints
        ``[a, b]`` (Kafka Streams 4.0.0)."""
        b = StreamsBuilder()
        b.stream(["b", "a"]).to("out")
        assert "    Source: KSTREAM-SOURCE-0000000000 (topics: [a, b])\n" in str(b.build().describe())


@pytest.mark.streamsdsl_engines("direct", "spark", "streaming")
class TestDriver:
    """On every engine (the streaming one matches with Java's regular expressions, as Spark's
    connector does; the others with Python's, as the driver routes)."""

    def test_topics_matching_the_pattern_reach_its_source(self, make_driver: Any) -> None:
        """As Kafka's driver: ``create_input_topic(name)`` of any topic the pattern matches in full
        routes to the pattern's source, records in pipe order across topics; other names are
        unknown."""
        with make_driver(_orders_topology()) as driver:
            eu, us = driver.create_input_topic("orders-eu"), driver.create_input_topic("orders-us")
            eu.pipe_input("k1", "a", 10)
            us.pipe_input("k2", "b", 5)
            eu.pipe_input("k1", None, 20)
            out = driver.create_output_topic("out").read_records_to_list()
            assert [(r.key, r.value, r.timestamp) for r in out] == [("k1", "A", 10), ("k2", "B", 5), ("k1", None, 20)]
            for name in ("old-orders-eu", "orders"):
                with pytest.raises(TopologyError) as caught:
                    driver.create_input_topic(name)
                assert str(caught.value) == (
                    f"Unknown topic {name!r}: the topology reads [] and the topics matching ['orders-.*'] in full.")

    def test_a_pattern_beside_named_topics(self, make_driver: Any) -> None:
        """A pattern source and a named-topic source merged: each record reaches its own source's
        steps (the pattern's records are upper-cased), in pipe order."""
        b = StreamsBuilder()
        named = b.stream("refunds", STRINGS)
        b.stream(re.compile("orders-[a-z]+"), STRINGS).map_values(lambda v: v and v.upper()).merge(named).to("out")
        with make_driver(b.build()) as driver:
            driver.create_input_topic("orders-eu").pipe_input("k", "a", 1)
            driver.create_input_topic("refunds").pipe_input("k", "r", 2)
            driver.create_input_topic("orders-us").pipe_input("k", "b", 3)
            out = driver.create_output_topic("out").read_records_to_list()
        assert [(r.value, r.timestamp) for r in out] == [("A", 1), ("r", 2), ("B", 3)]

    @pytest.mark.streamsdsl_engines("direct")
    def test_two_patterns_matching_one_topic(self, make_driver: Any) -> None:
        """Kafka Streams refuses a topic two patterns match when it meets it, with this message
        (its driver, 4.0.0, loops instead); here the driver refuses the input topic."""
        b = StreamsBuilder()
        b.stream(re.compile("o.*")).to("out1")
        b.stream(re.compile("or.*")).to("out2")
        with make_driver(b.build()) as driver:
            driver.create_input_topic("oz")  # only the first matches
            with pytest.raises(TopologyError) as caught:
                driver.create_input_topic("orders")
        assert str(caught.value) == (
            "Topic orders is already matched for another regex pattern o.* and hence cannot be matched to this "
            "regex pattern or.* any more. A topic is read by one source: narrow the patterns.")


class FakeMetadataClient:
    """The brokers' partitions with ``(low, high)`` watermarks, changed by the test between plannings."""

    def __init__(self, options: KafkaSourceOptions, marks: dict[TopicPartitionKey, tuple[int, int]]) -> None:
        self.options, self.marks = options, marks

    def partitions(self) -> list[TopicPartitionKey]:
        return [tp for tp in sorted(self.marks) if self.options.reads(tp[0])]

    def earliest(self, tps: Sequence[TopicPartitionKey]) -> dict[TopicPartitionKey, int]:
        return {tp: self.marks[tp][0] for tp in tps}

    def latest(self, tps: Sequence[TopicPartitionKey]) -> dict[TopicPartitionKey, int]:
        return {tp: self.marks[tp][1] for tp in tps}

    def resolve(self, wanted: dict[TopicPartitionKey, int]) -> dict[TopicPartitionKey, int]:
        return {tp: self.marks[tp][1] if v == -1 else self.marks[tp][0] if v == -2 else v for tp, v in wanted.items()}

    def close(self) -> None:
        pass


def _pattern_options(**extra: str) -> KafkaSourceOptions:
    return KafkaSourceOptions.from_options(
        {"kafka.bootstrap.servers": "h:9092", "subscribePattern": "orders-.*", **extra}, streaming=True)


class TestSubscribePattern:
    def test_matching_in_full_without_internal_topics(self) -> None:
        """The option matches topic names in full; Kafka's internal topics are never read."""
        opts = KafkaSourceOptions.from_options(
            {"kafka.bootstrap.servers": "h:9092", "subscribePattern": ".*"}, streaming=True)
        assert (opts.topics, opts.pattern) == ((), ".*")
        assert [opts.reads(t) for t in ("orders-1", "__consumer_offsets", "__transaction_state")] == [
            True, False, False]
        assert not _pattern_options().reads("old-orders-1")

    @pytest.mark.parametrize("options, message", [
        ({"subscribe": "a", "subscribePattern": "a.*"},
         "options 'subscribe' and 'subscribePattern' cannot be used together; choose one."),
        ({"subscribePattern": "orders-("},
         "option 'subscribePattern' is not a valid regular expression (missing ), unterminated subpattern at "
         "position 7): 'orders-('."),
        ({"subscribePattern": "orders-.*", "startingOffsets": '{"refunds": {"0": 1}}'},
         "option 'startingOffsets' names topic 'refunds', which 'subscribePattern' (orders-.*) does not match; "
         "remove it from 'startingOffsets'."),
    ])
    def test_invalid_options(self, options: dict[str, str], message: str) -> None:
        """Each mistake is named with its fix."""
        with pytest.raises(KafkaOptionError) as caught:
            KafkaSourceOptions.from_options({"kafka.bootstrap.servers": "h:9092", **options}, streaming=True)
        assert str(caught.value) == message

    def test_new_topics_and_partitions_join_at_the_next_planning_from_earliest(self) -> None:
        """A query started at ``latest`` on orders-1; then orders-2 is created (with records
        before the next planning: low 0, high 3) and orders-1 gets a partition: the next
        batch plans both from their earliest offsets, while orders-1-0 goes on from its offset."""
        opts = _pattern_options(startingOffsets="latest")
        reader = KafkaStreamReader(opts)
        client = FakeMetadataClient(opts, {("orders-1", 0): (0, 10), ("refunds", 0): (0, 4)})
        reader._client_obj = client  # type: ignore[assignment]
        start = reader.initialOffset()
        assert start == {"orders-1": {"0": 10}}
        client.marks.update({("orders-1", 0): (0, 12), ("orders-1", 1): (0, 2), ("orders-2", 0): (0, 3)})
        end = reader.latestOffset(start, ReadAllAvailable())
        assert end == {"orders-1": {"0": 12, "1": 2}, "orders-2": {"0": 3}}
        ranges = [(p.topic, p.partition, p.start, p.end) for p in reader.partitions(start, end)]  # type: ignore[attr-defined]
        assert ranges == [("orders-1", 0, 10, 12), ("orders-1", 1, 0, 2), ("orders-2", 0, 0, 3)]


class TestSubscription:
    def test_each_connector_is_given_the_pattern_it_matches_in_full(self) -> None:
        """The Python source matches the pattern in full itself; Spark's connector keeps the topics
        where its admin listing *finds* the pattern (``Regex.findFirstIn``, Spark 4.2), so it is
        given the pattern anchored. A named-topic source subscribes by name on both."""
        from streamsdsl.runtime.jvm_connector import subscription

        b = StreamsBuilder()
        b.stream(re.compile("(?i)orders-.*")).to("out")
        b.stream(["b", "a"]).to("out")
        pattern_source, named = b.build().sources
        assert subscription(pattern_source) == ("subscribePattern", "(?i)orders-.*")
        assert subscription(pattern_source, jvm=True) == ("subscribePattern", "^(?:(?i)orders-.*)$")
        assert subscription(named, jvm=True) == subscription(named) == ("subscribe", "b,a")


class _Topic:
    def __init__(self, partitions: int) -> None:
        self.error, self.partitions = None, dict.fromkeys(range(partitions))


class _Metadata:
    """What librdkafka's ``list_topics()`` answers: topics by name."""

    def __init__(self, topics: dict[str, int]) -> None:
        self.topics = {name: _Topic(n) for name, n in topics.items()}


class TestTopicListing:
    """`OffsetClient.partitions` with ``subscribePattern``: one listing of the brokers' topics."""

    def _client(self, topics: dict[str, int], **extra: str) -> Any:
        from streamsdsl.io.client import OffsetClient

        client = OffsetClient(_pattern_options(**extra))
        meta = _Metadata(topics)
        client._consumer = type("FakeConsumer", (), {"list_topics": lambda self, timeout: meta})()  # type: ignore[assignment]
        return client

    def test_the_matching_topics_partitions(self) -> None:
        """Matched in full, internal topics left out, partitions in order."""
        client = self._client({"orders-b": 2, "orders-a": 1, "old-orders-a": 1, "__consumer_offsets": 50})
        assert client.partitions() == [("orders-a", 0), ("orders-b", 0), ("orders-b", 1)]

    def test_a_topic_another_source_pattern_matches_fails_the_query(self) -> None:
        """``otherPatterns`` (set by KafkaStreams): a topic created during the run that two sources'
        patterns match fails the query with Kafka Streams' message."""
        client = self._client({"orders-a": 1, "orders-eu": 1}, otherPatterns='["refunds-.*", "orders-e.*"]')
        with pytest.raises(KafkaSourceError) as caught:
            client.partitions()
        assert str(caught.value) == (
            "Topic orders-eu is already matched for another regex pattern orders-e.* and hence cannot be matched to "
            "this regex pattern orders-.* any more. A topic is read by one source: narrow the patterns.")

    @pytest.mark.parametrize("raw", ["refunds", '["("]', "[1]"])
    def test_other_patterns_must_be_a_json_list_of_patterns(self, raw: str) -> None:
        """A malformed ``otherPatterns`` is an option error."""
        with pytest.raises(KafkaOptionError, match="otherPatterns"):
            _pattern_options(otherPatterns=raw)

    def test_kafka_streams_tells_each_pattern_source_the_others(self) -> None:
        """The application's Python source of a pattern gets the other sources' patterns
        (``otherPatterns``); a named-topic source and a lone pattern get none."""
        from streamsdsl.runtime.config import StreamsConfig
        from streamsdsl.runtime.wiring import raw_source

        class Reader:
            def __init__(self) -> None:
                self.given: dict[str, str] = {}

            def format(self, name: str) -> Reader:
                return self

            def options(self, **opts: str) -> Reader:
                return self

            def option(self, key: str, value: str) -> Reader:
                self.given[key] = value
                return self

            def load(self) -> dict[str, str]:
                return self.given

        spark = type("Spark", (), {"readStream": property(lambda self: Reader())})()
        b = StreamsBuilder()
        for source in (re.compile("orders-.*"), re.compile("refunds-.*"), "audit"):
            b.stream(source).to("out")
        topology = b.build()
        config = StreamsConfig.from_mapping({"application.id": "a", "bootstrap.servers": "h:9092"})
        read = raw_source(spark, config, None, topology)  # type: ignore[arg-type]
        assert [read(s) for s in topology.sources] == [
            {"subscribePattern": "orders-.*", "otherPatterns": '["refunds-.*"]'},
            {"subscribePattern": "refunds-.*", "otherPatterns": '["orders-.*"]'},
            {"subscribe": "audit"},
        ]
