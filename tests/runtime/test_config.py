"""`StreamsConfig.from_mapping`: every configuration rule, without a broker or Spark."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import attrs
import pytest

from streamsdsl import StreamsBuilder
from streamsdsl.dsl.options import DeserializationHandler
from streamsdsl.errors import InvalidTypeError, StreamsDslError
from streamsdsl.ir.topology import Topology
from streamsdsl.runtime.app import KafkaStreams, State
from streamsdsl.runtime.config import (
    KNOWN_KEYS,
    Connector,
    OffsetReset,
    ProcessingGuarantee,
    StreamsConfig,
    StreamsConfigError,
)

BASE = {"application.id": "orders", "bootstrap.servers": "k:9092"}


def config(**overrides: Any) -> StreamsConfig:
    """``BASE`` plus ``overrides``, whose keys use ``_`` for ``.`` (``auto_offset_reset=...``)."""
    return StreamsConfig.from_mapping({**BASE, **{k.replace("_", "."): v for k, v in overrides.items()}})


def error(mapping: Any) -> str:
    """The one message `from_mapping` rejects ``mapping`` with."""
    with pytest.raises(StreamsConfigError) as info:
        StreamsConfig.from_mapping(mapping)
    assert len(info.value.args) == 1
    return str(info.value.args[0])


def topology() -> Topology:
    """A one-source, one-sink topology."""
    builder = StreamsBuilder()
    builder.stream("in").to("out")
    return builder.build()


class TestKeys:
    def test_unknown_key_suggests_the_closest_known_key(self) -> None:
        """A misspelt key is rejected with a did-you-mean and the list of known keys."""
        assert error({**BASE, "commit.interval": 100}) == (
            "unknown configuration key 'commit.interval' (did you mean 'commit.interval.ms'?). Known keys: "
            f"{', '.join(KNOWN_KEYS)}; librdkafka settings go under 'consumer.' or 'producer.', Spark settings "
            "under 'spark.'."
        )

    def test_unknown_key_without_a_close_match_has_no_suggestion(self) -> None:
        """A key like no known one is rejected without a did-you-mean."""
        assert error({**BASE, "zzz": 1}).startswith("unknown configuration key 'zzz'. Known keys: application.id, ")

    def test_config_must_be_a_mapping(self) -> None:
        """A non-mapping config names its type and shows an example."""
        assert error([("application.id", "a")]) == (
            "'config' must be a mapping of configuration keys to values (got list), "
            "e.g. {'application.id': 'my-app', 'bootstrap.servers': 'localhost:9092'}."
        )

    def test_the_config_error_is_a_value_error(self) -> None:
        """StreamsConfigError subclasses the project base error and ValueError."""
        assert issubclass(StreamsConfigError, StreamsDslError) and issubclass(StreamsConfigError, ValueError)


class TestRequiredKeys:
    @pytest.mark.parametrize("app_id", [None, "", "   "])
    def test_application_id_is_required(self, app_id: str | None) -> None:
        """A missing or blank application.id says what it is for."""
        mapping = {"bootstrap.servers": "k:9092"} if app_id is None else {**BASE, "application.id": app_id}
        assert error(mapping) == (
            "'application.id' is required: it names the checkpoint directory (state.dir/application.id) and the "
            "Spark query, e.g. {'application.id': 'orders-per-customer'}."
        )

    @pytest.mark.parametrize("app_id", ["orders/eu", "..", "a" * 250, "zähler"])
    def test_application_id_must_be_a_directory_name(self, app_id: str) -> None:
        """application.id is 1-249 characters of A-Z a-z 0-9 . _ - (and not . or ..)."""
        assert error({**BASE, "application.id": app_id}) == (
            f"'application.id' must be 1-249 characters of A-Z a-z 0-9 . _ - (got {app_id!r}); "
            "it becomes a directory name, e.g. 'orders-per-customer'."
        )

    @pytest.mark.parametrize("servers", [None, "", " ", []])
    def test_bootstrap_servers_is_required(self, servers: Any) -> None:
        """A missing or blank bootstrap.servers shows the expected form."""
        mapping = {"application.id": "a"} if servers is None else {**BASE, "bootstrap.servers": servers}
        assert error(mapping) == (
            "'bootstrap.servers' is required: host:port[,host:port...] of the Kafka brokers, "
            "e.g. {'bootstrap.servers': 'localhost:9092'}."
        )

    def test_bootstrap_servers_may_be_a_list(self) -> None:
        """A list of brokers is joined with commas; surrounding blanks are stripped."""
        assert config(bootstrap_servers=[" a:1", "b:2 "]).bootstrap_servers == "a:1,b:2"
        assert config(bootstrap_servers=" a:1 ").bootstrap_servers == "a:1"


class TestDefaults:
    def test_defaults_are_kafka_streams_defaults(self) -> None:
        """Only the two required keys: every other setting takes its documented default."""
        c = StreamsConfig.from_mapping(BASE)
        assert c == StreamsConfig(application_id="orders", bootstrap_servers="k:9092")
        assert (c.state_dir, c.commit_interval_ms, c.max_offsets_per_trigger) == ("/tmp/streamsdsl", 1000, None)
        assert c.processing_guarantee is ProcessingGuarantee.AT_LEAST_ONCE
        assert c.auto_offset_reset is OffsetReset.EARLIEST
        assert c.deserialization_handler is DeserializationHandler.LOG_AND_FAIL
        assert c.connector is Connector.PYTHON
        assert c.dead_letter_topic is None

    def test_config_is_frozen(self) -> None:
        """A StreamsConfig cannot be changed after validation."""
        with pytest.raises(attrs.exceptions.FrozenInstanceError):
            config().application_id = "other"  # type: ignore[misc]

    def test_blank_values_take_the_default(self) -> None:
        """A blank string, as in an empty Java property, means the default."""
        c = config(commit_interval_ms=" ", auto_offset_reset="", kafka_connector=" ", state_dir="")
        assert (c.commit_interval_ms, c.auto_offset_reset, c.connector, c.state_dir) == (
            1000, OffsetReset.EARLIEST, Connector.PYTHON, "/tmp/streamsdsl",
        )


class TestIntegers:
    @pytest.mark.parametrize(
        ("key", "value", "message"),
        [
            ("commit.interval.ms", "soon", "'commit.interval.ms' must be an integer >= 0 (got 'soon')."),
            ("commit.interval.ms", -1, "'commit.interval.ms' must be an integer >= 0 (got -1)."),
            ("commit.interval.ms", True, "'commit.interval.ms' must be an integer >= 0 (got True)."),
            ("commit.interval.ms", 1.5, "'commit.interval.ms' must be an integer >= 0 (got 1.5)."),
            ("max.offsets.per.trigger", 0, "'max.offsets.per.trigger' must be an integer >= 1 (got 0)."),
            ("max.offsets.per.trigger", "-3", "'max.offsets.per.trigger' must be an integer >= 1 (got -3)."),
        ],
    )
    def test_bad_integer_is_rejected(self, key: str, value: Any, message: str) -> None:
        """A non-integer or too small value names the key and the minimum."""
        assert error({**BASE, key: value}) == message

    def test_integers_may_be_strings(self) -> None:
        """Integer settings accept Java-properties strings."""
        c = config(commit_interval_ms=" 250 ", max_offsets_per_trigger="100")
        assert (c.commit_interval_ms, c.max_offsets_per_trigger) == (250, 100)
        assert c.trigger == {"processingTime": "250 milliseconds"}
        assert config(commit_interval_ms=0).commit_interval_ms == 0


class TestProcessingGuarantee:
    @pytest.mark.parametrize("value", ["exactly_once", "EXACTLY_ONCE_BETA"])
    def test_removed_exactly_once_values_name_exactly_once_v2(self, value: str) -> None:
        """Kafka Streams' exactly-once values removed in 4.0 are refused, naming the one to use."""
        assert error({**BASE, "processing.guarantee": value}) == (
            f"'processing.guarantee' = {value.lower()!r} was removed in Kafka Streams 4.0 and is not supported; "
            "set it to 'exactly_once_v2' for exactly-once (Kafka transactions, brokers 2.5 or newer)."
        )

    def test_other_values_are_rejected(self) -> None:
        """Any other value names the accepted values."""
        assert error({**BASE, "processing.guarantee": "at_most_once"}) == (
            "'processing.guarantee' must be 'at_least_once' or 'exactly_once_v2' (got 'at_most_once')."
        )

    def test_at_least_once_is_parsed_to_the_enum(self) -> None:
        """'AT_LEAST_ONCE' in any case is ProcessingGuarantee.AT_LEAST_ONCE."""
        c = config(processing_guarantee=" AT_LEAST_ONCE ")
        assert (c.processing_guarantee, c.exactly_once) == (ProcessingGuarantee.AT_LEAST_ONCE, False)

    def test_exactly_once_v2_is_parsed_to_the_enum(self) -> None:
        """'EXACTLY_ONCE_V2' in any case is ProcessingGuarantee.EXACTLY_ONCE_V2; the producer settings pass on."""
        c = config(processing_guarantee="EXACTLY_ONCE_V2", producer_transaction_timeout_ms="30000")
        assert (c.processing_guarantee, c.exactly_once) == (ProcessingGuarantee.EXACTLY_ONCE_V2, True)
        assert c.sink_options() == {"kafka.bootstrap.servers": "k:9092", "kafka.transaction.timeout.ms": "30000"}

    def test_exactly_once_refuses_a_transactional_id(self) -> None:
        """The sink names its transactional producers; a user's transactional.id is refused with why."""
        assert error({**BASE, "processing.guarantee": "exactly_once_v2", "producer.transactional.id": "mine"}) == (
            "'producer.transactional.id' cannot be set with 'processing.guarantee' = 'exactly_once_v2': the sink "
            "names its transactional producers itself (<application.id>-<sink>-<partition>, so that a restarted or "
            "second instance fences the first); remove it."
        )

    @pytest.mark.parametrize(("key", "value", "needs"), [
        ("producer.enable.idempotence", "false", "enable.idempotence=true"), ("producer.acks", "1", "acks=all")])
    def test_exactly_once_refuses_weaker_producer_settings(self, key: str, value: str, needs: str) -> None:
        """Idempotence off or acks other than all contradict transactions: refused, naming the setting."""
        assert error({**BASE, "processing.guarantee": "exactly_once_v2", key: value}) == (
            f"'{key}' = {value!r} contradicts 'processing.guarantee' = 'exactly_once_v2', which needs {needs}; "
            "remove the setting."
        )

    def test_exactly_once_transaction_timeout_has_librdkafkas_minimum(self) -> None:
        """``producer.transaction.timeout.ms`` below 1000 (librdkafka's minimum) is refused."""
        assert error({**BASE, "processing.guarantee": "exactly_once_v2", "producer.transaction.timeout.ms": 500}) == (
            "'producer.transaction.timeout.ms' must be an integer >= 1000 (got 500)."
        )


