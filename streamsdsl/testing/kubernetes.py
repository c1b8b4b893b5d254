"""A Kubernetes API server stand-in on this machine: fabric8's mock server in CRUD mode.

No Kubernetes cluster runs here. `KubernetesMock` starts fabric8's ``KubernetesMockServer`` (the
test server of the Kubernetes client Spark itself uses, ``io.fabric8:kubernetes-server-mock`` at
the version of the installed PySpark's ``kubernetes-client`` jar: 7.6.1 for PySpark 4.2.0) in CRUD
mode, in a JVM process of its own on 127.0.0.1, a free port and plain HTTP: it stores what a
client creates (pods, config maps, services) and answers reads, lists and patches of them, as an
API server would, but nothing runs: no scheduler, no kubelet, no pod ever starts. Its launcher
(`LAUNCHER_SOURCE`) adds one thing a real API server does and the mock does not: a server-side
apply (``PATCH`` with ``application/apply-patch+yaml``, which ``spark-submit`` uses for the driver's
service and config map) of an object that does not exist creates it.

What ``spark-submit --master k8s://...`` asks Kubernetes for is then read back with `objects`
(``spark.kubernetes.submission.waitAppCompletion=false``: the submit returns once the driver pod is
created). The mock's jars are resolved from Maven Central into
``<cache>/kubernetes-server-mock-<version>/`` on first use (≈ 20 MB); the client's are the installed
PySpark's. `stop` (also on the way out of a ``with`` block, at interpreter exit, and when the start
fails) stops its process group and removes its directory.

Examples
--------
>>> with KubernetesMock() as api:  # doctest: +SKIP
...     subprocess.run(["spark-submit", "--master", api.master, ...], env=api.environment())
...     [pod["metadata"]["name"] for pod in api.objects("pods", "streams")]
"""

from __future__ import annotations

import atexit
import glob
import json
import os
import re
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path
from types import TracebackType
from typing import Any

from streamsdsl import maven
from streamsdsl.errors import StreamsDslError
from streamsdsl.testing.launchers import compile_launcher
from streamsdsl.testing.processes import stop_groups
from streamsdsl.testing.standalone import spark_home

__all__ = ["LAUNCHER_CLASS", "LAUNCHER_SOURCE", "KubernetesMock", "KubernetesMockError", "mock_server_jars"]

LAUNCHER_CLASS = "StreamsDslKubernetesMock"

#: ``java StreamsDslKubernetesMock PORT``: the CRUD mock server on 127.0.0.1:PORT (0: a free one),
#: ``READY http://127.0.0.1:<port>`` printed once it listens.
LAUNCHER_SOURCE = """\
import io.fabric8.kubernetes.client.server.mock.KubernetesCrudDispatcher;
import io.fabric8.kubernetes.client.server.mock.KubernetesMockServer;
import io.fabric8.mockwebserver.Context;
import io.fabric8.mockwebserver.MockWebServer;
import io.fabric8.mockwebserver.dsl.HttpMethod;
import io.fabric8.mockwebserver.http.MockResponse;
import io.fabric8.mockwebserver.http.RecordedRequest;
import java.net.InetAddress;
import java.util.HashMap;

public class StreamsDslKubernetesMock {
  /** A server-side apply (PATCH, application/apply-patch+yaml) of an object that does not exist
   *  creates it, as a Kubernetes API server does; the CRUD mock alone answers 404. */
  static final class ApplyingDispatcher extends KubernetesCrudDispatcher {
    @Override
    public MockResponse handlePatch(RecordedRequest request) {
      String type = request.getHeader("Content-Type");
      if (type != null && type.contains("apply-patch")) {
        String path = request.getPath();
        String object = path.contains("?") ? path.substring(0, path.indexOf('?')) : path;
        if (handleGet(object).code() == 404) {
          String collection = object.substring(0, object.lastIndexOf('/'));
          return handleCreate(new RecordedRequest(
              "HTTP/1.1", HttpMethod.POST, collection, request.getHeaders(), request.getBody()));
        }
      }
      return super.handlePatch(request);
    }
  }

  public static void main(String[] args) {
    try {
      KubernetesMockServer server = new KubernetesMockServer(
          new Context(), new MockWebServer(), new HashMap<>(), new ApplyingDispatcher(), false);
      server.init(InetAddress.getByName("127.0.0.1"), Integer.parseInt(args[0]));
      Runtime.getRuntime().addShutdownHook(new Thread(server::destroy));
      System.out.println("READY http://127.0.0.1:" + server.getPort());
      System.out.flush();
      Thread.currentThread().join();
    } catch (Throwable e) {
      e.printStackTrace();
      System.exit(1);
    }
  }
}
"""


class KubernetesMockError(StreamsDslError, RuntimeError):
    """The mock API server did not start (the message carries the end of its log)."""


