"""Run a case on Kafka Streams (the oracle) and on streamsdsl, compare, minimize, write it down.

`KafkaOracle` keeps one JVM running ``oracle/java`` (built with ``make oracle-jar``) and sends it
one case per line. `run_streamsdsl` runs the same case on streamsdsl's ``TopologyTestDriver``
(direct or Spark engine). `compare` applies the documented differences the generator knows
(`KNOWN_DIFFERENCES`) and says what differs; `minimize` drops input records and steps while
the difference stays; `write_case` stores a replayable case file.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path
from typing import Any, Callable

import attrs

from oracle.generator import WALL_CLOCK, Case
from oracle.recipe import RecipeError, build, value_type
from oracle.spec import topology_spec

__all__ = [
    "CLOSE_RETENTION_MS",
    "JAVA_DIR",
    "KNOWN_DIFFERENCES",
    "NOT_BUILT",
    "TRIAGE_KEYS",
    "case_id",
    "KafkaOracle",
    "OracleUnavailableError",
    "Outcome",
    "compare",
    "describes",
    "minimize",
    "outcomes",
    "Difference",
    "Run",
    "run_cases",
    "run_streamsdsl",
    "write_case",
]

ROOT = Path(__file__).resolve().parent
JAVA_DIR = ROOT / "java"
BUILD_COMMAND = "make oracle-jar"
#: The retention of on-close time and sliding window stores in the oracle (one year; see
#: KNOWN_DIFFERENCES["closed-window-retention"]).
CLOSE_RETENTION_MS = 365 * 24 * 3600 * 1000

#: The documented differences from Kafka Streams (docs/differences.md) that the comparison
#: applies; each is asserted by a regression test in tests/oracle/.
KNOWN_DIFFERENCES = {
    "closed-window-retention": "docs/differences.md, Deliberate improvements: streamsdsl emits every closed "
    "window exactly once on close, while Kafka Streams' window store retention (size + grace) can expire a "
    "closed time or sliding window before the emit-on-close fetch sees it. The oracle gives the window stores "
    "of on-close time and sliding windows a retention of CLOSE_RETENTION_MS, so that Kafka Streams too emits "
    "every closed window.",
    "outer-join-emit-time": "docs/differences.md, Joins: Kafka Streams emits a left/outer stream-stream "
    "join's non-joined results only when a scan runs, which it skips until stream time passes the window "
    "of the earliest held record as the processing side sees it (and a record of the other side sees the "
    "window mirrored); streamsdsl emits each at the first record past its window and grace. The comparison "
    "asks for the same joined results in the same order, and every non-joined result Kafka Streams wrote "
    "among streamsdsl's.",
    "closed-session-in-cache": "docs/differences.md, Session windows: a session is final once stream time "
    "passes end + gap + grace, and no later record merges into it. Kafka Streams' record cache still holds a closed "
    "session: a record within the gap whose merged session is not late merges into it, and the flush forwards no "
    "tombstone for the closed session (the underlying store's retention already hides it), so Kafka's output holds "
    "two live overlapping sessions of one key. The comparison recognises that in Kafka Streams' output and accepts "
    "streamsdsl's records for the topic (the dropped records are still compared).",
    "processor-store-cache": "docs/differences.md, The Processor API: a processor's store has no record "
    "cache here (with_caching_enabled is accepted). Kafka Streams' caching store answers reads from its cache, "
    "which still holds entries its store has since expired (a window past retention), and counts only what it "
    "has flushed. Where a processor case with a caching store differs, the oracle runs Kafka Streams again with "
    "caching off in every store, and the comparison accepts streamsdsl's outcome when it is Kafka's there.",
    "suppress-clock-without-cache": "docs/differences.md, Grouped tables and suppress: streamsdsl's suppress, "
    "folded into its aggregation, advances its stream time by every record the aggregation accepts, as Kafka "
    "Streams' suppress node does without the record cache. With the cache, Kafka's suppress node sees only "
    "what the cache forwards, and an aggregation that writes None into a window or key it has no value for "
    "forwards nothing: the node's stream time stays behind and it releases later, or never. Where a case with "
    "a suppress and the cache differs, the oracle runs Kafka Streams again without the cache, and the "
    "comparison accepts streamsdsl's outcome when it is Kafka's there.",
    "repartition-null-keys": "docs/differences.md, Running: a record whose new key is None is dropped by the "
    "repartition's filter in both systems (unless a join that keeps None keys, KIP-962, reads the "
    "repartition); streamsdsl counts it in dropped-records-total, Kafka Streams does not. The oracle counts "
    "the records its filters drop (repartition_null_keys) and the comparison expects streamsdsl's dropped "
    "records to be Kafka's plus them.",
}


class OracleUnavailableError(RuntimeError):
    """The Kafka Streams oracle is not built (or Java is missing): the message names the command."""


@attrs.frozen
class Outcome:
    """What one system wrote: per output topic the records ``[key, value, timestamp]`` (a
    windowed key as ``{"key", "start", "end"}``), the dropped records, and (Kafka only) the
    ``None`` keys its repartitions filtered out; or the error it raised. ``describe``: the text of
    the topology's ``describe()``, for the cases that compare it (`describes`), else ``None``."""

    outputs: dict[str, list[list[Any]]] = attrs.field(factory=dict)
    dropped: int = 0
    repartition_null_keys: int = 0
    error: str | None = None
    describe: str | None = None

    def to_json(self) -> dict[str, Any]:
        data = attrs.asdict(self)
        if data["describe"] is None:  # the case files of cases that do not compare it stay as they were
            del data["describe"]
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Outcome:
        return cls(data.get("outputs", {}), data.get("dropped", 0), data.get("repartition_null_keys", 0),
                   data.get("error"), data.get("describe"))


