"""The SparkSession streamsdsl runs on.

streamsdsl never reconfigures a session it did not create. `get_session` returns the active
session, or — only when there is none — builds a local one with the settings streamsdsl needs
(the `TopologyTestDriver` and `KafkaStreams` call it when no ``spark=`` is given).
`require_state_store` checks, before a stateful topology runs, that a session has the state
store ``transformWithState`` needs, and says how to set it if not.
"""

from __future__ import annotations

import logging
import os
import re
import sys
import threading
from typing import TYPE_CHECKING, Any

from streamsdsl.errors import StreamsDslError
from streamsdsl.jvm import ensure_built, jar_path
from streamsdsl.runtime.class_archive import driver_options
from streamsdsl.runtime.connect import configure_remote
from streamsdsl.runtime.operations import METRICS_DEFAULTS
from streamsdsl.runtime.python_daemon import settings as daemon_settings
from streamsdsl.runtime.python_launcher import launched_python, launcher
from streamsdsl.runtime.shipping import is_cluster_master, ship_settings

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["CLUSTER_DEFAULTS", "CODEGEN_DEFAULTS", "CONFIGURED_DEFAULTS", "JAR_DEFAULTS", "LOCAL_DEFAULTS", "PYTHON_CONF", "PYTHON_ENV", "QUIET_CONF", "REQUIRED_CONF", "STATE_DEFAULTS", "PythonWorkerError",
           "SparkSessionError", "configure_spark", "get_session", "log4j2_config_path", "python_worker_error", "quiet_py4j",
           "require_state_store", "submit_options", "submitted_conf", "worker_python"]

STATE_STORE_PROVIDER = "spark.sql.streaming.stateStore.providerClass"
ROCKSDB_PROVIDER = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"

#: Settings streamsdsl needs: RocksDB state (required by transformWithState), Arrow transfer
#: for the vectorized Python steps, UTC session time.
REQUIRED_CONF: dict[str, str] = {
    STATE_STORE_PROVIDER: ROCKSDB_PROVIDER,
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.sql.session.timeZone": "UTC",
}

#: Defaults of the state store for the sessions streamsdsl builds or configures, where the caller
#: leaves the key out: RocksDB's changelog checkpointing, which commits a micro-batch's changes
#: instead of a snapshot of the store (snapshots are made in the background). Spark recommends it
#: for stateful queries and it can be turned on for an existing checkpoint; measured here, the
#: streaming tests of three operator families ran 10-15% faster.
STATE_DEFAULTS: dict[str, str] = {
    "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true",
}

#: Defaults of Spark's generated code for the sessions streamsdsl builds or configures, where the
#: caller leaves the key out: room for 2,000 generated classes in the JVM's cache of compiled code
#: (Spark's default is 100, and all jobs of the JVM share it). Spark generates and compiles a
#: class per whole-stage stage and per projection, predicate and ordering each time a plan runs
#: (a micro-batch, a test driver's read), and finds it in that cache when the code is the same.
#: A topology of four stream–stream joins plans 157 classes, a session-window topology on the
#: Python operator 58: with 100 entries every run compiled them again in Janino, about a
#: third of the driver JVM's CPU time on a test driver's reads (docs/performance.md,
#: "The cache of generated code"). A static setting: read when the session starts.
CODEGEN_DEFAULTS: dict[str, str] = {
    "spark.sql.codegen.cache.maxEntries": "2000",
}

#: Defaults that need the JVM operator's jar on the class path, for the sessions streamsdsl builds
#: or configures with it (not Spark Connect, whose server has its own jars), where the caller
#: leaves the key out: the checkpoint's files on the local file system written with Java's file
#: API (``io.streamsdsl.jvm.LocalCheckpointFileManager``; other file systems as Spark writes them).
#: Hadoop's local file system, without its native library (PySpark ships none), runs ``chmod`` in a
#: child process for each new file and for its ``.crc``: 30 ms a checkpoint file against 0.75 ms
#: measured in one session on the shared 2-core machine, six files a micro-batch in P9's
#: enrichment (docs/performance.md, "The state store's per-batch cost").
JAR_DEFAULTS: dict[str, str] = {
    "spark.sql.streaming.checkpointFileManagerClass": "io.streamsdsl.jvm.LocalCheckpointFileManager",
}