def _client_jars() -> list[str]:
    """The installed PySpark's fabric8 client jars (``kubernetes-*``) and what they need to load."""
    jars = os.path.join(spark_home(), "jars")
    wanted = ("kubernetes-", "slf4j-api-", "snakeyaml-", "jackson-dataformat-yaml-", "jackson-datatype-jsr310-")
    return [j for j in sorted(glob.glob(os.path.join(jars, "*.jar"))) if os.path.basename(j).startswith(wanted)]


def client_version() -> str:
    """The fabric8 client version of the installed PySpark (its ``kubernetes-client-<version>.jar``)."""
    for jar in _client_jars():
        found = re.fullmatch(r"kubernetes-client-(\d[^-]*)\.jar", os.path.basename(jar))
        if found:
            return found.group(1)
    raise KubernetesMockError(f"the installed PySpark has no kubernetes-client jar in {spark_home()}/jars")


def mock_server_jars(version: str | None = None) -> list[str]:
    """The mock server's jars (resolved into the user's cache on first use) and the client's."""
    version = version or client_version()
    target = maven.resolve([f"io.fabric8:kubernetes-server-mock:{version}"],
                           maven.cache_dir() / f"kubernetes-server-mock-{version}", error=KubernetesMockError,
                           what=f"fabric8's Kubernetes mock server {version}")
    return [str(p) for p in sorted(target.glob("*.jar"))] + _client_jars()


class KubernetesMock:
    """fabric8's Kubernetes mock API server (CRUD mode, plain HTTP) in a process of its own."""

    def __init__(self, *, start_timeout_s: float = 120.0) -> None:
        self.start_timeout_s = start_timeout_s
        self.directory = Path(tempfile.mkdtemp(prefix="streamsdsl-k8s-"))
        self.url: str | None = None
        self._process: subprocess.Popen[bytes] | None = None
        atexit.register(self.stop)

    @property
    def master(self) -> str:
        """The ``spark-submit`` master of this server: ``k8s://http://127.0.0.1:<port>``."""
        if self.url is None:
            raise KubernetesMockError("the mock API server is not started")
        return f"k8s://{self.url}"

    @property
    def log_path(self) -> Path:
        return self.directory / "server.log"

    def environment(self) -> dict[str, str]:
        """The environment of a ``spark-submit`` against this server: without ``PYTHONPATH`` and with
        an empty ``KUBECONFIG`` (no context of the user's own is read)."""
        kubeconfig = self.directory / "kubeconfig"
        kubeconfig.touch()
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "SPARK_CONF_DIR")}
        env.update({"KUBECONFIG": str(kubeconfig), "SPARK_LOCAL_IP": "127.0.0.1"})
        return env

    def start(self) -> KubernetesMock:
        """Start the server; return once it listens.

        Raises
        ------
        KubernetesMockError
            When it exits or does not listen within ``start_timeout_s`` (it is stopped first).
        """
        try:
            classpath = mock_server_jars()
            classes = compile_launcher(LAUNCHER_CLASS, LAUNCHER_SOURCE, classpath, KubernetesMockError)
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                port = s.getsockname()[1]
            with open(self.log_path, "wb") as log:
                self._process = subprocess.Popen(
                    ["java", "-Xmx256m", "-cp", os.pathsep.join([str(classes), *classpath]), LAUNCHER_CLASS, str(port)],
                    stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, cwd=self.directory,
                    start_new_session=True,
                )
            deadline = time.monotonic() + self.start_timeout_s
            while self.url is None:
                ready = re.search(r"^READY (\S+)$", self.log_path.read_text(errors="replace"), re.MULTILINE)
                if ready:
                    self.url = ready.group(1)
                elif self._process.poll() is not None:
                    raise KubernetesMockError(f"the mock API server exited with code {self._process.returncode}:\n"
                                              f"{self.log_tail()}")
                elif time.monotonic() > deadline:
                    raise KubernetesMockError(f"the mock API server did not start within {self.start_timeout_s:.0f} s:"
                                              f"\n{self.log_tail()}")
                else:
                    time.sleep(0.2)
        except BaseException:
            self.stop()
            raise
        return self

    def log_tail(self, chars: int = 3000) -> str:
        text = self.log_path.read_text(errors="replace") if self.log_path.exists() else "(no log)"
        return text[-chars:]

    def get(self, path: str) -> Any:
        """The JSON answer to ``GET <path>`` (e.g. ``/api/v1/namespaces/streams/pods``)."""
        with urllib.request.urlopen(f"{self.url}{path}", timeout=10) as answer:
            return json.load(answer)

    def objects(self, kind: str, namespace: str) -> list[dict[str, Any]]:
        """The objects of a core (``v1``) ``kind`` (``pods``, ``configmaps``, ``services``) in ``namespace``."""
        return list(self.get(f"/api/v1/namespaces/{namespace}/{kind}")["items"])

    def stop(self) -> None:
        """Stop the server's process group (SIGTERM, SIGKILL after 10 s) and remove its directory."""
        process, self._process = self._process, None
        if process is not None:
            stop_groups([process], 10.0)
        shutil.rmtree(self.directory, ignore_errors=True)

    def __enter__(self) -> KubernetesMock:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()