def describes(recipe: dict[str, Any]) -> bool:
    """Whether the cases of ``recipe`` compare ``describe()`` too: those with a processor (its
    line, ``Processor: name (stores: [...])``, and the names around it are part of issue 39) and
    the stateless ones reading a topic pattern (its ``Source: ... (topics: <pattern>)`` line,
    issue 41; the Java twin of other shapes adds nodes of its own: a counting ``peek`` before a
    repartition, a ``Named`` split)."""
    return recipe["shape"] == "process" or (bool(recipe.get("source_pattern")) and recipe["shape"] == "stateless")


def _classpath() -> str:
    classes, listing = JAVA_DIR / "target" / "classes", JAVA_DIR / "target" / "classpath.txt"
    if not (classes / "streamsdsl" / "oracle" / "Oracle.class").exists() or not listing.exists():
        raise OracleUnavailableError(
            f"The Kafka Streams oracle is not built ({classes} is missing): run `{BUILD_COMMAND}` "
            "(Maven resolves kafka-streams and kafka-streams-test-utils into ~/.m2).")
    return f"{classes}:{listing.read_text().strip()}"


class KafkaOracle:
    """One JVM running Kafka Streams' ``TopologyTestDriver`` over cases sent as JSON lines."""

    def __init__(self) -> None:
        try:
            self._process = subprocess.Popen(
                ["java", "-cp", _classpath(), "streamsdsl.oracle.Oracle"], stdin=subprocess.PIPE,
                stdout=subprocess.PIPE, text=True, encoding="utf-8", bufsize=1)
        except FileNotFoundError as e:
            raise OracleUnavailableError(f"Java is needed to run the oracle ({e}); install a JDK 17.") from e

    def __enter__(self) -> KafkaOracle:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        """End the JVM (it exits when its input closes) and close the pipes."""
        assert self._process.stdin is not None and self._process.stdout is not None
        self._process.stdin.close()
        self._process.wait(timeout=30)
        self._process.stdout.close()

    def run(self, case: Case, *, close_retention_ms: int | None = CLOSE_RETENTION_MS) -> Outcome:
        """Kafka Streams' output for ``case``; ``close_retention_ms=None`` leaves Kafka's own
        retention on on-close window stores."""
        assert self._process.stdin is not None and self._process.stdout is not None
        request = {"spec": topology_spec(build(case.recipe)), "records": [list(r) for r in case.records],
                   "cache": case.cache, "close_retention_ms": close_retention_ms,
                   "describe": describes(case.recipe)}
        self._process.stdin.write(json.dumps(request) + "\n")
        self._process.stdin.flush()
        line = self._process.stdout.readline()
        if not line:
            raise OracleUnavailableError(f"The oracle JVM exited (code {self._process.poll()}).")
        return Outcome.from_json(json.loads(line))


