"""A class-data-sharing archive of the Spark driver's classes: a cold session starts sooner.

A Spark driver loads and verifies its classes from ≈ 280 jars before its first
micro-batch is done. The JDK can map those classes, already parsed and verified, from an
archive written by an earlier run (class data sharing, JEP 350: ``-XX:ArchiveClassesAtExit`` writes it,
``-XX:SharedArchiveFile`` uses it). `build` writes one for the installed PySpark and JDK by
running a small application in a child process (a session as `get_session` builds it, the Kafka
data sources registered, Spark's Python processes warmed up, a streaming query with a re-key, a
count and a session window on the JVM operator, and the same topology on the
`TopologyTestDriver`'s Spark engine); ``streamsdsl class-archive`` runs it and ``make install``
runs that. Measured: ≈ 4 s off a 20 s cold start on two cores (``docs/performance.md``, P7).

The sessions streamsdsl builds or configures (`streamsdsl.runtime.session.get_session`,
``configure_spark``) add `driver_options` to the driver's ``spark.driver.extraJavaOptions``
when an archive for this JDK and these jars exists and the options do not choose class sharing
themselves. The JDK checks the archive against the class path it runs with and, when they differ,
runs without it (``-Xshare:auto``; its warnings are turned off): an archive never changes what a
query computes, only how soon its JVM is ready. The driver uses it, and the executors of a
``local-cluster`` master (their JVMs start on this machine); executors of a cluster start from
their own machine's JDK.

The archive is ``<cache>/class-archives/spark-<key>.jsa`` in the user's cache
(`streamsdsl.maven.cache_dir`), ``<key>`` a digest of the JDK and of Spark's jar directory (its
path, each jar's name, size and time): another PySpark, JDK or virtual environment has its own.
It takes ≈ 200 MB. ``STREAMSDSL_CLASS_ARCHIVE=off`` turns it off.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from streamsdsl.errors import StreamsDslError
from streamsdsl.maven import cache_dir

__all__ = ["ARCHIVE_ENV", "ClassArchiveError", "archive_path", "build", "driver_options", "uses_class_sharing"]

#: Environment variable: ``off`` (or ``0``, ``false``, ``no``) turns the archive off.
ARCHIVE_ENV = "STREAMSDSL_CLASS_ARCHIVE"

#: JVM options by which a caller chooses class sharing (an archive, or none) themselves.
_SHARING_OPTIONS = ("-Xshare", "SharedArchiveFile", "ArchiveClassesAtExit", "AutoCreateSharedArchive")

#: Seconds the child process that writes an archive may take (a cold session, a streaming
#: query, the driver's Spark engine, and the JDK writing ≈ 200 MB).
BUILD_TIMEOUT_S = 600.0


class ClassArchiveError(StreamsDslError):
    """Writing the class archive failed (what the child process printed is in the message)."""


def _disabled() -> bool:
    return os.environ.get(ARCHIVE_ENV, "").strip().lower() in ("off", "0", "false", "no")


def _java() -> str | None:
    """The ``java`` that ``spark-submit`` runs: ``$JAVA_HOME/bin/java``, else the one on the PATH."""
    home = os.environ.get("JAVA_HOME", "").strip()
    java = os.path.join(home, "bin", "java") if home else shutil.which("java")
    return os.path.realpath(java) if java and os.path.isfile(java) else None


def _spark_jars() -> str:
    from pyspark.find_spark_home import _find_spark_home

    return os.path.realpath(os.path.join(_find_spark_home(), "jars"))


def _identity() -> dict[str, Any] | None:
    """What an archive is valid for: the JDK (its ``java`` and module image) and Spark's jars."""
    java = _java()
    jars = _spark_jars()
    if java is None or not os.path.isdir(jars):
        return None
    modules = os.path.join(os.path.dirname(os.path.dirname(java)), "lib", "modules")
    image = os.stat(modules) if os.path.isfile(modules) else os.stat(java)
    return {"java": java, "java_image": [image.st_size, image.st_mtime_ns], "jars": jars, "jar_files": _listing(jars)}


def _listing(jars: str) -> list[list[Any]]:
    """Each jar of a directory: ``[name, size, modification time in ns]``, by name."""
    return sorted([e.name, e.stat().st_size, e.stat().st_mtime_ns] for e in os.scandir(jars) if e.name.endswith(".jar"))


def _directory() -> Path:
    return cache_dir() / "class-archives"


def archive_path() -> Path | None:
    """Where the archive for this JDK and PySpark is (whether or not it was written), or None when
    there is no JDK or no Spark jar directory to key it on."""
    identity = _identity()
    return None if identity is None else _path_of(identity)


def _path_of(identity: dict[str, Any]) -> Path:
    key = hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:20]
    return _directory() / f"spark-{key}.jsa"


def uses_class_sharing(java_options: str) -> bool:
    """Whether a JVM option string chooses class sharing itself (then streamsdsl adds nothing).

    >>> uses_class_sharing("-Xmx2g -Xshare:off"), uses_class_sharing("-Dx=1")
    (True, False)
    """
    return any(option in java_options for option in _SHARING_OPTIONS)


def driver_options(java_options: str = "") -> str:
    """The driver's JVM options ``java_options`` with the archive's added: the same string when the
    archive is off (`ARCHIVE_ENV`), not written, at a path with a space, or when ``java_options``
    choose class sharing themselves (`uses_class_sharing`)."""
    if _disabled() or uses_class_sharing(java_options):
        return java_options
    path = archive_path()
    if path is None or " " in str(path) or not path.is_file():
        return java_options
    added = f"-XX:SharedArchiveFile={path} -Xshare:auto -Xlog:cds=off -Xlog:cds+dynamic=off"
    return f"{java_options} {added}".strip()


