"""Jars from Maven Central, resolved with ``mvn`` into the user's cache, never into a repository.

Two sets of jars are resolved this way, each by one explicit command (``make install`` runs
both) and never at import time or when a session or broker starts: Apache Kafka's for the local
broker (`streamsdsl.testing.kafka_dist`, ``streamsdsl kafka-jars``) and Spark's Kafka connector
for ``kafka.connector = "jvm"`` (`streamsdsl.runtime.jvm_connector`, ``streamsdsl kafka-connector``).

The cache is ``$STREAMSDSL_CACHE_DIR``, else ``$XDG_CACHE_HOME/streamsdsl``, else
``~/.cache/streamsdsl``:

>>> import os
>>> os.environ[CACHE_ENV] = "/tmp/some-cache"
>>> str(cache_dir())
'/tmp/some-cache'
>>> del os.environ[CACHE_ENV]

`resolve` writes a throw-away ``pom.xml`` listing the artifacts and runs Maven's
``dependency:copy-dependencies`` (runtime scope: test jars an artifact's pom names are left
out, which ``dependency:get`` would fetch), into a temporary directory renamed into place, so an
interrupted or concurrent run never leaves a partial directory.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path

__all__ = ["CACHE_ENV", "cache_dir", "pom", "resolve"]

#: Environment variable naming the cache directory.
CACHE_ENV = "STREAMSDSL_CACHE_DIR"


def cache_dir() -> Path:
    """``$STREAMSDSL_CACHE_DIR``, else ``$XDG_CACHE_HOME/streamsdsl``, else ``~/.cache/streamsdsl``."""
    explicit = os.environ.get(CACHE_ENV, "").strip()
    if explicit:
        return Path(explicit).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME", "").strip()
    return (Path(xdg) if xdg else Path.home() / ".cache") / "streamsdsl"


def pom(name: str, artifacts: Sequence[str]) -> str:
    """A ``pom.xml`` of packaging ``pom`` depending on ``artifacts`` (``group:artifact:version``).

    >>> print(pom("x", ["org.example:lib:1.0"]).splitlines()[7].strip())
    <dependency><groupId>org.example</groupId><artifactId>lib</artifactId><version>1.0</version></dependency>
    """
    dependencies = []
    for coordinates in artifacts:
        group, artifact, version = coordinates.split(":")
        dependencies.append(f"    <dependency><groupId>{group}</groupId><artifactId>{artifact}</artifactId>"
                            f"<version>{version}</version></dependency>")
    body = "\n".join(dependencies)
    return f"""\
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>streamsdsl</groupId>
  <artifactId>{name}</artifactId>
  <version>0</version>
  <packaging>pom</packaging>
  <dependencies>
{body}
  </dependencies>
</project>
"""


def resolve(artifacts: Sequence[str], target: Path, *, error: type[Exception], what: str) -> Path:
    """Resolve ``artifacts`` and their runtime dependencies into the directory ``target``.

    Nothing to do when ``target`` exists. ``what`` names the jars in error messages.

    Raises
    ------
    error
        When ``mvn`` is not installed or fails (the end of its output is in the message).
    """
    if target.is_dir():
        return target
    mvn = shutil.which("mvn")
    if mvn is None:
        raise error(
            f"resolving {what} needs Maven (mvn), which is not on PATH: install it (apt-get install maven) and run "
            "the command again."
        )
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=".resolving-") as tmp:
        pom_file = Path(tmp) / "pom.xml"
        pom_file.write_text(pom(target.name, artifacts))
        argv = [
            mvn, "-B", "-q", "-f", str(pom_file), "dependency:copy-dependencies",
            "-DincludeScope=runtime", f"-DoutputDirectory={Path(tmp) / 'jars'}",
        ]
        done = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            tail = (done.stdout + done.stderr).strip()[-1500:]
            raise error(
                f"mvn could not resolve {what} ({', '.join(artifacts)}) from Maven Central (exit code "
                f"{done.returncode}); is Maven Central reachable, and is that version published? mvn said:\n{tail}"
            )
        try:
            os.rename(Path(tmp) / "jars", target)
        except OSError:
            if not target.is_dir():  # else a concurrent run put them there first
                raise
    return target
