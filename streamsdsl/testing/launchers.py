"""Small Java launchers of the test helpers (a MiniYARNCluster, a Kubernetes mock API server):
compiled with the JDK's ``javac`` once per source into the user's cache, and run with ``java``."""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path

from streamsdsl.maven import cache_dir

__all__ = ["compile_launcher", "java_home"]


def compile_launcher(class_name: str, source: str, classpath: Sequence[str], error: type[Exception]) -> Path:
    """The directory of ``class_name`` compiled from ``source`` against ``classpath``:
    ``<cache>/launchers/<class_name>-<hash of the source>/``, compiled the first time.

    Raises
    ------
    error
        When there is no ``javac`` or it fails (its output in the message).
    """
    key = hashlib.sha256(source.encode()).hexdigest()[:16]
    target = cache_dir() / "launchers" / f"{class_name}-{key}"
    if (target / f"{class_name}.class").is_file():
        return target
    javac = shutil.which("javac")
    if javac is None:
        raise error(f"compiling {class_name} needs a JDK's javac, which is not on PATH")
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=".compiling-") as tmp:
        java_file = Path(tmp) / f"{class_name}.java"
        java_file.write_text(source)
        done = subprocess.run([javac, "-cp", os.pathsep.join(classpath), "-d", str(Path(tmp) / "classes"),
                               str(java_file)], capture_output=True, text=True, stdin=subprocess.DEVNULL, check=False)
        if done.returncode != 0:
            raise error(f"javac could not compile {class_name}:\n{done.stderr[-2000:]}")
        with contextlib.suppress(OSError):  # else a concurrent compile finished first
            os.rename(Path(tmp) / "classes", target)
    return target


def java_home(error: type[Exception]) -> str:
    """``JAVA_HOME``, else the JDK of the ``java`` on ``PATH``."""
    explicit = os.environ.get("JAVA_HOME", "").strip()
    if explicit:
        return explicit
    java = shutil.which("java")
    if java is None:
        raise error("Java is needed: neither JAVA_HOME nor java on PATH")
    return str(Path(java).resolve().parent.parent)
