"""What the docs say is implemented, and not yet, is what the public API has.

- The status table of ``docs/index.md`` ("What is implemented") is the one table: README.md's
  "Status" holds the same rows (its links relative to the repository's root).
- Every name in a ``yes`` row of it exists in the API; no name in a ``not yet`` row does.
- Every name in a ``not yet`` row of ``docs/differences.md``'s "Not yet implemented" table is
  absent from the API.
- ``docs/concepts/stages.md``'s stage table lists exactly the public methods of each stage.

A name is the leading dotted identifier of a code span: ```KTable.suppress```,
```windowed_by(SessionWindows...)``` (``windowed_by``), ```streamsdsl.explain(topology)```
(``explain``). ``Class.member`` resolves on the class; a bare name on ``streamsdsl`` itself or
on any public class of the API.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re
from pathlib import Path

import attrs
import pytest

import streamsdsl
import streamsdsl.dsl

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"

_CODE = re.compile(r"`([^`]+)`")
_NAME = re.compile(r"[A-Za-z_][\w.]*")


def _public_classes() -> dict[str, type]:
    """The classes of ``streamsdsl`` and the DSL's stage classes (some, such as
    ``CogroupedKStream``, are reached through a method, not imported by name)."""
    exported = {n: getattr(streamsdsl, n) for n in streamsdsl.__all__}  # imported on first use
    classes = {n: c for n, c in exported.items() if inspect.isclass(c) and not n.startswith("_")}
    for info in pkgutil.iter_modules(streamsdsl.dsl.__path__):
        module = importlib.import_module(f"streamsdsl.dsl.{info.name}")
        for n, c in vars(module).items():
            if inspect.isclass(c) and c.__module__ == module.__name__ and not n.startswith("_"):
                classes.setdefault(n, c)
    return classes


CLASSES = _public_classes()


def resolves(name: str) -> bool:
    """Whether ``name`` (``Class.member``, ``streamsdsl.name`` or a bare name) is in the API."""
    name = name.removeprefix("streamsdsl.").rstrip(".")
    head, _, rest = name.partition(".")
    if not rest:
        return hasattr(streamsdsl, head) or any(
            hasattr(c, head) and not head.startswith("_") for c in CLASSES.values()
        )
    obj: object = CLASSES.get(head, getattr(streamsdsl, head, None))
    for part in rest.split("."):
        if obj is None:
            return False
        obj = getattr(obj, part, None)
    return obj is not None


def names(cell: str) -> list[str]:
    """The leading identifiers of a table cell's code spans, in order."""
    found = (_NAME.match(span.strip()) for span in _CODE.findall(cell))
    return [m.group(0) for m in found if m]


def table_after(text: str, heading: str) -> list[list[str]]:
    """The rows (cells, header and rule excluded) of the first table after ``heading``."""
    lines = text[text.index(heading):].splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("|"))
    rows = []
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        rows.append([c.strip() for c in line.strip().strip("|").split(" | ")])
    return rows


def _status_table(text: str) -> str:
    start = text.index("| area | status |")
    return text[start:text.index("\n\n", start)]


INDEX = (DOCS / "index.md").read_text(encoding="utf-8")
STATUS = table_after(INDEX, "## What is implemented")
NOT_YET = [r for r in table_after((DOCS / "differences.md").read_text(encoding="utf-8"),
                                   "## Not yet implemented") if r[1] == "not yet"]
STAGES = table_after((DOCS / "concepts" / "stages.md").read_text(encoding="utf-8"), "| stage | made by |")


def public_methods(cls: type) -> set[str]:
    fields = {f.name for f in attrs.fields(cls)} if attrs.has(cls) else set()
    return {n for n in dir(cls) if not n.startswith("_") and n not in fields and callable(getattr(cls, n))}