def _plain(value: Any) -> Any:
    from streamsdsl import Windowed

    if isinstance(value, Windowed):
        return {"key": value.key, "start": value.window.start, "end": value.window.end}
    return value


def run_streamsdsl(case: Case, engine: str = "direct", spark: Any = None) -> Outcome:
    """streamsdsl's output for ``case`` on its ``TopologyTestDriver`` (``engine``)."""
    from streamsdsl import RecordError, TopologyTestDriver

    topology = build(case.recipe)
    describe = str(topology.describe()) if describes(case.recipe) else None
    config = {} if case.cache else {"statestore.cache.max.bytes": 0}
    with TopologyTestDriver(topology, config, engine=engine, spark=spark, initial_wall_clock_time_ms=0) as driver:
        inputs = {t: driver.create_input_topic(t) for t in topology.source_topics}
        for topic, key, value, ts in case.records:
            if topic == WALL_CLOCK:
                driver.advance_wall_clock_time(ts)
            else:  # a pattern source's topics are created as the records name them (as Kafka's driver)
                if topic not in inputs:
                    inputs[topic] = driver.create_input_topic(topic)
                inputs[topic].pipe_input(key, value, ts)
        try:
            outputs = {t: [[_plain(r.key), _plain(r.value), r.timestamp]
                           for r in driver.create_output_topic(t).read_records_to_list()]
                       for t in sorted(topology.sink_topics)}
            dropped = driver.metrics()["dropped-records-total"]
        except RecordError as e:
            return Outcome(error=f"{type(e).__name__}: {e}", describe=describe)
    return Outcome(outputs, int(dropped), describe=describe)


#: The error of an outcome that streamsdsl could not build (the oracle then does not run).
NOT_BUILT = "not built"


def outcomes(oracle: KafkaOracle, case: Case, engine: str = "direct", spark: Any = None) -> tuple[Outcome, Outcome]:
    """Kafka Streams' and streamsdsl's outcomes of ``case``. A topology streamsdsl refuses to
    build is not run on either: streamsdsl's outcome then holds the refusal."""
    from streamsdsl import StreamsDslError

    try:
        build(case.recipe)
    except StreamsDslError as e:
        return Outcome(error=NOT_BUILT), Outcome(error=f"{NOT_BUILT}: {type(e).__name__}: {e}")
    kafka, ours = oracle.run(case), run_streamsdsl(case, engine, spark)
    if case.cache and _suppressed(case.recipe) and compare(kafka, ours, case.recipe):
        # KNOWN_DIFFERENCES["suppress-clock-without-cache"]: the suppress node's stream time
        # of Kafka Streams without the cache
        uncached = oracle.run(attrs.evolve(case, cache=False))
        if not compare(uncached, ours, case.recipe):
            return uncached, ours
    if _caching_stores(case.recipe) and compare(kafka, ours, case.recipe):
        # KNOWN_DIFFERENCES["processor-store-cache"]: Kafka Streams with its stores uncached
        uncached = oracle.run(attrs.evolve(case, recipe=_without_store_caching(case.recipe)))
        if not compare(uncached, ours, case.recipe):
            return uncached, ours
    return kafka, ours