#: The defaults `configure_spark` gives a builder where it leaves the key out, and `submit_options`
#: passes with ``--conf``.
CONFIGURED_DEFAULTS: dict[str, str] = {**STATE_DEFAULTS, **CODEGEN_DEFAULTS, **JAR_DEFAULTS, **METRICS_DEFAULTS}

#: Defaults of a local session streamsdsl builds; overridable by the caller's ``conf``.
LOCAL_DEFAULTS: dict[str, str] = {
    **STATE_DEFAULTS,
    **CODEGEN_DEFAULTS,
    # Spark's Prometheus servlet on the driver's UI, Spark's per-query source, the application's
    # name as the metrics' namespace (docs/operations.md)
    **METRICS_DEFAULTS,
    "spark.sql.shuffle.partitions": "2",
    "spark.default.parallelism": "2",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.streaming.numRecentProgressUpdates": "20",
    "spark.driver.memory": "2g",
    "spark.sql.adaptive.enabled": "false",
    # PySpark records the Python call site of every DataFrame/Column call (four JVM round trips
    # each: a quarter of the JVM calls of planning a topology); streamsdsl's plans are built by
    # the compiler, not by user code, so the call sites would only name streamsdsl's internals.
    "spark.python.sql.dataFrameDebugging.enabled": "false",
    # No byte cap on the Arrow batches sent to Python workers (the record cap,
    # spark.sql.execution.arrow.maxRecordsPerBatch, stays): with a cap, Spark's streaming Arrow
    # writer (transformWithState's input) measures the open batch after every row, and measuring
    # a list column walks the whole batch — half the JVM's CPU time of a session aggregation on
    # the Python operator went there (docs/performance.md). Int.MaxValue is Spark's "no cap".
    "spark.sql.execution.arrow.maxBytesPerBatch": "2147483647",
}

#: Defaults of a session streamsdsl builds for a cluster's master (``spark://``, ``yarn``,
#: ``k8s://``): `LOCAL_DEFAULTS` without the sizes of a local session (partitions, driver
#: memory), which are the cluster's and the application's to choose (docs/deploy.md#sizing).
CLUSTER_DEFAULTS: dict[str, str] = {
    k: v for k, v in LOCAL_DEFAULTS.items()
    if k not in ("spark.sql.shuffle.partitions", "spark.default.parallelism", "spark.driver.memory")
}

#: The interpreter Spark starts its Python workers with: the configuration key and the
#: environment variable (the key wins, as with ``spark-submit``).
PYTHON_CONF = "spark.pyspark.python"
PYTHON_ENV = "PYSPARK_PYTHON"

#: Settings that keep a session quiet, applied when the caller has not set them: no console
#: progress bars, and streamsdsl's log4j2 configuration (`log4j2_config_path`) for the driver
#: JVM (and, with a ``local*`` master, its executors).
QUIET_CONF: dict[str, str] = {
    "spark.ui.showConsoleProgress": "false",
}

_lock = threading.Lock()


class SparkSessionError(StreamsDslError, RuntimeError):
    """The SparkSession lacks a setting streamsdsl needs (the message says which and how)."""


class PythonWorkerError(SparkSessionError):
    """Spark's Python workers run an interpreter that cannot import what the topology needs
    (streamsdsl, or a package it uses): the message names the module, the workers' interpreter
    and the fix (``PYSPARK_PYTHON`` / ``spark.pyspark.python``, or `configure_spark`)."""


