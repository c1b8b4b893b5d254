"""Spark's Kafka connector in the user's cache: `resolve_connector`, `connector_jars`, the command.

No network: ``mvn`` is a small script on PATH (the real resolution runs in ``make install`` and
is checked by ``integration/test_jvm_connector.py``).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from pyspark.version import __version__ as PYSPARK

from streamsdsl import cli
from streamsdsl.runtime.jvm_connector import ConnectorJarsMissingError, connector_jars, resolve_connector
from streamsdsl.runtime.session import configure_spark
from tests._support import fake_mvn


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("STREAMSDSL_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"




#: What `mvn dependency:copy-dependencies` puts out for spark-sql-kafka-0-10 (runtime scope).
RESOLVED = [
    f"spark-sql-kafka-0-10_2.13-{PYSPARK}.jar", f"spark-token-provider-kafka-0-10_2.13-{PYSPARK}.jar",
    "kafka-clients-3.9.2.jar", "commons-pool2-2.13.1.jar", "scala-library-2.13.15.jar",
    "hadoop-client-runtime-3.5.0.jar", f"spark-tags_2.13-{PYSPARK}.jar", "zstd-jni-1.5.7-6.jar",
]


def test_resolve_puts_the_connector_of_the_installed_pyspark_in_the_cache(
    cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One mvn call for spark-sql-kafka-0-10_2.13 at the installed PySpark's version; the jars land
    in ``<cache>/spark-sql-kafka-0-10_2.13-<version>``; resolved once."""
    touch = " ".join(f'"$out/{j}"' for j in RESOLVED)
    fake_mvn(tmp_path, monkeypatch, f'''
for a in "$@"; do case "$a" in -f) next=pom;; -DoutputDirectory=*) out="${{a#-DoutputDirectory=}}";;
  *) [ "$next" = pom ] && cp "$a" {tmp_path}/pom.xml; next=;; esac; done
mkdir -p "$out" && touch {touch}''')
    directory = resolve_connector()
    assert directory == cache / f"spark-sql-kafka-0-10_2.13-{PYSPARK}"
    assert sorted(p.name for p in directory.iterdir()) == sorted(RESOLVED)
    assert ("<dependency><groupId>org.apache.spark</groupId><artifactId>spark-sql-kafka-0-10_2.13</artifactId>"
            f"<version>{PYSPARK}</version></dependency>") in (tmp_path / "pom.xml").read_text()
    (tmp_path / "bin" / "mvn").write_text("#!/bin/sh\nexit 99\n")
    assert resolve_connector() == directory  # there already: mvn is not run

    # The session loads the connector and what Spark does not ship, never a second Scala or Hadoop.
    names = [os.path.basename(j) for j in connector_jars()]
    assert names == sorted([f"spark-sql-kafka-0-10_2.13-{PYSPARK}.jar",
                            f"spark-token-provider-kafka-0-10_2.13-{PYSPARK}.jar",
                            "kafka-clients-3.9.2.jar", "commons-pool2-2.13.1.jar"])


def test_configure_spark_adds_the_cached_connector(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A builder passed to configure_spark gets the cached connector's jars after its own and the operator's."""
    directory = cache / f"spark-sql-kafka-0-10_2.13-{PYSPARK}"
    directory.mkdir(parents=True)
    for jar in RESOLVED:
        (directory / jar).touch()

    class Builder:
        def __init__(self) -> None:
            self._options = {"spark.jars": "/opt/other.jar"}

        def config(self, key: str, value: str) -> Builder:
            self._options[key] = value
            return self

    jars = configure_spark(Builder())._options["spark.jars"].split(",")
    assert jars[0] == "/opt/other.jar" and jars[1].endswith("streamsdsl-operator.jar")
    assert [os.path.basename(j) for j in jars[2:]] == [os.path.basename(j) for j in connector_jars()]
    assert len(jars) == 6


def test_nothing_cached_nothing_added(cache: Path) -> None:
    assert connector_jars() == []
    assert connector_jars("9.9.9") == []


def test_a_version_maven_central_does_not_serve(cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    """mvn fails: the error names the artifact and the Spark version, and the command exits 1."""
    fake_mvn(tmp_path, monkeypatch, 'echo "Could not find artifact org.apache.spark:spark-sql-kafka-0-10_2.13:jar"; exit 1')
    with pytest.raises(ConnectorJarsMissingError) as info:
        resolve_connector("4.3.0")
    assert str(info.value) == (
        "mvn could not resolve Spark's Kafka connector for Spark 4.3.0 (org.apache.spark:spark-sql-kafka-0-10_2.13:"
        "4.3.0) from Maven Central (exit code 1); is Maven Central reachable, and is that version published? mvn "
        "said:\nCould not find artifact org.apache.spark:spark-sql-kafka-0-10_2.13:jar"
    )
    assert not (cache / "spark-sql-kafka-0-10_2.13-4.3.0").exists()
    assert cli.main(["kafka-connector"]) == 1
    assert capsys.readouterr().err.startswith(
        f"streamsdsl kafka-connector: mvn could not resolve Spark's Kafka connector for Spark {PYSPARK} "
    )
    assert cli.main(["kafka-connector", "now"]) == 2
    assert capsys.readouterr().err == "streamsdsl kafka-connector: no arguments expected (got now)\n"

