"""MkDocs hooks (``hooks:`` in ``mkdocs.yml``): the docs' pictures, generated at build time.

Window timelines
    `WINDOW_DIAGRAMS` draws the time-window, session and join-window pictures as SVG from the
    project's own window semantics (`streamsdsl.semantics` rules and `streamsdsl.values` window
    objects), so a picture shows what the code does. They are added to the site as
    ``img/generated/<name>.svg`` (nothing is written into ``docs/``); a page shows one with
    ``![...](img/generated/<name>.svg)``.

Topology diagrams
    A page line ``<!-- topology: MODULE:ATTR -->`` is followed by a Mermaid flowchart of that
    topology's ``describe().to_mermaid()`` (``MODULE:ATTR`` as ``streamsdsl describe`` takes it:
    a module or a ``.py`` file, and a `Topology`, a `StreamsBuilder` or a function returning one).
    Docs pages get it at build time; ``python tools/docs_hooks.py examples/README.md`` writes it
    into a Markdown file GitHub shows as it is (a test checks that it is current).
"""

from __future__ import annotations

import re
from html import escape
from pathlib import Path
from typing import Any, Callable, Iterable

from streamsdsl.semantics.aggregation import AggFunctions
from streamsdsl.semantics.session import SessionWindowing
from streamsdsl.semantics.sliding import SlidingWindowing
from streamsdsl.semantics.timewindow import TimeWindowing
from streamsdsl.values.joins import JoinWindows

GENERATED = "img/generated"
ROOT = Path(__file__).resolve().parents[1]

_COUNT = AggFunctions(lambda: 0, lambda k, v, a: a + 1, lambda k, a, b: a + b)

# -- drawing -------------------------------------------------------------------------------------

_LABEL_W = 170  # the left column of row labels
_PLOT_W = 520
_ROW_H = 30
_TOP = 12
_COLORS = {
    "window": ("#dbe6ff", "#4063d8"),
    "new": ("#ffe9c7", "#c77c00"),
    "merged": ("#e3f4e3", "#2e7d32"),
    "band": ("#eef2ff", "#8ea2e6"),
    "late": ("#fff4e0", "#c77c00"),
    "closed": ("#f3e1e1", "#b23b3b"),
}


class Timeline:
    """An SVG of labelled rows over one time axis from ``t0`` to ``t1`` (ms)."""

    def __init__(self, t0: int, t1: int, tick: int, title: str) -> None:
        self.t0, self.t1, self.tick, self.title = t0, t1, tick, title
        self.rows: list[str] = []
        self.shapes: list[str] = []

    def x(self, t: float) -> float:
        return _LABEL_W + (t - self.t0) * _PLOT_W / (self.t1 - self.t0)

    def _y(self, row: int) -> float:
        return _TOP + row * _ROW_H

    def row(self, label: str) -> int:
        """Add a row labelled ``label``; return its index."""
        self.rows.append(label)
        return len(self.rows) - 1

    def bar(self, row: int, start: float, end: float, text: str = "", kind: str = "window",
            open_end: bool = False) -> None:
        """A window ``[start, end]`` (``[start, end)`` with ``open_end``) on ``row``."""
        fill, stroke = _COLORS[kind]
        x0, x1 = self.x(start), max(self.x(end), self.x(start) + 4)
        y = self._y(row) + 5
        dash = ' stroke-dasharray="4 3"' if kind == "band" else ""
        self.shapes.append(
            f'<rect x="{x0:.1f}" y="{y}" width="{x1 - x0:.1f}" height="{_ROW_H - 10}" rx="3" '
            f'fill="{fill}" stroke="{stroke}"{dash}/>'
        )
        if open_end:  # an excluded end: a white notch on the right edge
            self.shapes.append(f'<line x1="{x1:.1f}" y1="{y + 3}" x2="{x1:.1f}" y2="{y + _ROW_H - 13}" '
                               f'stroke="#ffffff" stroke-width="2"/>')
        if text:  # inside the bar if it fits, else beside it (right, or left at the plot's end)
            width = 6.6 * len(text)
            if width <= x1 - x0 - 6:
                at, anchor = (x0 + x1) / 2, "middle"
            elif x1 + 6 + width <= _LABEL_W + _PLOT_W + 30:
                at, anchor = x1 + 6, "start"
            else:
                at, anchor = x0 - 6, "end"
            self.shapes.append(f'<text x="{at:.1f}" y="{y + 14}" text-anchor="{anchor}" '
                               f'class="in">{escape(text)}</text>')

    def dot(self, row: int, t: float, text: str = "", kind: str = "window") -> None:
        """A record at time ``t`` on ``row`` (``text`` above-right of it)."""
        stroke = _COLORS[kind][1]
        y = self._y(row) + _ROW_H / 2
        self.shapes.append(f'<circle cx="{self.x(t):.1f}" cy="{y}" r="5" fill="{stroke}"/>')
        if text:
            self.shapes.append(f'<text x="{self.x(t) + 8:.1f}" y="{y + 4}" class="in">{escape(text)}</text>')

    def mark(self, t: float, text: str, kind: str = "closed") -> None:
        """A vertical line over every row at ``t``, labelled under the axis."""
        stroke = _COLORS[kind][1]
        bottom = self._y(len(self.rows))
        self.shapes.append(f'<line x1="{self.x(t):.1f}" y1="{_TOP}" x2="{self.x(t):.1f}" y2="{bottom + 6}" '
                           f'stroke="{stroke}" stroke-dasharray="5 3"/>')
        self.shapes.append(f'<text x="{self.x(t):.1f}" y="{bottom + 42}" text-anchor="middle" '
                           f'fill="{stroke}" class="in">{escape(text)}</text>')

    def svg(self) -> str:
        axis_y = self._y(len(self.rows)) + 6
        height = axis_y + 52
        width = _LABEL_W + _PLOT_W + 30
        parts = [
            f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" '
            f'width="{width}" height="{height}" role="img" aria-label="{escape(self.title)}">',
            f"<title>{escape(self.title)}</title>",
            "<style>text{font-family:Helvetica,Arial,sans-serif;font-size:13px;fill:#222}"
            " .in{font-size:12px} .lbl{font-family:Menlo,Consolas,monospace;font-size:12px}</style>",
            f'<rect width="{width}" height="{height}" fill="#ffffff"/>',
        ]
        for i, label in enumerate(self.rows):
            y = self._y(i)
            if i % 2 == 0:
                parts.append(f'<rect x="0" y="{y}" width="{width}" height="{_ROW_H}" fill="#f7f7f9"/>')
            parts.append(f'<text x="8" y="{y + _ROW_H / 2 + 4}" class="lbl">{escape(label)}</text>')
        parts.append(f'<line x1="{_LABEL_W}" y1="{axis_y}" x2="{_LABEL_W + _PLOT_W + 10}" y2="{axis_y}" '
                     'stroke="#444"/>')
        for t in range(self.t0, self.t1 + 1, self.tick):
            x = self.x(t)
            parts.append(f'<line x1="{x:.1f}" y1="{axis_y}" x2="{x:.1f}" y2="{axis_y + 5}" stroke="#444"/>')
            parts.append(f'<text x="{x:.1f}" y="{axis_y + 19}" text-anchor="middle" class="in">{t}</text>')
        parts.append(f'<text x="8" y="{axis_y + 19}" class="in">time (ms)</text>')
        parts.extend(self.shapes)
        parts.append("</svg>")
        return "\n".join(parts) + "\n"


