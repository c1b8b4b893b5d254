"""A YARN cluster on this machine: Hadoop's ``MiniYARNCluster`` in a JVM process of its own.

`YarnCluster` starts Hadoop's own test cluster (``org.apache.hadoop.yarn.server.MiniYARNCluster``:
a ResourceManager and NodeManagers in one JVM, the way Spark's ``YarnClusterSuite`` runs its YARN
tests) from a small launcher (`LAUNCHER_SOURCE`, compiled with ``javac`` once into the user's
cache: `streamsdsl.testing.launchers`) on the Hadoop version of the installed PySpark (its ``hadoop-client-api`` jar: 3.5.0 for
PySpark 4.2.0). Its jars (``org.apache.hadoop:hadoop-client-minicluster`` and what it needs
besides the client jars: JUnit's API, which Hadoop's test utilities load, and Bouncy Castle) are
resolved from Maven Central into ``<cache>/hadoop-minicluster-<version>/`` on first use
(`streamsdsl.maven.resolve`, ≈ 110 MB).

The cluster writes its configuration (``yarn-site.xml``, with the ResourceManager's ports) into
``hadoop_conf_dir``, and `spark_conf_dir` holds the ``spark-defaults.conf`` a cluster's gateway
machine would have: Spark's jars from the installed PySpark (``spark.yarn.jars=local:...``: on every
node already, nothing uploaded per application), the staging directory in the cluster's directory,
one application attempt, two executors of one core in small containers, two shuffle partitions. `environment` is the environment of a ``spark-submit
--master yarn`` against it (``HADOOP_CONF_DIR``, ``SPARK_CONF_DIR``).

The NodeManager starts each container in a session of its own (``setsid``), so `stop` (also on the
way out of a ``with`` block, at interpreter exit, and when the start fails) stops the launcher's
process group (which stops the cluster and its containers), then every process still running in
the cluster's directory (a container's launch script, its JVM, its Python workers), and removes
the directory.

Examples
--------
>>> with YarnCluster() as cluster:  # doctest: +SKIP
...     subprocess.run(["spark-submit", "--master", "yarn", "app.py"], env=cluster.environment())
"""

from __future__ import annotations

import atexit
import contextlib
import glob
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from types import TracebackType

from streamsdsl import maven
from streamsdsl.errors import StreamsDslError
from streamsdsl.testing.launchers import compile_launcher, java_home
from streamsdsl.testing.processes import stop_groups
from streamsdsl.testing.standalone import spark_home

__all__ = ["LAUNCHER_CLASS", "LAUNCHER_SOURCE", "YarnCluster", "YarnClusterError", "hadoop_version",
           "minicluster_jars"]

#: The artifacts a MiniYARNCluster needs besides Hadoop's client jars, per Hadoop version: the
#: shaded test cluster, JUnit's API (``GenericTestUtils`` asserts with it) and Bouncy Castle (the
#: ResourceManager's security provider), at the versions that Hadoop release builds with.
EXTRA_ARTIFACTS = {
    "3.5.0": ("org.junit.jupiter:junit-jupiter-api:5.13.3", "org.bouncycastle:bcprov-jdk18on:1.82",
              "org.bouncycastle:bcpkix-jdk18on:1.82"),
}

LAUNCHER_CLASS = "StreamsDslMiniYarn"

