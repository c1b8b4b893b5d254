"""`KafkaStreams.close()` closes every Kafka client the application created (issue 26, item 5).

The application runs in a fresh interpreter (its own SparkSession and Python workers, and no
other Kafka client: the test produces and consumes from this process). Before `close()` its
Python workers hold librdkafka clients (threads named ``rdk:...``, sockets to the broker); after
it, neither the driver process nor any process it started has one.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable

import pytest

from streamsdsl.testing.local_kafka import LocalKafka

pytestmark = [pytest.mark.integration, pytest.mark.spark]

APP = r"""
import glob, json, logging, os, sys
from streamsdsl import KafkaStreams, StreamsBuilder

logging.basicConfig(level=logging.INFO)  # as docs/kafka.md suggests

config, source, sink = json.loads(sys.argv[1]), sys.argv[2], sys.argv[3]
port = config["bootstrap.servers"].rsplit(":", 1)[1]

def family():
    "This process and every process it started (pid -> command line)."
    parents = {}
    for stat in glob.glob("/proc/[0-9]*/stat"):
        try:
            with open(stat) as f:
                fields = f.read().rsplit(")", 1)[1].split()
            parents[int(stat.split("/")[2])] = int(fields[1])
        except (OSError, IndexError, ValueError):
            pass
    members, grew = {os.getpid()}, True
    while grew:
        new = {pid for pid, parent in parents.items() if parent in members} - members
        members |= new
        grew = bool(new)
    return members

def clients():
    "pid -> (librdkafka threads, sockets to the broker) of the processes that have any."
    broker_inodes = set()
    with open("/proc/net/tcp") as f:
        for line in f.readlines()[1:]:
            parts = line.split()
            if int(parts[2].split(":")[1], 16) == int(port) and parts[3] == "01":  # ESTABLISHED
                broker_inodes.add(parts[9])
    out = {}
    for pid in family():
        threads = 0
        for comm in glob.glob(f"/proc/{pid}/task/*/comm"):
            try:
                threads += open(comm).read().startswith("rdk:")
            except OSError:
                pass
        sockets = 0
        for fd in glob.glob(f"/proc/{pid}/fd/*"):
            try:
                link = os.readlink(fd)
            except OSError:
                continue
            sockets += link.startswith("socket:[") and link[8:-1] in broker_inodes
        if threads or sockets:
            out[pid] = (threads, sockets)
    return out

b = StreamsBuilder()
b.stream(source).map_values(lambda v: v.upper()).to(sink)
app = KafkaStreams(b.build(), config)
app.start()
app.process_all_available()
before = clients()
closed = app.close()
result = {"closed": closed, "state": app.state().value, "before": list(before.values()),
          "after": list(clients().values()), "leases": glob.glob(f"/tmp/streamsdsl-{config['application.id']}-*")}

# A failing record, on the same session (a second application reading the same topic).
b = StreamsBuilder()
b.stream(source).map_values(lambda v: 1 // 0).to(sink)
failing = KafkaStreams(b.build(), {**config, "application.id": config["application.id"] + "-failing"})
failing.start()
print("FAILING-RECORD", file=sys.stderr, flush=True)
try:
    failing.process_all_available()
except Exception as exc:
    result["error"] = f"{type(exc).__name__}: {exc}"
print("RAISED", file=sys.stderr, flush=True)
failing.close()
print(json.dumps(result))
"""


_RUN: dict[str, tuple[str, str, dict[str, Any]]] = {}


class TestClose:
    @staticmethod
    def _run(kafka: LocalKafka, new_topic: Callable[..., str],
             streams_config: Callable[..., dict[str, Any]]) -> tuple[str, str, dict[str, Any]]:
        """Run `APP` once for the tests of this class: its stdout, stderr and result."""
        if "app" not in _RUN:
            source, sink = new_topic(2), new_topic()
            kafka.produce(source, [(b'"k1"', b'"a"', 1_000, 0), (b'"k2"', b'"b"', 1_001, 1)])
            config = streams_config("close")
            root = Path(__file__).parents[1]
            env = {k: v for k, v in os.environ.items() if k != "STREAMSDSL_SPARK_MASTER"}
            proc = subprocess.run([sys.executable, "-c", APP, json.dumps(config), source, sink], cwd=root, env=env,
                                  capture_output=True, text=True, timeout=600)
            assert proc.returncode == 0, proc.stderr[-3000:]
            result = json.loads(proc.stdout.strip().splitlines()[-1])
            result.update(source=source, output=sorted(r.value for r in kafka.consume_all(sink)))
            _RUN["app"] = (proc.stdout, proc.stderr, result)
        return _RUN["app"]

    def test_close_closes_every_kafka_client(
        self, kafka: LocalKafka, new_topic: Callable[..., str], streams_config: Callable[..., dict[str, Any]]
    ) -> None:
        """Before ``close()`` Python workers hold librdkafka clients (the pooled consumer, the
        producer); after it returned True no process of the application has an ``rdk:`` thread or
        an established socket to the broker, and the lease directory is gone."""
        _, _, result = self._run(kafka, new_topic, streams_config)
        assert result["output"] == [b'"A"', b'"B"']
        assert result["closed"] is True and result["state"] == "NOT_RUNNING"
        assert result["before"], "no Kafka client before close(): the test would prove nothing"
        assert sum(threads for threads, _ in result["before"]) > 0
        assert result["after"] == []
        assert result["leases"] == []

    def test_a_failing_record_prints_a_few_lines(
        self, kafka: LocalKafka, new_topic: Callable[..., str], streams_config: Callable[..., dict[str, Any]]
    ) -> None:
        """Under ``logging.basicConfig(level=logging.INFO)`` (as the docs suggest) a record that
        fails in a running application raises the `UserFunctionError`, and stderr gets one line
        from Spark per failed task, the job's and the query's end meanwhile (no Java stack trace, no py4j traceback of the batch
        callback); py4j logs no INFO line at all."""
        _, err, result = self._run(kafka, new_topic, streams_config)
        # Two partitions, one task each: whichever task fails first names its own record.
        assert result["error"] in {("UserFunctionError: KSTREAM-MAPVALUES-0000000001: the mapper raised "
                                    "ZeroDivisionError: integer division or modulo by zero (record at topic "
                                    f"{result['source']} partition {p} offset 0, key '{k}')")
                                   for p, k in ((0, "k1"), (1, "k2"))}
        printed = err.split("FAILING-RECORD\n", 1)[1].split("RAISED\n", 1)[0].splitlines()
        kinds = [line.split(": ", 1)[0].split(" ", 2)[2] for line in printed]
        # one line per failed task (both partitions' tasks fail), the job's abort, the query's end
        assert len(printed) <= 4, "\n".join(printed)
        assert set(kinds) <= {"ERROR Executor", "ERROR TaskSetManager", "ERROR MicroBatchExecution"}, printed
        assert "INFO:py4j" not in err
