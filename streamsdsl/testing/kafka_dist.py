"""Apache Kafka for the local broker: its jars from Maven Central, its configuration, its image.

The jars of ``org.apache.kafka:kafka_2.13`` `KAFKA_VERSION` and its runtime dependencies are
resolved with ``mvn`` into a cache outside the repository, ``$STREAMSDSL_CACHE_DIR`` (default
``$XDG_CACHE_HOME/streamsdsl``, else ``~/.cache/streamsdsl``) ``/kafka-<version>/libs``, by one
explicit command, `RESOLVE_COMMAND` (``make install`` runs it). Nothing is downloaded at import
time or when a broker starts: `kafka_libs` raises `KafkaJarsMissingError` naming the command.

Why 4.4.0: the newest ``kafka_2.13`` Maven Central served when the broker moved to Apache Kafka
(4.0.0 … 4.4.0 resolved); a 4.x broker runs on the machine's Java 17, which 4.x requires.

The same jars serve the two brokers `local_kafka` starts itself: a JVM child process
(`format_argv` then `broker_argv`, the configuration from `server_properties`) and, when a
Docker engine answers but no Kafka image can be pulled, a container of an image built locally
with no pull (`write_image_context`: ``FROM scratch``, a JRE made with ``jlink`` from the
installed JDK, the shared libraries it links to, ``/bin/sh`` to run the two steps, the jars).
"""

from __future__ import annotations

import base64
import hashlib
import os
import shutil
import subprocess
import uuid
from pathlib import Path

from streamsdsl import maven
from streamsdsl.errors import StreamsDslError
from streamsdsl.maven import CACHE_ENV, cache_dir

__all__ = [
    "CACHE_ENV",
    "KAFKA_VERSION",
    "RESOLVE_COMMAND",
    "BrokerStartError",
    "KafkaJarsMissingError",
    "kafka_libs",
    "resolve_kafka_jars",
]

#: The Apache Kafka release the local broker runs (``org.apache.kafka:kafka_2.13``).
KAFKA_VERSION = "4.4.0"
#: The slf4j 1.7 binding to log4j 2 that Kafka's own distribution ships (the Maven artifact
#: leaves the binding to the application): without it the broker's errors go nowhere. Its
#: version is the log4j that ``kafka_2.13`` 4.4.0 depends on.
_LOG4J_SLF4J = ("org.apache.logging.log4j", "log4j-slf4j-impl", "2.25.5")
#: The command that resolves the jars (also run by ``make install``).
RESOLVE_COMMAND = "streamsdsl kafka-jars"
#: JVM options of both brokers: a modest heap, the serial collector and the client compiler
#: only (measured: ready 3.6 s after start instead of 5.3 s with the JVM's defaults).
JVM_OPTIONS = (
    "-Xms128m",
    "-Xmx512m",
    "-XX:+UseSerialGC",
    "-XX:TieredStopAtLevel=1",
    "-XX:-UsePerfData",
    "-Djava.awt.headless=true",
)
#: log4j 2 configuration of both brokers: warnings and errors to standard output.
LOG4J2_PROPERTIES = """\
status = warn
appender.out.type = Console
appender.out.name = out
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = warn
rootLogger.appenderRef.out.ref = out
"""
#: The JDK modules of the image's JRE (Kafka and log4j need java.desktop for java.beans).
JRE_MODULES = (
    "java.base,java.desktop,java.instrument,java.logging,java.management,java.naming,java.net.http,"
    "java.rmi,java.scripting,java.security.jgss,java.security.sasl,java.sql,java.xml,jdk.crypto.ec,"
    "jdk.management,jdk.net,jdk.unsupported,jdk.zipfs"
)
#: Where the local image keeps its files, and its entry point: format the log directory (once:
#: a restarted container keeps it), then run the broker. The configuration comes in the
#: environment (``KAFKA_SERVER_PROPERTIES``, ``CLUSTER_ID``); ``printf`` is a shell built-in.
_IMAGE_START = """\
set -e
printf '%s\\n' "$KAFKA_SERVER_PROPERTIES" > /opt/kafka/server.properties
java {jvm} -cp '/opt/kafka/libs/*' kafka.tools.StorageTool format --standalone --ignore-formatted \\
    -t "$CLUSTER_ID" -c /opt/kafka/server.properties
exec java {jvm} -cp '/opt/kafka/libs/*' kafka.Kafka /opt/kafka/server.properties
"""
#: Repository of the locally built image.
IMAGE_REPOSITORY = "streamsdsl/kafka-broker"
_IMAGE_DOCKERFILE = """\
FROM scratch
COPY rootfs/ /
ENV PATH=/opt/jre/bin:/bin
ENTRYPOINT ["/bin/sh", "/opt/kafka/start.sh"]
"""


class BrokerStartError(StreamsDslError, RuntimeError):
    """The local broker could not be started or did not answer in time."""


