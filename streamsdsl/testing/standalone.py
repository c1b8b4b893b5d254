"""A Spark standalone cluster on this machine: a master and workers as separate processes.

`StandaloneCluster` starts Spark's own standalone master and workers from the installed PySpark
(``bin/spark-class org.apache.spark.deploy.master.Master`` and ``...deploy.worker.Worker``, with
``SPARK_HOME`` the pyspark package), each in its own process group, on 127.0.0.1 and free ports,
with a temporary directory for the workers' work and logs. The workers' executors start their
Python workers with ``python`` (``PYSPARK_PYTHON`` of the workers) unless the application sets
``spark.pyspark.python``. `stop` (also on the way out of a ``with`` block, and at interpreter exit)
stops every process group and removes the directory.

`bare_python` makes the interpreter a cluster's workers typically have: a virtual environment with
PySpark's own dependencies (pandas, pyarrow, numpy, protobuf: the versions this interpreter has)
and nothing else: no streamsdsl, attrs or confluent-kafka. It is built once per set of versions
into the user's cache (``<cache>/bare-python/<key>``, with pip, from PyPI or pip's cache).

Examples
--------
>>> with StandaloneCluster(workers=2, python=bare_python()) as cluster:  # doctest: +SKIP
...     spark = SparkSession.builder.master(cluster.master_url).getOrCreate()
"""

from __future__ import annotations

import atexit
import hashlib
import importlib.metadata as metadata
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType

from streamsdsl.errors import StreamsDslError
from streamsdsl.maven import cache_dir
from streamsdsl.testing.jvm_options import with_options
from streamsdsl.testing.processes import stop_groups

__all__ = ["BARE_PACKAGES", "ClusterError", "StandaloneCluster", "bare_python", "spark_home"]

#: What a cluster's Python has besides the standard library: PySpark's own dependencies.
BARE_PACKAGES = ("pandas", "pyarrow", "numpy", "protobuf")


class ClusterError(StreamsDslError, RuntimeError):
    """A standalone cluster did not start (the message carries the end of its processes' logs)."""


def spark_home() -> str:
    """The installed PySpark's directory: pip's PySpark is a Spark distribution (``bin``, ``jars``)."""
    import pyspark

    return os.path.dirname(os.path.abspath(pyspark.__file__))


def bare_python() -> str:
    """The interpreter of a virtual environment with PySpark's dependencies only (`BARE_PACKAGES`,
    at this interpreter's versions), built once into the user's cache; its path.

    Raises
    ------
    ClusterError
        When the environment cannot be built (pip's output in the message).
    """
    pins = []
    for name in BARE_PACKAGES:
        try:
            pins.append(f"{name}=={metadata.version(name)}")
        except metadata.PackageNotFoundError:
            pins.append(name)
    key = hashlib.sha256(f"{sys.version}\0{' '.join(pins)}".encode()).hexdigest()[:16]
    target = cache_dir() / "bare-python" / key
    python = target / "bin" / "python"
    if python.is_file():
        return str(python)
    target.parent.mkdir(parents=True, exist_ok=True)
    # built beside its final path, then renamed: a venv's interpreter finds its packages relative to itself
    staging = target.with_name(f".{target.name}.{os.getpid()}")
    for argv in ([sys.executable, "-m", "venv", "--without-pip", str(staging)],
                 [sys.executable, "-m", "pip", "--python", str(staging / "bin" / "python"), "install",
                  "--quiet", "--disable-pip-version-check", *pins]):
        done = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            shutil.rmtree(staging, ignore_errors=True)
            raise ClusterError(f"could not build the bare Python ({' '.join(argv)}): "
                               f"{(done.stdout + done.stderr)[-1500:]}")
    try:
        os.rename(staging, target)
    except OSError:
        shutil.rmtree(staging, ignore_errors=True)
        if not python.is_file():  # else a concurrent build finished first
            raise
    return str(python)


