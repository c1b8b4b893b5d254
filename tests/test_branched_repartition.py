"""``Branched.with_function`` / ``with_consumer`` and ``KStream.repartition(Repartitioned...)``
(issue 41): Kafka Streams' ``KStreamSplitTest`` and ``StreamsBuilderTest.shouldProcessViaRepartitionTopic``
transcribed, Kafka's names and describe(), the checks when written, and a repartition's
number of partitions as a shuffle on Spark."""

from __future__ import annotations

from typing import Any

import pytest

from streamsdsl import (
    Branched,
    Consumed,
    InvalidArgumentError,
    InvalidTypeError,
    Named,
    Produced,
    Repartitioned,
    Serdes,
    StreamsBuilder,
    TestRecord,
)

R = TestRecord
INT_STR = Consumed.with_serdes(Serdes.Integer(), Serdes.String())
OUT = Produced.with_serdes(Serdes.Integer(), Serdes.String())
KEYS = [-1, 0, 1, 2, 3, 4, 5, 6, 7]


def is_even(k: int, v: str) -> bool:
    return k % 2 == 0


def values(records: list[Any]) -> list[str]:
    return [r.value for r in records]


class TestBranched:
    @pytest.mark.every_host
    def test_kstream_split_with_consumers(self, run_driver: Any) -> None:
        """KStreamSplitTest.testKStreamSplit: each consumer writes its branch; the map is empty."""
        b = StreamsBuilder()
        branches = (b.stream("topic", INT_STR).split()
                    .branch(is_even, Branched.with_consumer(lambda ks: ks.to("x2", OUT)))
                    .branch(lambda k, v: k % 3 == 0, Branched.with_consumer(lambda ks: ks.to("x3", OUT)))
                    .branch(lambda k, v: k % 5 == 0, Branched.with_consumer(lambda ks: ks.to("x5", OUT)))
                    .no_default_branch())
        assert branches == {}
        x2, x3, x5 = run_driver(b.build(), [(k, f"V{k}", 0) for k in KEYS], out=["x2", "x3", "x5"])
        assert (values(x2), values(x3), values(x5)) == (["V0", "V2", "V4", "V6"], ["V3"], ["V5"])

    def test_resulting_map(self, run_driver: Any) -> None:
        """KStreamSplitTest.testResultingMap: a consumer's branch and a function returning None
        have no entry; a function's stream is its branch's entry; unnamed branches by position."""
        b = StreamsBuilder()
        branches = (b.stream("topic", INT_STR).split(named="foo-")
                    .branch(is_even, Branched.as_("bar"))
                    .branch(lambda k, v: k % 3 == 0, Branched.with_consumer(lambda ks: None))
                    .branch(lambda k, v: k % 5 == 0, Branched.with_function(lambda ks: None))
                    .branch(lambda k, v: k < 0, Branched.with_function(lambda ks: ks))
                    .branch(lambda k, v: k % 7 == 0)
                    .default_branch())
        assert sorted(branches) == ["foo-0", "foo-4", "foo-5", "foo-bar"]
        for name, branch in branches.items():
            branch.to(name, OUT)
        got = run_driver(b.build(), [(k, f"V{k}", 0) for k in KEYS], out=["foo-bar", "foo-4", "foo-5", "foo-0"])
        assert [values(r) for r in got] == [["V0", "V2", "V4", "V6"], ["V-1"], ["V7"], ["V1"]]

    def test_branching_with_no_terminal_operation(self, run_driver: Any) -> None:
        """KStreamSplitTest.testBranchingWithNoTerminalOperation: branches exist once written,
        without default_branch or no_default_branch."""
        b = StreamsBuilder()
        (b.stream("topic", INT_STR).split()
         .branch(is_even, Branched.with_consumer(lambda ks: ks.to("output", OUT)))
         .branch(lambda k, v: k % 5 == 0, Branched.with_consumer(lambda ks: ks.to("output", OUT))))
        assert values(run_driver(b.build(), [(k, f"V{k}", 0) for k in KEYS], out="output")) == [
            "V0", "V2", "V4", "V5", "V6"]

    def test_function_steps_are_named_where_kafka_names_them(self) -> None:
        """A chain runs when its branch is written (Kafka's createBranch), so its processors take
        the indexes right after the branch's; the map holds the chain's stream."""
        b = StreamsBuilder()
        branches = (b.stream("in").split()
                    .branch(lambda k, v: True, Branched.with_function(lambda s: s.map_values(str.upper), "up"))
                    .default_branch(Branched.with_function(lambda s: s.filter(lambda k, v: v)))
                    )
        assert {n: s.node_name for n, s in branches.items()} == {
            "KSTREAM-BRANCH-0000000001up": "KSTREAM-MAPVALUES-0000000003",
            "KSTREAM-BRANCH-00000000010": "KSTREAM-FILTER-0000000005",
        }
        for name, stream in branches.items():
            stream.to(name)
        assert b.build().describe() == (
            "Topologies:\n"
            "   Sub-topology: 0\n"
            "    Source: KSTREAM-SOURCE-0000000000 (topics: [in])\n"
            "      --> KSTREAM-BRANCH-0000000001\n"
            "    Processor: KSTREAM-BRANCH-0000000001 (stores: [])\n"
            "      --> KSTREAM-BRANCH-00000000010, KSTREAM-BRANCH-0000000001up\n"
            "      <-- KSTREAM-SOURCE-0000000000\n"
            "    Processor: KSTREAM-BRANCH-00000000010 (stores: [])\n"
            "      --> KSTREAM-FILTER-0000000005\n"
            "      <-- KSTREAM-BRANCH-0000000001\n"
            "    Processor: KSTREAM-BRANCH-0000000001up (stores: [])\n"
            "      --> KSTREAM-MAPVALUES-0000000003\n"
            "      <-- KSTREAM-BRANCH-0000000001\n"
            "    Processor: KSTREAM-FILTER-0000000005 (stores: [])\n"
            "      --> KSTREAM-SINK-0000000007\n"
            "      <-- KSTREAM-BRANCH-00000000010\n"
            "    Processor: KSTREAM-MAPVALUES-0000000003 (stores: [])\n"
            "      --> KSTREAM-SINK-0000000006\n"
            "      <-- KSTREAM-BRANCH-0000000001up\n"
            "    Sink: KSTREAM-SINK-0000000006 (topic: KSTREAM-BRANCH-0000000001up)\n"
            "      <-- KSTREAM-MAPVALUES-0000000003\n"
            "    Sink: KSTREAM-SINK-0000000007 (topic: KSTREAM-BRANCH-00000000010)\n"
            "      <-- KSTREAM-FILTER-0000000005\n\n"
        )

    def test_early_errors(self) -> None:
        """A chain of the wrong shape fails when written; a function's result that is not a stream
        fails when its branch is added, naming the branch."""
        with pytest.raises(InvalidTypeError) as e:
            Branched.with_function(lambda a, b: a)
        assert str(e.value) == ("'chain' must accept 1 positional argument (branch); lambda a, b has 2 required "
                                "(a, b). Use lambda branch: ...")
        with pytest.raises(InvalidTypeError, match=r"^'chain' must be a callable of shape \(branch\) -> None"):
            Branched.with_consumer("x")  # type: ignore[arg-type]
        with pytest.raises(InvalidArgumentError, match="illegal character"):
            Branched.with_function(lambda s: s, "a b")
        split = StreamsBuilder().stream("in").split(named="s-")
        with pytest.raises(InvalidTypeError) as e:
            split.branch(lambda k, v: True, Branched.with_function(lambda s: "done"))
        assert str(e.value) == ("The chain of Branched.with_function for branch 's-1' must return a KStream or None "
                                "(got str: 'done').")


