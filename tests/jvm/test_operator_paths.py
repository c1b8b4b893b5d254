"""Small paths of the operator choice without a Spark job: a Spark Connect session runs the JVM
operator when its server loads the jar's SQL extension, else the Python operator, saying how to
load it; a missing jar names the fix; the JVM operator's state refuses a layout version it
does not read (its real ``load()`` on crafted state bytes, in a plain JVM)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

import streamsdsl.jvm
from streamsdsl.cli import main as cli_main
from streamsdsl.compiler import jvm_operator
from streamsdsl.compiler.jvm_operator import Backend, JvmAggregate, OperatorChoice, OperatorChoices
from streamsdsl.jvm import JvmOperatorError

ROOT = Path(__file__).resolve().parents[2]
NODE = "KSTREAM-AGGREGATE-0000000002"
COUNT = JvmAggregate(("COUNT",), (None,), "ADD", False, False, "count")


@pytest.fixture(autouse=True)
def _fresh_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test sees its own availability cache and warns afresh."""
    monkeypatch.setattr(jvm_operator, "_available", {})
    monkeypatch.setattr(jvm_operator, "_warned", set())


class NoJvm:
    """A py4j JVM view without the operator's class (a session that did not load the jar)."""

    def __getattr__(self, name: str) -> Any:
        raise RuntimeError(f"py4j: {name} is not on the classpath")


class ClassicSession:
    """A stand-in classic session that did not load the jar."""

    def __init__(self) -> None:
        self._jvm = NoJvm()
        self.sparkContext = type("SparkContext", (), {"_jsc": object()})()


class ConnectSession:
    """A stand-in Spark Connect session (its class from ``pyspark.sql.connect``) whose server answers
    ``SELECT streamsdsl_jvm_protocol()`` with ``protocol``, or, for None, does not know the
    function (no SQL extension)."""

    __module__ = "pyspark.sql.connect.session"

    def __init__(self, protocol: int | None) -> None:
        self.session_id = f"session-{protocol}-{id(self)}"
        self.protocol = protocol
        self.queries: list[str] = []

    def sql(self, query: str) -> Any:
        self.queries.append(query)
        if self.protocol is None:
            raise RuntimeError("[UNRESOLVED_ROUTINE] Cannot resolve routine `streamsdsl_jvm_protocol` on search path")
        return type("DataFrame", (), {"head": lambda _: (self.protocol,)})()


def test_spark_connect_session_without_the_extension_uses_the_python_operator(
        caplog: pytest.LogCaptureFixture) -> None:
    """A Spark Connect session whose server does not load the jar's SQL extension runs built-in
    aggregations on the Python operator, saying why and how to load it (explain, log) without
    touching a JVM; ``streamsdsl.operator=jvm`` is an error there."""
    connect = ConnectSession(None)
    choices = OperatorChoices("auto")
    with caplog.at_level("WARNING", logger="streamsdsl"):
        assert choices.choose(NODE, COUNT, connect, "session windows") is None
    why = ("the Spark Connect server does not load streamsdsl's SQL extension: start it with --jars "
           "\"$(streamsdsl jar-path)\" --conf spark.sql.extensions=io.streamsdsl.jvm.StreamsDslExtensions "
           "(docs/connect.md)")
    assert choices.by_node == {NODE: OperatorChoice(
        Backend.PYTHON, f"count, session windows; the JVM operator is unavailable: {why}")}
    assert str(choices.by_node[NODE]) == (
        f"Python operator (count, session windows; the JVM operator is unavailable: {why})")
    assert [r.getMessage() for r in caplog.records if r.name == "streamsdsl"] == [
        f"streamsdsl: built-in aggregations run on the Python operator: the JVM operator is unavailable ({why})."]
    with pytest.raises(JvmOperatorError) as caught:
        OperatorChoices("jvm").choose(NODE, COUNT, connect, "session windows")
    assert str(caught.value) == f"{NODE}: streamsdsl.operator is 'jvm' but the JVM operator cannot run: {why}."
    assert len(connect.queries) == 1  # asked once per server session


