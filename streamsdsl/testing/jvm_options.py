"""The options of the short-lived JVMs a test run starts: the JIT's first tier (C1) only and the
serial collector. A test's JVM lives seconds to minutes on a machine of two cores: C2's
compilations and G1's threads cost CPU that such a JVM never earns back (measured: a quarter of
a Spark test file's CPU time; /work/shared/PLATFORM.md, docs/performance.md). Applications keep
the JVM's defaults; this is for test runs only.

``SPARK_SUBMIT_OPTS`` carries them to every Spark driver JVM started through ``spark-submit``
(PySpark's gateway, the applications' processes), ``SPARK_DAEMON_JAVA_OPTS`` to a standalone
master and worker, ``JAVA_TOOL_OPTIONS`` to the executors a worker or a local cluster starts
(they inherit its environment). The one long-lived JVM of a test run, each xdist worker's
shared session, takes `LONG_LIVED_DRIVER` after them: every tier of the JIT again, C2 inlining
less.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

#: C1 only, the serial collector.
SHORT_LIVED: tuple[str, ...] = ("-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC")

#: The driver options of a test run's one long-lived JVM: each xdist worker's shared session,
#: which runs every Spark test the worker takes (tens of minutes): the JIT's every tier again
#: (after `SHORT_LIVED`'s C1-only in ``SPARK_SUBMIT_OPTS``; the last option wins). C2's compiled
#: code pays for its compilations over such a run: three Spark test files in one session ran
#: 22 % shorter at the same CPU time (docs/performance.md, "make test itself"). With C2's default
#: inlining its compilations took two thirds of the session's CPU time: a test run is Spark's
#: planner, analyzer and code generator on small inputs (thousands of methods, each warm once,
#: few hot loops), and C2 inlined deep trees of them into each compilation. C2 inlining less and
#: compiling methods at twice the calls: two Spark test files 144 → 88 CPU-s (the JIT's 98 s →
#: 31 s of it), 97 → 81 s; two others 170 → 109 CPU-s. The code it compiles is slower, so a
#: worker's later files gain nothing or lose: over a whole ``make test`` (three workers, the
#: cores busy) 2,581 → 2,474 CPU-s and 1,333 → 1,288 s.
LONG_LIVED_DRIVER: tuple[str, ...] = (
    "-XX:TieredStopAtLevel=4", "-XX:MaxInlineLevel=3", "-XX:FreqInlineSize=50", "-XX:InlineSmallCode=500",
    "-XX:CompileThresholdScaling=2",
)


def with_options(env: Mapping[str, str], variable: str, options: Sequence[str] = SHORT_LIVED) -> dict[str, str]:
    """``env`` with ``options`` added to the JVM options in ``variable``, after those already
    there (an option already there is not repeated)."""
    own = env.get(variable, "").split()
    return {**env, variable: " ".join([*own, *(o for o in options if o not in own)])}
