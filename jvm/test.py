#!/usr/bin/env python3
"""Run the JVM operator's own unit tests (JUnit 5, ``jvm/src/test/java``).

The jar users install is built by ``jvm/build.py`` with ``javac`` alone; the tests need JUnit,
which Maven resolves from Maven Central into its local repository (``~/.m2``, outside the
checkout; a fresh clone resolves it again, an offline machine says which command failed). The
main and test sources are compiled with ``javac --release 17`` against the jars of the
installed ``pyspark`` and JUnit's console launcher, which runs every test class. Exit code:
JUnit's (non-zero when a test fails or none ran).

    python jvm/test.py [--quiet]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from build import SOURCES, BuildError, find_jdk, pyspark_jars, write_contract  # noqa: E402

TESTS = Path(__file__).resolve().parent / "src" / "test" / "java"
#: JUnit's console launcher (JUnit 5 / Jupiter included), from Maven Central.
JUNIT = ("org.junit.platform", "junit-platform-console-standalone", "1.11.4")


def junit_jar() -> Path:
    """The console launcher's jar in Maven's local repository, resolved first if it is not there."""
    group, artifact, version = JUNIT
    repo = Path(os.environ.get("MAVEN_REPO", Path.home() / ".m2" / "repository"))
    jar = repo.joinpath(*group.split("."), artifact, version, f"{artifact}-{version}.jar")
    if not jar.exists():
        command = ["mvn", "-q", "-B", "dependency:get", f"-Dartifact={group}:{artifact}:{version}"]
        try:
            subprocess.run(command, check=True, timeout=600)
        except (OSError, subprocess.SubprocessError) as exc:
            raise BuildError(f"cannot resolve JUnit from Maven Central ({' '.join(command)}: {exc}); the JVM "
                             "operator's unit tests need it (Maven 3 and network access to Maven Central)") from exc
    if not jar.exists():
        raise BuildError(f"Maven resolved {group}:{artifact}:{version} but {jar} is not there")
    return jar


def compile_tests(out: str) -> tuple[str, Path, Path]:
    """Compile the main and test sources into ``out``: the ``java`` command, PySpark's jars
    directory and JUnit's jar (the classpath of a test class's ``main``: ``out`` and the jars)."""
    jdk = find_jdk()
    jars = pyspark_jars()
    if jdk is None or jars is None:
        raise BuildError("the JVM operator's tests need a JDK 17 (javac) and an installed pyspark")
    javac = jdk[0]
    junit = junit_jar()
    main = sorted(SOURCES.rglob("*.java"))
    tests = sorted(TESTS.rglob("*.java"))
    if not tests:
        raise BuildError(f"no JUnit tests under {TESTS}")
    with tempfile.TemporaryDirectory(prefix="streamsdsl-jvm-src-") as generated:
        classpath = os.pathsep.join([str(jars / "*"), str(junit)])
        subprocess.run([javac, "--release", "17", "-nowarn", "-d", out, "-cp", classpath,
                        *map(str, main), str(write_contract(generated)), *map(str, tests)], check=True)
    return str(Path(javac).with_name("java")), jars, junit


def run(quiet: bool = False) -> int:
    with tempfile.TemporaryDirectory(prefix="streamsdsl-jvm-test-") as out:
        java, jars, junit = compile_tests(out)
        spark = [str(j) for j in sorted(jars.glob("*.jar"))]  # the launcher does not expand "jars/*"
        command = [java, "-jar", str(junit), "execute", "--class-path", os.pathsep.join([out, *spark]),
                   "--scan-class-path", out, "--fail-if-no-tests", "--disable-banner"]
        if quiet:
            command.append("--details=summary")
        return subprocess.run(command, check=False).returncode


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quiet", action="store_true", help="print only JUnit's summary")
    args = parser.parse_args(argv)
    try:
        return run(args.quiet)
    except BuildError as exc:
        print(f"jvm/test.py: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    raise SystemExit(main())
