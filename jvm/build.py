#!/usr/bin/env python3
"""Build the JVM operator's jar (``streamsdsl/jars/streamsdsl-operator.jar``) without Maven.

``javac --release 17`` against the jars of the installed ``pyspark``, then ``jar``. Rebuilds only
when the Java sources changed (a SHA-256 of them is kept next to the jar). Without a JDK (no
``javac``) it prints why and exits 0: streamsdsl then runs built-in aggregations on the Python
operator (``--require`` makes that an error). In a source checkout (``pip install -e .``),
``streamsdsl.jvm.ensure_built`` runs it too, before a session streamsdsl creates loads the jar.

    python jvm/build.py [--force] [--require]
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent
SOURCES = ROOT / "src" / "main" / "java"
JAR = ROOT.parent / "streamsdsl" / "jars" / "streamsdsl-operator.jar"
STAMP = JAR.with_suffix(".sha256")


def _digest(files: list[Path]) -> str:
    h = hashlib.sha256()
    for f in files:
        h.update(str(f.relative_to(SOURCES)).encode())
        h.update(f.read_bytes())
    return h.hexdigest()


def _tool(name: str) -> str | None:
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / name).exists():
        return str(Path(home) / "bin" / name)
    return shutil.which(name)


def _pyspark_jars() -> Path:
    spec = importlib.util.find_spec("pyspark")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("jvm/build.py: pyspark is not installed in this interpreter: run it with the venv's python.")
    return Path(list(spec.submodule_search_locations)[0]) / "jars"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--force", action="store_true", help="rebuild even if the sources did not change")
    parser.add_argument("--require", action="store_true", help="fail (exit 1) when no JDK is found")
    parser.add_argument("--quiet", action="store_true", help="print nothing when the jar is up to date")
    args = parser.parse_args(argv)
    files = sorted(SOURCES.rglob("*.java"))
    digest = _digest(files)
    if not args.force and JAR.exists() and STAMP.exists() and STAMP.read_text().strip() == digest:
        if not args.quiet:
            print(f"jvm/build.py: {JAR.name} is up to date")
        return 0
    javac, jar = _tool("javac"), _tool("jar")
    if javac is None or jar is None:
        print("jvm/build.py: no JDK found (javac/jar; a JRE is not enough): the JVM operator is not built and "
              "streamsdsl runs built-in aggregations on the Python operator. Install a JDK 17 "
              "(apt-get install openjdk-17-jdk-headless) and run `make install` again.", file=sys.stderr)
        return 1 if args.require else 0
    classpath = str(_pyspark_jars() / "*")
    with tempfile.TemporaryDirectory(prefix="streamsdsl-jvm-") as out:
        subprocess.run([javac, "--release", "17", "-nowarn", "-d", out, "-cp", classpath, *map(str, files)], check=True)
        JAR.parent.mkdir(parents=True, exist_ok=True)
        tmp = JAR.with_suffix(".jar.tmp")
        subprocess.run([jar, "--create", "--file", str(tmp), "-C", out, "."], check=True)
        os.replace(tmp, JAR)
    STAMP.write_text(digest + "\n")
    print(f"jvm/build.py: built {JAR}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
