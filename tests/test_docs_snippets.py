"""Every ```python block of ``docs/**/*.md`` and of ``README.md`` runs, and what a page shows as a
block's output is what the block prints.

One test per block, with an id such as ``session-windows.md:3`` (the page, relative to
``docs/``, and the block's number among the page's python blocks, from 1). The blocks of one
page share one namespace and run in page order, as a reader would run them: a later block may
use the names an earlier one defined. A block run on its own (``-k 'testing.md:3'``) first runs
the page's earlier blocks; a block whose earlier block failed fails too, naming that block.

Markers, an HTML comment on the line before a fence (blank lines between are allowed):

``<!-- snippet: skip (reason) -->``
    Do not run the next python block; the test is skipped with ``reason``, which must say what
    the block needs that a test run does not have (a Kafka broker, ...).
``<!-- snippet: output -->``
    The next fenced block (usually ```text) is the output of the page's preceding python block:
    the test compares what that block prints with it (trailing spaces and blank lines at either
    end ignored).

Each page's namespace starts with ``spark``, the session-wide SparkSession of ``conftest.py``,
so snippets that create a ``TopologyTestDriver`` run on it (as they would on the active session).
"""

from __future__ import annotations

import ast
import contextlib
import io
import re
import sys
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"

#: Blocks of pages outside ``docs/`` that need a skip marker but do not have one yet, by id.
#: README.md's quickstart runs against a Kafka broker; ``tests/test_examples.py`` runs the same
#: topology through the TopologyTestDriver (``examples/quickstart.py --driver``).
#: TODO: once README.md carries the marker itself, remove the entry.
#: Blocks of pages that cannot carry a marker comment (none today).
_SKIP_WITHOUT_MARKER: dict[str, str] = {}

_FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})[ \t]*(?P<lang>[^\s`{]*)")
_MARKER = re.compile(r"^\s*<!--\s*snippet:\s*(?P<kind>\w+)\s*(?:\((?P<reason>[^)]*)\))?\s*-->\s*$")


class SnippetSyntaxError(ValueError):
    """A docs page's fences or snippet markers cannot be parsed."""


@dataclass
class Block:
    """One ```python block of a page."""

    page: str
    number: int
    line: int
    code: str
    skip: str | None = None
    output: str | None = None

    @property
    def id(self) -> str:
        return f"{self.page}:{self.number}"

    @property
    def first_line(self) -> str:
        return next((ln.strip() for ln in self.code.splitlines() if ln.strip()), "")

    @property
    def path(self) -> Path:
        return ROOT / self.page if self.page == "README.md" else DOCS / self.page


def parse_page(text: str, page: str) -> list[Block]:
    """The python blocks of one Markdown page, with their skip reasons and expected outputs."""
    lines = text.splitlines()
    blocks: list[Block] = []
    marker: tuple[str, str | None, int] | None = None  # (kind, reason, line) waiting for a fence
    i = 0
    while i < len(lines):
        line = lines[i]
        found = _MARKER.match(line)
        if found:
            if marker is not None:
                raise SnippetSyntaxError(f"{page}:{marker[2]}: snippet marker not followed by a fence")
            marker = (found["kind"], found["reason"], i + 1)
            i += 1
            continue
        fence = _FENCE.match(line)
        if not fence:
            if line.strip() and marker is not None:
                raise SnippetSyntaxError(f"{page}:{marker[2]}: snippet marker not right before a fence")
            i += 1
            continue
        indent, chars, lang = fence["indent"], fence["fence"], fence["lang"].lower()
        start = i
        body: list[str] = []
        i += 1
        while i < len(lines) and not re.match(rf"^{re.escape(indent)}{chars[0]}{{{len(chars)},}}\s*$", lines[i]):
            body.append(lines[i])
            i += 1
        if i == len(lines):
            raise SnippetSyntaxError(f"{page}:{start + 1}: fence never closed")
        i += 1
        code = textwrap.dedent("\n".join(body)) + "\n"
        kind, reason, marker_line = marker if marker is not None else (None, None, 0)
        marker = None
        if kind == "output":
            if not blocks:
                raise SnippetSyntaxError(f"{page}:{marker_line}: 'snippet: output' before any python block")
            if blocks[-1].output is not None:
                raise SnippetSyntaxError(f"{page}:{marker_line}: python block {blocks[-1].number} has two outputs")
            blocks[-1].output = code
        elif lang in ("python", "py"):
            if kind == "skip" and not (reason and reason.strip()):
                raise SnippetSyntaxError(f"{page}:{marker_line}: 'snippet: skip' needs a reason: skip (why)")
            if kind not in (None, "skip"):
                raise SnippetSyntaxError(f"{page}:{marker_line}: unknown snippet marker {kind!r}")
            blocks.append(Block(page, len(blocks) + 1, start + 1, code, reason.strip() if reason else None))
        elif kind is not None:
            raise SnippetSyntaxError(f"{page}:{marker_line}: 'snippet: {kind}' before a {lang or 'plain'} block")
    if marker is not None:
        raise SnippetSyntaxError(f"{page}:{marker[2]}: snippet marker at the end of the page")
    return blocks


def collect() -> dict[str, list[Block]]:
    """Every page's python blocks, by page, in page order."""
    pages = {str(p.relative_to(DOCS)): p for p in sorted(DOCS.rglob("*.md"))}
    pages["README.md"] = ROOT / "README.md"
    collected = {name: parse_page(path.read_text(encoding="utf-8"), name) for name, path in pages.items()}
    for block in (b for blocks in collected.values() for b in blocks):
        if block.skip is None and block.id in _SKIP_WITHOUT_MARKER:
            block.skip = _SKIP_WITHOUT_MARKER[block.id]
    return collected


PAGES = collect()
BLOCKS = [block for blocks in PAGES.values() for block in blocks]


def _normalized(text: str) -> str:
    return "\n".join(line.rstrip() for line in text.strip("\n").splitlines()).strip("\n")


@dataclass
class _PageRun:
    """The shared namespace of one page and the outcome of each block run in it so far."""

    namespace: dict[str, Any]
    outcomes: dict[int, BaseException | None] = field(default_factory=dict)


_RUNS: dict[str, _PageRun] = {}


def _execute(block: Block, run: _PageRun) -> None:
    """Run one block in the page's namespace; record (and raise) what went wrong."""
    stdout = io.StringIO()
    try:
        # tracebacks point at the page's own lines
        tree = ast.increment_lineno(ast.parse(block.code, str(block.path)), block.line)
        code = compile(tree, str(block.path), "exec")
        redirect = contextlib.redirect_stdout(_Tee(stdout, sys.stdout)) if block.output else contextlib.nullcontext()
        with redirect:
            exec(code, run.namespace)  # noqa: S102 - running the documentation is the point
        if block.output is not None:
            printed, shown = _normalized(stdout.getvalue()), _normalized(block.output)
            assert printed == shown, (
                f"{block.id} (line {block.line}: {block.first_line}) printed\n{printed}\n\n"
                f"but the page shows\n{shown}"
            )
    except BaseException as exc:
        exc.add_note(f"in docs snippet {block.id}: python block {block.number} of {block.page}, "
                     f"line {block.line}: {block.first_line}")
        run.outcomes[block.number] = exc
        raise
    run.outcomes[block.number] = None


class _Tee(io.TextIOBase):
    """Write to a buffer (to compare) and to the real stdout (to show)."""

    def __init__(self, *targets: Any) -> None:
        self.targets = targets

    def write(self, text: str) -> int:
        for target in self.targets:
            target.write(text)
        return len(text)

    def flush(self) -> None:
        for target in self.targets:
            target.flush()


@pytest.mark.parametrize("block", BLOCKS, ids=[b.id for b in BLOCKS])
def test_snippet(block: Block, spark: Any) -> None:
    if block.skip is not None:
        pytest.skip(f"{block.id}: {block.skip}")
    run = _RUNS.setdefault(block.page, _PageRun({"__name__": "docs_snippet", "spark": spark}))
    for earlier in PAGES[block.page][: block.number]:
        if earlier.skip is not None:
            continue
        if earlier.number not in run.outcomes:
            try:
                _execute(earlier, run)
            except Exception:
                if earlier is block:
                    raise
        failure = run.outcomes[earlier.number]
        if earlier is block:
            if failure is not None:
                raise failure
        elif failure is not None:
            pytest.fail(
                f"{block.id} not run: python block {earlier.number} of {block.page} (line {earlier.line}: "
                f"{earlier.first_line}) failed with {type(failure).__name__}: {failure}",
                pytrace=False,
            )


def test_skip_list_is_current() -> None:
    """Every block skipped here by id exists (a stale entry is a mistake), and blocks were found."""
    assert BLOCKS, "no python blocks found in docs/"
    assert set(_SKIP_WITHOUT_MARKER) <= {b.id for b in BLOCKS}
