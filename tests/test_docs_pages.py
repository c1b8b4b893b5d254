"""The docs pages' code fits, their pictures are generated from the code, and the site needs
no other host (fast: no Spark, no docs build).

- Every line of a fenced block in ``docs/**/*.md``, ``README.md`` and ``examples/README.md``
  is at most 88 characters, except Mermaid sources and program output (a block right after
  ``<!-- snippet: output -->`` or ``<!-- output -->``, which wraps in the browser instead).
- The window timelines (``tools/docs_hooks.py``) show what the window semantics compute, and
  every picture a page shows is one the hook generates.
- ``examples/README.md``'s topology diagrams are the examples' current ``to_mermaid()``.
- The site's configuration loads nothing from another host, and ``tools/check_site.py``
  finds any asset from another host in built HTML and CSS.
"""

from __future__ import annotations

import importlib.util
import re
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
LIMIT = 88

_FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})[ \t]*(?P<lang>[^\s`{]*)")
_OUTPUT = re.compile(r"^\s*<!--\s*(?:snippet:\s*)?output\s*-->\s*$")


def _tool(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"_tools_{name}", ROOT / "tools" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


hooks = _tool("docs_hooks")
check_site = _tool("check_site")


def long_code_lines(text: str, limit: int = LIMIT) -> list[tuple[int, int]]:
    """(line number, length) of each fenced line longer than ``limit``, Mermaid and program
    output excepted."""
    lines = text.splitlines()
    found = []
    previous = ""  # the last non-blank line before a fence
    i = 0
    while i < len(lines):
        fence = _FENCE.match(lines[i])
        if not fence:
            if lines[i].strip():
                previous = lines[i]
            i += 1
            continue
        indent, chars, lang = fence["indent"], fence["fence"], fence["lang"].lower()
        exempt = lang == "mermaid" or bool(_OUTPUT.match(previous))
        close = re.compile(rf"^{re.escape(indent)}{chars[0]}{{{len(chars)},}}\s*$")
        i += 1
        while i < len(lines) and not close.match(lines[i]):
            line = lines[i][len(indent):] if lines[i].startswith(indent) else lines[i]
            if not exempt and len(line) > limit:
                found.append((i + 1, len(line)))
            i += 1
        previous = lines[i] if i < len(lines) else ""
        i += 1
    return found


PAGES = sorted(DOCS.rglob("*.md")) + [ROOT / "README.md", ROOT / "examples" / "README.md"]


class TestCodeLines:
    def test_scanner(self) -> None:
        """Long lines are found in code and unmarked text blocks, not in Mermaid or output."""
        long = "x" * (LIMIT + 1)
        page = "\n".join([
            "```python", "x" * LIMIT, long, "```",             # 3: too long
            "```mermaid", long, "```",
            "<!-- snippet: output -->", "```text", long, "```",
            "<!-- output -->", "", "```text", long, "```",
            "```text", long, "```",                            # 18: a diagram, too long
            "    ```bash", "    " + long, "    ```",           # 21: indented fence
        ])
        assert long_code_lines(page) == [(3, LIMIT + 1), (18, LIMIT + 1), (21, LIMIT + 1)]

    @pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
    def test_at_most_88_characters(self, page: Path) -> None:
        """No code line of the page is wider than 88 characters (wider ones scroll sideways)."""
        assert long_code_lines(page.read_text(encoding="utf-8")) == []


def _texts(svg: str) -> list[str]:
    ns = "{http://www.w3.org/2000/svg}"
    return ["".join(t.itertext()) for t in ET.fromstring(svg).iter(f"{ns}text")]


class TestWindowDiagrams:
    @pytest.mark.parametrize("name", sorted(hooks.WINDOW_DIAGRAMS))
    def test_is_svg(self, name: str) -> None:
        """Each diagram is a well-formed SVG document with a title."""
        root = ET.fromstring(hooks.WINDOW_DIAGRAMS[name]())
        assert root.tag == "{http://www.w3.org/2000/svg}svg"
        assert root.find("{http://www.w3.org/2000/svg}title") is not None

    def test_tumbling(self) -> None:
        """Records at 3, 7, 10, 24 in 10 ms windows: [0, 10) counts 2 (10 is excluded)."""
        texts = _texts(hooks.tumbling())
        assert texts[:4] == ["records", "[0, 10)", "[10, 20)", "[20, 30)"]
        assert [t for t in texts if t.startswith("count")] == ["count 2", "count 1", "count 1"]

    def test_hopping(self) -> None:
        """Size 10, advance 5: 7 is in [0, 10) and [5, 15); 10 in [5, 15) and [10, 20)."""
        texts = _texts(hooks.hopping())
        assert texts[:4] == ["records", "[0, 10)", "[5, 15)", "[10, 20)"]
        assert [t for t in texts if t.startswith("count")] == ["count 1", "count 2", "count 1"]

    def test_sliding(self) -> None:
        """Records at 3, 8, 15 with d = 10 make Kafka's four windows, with these records."""
        texts = _texts(hooks.sliding())
        assert texts[:5] == ["records", "[0, 10]", "[4, 14]", "[5, 15]", "[9, 19]"]
        assert [t for t in texts if t.startswith("{")] == ["{3, 8}", "{8}", "{8, 15}", "{15}"]

    def test_session_merge(self) -> None:
        """Before: [0, 20] (2 records) and [80, 80]; the record at 50 makes [0, 80] of 4."""
        texts = _texts(hooks.session_merge())
        assert [t for t in texts if t.startswith("count")] == ["count 2", "count 1", "count 4"]
        assert "20 + 50" in texts and "80 - 50" in texts

    def test_closes(self) -> None:
        """A time window [10, 20) with grace 5 closes at stream time 25; a session [10, 30]
        with gap 50 and grace 20 once stream time passes 100."""
        assert "stream time >= 25 (end + grace)" in _texts(hooks.grace_close())
        assert "stream time > 100 (end + gap + grace)" in _texts(hooks.session_close())

    def test_join_window(self) -> None:
        """A record at 20 with a 10 ms difference joins 13 and 24, not 4 and 36."""
        texts = _texts(hooks.join_window())
        assert [t for t in texts if t.endswith("joins")] == ["13 joins", "24 joins"]
        assert "4" in texts and "36" in texts  # not joined (not axis ticks: those are 0, 5, ...)

    def test_pages_show_exactly_the_generated_pictures(self) -> None:
        """Every generated picture is shown on some page, and every picture under
        img/generated/ that a page shows is generated."""
        shown = set()
        for page in DOCS.rglob("*.md"):
            shown |= set(re.findall(r"img/generated/([\w.-]+\.svg)", page.read_text(encoding="utf-8")))
        assert shown == set(hooks.WINDOW_DIAGRAMS)


class TestTopologyDiagrams:
    def test_marker_gets_the_fence(self) -> None:
        """A marker line is followed by the topology's Mermaid; run again, nothing changes."""
        page = "Text.\n<!-- topology: tests.ir.test_description:BUILDER -->\nMore.\n"
        from tests.ir.test_description import BUILDER

        once = hooks.topology_mermaid(page)
        assert once == (
            "Text.\n<!-- topology: tests.ir.test_description:BUILDER -->\n\n```mermaid\n"
            + BUILDER.build().describe().to_mermaid() + "\n```\nMore.\n"
        )
        assert hooks.topology_mermaid(once) == once

    def test_examples_readme_is_current(self) -> None:
        """examples/README.md shows each example's current diagram (refresh it with
        ``python tools/docs_hooks.py examples/README.md``)."""
        text = (ROOT / "examples" / "README.md").read_text(encoding="utf-8")
        assert text.count("<!-- topology: examples/") == 7
        assert hooks.topology_mermaid(text) == text


class TestOffline:
    def test_site_configuration(self) -> None:
        """No web fonts; every script and stylesheet is a file of docs/; Mermaid is vendored
        with its licence."""
        from mkdocs.config import load_config

        config = load_config(str(ROOT / "mkdocs.yml"))
        assert config.theme["font"] is False
        assets = [str(a) for a in config.extra_javascript] + list(config.extra_css)
        assert "assets/vendor/mermaid/mermaid.min.js" in assets
        assert all((DOCS / a).is_file() for a in assets), assets
        vendored = (DOCS / "assets" / "vendor" / "mermaid")
        assert "MIT License" in (vendored / "LICENSE").read_text(encoding="utf-8")
        assert (vendored / "mermaid.min.js").read_text(encoding="utf-8").rstrip().endswith(
            'globalThis["mermaid"] = globalThis.__esbuild_esm_mermaid_nm["mermaid"].default;'
        )

    def test_pages_of_a_site(self, tmp_path: Path) -> None:
        """check_site visits every page of a built site (each folder's index.html), not the
        theme's assets."""
        for folder in ("", "joins", "concepts/stages", "assets/javascripts", "v1.2"):
            (tmp_path / folder).mkdir(parents=True, exist_ok=True)
            (tmp_path / folder / "index.html").write_text("<html></html>")
        (tmp_path / "404.html").write_text("<html></html>")
        assert check_site.pages_of(tmp_path) == ["", "concepts/stages/", "joins/", "v1.2/"]

    def test_outside_assets_found(self) -> None:
        """Scripts, stylesheets, fonts, images and CSS imports of another host are found; links
        a reader follows and local assets are not."""
        html = (
            '<link rel="stylesheet" href="https://fonts.googleapis.com/css?family=Roboto">'
            '<link href="https://fonts.gstatic.com" rel="preconnect" crossorigin>'
            '<link rel="canonical" href="https://example.org/docs/">'
            '<script src="//unpkg.com/mermaid@11/dist/mermaid.min.js"></script>'
            '<script src="../assets/vendor/mermaid/mermaid.min.js"></script>'
            '<img alt="x" src="img/generated/tumbling.svg"><img src="http://cdn.example/x.png">'
            '<a href="https://github.com/apache/kafka">Kafka</a>'
            "<style>@import 'https://cdn.example/a.css';</style>"
        )
        assert check_site.outside_assets(html) == [
            "https://fonts.googleapis.com/css?family=Roboto",
            "https://fonts.gstatic.com",
            "//unpkg.com/mermaid@11/dist/mermaid.min.js",
            "http://cdn.example/x.png",
            "https://cdn.example/a.css",
        ]
        assert check_site.outside_assets("a{background:url('https://cdn.example/b.png')}", css=True) == [
            "https://cdn.example/b.png"
        ]