class TestOffsetReset:
    @pytest.mark.parametrize(("value", "expected"), [("earliest", OffsetReset.EARLIEST), ("LATEST", OffsetReset.LATEST)])
    def test_values_are_parsed_to_the_enum(self, value: str, expected: OffsetReset) -> None:
        """auto.offset.reset is case-insensitive and becomes an OffsetReset."""
        assert config(auto_offset_reset=value).auto_offset_reset is expected

    def test_bad_value_is_rejected(self) -> None:
        """An unknown value lists both and says when the setting applies."""
        assert error({**BASE, "auto.offset.reset": "newest"}) == (
            "'auto.offset.reset' must be 'earliest' or 'latest' (got 'newest'); "
            "it applies only when the application starts without a checkpoint."
        )


class TestRemovedKeys:
    @pytest.mark.parametrize("value", ["kafka", "tansu"])
    def test_broker_compat_is_refused_with_what_replaced_it(self, value: str) -> None:
        """kafka.broker.compat went with the Tansu broker: refused whatever its value, saying why."""
        assert error({**BASE, "kafka.broker.compat": value}) == (
            "configuration key 'kafka.broker.compat' is not supported: it was removed with the Tansu broker: the "
            "source reads every partition up to its high watermark, which Apache Kafka reports exactly (the local "
            "broker, local_kafka() and streamsdsl dev-broker, is Apache Kafka too); drop the key."
        )


