"""``kafka.connector = "jvm"``: the source topics read by Spark's JVM Kafka connector.

``make install`` resolves the connector (``streamsdsl kafka-connector``) and the test session
loads it from the user's cache; `test_kafka_streams_app` runs every end-to-end scenario on both
connectors. Here: the raw-record columns through the connector, and the error ``start()``
raises when the connector's class cannot be loaded (a class that does not exist stands in for
it, so the check runs on the session that has the connector). The checks of the
``kafka.connector`` value are pure: ``tests/runtime/test_config.py``.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TYPE_CHECKING

import pytest

from streamsdsl import Consumed, Produced, Serdes, StreamsBuilder
from streamsdsl.runtime.app import KafkaStreams, State
from streamsdsl.errors import TopologyError
from streamsdsl.runtime.config import StreamsConfigError
from streamsdsl.runtime import jvm_connector
from streamsdsl.runtime.jvm_connector import (
    JVM_KAFKA_PROVIDER,
    connector_jars,
    jvm_kafka_connector_available,
    jvm_kafka_package,
)
from streamsdsl.testing.local_kafka import LocalKafka

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from streamsdsl.ir.topology import Topology

T = 1_700_000_000_000  # a base timestamp (ms)


def _doubled_positive(source: str, sink: str) -> Topology:
    """source (String, Long) → keep amounts > 0 → double → sink (String, Long)."""
    builder = StreamsBuilder()
    (
        builder.stream(source, Consumed.with_serdes(Serdes.String(), Serdes.Long()))
        .filter(lambda key, amount: amount > 0)
        .map_values(lambda amount: amount * 2)
        .to(sink, Produced.with_serdes(Serdes.String(), Serdes.Long()))
    )
    return builder.build()


@pytest.mark.integration
@pytest.mark.spark
def test_start_without_the_connector_names_the_package(
    spark: SparkSession, streams_config: Callable[..., dict[str, object]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without the connector's class, ``start()`` fails before anything runs, naming the command
    that resolves it and the Maven package of the session's Spark version."""
    assert jvm_kafka_connector_available(spark), "the session lacks the connector that make install resolves"
    assert JVM_KAFKA_PROVIDER == "org.apache.spark.sql.kafka010.KafkaSourceProvider"
    monkeypatch.setattr(jvm_connector, "JVM_KAFKA_PROVIDER", "org.apache.spark.sql.kafka010.NotThere")
    app = KafkaStreams(_doubled_positive("in", "out"), streams_config("jvm-missing", {"kafka.connector": "jvm"}),
                       spark=spark)
    with pytest.raises(StreamsConfigError) as info:
        app.start()
    message = str(info.value)
    assert f"org.apache.spark:spark-sql-kafka-0-10_2.13:{spark.version}" in message
    assert jvm_kafka_package(spark) in message
    assert "org.apache.spark.sql.kafka010.NotThere is not on the classpath" in message
    assert "`streamsdsl kafka-connector`" in message
    assert "spark.jars.packages" in message
    assert app.streaming_query is None


@pytest.mark.integration
def test_the_cached_connector_is_the_installed_spark_version() -> None:
    """The jars a session loads are the connector of the installed PySpark's version and the
    dependencies Spark does not ship (``kafka-clients``, ``commons-pool2``, the token provider),
    never a second copy of a jar Spark ships (Scala, Hadoop's client)."""
    from pyspark.version import __version__

    names = sorted(os.path.basename(j) for j in connector_jars())
    assert f"spark-sql-kafka-0-10_2.13-{__version__}.jar" in names
    assert f"spark-token-provider-kafka-0-10_2.13-{__version__}.jar" in names
    assert any(n.startswith("kafka-clients-") for n in names)
    assert any(n.startswith("commons-pool2-") for n in names)
    assert not any(n.startswith(("scala-library-", "hadoop-client-", "spark-tags_")) for n in names), names