def worker_python(conf: dict[str, Any] | None = None) -> str:
    """The interpreter Spark's Python workers will run, decided before a session is built, and
    made effective: ``spark.pyspark.python`` in ``conf`` if set (it wins, as with ``spark-submit``),
    else the environment's ``PYSPARK_PYTHON``, else this process's interpreter
    (``sys.executable``); ``PYSPARK_PYTHON`` is set to it.

    PySpark reads only the environment variable when Python starts the JVM, so a
    ``spark.pyspark.python`` set on a builder is otherwise ignored, and without either Spark
    starts the workers with the ``python3`` on the ``PATH``: an interpreter that usually lacks
    streamsdsl (``ModuleNotFoundError: No module named 'streamsdsl'`` in every worker).

    Examples
    --------
    >>> import os, sys
    >>> saved = os.environ.pop("PYSPARK_PYTHON", None)
    >>> worker_python() == sys.executable == os.environ["PYSPARK_PYTHON"]
    True
    >>> worker_python({"spark.pyspark.python": "/opt/py/bin/python"})
    '/opt/py/bin/python'
    >>> _ = os.environ.pop("PYSPARK_PYTHON"); os.environ.update({} if saved is None else {"PYSPARK_PYTHON": saved})
    """
    configured = str((conf or {}).get(PYTHON_CONF) or "").strip()
    python = configured or os.environ.get(PYTHON_ENV, "").strip() or sys.executable
    os.environ[PYTHON_ENV] = python
    return python


def _driver_python(master: str | None) -> None:
    """``PYSPARK_DRIVER_PYTHON``, the interpreter of the Python processes Spark starts on the
    driver (its lookup of installed Python data sources): this interpreter unless set to another,
    through the `launcher` on a local master."""
    driver = os.environ.get("PYSPARK_DRIVER_PYTHON", "").strip() or sys.executable
    if os.path.isfile(driver) and os.path.realpath(driver) == os.path.realpath(sys.executable):
        os.environ["PYSPARK_DRIVER_PYTHON"] = launcher(driver, master)


#: ``No module named 'x'`` / ``cannot import name 'y' from 'x'`` in a Python worker's traceback.
_WORKER_IMPORT = re.compile(
    r"\b(?P<kind>ModuleNotFoundError|ImportError): (?P<text>(?:No module named|cannot import name [^\n]*? from) "
    r"'(?P<module>[\w.]+)')"
)


def python_worker_error(error: BaseException, python: str | None = None) -> PythonWorkerError | None:
    """The `PythonWorkerError` for a Spark error whose Python worker failed to import a module
    (outside any user function: a user function's own failure is a ``UserFunctionError``);
    ``None`` for any other error. ``python`` is the workers' interpreter, if known
    (``SparkContext.pythonExec``).

    Examples
    --------
    >>> e = python_worker_error(RuntimeError("PythonException: ... ModuleNotFoundError: No module named 'streamsdsl'"),
    ...                         "/usr/bin/python3")
    >>> print(str(e).replace(sys.executable, "<this python>"))  # doctest: +NORMALIZE_WHITESPACE
    Spark's Python workers cannot import 'streamsdsl' (ModuleNotFoundError: No module named 'streamsdsl'): they run
    /usr/bin/python3, not the interpreter running streamsdsl (<this python>). On one machine, set PYSPARK_PYTHON (or
    the Spark setting spark.pyspark.python) to <this python> before the SparkSession is built, or build it with
    streamsdsl.configure_spark(builder), which does that. On a cluster whose Python lacks streamsdsl, ship it:
    streamsdsl does when it builds the session for a cluster's master (spark.master spark://..., yarn, k8s://...) and
    in streamsdsl.configure_spark(builder, ship=True); for a session of your own, spark-submit $(streamsdsl ship)
    app.py (docs/deploy.md).
    >>> python_worker_error(RuntimeError("[DIVIDE_BY_ZERO] ...")) is None
    True
    """
    if python is None:
        python = _workers_python()
    texts: list[str] = []
    seen: set[int] = set()
    todo: list[BaseException] = [error]
    while todo and len(seen) < 16:
        e = todo.pop()
        if id(e) in seen:
            continue
        seen.add(id(e))
        texts.append(str(e))
        stack = getattr(e, "_stackTrace", None)  # pyspark's CapturedException: the JVM's exception text
        if isinstance(stack, str):
            texts.append(stack)
        todo.extend(c for c in (getattr(e, "_cause", None), e.__cause__) if isinstance(c, BaseException))
    for text in texts:
        match = _WORKER_IMPORT.search(text)
        if match is None:
            continue
        module = match.group("module").split(".")[0]
        python = None if python is None else launched_python(python)
        runs = f"they run {python}" if python else "they run another interpreter"
        # not realpath: two virtual environments of one base interpreter are different interpreters
        same = python is not None and os.path.abspath(python) == os.path.abspath(sys.executable)
        if same:
            advice = (f"the workers run the same interpreter as the driver ({python}), so install {module!r} into it, "
                      "or check PYTHONPATH and spark.executorEnv.PYTHONPATH.")
        else:
            advice = (f"{runs}, not the interpreter running streamsdsl ({sys.executable}). On one machine, set "
                      f"{PYTHON_ENV} (or the Spark setting {PYTHON_CONF}) to {sys.executable} before the SparkSession "
                      "is built, or build it with streamsdsl.configure_spark(builder), which does that. On a cluster "
                      "whose Python lacks streamsdsl, ship it: streamsdsl does when it builds the session for a "
                      "cluster's master (spark.master spark://..., yarn, k8s://...) and in "
                      "streamsdsl.configure_spark(builder, ship=True); for a session of your own, "
                      "spark-submit $(streamsdsl ship) app.py (docs/deploy.md).")
        return PythonWorkerError(
            f"Spark's Python workers cannot import {module!r} ({match.group('kind')}: {match.group('text')}): "
            f"{advice}"
        )
    return None