class TestConnector:
    def test_kafka_connector_rejects_an_unknown_value(self) -> None:
        """A bad kafka.connector fails at construction with the allowed values; good ones parse to the enum."""
        mapping = {**BASE, "kafka.connector": "scala"}
        assert error(mapping) == (
            "'kafka.connector' must be \"python\" or \"jvm\" (got 'scala'); \"python\" (the default) reads with "
            "the streamsdsl-kafka data source, \"jvm\" with Spark's Kafka connector (spark-sql-kafka-0-10), which "
            "must be on the classpath."
        )
        with pytest.raises(StreamsConfigError, match=r"'kafka.connector' must be \"python\" or \"jvm\""):
            KafkaStreams(topology(), mapping)
        for ok, expected in [("python", Connector.PYTHON), ("jvm", Connector.JVM), ("JVM", Connector.JVM),
                             (" python ", Connector.PYTHON)]:
            assert KafkaStreams(topology(), {**mapping, "kafka.connector": ok}).config.connector is expected


class TestRealTimeTrigger:
    def test_real_time_takes_its_checkpoint_interval_from_commit_interval(self) -> None:
        """``streamsdsl.trigger = real_time`` gives Spark's real-time trigger with ``commit.interval.ms``
        (default 5000, Spark's minimum) as its checkpoint interval; the default stays micro-batches."""
        jvm = {**BASE, "kafka.connector": "jvm"}
        assert StreamsConfig.from_mapping(jvm).trigger == {"processingTime": "1000 milliseconds"}
        real_time = {**jvm, "streamsdsl.trigger": "real_time"}
        assert StreamsConfig.from_mapping(real_time).trigger == {"realTime": "5000 milliseconds"}
        assert StreamsConfig.from_mapping({**real_time, "commit.interval.ms": 8000}).trigger == {
            "realTime": "8000 milliseconds"}
        lowered = {**real_time, "commit.interval.ms": 500, "spark.sql.streaming.realTimeMode.minBatchDuration": 500}
        assert StreamsConfig.from_mapping(lowered).trigger == {"realTime": "500 milliseconds"}

    @pytest.mark.parametrize(
        ("extra", "expected"),
        [
            ({"kafka.connector": "python"}, "needs 'kafka.connector' = \"jvm\": Spark's real-time mode reads only "
             "with its own Kafka connector (it refuses the streamsdsl-kafka Python data source, "
             "INPUT_STREAM_NOT_SUPPORTED)."),
            ({"processing.guarantee": "exactly_once_v2"}, "cannot run with 'processing.guarantee' = "
             "'exactly_once_v2': it writes with Spark's Kafka sink, which is at-least-once (no transactions); use "
             "'at_least_once' or the micro-batch trigger."),
            ({"default.deserialization.exception.handler": "log_and_continue"}, "needs "
             "'default.deserialization.exception.handler' = 'log_and_fail': the skipped records of "
             "'log_and_continue' are logged and written by the micro-batch sink, which real-time mode cannot run."),
            ({"max.offsets.per.trigger": 10}, "does not take 'max.offsets.per.trigger': a real-time batch reads "
             "every record that arrives until its checkpoint interval (commit.interval.ms) ends; remove the key."),
            ({"commit.interval.ms": 1000}, "needs 'commit.interval.ms' >= 5000 (got 1000): it is the real-time "
             "checkpoint interval (how long each long-running batch reads before its offsets are committed), and "
             "Spark refuses less than 'spark.sql.streaming.realTimeMode.minBatchDuration' (default 5000 ms); leave "
             "the key out for 5000 ms, or set that Spark setting lower in this configuration too."),
        ],
    )
    def test_real_time_refuses_what_it_cannot_run(self, extra: dict[str, Any], expected: str) -> None:
        mapping = {**BASE, "kafka.connector": "jvm", "streamsdsl.trigger": "real_time", **extra}
        assert error(mapping) == "'streamsdsl.trigger' = 'real_time' " + expected

    def test_a_topology_with_state_is_refused_before_its_plan_is_read(self) -> None:
        """`check_real_time` names the stateful nodes (the compiler's operator report) and Spark's limit;
        no Spark needed: the state is known before the plan is read."""
        from types import SimpleNamespace

        from streamsdsl.errors import TopologyError
        from streamsdsl.runtime.streaming import check_real_time

        builder = StreamsBuilder()
        builder.stream("clicks").group_by_key().count().to_stream().to("counts")
        compiled = SimpleNamespace(operators={"KSTREAM-AGGREGATE-0000000002": "jvm"})
        with pytest.raises(TopologyError) as info:
            check_real_time(builder.build(), compiled)  # type: ignore[arg-type]
        assert str(info.value) == (
            "'streamsdsl.trigger' = 'real_time' cannot run this topology: the topology has state "
            "(KSTREAM-AGGREGATE-0000000002): Spark's real-time mode runs stateless queries only (in Spark 4.2; "
            "aggregations, deduplication and transformWithState come in Spark 4.3). Use the default micro-batch "
            "trigger for it.")

    def test_an_unknown_trigger_names_the_values(self) -> None:
        assert error({**BASE, "streamsdsl.trigger": "continuous"}) == (
            "'streamsdsl.trigger' must be 'micro_batch' or 'real_time' (got 'continuous'); 'micro_batch' (the "
            "default) runs a micro-batch every commit.interval.ms, 'real_time' runs Spark's real-time mode "
            "(stateless Column-step topologies on kafka.connector=\"jvm\").")


