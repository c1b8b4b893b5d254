"""The JVM operator's own unit tests (JUnit 5, `jvm/src/test/java`) pass: run by `jvm/test.py`,
JUnit resolved from Maven Central into Maven's local repository."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_junit_suite_passes() -> None:
    """Every JUnit test of the JVM operator runs and passes (JUnit fails when none is found)."""
    proc = subprocess.run([sys.executable, str(ROOT / "jvm" / "test.py"), "--quiet"], capture_output=True, text=True,
                          timeout=900)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    found = re.search(r"\[\s*(\d+) tests successful\s*\]", out)
    failed = re.search(r"\[\s*(\d+) tests failed\s*\]", out)
    assert found is not None and int(found.group(1)) >= 10, out[-2000:]
    assert failed is not None and int(failed.group(1)) == 0
