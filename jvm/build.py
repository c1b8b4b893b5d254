#!/usr/bin/env python3
"""Build the JVM operator's jar (``streamsdsl/jars/streamsdsl-operator.jar``) without Maven.

``javac --release 17`` against the jars of the installed ``pyspark``, then ``jar``. Rebuilds only
when the Java sources changed (a SHA-256 of them is kept next to the jar); concurrent builds (make,
pip, a session's ``ensure_built``) take turns on a lock file and the jar is replaced atomically.
Without a JDK (no ``javac``) it prints why and exits 0: streamsdsl then runs built-in aggregations
on the Python operator (``--require`` makes that an error). Three callers, one function (`build`):

- ``make install`` runs this script after installing the package;
- ``pip install [-e] .`` and ``pip wheel .`` run it from ``setup.py`` (a ``build_py`` step), so a
  wheel built from a fresh clone carries the jar;
- in a source checkout (``pip install -e .``) ``streamsdsl.jvm.ensure_built`` runs it before a
  session streamsdsl creates loads the jar.

    python jvm/build.py [--force] [--require] [--quiet]
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import hashlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Callable, Iterator

ROOT = Path(__file__).resolve().parent
SOURCES = ROOT / "src" / "main" / "java"
#: Where the Python–JVM contract is declared once (`JVM_CONTRACT`); `contract_java` generates Java from it.
COLUMNS = ROOT.parent / "streamsdsl" / "compiler" / "columns.py"
JAR = ROOT.parent / "streamsdsl" / "jars" / "streamsdsl-operator.jar"
STAMP = JAR.with_suffix(".sha256")
LOCK = JAR.with_suffix(".lock")


class BuildError(Exception):
    """The jar cannot be built here (the message says why and what to do)."""


def _digest(files: list[Path]) -> str:
    h = hashlib.sha256()
    for f in files:
        h.update(str(f.relative_to(SOURCES)).encode())
        h.update(f.read_bytes())
    h.update(contract_java().encode())
    jars = pyspark_jars()  # the Spark it is compiled against: another PySpark version rebuilds it
    if jars is not None and jars.is_dir():
        h.update("\n".join(sorted(p.name for p in jars.glob("spark-*.jar"))).encode())
    return h.hexdigest()


def _java_literal(value: object) -> tuple[str, str]:
    """(Java type, literal) of a contract value: an int, a string or a tuple of strings."""
    if isinstance(value, bool) or not isinstance(value, (int, str, tuple)):
        raise BuildError(f"the JVM contract holds ints, strings and tuples of strings, not {value!r}")
    if isinstance(value, int):
        return "int", str(value)
    if isinstance(value, str):
        return "String", json.dumps(value)
    return "String[]", "{" + ", ".join(json.dumps(v) for v in value) + "}"


def _contract() -> dict[str, object]:
    """``JVM_CONTRACT`` of `streamsdsl.compiler.columns`, read from that file without importing the
    package (pip's isolated build does not have the package's dependencies): a name the file
    imports from another streamsdsl module is read as that module's top-level literal."""
    tree = ast.parse(COLUMNS.read_text(encoding="utf-8"), str(COLUMNS))
    namespace: dict[str, object] = {}
    body: list[ast.stmt] = []
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("streamsdsl."):
            literals = _literals(ROOT.parent.joinpath(*node.module.split(".")).with_suffix(".py"))  # type: ignore[union-attr]
            for alias in node.names:
                if alias.name not in literals:
                    raise BuildError(f"{COLUMNS.name} imports {alias.name} from {node.module}, which is not a "
                                     "literal there: the JVM contract can only use literals")
                namespace[alias.asname or alias.name] = literals[alias.name]
        else:
            body.append(node)
    exec(compile(ast.Module(body=body, type_ignores=[]), str(COLUMNS), "exec"), namespace)  # noqa: S102
    return namespace["JVM_CONTRACT"]  # type: ignore[return-value]


def _literals(path: Path) -> dict[str, object]:
    """The top-level ``NAME = literal`` assignments of a Python file."""
    out: dict[str, object] = {}
    for node in ast.parse(path.read_text(encoding="utf-8"), str(path)).body:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        value = getattr(node, "value", None)
        for target in targets:
            if isinstance(target, ast.Name) and value is not None:
                with contextlib.suppress(ValueError, SyntaxError):
                    out[target.id] = ast.literal_eval(value)
    return out


def contract_java() -> str:
    """``Contract.java``: the constants of ``JVM_CONTRACT`` (`streamsdsl.compiler.columns`, read
    by `_contract` without importing the package)."""
    lines = [
        "package io.streamsdsl.jvm;",
        "",
        "/** Generated by jvm/build.py from streamsdsl/compiler/columns.py (JVM_CONTRACT): do not edit. */",
        "final class Contract {",
        "    private Contract() {",
        "    }",
        "",
    ]
    for name, value in _contract().items():
        java_type, literal = _java_literal(value)
        lines.append(f"    static final {java_type} {name} = {literal};")
    lines.append("}")
    return "\n".join(lines) + "\n"


