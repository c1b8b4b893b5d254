"""A stand-in for the official Spark image, built locally with no pull.

examples/deploy/Dockerfile starts ``FROM spark:4.2.0-scala2.13-java17-python3-ubuntu`` (the Docker
Official Image of Spark). Where no registry answers, the tests build it ``FROM`` a local image
with that image's layout instead (`write_base_context`), made ``FROM scratch`` of this machine's
files:

* ``/opt/spark``, owned by the spark user: ``bin``, ``sbin``, ``jars`` and ``python/lib``
  (``pyspark.zip``, py4j's zip) of the installed PySpark, which is a Spark distribution;
  ``work-dir``, the working directory;
* ``/opt/java/openjdk``: a Java 17 runtime made with ``jlink`` from the installed JDK
  (`JRE_MODULES`), where the official image's Eclipse Temurin JDK is;
* ``python3.11`` (``/usr/local``): this machine's interpreter with its standard library (no
  site-packages: the official image's Python has no pandas or pyarrow either), ``ensurepip``
  included, so ``python3.11 -m venv`` works;
* ``bash``, ``sh``, ``tini`` and the few commands Spark's scripts and the Dockerfile run, each with
  the shared libraries ``ldd`` names;
* ``/opt/entrypoint.sh``: the official entry point's three cases (``driver``, ``executor``,
  anything else run as given), without ``gosu`` (the image runs as ``spark``);
* users ``root`` and ``spark`` (uid 185), ``JAVA_HOME``, ``SPARK_HOME``, ``PATH``.

Differences that remain: Ubuntu 22.04 and its ``python3`` 3.10 are absent (``python3`` is
3.11 here, so the Dockerfile's ``apt-get`` step is skipped), and so are ``apt``, ``gosu``,
Kerberos and the rest of Ubuntu.

The image is tagged by a hash of what it is built from (`base_image_tag`) and built only when no
image has that tag (`build_base_image`): every later test run on the machine reuses it.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterable
from pathlib import Path

from streamsdsl.testing.kafka_dist import _is_elf, _jdk_bin, _shared_libraries

__all__ = ["BASE_REPOSITORY", "JRE_MODULES", "base_image_tag", "build_base_image", "write_base_context"]

#: Repository of the stand-in base image.
BASE_REPOSITORY = "streamsdsl/spark-base"
#: The JDK modules of the runtime: Java SE, and what Spark, Hadoop's client and RocksDB's JNI use
#: beyond it (``sun.misc.Unsafe``, management, Kerberos, DNS, zip file systems, the vector API).
JRE_MODULES = (
    "java.se,jdk.unsupported,jdk.management,jdk.management.agent,jdk.crypto.ec,jdk.crypto.cryptoki,"
    "jdk.naming.dns,jdk.security.auth,jdk.security.jgss,jdk.zipfs,jdk.localedata,jdk.charsets,"
    "jdk.incubator.vector,jdk.jfr,jdk.httpserver,jdk.jdwp.agent"
)
#: Commands the image has besides bash and sh: what Spark's scripts, the entry point and a
#: Dockerfile's RUN lines use.
COMMANDS = (
    "basename", "cat", "chmod", "cp", "cut", "dirname", "env", "find", "getent", "grep", "head", "id",
    "ln", "ls", "mkdir", "mktemp", "mv", "ps", "rm", "sed", "sleep", "sort", "tail", "tini", "tr", "uname",
    "wc",
)
#: Debian packages whose shared libraries every Ubuntu image has, and the wheels of PySpark's
#: dependencies link to (glibc's compatibility libraries libpthread, libdl and librt among them,
#: which nothing in this image links to itself).
LIBRARY_PACKAGES = ("libc6", "libstdc++6", "libgcc-s1", "zlib1g")
#: Standard library directories left out of the image's Python.
_STDLIB_SKIP = {"site-packages", "test", "idlelib", "tkinter", "turtledemo", "__phello__", "lib2to3"}
SPARK_UID = 185

_ENTRYPOINT = """\
#!/bin/bash
# The official Spark image's entry point, in short: Spark's Kubernetes scheduler starts a driver
# pod with `driver <spark-submit arguments>` and executor pods with `executor` (their settings in
# the environment); any other command runs as given.
set -eo pipefail
SPARK_CLASSPATH="${SPARK_CLASSPATH:+$SPARK_CLASSPATH:}${SPARK_HOME}/conf:${SPARK_HOME}/jars/*:$PWD"
case "$1" in
  driver)
    shift 1
    exec /usr/bin/tini -s -- "$SPARK_HOME/bin/spark-submit" \\
      --conf "spark.driver.bindAddress=$SPARK_DRIVER_BIND_ADDRESS" \\
      --conf "spark.executorEnv.SPARK_DRIVER_POD_IP=$SPARK_DRIVER_BIND_ADDRESS" \\
      --deploy-mode client "$@"
    ;;
  executor)
    shift 1
    exec /usr/bin/tini -s -- "$JAVA_HOME/bin/java" $SPARK_EXECUTOR_JAVA_OPTS \\
      -Xms"$SPARK_EXECUTOR_MEMORY" -Xmx"$SPARK_EXECUTOR_MEMORY" -cp "$SPARK_CLASSPATH" \\
      org.apache.spark.scheduler.cluster.k8s.KubernetesExecutorBackend \\
      --driver-url "$SPARK_DRIVER_URL" --executor-id "$SPARK_EXECUTOR_ID" --cores "$SPARK_EXECUTOR_CORES" \\
      --app-id "$SPARK_APPLICATION_ID" --hostname "$SPARK_EXECUTOR_POD_IP" \\
      --resourceProfileId "$SPARK_RESOURCE_PROFILE_ID" --podName "$SPARK_EXECUTOR_POD_NAME"
    ;;
  *)
    exec "$@"
    ;;