class TestResolver:
    """The resolver the checks below rely on tells existing names from missing ones."""

    @pytest.mark.parametrize("name", ["KTable.suppress", "explain", "streamsdsl.explain", "windowed_by",
                                      "CogroupedKStream.windowed_by", "Suppressed.until_time_limit"])
    def test_existing(self, name: str) -> None:
        assert resolves(name)

    @pytest.mark.parametrize("name", ["KStream.no_such_step", "no_such_step", "KafkaStreams.query", "NoSuchClass.count",
                                      "KTable.suppress.nothing"])
    def test_missing(self, name: str) -> None:
        assert not resolves(name)

    def test_names_of_a_cell(self) -> None:
        """Code spans give their leading identifier; prose and parentheses are left out."""
        assert names("`KTable.group_by` → `KGroupedTable`: `count(...)`, the `streamsdsl.explain(t)` x") == [
            "KTable.group_by", "KGroupedTable", "count", "streamsdsl.explain",
        ]


class TestStatusTable:
    def test_has_both_kinds_of_rows(self) -> None:
        """The table was found and has rows of both kinds (so the checks below check something)."""
        assert {row[1] for row in STATUS} == {"yes", "not yet"}

    @pytest.mark.parametrize("row", [r for r in STATUS if r[1] == "yes"], ids=lambda r: r[0][:40])
    def test_yes_rows_exist(self, row: list[str]) -> None:
        """Every name a "yes" row shows is in the public API."""
        assert names(row[0]) and [n for n in names(row[0]) if not resolves(n)] == []

    @pytest.mark.parametrize("row", [r for r in STATUS if r[1] == "not yet"], ids=lambda r: r[0][:40])
    def test_not_yet_rows_do_not_exist(self, row: list[str]) -> None:
        """No name a "not yet" row shows is in the public API (once one is, move it to "yes")."""
        assert names(row[0]) and [n for n in names(row[0]) if resolves(n)] == []

    def test_readme_shows_the_same_table(self) -> None:
        """README.md's Status is the home page's table, links made relative to the repository."""
        readme = (ROOT / "README.md").read_text(encoding="utf-8")
        expected = re.sub(r"\]\((?!https?:)", "](docs/", _status_table(INDEX))
        assert _status_table(readme[readme.index("## Status"):]) == expected


class TestDifferencesNotYet:
    def test_rows_found(self) -> None:
        assert len(NOT_YET) >= 1  # the table was parsed (rows leave it as they are implemented)

    @pytest.mark.parametrize("row", NOT_YET, ids=lambda r: r[0][:40])
    def test_not_in_the_api(self, row: list[str]) -> None:
        """What differences.md lists as not yet implemented does not exist (yet)."""
        assert names(row[0]) and [n for n in names(row[0]) if resolves(n)] == []


class TestStagesTable:
    def test_every_stage_class_is_listed(self) -> None:
        """Each stage of the DSL (a class of streamsdsl.dsl with public methods that return stages)
        has a row."""
        listed = {n for row in STAGES for n in names(row[0])}
        assert listed == {
            "StreamsBuilder", "KStream", "BranchedKStream", "KGroupedStream", "SessionWindowedKStream",
            "TimeWindowedKStream", "CogroupedKStream", "SessionWindowedCogroupedKStream",
            "TimeWindowedCogroupedKStream", "KTable", "KGroupedTable",
        }

    @pytest.mark.parametrize("row", STAGES, ids=lambda r: r[0][:40])
    def test_methods_are_the_classes(self, row: list[str]) -> None:
        """The methods column is exactly the stage's public methods, for each stage in the row."""
        for stage in names(row[0]):
            assert set(names(row[2])) == public_methods(CLASSES[stage]), stage


