"""Spark's Python daemon of the sessions streamsdsl builds (`streamsdsl.runtime.worker_daemon`):
the UDF workers import the installed PySpark, with its compiled bytecode, not the copy in
``pyspark.zip`` that Spark puts first on their ``PYTHONPATH``."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pytest

import pyspark
from streamsdsl.runtime.session import DAEMON_CONF
from streamsdsl.runtime.worker_daemon import installed_copies

PACKAGE = os.path.dirname(os.path.realpath(pyspark.__file__))
LIB = os.path.join(PACKAGE, "python", "lib")


def _spark_zips() -> list[str]:
    return sorted(os.path.join(LIB, n) for n in os.listdir(LIB) if n.endswith(".zip"))


def test_the_installed_pysparks_own_zips_are_left_off() -> None:
    """The path a worker starts with: both zips of the pip-installed ``pyspark`` first."""
    zips = _spark_zips()
    assert [os.path.basename(z) for z in zips][-1] == "pyspark.zip" and len(zips) == 2
    assert sorted(installed_copies([*zips, *sys.path])) == zips


def test_another_sparks_zips_are_kept(tmp_path: Path) -> None:
    """``SPARK_HOME`` of another installation: its PySpark may be another version."""
    lib = tmp_path / "spark" / "python" / "lib"
    lib.mkdir(parents=True)
    zips = [str(lib / "pyspark.zip"), str(lib / "py4j-0.10.9.9-src.zip")]
    assert installed_copies([*zips, *sys.path]) == []


def test_without_an_installed_pyspark_the_zips_are_kept(tmp_path: Path) -> None:
    """Only the zips hold PySpark (a path without site-packages): nothing is left off."""
    assert installed_copies([*_spark_zips(), str(tmp_path)]) == []


@pytest.mark.spark
def test_the_sessions_workers_import_the_installed_pyspark(spark: Any) -> None:
    """In the test session (built by `get_session`), a worker's ``pyspark`` and ``py4j`` come
    from the installed packages, and its daemon is streamsdsl's."""
    assert spark.conf.get("spark.python.daemon.module") == DAEMON_CONF["spark.python.daemon.module"]

    def origins(_: Any) -> list[str]:
        import py4j
        import pyspark

        return [os.path.realpath(pyspark.__file__), os.path.realpath(py4j.__file__),
                str(any(p.endswith("pyspark.zip") for p in sys.path))]

    found = spark.sparkContext.parallelize([0], 1).map(origins).collect()[0]
    import py4j

    assert found == [os.path.realpath(pyspark.__file__), os.path.realpath(py4j.__file__), "False"]