class TestDeserializationHandler:
    @pytest.mark.parametrize(
        ("value", "expected"),
        [
            ("log_and_fail", DeserializationHandler.LOG_AND_FAIL),
            ("LOG_AND_CONTINUE", DeserializationHandler.LOG_AND_CONTINUE),
            ("LogAndFailExceptionHandler", DeserializationHandler.LOG_AND_FAIL),
            ("LogAndContinueExceptionHandler", DeserializationHandler.LOG_AND_CONTINUE),
            ("org.apache.kafka.streams.errors.LogAndContinueExceptionHandler", DeserializationHandler.LOG_AND_CONTINUE),
            ("org.apache.kafka.streams.errors.LogAndFailExceptionHandler", DeserializationHandler.LOG_AND_FAIL),
            (DeserializationHandler.LOG_AND_CONTINUE, DeserializationHandler.LOG_AND_CONTINUE),
        ],
    )
    def test_names_and_kafka_class_names_are_parsed(self, value: Any, expected: DeserializationHandler) -> None:
        """The handler accepts its values and Kafka Streams' class names, short or qualified."""
        c = config(default_deserialization_exception_handler=value)
        assert c.deserialization_handler is expected

    def test_bad_value_is_rejected(self) -> None:
        """An unknown handler names both accepted values."""
        assert error({**BASE, "default.deserialization.exception.handler": " skip "}) == (
            "'default.deserialization.exception.handler' must be 'log_and_fail' or 'log_and_continue' (got 'skip')."
        )