def get_session(master: str | None = None, conf: dict[str, Any] | None = None, *,
                ship: bool | None = None) -> SparkSession:
    """The active SparkSession, or a new one if there is none.

    Its master is ``master``, else ``spark.master`` in ``conf``, else the master ``spark-submit``
    gave (when this Python runs under it), else ``STREAMSDSL_SPARK_MASTER``, else ``local[2]``.
    A new session gets `LOCAL_DEFAULTS` (on a cluster's master `CLUSTER_DEFAULTS`), then
    ``conf``, then `REQUIRED_CONF`; under ``spark-submit`` the settings it gave win over the
    defaults. It loads the JVM operator's jar (``spark.jars``, `streamsdsl.jvm.jar_path`) when it
    is built, and Spark's Kafka connector when it is in the user's cache (``streamsdsl
    kafka-connector``). On a cluster's master (``spark://``, ``yarn``, ``k8s://``: whose Python may
    lack streamsdsl) it ships streamsdsl's Python code and dependencies to every Python process
    Spark starts (`streamsdsl.runtime.shipping`); ``ship`` true or false decides it for any master.
    The Python workers run the interpreter of this process unless ``PYSPARK_PYTHON`` or
    ``spark.pyspark.python`` (in ``conf``) names another (`worker_python`), so user functions see
    the same packages as the caller. The session is quiet: no console progress, streamsdsl's
    log4j2 configuration (`log4j2_config_path`), Spark's log level ``STREAMSDSL_SPARK_LOG_LEVEL``
    (default ``ERROR``), and the ``py4j`` logger at ``WARNING``. It starts sooner: its driver maps
    the class archive ``streamsdsl class-archive`` wrote, if any (`streamsdsl.runtime.class_archive`),
    and on a local master its Python processes import PySpark's compiled modules
    (`streamsdsl.runtime.python_launcher.launcher`). An active session is returned unchanged.
    """
    from pyspark.sql import SparkSession

    with _lock:
        active = SparkSession.getActiveSession()
        if active is not None:
            return active
        submitted = submitted_conf()
        master = (master or str((conf or {}).get("spark.master") or "") or submitted.get("spark.master")
                  or os.environ.get("STREAMSDSL_SPARK_MASTER", "local[2]"))
        defaults = CLUSTER_DEFAULTS if is_cluster_master(master) else LOCAL_DEFAULTS
        settings = {**{k: v for k, v in defaults.items() if k not in submitted}, **(conf or {}), **REQUIRED_CONF}
        settings["spark.master"] = master
        python = worker_python({**submitted, **settings})
        os.environ[PYTHON_ENV] = launcher(python, master)
        settings.update({k: v for k, v in daemon_settings(python, os.environ[PYTHON_ENV]).items()
                         if k not in settings and k not in submitted})
        _driver_python(master)
        builder = SparkSession.builder
        if "spark.app.name" not in settings and "spark.app.name" not in submitted:
            builder = builder.appName("streamsdsl")
        settings.update(_quiet_settings({**submitted, **settings}, master))
        settings.update(_class_sharing({**submitted, **settings}, master))
        jars = _with_streamsdsl_jars(str(settings.get("spark.jars", submitted.get("spark.jars", ""))))
        if jars:
            settings["spark.jars"] = jars
        if jar_path(must_exist=False) in jars.split(","):
            settings.update({k: v for k, v in JAR_DEFAULTS.items() if k not in settings and k not in submitted})
        settings.update(ship_settings({**submitted, **settings}, master, ship))
        for k, v in settings.items():
            builder = builder.config(k, str(v))
        quiet_py4j()
        spark = builder.getOrCreate()
        spark.sparkContext.setLogLevel(os.environ.get("STREAMSDSL_SPARK_LOG_LEVEL", "ERROR"))
        return spark


