"""Options of the ``streamsdsl-kafka`` source and sink (`streamsdsl.io.options`): no broker, no Spark."""

from __future__ import annotations

import pickle
from collections.abc import Callable
from typing import Any

import pytest

from streamsdsl.errors import StreamsDslError
from streamsdsl.io import KafkaOptionError, KafkaSinkOptionError
from streamsdsl.io.options import KafkaSinkOptions, KafkaSourceOptions

BASE = {"kafka.bootstrap.servers": "h:1", "subscribe": "t"}


def _source(streaming: bool = True, **options: str) -> KafkaSourceOptions:
    return KafkaSourceOptions.from_options({**BASE, **options}, streaming=streaming)


def _source_error(streaming: bool = True, **options: Any) -> tuple[Any, ...]:
    with pytest.raises(KafkaOptionError) as info:
        KafkaSourceOptions.from_options(options, streaming=streaming)
    return info.value.args


class TestSourceOptions:
    """Invalid options fail at query start with a message naming the option and the fix."""

    def test_missing_subscribe(self) -> None:
        """``subscribe`` (or ``subscribePattern``) is required."""
        assert _source_error(**{"kafka.bootstrap.servers": "h:1"}) == (
            "option 'subscribe' is required: a comma-separated list of topics, e.g. "
            ".option('subscribe', 'orders,payments'), or 'subscribePattern': a regular expression, "
            "e.g. .option('subscribePattern', 'orders-.*').",
        )

    def test_bad_max_offsets_per_trigger(self) -> None:
        """``maxOffsetsPerTrigger`` must be a positive integer."""
        assert _source_error(**BASE, maxOffsetsPerTrigger="0") == (
            "option 'maxOffsetsPerTrigger' must be a positive integer (got '0').",
        )

    def test_starting_offsets_unknown_topic(self) -> None:
        """JSON offsets may only name subscribed topics."""
        assert _source_error(**BASE, startingOffsets='{"u": {"0": 1}}') == (
            "option 'startingOffsets' names topic 'u', which is not subscribed (t); "
            "add it to 'subscribe' or remove it from 'startingOffsets'.",
        )

    def test_forbidden_consumer_option(self) -> None:
        """``kafka.auto.offset.reset`` is replaced by ``startingOffsets``."""
        assert _source_error(**BASE, **{"kafka.auto.offset.reset": "earliest"}) == (
            "option 'kafka.auto.offset.reset' is not supported: use the 'startingOffsets' option instead.",
        )

    def test_starting_offsets_not_json(self) -> None:
        """A value that is neither a keyword nor JSON gets the accepted forms in the message."""
        assert _source_error(**BASE, startingOffsets="first") == (
            "option 'startingOffsets' must be 'earliest' or 'latest' or JSON like "
            "{\"t\": {\"0\": 23, \"1\": -1}} with offsets >= 0 or 'earliest' (-2), 'latest' (-1) "
            "(got 'first').",
        )

    def test_ending_offsets_rejects_earliest_sentinel(self) -> None:
        """``endingOffsets`` JSON allows -1 (latest) but not -2 (earliest)."""
        assert _source_error(streaming=False, **BASE, endingOffsets='{"t": {"0": -2}}') == (
            "option 'endingOffsets' must be 'latest' or JSON like {\"t\": {\"0\": 23, \"1\": -1}} "
            "with offsets >= 0 or 'latest' (-1) (got 't': {'0': -2}).",
        )

    def test_ending_offsets_only_for_batch(self) -> None:
        """``endingOffsets`` is rejected on a streaming read."""
        assert _source_error(**BASE, endingOffsets="latest") == (
            "option 'endingOffsets' is only valid for batch reads (spark.read); "
            "a streaming query reads until it is stopped, or use trigger(availableNow=True).",
        )

    def test_subscribe_twice(self) -> None:
        """A topic listed twice in ``subscribe`` is an error."""
        assert _source_error(**{"kafka.bootstrap.servers": "h:1", "subscribe": "a, b,a"}) == (
            "option 'subscribe' lists a topic twice: 'a, b,a'.",
        )

    def test_bad_fail_on_data_loss(self) -> None:
        """``failOnDataLoss`` takes true or false."""
        assert _source_error(**BASE, failOnDataLoss="maybe") == (
            "option 'failOnDataLoss' must be 'true' or 'false' (got 'maybe').",
        )

    def test_defaults(self) -> None:
        """Streaming starts at latest, batch at earliest; 120 s poll timeout."""
        streaming, batch = _source(), _source(streaming=False)
        assert (streaming.starting_offsets, batch.starting_offsets) == ("latest", "earliest")
        assert batch.ending_offsets == "latest"
        assert (streaming.max_offsets_per_trigger, streaming.poll_timeout_ms) == (None, 120_000)
        assert streaming.fail_on_data_loss is True
        assert streaming.consumer_conf == {}

    def test_values_are_parsed(self) -> None:
        """Keys are case-insensitive; values are parsed into their types."""
        opts = _source(
            **{
                "SUBSCRIBE": " a , b ",
                "maxoffsetspertrigger": "12",
                "failOnDataLoss": "false",
                "kafkaConsumer.pollTimeoutMs": "500",
                "startingOffsets": '{"a": {"0": 3, "1": -2}}',
                "kafka.Security.Protocol": "SSL",
            }
        )
        assert opts.topics == ("a", "b")
        assert opts.starting_offsets == {"a": {"0": 3, "1": -2}}
        assert (opts.max_offsets_per_trigger, opts.poll_timeout_ms, opts.fail_on_data_loss) == (12, 500, False)
        assert opts.consumer_conf == {"security.protocol": "SSL"}

    def test_client_conf_layers(self) -> None:
        """Consumer settings: defaults, then ``kafka.*`` passthrough, then the caller's overrides."""
        conf = _source(**{"kafka.isolation.level": "read_committed", "kafka.fetch.queue.backoff.ms": "50"}).client_conf(
            **{"fetch.queue.backoff.ms": 1}
        )
        assert conf["bootstrap.servers"] == "h:1"
        assert conf["isolation.level"] == "read_committed"
        assert conf["fetch.queue.backoff.ms"] == 1
        assert conf["enable.auto.commit"] is False
        assert conf["group.id"].startswith("streamsdsl-kafka-source-")

    def test_options_pickle(self) -> None:
        """Validated options travel to the executors: they survive pickling."""
        opts = _source(**{"maxOffsetsPerTrigger": "7", "kafka.security.protocol": "SSL"})
        assert pickle.loads(pickle.dumps(opts)) == opts

    def test_errors_are_value_errors(self) -> None:
        """Option errors are both streamsdsl errors and ValueErrors."""
        assert issubclass(KafkaOptionError, StreamsDslError)
        assert issubclass(KafkaOptionError, ValueError)
        assert issubclass(KafkaSinkOptionError, ValueError)


