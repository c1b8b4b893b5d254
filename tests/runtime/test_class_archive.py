"""The class-data-sharing archive of the Spark driver's classes (`streamsdsl.runtime.class_archive`):
where it is, when a session's driver uses it, how it is written, and that the one ``make install``
wrote maps for the class path of the driver the tests run on."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from streamsdsl import cli
from streamsdsl.maven import CACHE_ENV
from streamsdsl.runtime import class_archive
from streamsdsl.runtime.class_archive import ARCHIVE_ENV, ClassArchiveError, archive_path, build, driver_options

SHARING = "-Xshare:auto -Xlog:cds=off -Xlog:cds+dynamic=off"


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty user cache; the archive switched on (the default)."""
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    monkeypatch.delenv(ARCHIVE_ENV, raising=False)
    return tmp_path / "cache"


def _write_archive() -> Path:
    path = archive_path()
    assert path is not None
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"archive")
    return path


class TestDriverOptions:
    def test_nothing_is_added_until_an_archive_is_written(self, cache: Path) -> None:
        path = archive_path()
        assert path is not None and path.parent == cache / "class-archives" and path.name.startswith("spark-")
        assert driver_options("-Xss4m") == "-Xss4m"

    def test_an_archive_joins_the_options_the_driver_has(self, cache: Path) -> None:
        path = _write_archive()
        assert driver_options("-Xss4m") == f"-Xss4m -XX:SharedArchiveFile={path} {SHARING}"
        assert driver_options() == f"-XX:SharedArchiveFile={path} {SHARING}"

    @pytest.mark.parametrize("own", ["-Xshare:off", "-XX:SharedArchiveFile=/mine.jsa", "-XX:ArchiveClassesAtExit=/x.jsa"])
    def test_options_that_choose_class_sharing_are_kept(self, cache: Path, own: str) -> None:
        _write_archive()
        assert driver_options(own) == own

    @pytest.mark.parametrize("off", ["off", "0", "false", "NO"])
    def test_the_environment_turns_it_off(self, cache: Path, monkeypatch: pytest.MonkeyPatch, off: str) -> None:
        _write_archive()
        monkeypatch.setenv(ARCHIVE_ENV, off)
        assert driver_options("-Xss4m") == "-Xss4m"

    def test_configure_spark_gives_it_to_the_driver_only(self, cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        import streamsdsl
        from streamsdsl.runtime.session import log4j2_config_path

        path = _write_archive()

        class Builder:
            def __init__(self) -> None:
                self._options = {"spark.master": "local[2]", "spark.driver.extraJavaOptions": "-Xss4m"}

            def config(self, key: str, value: str) -> "Builder":
                self._options[key] = value
                return self

        monkeypatch.setenv("PYSPARK_PYTHON", os.environ.get("PYSPARK_PYTHON", "python3"))
        options = streamsdsl.configure_spark(Builder())._options
        log4j = f"-Dlog4j2.configurationFile=file:{log4j2_config_path()}"
        assert options["spark.driver.extraJavaOptions"] == f"-Xss4m {log4j} -XX:SharedArchiveFile={path} {SHARING}"
        assert options["spark.executor.extraJavaOptions"] == log4j


    def test_executors_on_a_local_cluster_get_it_too(self, cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        """``local-cluster``: the executors' JVMs start on this machine with the same class path."""
        from streamsdsl.runtime.session import _class_sharing, log4j2_config_path

        path = _write_archive()
        log4j = f"-Dlog4j2.configurationFile=file:{log4j2_config_path()}"
        options = {"spark.driver.extraJavaOptions": log4j, "spark.executor.extraJavaOptions": log4j}
        archive = f"-XX:SharedArchiveFile={path} {SHARING}"
        assert _class_sharing(options, "local-cluster[2,1,1024]") == {
            "spark.driver.extraJavaOptions": f"{log4j} {archive}", "spark.executor.extraJavaOptions": f"{log4j} {archive}"}
        assert list(_class_sharing(options, "local[2]")) == ["spark.driver.extraJavaOptions"]
        assert list(_class_sharing(options, "spark://host:7077")) == ["spark.driver.extraJavaOptions"]


class TestKey:
    def test_another_spark_jar_directory_has_another_archive(self, cache: Path, tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
        jars = tmp_path / "jars"
        jars.mkdir()
        (jars / "spark-core.jar").write_bytes(b"1")
        monkeypatch.setattr(class_archive, "_spark_jars", lambda: str(jars))
        first = archive_path()
        assert archive_path() == first
        (jars / "spark-sql.jar").write_bytes(b"2")
        second = archive_path()
        (jars / "spark-sql.jar").write_bytes(b"22")  # the same name, another size: another PySpark build
        assert len({first, second, archive_path()}) == 3

    def test_no_jdk_no_archive(self, cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setattr(class_archive, "_java", lambda: None)
        assert archive_path() is None
        assert driver_options("-Xss4m") == "-Xss4m"
        with pytest.raises(ClassArchiveError, match=r"no 'java' \(JAVA_HOME or the PATH\)"):
            build()


class TestBuild:
    def test_an_existing_archive_is_kept(self, cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        path = _write_archive()
        monkeypatch.setattr(subprocess, "run", lambda *a, **k: pytest.fail("no child process expected"))
        assert build() == path and path.read_bytes() == b"archive"

    def test_the_childs_archive_is_renamed_into_place_with_what_it_is_for(self, cache: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
        calls: list[list[str]] = []

        def child(args: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
            calls.append(args)
            assert kwargs["env"][ARCHIVE_ENV] == "off"  # the child runs without an archive
            Path(args[-1]).write_bytes(b"classes")
            return subprocess.CompletedProcess(args, 0, "", "")

        monkeypatch.setattr(subprocess, "run", child)
        path = build()
        assert calls[0][1:3] == ["-m", "streamsdsl.runtime.class_archive"]
        assert path.read_bytes() == b"classes"
        assert [p.name for p in path.parent.iterdir() if p.suffix not in (".jsa", ".json")] == []
        meta = json.loads(path.with_suffix(".json").read_text())
        assert meta["jars"] == class_archive._spark_jars() and meta["java"] == class_archive._java()

    def test_a_failing_child_says_what_it_printed(self, cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        monkeypatch.setattr(subprocess, "run", lambda args, **k: subprocess.CompletedProcess(
            args, 1, "", "Traceback ...\nRuntimeError: no session"))
        with pytest.raises(ClassArchiveError, match=r"failed \(exit code 1\); the child process printed:\n"
                                                     r"Traceback \.\.\.\nRuntimeError: no session"):
            build()
        assert not archive_path().exists()  # type: ignore[union-attr]
        assert [p.name for p in (cache / "class-archives").iterdir()] == []

    def test_archives_of_jars_that_are_gone_or_changed_are_removed(self, cache: Path, tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
        """A jar directory removed, or the same directory with other jars (a virtual environment
        made again at the same path): their archives go; another valid one stays."""
        directory = cache / "class-archives"
        directory.mkdir(parents=True)
        same, rebuilt = tmp_path / "same", tmp_path / "rebuilt"
        for jars in (same, rebuilt):
            jars.mkdir()
            (jars / "spark-core.jar").write_bytes(b"1")
        listing = class_archive._listing(str(same))
        for name, jars in (("spark-old", tmp_path / "gone"), ("spark-other", same), ("spark-rebuilt", rebuilt)):
            (directory / f"{name}.jsa").write_bytes(b"x")
            (directory / f"{name}.json").write_text(json.dumps({"jars": str(jars), "jar_files": listing}))
        (rebuilt / "spark-core.jar").write_bytes(b"12")
        monkeypatch.setattr(subprocess, "run", lambda args, **k: (Path(args[-1]).write_bytes(b"c"),
                                                                  subprocess.CompletedProcess(args, 0, "", ""))[1])
        path = build()
        assert sorted(p.name for p in directory.iterdir()) == sorted(
            ["spark-other.jsa", "spark-other.json", path.name, path.with_suffix(".json").name])


class TestCommand:
    def test_help_and_arguments(self, capsys: pytest.CaptureFixture[str]) -> None:
        assert cli.main(["class-archive", "--help"]) == 0
        assert "write the archive of the Spark driver's classes" in capsys.readouterr().out
        assert cli.main(["class-archive", "now"]) == 2
        assert capsys.readouterr().err == "streamsdsl class-archive: no arguments expected (got now)\n"

    def test_prints_the_path_or_the_error(self, cache: Path, capsys: pytest.CaptureFixture[str],
                                          monkeypatch: pytest.MonkeyPatch) -> None:
        path = _write_archive()
        assert cli.main(["class-archive"]) == 0
        assert capsys.readouterr().out == f"{path}\n"
        monkeypatch.setattr(class_archive, "_java", lambda: None)
        assert cli.main(["class-archive"]) == 1
        assert capsys.readouterr().err.startswith("streamsdsl class-archive: no class archive: no 'java'")


@pytest.mark.spark
def test_the_installed_archive_maps_for_the_drivers_class_path(spark: Any) -> None:
    """The archive ``make install`` wrote is the one the test session's driver was started with,
    and the JDK maps it for that driver's class path (``-Xshare:on`` fails when it cannot)."""
    path = archive_path()
    assert path is not None and path.is_file(), (
        f"no class archive at {path}: run `make install` (or `streamsdsl class-archive`)")
    runtime = spark._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean()
    assert f"-XX:SharedArchiveFile={path}" in list(runtime.getInputArguments())
    java = class_archive._java()
    assert java is not None
    proc = subprocess.run([java, "-Xshare:on", f"-XX:SharedArchiveFile={path}", "-Xlog:class+path=info",
                           "-cp", runtime.getClassPath(), "-version"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