def build(*, force: bool = False, timeout: float = BUILD_TIMEOUT_S) -> Path:
    """Write the archive for this JDK and PySpark (nothing to do when it exists, unless ``force``);
    returns its path. Archives of jars that are gone or changed are removed.

    The child process writes to a temporary file, renamed into place once its JVM has exited, so
    a session never maps a partial archive, and two concurrent builds leave one whole archive.

    Raises
    ------
    ClassArchiveError
        If there is no JDK or Spark jar directory, or the child process fails.
    """
    identity = _identity()
    if identity is None:
        raise ClassArchiveError("no class archive: no 'java' (JAVA_HOME or the PATH) or no Spark jar directory "
                                "(pyspark's 'jars') was found.")
    path = _path_of(identity)
    if path.is_file() and not force:
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    _remove_stale(path.parent)
    fd, tmp = tempfile.mkstemp(prefix=path.stem + ".", suffix=".tmp", dir=path.parent)
    os.close(fd)
    os.unlink(tmp)  # the JVM creates it at exit
    env = {**os.environ, ARCHIVE_ENV: "off"}
    started = time.monotonic()
    try:
        proc = subprocess.run([sys.executable, "-m", "streamsdsl.runtime.class_archive", tmp], env=env,
                              capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
        if proc.returncode != 0 or not os.path.isfile(tmp):
            tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-20:])
            raise ClassArchiveError(f"writing the class archive {path} failed (exit code {proc.returncode}); the "
                                    f"child process printed:\n{tail}")
        os.replace(tmp, path)
    except subprocess.TimeoutExpired as e:
        raise ClassArchiveError(f"writing the class archive {path} took more than {timeout:.0f} s; stopped.") from e
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    path.with_suffix(".json").write_text(json.dumps({**identity, "seconds": round(time.monotonic() - started, 1)}, indent=1))
    return path


def _remove_stale(directory: Path) -> None:
    """Remove the archives whose Spark jars are gone or changed (an old or rebuilt virtual
    environment, another PySpark): no JVM could use them again."""
    for meta in directory.glob("spark-*.json"):
        try:
            made_for = json.loads(meta.read_text())
            jars = str(made_for["jars"])
            current = _listing(jars) if os.path.isdir(jars) else None
        except (OSError, ValueError, KeyError):
            continue
        if current != made_for.get("jar_files"):
            for stale in (meta, meta.with_suffix(".jsa")):
                stale.unlink(missing_ok=True)


def _train(out: str) -> None:
    """The child process of `build`: run what a first application runs, with the JVM writing the
    classes it loaded to ``out`` at exit; return once the JVM has exited."""
    import logging

    from pyspark import SparkContext

    from streamsdsl.runtime.session import get_session

    logging.basicConfig(level=logging.WARNING)
    spark = get_session(conf={"spark.driver.extraJavaOptions": f"-XX:ArchiveClassesAtExit={out} -Xlog:cds=off "
                                                              "-Xlog:cds+dynamic=off"})
    with tempfile.TemporaryDirectory(prefix="streamsdsl-class-archive-") as work:
        _run_first_application(spark, work)
    spark.stop()
    gateway = SparkContext._gateway
    proc = getattr(gateway, "proc", None)
    if proc is None:
        raise ClassArchiveError("the JVM was not started by this process: no archive can be written.")
    gateway.shutdown()
    proc.stdin.close()  # PySpark's gateway JVM exits at the end of its standard input, writing the archive
    proc.wait(timeout=BUILD_TIMEOUT_S)


def _run_first_application(spark: Any, work: str) -> None:
    """A streaming query and a driver run of one topology: what a first application loads."""
    from streamsdsl import Consumed, Serdes, SessionWindows, StreamsBuilder
    from streamsdsl.io import register
    from streamsdsl.records import RAW_RECORD_DDL
    from streamsdsl.runtime.driver import TopologyTestDriver
    from streamsdsl.runtime.streaming import start_streaming
    from streamsdsl.runtime.warmup import start_python_workers

    register(spark)
    start_python_workers(spark).join()
    strings = Consumed.with_serdes(Serdes.String(), Serdes.String())
    b = StreamsBuilder()
    orders = b.stream("orders", strings).filter(lambda k, v: v != "skip").map_values(lambda v: v.upper())
    orders.group_by(lambda k, v: v).count().to_stream().to("counts")
    orders.group_by_key().windowed_by(SessionWindows.of_inactivity_gap_with_no_grace(10)).count().to_stream().to("sessions")
    topology = b.build()
    utf8 = Serdes.String()
    rows = [(utf8.serialize(k), utf8.serialize(v), "orders", 0, offset, ts, [])
            for offset, (k, v, ts) in enumerate([("a", "x", 1), ("b", "y", 2), ("a", "skip", 3), ("a", "x", 30)])]
    source = os.path.join(work, "in")
    spark.createDataFrame(rows, RAW_RECORD_DDL).write.parquet(source)
    query, _, _ = start_streaming(topology, lambda n: spark.readStream.schema(RAW_RECORD_DDL).parquet(source), _Rows(),
                                  checkpoint_location=os.path.join(work, "checkpoint"))
    try:
        query.processAllAvailable()
    finally:
        query.stop()
    with TopologyTestDriver(topology, engine="spark") as driver:
        driver.create_input_topic("orders", Serdes.String(), Serdes.String()).pipe_input("a", "x", 1)
        driver.create_output_topic("counts", Serdes.String(), Serdes.Long()).read_records_to_list()


class _Rows:
    """A sink that collects each micro-batch (what a sink's batch write makes Spark run)."""

    def write_batch(self, sink: Any, rows: Any, batch_id: int) -> None:
        rows.collect()


if __name__ == "__main__":
    _train(sys.argv[1])
