"""Unit tests of `streamsdsl.testing.kafka_dist`: the jar cache, the mvn call, the broker's configuration.

No network and no broker: ``mvn`` is replaced by small scripts on PATH.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from streamsdsl import cli
from streamsdsl.testing import kafka_dist
from tests._support import fake_mvn


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty cache of the test's own (STREAMSDSL_CACHE_DIR)."""
    monkeypatch.setenv("STREAMSDSL_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"




class TestCache:
    """Where the jars go, and what happens when they are not there."""

    def test_cache_dir_order(self, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
        """STREAMSDSL_CACHE_DIR, else XDG_CACHE_HOME/streamsdsl, else ~/.cache/streamsdsl."""
        monkeypatch.setenv("STREAMSDSL_CACHE_DIR", str(tmp_path / "explicit"))
        monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
        assert kafka_dist.kafka_home() == tmp_path / "explicit" / "kafka-4.4.0"
        monkeypatch.delenv("STREAMSDSL_CACHE_DIR")
        assert kafka_dist.kafka_home() == tmp_path / "xdg" / "streamsdsl" / "kafka-4.4.0"
        monkeypatch.delenv("XDG_CACHE_HOME")
        monkeypatch.setenv("HOME", str(tmp_path / "home"))
        assert kafka_dist.kafka_home() == tmp_path / "home" / ".cache" / "streamsdsl" / "kafka-4.4.0"

    def test_missing_jars_name_the_command(self, cache: Path) -> None:
        """kafka_libs() without resolved jars: a BrokerStartError naming `streamsdsl kafka-jars`."""
        with pytest.raises(kafka_dist.KafkaJarsMissingError) as info:
            kafka_dist.kafka_libs()
        assert str(info.value) == (
            f"Apache Kafka 4.4.0's jars are not in {cache}/kafka-4.4.0/libs: run `streamsdsl kafka-jars` (or "
            "`make install`) once to resolve them from Maven Central with mvn, or set BOOTSTRAP_SERVERS=host:port "
            "to use a running broker."
        )
        assert isinstance(info.value, kafka_dist.BrokerStartError)
        assert isinstance(info.value, RuntimeError)


class TestResolve:
    """`resolve_kafka_jars`: one mvn call into a temporary directory, renamed into place."""

    def test_mvn_copies_the_runtime_dependencies_of_kafka(self, cache: Path, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
        """mvn gets the pom of kafka_2.13 4.4.0 (plus the log4j binding) and copy-dependencies; the jars land in libs."""
        fake_mvn(tmp_path, monkeypatch, f'''
echo "$@" > {tmp_path}/args
for a in "$@"; do case "$a" in -f) next=pom;; -DoutputDirectory=*) out="${{a#-DoutputDirectory=}}";;
  *) [ "$next" = pom ] && cp "$a" {tmp_path}/pom.xml; next=;; esac; done
mkdir -p "$out" && echo jar > "$out/kafka_2.13-4.4.0.jar"''')
        libs = kafka_dist.resolve_kafka_jars()
        assert libs == cache / "kafka-4.4.0" / "libs"
        assert sorted(p.name for p in libs.iterdir()) == ["kafka_2.13-4.4.0.jar"]
        assert sorted(p.name for p in libs.parent.iterdir()) == ["libs"]  # the temporary directory is gone
        args = (tmp_path / "args").read_text().split()
        assert args[:3] == ["-B", "-q", "-f"]
        assert args[4:6] == ["dependency:copy-dependencies", "-DincludeScope=runtime"]
        pom = (tmp_path / "pom.xml").read_text()
        assert (
            "<dependency><groupId>org.apache.kafka</groupId><artifactId>kafka_2.13</artifactId>"
            "<version>4.4.0</version></dependency>"
        ) in pom
        assert "<artifactId>log4j-slf4j-impl</artifactId><version>2.25.5</version>" in pom
        assert kafka_dist.kafka_libs() == libs

    def test_resolved_jars_are_not_resolved_again(self, cache: Path, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
        """With libs in the cache, mvn is not run."""
        (cache / "kafka-4.4.0" / "libs").mkdir(parents=True)
        fake_mvn(tmp_path, monkeypatch, "exit 99")
        assert kafka_dist.resolve_kafka_jars() == cache / "kafka-4.4.0" / "libs"

    def test_failing_mvn_is_an_error_with_its_output(self, cache: Path, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
        """mvn fails (offline): the error says so with the end of mvn's output; nothing is left in libs."""
        fake_mvn(tmp_path, monkeypatch, 'echo "Could not transfer artifact: repo1.maven.org: Name or service not known"; exit 1')
        with pytest.raises(kafka_dist.KafkaJarsMissingError) as info:
            kafka_dist.resolve_kafka_jars()
        assert str(info.value) == (
            "mvn could not resolve Apache Kafka 4.4.0's jars (org.apache.kafka:kafka_2.13:4.4.0, "
            "org.apache.logging.log4j:log4j-slf4j-impl:2.25.5) from Maven Central (exit code 1); is Maven Central "
            "reachable, and is that version published? mvn said:\n"
            "Could not transfer artifact: repo1.maven.org: Name or service not known"
        )
        assert not (cache / "kafka-4.4.0" / "libs").exists()

    def test_missing_mvn(self, cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        """Without mvn on PATH the error says how to install it."""
        monkeypatch.setattr(kafka_dist.shutil, "which", lambda name: None)
        with pytest.raises(kafka_dist.KafkaJarsMissingError) as info:
            kafka_dist.resolve_kafka_jars()
        assert str(info.value) == (
            "resolving Apache Kafka 4.4.0's jars needs Maven (mvn), which is not on PATH: install it "
            "(apt-get install maven) and run the command again."
        )

    def test_cli_prints_the_directory_or_the_error(self, cache: Path, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
        """`streamsdsl kafka-jars`: exit code 1 with the error, 0 with the directory, 2 with arguments."""
        fake_mvn(tmp_path, monkeypatch, "echo offline; exit 1")
        assert cli.main(["kafka-jars"]) == 1
        assert capsys.readouterr().err.startswith(
            "streamsdsl kafka-jars: mvn could not resolve Apache Kafka 4.4.0's jars (org.apache.kafka:kafka_2.13:4.4.0, "
        )
        (cache / "kafka-4.4.0" / "libs").mkdir(parents=True)
        assert cli.main(["kafka-jars"]) == 0
        assert capsys.readouterr().out == f"{cache}/kafka-4.4.0/libs\n"
        assert cli.main(["kafka-jars", "--now"]) == 2
        assert capsys.readouterr().err == "streamsdsl kafka-jars: no arguments expected (got --now)\n"


class TestBrokerConfiguration:
    """The single-node KRaft broker's properties and command lines."""

    def test_server_properties(self) -> None:
        """Broker and controller on 127.0.0.1, replication factor 1, no initial rebalance delay, no
        time-based retention (records with 1970 timestamps stay)."""
        assert kafka_dist.server_properties(9092, 9093, "/tmp/logs") == (
            "node.id=1\n"
            "process.roles=broker,controller\n"
            "listeners=PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093\n"
            "advertised.listeners=PLAINTEXT://127.0.0.1:9092\n"
            "listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT\n"
            "controller.listener.names=CONTROLLER\n"
            "inter.broker.listener.name=PLAINTEXT\n"
            "controller.quorum.bootstrap.servers=127.0.0.1:9093\n"
            "log.dirs=/tmp/logs\n"
            "num.partitions=1\n"
            "offsets.topic.replication.factor=1\n"
            "transaction.state.log.replication.factor=1\n"
            "transaction.state.log.min.isr=1\n"
            "share.coordinator.state.topic.replication.factor=1\n"
            "share.coordinator.state.topic.min.isr=1\n"
            "group.initial.rebalance.delay.ms=0\n"
            "log.retention.ms=-1\n"
        )

    def test_command_lines(self) -> None:
        """Format (kafka-storage format --standalone) then the broker (kafka.Kafka), same JVM options."""
        libs, log4j, props = Path("/c/libs"), Path("/w/log4j2.properties"), Path("/w/server.properties")
        jvm = ["java", "-Xms128m", "-Xmx512m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-XX:-UsePerfData",
               "-Djava.awt.headless=true", "-Dlog4j2.configurationFile=/w/log4j2.properties", "-cp", "/c/libs/*"]
        assert kafka_dist.format_argv("java", libs, log4j, props, "AAAAAAAAAAAAAAAAAAAAAA") == [
            *jvm, "kafka.tools.StorageTool", "format", "--standalone", "-t", "AAAAAAAAAAAAAAAAAAAAAA",
            "-c", "/w/server.properties",
        ]
        assert kafka_dist.broker_argv("java", libs, log4j, props) == [*jvm, "kafka.Kafka", "/w/server.properties"]

    def test_random_cluster_id(self) -> None:
        """22 characters of URL-safe base64 (a UUID), different each time, never starting with
        ``-`` (an option to kafka-storage's parser; 2,000 draws would meet one 31 times on average)."""
        ids = {kafka_dist.random_cluster_id() for _ in range(2000)}
        assert len(ids) == 2000
        assert not any(i.startswith("-") for i in ids)
        assert all(len(i) == 22 and set(i) <= set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
                   for i in ids)

    def test_local_image_environment(self) -> None:
        """The local image gets its properties (log directory inside the container) and a cluster id."""
        env = kafka_dist.image_environment(9092, 9093)
        assert env["KAFKA_SERVER_PROPERTIES"] == kafka_dist.server_properties(9092, 9093, "/tmp/kraft-combined-logs")
        assert len(env["CLUSTER_ID"]) == 22