def _processors(recipe: dict[str, Any]) -> list[dict[str, Any]]:
    """A processor recipe's processors (the op and the one it may be followed by)."""
    if recipe["shape"] != "process":
        return []
    op = recipe["op"]
    return [op, *([op["then"]] if op.get("then") else [])]


def _caching_stores(recipe: dict[str, Any]) -> bool:
    return any(p["store"].get("caching") for p in _processors(recipe))


def _without_store_caching(recipe: dict[str, Any]) -> dict[str, Any]:
    """The recipe with caching off in every processor's store."""
    op = {**recipe["op"], "store": {**recipe["op"]["store"], "caching": False}}
    if op.get("then"):
        op["then"] = {**op["then"], "store": {**op["then"]["store"], "caching": False}}
    return {**recipe, "op": op}


def _suppressed(recipe: dict[str, Any]) -> bool:
    """A suppress after the recipe's aggregation (until the window closes, or a time limit)."""
    op = recipe["op"]
    return recipe["shape"] in ("aggregate", "cogroup") and bool(op.get("suppress") or op.get("time_limit") is not None)


def _non_joined(record: list[Any]) -> bool:
    """A left/outer stream–stream join's result without a match: the menu's joiner ``pair``
    renders the missing side as ``null`` (no input value is the text ``null``)."""
    value = record[1]
    return isinstance(value, str) and (value.startswith("null+") or value.endswith("+null"))


def _compare_outer_join(k: list[list[Any]], s: list[list[Any]]) -> bool:
    """KNOWN_DIFFERENCES["outer-join-emit-time"]: the joined results equal, in order; each
    non-joined result Kafka Streams wrote, streamsdsl wrote too (Kafka's may come later or,
    when the input ends first, never)."""
    if [r for r in k if not _non_joined(r)] != [r for r in s if not _non_joined(r)]:
        return False
    remaining = [r for r in s if _non_joined(r)]
    for record in (r for r in k if _non_joined(r)):
        if record not in remaining:
            return False
        remaining.remove(record)
    return True


#: Value mappers on the oracle's menu that map a value to ``None``: after one, a ``None`` in a
#: session-windowed table's records may be a session's value rather than its tombstone.
VALUES_TO_NONE = frozenset({"null_if_x"})


def _maps_values_to_none(recipe: dict[str, Any]) -> bool:
    return any(step.get("fn") in VALUES_TO_NONE for step in recipe.get("post", []))


def _merge_tombstone(records: list[list[Any]], at: int) -> bool:
    """Whether the ``None`` record ``at`` is a tombstone of a merge: Kafka Streams forwards a
    merged-away session's tombstone right before the merged session (one flush, one key), so
    the key's next records are ``None`` records of the same merge and then a session that
    contains this one."""
    key, _, _ = records[at]
    start, end = key["start"], key["end"]
    for other, value, _ in records[at + 1:]:
        if other["key"] != key["key"]:
            continue
        if other["start"] <= start and end <= other["end"] and (other["start"], other["end"]) != (start, end):
            return True
        if value is not None:
            return False
    return False


def _merged_a_closed_session(records: list[list[Any]], values_to_none: bool = False) -> bool:
    """KNOWN_DIFFERENCES["closed-session-in-cache"]: Kafka Streams' records of a session-windowed
    table hold two live sessions of one key that overlap (a closed session merged from the record
    cache without its tombstone); no session rule of its own produces that. ``values_to_none``:
    a mapper after the table maps some values to ``None``, so a ``None`` record is taken for a
    tombstone only where it is a merge's (`_merge_tombstone`), and otherwise for a value."""
    live: dict[Any, set[tuple[int, int]]] = {}
    if not all(isinstance(key, dict) and {"key", "start", "end"} <= key.keys() for key, _, _ in records):
        return False
    for i, (key, value, _) in enumerate(records):
        sessions = live.setdefault(json.dumps(key["key"], sort_keys=True), set())
        bounds = (key["start"], key["end"])
        if value is None and (not values_to_none or _merge_tombstone(records, i)):
            sessions.discard(bounds)
            continue
        if any(s != bounds and s[0] <= bounds[1] and bounds[0] <= s[1] for s in sessions):
            return True
        sessions.add(bounds)
    return False