esac
"""

_DOCKERFILE = f"""\
FROM scratch
COPY rootfs/ /
COPY --chown={SPARK_UID}:{SPARK_UID} spark/ /opt/spark/
ENV JAVA_HOME=/opt/java/openjdk \\
    SPARK_HOME=/opt/spark \\
    PATH=/opt/java/openjdk/bin:/usr/local/bin:/usr/bin \\
    LANG=C.UTF-8
WORKDIR /opt/spark/work-dir
USER {SPARK_UID}
ENTRYPOINT ["/opt/entrypoint.sh"]
"""


def _spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def _python_home() -> Path:
    """The prefix of the interpreter this environment was made from (``sys.base_prefix``)."""
    return Path(sys.base_prefix)


def base_image_tag() -> str:
    """``streamsdsl/spark-base:<pyspark>-<hash>``: the hash covers the PySpark, Python and JDK
    installations used and this module's recipe."""
    import pyspark

    digest = hashlib.sha256()
    for part in (pyspark.__version__, sys.version, str(_python_home()), os.path.realpath(_jdk_bin()),
                 Path(__file__).read_text()):
        digest.update(f"{part}\0".encode())
    return f"{BASE_REPOSITORY}:{pyspark.__version__}-{digest.hexdigest()[:12]}"


def _copy(source: Path, target: Path) -> None:
    """``source`` to ``target``: a hard link when both are on one file system, else a copy."""
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.link(source, target)
    except OSError:
        shutil.copy2(source, target)


def _copy_tree(source: Path, target: Path, skip: Iterable[str] = ()) -> None:
    skipped = set(skip)
    for dirpath, dirnames, filenames in os.walk(source):
        dirnames[:] = [d for d in dirnames if d not in skipped]
        rel = Path(dirpath).relative_to(source)
        (target / rel).mkdir(parents=True, exist_ok=True)
        for name in filenames:
            src = Path(dirpath) / name
            if src.is_symlink():
                os.symlink(os.readlink(src), target / rel / name)
            else:
                _copy(src, target / rel / name)


