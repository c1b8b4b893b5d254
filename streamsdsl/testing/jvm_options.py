"""The options of the short-lived JVMs a test run starts: the JIT's first tier (C1) only and the
serial collector. A test's JVM lives seconds to minutes on a machine of two cores: C2's
compilations and G1's threads cost CPU that such a JVM never earns back (measured: a quarter of
a Spark test file's CPU time; /work/shared/PLATFORM.md, docs/performance.md). Applications keep
the JVM's defaults; this is for test runs only.

``SPARK_SUBMIT_OPTS`` carries them to every Spark driver JVM started through ``spark-submit``
(PySpark's gateway, the applications' processes), ``SPARK_DAEMON_JAVA_OPTS`` to a standalone
master and worker, ``JAVA_TOOL_OPTIONS`` to the executors a worker or a local cluster starts
(they inherit its environment). The one long-lived JVM of a test run, each xdist worker's
shared session, takes `LONG_LIVED_DRIVER` after them: every tier of the JIT again, C2 for its
hottest methods only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

#: C1 only, the serial collector.
SHORT_LIVED: tuple[str, ...] = ("-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC")

#: The JIT's ``Tier4`` thresholds (when C2 compiles a method) at ten times the JDK's: a test run
#: is Spark's planner on a few records, thousands of methods each warm for a while and few hot
#: loops, and with the JDK's thresholds (a method called 5,000 times) C2's compilations were about
#: half of a worker's session's CPU time. C1's code (tier 3) serves the warm methods, C2 compiles
#: the hot ones. Three Spark test files in one process: 229–235 → 193–207 CPU-s at the same wall
#: time; thirty times instead of ten made the planner's code slower (207 CPU-s, 13 % longer); a
#: whole run 2,023 → 1,832 CPU-s (docs/performance.md, "C2 for the hottest methods only").
#: Inlining less had cut the compilations too, but its code was slower in a worker's later files
#: (docs/performance.md, "The JIT's share").
C2_HOTTEST_ONLY: tuple[str, ...] = (
    "-XX:Tier4InvocationThreshold=50000",
    "-XX:Tier4MinInvocationThreshold=20000",
    "-XX:Tier4CompileThreshold=60000",
    "-XX:Tier4BackEdgeThreshold=400000",
)

#: The driver options of a test run's one long-lived JVM: each xdist worker's shared session,
#: which runs every Spark test the worker takes (tens of minutes): the JIT's every tier again
#: (after `SHORT_LIVED`'s C1-only in ``SPARK_SUBMIT_OPTS``; the last option wins), C2 for the
#: hottest methods only (`C2_HOTTEST_ONLY`). C2's compiled code pays for its compilations over
#: such a run: three Spark test files in one session ran 22 % shorter at the same CPU time
#: (docs/performance.md, "make test itself").
LONG_LIVED_DRIVER: tuple[str, ...] = ("-XX:TieredStopAtLevel=4", *C2_HOTTEST_ONLY)


def with_options(env: Mapping[str, str], variable: str, options: Sequence[str] = SHORT_LIVED) -> dict[str, str]:
    """``env`` with ``options`` added to the JVM options in ``variable``, after those already
    there (an option already there is not repeated)."""
    own = env.get(variable, "").split()
    return {**env, variable: " ".join([*own, *(o for o in options if o not in own)])}