def _session_aggregation(recipe: dict[str, Any]) -> bool:
    windows = recipe["op"].get("windows") if recipe["shape"] in ("aggregate", "cogroup") else None
    return bool(windows) and windows.get("kind") == "session"


def compare(kafka: Outcome, streamsdsl: Outcome, recipe: dict[str, Any]) -> list[str]:
    """What differs between the two outcomes of a case of ``recipe`` once the known
    differences are applied (empty: they agree). Both failing on a record counts as agreeing
    (their messages differ); a topology streamsdsl could not build never agrees."""
    described = []
    if kafka.describe != streamsdsl.describe and kafka.describe is not None and streamsdsl.describe is not None:
        described = [f"describe(): Kafka Streams\n{kafka.describe}streamsdsl\n{streamsdsl.describe}"]
    if kafka.error or streamsdsl.error:
        if kafka.error and streamsdsl.error and kafka.error != NOT_BUILT:
            return described
        return [f"error: Kafka Streams {kafka.error!r}, streamsdsl {streamsdsl.error!r}", *described]
    outer = recipe["shape"] == "stream_stream" and recipe["op"]["kind"] != "inner"
    sessions = _session_aggregation(recipe)
    problems = []
    for topic in sorted(set(kafka.outputs) | set(streamsdsl.outputs)):
        k, s = kafka.outputs.get(topic, []), streamsdsl.outputs.get(topic, [])
        if k != s and not (outer and _compare_outer_join(k, s)) and not (
                sessions and _merged_a_closed_session(k, _maps_values_to_none(recipe))):
            problems.append(f"topic {topic}: Kafka Streams {k}, streamsdsl {s}")
    expected = kafka.dropped + kafka.repartition_null_keys  # KNOWN_DIFFERENCES["repartition-null-keys"]
    if streamsdsl.dropped != expected:
        problems.append(f"dropped-records-total: Kafka Streams {kafka.dropped} (+{kafka.repartition_null_keys} "
                        f"None keys at repartitions), streamsdsl {streamsdsl.dropped}")
    return problems + described


def _valid(case: Case) -> bool:
    try:
        value_type(case.recipe)
    except RecipeError:
        return False
    return True


def _smaller(case: Case) -> list[Case]:
    """Cases one edit smaller than ``case``: one step, one option of the shape or one input
    record fewer."""
    out = []
    for part in ("pre", "other_pre", "table_steps", "post"):
        steps = case.recipe.get(part, [])
        for i in range(len(steps)):
            out.append(attrs.evolve(case, recipe={**case.recipe, part: steps[:i] + steps[i + 1:]}))
    op = case.recipe["op"]
    if case.recipe["shape"] == "process":
        out.extend(attrs.evolve(case, recipe={**case.recipe, "op": smaller}) for smaller in _simpler_processors(op))
    for option, off in (("suppress", False), ("merge", False), ("table_from_stream", False), ("time_limit", None)):
        if op.get(option, off) != off:
            smaller = attrs.evolve(case, recipe={**case.recipe, "op": {**op, option: off}})
            if option == "merge":  # without the merge, nothing reads topic other
                smaller = attrs.evolve(smaller, records=[r for r in case.records if r[0] != "other"])
            out.append(smaller)
    for i in range(len(case.records)):
        out.append(attrs.evolve(case, records=case.records[:i] + case.records[i + 1:]))
    return [c for c in out if _valid(c) and c.records]