class TestDeadLetterTopic:
    CONTINUE = {**BASE, "default.deserialization.exception.handler": "log_and_continue"}

    def test_dead_letter_topic_needs_log_and_continue(self) -> None:
        """With log_and_fail a dead-letter topic would never be written: rejected."""
        assert error({**BASE, "errors.dead.letter.topic": "orders-dlq"}) == (
            "'errors.dead.letter.topic' = 'orders-dlq' needs 'default.deserialization.exception.handler' = "
            "'log_and_continue': with 'log_and_fail' a bad record stops the application before anything is written."
        )

    @pytest.mark.parametrize("key", ["errors.dead.letter.topic", "errors.dead.letter.queue.topic.name"])
    def test_either_key_sets_the_topic(self, key: str) -> None:
        """errors.dead.letter.queue.topic.name is an alias of errors.dead.letter.topic."""
        assert StreamsConfig.from_mapping({**self.CONTINUE, key: " orders-dlq "}).dead_letter_topic == "orders-dlq"

    def test_key_and_alias_must_agree(self) -> None:
        """Two different dead-letter topics are rejected; the same one twice is fine."""
        both = {**self.CONTINUE, "errors.dead.letter.topic": "a", "errors.dead.letter.queue.topic.name": "b"}
        assert error(both) == (
            "'errors.dead.letter.topic' ('a') and its alias 'errors.dead.letter.queue.topic.name' ('b') disagree; "
            "set only one."
        )
        same = {**both, "errors.dead.letter.queue.topic.name": "a"}
        assert StreamsConfig.from_mapping(same).dead_letter_topic == "a"