def write_base_context(context: Path) -> None:
    """Write the stand-in base image's build context into ``context`` (an empty directory):
    ``Dockerfile`` (``FROM scratch``), ``rootfs/``, the image's root, and ``spark/``, its
    ``/opt/spark`` (owned by the spark user, as in the official image); see the module's docstring.

    Raises
    ------
    RuntimeError
        When ``jlink`` fails.
    """
    root = context / "rootfs"
    # -- Java
    java = root / "opt" / "java" / "openjdk"
    java.parent.mkdir(parents=True)
    done = subprocess.run(
        [str(_jdk_bin() / "jlink"), "--add-modules", JRE_MODULES, "--strip-debug", "--no-man-pages",
         "--no-header-files", "--output", str(java)],
        capture_output=True, text=True, check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"jlink failed (exit code {done.returncode}): {(done.stdout + done.stderr)[-800:]}")
    # -- Spark
    spark_home, spark = _spark_home(), context / "spark"  # /opt/spark, owned by spark as in the official image
    for name in ("bin", "sbin", "jars"):
        _copy_tree(spark_home / name, spark / name)
    _copy_tree(spark_home / "python" / "lib", spark / "python" / "lib")
    (spark / "RELEASE").write_text(f"Spark {_pyspark_version()} (the pip package's files)\n")
    (spark / "work-dir").mkdir()
    (spark / "work-dir").chmod(0o777)
    # -- Python: /usr/local/bin/python3.11 finds its standard library in /usr/local/lib/python3.11
    home = _python_home()
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    local = root / "usr" / "local"
    _copy(home / "bin" / version, local / "bin" / version)
    os.symlink(version, local / "bin" / "python3")
    _copy_tree(home / "lib" / version, local / "lib" / version, skip=_STDLIB_SKIP)
    (local / "lib" / version / "site-packages").mkdir()
    # -- commands
    usr_bin = root / "usr" / "bin"
    for command in ("bash", "dash", *COMMANDS):
        path = shutil.which(command)
        if path is None:
            raise RuntimeError(f"the stand-in Spark image needs {command!r}, which this machine lacks")
        _copy(Path(os.path.realpath(path)), usr_bin / command)
    os.symlink("usr/bin", root / "bin")
    os.symlink("dash", usr_bin / "sh")
    # -- shared libraries: libpython (RUNPATH is the build machine's prefix, so into a default
    #    directory), then everything ldd names for the ELF files of the image
    for lib in (home / "lib").glob("libpython*.so*"):
        _copy(lib.resolve(), root / "usr" / "lib" / "x86_64-linux-gnu" / lib.name)
    elves = [p for p in root.rglob("*") if p.is_file() and not p.is_symlink() and _is_elf(p)
             and not p.is_relative_to(spark / "jars")]
    for lib in sorted(_shared_libraries(elves) | _package_libraries()):
        if Path(os.path.realpath(lib)).is_relative_to(java.resolve()) or lib.startswith(str(home)):
            continue
        target = root / lib.lstrip("/")
        if not target.exists():
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(os.path.realpath(lib), target)
            target.chmod(0o755)
    # -- the rest of the official layout
    etc = root / "etc"
    etc.mkdir(exist_ok=True)
    (etc / "passwd").write_text(f"root:x:0:0:root:/root:/bin/bash\nspark:x:{SPARK_UID}:{SPARK_UID}::/nonexistent:/bin/false\n")
    (etc / "group").write_text(f"root:x:0:\nspark:x:{SPARK_UID}:\n")
    (root / "opt" / "entrypoint.sh").write_text(_ENTRYPOINT)
    (root / "opt" / "entrypoint.sh").chmod(0o755)
    for name in ("tmp", "root"):
        (root / name).mkdir(exist_ok=True)
    (root / "tmp").chmod(0o1777)
    (context / "Dockerfile").write_text(_DOCKERFILE)


def _package_libraries() -> set[str]:
    """The shared libraries (``*.so*`` files, not glibc's character set converters) of
    `LIBRARY_PACKAGES`, as ``dpkg -L`` lists them."""
    done = subprocess.run(["dpkg", "-L", *LIBRARY_PACKAGES], capture_output=True, text=True, check=False)
    return {line for line in done.stdout.splitlines()
            if ".so" in os.path.basename(line) and "/gconv/" not in line and not line.endswith(".py")
            and os.path.isfile(line)}


def _pyspark_version() -> str:
    import pyspark

    return str(pyspark.__version__)


def build_base_image(client: object | None = None) -> str:
    """The stand-in base image's tag, after building it unless an image has that tag."""
    import docker

    from streamsdsl.testing.brokers import _docker_host

    tag = base_image_tag()
    own = client is None
    engine: docker.DockerClient = docker.DockerClient(base_url=_docker_host(), timeout=600) if own else client  # type: ignore[assignment]
    try:
        try:
            engine.images.get(tag)
            return tag
        except docker.errors.ImageNotFound:
            pass
        with tempfile.TemporaryDirectory(prefix="streamsdsl-spark-base-") as tmp:
            write_base_context(Path(tmp))
            engine.images.build(path=tmp, tag=tag, pull=False, rm=True, forcerm=True)
        return tag
    finally:
        if own:
            engine.close()
