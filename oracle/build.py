#!/usr/bin/env python3
"""Build the Kafka Streams oracle (``oracle/java``: ``target/classes`` and ``target/classpath.txt``,
what `oracle.harness` runs) with Maven, once per version of its sources.

A build is kept in the user's cache (`streamsdsl.maven.cache_dir`, ``oracle-<digest>``: the
digest of the pom and the Java sources), never in the repository: a fresh clone of the same
sources copies it instead of starting Maven (3–4 s of a fresh clone's ``make test`` on an idle
machine, while nothing else runs). A cached build whose classpath names a jar that is gone (a
cleared ``~/.m2``) is built again. ``make oracle-jar`` runs this script.

    python oracle/build.py [--force]
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from streamsdsl.maven import cache_dir

JAVA = Path(__file__).resolve().parent / "java"
TARGET = JAVA / "target"
CLASSES, CLASSPATH = "classes", "classpath.txt"


def digest() -> str:
    """SHA-256 of the pom and the Java sources (their paths and contents)."""
    h = hashlib.sha256()
    for f in [JAVA / "pom.xml", *sorted((JAVA / "src").rglob("*.java"))]:
        h.update(str(f.relative_to(JAVA)).encode())
        h.update(f.read_bytes())
    return h.hexdigest()[:20]


def _complete(build: Path) -> bool:
    """Whether ``build`` holds the classes and a classpath whose jars all exist."""
    listing = build / CLASSPATH
    if not (build / CLASSES).is_dir() or not listing.is_file():
        return False
    return all(Path(jar).is_file() for jar in listing.read_text().strip().split(os.pathsep) if jar)


def _maven() -> None:
    if shutil.which("mvn") is None:
        sys.exit("oracle/build.py: Maven is required to build the oracle (apt-get install maven)")
    subprocess.run(["mvn", "-B", "-q", "-f", str(JAVA / "pom.xml"), "package", "-DskipTests"], check=True)


def _copy(source: Path, target: Path) -> None:
    """``source``'s classes and classpath into ``target`` (replacing the classes there)."""
    target.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(target / CLASSES, ignore_errors=True)
    shutil.copytree(source / CLASSES, target / CLASSES)
    shutil.copyfile(source / CLASSPATH, target / CLASSPATH)


def build(force: bool = False) -> str:
    """Put the oracle's build into ``oracle/java/target``; returns where it came from."""
    cached = cache_dir() / f"oracle-{digest()}"
    if not force and _complete(cached):
        _copy(cached, TARGET)
        return f"copied {cached}"
    _maven()
    cached.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cached.parent, prefix=".building-") as tmp:  # as `maven.resolve`
        _copy(TARGET, Path(tmp) / "build")
        shutil.rmtree(cached, ignore_errors=True)
        with contextlib.suppress(OSError):  # a concurrent build put its copy there first
            os.rename(Path(tmp) / "build", cached)
    return f"built with Maven, kept in {cached}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--force", action="store_true", help="run Maven even when a cached build is there")
    print(f"oracle/build.py: {build(parser.parse_args(argv).force)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
