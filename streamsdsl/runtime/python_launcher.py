"""The interpreter Spark's Python processes run on a local master, without PySpark's zips.

Spark starts every Python process of a session (the UDF workers, the data source planners, the
streaming source's runner) with ``PYTHONPATH`` beginning with ``pyspark.zip`` and
``py4j-*-src.zip`` of ``SPARK_HOME``. A zip holds PySpark's sources only, and Python writes no
compiled bytecode into a zip, so each of these processes compiles every PySpark module it
imports again: ≈ 0.4 s of CPU apiece, a dozen processes in a first micro-batch
(``docs/performance.md``, P7).

When ``SPARK_HOME`` is the installed ``pyspark`` package (pip's PySpark: its zips hold the same
PySpark) and the workers run this very interpreter, `launcher` gives Spark a small ``sh`` script
instead of the interpreter: it takes those two zips off ``PYTHONPATH`` (every other entry stays,
in order) and ``exec``\\ s the interpreter, which then imports the installed PySpark and py4j
with their bytecode. Only on a ``local`` master (the script is a file of this machine); the
interpreter, its packages and what runs are the same. The scripts are in the user's cache
(``<cache>/python-launchers/<key>/python``); ``STREAMSDSL_PYTHON_LAUNCHER=off`` turns them off.
"""

from __future__ import annotations

import hashlib
import os
import shlex
import sys
import tempfile
from pathlib import Path

from streamsdsl.maven import cache_dir

__all__ = ["LAUNCHER_ENV", "launcher", "launched_python"]

#: Environment variable: ``off`` (or ``0``, ``false``, ``no``) turns the launcher off.
LAUNCHER_ENV = "STREAMSDSL_PYTHON_LAUNCHER"

_MARK = "# streamsdsl python launcher: runs "

_SCRIPT = """#!/bin/sh
{mark}{python_text}
# Spark's Python processes, without {lib}/pyspark.zip and py4j-*-src.zip on PYTHONPATH:
# the installed PySpark and py4j are imported instead, with their compiled bytecode
# (written by streamsdsl.runtime.python_launcher).
set -f
kept=
IFS=:
for entry in ${{PYTHONPATH-}}; do
  case $entry in
    {lib_q}/pyspark.zip|{lib_q}/py4j-*-src.zip) ;;
    *) kept=${{kept:+$kept:}}$entry ;;
  esac
done
unset IFS
if [ -n "$kept" ]; then PYTHONPATH=$kept; export PYTHONPATH; else unset PYTHONPATH; fi
exec {python_q} "$@"
"""


def _pyspark_package() -> str | None:
    """The installed ``pyspark`` package's directory when it is ``SPARK_HOME`` (pip's PySpark)
    and holds the two zips; else None."""
    try:
        import pyspark
        from pyspark.find_spark_home import _find_spark_home
    except ImportError:  # pragma: no cover - pyspark is a dependency
        return None
    package = os.path.realpath(os.path.dirname(pyspark.__file__))
    if os.path.realpath(_find_spark_home()) != package:
        return None
    lib = os.path.join(package, "python", "lib")
    names = os.listdir(lib) if os.path.isdir(lib) else []
    if "pyspark.zip" not in names or not any(n.startswith("py4j-") and n.endswith("-src.zip") for n in names):
        return None
    return package


def launcher(python: str, master: str | None) -> str:
    """The executable Spark should start its Python processes with: the launcher script of
    ``python`` when ``python`` is this interpreter, the master is ``local`` (or not set), and
    ``SPARK_HOME`` is pip's PySpark; else ``python`` unchanged (also when the launcher is off,
    `LAUNCHER_ENV`, or cannot be written).

    >>> launcher("/opt/other/python", "local[2]")
    '/opt/other/python'
    >>> launcher(sys.executable, "yarn") == sys.executable
    True
    """
    if os.environ.get(LAUNCHER_ENV, "").strip().lower() in ("off", "0", "false", "no"):
        return python
    if master is not None and not str(master).startswith("local"):
        return python
    if not os.path.isfile(python) or os.path.realpath(python) != os.path.realpath(sys.executable):
        return python
    package = _pyspark_package()
    if package is None:
        return python
    lib = os.path.join(package, "python", "lib")
    text = _SCRIPT.format(mark=_MARK, python_text=python, lib=lib, lib_q=shlex.quote(lib), python_q=shlex.quote(python))
    key = hashlib.sha256(text.encode()).hexdigest()[:16]
    path = cache_dir() / "python-launchers" / key / "python"
    try:
        if not path.is_file() or path.read_text() != text:
            _write(path, text)
    except OSError:
        return python
    return str(path)


def _write(path: Path, text: str) -> None:
    """Write an executable file atomically (a concurrent session never runs a partial one)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".python.")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.chmod(tmp, 0o755)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def launched_python(executable: str) -> str:
    """The interpreter ``executable`` runs: the one a launcher script names, else ``executable``.

    >>> launched_python("/usr/bin/python3")
    '/usr/bin/python3'
    """
    try:
        with open(executable, "rb") as f:
            head = f.read(512).decode("utf-8", "replace").splitlines()
    except OSError:
        return executable
    if len(head) > 1 and head[0] == "#!/bin/sh" and head[1].startswith(_MARK):
        return head[1][len(_MARK):]
    return executable
