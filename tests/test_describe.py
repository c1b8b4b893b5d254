"""describe() matches Kafka Streams' Topology.describe() line for line (full-string comparisons).

Expected strings are Kafka Streams' own outputs for the same topologies (TopologyTest,
SuppressTopologyTest, the WordCount docs), re-derived where noted.
"""

from __future__ import annotations

from streamsdsl import Grouped, Materialized, Named, Produced, Serdes, SessionWindows, StreamsBuilder


class TestDescribe:
    def test_five_step_topology(self) -> None:
        """source → filter → map_values → group_by (repartition) → count → to_stream → to."""
        b = StreamsBuilder()
        (
            b.stream("orders")
            .filter(lambda k, v: v is not None)
            .map_values(lambda v: v["amount"])
            .group_by(lambda k, v: k)
            .count()
            .to_stream()
            .to("order-counts", Produced.with_serdes(Serdes.String(), Serdes.Long()))
        )
        assert b.build().describe() == (
            "Topologies:\n"
            "   Sub-topology: 0\n"
            "    Source: KSTREAM-SOURCE-0000000000 (topics: [orders])\n"
            "      --> KSTREAM-FILTER-0000000001\n"
            "    Processor: KSTREAM-FILTER-0000000001 (stores: [])\n"
            "      --> KSTREAM-MAPVALUES-0000000002\n"
            "      <-- KSTREAM-SOURCE-0000000000\n"
            "    Processor: KSTREAM-MAPVALUES-0000000002 (stores: [])\n"
            "      --> KSTREAM-KEY-SELECT-0000000003\n"
            "      <-- KSTREAM-FILTER-0000000001\n"
            "    Processor: KSTREAM-KEY-SELECT-0000000003 (stores: [])\n"
            "      --> KSTREAM-FILTER-0000000007\n"
            "      <-- KSTREAM-MAPVALUES-0000000002\n"
            "    Processor: KSTREAM-FILTER-0000000007 (stores: [])\n"
            "      --> KSTREAM-SINK-0000000006\n"
            "      <-- KSTREAM-KEY-SELECT-0000000003\n"
            "    Sink: KSTREAM-SINK-0000000006 (topic: KSTREAM-AGGREGATE-STATE-STORE-0000000004-repartition)\n"
            "      <-- KSTREAM-FILTER-0000000007\n"
            "\n"
            "  Sub-topology: 1\n"
            "    Source: KSTREAM-SOURCE-0000000008 (topics: [KSTREAM-AGGREGATE-STATE-STORE-0000000004-repartition])\n"
            "      --> KSTREAM-AGGREGATE-0000000005\n"
            "    Processor: KSTREAM-AGGREGATE-0000000005 (stores: [KSTREAM-AGGREGATE-STATE-STORE-0000000004])\n"
            "      --> KTABLE-TOSTREAM-0000000009\n"
            "      <-- KSTREAM-SOURCE-0000000008\n"
            "    Processor: KTABLE-TOSTREAM-0000000009 (stores: [])\n"
            "      --> KSTREAM-SINK-0000000010\n"
            "      <-- KSTREAM-AGGREGATE-0000000005\n"
            "    Sink: KSTREAM-SINK-0000000010 (topic: order-counts)\n"
            "      <-- KTABLE-TOSTREAM-0000000009\n"
            "\n"
        )

    def test_session_windowed_count(self) -> None:
        """Kafka's TopologyTest.sessionWindowZeroArgCountShouldPreserveTopologyStructure."""
        b = StreamsBuilder()
        b.stream("input-topic").group_by_key().windowed_by(SessionWindows.with_gap(1)).count()
        assert b.build().describe() == (
            "Topologies:\n"
            "   Sub-topology: 0\n"
            "    Source: KSTREAM-SOURCE-0000000000 (topics: [input-topic])\n"
            "      --> KSTREAM-AGGREGATE-0000000002\n"
            "    Processor: KSTREAM-AGGREGATE-0000000002 (stores: [KSTREAM-AGGREGATE-STATE-STORE-0000000001])\n"
            "      --> none\n"
            "      <-- KSTREAM-SOURCE-0000000000\n\n"
        )

    def test_materialized_count_names(self) -> None:
        """count(Materialized.as_) keeps the store name and burns no index; anonymous
        Materialized burns one (TopologyTest.sessionWindowNamed/AnonymousMaterializedCount)."""
        b = StreamsBuilder()
        b.stream("input-topic").group_by_key().windowed_by(SessionWindows.with_gap(1)).count(
            materialized=Materialized.as_("count-store")
        )
        assert "Processor: KSTREAM-AGGREGATE-0000000001 (stores: [count-store])" in b.build().describe()
        b = StreamsBuilder()
        b.stream("input-topic").group_by_key().count(materialized=Materialized.with_serdes(None, Serdes.Long()))
        assert (
            "Processor: KSTREAM-AGGREGATE-0000000003 (stores: [KSTREAM-AGGREGATE-STATE-STORE-0000000002])"
            in b.build().describe()
        )

    def test_named_repartition_and_grouped(self) -> None:
        """SuppressTopologyTest's shape: a store name gives <store>-repartition-filter/-sink/-source."""
        b = StreamsBuilder()
        (
            b.stream("input")
            .group_by(lambda k, v: k)
            .windowed_by(SessionWindows.with_gap(5).grace(5))
            .count(materialized=Materialized.as_("counts"))
            .to_stream()
            .map(lambda k, v: (str(k), v))
            .to("output-suppressed")
        )
        assert b.build().describe() == (
            "Topologies:\n"
            "   Sub-topology: 0\n"
            "    Source: KSTREAM-SOURCE-0000000000 (topics: [input])\n"
            "      --> KSTREAM-KEY-SELECT-0000000001\n"
            "    Processor: KSTREAM-KEY-SELECT-0000000001 (stores: [])\n"
            "      --> counts-repartition-filter\n"
            "      <-- KSTREAM-SOURCE-0000000000\n"
            "    Processor: counts-repartition-filter (stores: [])\n"
            "      --> counts-repartition-sink\n"
            "      <-- KSTREAM-KEY-SELECT-0000000001\n"
            "    Sink: counts-repartition-sink (topic: counts-repartition)\n"
            "      <-- counts-repartition-filter\n"
            "\n"
            "  Sub-topology: 1\n"
            "    Source: counts-repartition-source (topics: [counts-repartition])\n"
            "      --> KSTREAM-AGGREGATE-0000000002\n"
            "    Processor: KSTREAM-AGGREGATE-0000000002 (stores: [counts])\n"
            "      --> KTABLE-TOSTREAM-0000000006\n"
            "      <-- counts-repartition-source\n"
            "    Processor: KTABLE-TOSTREAM-0000000006 (stores: [])\n"
            "      --> KSTREAM-MAP-0000000007\n"
            "      <-- KSTREAM-AGGREGATE-0000000002\n"
            "    Processor: KSTREAM-MAP-0000000007 (stores: [])\n"
            "      --> KSTREAM-SINK-0000000008\n"
            "      <-- KTABLE-TOSTREAM-0000000006\n"
            "    Sink: KSTREAM-SINK-0000000008 (topic: output-suppressed)\n"
            "      <-- KSTREAM-MAP-0000000007\n"
            "\n"
        )

    def test_user_names_and_grouped_name(self) -> None:
        """name= / Named set processor names (an index is still burned); Grouped.as_ names the
        key selector and the repartition topic."""
        b = StreamsBuilder()
        s = b.stream("in", name="src")
        s.filter(lambda k, v: True, name=Named.as_("keep")).group_by(
            lambda k, v: v, Grouped.as_("by-value")
        ).reduce(lambda a, v: a, name="latest").to_stream().to("out", name="sink")
        assert b.build().describe() == (
            "Topologies:\n"
            "   Sub-topology: 0\n"
            "    Source: src (topics: [in])\n"
            "      --> keep\n"
            "    Processor: keep (stores: [])\n"
            "      --> by-value\n"
            "      <-- src\n"
            "    Processor: by-value (stores: [])\n"
            "      --> by-value-repartition-filter\n"
            "      <-- keep\n"
            "    Processor: by-value-repartition-filter (stores: [])\n"
            "      --> by-value-repartition-sink\n"
            "      <-- by-value\n"
            "    Sink: by-value-repartition-sink (topic: by-value-repartition)\n"
            "      <-- by-value-repartition-filter\n"
            "\n"
            "  Sub-topology: 1\n"
            "    Source: by-value-repartition-source (topics: [by-value-repartition])\n"
            "      --> latest\n"
            "    Processor: latest (stores: [KSTREAM-REDUCE-STATE-STORE-0000000003])\n"
            "      --> KTABLE-TOSTREAM-0000000008\n"
            "      <-- by-value-repartition-source\n"
            "    Processor: KTABLE-TOSTREAM-0000000008 (stores: [])\n"
            "      --> sink\n"
            "      <-- latest\n"
            "    Sink: sink (topic: out)\n"
            "      <-- KTABLE-TOSTREAM-0000000008\n"
            "\n"
        )

    def test_branches_and_merge(self) -> None:
        """Two branches of one stage are independent; merge joins them. Nodes and multi-entry
        edge lists are sorted by sub-tree size, then name (Kafka sorts edge lists while sizes
        are still changing, so its multi-entry lists can differ; ours are always sorted)."""
        b = StreamsBuilder()
        s = b.stream("in")
        left = s.filter(lambda k, v: v > 0)
        right = s.filter_not(lambda k, v: v > 0).map_values(lambda v: -v)
        left.merge(right).to("out")
        assert b.build().describe() == (
            "Topologies:\n"
            "   Sub-topology: 0\n"
            "    Source: KSTREAM-SOURCE-0000000000 (topics: [in])\n"
            "      --> KSTREAM-FILTER-0000000002, KSTREAM-FILTER-0000000001\n"
            "    Processor: KSTREAM-FILTER-0000000002 (stores: [])\n"
            "      --> KSTREAM-MAPVALUES-0000000003\n"
            "      <-- KSTREAM-SOURCE-0000000000\n"
            "    Processor: KSTREAM-FILTER-0000000001 (stores: [])\n"
            "      --> KSTREAM-MERGE-0000000004\n"
            "      <-- KSTREAM-SOURCE-0000000000\n"
            "    Processor: KSTREAM-MAPVALUES-0000000003 (stores: [])\n"
            "      --> KSTREAM-MERGE-0000000004\n"
            "      <-- KSTREAM-FILTER-0000000002\n"
            "    Processor: KSTREAM-MERGE-0000000004 (stores: [])\n"
            "      --> KSTREAM-SINK-0000000005\n"
            "      <-- KSTREAM-FILTER-0000000001, KSTREAM-MAPVALUES-0000000003\n"
            "    Sink: KSTREAM-SINK-0000000005 (topic: out)\n"
            "      <-- KSTREAM-MERGE-0000000004\n"
            "\n"
        )