def _sink_error(**options: str) -> tuple[Any, ...]:
    with pytest.raises(KafkaSinkOptionError) as info:
        KafkaSinkOptions.from_options(options)
    return info.value.args


class TestSinkOptions:
    """The writer's options; its input schema is checked in ``test_sink.py``."""

    def test_missing_topic(self) -> None:
        """``topic`` is required."""
        assert _sink_error(**{"kafka.bootstrap.servers": "h:1"}) == (
            "option 'topic' is required: the topic to write to, e.g. .option('topic', 'out').",
        )

    def test_forbidden_producer_option(self) -> None:
        """``kafka.acks`` cannot weaken the producer's acknowledgements."""
        assert _sink_error(**{"kafka.bootstrap.servers": "h:1", "topic": "t", "kafka.acks": "1"}) == (
            "option 'kafka.acks' is not supported: the sink always waits for all in-sync replicas (acks=all).",
        )

    @pytest.mark.parametrize("value", ["0", "-5", "soon", ""])
    def test_bad_flush_timeout(self, value: str) -> None:
        """``kafka.flush.timeout.ms`` must be a positive integer (an empty value too)."""
        assert _sink_error(**{"kafka.bootstrap.servers": "h:1", "topic": "t", "kafka.flush.timeout.ms": value}) == (
            f"option 'kafka.flush.timeout.ms' must be a positive integer (got {value!r}).",
        )

    def test_values_and_client_conf(self) -> None:
        """Flush timeout parsed, ``kafka.*`` passed through, idempotence enforced."""
        opts = KafkaSinkOptions.from_options(
            {
                "Kafka.Bootstrap.Servers": "h:1",
                "topic": " out ",
                "kafka.flush.timeout.ms": "2500",
                "kafka.linger.ms": "20",
            }
        )
        assert opts == KafkaSinkOptions("h:1", "out", 2500, producer_conf={"linger.ms": "20"})
        assert opts.client_conf() == {
            "bootstrap.servers": "h:1",
            "partitioner": "murmur2_random",
            "linger.ms": "20",
            "enable.idempotence": True,
            "acks": "all",
        }

    def test_transactional_options(self) -> None:
        """``transactionalIdPrefix`` and ``transactionalBatch`` parsed; the transaction timeout defaults to
        10000 ms (Kafka Streams under exactly-once) and passes to librdkafka."""
        opts = KafkaSinkOptions.from_options({"kafka.bootstrap.servers": "h:1", "topic": "out",
                                              "transactionalIdPrefix": "app-KSTREAM-SINK-0000000001",
                                              "transactionalBatch": "9f0c-11:42"})
        assert (opts.transactional_id_prefix, opts.transactional_batch) == ("app-KSTREAM-SINK-0000000001", ("9f0c-11", 42))
        assert (opts.transaction_timeout_ms, opts.client_conf()["transaction.timeout.ms"]) == (10000, "10000")
        custom = KafkaSinkOptions.from_options({"kafka.bootstrap.servers": "h:1", "topic": "out", "transactionalIdPrefix": "a",
                                                "transactionalBatch": "q:0", "kafka.transaction.timeout.ms": "30000"})
        assert custom.transaction_timeout_ms == 30000

    @pytest.mark.parametrize("batch", [None, "42", "q:", "q:-1", ":3"])
    def test_transactional_batch_is_required_with_a_prefix(self, batch: str | None) -> None:
        """A transactional write needs its identity ``<query id>:<batch id>``."""
        options = {"kafka.bootstrap.servers": "h:1", "topic": "t", "transactionalIdPrefix": "a"}
        if batch is not None:
            options["transactionalBatch"] = batch
        assert _sink_error(**options) == (
            f"option 'transactionalBatch' must be '<query id>:<batch id>' with 'transactionalIdPrefix' (got {batch!r}), "
            "e.g. 'c0ffee:12'.",
        )

    def test_transactional_batch_without_prefix(self) -> None:
        """A batch identity alone is a mistake: refused, naming the missing option."""
        assert _sink_error(**{"kafka.bootstrap.servers": "h:1", "topic": "t", "transactionalBatch": "q:1"}) == (
            "option 'transactionalBatch' needs 'transactionalIdPrefix': it identifies a transactional write.",
        )

    def test_transactional_id_is_the_sinks_own(self) -> None:
        """``kafka.transactional.id`` is refused, naming the option that enables exactly-once."""
        assert _sink_error(**{"kafka.bootstrap.servers": "h:1", "topic": "t", "kafka.transactional.id": "x"}) == (
            "option 'kafka.transactional.id' is not supported: the sink names its transactional producers itself; set "
            "the option 'transactionalIdPrefix' (KafkaStreams: 'processing.guarantee' = 'exactly_once_v2') for "
            "exactly-once.",
        )


