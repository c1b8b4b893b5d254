"""oracle/build.py: the oracle's Maven build is kept in the user's cache per version of its
sources; a fresh clone copies it instead of starting Maven, and a cached build that names a jar
that is gone is built again."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from oracle import build


@pytest.fixture
def places(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """A cache directory and a ``target`` of the test's own; Maven replaced by a recorder that
    writes what ``mvn package`` writes (the classes and the classpath)."""
    jar = tmp_path / "m2" / "kafka-streams.jar"
    jar.parent.mkdir()
    jar.write_bytes(b"jar")
    target = tmp_path / "target"
    runs: list[str] = []

    def maven() -> None:
        runs.append("mvn")
        (target / "classes" / "streamsdsl" / "oracle").mkdir(parents=True, exist_ok=True)
        (target / "classes" / "streamsdsl" / "oracle" / "Oracle.class").write_bytes(b"built")
        (target / "classpath.txt").write_text(str(jar))

    monkeypatch.setenv("STREAMSDSL_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(build, "TARGET", target)
    monkeypatch.setattr(build, "_maven", maven)
    return {"target": target, "runs": runs, "jar": jar, "cache": tmp_path / "cache"}


def test_maven_once_then_the_cached_build(places: dict[str, Any]) -> None:
    """The first build runs Maven and keeps its output under ``oracle-<digest>``; the next, into
    an empty ``target`` (a fresh clone), copies it without Maven."""
    first = build.build()
    cached = places["cache"] / f"oracle-{build.digest()}"
    assert first == f"built with Maven, kept in {cached}" and places["runs"] == ["mvn"]
    assert (cached / "classes" / "streamsdsl" / "oracle" / "Oracle.class").read_bytes() == b"built"
    target: Path = places["target"]
    shutil.rmtree(target)
    assert build.build() == f"copied {cached}" and places["runs"] == ["mvn"]
    assert (target / "classes" / "streamsdsl" / "oracle" / "Oracle.class").read_bytes() == b"built"
    assert (target / "classpath.txt").read_text() == str(places["jar"])


def test_a_cached_build_whose_jar_is_gone_and_force_run_maven(places: dict[str, Any]) -> None:
    build.build()
    places["jar"].unlink()  # ~/.m2 cleared
    assert build.build().startswith("built with Maven") and places["runs"] == ["mvn", "mvn"]
    places["jar"].write_bytes(b"jar")
    assert build.build().startswith("copied")
    assert build.build(force=True).startswith("built with Maven") and len(places["runs"]) == 3


def test_the_digest_is_of_the_pom_and_the_java_sources(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A change to the pom or a Java source is another cached build; other files are not."""
    java = tmp_path / "java"
    source = java / "src" / "main" / "java" / "streamsdsl" / "oracle" / "Oracle.java"
    source.parent.mkdir(parents=True)
    (java / "pom.xml").write_text("<project/>")
    source.write_text("class Oracle {}")
    monkeypatch.setattr(build, "JAVA", java)
    first = build.digest()
    (java / "src" / "README").write_text("notes")
    assert build.digest() == first and len(first) == 20
    source.write_text("class Oracle { }")
    second = build.digest()
    (java / "pom.xml").write_text("<project></project>")
    assert len({first, second, build.digest()}) == 3
