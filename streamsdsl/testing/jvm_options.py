"""The options of the short-lived JVMs a test run starts: the JIT's first tier (C1) only and the
serial collector. A test's JVM lives seconds to minutes on a machine of two cores: C2's
compilations and G1's threads cost CPU that such a JVM never earns back (measured: a quarter of
a Spark test file's CPU time; /work/shared/PLATFORM.md, docs/performance.md). Applications keep
the JVM's defaults; this is for test runs only.

``SPARK_SUBMIT_OPTS`` carries them to every Spark driver JVM started through ``spark-submit``
(PySpark's gateway, the applications' processes), ``SPARK_DAEMON_JAVA_OPTS`` to a standalone
master and worker, ``JAVA_TOOL_OPTIONS`` to the executors a worker or a local cluster starts
(they inherit its environment). The one long-lived JVM of a test run, each xdist worker's
shared session, takes `LONG_LIVED_DRIVER` after them: every tier of the JIT again.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

#: C1 only, the serial collector.
SHORT_LIVED: tuple[str, ...] = ("-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC")

#: The driver options of a test run's one long-lived JVM: each xdist worker's shared session,
#: which runs every Spark test the worker takes (tens of minutes): the JIT's every tier again
#: (after `SHORT_LIVED`'s C1-only in ``SPARK_SUBMIT_OPTS``; the last option wins). C2's compiled
#: code pays for its compilations over such a run: three Spark test files in one session ran
#: 22 % shorter at the same CPU time (docs/performance.md, "make test itself"). Its compilations
#: are two thirds of the session's CPU time; C2 inlining less cut them by two thirds, but its code
#: is slower in a worker's later files, and two whole runs with it (2,474 and 2,725 CPU-s) did not
#: differ from one without (2,581): the JDK's inlining stays (docs/performance.md, "The JIT's
#: share").
LONG_LIVED_DRIVER: tuple[str, ...] = ("-XX:TieredStopAtLevel=4",)


def with_options(env: Mapping[str, str], variable: str, options: Sequence[str] = SHORT_LIVED) -> dict[str, str]:
    """``env`` with ``options`` added to the JVM options in ``variable``, after those already
    there (an option already there is not repeated)."""
    own = env.get(variable, "").split()
    return {**env, variable: " ".join([*own, *(o for o in options if o not in own)])}


#: The JDKs a test run may run on, newest first, with the first update Spark accepts of each:
#: Spark 4.2 runs on Java 17, 21 and 25, and refuses 25 before 25.0.3 (JDK-8377811, G1 may
#: evacuate pinned objects; SPARK-55852).
TEST_JDKS: tuple[tuple[int, int], ...] = ((25, 3), (21, 0))

#: Where JDKs are installed on Debian and Ubuntu (apt's packages, Adoptium's Temurin).
JDK_ROOTS: tuple[str, ...] = ("/usr/lib/jvm",)


def jdk_version(home: str) -> tuple[int, int] | None:
    """``(feature, update)`` of the JDK at ``home`` from its ``release`` file (``JAVA_VERSION="25.0.3"``),
    or None when ``home`` is not a JDK with ``bin/java`` and ``bin/javac``.

    >>> jdk_version("/nonexistent") is None
    True
    """
    root = Path(home)
    if not ((root / "bin" / "java").is_file() and (root / "bin" / "javac").is_file()):
        return None
    try:
        lines = (root / "release").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        name, _, value = line.partition("=")
        if name == "JAVA_VERSION":
            parts = [int(p) for p in re.findall(r"\d+", value.strip('"'))[:3]]
            if not parts:
                return None
            feature = 8 if parts[0] == 1 else parts[0]  # "1.8.0" is Java 8
            return (feature, parts[2] if len(parts) > 2 else 0)
    return None


def java_home_for_tests(roots: Sequence[str] = JDK_ROOTS) -> str | None:
    """The JDK a test run runs on: the newest installed JDK of `TEST_JDKS` (at its first accepted
    update or later), or None, when there is none, for the JDK of ``JAVA_HOME`` or the ``PATH``.

    Java 25 runs the suite with ≈ 18 % less CPU than Java 17 here, each with its class archive
    (docs/performance.md, "The JDK of a test run"); the JVM operator's jar is compiled for 17
    (``--release 17``) and runs on either. ``make test`` exports it as ``JAVA_HOME``.
    """
    found: list[tuple[tuple[int, int], str]] = []
    for root in roots:
        try:
            entries = sorted(os.scandir(root), key=lambda e: e.name)
        except OSError:
            continue
        for entry in entries:
            version = jdk_version(entry.path) if entry.is_dir() and not entry.is_symlink() else None
            if version is not None and any(version[0] == f and version[1] >= u for f, u in TEST_JDKS):
                found.append((version, entry.path))
    return max(found)[1] if found else None


if __name__ == "__main__":  # make test: print the JDK to export as JAVA_HOME (nothing when there is none)
    print(java_home_for_tests() or "")
