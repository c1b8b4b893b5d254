"""Property test: cogroup of N streams on Spark equals the pure-Python reference."""

from __future__ import annotations

import os
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamsdsl import Consumed, Serdes, StreamsBuilder
from streamsdsl.runtime.driver import TopologyTestDriver
from streamsdsl.semantics.aggregation import AggFunctions
from streamsdsl.semantics.reference import reference_run
from streamsdsl.semantics.unwindowed import Unwindowed

pytestmark = pytest.mark.spark


def _aggregator(i: int) -> Any:
    def agg(key: str, value: str, acc: list[str]) -> list[str]:
        return [*acc, f"{i}:{value}"]

    return agg


@settings(max_examples=int(os.environ.get("STREAMSDSL_PROPERTY_EXAMPLES", "200")) // 4, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(
    n_streams=st.integers(min_value=2, max_value=4),
    records=st.lists(
        st.tuples(st.integers(0, 3), st.sampled_from(["a", "b", None]), st.booleans(), st.integers(0, 50)),
        min_size=1, max_size=12,
    ),
)
def test_cogroup_equals_reference(spark: Any, n_streams: int, records: list[tuple[int, Any, bool, int]]) -> None:
    """Same records, same order, same timestamps and drop count for 2-4 cogrouped streams."""
    inputs = [(src % n_streams, k, f"v{i}" if has_value else None, ts) for i, (src, k, has_value, ts) in enumerate(records)]
    aggregators = [_aggregator(i) for i in range(n_streams)]
    expected = reference_run(inputs, Unwindowed(), [AggFunctions(list, a) for a in aggregators])
    b = StreamsBuilder()
    consumed = Consumed.with_serdes(Serdes.String(), Serdes.String())
    grouped = [b.stream(f"t{i}", consumed).group_by_key() for i in range(n_streams)]
    cg = grouped[0].cogroup(aggregators[0])
    for g, a in zip(grouped[1:], aggregators[1:]):
        cg = cg.cogroup(g, a)
    cg.aggregate(list).to_stream().to("out")
    with TopologyTestDriver(b.build(), spark=spark) as d:
        topics = [d.create_input_topic(f"t{i}") for i in range(n_streams)]
        for src, k, v, ts in inputs:
            topics[src].pipe_input(k, v, ts)
        got = [(r.key, r.value, r.timestamp) for r in d.create_output_topic("out").read_records_to_list()]
        dropped = d.metrics()["dropped-records-total"]
    assert got == [(o.key, o.value, o.timestamp) for o in expected.outputs]
    assert dropped == expected.dropped
