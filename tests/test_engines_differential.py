"""The two engines of the TopologyTestDriver agree: random topologies and inputs, run on the
direct engine and on the compiled Spark plan, give the same records (key, value, timestamp,
headers) on every output topic, in the same order, and the same metrics.

The topology generator draws one shape from a menu that covers every stateful operator family
(aggregations of every window kind and both emit strategies, cogroup, stream–table,
stream–stream, table–table and foreign-key joins, grouped tables, suppress) with stateless steps around
them; the inputs have out-of-order and late records, timestamp ties, ``None`` keys and values.
"""

from __future__ import annotations

from typing import Any, Callable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamsdsl import Consumed, EmitStrategy, JoinWindows, Serdes, SessionWindows, SlidingWindows, StreamsBuilder
from streamsdsl import Suppressed, BufferConfig, TimeWindows
from streamsdsl.runtime.driver import TopologyTestDriver

pytestmark = pytest.mark.spark

STRINGS = Consumed.with_serdes(Serdes.String(), Serdes.String())
KEYS = st.sampled_from(["a", "b", "c", None])
VALUES = st.sampled_from(["x", "yy", "zzz", None])


def _append(key: Any, value: Any, agg: str) -> str:
    return agg + (value or "-")


def _merge(key: Any, a1: str, a2: str) -> str:
    return a1 + "|" + a2


def _join(left: Any, right: Any) -> str:
    return f"{left}+{right}"


def _windowed(b: StreamsBuilder, kind: str, grace: int, on_close: bool) -> None:
    grouped = b.stream("in", STRINGS).filter(lambda k, v: v != "zzz").group_by_key()
    windows: Any = {
        "session": SessionWindows.of_inactivity_gap_and_grace(5, grace),
        "tumbling": TimeWindows.of_size_and_grace(10, grace),
        "hopping": TimeWindows.of_size_and_grace(10, grace).advance_by(5),
        "sliding": SlidingWindows.of_time_difference_and_grace(5, grace),
    }[kind]
    stage = grouped.windowed_by(windows)
    if on_close:
        stage = stage.emit_strategy(EmitStrategy.on_window_close())
    table = stage.aggregate(lambda: "", _append, _merge) if kind == "session" else stage.aggregate(lambda: "", _append)
    table.to_stream().map(lambda k, v: (f"{k.key}@{k.window.start}/{k.window.end}", v)).to("out")


def _suppressed(b: StreamsBuilder, kind: str, grace: int) -> None:
    grouped = b.stream("in", STRINGS).group_by_key()
    if kind == "session":
        table = grouped.windowed_by(SessionWindows.of_inactivity_gap_and_grace(5, grace)).count()
    else:
        table = grouped.windowed_by(TimeWindows.of_size_and_grace(10, grace)).count()
    (table.suppress(Suppressed.until_window_closes(BufferConfig.unbounded())).to_stream()
     .map(lambda k, v: (f"{k.key}@{k.window.start}", v)).to("out"))


def _cogrouped(b: StreamsBuilder, windowed: bool) -> None:
    one = b.stream("in", STRINGS).group_by_key()
    two = b.stream("other", STRINGS).map_values(lambda v: None if v is None else v.upper()).group_by_key()
    co = one.cogroup(_append).cogroup(two, _append)
    if windowed:
        (co.windowed_by(TimeWindows.of_size_and_grace(10, 3)).aggregate(lambda: "").to_stream()
         .map(lambda k, v: (f"{k.key}@{k.window.start}", v)).to("out"))
    else:
        co.aggregate(lambda: "").to_stream().to("out")


def _stream_table(b: StreamsBuilder, kind: str) -> None:
    table = b.table("other", STRINGS)
    stream = b.stream("in", STRINGS)
    joined = stream.join(table, _join) if kind == "inner" else stream.left_join(table, _join)
    joined.group_by_key().count().to_stream().to("counts")
    joined.to("out")


def _stream_stream(b: StreamsBuilder, kind: str) -> None:
    left, right = b.stream("in", STRINGS), b.stream("other", STRINGS)
    windows = JoinWindows.of_time_difference_and_grace(5, 2)
    getattr(left, {"inner": "join", "left": "left_join", "outer": "outer_join"}[kind])(right, _join, windows).to("out")


def _table_table(b: StreamsBuilder, kind: str) -> None:
    left, right = b.table("in", STRINGS), b.table("other", STRINGS)
    getattr(left, {"inner": "join", "left": "left_join", "outer": "outer_join"}[kind])(right, _join).to_stream().to("out")


def _fk_join(b: StreamsBuilder, kind: str) -> None:
    """A foreign-key join: ``x`` names the row ``a`` of ``other``, ``yy`` the row ``b``, ``zzz`` none."""
    left, right = b.table("in", STRINGS), b.table("other", STRINGS)
    method = left.join if kind == "inner" else left.left_join
    method(right, lambda v: {"x": "a", "yy": "b"}.get(v), _join).to_stream().to("out")


def _grouped_table(b: StreamsBuilder) -> None:
    (b.table("in", STRINGS).group_by(lambda k, v: (v, k)).count().to_stream().to("out"))


