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
        worker's one long-lived JVM: `LONG_LIVED_DRIVER` after `SHORT_LIVED`'s C1-only), C2 at
        ten times the JDK's thresholds."""
        from streamsdsl.testing.jvm_options import LONG_LIVED_DRIVER, SHORT_LIVED

        jvm = spark.sparkContext._jvm
        arguments = list(jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments())
        assert [o for o in (*SHORT_LIVED, *LONG_LIVED_DRIVER) if o in arguments] == [*SHORT_LIVED, *LONG_LIVED_DRIVER]
        hotspot = jvm.java.lang.management.ManagementFactory.getPlatformMXBean(
            jvm.java.lang.Class.forName("com.sun.management.HotSpotDiagnosticMXBean"))
        assert hotspot.getVMOption("TieredStopAtLevel").getValue() == "4"
        assert hotspot.getVMOption("UseSerialGC").getValue() == "true"
        thresholds = {name: hotspot.getVMOption(name).getValue()
                      for name in ("Tier4InvocationThreshold", "Tier4MinInvocationThreshold", "Tier4CompileThreshold",
                                   "Tier4BackEdgeThreshold")}
        assert thresholds == {"Tier4InvocationThreshold": "50000", "Tier4MinInvocationThreshold": "20000",
                              "Tier4CompileThreshold": "60000", "Tier4BackEdgeThreshold": "400000"}

    def test_options_are_added_after_the_users_own_once(self) -> None:
        from streamsdsl.testing.jvm_options import with_options

        env = {"SPARK_SUBMIT_OPTS": "-Xss4m -XX:+UseSerialGC", "OTHER": "x"}
        assert with_options(env, "SPARK_SUBMIT_OPTS") == {
            "SPARK_SUBMIT_OPTS": "-Xss4m -XX:+UseSerialGC -XX:TieredStopAtLevel=1", "OTHER": "x"}
        assert with_options({}, "JAVA_TOOL_OPTIONS", ("-Xmx1g",)) == {"JAVA_TOOL_OPTIONS": "-Xmx1g"}
