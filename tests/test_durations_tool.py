"""``tools/test_durations.py`` sums a JUnit report per test file, and ``conftest.py`` hands the
files to ``make test``'s workers longest first from it and sets the options of the test run's
Spark driver JVMs."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def _load(path: Path, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


TOOL = _load(ROOT / "tools" / "test_durations.py", "test_durations_tool_module")


class TestDurations:
    def test_cases_are_summed_per_file_with_classes_and_packages_resolved(self, tmp_path: Path) -> None:
        """Test classes, packages and doctest modules each map to their file; a case of no file
        in the checkout is left out."""
        report = tmp_path / "r.xml"
        report.write_text(
            '<testsuites><testsuite>'
            '<testcase classname="tests.jvm.test_jvm_operator.TestX" name="a" time="1.25"/>'
            '<testcase classname="tests.jvm.test_jvm_operator" name="b" time="2.0"/>'
            '<testcase classname="streamsdsl.dsl.stream" name="c" time="0.5"/>'
            '<testcase classname="tests.gone.test_nothing" name="d" time="9"/>'
            '</testsuite></testsuites>')
        assert TOOL.durations(report) == {"streamsdsl/dsl/stream.py": 0.5, "tests/jvm/test_jvm_operator.py": 3.2}

    def test_a_file_with_skipped_tests_keeps_its_recorded_seconds_when_more(self, tmp_path: Path) -> None:
        """A file with tests skipped (no Docker engine here, one in CI) keeps what was recorded when
        that was more; a file without skipped tests takes the report's seconds."""
        report = tmp_path / "r.xml"
        report.write_text(
            '<testsuites><testsuite>'
            '<testcase classname="integration.test_deploy_image" name="a" time="0.01"><skipped message="no"/></testcase>'
            '<testcase classname="integration.test_deploy_image" name="b" time="0.5"/>'
            '<testcase classname="integration.test_faults" name="c" time="4.0"/>'
            '<testcase classname="integration.test_app_close" name="d" time="0.0"><skipped message="no"/></testcase>'
            '<testcase classname="integration.test_kafka_io" name="e" time="9.0"><skipped message="no"/></testcase>'
            '</testsuite></testsuites>')
        recorded = {"integration/test_deploy_image.py": 61.0, "integration/test_faults.py": 100.0,
                    "integration/test_kafka_io.py": 2.0}
        assert TOOL.durations(report, recorded) == {"integration/test_app_close.py": 0.0,
                                                    "integration/test_deploy_image.py": 61.0,
                                                    "integration/test_faults.py": 4.0,
                                                    "integration/test_kafka_io.py": 9.0}

    def test_the_recorded_durations_name_files_of_this_checkout(self) -> None:
        """Every file in ``tests/durations.json`` exists (a renamed file would silently fall back
        to its estimate)."""
        files = json.loads((ROOT / "tests" / "durations.json").read_text())["files"]
        missing = [f for f in files if not (ROOT / f).is_file()]
        assert missing == [], f"tests/durations.json names files that are gone: {missing}; run tools/test_durations.py"
        assert len(files) > 100