#: The launcher: ``java StreamsDslMiniYarn CONF_DIR NODE_MANAGERS MEMORY_MB VCORES`` starts a
#: MiniYARNCluster with the settings of Spark's ``BaseYarnClusterSuite`` (a capacity scheduler's
#: default queue, no disk health check), writes its configuration to ``CONF_DIR/yarn-site.xml``
#: once the ResourceManager has its port, prints ``READY <address>`` and runs until it is stopped.
LAUNCHER_SOURCE = """\
import java.io.OutputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardCopyOption;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.yarn.conf.YarnConfiguration;
import org.apache.hadoop.yarn.server.MiniYARNCluster;

public class StreamsDslMiniYarn {
  public static void main(String[] args) {
    try {
      run(Paths.get(args[0]), Integer.parseInt(args[1]), Integer.parseInt(args[2]), Integer.parseInt(args[3]));
    } catch (Throwable e) {
      e.printStackTrace();
      System.exit(1);
    }
  }

  static void run(Path confDir, int nodeManagers, int memoryMb, int vcores) throws Exception {
    YarnConfiguration conf = new YarnConfiguration();
    conf.set("yarn.nodemanager.disk-health-checker.max-disk-utilization-per-disk-percentage", "100.0");
    // capacity-scheduler.xml is not in hadoop-client-minicluster (as in Spark's YarnClusterSuite)
    conf.set("yarn.scheduler.capacity.root.queues", "default");
    conf.setInt("yarn.scheduler.capacity.root.default.capacity", 100);
    conf.setFloat("yarn.scheduler.capacity.root.default.user-limit-factor", 1);
    conf.setInt("yarn.scheduler.capacity.root.default.maximum-capacity", 100);
    conf.set("yarn.scheduler.capacity.root.default.state", "RUNNING");
    conf.set("yarn.scheduler.capacity.root.default.acl_submit_applications", "*");
    conf.set("yarn.scheduler.capacity.root.default.acl_administer_queue", "*");
    conf.setInt("yarn.scheduler.capacity.node-locality-delay", -1);
    conf.set("yarn.resourcemanager.hostname", "127.0.0.1");
    conf.set("yarn.nodemanager.hostname", "127.0.0.1");
    conf.setInt("yarn.nodemanager.resource.memory-mb", memoryMb);
    conf.setInt("yarn.nodemanager.resource.cpu-vcores", vcores);
    conf.setInt("yarn.scheduler.minimum-allocation-mb", 128);
    conf.setBoolean("yarn.nodemanager.pmem-check-enabled", false);
    conf.setBoolean("yarn.nodemanager.vmem-check-enabled", false);
    conf.set("hadoop.tmp.dir", confDir.resolveSibling("hadoop-tmp").toString());
    MiniYARNCluster cluster = new MiniYARNCluster("streamsdsl-yarn", nodeManagers, 1, 1);
    // on SIGTERM: stop the cluster (and the NodeManagers' containers), for 10 s at most
    Runtime.getRuntime().addShutdownHook(new Thread(() -> {
      Thread stopping = new Thread(cluster::stop);
      stopping.setDaemon(true);
      stopping.start();
      try {
        stopping.join(10_000);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
    }));
    cluster.init(conf);
    cluster.start();
    // start() may return before the ResourceManager has its port in the configuration
    Configuration running = cluster.getConfig();
    long deadline = System.nanoTime() + 60_000_000_000L;
    while (running.get(YarnConfiguration.RM_ADDRESS).endsWith(":0")) {
      if (System.nanoTime() > deadline) {
        throw new IllegalStateException("the ResourceManager's address still has port 0");
      }
      Thread.sleep(100);
    }
    Path partial = confDir.resolve("yarn-site.xml.partial");
    try (OutputStream out = Files.newOutputStream(partial)) {
      running.writeXml(out);
    }
    Files.move(partial, confDir.resolve("yarn-site.xml"), StandardCopyOption.ATOMIC_MOVE);
    System.out.println("READY " + running.get(YarnConfiguration.RM_ADDRESS));
    System.out.flush();
    Thread.currentThread().join();
  }
}
"""


class YarnClusterError(StreamsDslError, RuntimeError):
    """The YARN cluster did not start (the message carries the end of its log)."""


def hadoop_version() -> str:
    """The Hadoop version of the installed PySpark (its ``hadoop-client-api-<version>.jar``)."""
    found = sorted(glob.glob(os.path.join(spark_home(), "jars", "hadoop-client-api-*.jar")))
    if not found:
        raise YarnClusterError(f"the installed PySpark has no hadoop-client-api jar in {spark_home()}/jars")
    return re.sub(r"^hadoop-client-api-(.*)\.jar$", r"\1", os.path.basename(found[-1]))