# -- the diagrams ----------------------------------------------------------------------------------


def _run(windowing: Any, timestamps: Iterable[int]) -> tuple[Any, ...]:
    """The windows of one key after its records (in order), as the record step leaves them."""
    windows: tuple[Any, ...] = ()
    stream_time = -1
    for ts in timestamps:
        stream_time = max(stream_time, ts)
        windows = tuple(windowing.step(windows, "k", "v", ts, stream_time, _COUNT).windows)
    return windows


def _time_windows(size: int, advance: int, records: list[int], title: str) -> str:
    t = Timeline(0, 30, 5, title)
    rec = t.row("records")
    for ts in records:
        t.dot(rec, ts, f"{ts}")
    for w in sorted(_run(TimeWindowing(size=size, advance=advance, grace=0), records), key=lambda w: w.start):
        t.bar(t.row(f"[{w.start}, {w.end})"), w.start, w.end, f"count {w.agg}", open_end=True)
    return t.svg()


def tumbling() -> str:
    """TimeWindows.of_size_with_no_grace(10): every record in exactly one window."""
    return _time_windows(10, 10, [3, 7, 10, 24], "Tumbling windows of 10 ms")


def hopping() -> str:
    """Size 10, advance 5: a record at 7 falls in [0, 10) and [5, 15); at 10 in [5, 15), [10, 20)."""
    return _time_windows(10, 5, [7, 10], "Hopping windows, size 10 ms, advance 5 ms")


def sliding() -> str:
    """SlidingWindows with d = 10: the windows one key's records at 3, 8 and 15 create."""
    records = [3, 8, 15]
    t = Timeline(0, 30, 5, "Sliding windows, time difference 10 ms")
    rec = t.row("records")
    for ts in records:
        t.dot(rec, ts, f"{ts}")
    for w in sorted(_run(SlidingWindowing(time_difference=10, grace=100), records), key=lambda w: w.start):
        inside = [ts for ts in records if w.start <= ts <= w.end]
        t.bar(t.row(f"[{w.start}, {w.end}]"), w.start, w.end, "{" + ", ".join(map(str, inside)) + "}")
    return t.svg()


def session_merge() -> str:
    """Gap 50: a record at 50 bridges the sessions [0, 20] and [80, 80] into [0, 80]."""
    gap = 50
    rules = SessionWindowing(gap=gap, grace=20)
    before = sorted(_run(rules, [0, 20, 80]), key=lambda w: w.start)
    after = sorted(_run(rules, [0, 20, 80, 50]), key=lambda w: w.start)
    t = Timeline(0, 140, 10, "Session windows, gap 50 ms: a late record merges two sessions")
    row = t.row("before")
    for w in before:
        t.bar(row, w.start, w.end, f"count {w.agg}")
    first, second = before
    t.bar(t.row("end + gap"), first.end, first.end + gap, f"{first.end} + {gap}", kind="band")
    t.bar(t.row("start - gap"), second.start - gap, second.start, f"{second.start} - {gap}", kind="band")
    new = t.row("record at 50")
    t.dot(new, 50, "50", kind="new")
    row = t.row("after")
    for w in after:
        t.bar(row, w.start, w.end, f"count {w.agg}", kind="merged")
    return t.svg()