def _simpler_processors(op: dict[str, Any]) -> list[dict[str, Any]]:
    """A process recipe's op one edit simpler: without its second processor, or one processor
    with a plainer store option (no caching, in memory, logging) or by ``process``."""
    out = [{k: v for k, v in op.items() if k != "then"}] if op.get("then") else []
    for then in _simpler_processor(op["then"]) if op.get("then") else []:
        out.append({**op, "then": then})
    return out + [{**simpler, **({"then": op["then"]} if op.get("then") else {})} for simpler in _simpler_processor(op)]


def _simpler_processor(op: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for option, plain in (("caching", False), ("persistent", False), ("logging", True)):
        if op["store"][option] != plain:
            out.append({**op, "store": {**op["store"], option: plain}})
    if op["values"]:
        out.append({**op, "values": False})
    return out


def minimize(case: Case, differs: Callable[[Case], bool]) -> Case:
    """The smallest case reached by dropping steps and records one at a time while ``differs``
    stays true (greedy: each accepted drop restarts the search)."""
    shrunk = True
    while shrunk:
        shrunk = False
        for smaller in _smaller(case):
            if differs(smaller):
                case, shrunk = smaller, True
                break
    return case


def case_id(case: Case) -> str:
    """A stable name for ``case``: the first 12 hex digits of its JSON's SHA-256."""
    return hashlib.sha256(json.dumps(case.to_json(), sort_keys=True).encode()).hexdigest()[:12]


#: What a person adds to a case file when triaging it (kept when the file is written again):
#: ``status`` — ``reported`` (a streamsdsl difference, reported, not fixed yet), ``fixed`` (a
#: regression test now) or ``documented`` (a known difference: ``difference`` names it in
#: `KNOWN_DIFFERENCES`) — and ``finding``, what the difference is.
TRIAGE_KEYS = ("status", "finding", "difference")


def write_case(directory: Path, case: Case, kafka: Outcome, streamsdsl: Outcome, engine: str,
               origin: dict[str, Any]) -> Path:
    """Write a replayable case file ``<directory>/<case_id>.json``: the case, the spec the
    oracle built, both outcomes and the differences (a triage already in the file is kept)."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{case_id(case)}.json"
    triage = {k: v for k, v in json.loads(path.read_text()).items() if k in TRIAGE_KEYS} if path.exists() else {}
    data = {
        **triage,
        **case.to_json(),
        "origin": origin,
        "engine": engine,
        "spec": None if streamsdsl.error and streamsdsl.error.startswith(NOT_BUILT)
        else topology_spec(build(case.recipe)),
        "kafka": kafka.to_json(),
        "streamsdsl": streamsdsl.to_json(),
        "differences": compare(kafka, streamsdsl, case.recipe),
    }
    path.write_text(json.dumps(data, indent=1) + "\n")
    return path


@attrs.frozen
class Difference:
    """A generated case that differs: its index in the run, the case as generated, the
    minimized case, both systems' outcomes of the minimized case and what differs."""

    index: int
    case: Case
    minimized: Case
    kafka: Outcome
    streamsdsl: Outcome
    problems: tuple[str, ...]


@attrs.frozen
class Run:
    """The result of `run_cases`: how many cases agree and the differences, in case order."""

    agree: int
    differences: tuple[Difference, ...]


def run_cases(oracle: KafkaOracle, seed: int, cases: int, engine: str = "direct", spark: Any = None, *,
              shape: str | None = None) -> Run:
    """Run the cases ``0 .. cases-1`` of ``seed`` on both systems; minimize each that differs
    (``shape="process"``: every case runs a processor of the menu)."""
    from oracle.generator import generate

    def differs(case: Case) -> bool:
        return bool(compare(*outcomes(oracle, case, engine, spark), case.recipe))

    agree, differences = 0, []
    for index in range(cases):
        case = generate(seed, index, shape=shape)
        if not differs(case):
            agree += 1
            continue
        small = minimize(case, differs)
        k, s = outcomes(oracle, small, engine, spark)
        differences.append(Difference(index, case, small, k, s, tuple(compare(k, s, small.recipe))))
    return Run(agree, tuple(differences))