class KafkaJarsMissingError(BrokerStartError):
    """Apache Kafka's jars are not in the cache, or ``mvn`` could not resolve them."""


# -- the cache ------------------------------------------------------------------------------
def kafka_home(version: str = KAFKA_VERSION) -> Path:
    """``<cache>/kafka-<version>`` (`streamsdsl.maven.cache_dir`): the jars are in its ``libs`` directory."""
    return cache_dir() / f"kafka-{version}"


def kafka_libs(version: str = KAFKA_VERSION) -> Path:
    """The directory of Kafka's resolved jars.

    Raises
    ------
    KafkaJarsMissingError
        When they were not resolved: the message names `RESOLVE_COMMAND`.
    """
    libs = kafka_home(version) / "libs"
    if not libs.is_dir():
        raise KafkaJarsMissingError(
            f"Apache Kafka {version}'s jars are not in {libs}: run `{RESOLVE_COMMAND}` (or `make install`) once to "
            f"resolve them from Maven Central with mvn, or set BOOTSTRAP_SERVERS=host:port to use a running broker."
        )
    return libs


def resolve_kafka_jars(version: str = KAFKA_VERSION) -> Path:
    """Resolve ``kafka_2.13`` ``version`` and its runtime dependencies with ``mvn``; return `kafka_libs`.

    Does nothing when they are in the cache already (`streamsdsl.maven.resolve`: never a partial
    ``libs`` directory).

    Raises
    ------
    KafkaJarsMissingError
        When ``mvn`` is not installed or fails (its output's end is in the message).
    """
    return maven.resolve(
        [f"org.apache.kafka:kafka_2.13:{version}", ":".join(_LOG4J_SLF4J)], kafka_home(version) / "libs",
        error=KafkaJarsMissingError, what=f"Apache Kafka {version}'s jars",
    )


# -- the broker's configuration --------------------------------------------------------------
def random_cluster_id() -> str:
    """A cluster id as ``kafka-storage random-uuid`` prints one (22 characters, URL-safe base64),
    never starting with ``-``: as Kafka's ``Uuid.randomUuid`` does, because a command line would
    read such an id as an option (``kafka-storage format -t -x...`` fails: one start in 64)."""
    while True:
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cluster_id.startswith("-"):
            return cluster_id


def server_properties(port: int, controller_port: int, log_dir: str) -> str:
    """``server.properties`` of a single-node KRaft broker (broker and controller) on 127.0.0.1.

    Replication factor 1 for the internal topics (offsets, transaction state, share groups),
    no initial rebalance delay (a consumer group forms at once), one partition by default, and
    no time-based retention (``log.retention.ms=-1``): Kafka deletes a segment whose newest
    record is older than the retention by its *timestamp*, so the small event times tests use
    (1970) were deleted by the first retention check, 30 s after start (measured: a query then
    found its input gone, its earliest offset at the end).
    """
    settings = {
        "node.id": "1",
        "process.roles": "broker,controller",
        "listeners": f"PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{port}",
        "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
        "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": "PLAINTEXT",
        "controller.quorum.bootstrap.servers": f"127.0.0.1:{controller_port}",
        "log.dirs": log_dir,
        "num.partitions": "1",
        "offsets.topic.replication.factor": "1",
        "transaction.state.log.replication.factor": "1",
        "transaction.state.log.min.isr": "1",
        "share.coordinator.state.topic.replication.factor": "1",
        "share.coordinator.state.topic.min.isr": "1",
        "group.initial.rebalance.delay.ms": "0",
        "log.retention.ms": "-1",
    }
    return "".join(f"{key}={value}\n" for key, value in settings.items())


def java_executable() -> str:
    """``$JAVA_HOME/bin/java``, else ``java`` on PATH.

    Raises
    ------
    BrokerStartError
        When there is none.
    """
    home = os.environ.get("JAVA_HOME", "").strip()
    if home and os.access(os.path.join(home, "bin", "java"), os.X_OK):
        return os.path.join(home, "bin", "java")
    java = shutil.which("java")
    if java is None:
        raise BrokerStartError(
            "the local Kafka broker needs Java 17 (java is not on PATH and JAVA_HOME is not set): "
            "apt-get install openjdk-17-jdk-headless, or set BOOTSTRAP_SERVERS=host:port."
        )
    return java


def _jvm(java: str, libs: Path, log4j: Path) -> list[str]:
    return [java, *JVM_OPTIONS, f"-Dlog4j2.configurationFile={log4j}", "-cp", f"{libs}{os.sep}*"]


def format_argv(java: str, libs: Path, log4j: Path, properties: Path, cluster_id: str) -> list[str]:
    """``kafka-storage format --standalone``: the log directory of a new single-node cluster."""
    return [*_jvm(java, libs, log4j), "kafka.tools.StorageTool", "format", "--standalone",
            "-t", cluster_id, "-c", str(properties)]


