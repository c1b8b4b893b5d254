"""The JVM operator's jar: where it is, how a SparkSession loads it, and the operator choice.

streamsdsl runs its built-in aggregations (``count()``, ``reduce(operator.add | max | min)`` on
numbers, `streamsdsl.dsl.aggregations.Aggregations`) on a JVM ``StatefulProcessor`` shipped as a
jar inside the package (built from ``jvm/src`` with ``javac`` at install: a JDK 17 is needed).
Sessions streamsdsl creates load it; a session you build loads it with
`streamsdsl.runtime.session.configure_spark`::

    from pyspark.sql import SparkSession
    import streamsdsl

    spark = streamsdsl.configure_spark(SparkSession.builder.master("local[2]")).getOrCreate()

or, with ``spark-submit``, ``--jars "$(streamsdsl jar-path)"``.

The configuration key ``streamsdsl.operator`` (`Operator`) chooses: ``auto`` (the default: the
JVM operator where it applies and is loaded, else the Python operator, saying so in the log and
in ``explain()``), ``jvm`` (fail with `JvmOperatorError` if it cannot be loaded) or ``python``;
left out, it is the ``STREAMSDSL_OPERATOR`` environment variable, else ``auto``.

Nothing here imports pyspark.
"""

from __future__ import annotations

import enum
import os

from streamsdsl.errors import StreamsDslError

__all__ = ["CheckpointOperatorError", "JAR_NAME", "OPERATOR_ENV", "OPERATOR_KEY", "JvmOperatorError", "Operator",
           "default_operator", "ensure_built", "jar_path"]

#: The configuration key choosing the operator of built-in aggregations.
OPERATOR_KEY = "streamsdsl.operator"
#: The environment variable giving ``streamsdsl.operator`` its default (else ``auto``).
OPERATOR_ENV = "STREAMSDSL_OPERATOR"
#: The jar's file name inside the package (``streamsdsl/jars/``).
JAR_NAME = "streamsdsl-operator.jar"


class Operator(enum.StrEnum):
    """``streamsdsl.operator``: which operator runs the built-in aggregations."""

    AUTO = "auto"
    JVM = "jvm"
    PYTHON = "python"


class JvmOperatorError(StreamsDslError, RuntimeError):
    """``streamsdsl.operator`` is ``jvm`` but the JVM operator cannot run (the message says why)."""


class CheckpointOperatorError(JvmOperatorError):
    """A checkpoint's aggregations were written by the other operator (JVM vs Python): Spark
    cannot continue one operator's state on the other (the message says how to proceed)."""


def default_operator() -> Operator:
    """``streamsdsl.operator`` when the configuration leaves it out: the ``STREAMSDSL_OPERATOR``
    environment variable, else ``auto``.

    Examples
    --------
    >>> import os
    >>> os.environ.get(OPERATOR_ENV) is not None or default_operator() is Operator.AUTO
    True
    """
    raw = os.environ.get(OPERATOR_ENV, "").strip().lower()
    try:
        return Operator(raw or Operator.AUTO.value)
    except ValueError:
        raise JvmOperatorError(
            f"the environment variable {OPERATOR_ENV} must be auto, jvm or python (got {raw!r})."
        ) from None


def jar_path(*, must_exist: bool = True) -> str:
    """The path of the JVM operator's jar inside the installed package.

    Raises `JvmOperatorError` (with how to build it) when ``must_exist`` and it is not there.

    Examples
    --------
    >>> jar_path(must_exist=False).endswith("streamsdsl-operator.jar")
    True
    """
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "jars", JAR_NAME)
    if must_exist and not os.path.isfile(path):
        raise JvmOperatorError(
            f"the JVM operator's jar is not built ({path} is missing): it is compiled at install with javac "
            "from a JDK 17 (a JRE is not enough). Install one (e.g. apt-get install openjdk-17-jdk-headless) "
            "and run `make install` (or `python jvm/build.py` in a source checkout); without it streamsdsl runs "
            "built-in aggregations on the Python operator."
        )
    return path


def ensure_built() -> None:
    """In a source checkout (an editable install: ``jvm/build.py`` next to the package), build
    the jar if a Java source changed since it was built (``make install`` does the same); a
    wheel ships the jar and has nothing to build. Never raises: without a JDK the build says so
    and the Python operator runs."""
    import subprocess
    import sys

    script = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "jvm", "build.py")
    if os.path.isfile(script):
        try:
            subprocess.run([sys.executable, script, "--quiet"], check=False, timeout=300)
        except (OSError, subprocess.SubprocessError):
            pass