class TestNotYetImplemented:
    """Every Kafka Streams method of `streamsdsl.errors.NOT_YET` is a row of the page's "Not yet
    implemented" table, and asking for it raises `NotYetImplementedError` naming that row."""

    @staticmethod
    def _instances() -> dict[str, object]:
        from streamsdsl import KafkaStreams, StreamsBuilder

        builder = StreamsBuilder()
        stream = builder.stream("in")
        stream.to("out")
        topology = builder.build()
        app = KafkaStreams(topology, {"application.id": "not-yet", "bootstrap.servers": "localhost:1"})
        return {"KStream": stream, "StreamsBuilder": StreamsBuilder(), "Topology": topology, "KafkaStreams": app}

    def test_each_method_raises_naming_its_row(self) -> None:
        """The exact message, for every entry; ``hasattr`` stays False (it is an AttributeError)."""
        from streamsdsl import NotYetImplementedError, OperationNotDefinedError
        from streamsdsl.errors import NOT_YET, NOT_YET_INSTEAD

        instances = self._instances()
        assert set(NOT_YET) == set(instances)
        for owner, methods in NOT_YET.items():
            obj = instances[owner]
            for method, row in methods.items():
                with pytest.raises(NotYetImplementedError) as caught:
                    getattr(obj, method)
                instead = NOT_YET_INSTEAD.get((owner, method))
                assert str(caught.value) == (f"{owner}.{method}() is not implemented yet: see docs/differences.md, "
                                             f"\"Not yet implemented\", the row {row.strip('`')}."
                                             + (f" {instead}" if instead else ""))
                assert isinstance(caught.value, (OperationNotDefinedError, AttributeError))
                assert not hasattr(obj, method)
        with pytest.raises(AttributeError, match="has no attribute 'no_such_method'"):
            instances["KStream"].no_such_method  # noqa: B018 - anything else keeps Python's error

    def test_each_entry_is_a_row_of_the_page_that_names_it(self) -> None:
        """The row the error names starts a row of the table, and that row's first column names
        the method (as ``Owner.method`` or, after one such name, ``method``)."""
        from streamsdsl.errors import NOT_YET

        text = (DOCS / "differences.md").read_text()
        table = text[text.index("## Not yet implemented"):]
        rows = [line.split(" | ")[0].lstrip("| ") for line in table.splitlines() if line.startswith("| ")]
        for owner, methods in NOT_YET.items():
            for method, row in methods.items():
                found = [r for r in rows if r.startswith(row)]
                assert found, f"no row of the table starts with {row!r}"
                names = {m.group(1) for m in _CODE.finditer(found[0])}
                assert f"{owner}.{method}" in names or method in names, (owner, method, found[0])


    #: What a "not yet" row of the page names that does not raise `NotYetImplementedError` yet,
    #: and why: a static factory is read on the class (only a metaclass could answer it), and
    #: the value classes of ``streamsdsl.values`` / ``Branched`` have no not-yet hook.
    UNANSWERED = {
        "JoinWindows.of": "a static factory, read on the class",
        "JoinWindows.grace": "JoinWindows (streamsdsl.values.joins) has no not-yet hook",
        "StreamJoined.with_this_store_supplier": "StreamJoined (streamsdsl.values.joins) has no not-yet hook",
        "StreamJoined.with_other_store_supplier": "StreamJoined (streamsdsl.values.joins) has no not-yet hook",
    }

    @staticmethod
    def row_methods(cell: str) -> list[str]:
        """The ``Owner.method`` names of a first cell: a bare ``method`` after an ``Owner.x``
        has that owner; Kafka's Java names (camelCase) and class names alone are left out."""
        found, owner = [], None
        for name in names(cell):
            head, _, method = name.partition(".")
            if method:
                owner = head
            elif owner is not None and name[:1].islower():
                method = name
            if not method or method != method.lower():
                continue
            found.append(f"{owner}.{method}")
        return found

    def test_each_method_a_row_names_raises_or_is_listed(self) -> None:
        """The other way round: every method the first column of a "not yet" row names, and the
        API lacks, is in `streamsdsl.errors.NOT_YET` (so it raises naming the row), or in
        `UNANSWERED` with the reason it cannot yet: a row added to the page is answered by the
        API or listed here, and an entry here that starts raising must leave the list."""
        from streamsdsl.errors import NOT_YET

        text = (DOCS / "differences.md").read_text(encoding="utf-8")
        rows = [r for r in table_after(text, "## Not yet implemented") if r[1].startswith("not yet")]
        named = {m for r in rows for m in self.row_methods(r[0]) if not resolves(m)}
        answered = {f"{owner}.{method}" for owner, methods in NOT_YET.items() for method in methods}
        assert named - answered == set(self.UNANSWERED)
        assert answered <= named

    def test_row_methods(self) -> None:
        assert self.row_methods("Processor API: `KStream.process`, `process_values`, `Topology.add_processor`, "
                                "`add_state_store`, `globalTable`, `Joined`") == [
            "KStream.process", "KStream.process_values", "Topology.add_processor", "Topology.add_state_store"]