def submit_options() -> list[str]:
    """The ``spark-submit`` options that give a session of the user's own what streamsdsl needs
    (``streamsdsl ship`` prints them): ``--jars`` (the JVM operator's jar, Spark's Kafka
    connector when resolved), ``--py-files`` and ``--archives`` (streamsdsl's Python code and
    dependencies: `streamsdsl.runtime.shipping.Bundle.submit_options`) and ``--conf`` for
    `REQUIRED_CONF`, `STATE_DEFAULTS`, `CODEGEN_DEFAULTS` and `METRICS_DEFAULTS` (the Prometheus
    endpoint).

    >>> options = submit_options()
    >>> options[0], options[1].split(",")[0].endswith("streamsdsl-operator.jar"), options[2:4] == ["--py-files", options[3]]
    ('--jars', True, True)
    >>> "spark.sql.session.timeZone=UTC" in options
    True
    """
    from streamsdsl.runtime.shipping import build

    out = ["--jars", _with_streamsdsl_jars("", operator_must_exist=True), *build().submit_options()]
    for key, value in {**REQUIRED_CONF, **CONFIGURED_DEFAULTS}.items():
        out += ["--conf", f"{key}={value}"]
    return out


def submitted_conf() -> dict[str, str]:
    """The settings ``spark-submit`` gave the JVM this Python was started by (``--master``,
    ``--conf``, ``--py-files`` ...), or nothing when this Python starts its own JVM."""
    if not os.environ.get("PYSPARK_GATEWAY_PORT"):
        return {}
    from pyspark import SparkConf, SparkContext

    SparkContext._ensure_initialized()  # connects to spark-submit's JVM, whose system properties hold them
    return {str(k): str(v) for k, v in SparkConf(loadDefaults=True).getAll()}


def log4j2_config_path() -> str:
    """The log4j2 configuration the sessions streamsdsl builds use (``streamsdsl/log4j2.properties``):
    Spark's default with the known-harmless WARNs left out, and without Spark's stack traces of the
    errors streamsdsl reports itself (a failing record).

    Examples
    --------
    >>> log4j2_config_path().endswith("log4j2.properties")
    True
    """
    return os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "log4j2.properties")


def _workers_python() -> str | None:
    """The interpreter the running SparkContext starts its Python workers with, if one runs."""
    try:
        from pyspark import SparkContext
    except ImportError:  # pragma: no cover - pyspark is a dependency
        return None
    context = SparkContext._active_spark_context
    return None if context is None else str(context.pythonExec)


_LOG4J_OPTIONS = ("log4j2.configurationFile", "log4j.configurationFile", "log4j2.configuration")


def _quiet_settings(settings: dict[str, Any], master: str | None) -> dict[str, str]:
    """`QUIET_CONF` and the ``-Dlog4j2.configurationFile`` option, for the keys ``settings``
    leaves out; a JVM option string that already names a log4j configuration is kept as is.
    Executors get the option only with a ``local*`` master (the file is on this machine)."""
    out = {k: v for k, v in QUIET_CONF.items() if k not in settings}
    option = f"-Dlog4j2.configurationFile=file:{log4j2_config_path()}"
    roles = ["driver"] + (["executor"] if str(master or "").startswith("local") else [])
    for role in roles:
        key = f"spark.{role}.extraJavaOptions"
        current = str(settings.get(key, "") or "").strip()
        if not any(name in current for name in _LOG4J_OPTIONS):
            out[key] = f"{current} {option}".strip()
    return out


