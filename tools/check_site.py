"""Check the built docs site in headless Chromium with the network off, and take screenshots.

    python tools/check_site.py [SITE_DIR] [--screenshots DIR]
    python tools/check_site.py [SITE_DIR] --static

``--static`` (no browser; ``make docs`` and ``make test`` run it after the build): every HTML
page and stylesheet of the site is read, and any asset it loads from another host (a
``<script src>``, ``<link href>``, ``<img src>``, ``<iframe>``, ``<source>``, ``<video>``,
``<audio>``, a CSS ``url()`` or ``@import``) is a failure.

With a browser:

Serves ``SITE_DIR`` (default ``build/site``, what ``make docs`` builds) on 127.0.0.1 and opens
every page at 1280 x 900 in headless Chromium, with every host but 127.0.0.1 unresolvable and
any request elsewhere aborted. A page fails when:

- it requested anything from another host (a CDN script, a web font, an image);
- a Mermaid diagram was not drawn (its ``pre.mermaid`` source is still there, or the drawing
  has no height): the vendored Mermaid must load and parse every diagram offline;
- an image (the generated SVG timelines) did not load, or its Markdown is shown as text;
- a code block is wider than its box (it would scroll sideways at 1280 px).

Screenshots go to ``DIR`` (default ``build/screenshots``): each page's first screen
(``<page>.png``) and each diagram on it (``<page>--diagram-<n>.png``).

Chromium: ``$CHROMIUM`` if set, else the first of ``chromium``, ``chromium-headless-shell``
(Debian: ``apt-get install chromium-headless-shell``), ``google-chrome`` found, else
Playwright's own (``python -m playwright install chromium``). Exit code 0 when every page
passes, 1 otherwise (each failure printed), 2 when there is no site or no browser.
"""

from __future__ import annotations

import argparse
import functools
import http.server
import os
import re
import shutil
import sys
import threading
from pathlib import Path
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parents[1]

_TAG = re.compile(r"<(script|link|img|iframe|source|video|audio|embed)\b[^>]*>", re.IGNORECASE)
_ASSET_ATTR = re.compile(r"""\b(?:src|href|srcset|poster|data)\s*=\s*["']?\s*((?:https?:)?//[^"'\s>]+)""",
                         re.IGNORECASE)
_CSS_URL = re.compile(r"""(?:url\(\s*["']?|@import\s+["'])((?:https?:)?//[^"')\s]+)""", re.IGNORECASE)


def outside_assets(text: str, css: bool = False) -> list[str]:
    """The URLs of another host that an HTML page (or, with ``css``, a stylesheet) loads.

    A link a reader follows (``<a href>``) loads nothing and is not one; a ``<link>`` is,
    whatever its ``rel`` (a stylesheet, an icon, a preload), except ``rel=canonical``.
    """
    if css:
        return _CSS_URL.findall(text)
    found = []
    for tag in _TAG.finditer(text):
        if re.search(r"""\brel\s*=\s*["']?canonical""", tag.group(0), re.IGNORECASE):
            continue
        found += _ASSET_ATTR.findall(tag.group(0))
    for style in re.findall(r"<style\b[^>]*>(.*?)</style>", text, re.IGNORECASE | re.DOTALL):
        found += _CSS_URL.findall(style)
    return found


def check_static(site: Path) -> list[str]:
    """A failure for each asset of another host that a page or stylesheet of ``site`` loads."""
    failures = []
    for path in sorted(site.rglob("*")):
        if path.suffix in (".html", ".css"):
            text = path.read_text(encoding="utf-8", errors="replace")
            failures += [f"{path.relative_to(site)}: loads {url} (another host)"
                         for url in outside_assets(text, css=path.suffix == ".css")]
    return failures

# Material takes the class "mermaid" off a diagram's <pre> while it loads Mermaid, and replaces
# the <pre> with the drawing: a <pre> still holding Mermaid source was not drawn.
_UNDRAWN = """[...document.querySelectorAll("article pre")]
  .filter(p => /^\\s*(flowchart|graph|sequenceDiagram)\\b/.test(p.textContent)).length"""

_PROBE = """() => ({
  mermaidSources: """ + _UNDRAWN + """,
  diagrams: [...document.querySelectorAll("div.mermaid")]
    .map(d => Math.round(d.getBoundingClientRect().height)),
  brokenImages: [...document.querySelectorAll("article img")]
    .filter(i => !(i.complete && i.naturalWidth > 0)).map(i => i.getAttribute("src")),
  rawImages: [...document.querySelectorAll("article p, article li")].map(e => {
      const prose = e.cloneNode(true);
      prose.querySelectorAll("code").forEach(c => c.remove());
      return prose.textContent;
    }).filter(t => t.includes("![")).map(t => t.slice(0, 80)),
  wideCode: [...document.querySelectorAll("article pre > code")]
    .filter(c => c.scrollWidth > c.clientWidth + 1)
    .map(c => c.textContent.split("\\n").reduce((a, b) => (b.length > a.length ? b : a), "")),
})"""