#: Phrases of a development log rather than of documentation, matched in each page's prose
#: (fenced code and code spans left out, lines joined, so a phrase broken across two lines is
#: found): a working session by number or as "this session", who did the work ("another
#: engineer", "other agents' runs"), the first person, and days named relative to the writing.
#: A measurement states its date and conditions instead ("2026-11-23, load average 5-9 on 2 cores").
_ORDINALS = ("third|fourth|fifth|sixth|seventh|eighth|ninth|tenth|eleventh|twelfth|thirteenth|fourteenth"
             "|fifteenth|sixteenth|seventeenth|eighteenth|nineteenth|twentieth|\\d+(?:st|nd|rd|th)")
DEVELOPMENT_LOG = re.compile(
    rf"\b(?:(?:{_ORDINALS}) (?:working )?session|(?:this|previous) (?:working )?session|working session)\b"
    r"|\bengineers?\b|\bagents?'"
    r"|(?-i:(?<![\w/.-])I(?![\w/.'-]))|\b(?:we|our|ours|my)\b"
    r"|\b(?:this|that) (?:morning|afternoon|evening|day)\b|\bthis day's\b|\b(?:earlier|later) that day\b",
    re.I)


def prose(text: str) -> str:
    """A page's prose: without fenced code blocks and code spans, whitespace runs made one space."""
    text = re.sub(r"^```.*?^```", " ", text, flags=re.S | re.M)
    return re.sub(r"\s+", " ", re.sub(r"`[^`\n]*`", " ", text))


def development_log(text: str) -> list[str]:
    """The development-log phrases of a page (`DEVELOPMENT_LOG`), each with some context."""
    flat = prose(text)
    return [flat[max(0, m.start() - 30):m.end() + 30] for m in DEVELOPMENT_LOG.finditer(flat)]


class TestNoDevelopmentLog:
    """The pages state facts with dates, not who measured them when."""

    @pytest.mark.parametrize("text", [
        "Since then (eleventh\nsession) one cluster serves", "as found in this session", "the 12th session",
        "shared with other engineers' test runs", "2 cores shared with other agents' runs", "while I ran a subset",
        "an accumulator of our own", "the tree of this day", "25:41 earlier that day",
    ])
    def test_phrases_found(self, text: str) -> None:
        assert development_log(text) != []

    @pytest.mark.parametrize("text", [
        "Kafka I/O on Spark", "the first session streamsdsl creates", "a second application in the same session",
        "the key's last session", "i.e. from the first record", "(issue 24, 2026-11-25)", "```\nwe = 1\n```",
        "`I`", "a SparkSession per test run; session windows merge", "US and EU",
    ])
    def test_facts_pass(self, text: str) -> None:
        assert development_log(text) == []

    @pytest.mark.parametrize("page", [*sorted(DOCS.rglob("*.md")), ROOT / "README.md"],
                             ids=lambda p: str(p.relative_to(ROOT)))
    def test_page(self, page: Path) -> None:
        assert development_log(page.read_text(encoding="utf-8")) == []
