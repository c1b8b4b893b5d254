"""Property tests: the compiled Spark time-window operator equals the pure-Python semantics core.

Random keys (null included), out-of-order timestamps, tumbling / hopping / sliding windows,
graces and both emit strategies go through the real Spark plan (TopologyTestDriver) and through
the reference run of the core (``streamsdsl.semantics.reference.time_window_reference``); the
outputs must be identical, record for record, and so must the dropped and on-close counts.
"""

from __future__ import annotations

import os
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamsdsl import Consumed, EmitStrategy, Serdes, SlidingWindows, StreamsBuilder, TimeWindows
from streamsdsl.operators.functions import windowing_of
from streamsdsl.semantics.aggregation import AggFunctions
from streamsdsl.semantics.reference import reference_run
from tests._support import assert_driver_equals_reference

pytestmark = pytest.mark.spark

records_strategy = st.lists(
    st.tuples(st.sampled_from(["a", "b", "c", None]), st.integers(min_value=0, max_value=60)),
    min_size=1,
    max_size=14,
)


@st.composite
def time_windows(draw: Any) -> TimeWindows:
    size = draw(st.integers(min_value=1, max_value=15))
    advance = draw(st.integers(min_value=1, max_value=size))
    return TimeWindows.of_size_and_grace(size, draw(st.integers(min_value=0, max_value=10))).advance_by(advance)


sliding_windows = st.builds(
    SlidingWindows.of_time_difference_and_grace,
    st.integers(min_value=1, max_value=12),
    st.integers(min_value=0, max_value=10),
)


def _agg(k: str, v: str, a: str) -> str:
    return a + v


# The aggregate spells out the exact fold: which records, in which order.
FNS = AggFunctions(lambda: "", _agg)


def _topology(windows: Any, on_close: bool) -> Any:
    b = StreamsBuilder()
    w = b.stream("in", Consumed.with_serdes(Serdes.String(), Serdes.String())).group_by_key().windowed_by(windows)
    if on_close:
        w = w.emit_strategy(EmitStrategy.on_window_close())
    w.aggregate(lambda: "", _agg).to_stream().to("out")
    return b.build()


@settings(max_examples=int(os.environ.get("STREAMSDSL_PROPERTY_EXAMPLES", "200")) // 2, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(records=records_strategy, windows=st.one_of(time_windows(), sliding_windows), on_close=st.booleans())
def test_spark_time_window_operator_equals_core(spark: Any, records: list[tuple[Any, int]], windows: Any,
                                                on_close: bool) -> None:
    """Identical records (windowed key, window, value, timestamp), drops and on-close counts."""
    inputs = [(k, f"{i}.", ts) for i, (k, ts) in enumerate(records)]
    expected = reference_run(inputs, windowing_of(windows), FNS, emit_on_close=on_close)
    assert_driver_equals_reference(spark, _topology(windows, on_close), inputs, expected)


COUNT = AggFunctions(lambda: 0, lambda k, v, a: a + 1)


def _count_topology(windows: Any, on_close: bool) -> Any:
    b = StreamsBuilder()
    w = b.stream("in", Consumed.with_serdes(Serdes.String(), Serdes.String())).group_by_key().windowed_by(windows)
    if on_close:
        w = w.emit_strategy(EmitStrategy.on_window_close())
    w.count().to_stream().to("out")
    return b.build()


@pytest.mark.usefixtures("jvm_operator")
@settings(max_examples=min(10, int(os.environ.get("STREAMSDSL_PROPERTY_EXAMPLES", "200"))), deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(records=records_strategy, windows=st.one_of(time_windows(), sliding_windows), on_close=st.booleans())
def test_time_window_count_on_the_jvm_operator_equals_core(spark: Any, records: list[tuple[Any, int]], windows: Any,
                                                         on_close: bool) -> None:
    """count() on the JVM operator equals the core's count (the Python operator runs the core's
    kernel, as the direct engine does: compared in ``test_spark_*_operator_equals_core`` above)."""
    inputs = [(k, f"{i}.", ts) for i, (k, ts) in enumerate(records)]
    expected = reference_run(inputs, windowing_of(windows), COUNT, emit_on_close=on_close)
    assert_driver_equals_reference(spark, _count_topology(windows, on_close), inputs, expected)