def join_window() -> str:
    """JoinWindows.of_time_difference_with_no_grace(10): a left record at 20 joins the right
    records at timestamps in [20 - before, 20 + after]."""
    windows = JoinWindows.of_time_difference_with_no_grace(10)
    left_ts, right = 20, [4, 13, 24, 36]
    lo, hi = left_ts - windows.before_ms, left_ts + windows.after_ms
    t = Timeline(0, 40, 5, "Join window of a left record, time difference 10 ms")
    row = t.row("left record")
    t.bar(row, lo, hi, kind="band")
    t.dot(row, left_ts, f"{left_ts}", kind="window")
    row = t.row("right records")
    for ts in right:
        joined = lo <= ts <= hi
        t.dot(row, ts, f"{ts}" + (" joins" if joined else ""), kind="merged" if joined else "closed")
    t.mark(lo, f"{left_ts} - before", kind="window")
    t.mark(hi, f"{left_ts} + after", kind="window")
    return t.svg()


def grace_close() -> str:
    """A time window [10, 20) with grace 5: aggregated, late but accepted, closed at 25."""
    rules = TimeWindowing(size=10, advance=10, grace=5)
    window = _run(rules, [12])[0]
    close = rules.close_threshold(window) + 1  # closed once stream time > the threshold
    t = Timeline(0, 40, 5, "A time window's grace period and close")
    row = t.row(f"[{window.start}, {window.end})")
    t.bar(row, window.start, window.end, "aggregated", open_end=True)
    t.bar(t.row("grace 5"), window.end, close, "late, accepted", kind="late")
    t.bar(t.row("closed"), close, 40, "emitted on close", kind="closed")
    t.mark(close, f"stream time >= {close} (end + grace)")
    return t.svg()


def session_close() -> str:
    """A session [10, 30], gap 50, grace 20: merges until 80, accepts late records until 100."""
    gap, grace = 50, 20
    rules = SessionWindowing(gap=gap, grace=grace)
    session = _run(rules, [10, 30])[0]
    close = rules.close_threshold(session)
    t = Timeline(0, 140, 10, "A session's gap, grace period and close")
    t.bar(t.row(f"session [{session.start}, {session.end}]"), session.start, session.end, "count 2")
    t.bar(t.row(f"gap {gap}"), session.end, session.end + gap, "a record here merges", kind="band")
    t.bar(t.row(f"grace {grace}"), session.end + gap, close, "late, accepted", kind="late")
    t.bar(t.row("closed"), close, 140, "emitted on close", kind="closed")
    t.mark(close, f"stream time > {close} (end + gap + grace)")
    return t.svg()


WINDOW_DIAGRAMS: dict[str, Callable[[], str]] = {
    "tumbling.svg": tumbling,
    "hopping.svg": hopping,
    "sliding.svg": sliding,
    "session-merge.svg": session_merge,
    "join-window.svg": join_window,
    "time-window-close.svg": grace_close,
    "session-close.svg": session_close,
}

# -- the hooks -------------------------------------------------------------------------------------

_TOPOLOGY = re.compile(
    r"^(?P<marker><!--\s*topology:\s*(?P<target>\S+)\s*-->)[ \t]*\n"
    r"(?:\n*```mermaid\n.*?^```[ \t]*\n)?",
    re.MULTILINE | re.DOTALL,
)


def topology_mermaid(markdown: str, root: Path = ROOT) -> str:
    """``markdown`` with a Mermaid fence of ``describe().to_mermaid()`` after each
    ``<!-- topology: MODULE:ATTR -->`` line (replacing the fence already there, if any); a
    ``.py`` path is relative to ``root``, the project's directory."""
    from streamsdsl.cli import _load_topology

    def fence(found: re.Match[str]) -> str:
        target = found["target"]
        if target.partition(":")[0].endswith(".py"):
            target = str(root / target)
        mermaid = _load_topology(target).describe().to_mermaid()
        return f"{found['marker']}\n\n```mermaid\n{mermaid}\n```\n"

    return _TOPOLOGY.sub(fence, markdown)


def on_files(files: Any, config: Any) -> Any:
    from mkdocs.structure.files import File

    for name, draw in WINDOW_DIAGRAMS.items():
        files.append(File.generated(config, f"{GENERATED}/{name}", content=draw()))
    return files


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    return topology_mermaid(markdown)


if __name__ == "__main__":  # python tools/docs_hooks.py FILE.md...: refresh the fences in place
    import sys

    for name in sys.argv[1:]:
        path = Path(name)
        path.write_text(topology_mermaid(path.read_text(encoding="utf-8")), encoding="utf-8")