def broker_argv(java: str, libs: Path, log4j: Path, properties: Path) -> list[str]:
    """``kafka-server-start``: the broker (``kafka.Kafka server.properties``)."""
    return [*_jvm(java, libs, log4j), "kafka.Kafka", str(properties)]


# -- the locally built image -------------------------------------------------------------------
def _jdk_bin() -> Path:
    """The ``bin`` directory of the JDK whose ``java`` runs the brokers (``jlink`` is there)."""
    return Path(os.path.realpath(java_executable())).parent


def image_tag(libs: Path) -> str:
    """``streamsdsl/kafka-broker:<version>-<hash>``: the hash covers the jars, the JDK and the image recipe."""
    digest = hashlib.sha256()
    for jar in sorted(libs.iterdir()):
        digest.update(f"{jar.name}:{jar.stat().st_size}\n".encode())
    digest.update(str(_jdk_bin()).encode())
    digest.update((_IMAGE_START + _IMAGE_DOCKERFILE + LOG4J2_PROPERTIES + JRE_MODULES).encode())
    return f"{IMAGE_REPOSITORY}:{KAFKA_VERSION}-{digest.hexdigest()[:12]}"


def _shared_libraries(files: list[Path]) -> set[str]:
    """Every shared library (and the dynamic loader) that ``ldd`` resolves for ``files``."""
    found: set[str] = set()
    for path in files:
        done = subprocess.run(["ldd", str(path)], capture_output=True, text=True, check=False)
        for line in done.stdout.splitlines():
            parts = line.split()
            if "=>" in parts:
                target = parts[parts.index("=>") + 1]
                if target.startswith("/"):
                    found.add(target)
            elif parts and parts[0].startswith("/"):
                found.add(parts[0])  # the loader: /lib64/ld-linux-x86-64.so.2
    return found


def _is_elf(path: Path) -> bool:
    with open(path, "rb") as f:
        return f.read(4) == b"\x7fELF"


def write_image_context(context: Path, libs: Path) -> None:
    """Write the build context of the local image into ``context`` (an empty directory).

    ``rootfs/`` becomes the image's root: ``/opt/jre`` (``jlink`` of `JRE_MODULES`), every
    shared library the JRE and ``/bin/sh`` link to at the path ``ldd`` names, ``/bin/sh`` (the
    machine's, to run the start script), ``/opt/kafka/libs`` (the jars), ``/opt/kafka/start.sh``
    and ``/tmp``. Nothing is pulled: the Dockerfile starts ``FROM scratch``.

    Raises
    ------
    BrokerStartError
        When ``jlink`` is missing or fails.
    """
    root = context / "rootfs"
    jlink = _jdk_bin() / "jlink"
    if not jlink.exists():
        raise BrokerStartError(f"building the local Kafka image needs jlink (a JDK), not found next to {_jdk_bin()}")
    jre = root / "opt" / "jre"
    done = subprocess.run(
        [str(jlink), "--add-modules", JRE_MODULES, "--strip-debug", "--no-man-pages", "--no-header-files",
         "--compress=2", "--output", str(jre)],
        capture_output=True, text=True, check=False,
    )
    if done.returncode != 0:
        raise BrokerStartError(f"jlink failed (exit code {done.returncode}): {(done.stdout + done.stderr)[-800:]}")
    shell = Path(os.path.realpath("/bin/sh"))
    elves = [p for p in jre.rglob("*") if p.is_file() and not p.is_symlink() and _is_elf(p)]
    for lib in sorted(_shared_libraries([*elves, shell])):
        if Path(os.path.realpath(lib)).is_relative_to(jre.resolve()):
            continue  # the JRE's own libraries (libjli.so) are in it already
        target = root / lib.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(os.path.realpath(lib), target)
        target.chmod(0o755)
    (root / "bin").mkdir(parents=True, exist_ok=True)
    shutil.copyfile(shell, root / "bin" / "sh")
    (root / "bin" / "sh").chmod(0o755)
    kafka = root / "opt" / "kafka"
    shutil.copytree(libs, kafka / "libs")
    log4j = kafka / "log4j2.properties"
    log4j.write_text(LOG4J2_PROPERTIES)
    jvm = " ".join([*JVM_OPTIONS, "-Dlog4j2.configurationFile=/opt/kafka/log4j2.properties"])
    (kafka / "start.sh").write_text(_IMAGE_START.format(jvm=jvm))
    (root / "tmp").mkdir()
    (root / "tmp").chmod(0o1777)
    (context / "Dockerfile").write_text(_IMAGE_DOCKERFILE)


def image_environment(port: int, controller_port: int) -> dict[str, str]:
    """The environment of the local image's container: its configuration and a new cluster id."""
    return {
        "KAFKA_SERVER_PROPERTIES": server_properties(port, controller_port, "/tmp/kraft-combined-logs"),
        "CLUSTER_ID": random_cluster_id(),
    }
