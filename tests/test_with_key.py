"""Kafka's ``*WithKey`` overloads by arity (issue 41): ``map_values`` / ``flat_map_values``
(``ValueMapperWithKey``) and the joiners of every join (``ValueJoinerWithKey``) receive the
record's key, read-only; the same functions without the key keep working. Driver tests run on
every host of the conformance suite (the direct engine, the Spark plan, a streaming query)."""

from __future__ import annotations

from typing import Any

import pytest

from streamsdsl import JoinWindows, Materialized, StreamsBuilder, TestRecord

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