def _class_sharing(settings: dict[str, Any], master: str | None) -> dict[str, str]:
    """The driver's JVM options with the class archive of this JDK and PySpark, when one was
    written (`streamsdsl.runtime.class_archive.driver_options`), and the executors' too on a
    ``local-cluster`` master (their JVMs start on this machine, with the same class path; the
    archive's classes include the executor's, which a local driver runs); only the keys that
    change."""
    roles = ["driver"] + (["executor"] if str(master or "").startswith("local-cluster") else [])
    out = {}
    for role in roles:
        key = f"spark.{role}.extraJavaOptions"
        current = str(settings.get(key, "") or "")
        options = driver_options(current)
        if options != current:
            out[key] = options
    return out


def quiet_py4j() -> None:
    """Keep the ``py4j`` logger at ``WARNING`` unless the application set its level (under
    ``logging.basicConfig(level=logging.INFO)`` py4j logs a line per JVM call), and drop py4j's
    ``ERROR`` with traceback for an error streamsdsl reports itself (a record failing inside a
    micro-batch's callback: `KafkaStreams` raises the ``RecordError``)."""
    py4j = logging.getLogger("py4j")
    if py4j.level == logging.NOTSET:
        py4j.setLevel(logging.WARNING)
    for name in ("py4j.clientserver", "py4j.java_gateway"):
        logger = logging.getLogger(name)
        if not any(isinstance(f, _ReportedByStreamsDsl) for f in logger.filters):
            logger.addFilter(_ReportedByStreamsDsl())


#: What the text of an error streamsdsl reports itself carries (a record failure's payload, a
#: worker's missing module: `PythonWorkerError`); ``streamsdsl/log4j2.properties`` matches the same.
_REPORTED = re.compile(r"\[streamsdsl-error\]|ModuleNotFoundError: No module named ")


