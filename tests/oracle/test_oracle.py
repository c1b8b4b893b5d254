"""Kafka Streams itself as the oracle (oracle/): a fixed seed's generated cases on streamsdsl's
direct engine against Kafka Streams' TopologyTestDriver, the case files' Kafka outcomes
against Kafka Streams today, and the spec and menu contract of both languages.

Needs the oracle built (``make oracle-jar``, which ``make test`` runs first); without it these
tests fail with that command in the message, they are never skipped."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Iterator

import attrs
import pytest

from oracle.generator import WALL_CLOCK, Case, generate
from oracle.harness import CLOSE_RETENTION_MS, JAVA_DIR, KafkaOracle, Outcome, OracleUnavailableError, case_id
from oracle.harness import compare, outcomes, run_cases
from oracle.menu import MENU
from oracle.processors import PROCESSORS
from oracle.recipe import build
from oracle.spec import UnsupportedNodeError, topology_spec
from streamsdsl import StreamsBuilder

CASES = Path(__file__).resolve().parents[2] / "oracle" / "cases"

#: The differences among the first 60 cases of seed 1 on the direct engine: (case index,
#: minimized case id); each id is a case file under oracle/cases with status "reported".
SEED, COUNT = 1, 60
EXPECTED: list[tuple[int, str]] = []  # 19: ba17b223b48a until it was fixed


@pytest.fixture(scope="module")
def kafka() -> Iterator[KafkaOracle]:
    try:
        oracle = KafkaOracle()
    except OracleUnavailableError as e:
        pytest.fail(str(e))
    with oracle:
        yield oracle


def test_fixed_seed_on_the_direct_engine(kafka: KafkaOracle) -> None:
    """Seed 1's first 60 cases: all agree but the reported differences, each minimized to the
    case of its file."""
    run = run_cases(kafka, SEED, COUNT)
    assert [(d.index, case_id(d.minimized)) for d in run.differences] == EXPECTED
    assert run.agree == COUNT - len(EXPECTED)
    for _, case in EXPECTED:
        assert json.loads((CASES / f"{case}.json").read_text())["status"] == "reported"


#: The differences among the first 40 processor cases of seed 1 (``shape="process"``) on the
#: direct engine: (case index, minimized case id), as EXPECTED (none since the two found here,
#: 0ae34bb2c1ce and a1c70d1c7205, were fixed).
PROCESS_COUNT = 40
PROCESS_EXPECTED: list[tuple[int, str]] = []


def test_processors_on_the_direct_engine(kafka: KafkaOracle) -> None:
    """Seed 1's first 40 processor cases (every processor of the menu, process and
    process_values, persistent and in-memory stores, with and without caching): records,
    timestamps, order, dropped records and describe() as Kafka Streams'."""
    run = run_cases(kafka, SEED, PROCESS_COUNT, shape="process")
    assert [(d.index, case_id(d.minimized)) for d in run.differences] == PROCESS_EXPECTED
    assert run.agree == PROCESS_COUNT - len(PROCESS_EXPECTED)
    for _, case in PROCESS_EXPECTED:
        assert json.loads((CASES / f"{case}.json").read_text())["status"] == "reported"
    drawn = {generate(SEED, i, shape="process").recipe["op"]["processor"] for i in range(PROCESS_COUNT)}
    assert drawn == set(PROCESSORS)


#: Foreign-key join cases of seed 1 (``shape="fk_join"``) compared on the direct engine.
FK_COUNT = 30


def test_foreign_key_joins_on_the_direct_engine(kafka: KafkaOracle) -> None:
    """Seed 1's first 30 foreign-key join cases (inner and left, both extractors of the menu,
    one giving None foreign keys, materialized or not, after a table step): records,
    timestamps, order and dropped records as Kafka Streams'."""
    run = run_cases(kafka, SEED, FK_COUNT, shape="fk_join")
    assert (run.agree, run.differences) == (FK_COUNT, ())
    drawn = {(c.recipe["op"]["kind"], c.recipe["op"]["extractor"], c.recipe["op"]["materialized"])
             for c in (generate(SEED, i, shape="fk_join") for i in range(FK_COUNT))}
    assert {(k, e) for k, e, _ in drawn} == {(k, e) for k in ("inner", "left")
                                             for e in ("length_key", "letter_key_or_null")}