class TestEnumFields:
    @pytest.mark.parametrize(
        "field", ["processing_guarantee", "auto_offset_reset", "deserialization_handler", "connector"]
    )
    def test_enum_fields_reject_plain_strings(self, field: str) -> None:
        """Built directly, an enum field takes only a member of its enum."""
        with pytest.raises(TypeError, match=f"'{field}' must be"):
            StreamsConfig("a", "k:9092", **{field: "x"})


class TestPassthrough:
    def test_prefixes_are_routed_to_spark_consumer_and_producer(self) -> None:
        """spark.* stay whole; consumer.* and producer.* lose their prefix; security settings reach both clients."""
        c = StreamsConfig.from_mapping({
            **BASE,
            "spark.sql.shuffle.partitions": 4,
            "consumer.fetch.min.bytes": 1,
            "producer.linger.ms": "5",
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "PLAIN",
            "ssl.ca.location": "/ca.pem",
        })
        assert c.spark_conf == {"spark.sql.shuffle.partitions": "4"}
        shared = {"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN", "ssl.ca.location": "/ca.pem"}
        assert c.consumer_conf == {"fetch.min.bytes": "1", **shared}
        assert c.producer_conf == {"linger.ms": "5", **shared}
        assert c.admin_conf == {"bootstrap.servers": "k:9092", **shared}

    @pytest.mark.parametrize("first", ["shared", "client"])
    def test_a_client_setting_wins_over_a_shared_one(self, first: str) -> None:
        """consumer.security.protocol overrides security.protocol for the source only, in either order."""
        pairs = [("security.protocol", "SSL"), ("consumer.security.protocol", "PLAINTEXT")]
        c = StreamsConfig.from_mapping({**BASE, **dict(pairs if first == "shared" else pairs[::-1])})
        assert c.consumer_conf == {"security.protocol": "PLAINTEXT"}
        assert c.producer_conf == {"security.protocol": "SSL"}

    def test_source_and_sink_options(self) -> None:
        """The reader and writer options carry the brokers, the settings and the client confs as kafka.*."""
        c = config(auto_offset_reset="latest", max_offsets_per_trigger=10,
                   consumer_isolation_level="read_committed", producer_acks="all")
        assert c.source_options() == {
            "kafka.bootstrap.servers": "k:9092",
            "startingOffsets": "latest",
            "maxOffsetsPerTrigger": "10",
            "kafka.isolation.level": "read_committed",
        }
        assert c.jvm_source_options() == {
            "kafka.bootstrap.servers": "k:9092",
            "startingOffsets": "latest",
            "maxOffsetsPerTrigger": "10",
            "kafka.isolation.level": "read_committed",
            "includeHeaders": "true",
        }
        assert c.sink_options() == {"kafka.bootstrap.servers": "k:9092", "kafka.acks": "all"}
        assert all(type(v) is str for v in [*c.source_options().values(), *c.jvm_source_options().values()])

    def test_global_table_options(self) -> None:
        """A global table's reader starts at the earliest offset and has no admission limit, on
        both connectors (its whole topic is read in the first micro-batch); the rest is kept."""
        c = config(auto_offset_reset="latest", max_offsets_per_trigger=10, consumer_isolation_level="read_committed")
        assert c.global_table_options(c.source_options()) == {
            "kafka.bootstrap.servers": "k:9092", "startingOffsets": "earliest",
            "kafka.isolation.level": "read_committed"}
        assert c.global_table_options(c.jvm_source_options()) == {
            "kafka.bootstrap.servers": "k:9092", "startingOffsets": "earliest",
            "kafka.isolation.level": "read_committed", "includeHeaders": "true"}

    def test_state_directories(self) -> None:
        """The checkpoint lives under state.dir/application.id."""
        c = config(state_dir="/data/streams")
        assert (c.app_dir, c.checkpoint_location) == ("/data/streams/orders", "/data/streams/orders/checkpoint")