class TestJvmOptions:
    def test_the_shared_sessions_jvm_runs_with_the_test_runs_options(self, spark: Any) -> None:
        """The worker's session was started after ``conftest.py`` set ``SPARK_SUBMIT_OPTS``: its
        JVM collects with the serial collector, and it compiles with every tier of the JIT (the
        worker's one long-lived JVM: `LONG_LIVED_DRIVER` after `SHORT_LIVED`'s C1-only)."""
        from streamsdsl.testing.jvm_options import LONG_LIVED_DRIVER, SHORT_LIVED

        jvm = spark.sparkContext._jvm
        arguments = list(jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments())
        assert [o for o in (*SHORT_LIVED, *LONG_LIVED_DRIVER) if o in arguments] == [*SHORT_LIVED, *LONG_LIVED_DRIVER]
        hotspot = jvm.java.lang.management.ManagementFactory.getPlatformMXBean(
            jvm.java.lang.Class.forName("com.sun.management.HotSpotDiagnosticMXBean"))
        assert hotspot.getVMOption("TieredStopAtLevel").getValue() == "4"
        assert hotspot.getVMOption("UseSerialGC").getValue() == "true"

    def test_options_are_added_after_the_users_own_once(self) -> None:
        from streamsdsl.testing.jvm_options import with_options

        env = {"SPARK_SUBMIT_OPTS": "-Xss4m -XX:+UseSerialGC", "OTHER": "x"}
        assert with_options(env, "SPARK_SUBMIT_OPTS") == {
            "SPARK_SUBMIT_OPTS": "-Xss4m -XX:+UseSerialGC -XX:TieredStopAtLevel=1", "OTHER": "x"}
        assert with_options({}, "JAVA_TOOL_OPTIONS", ("-Xmx1g",)) == {"JAVA_TOOL_OPTIONS": "-Xmx1g"}


def _jdk(root: Path, name: str, version: str | None, *, javac: bool = True) -> str:
    """A directory shaped like a JDK: ``bin/java``, ``bin/javac`` unless not ``javac``, and a
    ``release`` file naming ``version`` (none when None)."""
    home = root / name
    (home / "bin").mkdir(parents=True)
    for tool in ("java", *(("javac",) if javac else ())):
        (home / "bin" / tool).write_text("#!/bin/sh\n")
    if version is not None:
        (home / "release").write_text(f'IMPLEMENTOR="x"\nJAVA_VERSION="{version}"\nOS_NAME="Linux"\n')
    return str(home)


class TestTestRunJdk:
    """`make test` runs on the newest installed JDK Spark accepts of 25 and 21 (`java_home_for_tests`)."""

    def test_versions_are_read_from_the_release_file(self, tmp_path: Path) -> None:
        from streamsdsl.testing.jvm_options import jdk_version

        assert jdk_version(_jdk(tmp_path, "a", "25.0.3")) == (25, 3)
        assert jdk_version(_jdk(tmp_path, "b", "21")) == (21, 0)
        assert jdk_version(_jdk(tmp_path, "c", "1.8.0_402")) == (8, 0)
        assert jdk_version(_jdk(tmp_path, "d", None)) is None
        assert jdk_version(_jdk(tmp_path, "e", "25.0.3", javac=False)) is None  # a JRE

    def test_the_newest_accepted_jdk_is_chosen(self, tmp_path: Path) -> None:
        from streamsdsl.testing.jvm_options import java_home_for_tests

        _jdk(tmp_path, "java-17-openjdk-amd64", "17.0.15")
        assert java_home_for_tests([str(tmp_path)]) is None  # 17 only: the default JDK runs the tests
        _jdk(tmp_path, "temurin-25-early", "25.0.2")  # before JDK-8377811's fix: refused
        assert java_home_for_tests([str(tmp_path)]) is None
        java21 = _jdk(tmp_path, "java-21-openjdk-amd64", "21.0.8")
        assert java_home_for_tests([str(tmp_path)]) == java21
        java25 = _jdk(tmp_path, "temurin-25-jdk-amd64", "25.0.3")
        assert java_home_for_tests([str(tmp_path)]) == java25
        newer = _jdk(tmp_path, "temurin-25.0.4", "25.0.4")
        assert java_home_for_tests([str(tmp_path), str(tmp_path / "missing")]) == newer

    def test_a_symlink_to_a_jdk_is_not_a_second_one(self, tmp_path: Path) -> None:
        from streamsdsl.testing.jvm_options import java_home_for_tests

        java25 = _jdk(tmp_path, "temurin-25-jdk-amd64", "25.0.3")
        (tmp_path / "zz-link").symlink_to(java25)
        assert java_home_for_tests([str(tmp_path)]) == java25
