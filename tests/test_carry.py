"""How the driver carries an operator's key states between reads (`streamsdsl.compiler.carry`)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from streamsdsl import Consumed, Serdes, StreamsBuilder
from streamsdsl.compiler.carry import ObservedCarry, sink_paths
from streamsdsl.compiler.processors import windows_type

STRINGS = Consumed.with_serdes(Serdes.String(), Serdes.String())


class TestSinkPaths:
    def test_counts_each_path_from_a_node_to_a_sink(self) -> None:
        b = StreamsBuilder()
        table = b.stream("in", STRINGS).group_by_key().count()
        table.to_stream().to("a")
        upper = table.to_stream().map_values(str)
        upper.to("b")
        upper.filter(lambda k, v: True).to("c")
        topology = b.build()
        aggregate = next(n.name for n in topology.topological_order() if "AGGREGATE" in n.name)
        source = next(n.name for n in topology.topological_order() if "SOURCE" in n.name)
        assert sink_paths(topology, aggregate) == 3
        assert sink_paths(topology, source) == 3

    def test_a_node_without_a_sink_below_has_no_path(self) -> None:
        b = StreamsBuilder()
        b.stream("in", STRINGS).group_by_key().count()
        topology = b.build()
        assert {sink_paths(topology, n.name) for n in topology.topological_order()} == {0}

    def test_without_a_topology_the_count_is_unknown(self) -> None:
        assert sink_paths(None, "KSTREAM-AGGREGATE-0000000002") == -1


@pytest.mark.spark
def test_state_rows_round_trip_through_sparks_json_exactly(spark: Any) -> None:
    """What `ObservedCarry.rows` decodes from Spark's ``to_json`` equals what ``collect()`` returns."""
    from pyspark.sql import functions as F

    ddl = f"key binary, state {windows_type('double')}"
    rows = [(bytearray(b"\x00\xffk"), [(0, 10, 1.5, 7, False), (20, 30, None, 25, True)]),
            (bytearray(b""), []), (None, None)]
    df = spark.createDataFrame(rows, ddl)
    texts = [r[0] for r in df.select(F.to_json(F.struct("key", "state"))).collect()]
    carried = ObservedCarry("obs", ddl)
    decoded = carried.rows({"obs": {"rows": texts}})
    assert decoded == [tuple(r) for r in df.collect()]
    assert decoded[0][1][0]["agg"] == 1.5 and decoded[0][1][0]["fin"] is False
    assert carried.rows({}) == [] and json.loads(texts[0])["key"] == "AP9r"
