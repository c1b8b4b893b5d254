"""`Topology.describe()` as data and as a Mermaid flowchart (`TopologyDescription.to_mermaid`),
and ``streamsdsl describe MODULE:ATTR``. Full-string comparisons: the Mermaid text is stable."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest

from streamsdsl import Materialized, StreamsBuilder
from streamsdsl.cli import main
from streamsdsl.ir.description import DescribedNode, TopologyDescription
from streamsdsl.ir.topology import Topology


def _count_by_value() -> Topology:
    """in → filter → group_by (repartition) → count (a store) → to_stream → out."""
    b = StreamsBuilder()
    (
        b.stream("in")
        .filter(lambda k, v: v is not None)
        .group_by(lambda k, v: v)
        .count(materialized=Materialized.as_("counts"))
        .to_stream()
        .to("out")
    )
    return b.build()


COUNT_BY_VALUE_MERMAID = """\
flowchart TB
    subgraph sub0["Sub-topology: 0"]
        n0(["KSTREAM-SOURCE-0000000000"])
        n1["KSTREAM-FILTER-0000000001"]
        n2["KSTREAM-KEY-SELECT-0000000002"]
        n3["counts-repartition-filter"]
        n4(["counts-repartition-sink"])
    end
    subgraph sub1["Sub-topology: 1"]
        n5(["counts-repartition-source"])
        n6["KSTREAM-AGGREGATE-0000000003"]
        n7["KTABLE-TOSTREAM-0000000007"]
        n8(["KSTREAM-SINK-0000000008"])
        s0[("counts")]
    end
    t0[/"in"/]
    t1{{"counts-repartition"}}
    t2[/"out"/]
    t0 --> n0
    n0 --> n1
    n1 --> n2
    n2 --> n3
    n3 --> n4
    n4 --> t1
    t1 --> n5
    n5 --> n6
    n6 --> n7
    n6 -.- s0
    n7 --> n8
    n8 --> t2
    classDef topic fill:#e8f0fe,stroke:#4063d8
    class t0,t2 topic
    classDef repartition fill:#fff4e0,stroke:#c77c00
    class t1 repartition
    classDef store fill:#eaf6ea,stroke:#2e7d32
    class s0 store"""


class TestDescriptionData:
    def test_is_the_kafka_text_and_holds_the_subtopologies(self) -> None:
        """describe() is still the exact text (a str) and exposes each sub-topology's nodes, in
        the text's order, with their topics, stores and links."""
        d = _count_by_value().describe()
        assert isinstance(d, TopologyDescription) and isinstance(d, str)
        assert d.startswith("Topologies:\n   Sub-topology: 0\n    Source: KSTREAM-SOURCE-0000000000 (topics: [in])\n")
        assert [s.id for s in d.subtopologies] == [0, 1]
        assert [n.name for n in d.subtopologies[1].nodes] == [
            "counts-repartition-source", "KSTREAM-AGGREGATE-0000000003",
            "KTABLE-TOSTREAM-0000000007", "KSTREAM-SINK-0000000008",
        ]
        assert d.subtopologies[1].nodes[1] == DescribedNode(
            name="KSTREAM-AGGREGATE-0000000003", kind="Processor", topics=(), stores=("counts",),
            successors=("KTABLE-TOSTREAM-0000000007",), predecessors=("counts-repartition-source",),
        )
        assert d.repartition_topics == ("counts-repartition",)
        # the text is rendered from the data, node by node
        assert "".join(f"    {n}\n" for n in d.subtopologies[1].nodes) in d

    def test_pickles_with_its_data(self) -> None:
        """A description survives pickling (a str subclass with extra state needs __reduce__)."""
        d = _count_by_value().describe()
        back = pickle.loads(pickle.dumps(d))
        assert back == d and back.subtopologies == d.subtopologies
        assert back.repartition_topics == d.repartition_topics


class TestMermaid:
    def test_repartitioned_count(self) -> None:
        """Two sub-topologies joined by the repartition topic (a hexagon), the store as a
        cylinder dotted to its processor, external topics as parallelograms."""
        assert _count_by_value().describe().to_mermaid() == COUNT_BY_VALUE_MERMAID

    def test_deterministic(self) -> None:
        """Two builds of the same topology draw the same text."""
        assert _count_by_value().describe().to_mermaid() == _count_by_value().describe().to_mermaid()

    def test_join_shares_one_store_and_reads_two_topics(self) -> None:
        """A stream-table join: the table's store is drawn once, linked to the table source's
        processor and to the join; both input topics feed one sub-topology."""
        b = StreamsBuilder()
        table = b.table("customers", materialized=Materialized.as_("customers-store"))
        b.stream("orders").join(table, lambda o, c: (o, c)).to("enriched")
        text = b.build().describe().to_mermaid()
        assert text.count('[("customers-store")]') == 1
        assert text.count("-.- s0") == 2
        assert text.count("subgraph") == 1
        assert '[/"orders"/]' in text and '[/"customers"/]' in text and "repartition" not in text


class TestDescribeCommand:
    def test_mermaid_of_a_module_function(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """``streamsdsl describe FILE.py:FUNCTION --format mermaid`` prints to_mermaid()."""
        app = tmp_path / "app.py"
        app.write_text(
            "from tests.ir.test_description import _count_by_value\n"
            "def topology():\n    return _count_by_value()\n"
        )
        assert main(["describe", f"{app}:topology", "--format", "mermaid"]) == 0
        assert capsys.readouterr().out == COUNT_BY_VALUE_MERMAID + "\n"

    def test_text_of_a_builder(self, capsys: pytest.CaptureFixture[str]) -> None:
        """A StreamsBuilder attribute is built; the default format is Kafka's text."""
        assert main(["describe", "tests.ir.test_description:BUILDER"]) == 0
        assert capsys.readouterr().out == (
            "Topologies:\n   Sub-topology: 0\n    Source: KSTREAM-SOURCE-0000000000 (topics: [a])\n"
            "      --> KSTREAM-SINK-0000000001\n    Sink: KSTREAM-SINK-0000000001 (topic: b)\n"
            "      <-- KSTREAM-SOURCE-0000000000\n\n"
        )

    @pytest.mark.parametrize(
        ("target", "message"),
        [
            ("no-colon", "streamsdsl describe: expected MODULE:ATTR (got 'no-colon'), "
                         "e.g. examples.order_enrichment:build_topology\n"),
            ("tests.ir.test_description:COUNT_BY_VALUE_MERMAID",
             "streamsdsl describe: tests.ir.test_description:COUNT_BY_VALUE_MERMAID is a str, not a "
             "Topology, a StreamsBuilder or a function returning one\n"),
            ("tests.ir.no_such_module:x", "streamsdsl describe: No module named 'tests.ir.no_such_module'\n"),
        ],
    )
    def test_bad_target(self, target: str, message: str, capsys: pytest.CaptureFixture[str]) -> None:
        """A target that is not MODULE:ATTR of a topology is a usage error (exit code 2)."""
        assert main(["describe", target]) == 2
        assert capsys.readouterr().err == message


BUILDER = StreamsBuilder()
BUILDER.stream("a").to("b")
