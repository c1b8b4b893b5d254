"""The oracle's case files (oracle/cases/*.json), replayed on streamsdsl without Java: each is
triaged; a fixed difference stays fixed; a reported one still differs (strict xfail: it fails
once streamsdsl agrees, so that its file is re-triaged); each documented difference is
streamsdsl's documented behaviour (docs/differences.md)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import attrs
import pytest

from oracle.generator import Case
from oracle.harness import KNOWN_DIFFERENCES, Outcome, case_id, compare, run_streamsdsl

CASES = Path(__file__).resolve().parents[2] / "oracle" / "cases"
FILES = sorted(CASES.glob("*.json"))


def _load(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text())


def _file(case: str) -> dict[str, Any]:
    return _load(CASES / f"{case}.json")


def _params(status: str) -> list[Any]:
    marks = {"reported": lambda d: [pytest.mark.xfail(strict=True, reason=d["finding"])], "fixed": lambda d: []}
    return [pytest.param(p, marks=marks[status](d), id=p.stem) for p in FILES if (d := _load(p))["status"] == status]


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_case_file_is_triaged(path: Path) -> None:
    """Every case file says what its difference is: reported or fixed with the finding, or
    documented with the name of a known difference; its name is its case's id."""
    data = _load(path)
    assert data.get("status") in ("reported", "fixed", "documented"), (
        f"{path.name} is not triaged: set 'status' to reported/fixed (with 'finding') or documented "
        f"(with 'difference', one of {sorted(KNOWN_DIFFERENCES)})")
    if data["status"] == "documented":
        assert data["difference"] in KNOWN_DIFFERENCES
    else:
        assert data["finding"]
    assert path.stem == case_id(Case.from_json(data))


@pytest.mark.parametrize("path", _params("fixed") + _params("reported"))
def test_streamsdsl_agrees_with_kafka_streams(path: Path) -> None:
    """A fixed difference: streamsdsl now writes what Kafka Streams wrote for the case."""
    data = _load(path)
    case = Case.from_json(data)
    assert compare(Outcome.from_json(data["kafka"]), run_streamsdsl(case), case.recipe) == []


def test_closed_window_emitted_although_kafka_retention_expired_it() -> None:
    """docs/differences.md, Deliberate improvements: a sliding window [21, 24] closed by a jump
    of stream time to 55 is emitted on close; Kafka Streams' store (retention difference +
    grace = 8 ms) expired it first and never emits it."""
    data = _file("f251359c5c30")
    assert data["kafka_close_retention_ms"] is None  # Kafka Streams' own retention
    assert data["kafka"]["outputs"] == {"out": []}
    out = run_streamsdsl(Case.from_json(data))
    assert out.outputs == {"out": [[{"key": "c", "start": 21, "end": 24}, "yy", 24]]}


def test_suppress_keeps_the_stream_time_kafka_has_without_the_cache() -> None:
    """docs/differences.md, Grouped tables and suppress: a tumbling reduce (size 5) suppressed
    until its windows close, the cache on; (b, zzz) at 11, then (b, None) at 77, for which the
    reduce returns None in the new window [75, 80). Kafka's cache forwards nothing for it, so
    Kafka's suppress node stays at 11 and never releases [10, 15]; without the cache it gets the
    record and releases [10, 15] at 77. streamsdsl's suppress advances by every record the
    aggregation accepts: Kafka's outcome without the cache, cache or not."""
    data = _file("35cdebb28726")
    case = Case.from_json(data)
    assert case.cache and data["kafka"]["outputs"] == {"out": []}
    released = {"out": [[{"key": "all", "start": 10, "end": 15}, "zzz", 11]]}
    assert data["kafka_without_cache"]["outputs"] == released
    out = run_streamsdsl(case)
    assert out.outputs == released
    assert run_streamsdsl(attrs.evolve(case, cache=False)).outputs == released
    assert compare(Outcome.from_json(data["kafka_without_cache"]), out, case.recipe) == []
    assert compare(Outcome.from_json(data["kafka"]), out, case.recipe) != []


