"""Builds the JVM operator's jar into the package while setuptools builds it.

Everything else about the package is in ``pyproject.toml``. The ``build_py`` step below runs
``jvm/build.py``'s `build` (``javac --release 17`` against the installed ``pyspark``; a no-op when
the jar is up to date) before the package's files are copied, so that ``pip wheel .``,
``pip install .`` and ``pip install -e .`` from a fresh clone put ``streamsdsl/jars/
streamsdsl-operator.jar`` in the package (``[tool.setuptools.package-data]`` ships it). Without a
JDK (or a ``pyspark`` to compile against) the package is built without the jar, and says so:
streamsdsl then runs built-in aggregations on the Python operator. ``make install`` runs the same
function afterwards (``jvm/build.py``), which then finds the jar up to date.

``pip`` shows what this prints with ``-v``.
"""

from __future__ import annotations

import importlib.util
import os
import sys

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))


def _build_jar() -> None:
    script = os.path.join(HERE, "jvm", "build.py")
    if not os.path.isfile(script):  # e.g. an sdist made without jvm/: nothing to build
        print("streamsdsl setup.py: no jvm/build.py here: the package is built without the JVM operator's jar",
              file=sys.stderr)
        return
    spec = importlib.util.spec_from_file_location("streamsdsl_jvm_build", script)
    assert spec is not None and spec.loader is not None
    jvm_build = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(jvm_build)
    print(f"streamsdsl setup.py: building the JVM operator's jar ({os.path.relpath(jvm_build.JAR, HERE)}) "
          "with jvm/build.py", file=sys.stderr)
    try:
        jar = jvm_build.build(say=lambda text: print(text, file=sys.stderr))
    except jvm_build.BuildError as exc:
        print(f"streamsdsl setup.py: the package is built WITHOUT the JVM operator's jar: {exc}", file=sys.stderr)
        return
    print(f"streamsdsl setup.py: the package includes {os.path.relpath(jar, HERE)}", file=sys.stderr)


class BuildPyWithJar(build_py):
    """``build_py`` that first builds the JVM operator's jar into ``streamsdsl/jars/``."""

    def run(self) -> None:
        _build_jar()
        # package data is globbed lazily and cached: look again now that the jar may exist
        self.__dict__.pop("data_files", None)
        super().run()


setup(cmdclass={"build_py": BuildPyWithJar})