def _process_case(processor: str, params: dict[str, Any], records: list[tuple[str, str | None, str | None, int]],
                  *, values: bool = False, store: dict[str, Any] | None = None) -> Case:
    op = {"processor": processor, "values": values, "name": processor.replace("_", "-"), "params": params,
          "store": {"persistent": False, "caching": False, "logging": True, **(store or {})}}
    return Case({"shape": "process", "pre": [], "other_pre": [], "table_steps": [], "op": op, "post": []}, records)


#: The records of Kafka's own punctuation check (KAFKA_STREAMS_SEMANTICS.md, Processor API), the
#: first at 3 rather than 0, so that alignment to 0 and to the first stream time differ.
TICKS = [("in", "a", "1", 3), ("in", "a", "2", 5), ("in", "b", "3", 12), ("in", "c", None, 13),
         ("in", "d", "x", 40), ("in", "d", None, 41)]


def test_kafka_punctuates_stream_time_at_multiples_of_the_interval(kafka: KafkaOracle) -> None:
    """Kafka Streams' stream-time punctuator (interval 10) first fires at the first stream time
    (3), then once stream time reaches a multiple of 10 (12, not 13: aligned to 0), missed
    intervals skipped (40); it is called with the stream time and forwards after the record's own
    output; a None value deletes the key (13)."""
    case = _process_case("store_size", {"interval": 10, "emit": "count"}, TICKS)
    assert kafka.run(case).outputs == {"out": [
        ["a", "1", 3], ["size", 1, 3], ["a", "2", 5], ["b", "3", 12], ["size", 2, 12], ["c", None, 13],
        ["d", "x", 40], ["size", 3, 40], ["d", None, 41]]}


def test_kafka_punctuates_wall_clock_time_from_its_schedule(kafka: KafkaOracle) -> None:
    """Kafka Streams' wall-clock punctuator (interval 10, the driver's clock from 0) fires only
    when the clock is advanced: first at 11 (due at 10, one interval after it was scheduled), not
    when a record is piped, then once at 36 (20 and 30 missed, skipped), with the system time as
    its timestamp."""
    case = _process_case("store_size", {"interval": 10, "emit": "count", "punctuation": "wall_clock"}, [
        ("in", "a", "1", 3), (WALL_CLOCK, None, None, 4), (WALL_CLOCK, None, None, 7), ("in", "b", "2", 50),
        (WALL_CLOCK, None, None, 25)])
    assert kafka.run(case).outputs == {"out": [["a", "1", 3], ["size", 1, 11], ["b", "2", 50], ["size", 2, 36]]}


def test_kafka_counts_an_expired_window_put_as_dropped(kafka: KafkaOracle) -> None:
    """Kafka's in-memory window store (size 5, retention 10) drops a put for a window that
    expired (start 0 <= 30 - 10) and counts it in dropped-records-total; its fetch returns None, so
    the late record's count is 1. A persistent store drops by segment (60 s here): it takes the put,
    and only its fetch hides the window."""
    records = [("in", "a", "1", 3), ("in", "a", "2", 4), ("in", "a", None, 30), ("in", "a", "x", 3)]
    memory = _process_case("window_count", {"size": 5}, records, values=True, store={"retention": 10})
    expected = {"out": [["a", 1, 3], ["a", 2, 4], ["a", 1, 30], ["a", 1, 3]]}
    assert (kafka.run(memory).outputs, kafka.run(memory).dropped) == (expected, 1)
    persistent = attrs.evolve(memory, recipe={**memory.recipe, "op": {
        **memory.recipe["op"], "store": {**memory.recipe["op"]["store"], "persistent": True}}})
    assert (kafka.run(persistent).outputs, kafka.run(persistent).dropped) == (expected, 0)