#: How many times `StandaloneCluster.start` starts its master on new ports when one was taken.
PORT_ATTEMPTS = 3


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class StandaloneCluster:
    """A standalone master and ``workers`` workers (``cores`` cores and ``memory`` each), whose
    executors' Python workers run ``python`` unless an application sets ``spark.pyspark.python``;
    ``java_options``: options of every JVM of the cluster (its master, its workers and the
    executors they start), e.g. `streamsdsl.testing.jvm_options.SHORT_LIVED` in a test."""

    def __init__(self, workers: int = 2, *, cores: int = 1, memory: str = "1200m", python: str | None = None,
                 start_timeout_s: float = 90.0, java_options: Sequence[str] = ()) -> None:
        if workers < 1:
            raise ValueError(f"'workers' must be at least 1 (got {workers}).")
        self.workers = workers
        self.cores = cores
        self.memory = memory
        self.python = python or sys.executable
        self.start_timeout_s = start_timeout_s
        self.java_options = tuple(java_options)
        self.directory = Path(tempfile.mkdtemp(prefix="streamsdsl-standalone-"))
        self.port = _free_port()
        self.ui_port = _free_port()
        self._processes: list[tuple[str, subprocess.Popen[bytes]]] = []
        atexit.register(self.stop)

    @property
    def master_url(self) -> str:
        """``spark://127.0.0.1:<port>``."""
        return f"spark://127.0.0.1:{self.port}"

    @property
    def ui_url(self) -> str:
        """The master's web UI (``/json/`` is its state)."""
        return f"http://127.0.0.1:{self.ui_port}"

    def environment(self) -> dict[str, str]:
        """The environment of the cluster's processes: ``SPARK_HOME`` = the installed PySpark,
        127.0.0.1, the workers' Python, without this process's ``PYTHONPATH`` and virtual environment."""
        env = {k: v for k, v in os.environ.items()
               if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYSPARK_DRIVER_PYTHON", "SPARK_CONF_DIR")}
        env.update({
            "SPARK_HOME": spark_home(),
            "SPARK_LOCAL_IP": "127.0.0.1",
            "SPARK_LOG_DIR": str(self.directory / "logs"),
            "PYSPARK_PYTHON": self.python,
            "SPARK_NO_DAEMONIZE": "1",
            # the master binds the ports it is given or exits (`_start_master`)
            "SPARK_MASTER_OPTS": " ".join([*os.environ.get("SPARK_MASTER_OPTS", "").split(),
                                           "-Dspark.port.maxRetries=0"]),
        })
        if self.java_options:  # the daemons' own; the executors inherit a worker's environment
            env = with_options(with_options(env, "SPARK_DAEMON_JAVA_OPTS", self.java_options),
                               "JAVA_TOOL_OPTIONS", self.java_options)
        return env

    def start(self) -> StandaloneCluster:
        """Start the master and the workers; return once every worker is registered ``ALIVE``.

        Raises
        ------
        ClusterError
            When a process exits or the workers are not registered within ``start_timeout_s``
            (everything started is stopped first).
        """
        try:
            self._start_master()
            for i in range(self.workers):
                work = self.directory / f"worker-{i}"
                work.mkdir()
                self._spawn(f"worker-{i}", "org.apache.spark.deploy.worker.Worker", self.master_url,
                            "--host", "127.0.0.1", "--cores", str(self.cores), "--memory", self.memory,
                            "--work-dir", str(work), "--webui-port", "0")
            self._wait(lambda state: state is not None and self._alive(state) >= self.workers,
                       f"{self.workers} workers to register")
        except BaseException:
            self.stop()
            raise
        return self

    def _start_master(self) -> None:
        """Start the master on `port` and `ui_port`, which must be free (``spark.port.maxRetries``
        = 0: a master that finds a port taken exits instead of taking the next one, where this
        object would not find it); when a port was taken between `_free_port` choosing it and the
        master binding it, start again on two other ports (at most `PORT_ATTEMPTS` times)."""
        for attempt in range(1, PORT_ATTEMPTS + 1):
            self._spawn("master", "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                        "--port", str(self.port), "--webui-port", str(self.ui_port))
            try:
                self._wait(lambda state: state is not None, "the master's web UI to answer")
                return
            except ClusterError:
                log = (self.directory / "master.log").read_text(errors="replace")
                if attempt == PORT_ATTEMPTS or "java.net.BindException" not in log:
                    raise
            self._processes.clear()  # the master exited
            self.port, self.ui_port = _free_port(), _free_port()

    def state(self) -> dict[str, object] | None:
        """The master's state (its ``/json/``), or ``None`` when it does not answer, or when what
        answers on `ui_port` is not this cluster's master (another process took the port)."""
        try:
            with urllib.request.urlopen(f"{self.ui_url}/json/", timeout=2) as answer:
                state = json.load(answer)
        except (OSError, ValueError):
            return None
        return state if isinstance(state, dict) and state.get("url") == self.master_url else None

    def applications(self) -> list[dict[str, object]]:
        """The applications the master runs and completed (names, executors' cores, states)."""
        state = self.state() or {}
        return [*state.get("activeapps", []), *state.get("completedapps", [])]  # type: ignore[list-item]

    def executor_logs(self) -> str:
        """The executors' ``stderr`` files of every application, concatenated (for failure messages)."""
        out = []
        for path in sorted(self.directory.glob("worker-*/app-*/*/stderr")):
            out.append(f"--- {path.relative_to(self.directory)}\n{path.read_text(errors='replace')[-4000:]}")
        return "\n".join(out)

    @staticmethod
    def _alive(state: dict[str, object]) -> int:
        return sum(1 for w in state.get("workers", []) if w.get("state") == "ALIVE")  # type: ignore[union-attr]

    def _spawn(self, name: str, main_class: str, *args: str) -> None:
        log = open(self.directory / f"{name}.log", "wb")  # noqa: SIM115 - closed with the process
        with log:
            process = subprocess.Popen(
                [os.path.join(spark_home(), "bin", "spark-class"), main_class, *args],
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=self.environment(),
                cwd=self.directory, start_new_session=True,
            )
        self._processes.append((name, process))

    def _wait(self, ready: object, what: str) -> None:
        deadline = time.monotonic() + self.start_timeout_s
        while time.monotonic() < deadline:
            for name, process in self._processes:
                if process.poll() is not None:
                    raise ClusterError(f"the standalone {name} exited with code {process.returncode} while waiting "
                                       f"for {what}:\n{self._log(name)}")
            if ready(self.state()):  # type: ignore[operator]
                return
            time.sleep(0.3)
        raise ClusterError(f"timed out after {self.start_timeout_s:.0f} s waiting for {what}:\n"
                           + "\n".join(self._log(name) for name, _ in self._processes))

    def _log(self, name: str) -> str:
        path = self.directory / f"{name}.log"
        return f"--- {name}:\n" + (path.read_text(errors="replace")[-2000:] if path.exists() else "(no log)")

    def stop(self) -> None:
        """Stop every process group (SIGTERM, SIGKILL after 15 s) and remove the directory."""
        processes, self._processes = self._processes, []
        stop_groups([process for _, process in reversed(processes)], 15.0)
        shutil.rmtree(self.directory, ignore_errors=True)

    def __enter__(self) -> StandaloneCluster:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()