class TestRepartition:
    def test_describe_and_names(self) -> None:
        """Kafka's names: KSTREAM-REPARTITION-<n> and then three indexes burnt (sink, filter,
        source, the generated names kept); a named one's processors after its topic."""
        b = StreamsBuilder()
        b.stream("in").repartition().to("out")
        b.stream("in2").repartition(Repartitioned.as_("by-x").with_number_of_partitions(3)).to("out2")
        assert b.build().describe() == (
            "Topologies:\n"
            "   Sub-topology: 0\n"
            "    Source: KSTREAM-SOURCE-0000000000 (topics: [in])\n"
            "      --> KSTREAM-FILTER-0000000003\n"
            "    Processor: KSTREAM-FILTER-0000000003 (stores: [])\n"
            "      --> KSTREAM-SINK-0000000002\n"
            "      <-- KSTREAM-SOURCE-0000000000\n"
            "    Sink: KSTREAM-SINK-0000000002 (topic: KSTREAM-REPARTITION-0000000001-repartition)\n"
            "      <-- KSTREAM-FILTER-0000000003\n\n"
            "  Sub-topology: 1\n"
            "    Source: KSTREAM-SOURCE-0000000004 (topics: [KSTREAM-REPARTITION-0000000001-repartition])\n"
            "      --> KSTREAM-SINK-0000000005\n"
            "    Sink: KSTREAM-SINK-0000000005 (topic: out)\n"
            "      <-- KSTREAM-SOURCE-0000000004\n\n"
            "  Sub-topology: 2\n"
            "    Source: KSTREAM-SOURCE-0000000006 (topics: [in2])\n"
            "      --> by-x-repartition-filter\n"
            "    Processor: by-x-repartition-filter (stores: [])\n"
            "      --> by-x-repartition-sink\n"
            "      <-- KSTREAM-SOURCE-0000000006\n"
            "    Sink: by-x-repartition-sink (topic: by-x-repartition)\n"
            "      <-- by-x-repartition-filter\n\n"
            "  Sub-topology: 3\n"
            "    Source: by-x-repartition-source (topics: [by-x-repartition])\n"
            "      --> KSTREAM-SINK-0000000010\n"
            "    Sink: KSTREAM-SINK-0000000010 (topic: out2)\n"
            "      <-- by-x-repartition-source\n\n"
        )

    def test_repartitioned_checks_its_arguments(self) -> None:
        """Every with_* works on the class or an instance; a bad count or option fails when written."""
        assert Repartitioned.with_number_of_partitions(4) == Repartitioned(number_of_partitions=4)
        assert Repartitioned.as_("x").with_number_of_partitions(2).with_value_serde(Serdes.Long()) == Repartitioned(
            name="x", value_serde=Serdes.Long(), number_of_partitions=2)
        with pytest.raises(InvalidArgumentError, match=r"^'number_of_partitions' must be > 0 \(got -1\)"):
            Repartitioned.with_number_of_partitions(-1)
        with pytest.raises(InvalidTypeError, match=r"^'number_of_partitions' must be an int \(got str"):
            Repartitioned.with_number_of_partitions("4")  # type: ignore[arg-type]
        with pytest.raises(InvalidTypeError, match=r"^'repartitioned' must be a Repartitioned such as"):
            StreamsBuilder().stream("in").repartition(Named.as_("x"))  # type: ignore[arg-type]

    @pytest.mark.every_host
    @pytest.mark.streaming_host
    def test_process_via_repartition_topic(self, run_driver: Any) -> None:
        """StreamsBuilderTest.shouldProcessViaRepartitionTopic, plus what every repartition does:
        a None key is dropped and counted; serdes of Repartitioned; an aggregation after it reads
        it and repartitions no more."""
        b = StreamsBuilder()
        through = b.stream("topic-source", INT_STR).repartition(
            Repartitioned.with_serdes(Serdes.Integer(), Serdes.String()).with_number_of_partitions(2))
        through.to("out", OUT)
        through.group_by_key().count().to_stream().to("counts", Produced.with_serdes(Serdes.Integer(), Serdes.Long()))
        assert b.build().describe().count("-repartition)") == 1  # one repartition topic written
        (out, counts), metrics = run_driver(b.build(), [(1, "aa", 0), (None, "bb", 1), (1, "cc", 2)],
                                            out=["out", "counts"], with_metrics=True)
        assert out == [R(1, "aa", 0), R(1, "cc", 2)]
        assert counts == [R(1, 1, 0), R(1, 2, 2)]
        assert metrics["dropped-records-total"] == 1.0


