"""Kafka's ``*WithKey`` overloads by arity (issue 41): ``map_values`` / ``flat_map_values``
(``ValueMapperWithKey``) and the joiners of every join (``ValueJoinerWithKey``) receive the
record's key, read-only; the same functions without the key keep working. Driver tests run on
every host of the conformance suite (the direct engine, the Spark plan, a streaming query);
property tests check the join kernels with a with-key joiner against the two-value one."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from streamsdsl import JoinWindows, Materialized, StreamsBuilder, TestRecord
from streamsdsl.semantics.joiners import JoinerWithKey
from streamsdsl.semantics.stream_stream import JoinWindowsSpec, StreamJoinSpec, stream_join_reference_run
from streamsdsl.semantics.stream_table import StreamTableJoin, stream_table_reference_run
from streamsdsl.semantics.table_table import TableJoinSpec, table_join_reference_run

R = TestRecord
OUTS = ["mv", "fmv", "tmv", "st", "stl", "ss", "tt", "plain"]


def with_key_topology() -> Any:
    """Every family of function that takes the key by arity, each to its own topic."""
    b = StreamsBuilder()
    s, s2 = b.stream("s"), b.stream("s2")
    t, t2 = b.table("t"), b.table("t2")
    s.map_values(lambda k, v: f"{k}:{v}").to("mv")
    s.flat_map_values(lambda key, value: [str(key), value]).to("fmv")
    t.map_values(lambda k, v: f"{k}/{v}").to_stream().to("tmv")
    s.join(t, lambda k, v, tv: f"{k}|{v}|{tv}").to("st")
    s.left_join(t, lambda k, v, tv: f"{k}|{v}|{tv}").to("stl")
    s.join(s2, lambda k, v, ov: f"{k}|{v}|{ov}", JoinWindows.of_time_difference_with_no_grace(10)).to("ss")
    t.join(t2, lambda k, v, ov: f"{k}|{v}|{ov}", materialized=Materialized.as_("tt-store")).to_stream().to("tt")
    s.map_values(str.upper).join(t, lambda v, tv: f"{v}+{tv}").to("plain")  # without the key, as before
    return b.build()


@pytest.mark.every_host
@pytest.mark.streaming_host
def test_every_family_receives_the_key(run_driver: Any) -> None:
    """Each with-key function gets the record's key (``None`` for a null-key record of a
    left join, KIP-962); the records keep their keys; a mapper without the key still works."""
    records = [("t", "a", "A", 1), ("t2", "a", "Z", 2), ("s", "a", "x", 3), ("s", None, "n", 4), ("s2", "a", "y", 5)]
    got = dict(zip(OUTS, run_driver(with_key_topology(), records, out=OUTS)))
    assert got == {
        "mv": [R("a", "a:x", 3), R(None, "None:n", 4)],
        "fmv": [R("a", "a", 3), R("a", "x", 3), R(None, "None", 4), R(None, "n", 4)],
        "tmv": [R("a", "a/A", 1)],
        "st": [R("a", "a|x|A", 3)],
        "stl": [R("a", "a|x|A", 3), R(None, "None|n|None", 4)],
        "ss": [R("a", "a|x|y", 5)],
        "tt": [R("a", "a|A|Z", 2)],
        "plain": [R("a", "X+A", 3)],
    }


@pytest.mark.parametrize("engine", ["direct", pytest.param("spark", marks=pytest.mark.spark)])
def test_a_materialized_join_store_holds_the_with_key_result(engine: str, request: pytest.FixtureRequest) -> None:
    """A materialized table–table join's store computes its values with the key too."""
    from streamsdsl.runtime.driver import TopologyTestDriver

    spark = request.getfixturevalue("spark") if engine == "spark" else None
    with TopologyTestDriver(with_key_topology(), engine=engine, spark=spark) as d:
        d.create_input_topic("t").pipe_input("a", "A", 1)
        d.create_input_topic("t2").pipe_input("a", "Z", 2)
        assert d.get_key_value_store("tt-store").get("a") == "a|A|Z"


def test_describe_is_that_of_the_functions_without_key() -> None:
    """The function's form changes nothing in the topology: same names, same describe()."""
    def build(with_key: bool) -> str:
        b = StreamsBuilder()
        s = b.stream("s")
        mapper = (lambda k, v: v) if with_key else (lambda v: v)
        joiner = (lambda k, v, o: v) if with_key else (lambda v, o: v)
        s.map_values(mapper).join(b.table("t"), joiner).to("out")
        return b.build().describe()

    assert build(True) == build(False)


# --- the kernels: a with-key joiner sees the key of the record it makes ------------------------------


def _records(sides: tuple[str, str]) -> Any:
    record = st.tuples(st.sampled_from(sides), st.sampled_from(["a", "b", None]),
                       st.sampled_from(["x", "y", None]), st.integers(0, 30))
    return st.lists(record, max_size=25)


def _pair(left: Any, right: Any) -> Any:
    return (left, right)


def _keyed(key: Any, left: Any, right: Any) -> Any:
    return (key, left, right)


@given(_records(("left", "right")), st.sampled_from(["inner", "left", "outer"]), st.integers(0, 5),
       st.integers(0, 5))
def test_stream_stream_kernel_gives_each_output_its_key(records: Any, kind: str, difference: int, grace: int) -> None:
    """Property: with a with-key joiner every output (null-joins emitted later included) is the
    two-value joiner's output with the output's own key in front."""
    spec = StreamJoinSpec(kind, JoinWindowsSpec.of_time_difference_and_grace(difference, grace))  # type: ignore[arg-type]
    plain = stream_join_reference_run(records, spec, _pair).outputs
    keyed = stream_join_reference_run(records, spec, JoinerWithKey(_keyed)).outputs
    assert [(o.key, (o.key, *o.value), o.timestamp) for o in plain] == [(o.key, o.value, o.timestamp) for o in keyed]


@given(_records(("stream", "table")), st.sampled_from(["inner", "left"]))
def test_stream_table_kernel_gives_each_output_its_key(records: Any, kind: str) -> None:
    """Property: as above for the stream–table join (a null key of a left join: ``None``)."""
    plain, _ = stream_table_reference_run(records, StreamTableJoin(kind), _pair)  # type: ignore[arg-type]
    keyed, _ = stream_table_reference_run(records, StreamTableJoin(kind), JoinerWithKey(_keyed))  # type: ignore[arg-type]
    assert [(o.key, (o.key, *o.value), o.timestamp) for o in plain] == [(o.key, o.value, o.timestamp) for o in keyed]


@given(_records(("left", "right")), st.sampled_from(["inner", "left", "outer"]))
def test_table_table_kernel_gives_each_output_its_key(records: Any, kind: str) -> None:
    """Property: as above for the table–table join (deletes stay deletes)."""
    plain, _ = table_join_reference_run(records, TableJoinSpec(kind), _pair)  # type: ignore[arg-type]
    keyed, _ = table_join_reference_run(records, TableJoinSpec(kind), JoinerWithKey(_keyed))  # type: ignore[arg-type]

    def with_key(key: Any, value: Any) -> Any:
        return None if value is None else (key, *value)

    assert [(o.key, with_key(o.key, o.change.new), with_key(o.key, o.change.old), o.timestamp) for o in plain] == [
        (o.key, o.change.new, o.change.old, o.timestamp) for o in keyed]