def test_describe_shows_the_processor_and_its_store(kafka: KafkaOracle) -> None:
    """Kafka's describe() of a named processor: ``Processor: name (stores: [store])``."""
    case = _process_case("dedup", {"by": "value", "horizon": 10, "interval": 5}, [("in", "a", "x", 1)])
    assert "    Processor: dedup (stores: [dedup-store])\n" in kafka.run(case).describe


@pytest.mark.spark
def test_fixed_seed_on_the_spark_engine(kafka: KafkaOracle, spark: Any) -> None:
    """Seed 3's first 4 cases on the compiled Spark plan (one batch job each) agree with Kafka
    Streams."""
    run = run_cases(kafka, 3, 4, engine="spark", spark=spark)
    assert (run.agree, run.differences) == (4, ())


@pytest.mark.spark
def test_foreign_key_joins_on_the_spark_engine(kafka: KafkaOracle, spark: Any) -> None:
    """Seed 1's first 2 foreign-key join cases on the compiled Spark plan (its three operators)
    agree with Kafka Streams."""
    run = run_cases(kafka, SEED, 2, engine="spark", spark=spark, shape="fk_join")
    assert (run.agree, run.differences) == (2, ())


@pytest.mark.parametrize("path", sorted(CASES.glob("*.json")), ids=lambda p: p.stem)
def test_case_file_holds_what_kafka_streams_writes(kafka: KafkaOracle, path: Path) -> None:
    """Each case file's Kafka outcome is what Kafka Streams writes for its case today (with the
    on-close window retention the file names, the harness's by default)."""
    data = json.loads(path.read_text())
    retention = data.get("kafka_close_retention_ms", CLOSE_RETENTION_MS)
    assert kafka.run(Case.from_json(data), close_retention_ms=retention) == Outcome.from_json(data["kafka"])


def test_suppress_case_is_compared_with_kafka_streams_without_the_cache(kafka: KafkaOracle) -> None:
    """Case 35cdebb28726 (a suppress, the cache on) differs from Kafka Streams with the cache;
    the harness runs Kafka Streams again without it, whose outcome the file holds and streamsdsl
    matches (KNOWN_DIFFERENCES["suppress-clock-without-cache"]); a case without a suppress is
    never run twice."""
    data = json.loads((CASES / "35cdebb28726.json").read_text())
    case = Case.from_json(data)
    uncached = kafka.run(attrs.evolve(case, cache=False))
    assert uncached == Outcome.from_json(data["kafka_without_cache"])
    k, s = outcomes(kafka, case)
    assert k == uncached and compare(k, s, case.recipe) == []
    runs: list[Case] = []

    class Counting:
        def run(self, c: Case) -> Outcome:
            runs.append(c)
            return Outcome(outputs={"out": []})
    plain = attrs.evolve(case, recipe={**case.recipe, "op": {**case.recipe["op"], "suppress": False}})
    outcomes(Counting(), plain)  # type: ignore[arg-type]
    assert runs == [plain]


def test_caching_processor_store_is_compared_with_kafka_streams_without_caching(kafka: KafkaOracle) -> None:
    """Kafka's caching window store answers a fetch from its cache, which still holds a window
    its store has expired (window 5 after the store reached 30, retention 25): the count goes on
    to 2 there, while streamsdsl's store (no record cache) has forgotten it, as Kafka's does
    uncached. The harness compares with Kafka Streams run with caching off
    (KNOWN_DIFFERENCES["processor-store-cache"])."""
    count = {"processor": "window_count", "values": False, "name": "window-count", "params": {"size": 5},
             "store": {"persistent": False, "caching": True, "logging": True, "retention": 25}}
    op = {"processor": "store_size", "values": False, "name": "store-size",
          "params": {"interval": 1, "emit": "count", "punctuation": "wall_clock"},
          "store": {"persistent": False, "caching": False, "logging": True}, "then": count}
    case = Case({"shape": "process", "pre": [], "other_pre": [], "table_steps": [], "op": op, "post": []},
                [(WALL_CLOCK, None, None, 23), ("in", "a", "x", 6), (WALL_CLOCK, None, None, 8), ("in", "a", "x", 7)])
    cached = kafka.run(case)
    assert cached.outputs == {"out": [["size", 1, 23], ["a", 1, 6], ["size", 1, 31], ["a", 2, 7]]}
    k, s = outcomes(kafka, case)
    assert k.outputs == {"out": [["size", 1, 23], ["a", 1, 6], ["size", 1, 31], ["a", 1, 7]]}
    assert compare(k, s, case.recipe) == []