@pytest.mark.spark
def test_partitions_are_a_shuffle_on_spark(spark: Any) -> None:
    """with_number_of_partitions(n) is a shuffle by key into n partitions in the Spark plan;
    without it, no shuffle of its own (the stateful operator downstream shuffles)."""
    from pyspark.sql import functions as F

    from streamsdsl.compiler import PlanMode, compile_topology
    from streamsdsl.compiler.plan import CompileOptions

    def source(node: object) -> Any:
        return spark.readStream.format("rate").load().select(
            F.lit(None).cast("binary").alias("key"), F.lit(None).cast("binary").alias("value"),
            F.lit("in").alias("topic"), F.lit(0).alias("partition"), F.col("value").alias("offset"),
            F.col("value").alias("timestamp"),
            F.array().cast("array<struct<key:string,value:binary>>").alias("headers"),
        )

    plans = []
    for repartitioned in (Repartitioned.with_number_of_partitions(7), None):
        b = StreamsBuilder()
        b.stream("in").repartition(repartitioned).to("out")
        compiled = compile_topology(b.build(), source, CompileOptions(PlanMode.STREAMING))
        plans.append(compiled.output._jdf.queryExecution().analyzed().toString())
    assert "RepartitionByExpression" in plans[0] and ", 7" in plans[0].split("RepartitionByExpression", 1)[1][:200]
    assert "RepartitionByExpression" not in plans[1]