def minicluster_jars(version: str | None = None) -> list[str]:
    """The jars of a MiniYARNCluster on Hadoop ``version`` (the installed PySpark's by default),
    resolved into the user's cache on first use, and the logging jars of the installed PySpark."""
    version = version or hadoop_version()
    extra = EXTRA_ARTIFACTS.get(version)
    if extra is None:
        raise YarnClusterError(f"no MiniYARNCluster artifacts are known for Hadoop {version}: add them to "
                               "streamsdsl.testing.yarn.EXTRA_ARTIFACTS")
    target = maven.resolve([f"org.apache.hadoop:hadoop-client-minicluster:{version}", *extra],
                           maven.cache_dir() / f"hadoop-minicluster-{version}", error=YarnClusterError,
                           what=f"Hadoop's MiniYARNCluster {version}")
    jars = [str(p) for p in sorted(target.glob("*.jar")) if not p.name.startswith("slf4j-api-")]
    logging = ("slf4j-api-", "log4j-slf4j2-impl-", "log4j-api-", "log4j-core-", "log4j-1.2-api-")
    spark_jars = sorted(glob.glob(os.path.join(spark_home(), "jars", "*.jar")))
    return jars + [j for j in spark_jars if os.path.basename(j).startswith(logging)]


class YarnCluster:
    """A MiniYARNCluster (one ResourceManager, ``node_managers`` NodeManagers with ``memory_mb`` and
    ``vcores`` each) and the configuration directories of a ``spark-submit --master yarn`` against it."""

    def __init__(self, node_managers: int = 1, *, memory_mb: int = 4096, vcores: int = 4,
                 container_memory: str = "512m", start_timeout_s: float = 180.0) -> None:
        if node_managers < 1:
            raise ValueError(f"'node_managers' must be at least 1 (got {node_managers}).")
        self.node_managers = node_managers
        self.memory_mb = memory_mb
        self.vcores = vcores
        self.container_memory = container_memory
        self.start_timeout_s = start_timeout_s
        self.directory = Path(tempfile.mkdtemp(prefix="streamsdsl-yarn-"))
        self.hadoop_conf_dir = self.directory / "hadoop-conf"
        self.spark_conf_dir = self.directory / "spark-conf"
        self.resource_manager: str | None = None
        self.start_seconds: float | None = None
        self._process: subprocess.Popen[bytes] | None = None
        atexit.register(self.stop)

    @property
    def log_path(self) -> Path:
        return self.directory / "yarn.log"

    def spark_defaults(self) -> dict[str, str]:
        """The ``spark-defaults.conf`` of `spark_conf_dir`: what a YARN cluster's gateway machine
        configures once for every application."""
        return {
            # Spark's jars are on every node (this machine): linked, not uploaded per application
            "spark.yarn.jars": f"local:{os.path.join(spark_home(), 'jars')}/*",
            "spark.yarn.stagingDir": self.directory.joinpath("staging").as_uri(),
            "spark.yarn.maxAppAttempts": "1",
            "spark.driver.memory": self.container_memory,
            "spark.executor.memory": self.container_memory,
            "spark.yarn.am.memory": self.container_memory,
            "spark.executor.instances": "2",
            "spark.executor.cores": "1",
            # a session of the application's own (not one streamsdsl builds and sizes to its topics)
            # would have 200 state stores per stateful operator: this cluster's 2 cores get 2
            "spark.sql.shuffle.partitions": "2",
        }

    def environment(self) -> dict[str, str]:
        """The environment of a ``spark-submit --master yarn`` against this cluster: this process's,
        with ``HADOOP_CONF_DIR`` and ``SPARK_CONF_DIR``, without ``PYTHONPATH`` (spark-submit passes
        it on to the application's containers) and a virtual environment's variables."""
        env = {k: v for k, v in os.environ.items()
               if k not in ("PYTHONPATH", "VIRTUAL_ENV", "SPARK_CONF_DIR", "STREAMSDSL_SPARK_MASTER")}
        env.update({"HADOOP_CONF_DIR": str(self.hadoop_conf_dir), "YARN_CONF_DIR": str(self.hadoop_conf_dir),
                    "SPARK_CONF_DIR": str(self.spark_conf_dir), "SPARK_LOCAL_IP": "127.0.0.1",
                    "JAVA_HOME": java_home(YarnClusterError)})
        return env

    def start(self) -> YarnCluster:
        """Resolve the jars and compile the launcher (the first time), start the cluster, and return
        once its ``yarn-site.xml`` is written.

        Raises
        ------
        YarnClusterError
            When the launcher exits or does not answer within ``start_timeout_s`` (everything
            started is stopped first).
        """
        try:
            classpath = minicluster_jars()
            classes = compile_launcher(LAUNCHER_CLASS, LAUNCHER_SOURCE, classpath, YarnClusterError)
            self.hadoop_conf_dir.mkdir()
            self.spark_conf_dir.mkdir()
            (self.spark_conf_dir / "spark-defaults.conf").write_text(
                "".join(f"{k} {v}\n" for k, v in self.spark_defaults().items()))
            work = self.directory / "yarn"
            work.mkdir()
            env = self.environment()
            started = time.monotonic()
            with open(self.log_path, "wb") as log:
                self._process = subprocess.Popen(
                    ["java", "-Xmx512m", f"-Dtest.build.data={work / 'data'}", "-cp",
                     os.pathsep.join([str(classes), *classpath]), LAUNCHER_CLASS, str(self.hadoop_conf_dir),
                     str(self.node_managers), str(self.memory_mb), str(self.vcores)],
                    stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=work,
                    start_new_session=True,
                )
            deadline = started + self.start_timeout_s
            while self.resource_manager is None:
                ready = re.search(r"^READY (\S+)$", self.log_path.read_text(errors="replace"), re.MULTILINE)
                if ready:
                    self.resource_manager = ready.group(1)
                elif self._process.poll() is not None:
                    raise YarnClusterError(f"the MiniYARNCluster exited with code {self._process.returncode}:\n"
                                           f"{self.log_tail()}")
                elif time.monotonic() > deadline:
                    raise YarnClusterError(f"the MiniYARNCluster did not start within {self.start_timeout_s:.0f} s:\n"
                                           f"{self.log_tail()}")
                else:
                    time.sleep(0.2)
            self.start_seconds = time.monotonic() - started
        except BaseException:
            self.stop()
            raise
        return self

    def log_tail(self, chars: int = 3000) -> str:
        """The end of the cluster's own log (not the containers')."""
        text = self.log_path.read_text(errors="replace") if self.log_path.exists() else "(no log)"
        return text[-chars:]

    def container_logs(self, application_id: str | None = None, name: str = "*") -> dict[str, str]:
        """The containers' log files (``stdout``, ``stderr``, or ``name``) of ``application_id`` (of
        every application when ``None``), by ``<container>/<file>``; the first container of an
        application is its ApplicationMaster (in cluster mode, the driver)."""
        pattern = f"yarn/data/*/*/*-logDir-nm-*/{application_id or 'application_*'}/container_*/{name}"
        return {f"{p.parent.name}/{p.name}": p.read_text(errors="replace")
                for p in sorted(self.directory.glob(pattern)) if p.is_file()}

    def applications(self) -> list[str]:
        """The ids of the applications that ran containers, in order."""
        return sorted({p.name for p in self.directory.glob("yarn/data/*/*/*-logDir-nm-*/application_*")})

    def processes(self) -> list[int]:
        """The processes still running in the cluster's directory (containers, their workers)."""
        root = str(self.directory.resolve())
        found = []
        for entry in os.listdir("/proc"):
            if entry.isdigit() and int(entry) != os.getpid():
                with contextlib.suppress(OSError):
                    if os.readlink(f"/proc/{entry}/cwd").startswith(root):
                        found.append(int(entry))
        return found

    def stop(self) -> None:
        """Stop the cluster (its process group: SIGTERM, which stops the NodeManagers and their
        containers, SIGKILL after 20 s), then every process left in its directory, and remove it."""
        process, self._process = self._process, None
        if process is not None:
            stop_groups([process], 20.0)
        for sig, wait_s in ((signal.SIGTERM, 10.0), (signal.SIGKILL, 5.0)):
            for pid in self.processes():
                with contextlib.suppress(OSError):
                    group = os.getpgid(pid)
                    if group == os.getpgrp():  # never this process's own group
                        os.kill(pid, sig)
                    else:
                        os.killpg(group, sig)
            deadline = time.monotonic() + wait_s
            while self.processes() and time.monotonic() < deadline:
                time.sleep(0.1)
        shutil.rmtree(self.directory, ignore_errors=True)

    def __enter__(self) -> YarnCluster:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()
