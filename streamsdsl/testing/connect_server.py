"""A Spark Connect server on this machine, for streamsdsl's applications over ``sc://``.

`ConnectServer` starts Spark's own Connect server from the installed PySpark
(``bin/spark-submit --class org.apache.spark.sql.connect.service.SparkConnectServer``, with
``SPARK_HOME`` the pyspark package: its ``jars`` hold ``spark-connect_2.13``) in its own process
group, on 127.0.0.1 and a free port, with what streamsdsl's applications need of a server
(`server_conf`): the settings of the sessions streamsdsl builds (RocksDB state store, Arrow, UTC,
`streamsdsl.runtime.session.LOCAL_DEFAULTS`), the JVM operator's jar with its SQL extension
(``spark.sql.extensions``: the JVM operator over Connect), Spark's Kafka connector when it is in
the user's cache, and the server's Python workers on this interpreter (``spark.pyspark.python``).
`stop` (also on the way out of a ``with`` block, and at interpreter exit) stops the process group
and removes its directory.

`server_command` is the command line, for a server started by hand (docs/connect.md);
``python -m streamsdsl.testing.connect_server [--port P] [--print]`` runs that server in the
foreground until Ctrl-C, or prints its command (`main`).

Examples
--------
>>> with ConnectServer() as server:  # doctest: +SKIP
...     spark = SparkSession.builder.remote(server.url).getOrCreate()
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import shlex
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import TracebackType

from streamsdsl.errors import StreamsDslError
from streamsdsl.testing.processes import stop_groups

__all__ = ["CONNECT_SERVER_CLASS", "ConnectServer", "ConnectServerError", "server_command", "server_conf"]

#: Spark's Connect server (in ``spark-connect_2.13-<version>.jar`` of the pyspark package).
CONNECT_SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"


class ConnectServerError(StreamsDslError, RuntimeError):
    """The Connect server did not start (the message carries the end of its log)."""


def _spark_home() -> str:
    """The installed PySpark's directory: pip's PySpark is a Spark distribution (``bin``, ``jars``)."""
    import pyspark

    return os.path.dirname(os.path.abspath(pyspark.__file__))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def server_conf(port: int, *, python: str | None = None, ui: bool = False, master: str = "local[2]") -> dict[str, str]:
    """The Spark settings of a local Connect server for streamsdsl: the settings of the sessions
    streamsdsl builds, the jars (the JVM operator's, with its SQL extension, and Spark's Kafka
    connector when ``streamsdsl kafka-connector`` put it in the user's cache), the gRPC address
    ``127.0.0.1:<port>``, and the Python of its workers (``python``, default this interpreter).

    On a ``local`` ``master`` with this interpreter, the server starts its Python processes with
    streamsdsl's launcher (`streamsdsl.runtime.python_launcher`): PySpark imported with its
    bytecode, not compiled again from ``pyspark.zip`` in each process. A ``foreachBatch``
    function's process must connect back to the server within Spark's fixed 10 s; its imports
    (``pyspark.sql.connect``) took 1.4–2.0 s from the zip and 0.8–1.1 s installed, on this
    project's machines.

    Examples
    --------
    >>> conf = server_conf(15002, python="/venv/bin/python")
    >>> conf["spark.connect.grpc.binding.port"], conf["spark.sql.extensions"]
    ('15002', 'io.streamsdsl.jvm.StreamsDslExtensions')
    >>> conf["spark.sql.streaming.stateStore.providerClass"].rsplit(".", 1)[-1]
    'RocksDBStateStoreProvider'
    >>> conf["spark.jars"].split(",")[0].endswith("streamsdsl-operator.jar")
    True
    """
    from streamsdsl.compiler.jvm_operator import CONNECT_EXTENSION
    from streamsdsl.jvm import ensure_built, jar_path
    from streamsdsl.runtime.jvm_connector import connector_jars
    from streamsdsl.runtime.python_daemon import settings as daemon_settings
    from streamsdsl.runtime.python_launcher import launcher
    from streamsdsl.runtime.session import LOCAL_DEFAULTS, PYTHON_CONF, QUIET_CONF, REQUIRED_CONF, log4j2_config_path

    if not isinstance(port, int) or isinstance(port, bool) or not 0 < port < 65536:
        raise ValueError(f"'port' must be a TCP port, an int in 1..65535 (got {port!r}).")
    ensure_built()
    log4j = f"-Dlog4j2.configurationFile=file:{log4j2_config_path()}"
    workers = launcher(python or sys.executable, master)
    return {
        **daemon_settings(python or sys.executable, workers),
        **LOCAL_DEFAULTS,
        **QUIET_CONF,
        **REQUIRED_CONF,
        "spark.connect.grpc.binding.address": "127.0.0.1",
        "spark.connect.grpc.binding.port": str(port),
        "spark.jars": ",".join([jar_path(must_exist=True), *connector_jars()]),
        "spark.sql.extensions": CONNECT_EXTENSION,
        PYTHON_CONF: workers,
        "spark.driver.extraJavaOptions": log4j,
        "spark.executor.extraJavaOptions": log4j,
        "spark.ui.enabled": "true" if ui else "false",
    }


def server_command(port: int, *, master: str = "local[2]", python: str | None = None, ui: bool = False) -> list[str]:
    """The command that starts a Connect server for streamsdsl on ``127.0.0.1:<port>`` (`server_conf`)
    from the installed PySpark; run it with ``SPARK_HOME`` set to the pyspark package directory."""
    argv = [os.path.join(_spark_home(), "bin", "spark-submit"), "--class", CONNECT_SERVER_CLASS,
            "--master", master, "--name", "streamsdsl-connect"]
    for key, value in server_conf(port, python=python, ui=ui, master=master).items():
        argv += ["--conf", f"{key}={value}"]
    return [*argv, "spark-internal"]


class ConnectServer:
    """A Spark Connect server for streamsdsl's applications on ``127.0.0.1`` and a free port
    (`server_command`), its Python workers on ``python`` (default this interpreter); `url` is the
    address `SparkSession.builder.remote` takes."""

    def __init__(self, *, master: str = "local[2]", python: str | None = None, start_timeout_s: float = 120.0) -> None:
        self.master = master
        self.python = python or sys.executable
        self.start_timeout_s = start_timeout_s
        self.port = _free_port()
        self.directory = Path(tempfile.mkdtemp(prefix="streamsdsl-connect-"))
        self.log_path = self.directory / "server.log"
        self._process: subprocess.Popen[bytes] | None = None
        #: Seconds from the process's start to the server answering (set by `start`).
        self.start_seconds: float | None = None
        atexit.register(self.stop)

    @property
    def url(self) -> str:
        """``sc://127.0.0.1:<port>``."""
        return f"sc://127.0.0.1:{self.port}"

    def environment(self) -> dict[str, str]:
        """The server's environment: ``SPARK_HOME`` = the installed PySpark, 127.0.0.1, the
        workers' Python, without this process's Spark Connect mode."""
        env = {k: v for k, v in os.environ.items()
               if k not in ("SPARK_REMOTE", "SPARK_CONNECT_MODE_ENABLED", "SPARK_LOCAL_REMOTE", "SPARK_CONF_DIR")}
        env.update({"SPARK_HOME": _spark_home(), "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": self.python})
        return env

    def start(self) -> ConnectServer:
        """Start the server; return once it accepts connections.

        Raises
        ------
        ConnectServerError
            When the process exits or does not answer within ``start_timeout_s`` (it is stopped
            first; the message has the end of its log).
        """
        began = time.monotonic()
        with open(self.log_path, "wb") as log:
            # its own process group, stopped as a whole; its working directory takes spark-warehouse/
            self._process = subprocess.Popen(
                server_command(self.port, master=self.master, python=self.python), cwd=self.directory,
                env=self.environment(), stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True)
        try:
            while not self._answers():
                if self._process.poll() is not None:
                    raise ConnectServerError(f"the Spark Connect server exited with code {self._process.returncode} "
                                             f"before it answered:\n{self.log_tail()}")
                if time.monotonic() - began > self.start_timeout_s:
                    raise ConnectServerError(f"the Spark Connect server did not answer on {self.url} within "
                                             f"{self.start_timeout_s:.0f} s:\n{self.log_tail()}")
                time.sleep(0.1)
        except BaseException:
            self.stop()
            raise
        self.start_seconds = time.monotonic() - began
        return self

    def _answers(self) -> bool:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
            return True
        return False

    def log_tail(self, chars: int = 4000) -> str:
        """The end of the server's log."""
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except OSError:
            return "(no log)"

    def stop(self, timeout_s: float = 30.0) -> None:
        """Stop the server's process group (SIGTERM, then SIGKILL after ``timeout_s``) and remove
        its directory; a no-op once stopped."""
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            stop_groups([process], timeout_s)
        if process is not None or self.directory.exists():
            shutil.rmtree(self.directory, ignore_errors=True)

    def __enter__(self) -> ConnectServer:
        return self.start()

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.stop()


def main(argv: list[str] | None = None) -> int:
    """``python -m streamsdsl.testing.connect_server``: run a Connect server for streamsdsl on
    ``127.0.0.1:--port`` (default 15002) until Ctrl-C, or with ``--print`` print its command."""
    parser = argparse.ArgumentParser(prog="python -m streamsdsl.testing.connect_server",
                                     description="A local Spark Connect server for streamsdsl's applications.")
    parser.add_argument("--port", type=int, default=15002, help="the gRPC port on 127.0.0.1 (default 15002)")
    parser.add_argument("--master", default="local[2]", help="the server's Spark master (default local[2])")
    parser.add_argument("--print", action="store_true", help="print the command (SPARK_HOME=... spark-submit ...)")
    args = parser.parse_args(argv)
    argv_ = server_command(args.port, master=args.master, ui=True)
    if args.print:
        print(f"SPARK_HOME={shlex.quote(_spark_home())} {shlex.join(argv_)}")
        return 0
    env = {k: v for k, v in os.environ.items() if k not in ("SPARK_REMOTE", "SPARK_CONNECT_MODE_ENABLED")}
    env.update({"SPARK_HOME": _spark_home(), "PYSPARK_PYTHON": sys.executable})
    print(f"Spark Connect server for streamsdsl: sc://127.0.0.1:{args.port} (Ctrl-C stops it)", file=sys.stderr)
    try:
        return subprocess.call(argv_, env=env)
    except KeyboardInterrupt:
        return 0


if __name__ == "__main__":
    sys.exit(main())