def test_spark_connect_session_with_the_extension_runs_the_jvm_operator() -> None:
    """A Spark Connect server that loads the extension of this contract runs the JVM operator; one of
    another streamsdsl version is named with both protocol versions."""
    choices = OperatorChoices("auto")
    assert choices.choose(NODE, COUNT, ConnectSession(jvm_operator.PROTOCOL), "session windows") is COUNT
    assert choices.by_node == {NODE: OperatorChoice(Backend.JVM, "count, session windows")}
    with pytest.raises(JvmOperatorError) as caught:
        OperatorChoices("jvm").choose(NODE, COUNT, ConnectSession(jvm_operator.PROTOCOL + 1), "session windows")
    assert str(caught.value) == (
        f"{NODE}: streamsdsl.operator is 'jvm' but the JVM operator cannot run: the Spark Connect server loaded a "
        f"jar of another streamsdsl version (protocol {jvm_operator.PROTOCOL + 1}, expected {jvm_operator.PROTOCOL}).")


def test_jvm_choice_without_the_jar_names_the_fix(monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """The jar path pointed at a missing file: ``streamsdsl.operator=jvm`` fails saying the
    jar is not built and how to build it; ``jar_path()`` and ``streamsdsl jar-path`` say what to
    install and run; ``auto`` falls back to the Python operator."""
    monkeypatch.setattr(streamsdsl.jvm, "JAR_NAME", "missing-operator.jar")
    missing = os.path.join(os.path.dirname(streamsdsl.jvm.__file__), "jars", "missing-operator.jar")
    with pytest.raises(JvmOperatorError) as caught:
        OperatorChoices("jvm").choose(NODE, COUNT, ClassicSession(), "session windows")
    assert str(caught.value) == (f"{NODE}: streamsdsl.operator is 'jvm' but the JVM operator cannot run: the jar "
                                 "is not built (no JDK 17 at install: see `python jvm/build.py`).")
    with pytest.raises(JvmOperatorError) as caught:
        streamsdsl.jvm.jar_path()
    assert str(caught.value) == (
        f"the JVM operator's jar is not built ({missing} is missing): it is compiled at install with javac from a JDK "
        "17 (a JRE is not enough). Install one (e.g. apt-get install openjdk-17-jdk-headless) and run `make install` "
        "(or `python jvm/build.py` in a source checkout); without it streamsdsl runs built-in aggregations on the "
        "Python operator.")
    assert cli_main(["jar-path"]) == 1
    assert capsys.readouterr().err == f"streamsdsl: {caught.value}\n"
    choices = OperatorChoices("auto")
    assert choices.choose(NODE, COUNT, ClassicSession(), "session windows") is None
    assert choices.by_node[NODE].backend is Backend.PYTHON
    assert choices.by_node[NODE].reason.startswith("count, session windows; the JVM operator is unavailable: "
                                                   "the jar is not built")


# The JVM operator's state decoder on crafted state values: one session window [0, 3] with count
# 2, written with layout version ``args[i]`` (the layout of AggregateProcessor.save).
PROBE = textwrap.dedent("""
    package io.streamsdsl.jvm;

    import java.lang.reflect.Field;
    import java.lang.reflect.InvocationTargetException;
    import java.lang.reflect.Method;
    import java.lang.reflect.Proxy;
    import java.nio.ByteBuffer;
    import org.apache.spark.sql.streaming.ValueState;
    import org.apache.spark.sql.types.StructType;

    public final class StateVersionProbe {
        public static void main(String[] args) throws Exception {
            StructType input = new StructType().add("key", "string").add("value", "boolean")
                .add("timestamp", "long").add("headers", "string").add("_source_position", "long")
                .add("_output_position", "long");
            String spec = "{\\"node\\":\\"KSTREAM-AGGREGATE-0000000002\\",\\"state_name\\":\\"counts\\","
                + "\\"replay\\":false,"
                + "\\"emit_on_close\\":false,\\"windowed_key\\":true,\\"key_kind\\":\\"string\\","
                + "\\"out_type\\":\\"bigint\\",\\"windowing\\":{\\"kind\\":\\"session\\",\\"gap\\":5,\\"grace\\":0},"
                + "\\"ops\\":[\\"COUNT\\"],\\"merge\\":\\"ADD\\",\\"double\\":false,\\"init_null\\":false}";
            AggregateProcessor processor = new AggregateProcessor(new Spec(spec, input));
            Field state = AggregateProcessor.class.getDeclaredField("state");
            state.setAccessible(true);
            Method load = AggregateProcessor.class.getDeclaredMethod("load");
            load.setAccessible(true);
            for (String arg : args) {
                byte version = Byte.parseByte(arg);
                byte[] bytes = ByteBuffer.allocate(46).put(version).putLong(Long.MIN_VALUE).putInt(1)
                    .putLong(0).putLong(3).putLong(3).put((byte) 0).putLong(2).array();
                state.set(processor, Proxy.newProxyInstance(ValueState.class.getClassLoader(),
                    new Class<?>[] {ValueState.class}, (proxy, method, a) -> {
                        switch (method.getName()) {
                            case "exists": return Boolean.TRUE;
                            case "get": return bytes;
                            default: throw new UnsupportedOperationException(method.getName());
                        }
                    }));
                try {
                    load.invoke(processor);
                    System.out.println("version " + version + ": loaded");
                } catch (InvocationTargetException e) {
                    Throwable cause = e.getCause();
                    System.out.println("version " + version + ": " + cause.getClass().getName() + ": "
                        + cause.getMessage());
                }
            }
        }
    }
""")


def _jvm_build() -> Any:
    spec = importlib.util.spec_from_file_location("streamsdsl_jvm_build", ROOT / "jvm" / "build.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_state_of_another_layout_version_is_refused(tmp_path: Path) -> None:
    """A checkpoint whose JVM-operator state was written with another layout version (the
    first byte of each key's state value, ``AggregateProcessor.STATE_VERSION``) fails the query
    at the first read of that key's state, naming both versions and what to do: the real
    ``load()`` on crafted state values (no Spark query: a reflection probe in a plain JVM)."""
    build = _jvm_build()
    jdk, jars = build.find_jdk(), build.pyspark_jars()
    if jdk is None or jars is None or not build.JAR.exists():
        pytest.skip("needs a JDK, pyspark and the built jar (python jvm/build.py)")
    javac, _ = jdk
    java = str(Path(javac).with_name("java"))
    source = tmp_path / "io" / "streamsdsl" / "jvm" / "StateVersionProbe.java"
    source.parent.mkdir(parents=True)
    source.write_text(PROBE)
    classpath = os.pathsep.join([str(jars / "*"), str(build.JAR), str(tmp_path)])
    subprocess.run([javac, "--release", "17", "-nowarn", "-cp", classpath, "-d", str(tmp_path), str(source)],
                   check=True, timeout=600)
    proc = subprocess.run([java, "-cp", classpath, "io.streamsdsl.jvm.StateVersionProbe", "1", "2"],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.splitlines() == [
        "version 1: loaded",
        "version 2: java.lang.IllegalStateException: KSTREAM-AGGREGATE-0000000002: the checkpoint holds state "
        "layout version 2 of the streamsdsl JVM operator; this jar reads version 1. Restart from the checkpoint "
        "with the streamsdsl version that wrote it, or start a new application.id.",
    ]


def test_the_contract_is_generated_without_the_package_dependencies() -> None:
    """``Contract.java`` is generated from ``JVM_CONTRACT`` where pip builds the package: an
    isolated interpreter without streamsdsl's dependencies (``setup.py`` builds the jar there). A
    constant ``columns.py`` imports from another module (``JSON_MAX_DEPTH``) is read as that
    module's literal; the result equals the contract the package itself declares."""
    from streamsdsl.compiler.columns import JVM_CONTRACT

    code = ("import json, sys; sys.path.insert(0, 'jvm'); import build; "
            "print(json.dumps(build._contract()))")
    # -I -S: no site-packages (no attrs, no pyspark), no PYTHONPATH, as in pip's build environment
    proc = subprocess.run([sys.executable, "-I", "-S", "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr[-2000:]
    got = json.loads(proc.stdout)
    assert got == {k: list(v) if isinstance(v, tuple) else v for k, v in JVM_CONTRACT.items()}
    assert got["JSON_MAX_DEPTH"] == 500
    assert "static final int JSON_MAX_DEPTH = 500;" in _jvm_build().contract_java()