def write_contract(directory: str | Path) -> Path:
    """Write the generated ``Contract.java`` under ``directory``; returns its path."""
    path = Path(directory) / "io" / "streamsdsl" / "jvm" / "Contract.java"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(contract_java())
    return path


def _tool(name: str) -> str | None:
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / name).exists():
        return str(Path(home) / "bin" / name)
    return shutil.which(name)


def find_jdk() -> tuple[str, str] | None:
    """``(javac, jar)`` of the JDK on ``JAVA_HOME`` or the ``PATH``; None without one (a JRE has
    neither)."""
    javac, jar = _tool("javac"), _tool("jar")
    return (javac, jar) if javac and jar else None


def pyspark_jars() -> Path | None:
    """The ``jars`` directory of a ``pyspark`` to compile against: this interpreter's; else, in
    pip's isolated build environment (which hides the site-packages), the one this interpreter
    sees without pip's overlay; else ``$SPARK_HOME/jars``. None when there is none."""
    spec = importlib.util.find_spec("pyspark")
    if spec is not None and spec.submodule_search_locations:
        return Path(list(spec.submodule_search_locations)[0]) / "jars"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONNOUSERSITE", "PYTHONHOME")}
    try:
        probe = subprocess.run(
            [sys.executable, "-c", "import os, pyspark; print(os.path.dirname(pyspark.__file__))"],
            capture_output=True, text=True, env=env, timeout=120, check=False)
        if probe.returncode == 0 and (Path(probe.stdout.strip()) / "jars").is_dir():
            return Path(probe.stdout.strip()) / "jars"
    except (OSError, subprocess.SubprocessError):
        pass
    home = os.environ.get("SPARK_HOME")
    if home and (Path(home) / "jars").is_dir():
        return Path(home) / "jars"
    return None


@contextlib.contextmanager
def _locked() -> Iterator[None]:
    JAR.parent.mkdir(parents=True, exist_ok=True)
    with open(LOCK, "a+b") as f:
        try:
            import fcntl
        except ImportError:  # not POSIX: no lock
            yield
            return
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def build(*, force: bool = False, quiet: bool = False, say: Callable[[str], None] = print) -> Path:
    """Build the jar if a Java source changed since it was built (or ``force``); return its path.

    Raises `BuildError` (why, and the fix) without a JDK or a ``pyspark`` to compile against.
    ``say`` receives what it does (nothing when up to date and ``quiet``)."""
    files = sorted(SOURCES.rglob("*.java"))
    if not files:
        raise BuildError(f"no Java sources under {SOURCES}")
    with _locked():
        digest = _digest(files)
        if not force and JAR.exists() and STAMP.exists() and STAMP.read_text().strip() == digest:
            if not quiet:
                say(f"jvm/build.py: {JAR.name} is up to date")
            return JAR
        jdk = find_jdk()
        if jdk is None:
            raise BuildError("no JDK found (javac/jar; a JRE is not enough): the JVM operator is not built and "
                             "streamsdsl runs built-in aggregations on the Python operator. Install a JDK 17 "
                             "(apt-get install openjdk-17-jdk-headless) and build again (`make install`, `pip install .` or "
                             "`python jvm/build.py`).")
        jars = pyspark_jars()
        if jars is None:
            raise BuildError("pyspark is not installed (nothing to compile against): install it (or set SPARK_HOME) "
                             "and run `python jvm/build.py` with that interpreter.")
        javac, jar = jdk
        say(f"jvm/build.py: compiling {len(files)} Java sources with {javac} --release 17 against {jars}")
        with tempfile.TemporaryDirectory(prefix="streamsdsl-jvm-") as out, \
                tempfile.TemporaryDirectory(prefix="streamsdsl-jvm-src-") as generated:
            contract = write_contract(generated)
            subprocess.run([javac, "--release", "17", "-nowarn", "-d", out, "-cp", str(jars / "*"), *map(str, files),
                            str(contract)], check=True)
            fd, tmp = tempfile.mkstemp(prefix=JAR.name + ".", suffix=".tmp", dir=JAR.parent)
            os.close(fd)
            try:
                os.unlink(tmp)
                subprocess.run([jar, "--create", "--file", tmp, "-C", out, "."], check=True)
                os.replace(tmp, JAR)
            finally:
                if os.path.exists(tmp):
                    os.unlink(tmp)
        STAMP.write_text(digest + "\n")
        say(f"jvm/build.py: built {JAR}")
        return JAR


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--force", action="store_true", help="rebuild even if the sources did not change")
    parser.add_argument("--require", action="store_true", help="fail (exit 1) when no JDK is found")
    parser.add_argument("--quiet", action="store_true", help="print nothing when the jar is up to date")
    args = parser.parse_args(argv)
    try:
        build(force=args.force, quiet=args.quiet)
    except BuildError as exc:
        print(f"jvm/build.py: {exc}", file=sys.stderr)
        return 1 if args.require else 0
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
