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

from oracle.generator import Case, generate
from oracle.harness import CLOSE_RETENTION_MS, JAVA_DIR, KafkaOracle, Outcome, OracleUnavailableError, case_id
from oracle.harness import compare, outcomes, run_cases
from oracle.menu import MENU
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


@pytest.mark.spark
def test_fixed_seed_on_the_spark_engine(kafka: KafkaOracle, spark: Any) -> None:
    """Seed 3's first 4 cases on the compiled Spark plan (one batch job each) agree with Kafka
    Streams."""
    run = run_cases(kafka, 3, 4, engine="spark", spark=spark)
    assert (run.agree, run.differences) == (4, ())


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


def test_close_retention_makes_kafka_streams_emit_every_closed_window(kafka: KafkaOracle) -> None:
    """With the harness's retention on on-close window stores, Kafka Streams emits the sliding
    window its own retention expired (case f251359c5c30), as streamsdsl does."""
    case = Case.from_json(json.loads((CASES / "f251359c5c30.json").read_text()))
    assert kafka.run(case).outputs == {"out": [[{"key": "c", "start": 21, "end": 24}, "yy", 24]]}


def test_java_menu_has_the_python_menu() -> None:
    """Menu.java names exactly the functions of oracle/menu.py."""
    java = (JAVA_DIR / "src/main/java/streamsdsl/oracle/Menu.java").read_text()
    assert set(re.findall(r'case "(\w+)"', java)) == set(MENU)


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