SHAPES: dict[str, Callable[[StreamsBuilder, Any], None]] = {
    **{f"{kind}-{grace}-{'close' if close else 'update'}": (lambda b, a=(kind, grace, close): _windowed(b, *a))
       for kind in ("session", "tumbling", "hopping", "sliding") for grace in (0, 3) for close in (False, True)},
    **{f"suppress-{kind}": (lambda b, k=kind: _suppressed(b, k, 2)) for kind in ("session", "time")},
    "cogroup": lambda b: _cogrouped(b, False),
    "cogroup-windowed": lambda b: _cogrouped(b, True),
    **{f"stream-table-{k}": (lambda b, k=k: _stream_table(b, k)) for k in ("inner", "left")},
    **{f"stream-stream-{k}": (lambda b, k=k: _stream_stream(b, k)) for k in ("inner", "left", "outer")},
    **{f"table-table-{k}": (lambda b, k=k: _table_table(b, k)) for k in ("inner", "left", "outer")},
    "grouped-table": _grouped_table,
    **{f"fk-join-{k}": (lambda b, k=k: _fk_join(b, k)) for k in ("inner", "left")},
}

RECORDS = st.lists(st.tuples(st.sampled_from(["in", "other"]), KEYS, VALUES, st.integers(0, 40)), min_size=1,
                   max_size=12)


def _run(engine: str, shape: str, records: list[tuple[str, Any, Any, int]], spark: Any, reads: int) -> Any:
    b = StreamsBuilder()
    SHAPES[shape](b)
    topology = b.build()
    with TopologyTestDriver(topology, engine=engine, spark=spark) as d:
        inputs = {t: d.create_input_topic(t) for t in topology.source_topics}
        outputs = {t: d.create_output_topic(t) for t in topology.sink_topics}
        out: dict[str, list[Any]] = {t: [] for t in outputs}
        # read after the last record of each of `reads` runs of (nearly) equal length
        last_of_run = {len(records) * run // reads - 1 for run in range(1, reads + 1)}
        for i, (topic, key, value, ts) in enumerate(records):
            inputs.get(topic, inputs[topology.source_topics[0]]).pipe_input(key, value, ts)
            if i in last_of_run:
                for t, o in outputs.items():
                    out[t] += [(r.key, r.value, r.timestamp, r.headers) for r in o.read_records_to_list()]
        return out, d.metrics()


@settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(shape=st.sampled_from(sorted(SHAPES)), records=RECORDS, reads=st.integers(1, 3))
def test_engines_agree(spark: Any, shape: str, records: list[tuple[str, Any, Any, int]], reads: int) -> None:
    """A random topology and input: the direct engine and the Spark plan write the same records
    to every topic (in the same order) and report the same metrics, with the input read in one
    to three runs."""
    direct = _run("direct", shape, records, None, reads)
    on_spark = _run("spark", shape, records, spark, reads)
    assert direct[0] == on_spark[0]
    assert _metrics(direct[1]) == _metrics(on_spark[1])


def _metrics(m: dict[str, float]) -> dict[str, Any]:
    return {k: (None if v != v else v) for k, v in m.items()}  # NaN == NaN


FIXED = [("in", "a", "x", 1), ("other", "a", "yy", 2), ("in", "b", None, 3), ("in", None, "x", 4),
         ("in", "a", "yy", 9), ("other", "b", "x", 12), ("in", "a", "x", 30), ("in", "b", "x", 2),
         ("other", "a", None, 31), ("in", "c", "zzz", 31), ("in", "a", "x", 60)]


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_every_shape_agrees_on_a_fixed_input(spark: Any, shape: str) -> None:
    """Every shape of the generator, over one input with a late record, a tie, null keys and
    values and a jump in time, read in two runs: both engines write the same records."""
    direct = _run("direct", shape, FIXED, None, 2)
    assert sum(len(v) for v in direct[0].values()) > 0
    on_spark = _run("spark", shape, FIXED, spark, 2)
    assert direct[0] == on_spark[0]
    assert _metrics(direct[1]) == _metrics(on_spark[1])


@pytest.mark.parametrize("shape, block", [("cogroup-windowed", 1), ("tumbling-3-close", 2), ("stream-stream-outer", 2)])
def test_a_run_in_blocks_agrees(spark: Any, shape: str, block: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """A run over more records than `scan.SCAN_BLOCK` computes stream time per block of records
    (a parallel prefix scan) and finds the record that closes each window (or releases a held
    join record) per block: with blocks of one or two records, the same records as the direct
    engine (per-input stream time of a cogroup, windows emitted on close, an outer join's held
    records, state and stream time carried between runs)."""
    from streamsdsl.compiler import scan

    monkeypatch.setattr(scan, "SCAN_BLOCK", block)
    direct = _run("direct", shape, FIXED, None, 2)
    on_spark = _run("spark", shape, FIXED, spark, 2)
    assert direct[0] == on_spark[0]
    assert _metrics(direct[1]) == _metrics(on_spark[1])