def test_close_retention_makes_kafka_streams_emit_every_closed_window(kafka: KafkaOracle) -> None:
    """With the harness's retention on on-close window stores, Kafka Streams emits the sliding
    window its own retention expired (case f251359c5c30), as streamsdsl does."""
    case = Case.from_json(json.loads((CASES / "f251359c5c30.json").read_text()))
    assert kafka.run(case).outputs == {"out": [[{"key": "c", "start": 21, "end": 24}, "yy", 24]]}


def test_java_menu_has_the_python_menu() -> None:
    """Menu.java names exactly the functions of oracle/menu.py."""
    java = (JAVA_DIR / "src/main/java/streamsdsl/oracle/Menu.java").read_text()
    assert set(re.findall(r'case "(\w+)"', java)) == set(MENU)


def test_java_processors_are_the_python_processors() -> None:
    """Processors.java names exactly the processors of oracle/processors.py, with a
    process_values variant where the Python menu has one."""
    java = (JAVA_DIR / "src/main/java/streamsdsl/oracle/Processors.java").read_text()
    process, values = java.split("static FixedKeyProcessorSupplier")
    assert set(re.findall(r'case "(\w+)": return \(\) ->', process)) == set(PROCESSORS)
    assert set(re.findall(r'case "(\w+)": return \(\) ->', values.split("// ---- stores")[0])) == {
        name for name, has_values in PROCESSORS.items() if has_values}


def test_spec_names_the_processor_and_its_store() -> None:
    """A processor case's spec: the process node names the menu's processor, its parameters and
    its stores; the store builder is in the spec's stores."""
    case = _process_case("window_count", {"size": 5}, [], values=True, store={"retention": 10, "caching": True})
    spec = topology_spec(build(case.recipe))
    assert spec["stores"] == [{"name": "window-count-store", "kind": "window", "persistent": False, "retention": 10,
                               "window_size": 5, "retain_duplicates": False, "key_serde": "String",
                               "value_serde": "Long", "caching": True, "logging": True}]
    assert spec["nodes"][1] == {"name": "window-count", "parents": [spec["nodes"][0]["name"]], "type": "process",
                                "values": True, "named": True, "processor": "window_count",
                                "params": {"size": 5, "store": "window-count-store"}, "stores": ["window-count-store"]}


#: How many global-table cases of seed 1 (``shape="global_table"``) the direct engine runs.
GLOBAL_TABLE_COUNT = 40


def test_global_table_joins_on_the_direct_engine(kafka: KafkaOracle) -> None:
    """Seed 1's first 40 global-table cases (inner and left joins on every key selector of the
    menu, after key-keeping and key-changing steps, the table's records interleaved with the
    stream's): records, timestamps, order and dropped records as Kafka Streams'."""
    run = run_cases(kafka, SEED, GLOBAL_TABLE_COUNT, shape="global_table")
    assert [(d.index, case_id(d.minimized)) for d in run.differences] == []
    assert run.agree == GLOBAL_TABLE_COUNT
    drawn = [generate(SEED, i, shape="global_table").recipe["op"] for i in range(GLOBAL_TABLE_COUNT)]
    assert {(op["kind"], op["key_selector"]) for op in drawn} == {
        (kind, f.name) for kind in ("inner", "left") for f in MENU.values() if f.kind == "key_selector"}


