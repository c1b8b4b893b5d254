"""Write ``tests/durations.json``: each test file's seconds in a full run's JUnit report.

    python tools/test_durations.py build/test-results.xml

``conftest.py`` hands the files to ``make test``'s workers longest first from it. Refresh it after
a full ``make test`` on this machine when files were added or became much longer or shorter; a
file it does not name is estimated from its Spark tests. A file with tests skipped in the report
(no Docker engine, say, where CI has one) keeps the seconds recorded before when those were more.
"""

from __future__ import annotations

import json
import sys
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "durations.json"


def test_file(classname: str) -> str | None:
    """The file of a JUnit ``classname`` (``tests.jvm.test_x.TestY`` → ``tests/jvm/test_x.py``)."""
    parts = classname.split(".")
    for end in range(len(parts), 0, -1):
        path = "/".join(parts[:end]) + ".py"
        if (ROOT / path).is_file():
            return path
    return None


def durations(report: Path, recorded: dict[str, float] | None = None) -> dict[str, float]:
    """Seconds per test file (setup, call and teardown of its tests), rounded to 0.1 s; a file
    with skipped tests keeps its ``recorded`` seconds when those were more."""
    seconds: dict[str, float] = defaultdict(float)
    skipped: set[str] = set()
    for case in ET.parse(report).getroot().iter("testcase"):
        path = test_file(case.get("classname", ""))
        if path is not None:
            seconds[path] += float(case.get("time") or 0.0)
            if case.find("skipped") is not None:
                skipped.add(path)
    for path in skipped:
        seconds[path] = max(seconds[path], (recorded or {}).get(path, 0.0))
    return {path: round(s, 1) for path, s in sorted(seconds.items())}


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    try:
        recorded = {str(f): float(v) for f, v in json.loads(OUT.read_text()).get("files", {}).items()}
    except (OSError, ValueError):
        recorded = {}
    files = durations(Path(argv[0]), recorded)
    if not files:
        print(f"{argv[0]}: no test cases of files in this checkout", file=sys.stderr)
        return 1
    OUT.write_text(json.dumps({"source": "make test, tools/test_durations.py", "files": files},
                              indent=1, sort_keys=True) + "\n")
    print(f"{OUT.relative_to(ROOT)}: {len(files)} files, {sum(files.values()):.0f} s in all")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
