"""The launcher Spark's Python processes run on a local master (`streamsdsl.runtime.python_launcher`):
the interpreter of this process, without PySpark's zips on ``PYTHONPATH``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import pyspark
from streamsdsl.maven import CACHE_ENV
from streamsdsl.runtime.python_launcher import LAUNCHER_ENV, launched_python, launcher
from streamsdsl.runtime.session import python_worker_error
from streamsdsl.runtime.warmup import start_python_workers

LIB = os.path.join(os.path.dirname(os.path.realpath(pyspark.__file__)), "python", "lib")
ZIPS = sorted(os.path.join(LIB, n) for n in os.listdir(LIB) if n.endswith(".zip"))


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    monkeypatch.delenv(LAUNCHER_ENV, raising=False)
    return tmp_path / "cache"


def _run(executable: str, code: str, pythonpath: str) -> str:
    return subprocess.run([executable, "-c", code], env={**os.environ, "PYTHONPATH": pythonpath},
                          capture_output=True, text=True, check=True).stdout


def test_the_launcher_runs_this_interpreter_without_the_zips(cache: Path, tmp_path: Path) -> None:
    """Spark's ``PYTHONPATH`` (the zips first, then the user's entries): the launched process is
    this interpreter, its path keeps the other entries in order, and it imports the installed
    PySpark."""
    path = launcher(sys.executable, "local[2]")
    assert path != sys.executable and path.startswith(str(cache / "python-launchers"))
    assert os.access(path, os.X_OK) and launched_python(path) == sys.executable
    mine = [str(tmp_path / "a b"), str(tmp_path / "c*")]
    out = _run(path, "import os, sys, pyspark; print(sys.executable); print(os.environ.get('PYTHONPATH')); "
                     "print(pyspark.__file__)", ":".join([*ZIPS, *mine]))
    executable, pythonpath, imported = out.splitlines()
    assert executable == sys.executable
    assert pythonpath == ":".join(mine)
    assert os.path.realpath(imported) == os.path.realpath(pyspark.__file__)
    assert _run(path, "import os; print(os.environ.get('PYTHONPATH'))", ":".join(ZIPS)) == "None\n"


def test_the_same_script_is_given_again(cache: Path) -> None:
    assert launcher(sys.executable, "local[1]") == launcher(sys.executable, None)


@pytest.mark.parametrize("master", ["yarn", "spark://host:7077", "k8s://x"])
def test_not_on_a_cluster(cache: Path, master: str) -> None:
    assert launcher(sys.executable, master) == sys.executable


def test_not_for_another_interpreter_nor_when_off(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert launcher("/usr/bin/python3", "local[2]") == "/usr/bin/python3"
    monkeypatch.setenv(LAUNCHER_ENV, "off")
    assert launcher(sys.executable, "local[2]") == sys.executable
    assert not (cache / "python-launchers").exists()


def test_a_worker_error_names_the_interpreter_the_launcher_runs(cache: Path) -> None:
    """Workers started through the launcher run this interpreter: a missing module is to be
    installed into it (`python_worker_error`), not fixed with ``PYSPARK_PYTHON``."""
    error = python_worker_error(RuntimeError("ModuleNotFoundError: No module named 'myapp'"),
                                launcher(sys.executable, "local[2]"))
    assert f"the workers run the same interpreter as the driver ({sys.executable})" in str(error)


@pytest.mark.spark
def test_no_python_process_of_the_session_has_the_zips_on_its_path(spark: Any) -> None:
    """Every Python process the test session's JVM started (the UDF daemon and workers, the data
    source planners' daemons, after the warm-up) runs without PySpark's zips on its path."""
    start_python_workers(spark).join(timeout=240)
    jvm = int(spark.sparkContext._jvm.ProcessHandle.current().pid())
    rows = subprocess.run(["ps", "-eo", "pid=,ppid="], capture_output=True, text=True, check=True).stdout
    children: dict[int, list[int]] = {}
    for line in rows.splitlines():
        pid, ppid = map(int, line.split())
        children.setdefault(ppid, []).append(pid)
    found, todo = [], [jvm]
    while todo:
        for child in children.get(todo.pop(), []):
            todo.append(child)
            try:
                environ = Path(f"/proc/{child}/environ").read_bytes().split(b"\0")
            except OSError:
                continue
            path = next((e[len(b"PYTHONPATH="):].decode() for e in environ if e.startswith(b"PYTHONPATH=")), "")
            found.append((child, path))
    assert len(found) >= 6, found
    assert [(pid, path) for pid, path in found if "pyspark.zip" in path or "py4j-" in path] == []


def test_a_local_connect_server_starts_its_python_processes_with_the_launcher(cache: Path) -> None:
    """`streamsdsl.testing.connect_server.server_conf`: on a local master the server's Python
    processes (a ``foreachBatch`` function's among them, which must connect back within Spark's
    fixed 10 s) run this interpreter through the launcher; on another master the interpreter."""
    from streamsdsl.runtime.session import PYTHON_CONF
    from streamsdsl.testing.connect_server import server_conf

    local = server_conf(15002)[PYTHON_CONF]
    assert local != sys.executable and local.startswith(str(cache))
    assert launched_python(local) == sys.executable
    assert server_conf(15002, master="spark://127.0.0.1:7077")[PYTHON_CONF] == sys.executable
    assert server_conf(15002, python="/opt/other/python")[PYTHON_CONF] == "/opt/other/python"