class TestBothOptions:
    """What the source and the sink check alike, each with its own error type."""

    @pytest.mark.parametrize(
        ("check", "options"),
        [(_source_error, {"subscribe": "t"}), (_sink_error, {"topic": "t"})],
        ids=["source", "sink"],
    )
    def test_missing_bootstrap_servers(self, check: Callable[..., tuple[Any, ...]], options: dict[str, str]) -> None:
        """``kafka.bootstrap.servers`` is required."""
        assert check(**options) == (
            "option 'kafka.bootstrap.servers' is required, e.g. "
            ".option('kafka.bootstrap.servers', 'localhost:9092').",
        )

    @pytest.mark.parametrize("value", ["kafka", "tansu"])
    @pytest.mark.parametrize(
        ("check", "options"),
        [(_source_error, {"subscribe": "t"}), (_sink_error, {"topic": "t"})],
        ids=["source", "sink"],
    )
    def test_removed_compat(self, check: Callable[..., tuple[Any, ...]], options: dict[str, str], value: str) -> None:
        """``kafka.broker.compat`` was removed with the Tansu broker: refused, whatever its value (not passed
        on to librdkafka as ``broker.compat``)."""
        assert check(**options, **{"kafka.bootstrap.servers": "h:1", "Kafka.Broker.Compat": value}) == (
            "option 'kafka.broker.compat' is not supported: it was removed with the Tansu broker: the source reads "
            "every partition up to its high watermark, which Apache Kafka (the local broker too) reports exactly; "
            "drop the option.",
        )