class TestKafkaStreamsConstruction:
    def test_construction_validates_the_config(self) -> None:
        """KafkaStreams validates its config when constructed and starts in CREATED."""
        app = KafkaStreams(topology(), BASE)
        assert app.config == StreamsConfig.from_mapping(BASE)
        assert app.state() is State.CREATED and app.streaming_query is None
        assert repr(app) == "KafkaStreams(application.id='orders', state=CREATED)"

    def test_query_is_no_trap(self) -> None:
        """``query`` is Kafka Streams' IQv2 query (not here yet): before and after start it
        raises an error naming the docs' row and where Spark's StreamingQuery is, not
        ``'NoneType' object is not callable``."""
        from streamsdsl import NotYetImplementedError

        app = KafkaStreams(topology(), BASE)
        with pytest.raises(NotYetImplementedError) as info:
            app.query()
        assert info.value.args == (
            "KafkaStreams.query() is not implemented yet: see docs/differences.md, \"Not yet implemented\", the row "
            "IQv2. Spark's StreamingQuery is KafkaStreams.streaming_query (None before start()).",
        )
        assert isinstance(info.value, AttributeError) and app.streaming_query is None

    def test_topology_must_be_a_topology(self) -> None:
        """Anything but a built Topology is a type error naming StreamsBuilder.build()."""
        with pytest.raises(InvalidTypeError) as info:
            KafkaStreams(StreamsBuilder(), BASE)  # type: ignore[arg-type]
        assert info.value.args == (
            "'topology' must be a Topology from StreamsBuilder.build() (got StreamsBuilder).",
        )

    def test_topology_needs_a_sink(self) -> None:
        """A topology without .to() cannot run."""
        builder = StreamsBuilder()
        builder.stream("in")
        with pytest.raises(StreamsConfigError) as info:
            KafkaStreams(builder.build(), BASE)
        assert info.value.args == ("the topology has no sink: add .to(topic) somewhere to run it.",)

    def test_close_before_start(self) -> None:
        """close() before start() succeeds at once and leaves the application NOT_RUNNING."""
        app = KafkaStreams(topology(), BASE)
        assert app.close() is True
        assert app.state() is State.NOT_RUNNING


class TestImports:
    @pytest.mark.parametrize(
        "module",
        ["streamsdsl.runtime.config", "streamsdsl.runtime.errors", "streamsdsl.runtime.app",
         "streamsdsl.runtime.jvm_connector", "streamsdsl.runtime.kafka_sink"],
    )
    def test_no_pyspark_at_import(self, module: str) -> None:
        """The runtime modules import pyspark only when they run Spark (checked in a fresh interpreter)."""
        code = f"import sys, {module}; print(sorted(m for m in sys.modules if m.split('.')[0] in ('pyspark', 'py4j')))"
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
        assert out.strip() == "[]"


class TestShip:
    @pytest.mark.parametrize(("value", "decision"), [(None, None), ("auto", None), ("ALWAYS", True), ("never", False)])
    def test_values(self, value: str | None, decision: bool | None) -> None:
        """``streamsdsl.ship`` (case-insensitive) decides whether a session `KafkaStreams` builds
        ships streamsdsl; ``auto`` (the default) leaves it to the master."""
        got = StreamsConfig.from_mapping({**BASE, **({} if value is None else {"streamsdsl.ship": value})})
        assert got.ship.decision is decision

    def test_other_values_are_rejected_with_their_meaning(self) -> None:
        assert error({**BASE, "streamsdsl.ship": "yes"}) == (
            "'streamsdsl.ship' must be 'auto' or 'always' or 'never' (got 'yes'); 'auto' (the default) ships "
            "streamsdsl to the Python processes of a cluster's master (spark://, yarn, k8s://), 'always' to any "
            "master's, 'never' to none (its Python has streamsdsl installed).")
