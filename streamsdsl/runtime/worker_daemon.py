"""Spark's Python daemon (``spark.python.daemon.module``), importing PySpark's compiled modules.

Spark starts each kind of Python process (the UDF workers, the data source planners) through a
daemon, ``python -m pyspark.daemon``, with ``PYTHONPATH`` starting with ``pyspark.zip`` and
``py4j-*-src.zip`` of ``SPARK_HOME``. A zip holds PySpark's sources only, and Python never writes
compiled bytecode into a zip: each daemon and worker compiles every PySpark module it imports
again, ≈ 0.4 s of CPU per process, in the six daemons and four workers of a first micro-batch
(``docs/performance.md``, P7).

When those zips are the installed PySpark's own copies (``SPARK_HOME`` is the ``pyspark``
package that pip installed, as for every session streamsdsl builds), this daemon leaves them
off ``sys.path`` and imports PySpark and py4j from the installed packages, with their compiled
bytecode; then it runs ``pyspark.daemon`` as Spark would. Zips of another Spark installation
are kept. The workers it forks inherit the path. `streamsdsl.runtime.session` sets it for the
sessions streamsdsl builds or configures, unless the caller chose a daemon module.

This module imports nothing of PySpark or streamsdsl's before the path is set (``streamsdsl``
and ``streamsdsl.runtime`` import no PySpark).
"""

from __future__ import annotations

import importlib.machinery
import os
import re
import sys

__all__ = ["installed_copies"]

#: The zips ``PythonUtils.sparkPythonPath`` puts first on a worker's ``PYTHONPATH``, by package.
_ZIPS = {"pyspark": re.compile(r"[/\\]python[/\\]lib[/\\]pyspark\.zip$"),
         "py4j": re.compile(r"[/\\]python[/\\]lib[/\\]py4j-[^/\\]*-src\.zip$")}


def installed_copies(path: list[str]) -> list[str]:
    """The entries of ``path`` that are zips of the installed ``pyspark`` package's own
    ``python/lib`` (PySpark and the py4j it pins), when that package and py4j are importable
    from the rest of ``path``.

    >>> installed_copies(["/opt/spark/python/lib/pyspark.zip", "/nowhere"])
    []
    """
    zips = {name: [p for p in path if pattern.search(p)] for name, pattern in _ZIPS.items()}
    if not zips["pyspark"]:
        return []
    rest = [p for p in path if not any(p in found for found in zips.values())]
    spark = importlib.machinery.PathFinder.find_spec("pyspark", rest)
    if spark is None or not spark.submodule_search_locations:
        return []
    package = os.path.realpath(list(spark.submodule_search_locations)[0])
    own = [p for found in zips.values() for p in found if os.path.realpath(p).startswith(package + os.sep)]
    if zips["py4j"] and importlib.machinery.PathFinder.find_spec("py4j", rest) is None:
        own = [p for p in own if p not in zips["py4j"]]
    return own if set(zips["pyspark"]) <= set(own) else []


def main() -> None:
    own = installed_copies(sys.path)
    sys.path[:] = [p for p in sys.path if p not in own]
    import pyspark.daemon

    pyspark.daemon.manager()


if __name__ == "__main__":
    main()