def test_non_joined_result_emitted_at_the_first_record_past_its_window() -> None:
    """docs/differences.md, Joins: an outer join (before 3, after 0, grace 2); the left record
    at 43 has no match; the right record at 47 takes stream time past 43 + 0 + 2, so streamsdsl
    emits the non-joined result; Kafka Streams' right-side processor skips the scan (it sees the
    window mirrored: 43 + 3 + 2 >= 47) and writes nothing."""
    data = _file("effb470e5b81")
    case = Case.from_json(data)
    assert data["kafka"]["outputs"] == {"out": []}
    out = run_streamsdsl(case)
    assert out.outputs == {"out": [["b", "zzz+null", 43]]}
    assert compare(Outcome.from_json(data["kafka"]), out, case.recipe) == []


def test_closed_session_is_final_although_kafka_cache_still_merges_it() -> None:
    """docs/differences.md, Session windows: gap 5, grace 0; a at 49, c at 55 (close time 50), a
    at 51: the session [49, 49] is closed, so streamsdsl starts [51, 51]. Kafka Streams' record
    cache still holds [49, 49] and merges it into [49, 51] without a tombstone for it (its store's
    retention hides it from the flush): two live overlapping sessions of a, which the comparison
    recognises."""
    data = _file("9e94a81ed5ea")
    case = Case.from_json(data)
    kafka = Outcome.from_json(data["kafka"])
    assert kafka.outputs["out"][-1] == [{"key": "a", "start": 49, "end": 51}, 2, 51]
    out = run_streamsdsl(case)
    assert out.outputs == {"out": [[{"key": "a", "start": 49, "end": 49}, 1, 49],
                                   [{"key": "c", "start": 55, "end": 55}, 1, 55],
                                   [{"key": "a", "start": 51, "end": 51}, 1, 51]]}
    assert compare(kafka, out, case.recipe) == []


def test_cogroup_session_closed_by_the_faster_input_is_final() -> None:
    """docs/differences.md, Session windows, in a cogroup (gap 2, grace 5, then map_values
    null_if_x): "in" writes x at 6 and ab at 14, whose stream time closes [6, 6] (the store's
    time is the fastest input's); "other" writes None at 4, on time for itself: streamsdsl
    starts [4, 4]. Kafka Streams' record cache still holds [6, 6] and merges it into [4, 6],
    with no tombstone (its store has expired [6, 6]). Kafka's first record, [6, 6] with None, is
    x mapped to None, not a tombstone, so the comparison takes a None for a tombstone only where
    a merge forwards one: right before the merged session."""
    data = _file("234cb66c1139")
    case = Case.from_json(data)
    kafka = Outcome.from_json(data["kafka"])
    assert kafka.outputs["out"] == [[{"key": "a", "start": 6, "end": 6}, None, 6],
                                    [{"key": "a", "start": 14, "end": 14}, "ab", 14],
                                    [{"key": "a", "start": 4, "end": 6}, "|x-", 6]]
    out = run_streamsdsl(case)
    assert out.outputs == {"out": [[{"key": "a", "start": 6, "end": 6}, None, 6],
                                   [{"key": "a", "start": 14, "end": 14}, "ab", 14],
                                   [{"key": "a", "start": 4, "end": 4}, "-", 4]]}
    assert compare(kafka, out, case.recipe) == []
    # a merge's tombstone is still one: Kafka's records of a merge that forwards its tombstone
    # (as streamsdsl's own, with [6, 6]'s tombstone before [4, 6]) show no closed session merged
    merged = Outcome(outputs={"out": [*kafka.outputs["out"][:2], [{"key": "a", "start": 6, "end": 6}, None, 6],
                                      kafka.outputs["out"][2]]})
    assert compare(merged, out, case.recipe) != []


def test_none_key_dropped_at_the_repartition_is_counted() -> None:
    """docs/differences.md, Running: a record re-keyed to None (its value) is dropped by the
    repartition's filter in both systems; streamsdsl counts it in dropped-records-total, Kafka
    Streams does not (the oracle counts it apart)."""
    data = _file("3b5f8b45f717")
    kafka = Outcome.from_json(data["kafka"])
    out = run_streamsdsl(Case.from_json(data))
    assert out.outputs == kafka.outputs == {"out": [["x", 1, 2]]}
    assert (kafka.dropped, kafka.repartition_null_keys, out.dropped) == (0, 1, 1)