def _browser_path() -> str | None:
    if os.environ.get("CHROMIUM"):
        return os.environ["CHROMIUM"]
    for name in ("chromium", "chromium-headless-shell", "google-chrome"):
        found = shutil.which(name) or (f"/usr/lib/chromium/{name}" if Path(f"/usr/lib/chromium/{name}").exists() else None)
        if found:
            return found
    return None


def _serve(site: Path) -> tuple[http.server.ThreadingHTTPServer, str]:
    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(site)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}/"


def pages_of(site: Path) -> list[str]:
    """The site's pages as URL paths (``""``, ``"joins/"``...), in path order, without 404."""
    pages = []
    for path in site.rglob("index.html"):
        folder = path.parent.relative_to(site)
        if "assets" not in folder.parts:
            pages.append("" if folder == Path(".") else f"{folder.as_posix()}/")
    return sorted(pages)


def check(site: Path, shots: Path) -> list[str]:
    from playwright.sync_api import TimeoutError as PlaywrightTimeout
    from playwright.sync_api import sync_playwright

    server, base = _serve(site)
    failures: list[str] = []
    shots.mkdir(parents=True, exist_ok=True)
    executable = _browser_path()
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(
                executable_path=executable,
                args=["--no-sandbox", "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"],
            )
            context = browser.new_context(viewport={"width": 1280, "height": 900})
            outside: list[str] = []

            def only_local(route, request):  # type: ignore[no-untyped-def]
                if urlsplit(request.url).hostname == "127.0.0.1" or request.url.startswith("data:"):
                    route.continue_()
                else:
                    outside.append(request.url)
                    route.abort()

            context.route("**/*", only_local)
            for path in pages_of(site):
                name = path.strip("/").replace("/", "--") or "index"
                outside.clear()
                page = context.new_page()
                page.goto(base + path, wait_until="networkidle")
                if page.evaluate(_UNDRAWN):
                    try:  # Mermaid draws after the page has loaded
                        page.wait_for_function(f"({_UNDRAWN}) === 0", timeout=15000)
                    except PlaywrightTimeout:
                        pass  # reported below: the sources are still there
                probe = page.evaluate(_PROBE)
                page.screenshot(path=str(shots / f"{name}.png"))
                # the sticky header would cover the top of a diagram scrolled into view
                page.add_style_tag(content=".md-header{position:static!important}")
                for i, diagram in enumerate(page.locator("div.mermaid, article img[src$='.svg']").all()):
                    diagram.scroll_into_view_if_needed()
                    diagram.screenshot(path=str(shots / f"{name}--diagram-{i + 1}.png"))
                page.close()
                label = path or "index"
                failures += [f"{label}: requested {url} (another host)" for url in outside]
                if probe["mermaidSources"]:
                    failures.append(f"{label}: {probe['mermaidSources']} Mermaid diagram(s) not drawn")
                failures += [f"{label}: a Mermaid diagram drawn with no height" for h in probe["diagrams"] if h == 0]
                failures += [f"{label}: image {src} did not load" for src in probe["brokenImages"]]
                failures += [f"{label}: image markdown shown as text: {t!r}" for t in probe["rawImages"]]
                failures += [f"{label}: code scrolls sideways at 1280 px: {line!r}" for line in probe["wideCode"]]
            browser.close()
    finally:
        server.shutdown()
    return failures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("site", nargs="?", default=str(ROOT / "build" / "site"))
    parser.add_argument("--screenshots", default=str(ROOT / "build" / "screenshots"))
    parser.add_argument("--static", action="store_true", help="only scan the files (no browser)")
    args = parser.parse_args(argv)
    site = Path(args.site)
    if not (site / "index.html").is_file():
        print(f"check_site: no built site in {site} (run: make docs)", file=sys.stderr)
        return 2
    if args.static:
        failures = check_static(site)
        for failure in failures:
            print(failure)
        print(f"check_site --static: {len(failures)} asset(s) from another host")
        return 1 if failures else 0
    try:
        failures = check(site, Path(args.screenshots))
    except Exception as exc:  # no Playwright, or no browser it can start
        if type(exc).__name__ not in ("Error", "ModuleNotFoundError"):
            raise
        print(f"check_site: cannot run headless Chromium: {exc}\n(apt-get install "
              "chromium-headless-shell, or python -m playwright install chromium)", file=sys.stderr)
        return 2
    failures = check_static(site) + failures
    for failure in failures:
        print(failure)
    pages = len(pages_of(site))
    print(f"check_site: {pages} pages, {len(failures)} failure(s); screenshots in {args.screenshots}")
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