def test_global_table_spec() -> None:
    """A global table and its join in the spec: the table's topic, the join's kind and functions."""
    case = generate(SEED, 0, shape="global_table")
    spec = topology_spec(build(case.recipe))
    table, join = (n for n in spec["nodes"] if n["type"].startswith("global_table"))
    assert table == {"name": table["name"], "parents": [], "type": "global_table_source", "topic": "other"}
    assert join["type"] == "global_table_join" and join["parents"][1] == table["name"]
    assert {join["kind"], join["key_selector"], join["joiner"]} <= {"inner", "left", *MENU}


def test_spec_names_menu_functions() -> None:
    """The spec of a generated case: nodes in topological order, functions by menu name."""
    case = generate(1, 0)
    spec = topology_spec(build(case.recipe))
    names = [n["name"] for n in spec["nodes"]]
    assert all(set(n["parents"]) <= set(names[:i]) for i, n in enumerate(spec["nodes"]))
    assert spec == json.loads(json.dumps(spec))


def test_spec_refuses_a_function_off_the_menu() -> None:
    """A callable that is not on the menu has no name in Java: the serializer says so."""
    b = StreamsBuilder()
    b.stream("in").filter(lambda k, v: True).to("out")
    with pytest.raises(ValueError, match="is not a function of the oracle's menu"):
        topology_spec(b.build())


def test_spec_refuses_a_node_without_a_rule() -> None:
    """peek has no rule in the oracle (the generator never writes it)."""
    b = StreamsBuilder()
    b.stream("in").peek(print).to("out")
    with pytest.raises(UnsupportedNodeError, match="no rule for PeekNode"):
        topology_spec(b.build())


def test_docs_list_what_the_generator_leaves_out() -> None:
    """docs/testing.md's table of what the generator leaves out is `LEFT_OUT`, row for row."""
    from oracle.generator import LEFT_OUT

    page = (Path(__file__).resolve().parents[2] / "docs" / "testing.md").read_text()
    for what, why in LEFT_OUT.items():
        assert f"| {what} | {why} |" in page


@pytest.mark.spark
@pytest.mark.parametrize("index, joiner", [(163, "joiners_right"), (188, "joiners_left")])
def test_builtin_joiners_agree_with_kafka_streams(kafka: KafkaOracle, spark: Any, monkeypatch: pytest.MonkeyPatch,
                                                  index: int, joiner: str) -> None:
    """Two of seed 1's left stream-table join cases with ``Joiners.right()`` (a missing table
    value: a null value) and ``Joiners.left()`` as their joiner agree with Kafka Streams' ``(v1,
    v2) -> v2`` / ``v1`` on the direct engine and on the JVM operator (Spark columns)."""
    from streamsdsl.jvm import OPERATOR_ENV

    generated = generate(SEED, index)
    assert generated.recipe["shape"] == "stream_table" and generated.recipe["op"]["kind"] == "left"
    case = attrs.evolve(generated, recipe={**generated.recipe, "op": {**generated.recipe["op"], "joiner": joiner}})
    monkeypatch.setenv(OPERATOR_ENV, "jvm")
    for engine in ("direct", "spark"):
        k, s = outcomes(kafka, case, engine, spark)
        assert compare(k, s, case.recipe) == [], engine


@pytest.mark.spark
def test_table_and_global_table_joins_on_the_jvm_operator(kafka: KafkaOracle, spark: Any,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """One of seed 1's table-table join cases (an outer join) and one of its global-table join
    cases on the JVM operator (the Spark plan) agree with Kafka Streams (the conformance suites'
    spark-jvm host runs Kafka's join tests there, tests/jvm/test_kernel_differential.py the rules)."""
    from streamsdsl.jvm import OPERATOR_ENV

    monkeypatch.setenv(OPERATOR_ENV, "jvm")
    cases = [generate(SEED, 12), generate(SEED, 0, shape="global_table")]
    assert [c.recipe["shape"] for c in cases] == ["table_table", "global_table"]
    assert cases[0].recipe["op"]["kind"] == "outer"
    for case in cases:
        assert compare(*outcomes(kafka, case, "spark", spark), case.recipe) == [], case.recipe