class _ReportedByStreamsDsl(logging.Filter):
    """Drops a log record whose exception streamsdsl reports itself (see `quiet_py4j`)."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        return exc is None or _REPORTED.search(str(exc)) is None


def _with_streamsdsl_jars(jars: str, *, operator_must_exist: bool = False) -> str:
    """``spark.jars`` plus the JVM operator's jar when it is built (else unchanged: the Python
    operator then runs the built-in aggregations, and says so), plus Spark's Kafka connector
    when it is in the user's cache (`streamsdsl.runtime.jvm_connector.connector_jars`, for
    ``kafka.connector = "jvm"``; its classes load only when a query reads format ``kafka``)."""
    from streamsdsl.runtime.jvm_connector import connector_jars

    ensure_built()
    listed = [j for j in jars.split(",") if j.strip()]
    operator = jar_path(must_exist=operator_must_exist)
    for jar in ([operator] if os.path.isfile(operator) else []) + connector_jars():
        if jar not in listed:
            listed.append(jar)
    return ",".join(listed)


def require_state_store(spark: SparkSession) -> None:
    """Raise `SparkSessionError` unless ``spark`` uses the RocksDB state store, which Spark's
    ``transformWithState`` (every stateful streamsdsl operator) requires.

    Also starts the session's state store coordinator (with its ``StreamingQueryManager``,
    ``spark.streams``) if no streaming query has yet: Spark 4.2's batch ``transformWithState``
    fails with ``CANNOT_LOAD_STATE_STORE`` (``Cannot find endpoint: StateStoreCoordinator``)
    without it; Spark 4.3 only warns."""
    spark.streams  # noqa: B018 - creating the manager registers the coordinator endpoint
    provider = spark.conf.get(STATE_STORE_PROVIDER, "")
    if provider != ROCKSDB_PROVIDER:
        raise SparkSessionError(
            f"this topology has stateful operators, which need the RocksDB state store, but the SparkSession "
            f"uses {provider or 'the default state store'!r}. Set {STATE_STORE_PROVIDER}={ROCKSDB_PROVIDER} when "
            f"the session is built (SparkSession.builder.config(...), spark-submit --conf), or before its first "
            "stateful query with spark.conf.set(...); or let streamsdsl build the session "
            "(streamsdsl.runtime.session.get_session() with no session active)."
        )


def configure_spark(builder: Any, *, ship: bool | None = None) -> Any:
    """Configure a ``SparkSession.Builder`` for streamsdsl; returns the builder.

    Adds the JVM operator's jar (``spark.jars``, keeping the jars already configured; with Spark's
    Kafka connector when ``streamsdsl kafka-connector`` resolved it into the user's cache) and the
    settings streamsdsl needs (`REQUIRED_CONF`: RocksDB state store, Arrow, UTC) and, unless the
    builder sets them, `STATE_DEFAULTS` (changelog checkpointing) and `CODEGEN_DEFAULTS`; makes the
    Python workers run this interpreter unless ``PYSPARK_PYTHON`` or the builder's
    ``spark.pyspark.python`` names another (`worker_python`: it sets ``PYSPARK_PYTHON``, which is
    what PySpark reads; on a local master through `streamsdsl.runtime.python_launcher.launcher`,
    which runs it without PySpark's zips on the path); and, for the settings the builder leaves
    out, the quiet ones of the sessions streamsdsl builds: no console progress bars, streamsdsl's log4j2 configuration
    (`log4j2_config_path`), and the driver's class archive, which starts it sooner
    (`streamsdsl.runtime.class_archive`). Keeps the ``py4j`` logger at ``WARNING``
    (`quiet_py4j`). On a cluster's master (the builder's ``spark.master``: ``spark://``,
    ``yarn``, ``k8s://``), or whenever ``ship`` is true, it ships streamsdsl's Python code and
    dependencies to the Python processes Spark starts (``spark.submit.pyFiles``, ``spark.files``,
    ``spark.archives``: `streamsdsl.runtime.shipping`). A Spark Connect builder
    (``SparkSession.builder.remote(url)``) gets what a client can set on its server's session
    (`streamsdsl.runtime.connect.configure_remote`).

    The style of ``configure_spark_with_delta_pip``.

    Examples
    --------
    >>> class Builder:  # a stand-in for SparkSession.builder
    ...     def __init__(self): self._options = {"spark.jars": "/opt/other.jar", "spark.master": "local[2]"}
    ...     def config(self, key, value): self._options[key] = value; return self
    >>> b = configure_spark(Builder())
    >>> jars = b._options["spark.jars"].split(",")
    >>> jars[0], jars[1].endswith("streamsdsl-operator.jar")
    ('/opt/other.jar', True)
    >>> b._options["spark.pyspark.python"] == os.environ["PYSPARK_PYTHON"]
    True
    >>> b._options["spark.ui.showConsoleProgress"]
    'false'
    >>> b._options["spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled"]
    'true'
    """
    options = dict(getattr(builder, "_options", {}) or {})
    if "spark.remote" in options:  # Spark Connect: the jars and the workers' Python are the server's
        return configure_remote(builder, options)
    for key, value in ship_settings(options, options.get("spark.master"), ship).items():
        builder = builder.config(key, value)
    builder = builder.config("spark.jars", _with_streamsdsl_jars(str(options.get("spark.jars", "")),
                                                                 operator_must_exist=True))
    for key, value in REQUIRED_CONF.items():
        builder = builder.config(key, value)
    chosen = worker_python(options)
    python = launcher(chosen, options.get("spark.master"))
    os.environ[PYTHON_ENV] = python
    _driver_python(options.get("spark.master"))
    builder = builder.config(PYTHON_CONF, python)
    for key, value in daemon_settings(chosen, python).items():
        if key not in options:
            builder = builder.config(key, value)
    for key, value in CONFIGURED_DEFAULTS.items():
        if key not in options:
            builder = builder.config(key, value)
    quiet = _quiet_settings(options, options.get("spark.master"))
    for key, value in {**quiet, **_class_sharing({**options, **quiet}, options.get("spark.master"))}.items():
        builder = builder.config(key, value)
    quiet_py4j()
    return builder