@pytest.mark.integration
@pytest.mark.spark
def test_jvm_connector_kafka_to_kafka(
    spark: SparkSession,
    kafka: LocalKafka,
    new_topic: Callable[..., str],
    streams_config: Callable[..., dict[str, object]],
) -> None:
    """A tiny topology Kafka → Kafka with the JVM connector as source: values, keys, record
    timestamps and the raw-record columns (headers included) arrive as with the Python source."""
    source, sink = new_topic(2), new_topic(1)
    long = Serdes.Long()
    kafka.produce(source, [
        (b"a", long.serialize(5), T + 1_000, 0, [("trace", b"t-1")]),
        (b"b", long.serialize(-1), T + 2_000, 1),  # filtered out
        (b"c", long.serialize(7), T + 3_000, 1),
        (b"a", long.serialize(1), T + 4_000, 0),
    ])
    app = KafkaStreams(_doubled_positive(source, sink), streams_config("jvm-copy", {"kafka.connector": "jvm"}),
                       spark=spark)
    app.start()
    try:
        assert app.state() is State.RUNNING
        app.process_all_available()
    finally:
        assert app.close(60), "KafkaStreams.close() did not finish within 60 s"
    assert app.state() is State.NOT_RUNNING

    out = sorted((r.key.decode(), long.deserialize(r.value), r.timestamp - T) for r in kafka.consume_all(sink))
    assert out == [("a", 2, 4_000), ("a", 10, 1_000), ("c", 14, 3_000)]
    metrics = app.metrics()
    assert metrics["input-records-total"] == 4.0
    assert metrics["output-records-total"] == 3.0


@pytest.mark.integration
@pytest.mark.spark
def test_real_time_trigger_runs_a_column_topology_and_refuses_a_lambda(
    spark: SparkSession,
    kafka: LocalKafka,
    new_topic: Callable[..., str],
    streams_config: Callable[..., dict[str, object]],
) -> None:
    """``streamsdsl.trigger = real_time``: a stateless topology of Column steps runs in Spark's
    real-time mode, straight into Spark's Kafka sink: the exact keys and values, in each key's
    order; the records carry the time of their write (Spark's Kafka sink writes no timestamp).
    The same topology with lambdas is refused at ``start()``, naming the Python operators."""
    from pyspark.sql import functions as F

    source, sink = new_topic(2), new_topic(1)
    long = Serdes.Long()
    kafka.produce(source, [(k.encode(), long.serialize(v), T + i, p)
                           for i, (k, v, p) in enumerate([("a", 5, 0), ("b", -1, 1), ("c", 7, 1), ("a", 1, 0)])])
    builder = StreamsBuilder()
    (builder.stream(source, Consumed.with_serdes(Serdes.String(), Serdes.Long()))
     .filter(F.col("value") > 0).map_values(F.col("value") * 2)
     .to(sink, Produced.with_serdes(Serdes.String(), Serdes.Long())))
    real_time = {"kafka.connector": "jvm", "streamsdsl.trigger": "real_time",
                 "commit.interval.ms": 5000}
    app = KafkaStreams(builder.build(), streams_config("jvm-real-time", real_time), spark=spark)
    app.start()
    try:
        assert app.streaming_query is not None
        assert "RealTime" in app.streaming_query._jsq.streamingQuery().trigger().toString()
        app.process_all_available()
        records = kafka.consume_all(sink)
    finally:
        assert app.close(60), "KafkaStreams.close() did not finish within 60 s"
    assert app.state() is State.NOT_RUNNING
    assert sorted((r.key.decode(), long.deserialize(r.value)) for r in records) == [("a", 2), ("a", 10), ("c", 14)]
    assert [long.deserialize(r.value) for r in records if r.key == b"a"] == [10, 2]
    assert all(r.timestamp > T + 1_000_000 for r in records)  # the write's time, not the input's
    assert app.metrics()["output-records-total"] == 0.0  # Spark's Kafka sink writes uncounted

    lambdas = _doubled_positive(source, new_topic(1))
    refused = KafkaStreams(lambdas, streams_config("jvm-real-time-lambda", real_time), spark=spark)
    with pytest.raises(TopologyError) as info:
        refused.start()
    message = str(info.value)
    assert "'streamsdsl.trigger' = 'real_time' cannot run this topology: a step runs a Python function" in message
    assert "(Spark operators ArrowEvalPython)" in message, message  # the predicate's and the mapper's Arrow UDFs
    assert refused.streaming_query is None
