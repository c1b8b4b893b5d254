"""P9 — Kafka Streams as the peer: the same applications on Kafka Streams 4.x and on streamsdsl.

Two applications, each run on **Kafka Streams 4.4** (Java, ``benchmarks/java``: one instance,
default configuration plus ``commit.interval.ms`` = streamsdsl's trigger interval) and on
**streamsdsl** (``local[2]``, its default operators), on the same local Apache Kafka broker and
the same input topics:

(a) **session**: P5's session-window count (``group_by_key().windowed_by(SessionWindows
    .with_gap(30 s)).count()``, emitted on window close; P5's data: ``--keys`` keys, a record
    per key every 20 s and a 60 s pause after every fifth, so every session has five records);
(b) **enrich**: P10's enrichment (orders ⋈ a customers table whose value is the region, regrouped
    by region, counted in 1-minute tumbling windows without grace, emitted on close; 1,000
    customers, 10 regions, an order every 10 ms of event time). Its joiner keeps the table's
    value: ``Joiners.right()`` (``--joiner builtin``, the default: Spark columns after the JVM
    join operator) or the same function as a Python lambda (``--joiner python``: called once
    per Arrow batch), as Kafka Streams' twin writes ``(order, region) -> region``.

Measured for each application and engine:

* **throughput**: ``--records`` input records produced first, then each engine reads them from
  the start after a warm-up run on a smaller topic (``--warmup-records``, by default ten records
  per key; Kafka Streams: in the same JVM; streamsdsl: in the same SparkSession). Kafka
  Streams' time runs from ``KafkaStreams.start()`` until its ``peek`` before the first stateful
  step has counted every input record; streamsdsl's from ``KafkaStreams.start()`` until
  ``process_all_available()`` returns (its closed windows written).
  records/s = input records / that time;
* Kafka Streams once more with its own default commit interval (30 s), for scale;
* **CPU seconds per million records** over the same interval: Kafka Streams' JVM process CPU
  time (``OperatingSystemMXBean.getProcessCpuTime``); for streamsdsl the sum over the process
  tree from ``/proc`` (this driver, Spark's JVM, Python workers and planner processes; the
  broker's subtree excluded);
* **correctness**: both engines' outputs equal the expected closed windows computed from the
  input. Kafka Streams emits on-close results at most once a second per task (its
  ``emit.interval.ms.kstreams.windowed.aggregation`` default), so after its timed run a few
  records at the input's last timestamp are produced to every partition (they close nothing
  and stay in open windows) until its output is complete; streamsdsl reads the same topic,
  those records included. Kafka Streams' windowed store keeps an hour (`KS_RETENTION_MS`):
  with its default retention its on-close emission lost the closed sessions of this replayed
  input. The enrichment's input has one partition (`PARTITIONS`);
* **latency**: the same applications with the default emit strategy (on every update), a fresh
  topic fed at ``--rate`` records/s for ``--latency-seconds`` by a load generator process that
  also reads the output: latency = the consumer's receive time minus the output record's
  timestamp (the newest input record it counts, stamped with the wall clock when produced);
  p50/p99 over the outputs after the first ``--latency-warmup`` seconds;
* **profile**: streamsdsl's micro-batch phases (Spark's ``durationMs``, summed over the
  throughput run's batches) and its CPU by process kind;
* **variants** (throughput only, each after its own warm-up, checked against the same expected
  windows): ``--sdsl-connectors python,jvm`` times streamsdsl once more with
  ``kafka.connector = "jvm"`` (Spark's Kafka source); ``--floors spark_jvm,spark_python`` times
  the enrichment hand-written in Spark (`_floor_p9.floor_query` in append mode, i.e. emitted on
  close, same trigger; ``spark_jvm``: Spark's Kafka source and sink, ``spark_python``: the
  ``streamsdsl-kafka`` ones), timed and its CPU measured as streamsdsl's: Spark's own floor for
  the records/s and CPU a Spark query of this shape reaches here.

Writes ``benchmarks/results/p9.json``.

    .venv/bin/python benchmarks/p9_kafka_streams_peer.py --records 20000       # a quick run
    .venv/bin/python benchmarks/p9_kafka_streams_peer.py --records 200000 --rate 2000
    .venv/bin/python benchmarks/p9_kafka_streams_peer.py --apps enrich --records 200000 --keys 2000 \
        --latency-seconds 0 --floors spark_jvm,spark_python --sdsl-connectors python,jvm \
        --out benchmarks/results/p9_enrich_floor.json     # P9's throughput floor
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import queue
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from typing import Any

from _common import HERE, SinkTail, write_json
from _floor_p9 import floor_query
from p5_quix_session import GAP_MS, expected_closed, streamsdsl_sessions, timestamp_of
from p5_quix_session import produce as produce_sessions

JAVA_DIR = os.path.join(HERE, "java")
MAIN_CLASS = "io.streamsdsl.bench.P9App"
#: Both engines' commit interval: streamsdsl's micro-batch trigger, Kafka Streams' commit.
COMMIT_MS = 100
#: Input partitions per application. The enrichment regroups by region: with several input
#: partitions both engines see the regrouped records out of time order (Kafka Streams in the order
#: its tasks ran, streamsdsl in (partition, offset) order within a micro-batch) and drop different
#: late records, so its input has one partition (its repartition step still runs).
PARTITIONS = {"session": 2, "enrich": 1}
#: Kafka Streams' state store retention for the windowed count. With the default (gap + grace for
#: sessions) its on-close emission wrote no closed session of this replayed input (0 of 500 in a
#: 5,000-record run, also with the internal emit interval at 0 and with caching off). With 10
#: minutes it lost the first session of some keys on an idle machine (it read faster). An hour is
#: longer than the input's event time (≈ 47 minutes), so no session expires before Kafka Streams
#: emits it. docs/performance.md, P9.
KS_RETENTION_MS = 3_600_000
#: Kafka Streams' own default commit interval (at-least-once), for one more throughput row.
KS_DEFAULT_COMMIT_MS = 30_000
CUSTOMERS = 1000
REGIONS = 10
WINDOW_MS = 60_000
STEP_MS = 10
BASE_TS = 1_700_000_000_000
APPS = ("session", "enrich")


# -- the Java peer ----------------------------------------------------------------------------
def java_classpath() -> str:
    """Build ``benchmarks/java`` when its jar is missing or older than its sources; its classpath."""
    target = os.path.join(JAVA_DIR, "target")
    jar = os.path.join(target, "streamsdsl-bench-p9-1.jar")
    cp_file = os.path.join(target, "classpath.txt")
    sources = [os.path.join(JAVA_DIR, "pom.xml")]
    for root, _dirs, files in os.walk(os.path.join(JAVA_DIR, "src")):
        sources += [os.path.join(root, f) for f in files]
    built = os.path.isfile(jar) and os.path.isfile(cp_file)
    if not built or max(os.path.getmtime(s) for s in sources) > os.path.getmtime(jar):
        done = subprocess.run(["mvn", "-B", "-q", "package"], cwd=JAVA_DIR, stdin=subprocess.DEVNULL,
                              capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise SystemExit(f"P9: mvn package in {JAVA_DIR} failed:\n{(done.stdout + done.stderr)[-2000:]}")
    with open(cp_file) as f:
        return jar + os.pathsep + f.read().strip()


class JavaApp:
    """The Kafka Streams application as a child JVM speaking JSON lines (see ``P9App.java``)."""

    def __init__(self, classpath: str, **options: Any) -> None:
        argv = ["java", "-cp", classpath, MAIN_CLASS]
        for name, value in options.items():
            if value is not None:
                argv += [f"--{name.replace('_', '-')}", str(value)]
        self.stderr = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.stderr,
                                     text=True, bufsize=1)
        self.events: queue.Queue[dict[str, Any]] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.startswith("{"):
                self.events.put(json.loads(line))
        self.events.put({"event": "exit"})

    def wait(self, event: str, timeout: float = 600.0) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            try:
                got = self.events.get(timeout=max(0.1, deadline - time.monotonic()))
            except queue.Empty:
                got = {"event": "timeout"}
            if got["event"] == event:
                return got
            if got["event"] in ("exit", "timeout"):
                self.stderr.seek(0)
                tail = self.stderr.read().decode(errors="replace")[-3000:]
                self.kill()
                raise RuntimeError(f"Kafka Streams app: {got['event']} while waiting for {event!r}:\n{tail}")

    def send(self, line: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def close(self) -> dict[str, Any]:
        self.send("close")
        closed = self.wait("closed", timeout=120)
        self.proc.wait(30)
        return closed

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


# -- CPU of a process tree from /proc ----------------------------------------------------------
TICK = os.sysconf("SC_CLK_TCK")


def _stat(pid: int) -> tuple[int, int] | None:
    """(parent pid, utime + stime + cutime + cstime in ticks) of ``pid``, None when gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            text = f.read()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2:].split()
    return int(fields[1]), sum(int(x) for x in fields[11:15])


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _kind(pid: int) -> str:
    if pid == os.getpid():
        return "driver (Python)"
    cmd = _cmdline(pid)
    return "Spark JVM" if cmd.split(" ", 1)[0].endswith("java") else "Python workers and planner"


def tree_ticks(exclude: set[int]) -> dict[int, tuple[str, int]]:
    """Every process under this one (itself included) but the subtrees of ``exclude`` and of the
    broker (``kafka.Kafka``): pid -> (kind, CPU ticks, exited children included)."""
    children: dict[int, list[int]] = collections.defaultdict(list)
    ticks: dict[int, int] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            got = _stat(int(name))
            if got is not None:
                children[got[0]].append(int(name))
                ticks[int(name)] = got[1]
    out: dict[int, tuple[str, int]] = {}
    todo = [os.getpid()]
    while todo:
        pid = todo.pop()
        if pid in exclude or pid not in ticks or "kafka.Kafka" in _cmdline(pid):
            continue
        out[pid] = (_kind(pid), ticks[pid])
        todo += children.get(pid, [])
    return out


def cpu_delta(before: dict[int, tuple[str, int]], after: dict[int, tuple[str, int]]) -> dict[str, float]:
    """CPU seconds between two `tree_ticks` snapshots, by kind and in total (a process that exited
    meanwhile counts in its parent's children's time)."""
    by_kind: dict[str, float] = collections.defaultdict(float)
    for pid in set(before) | set(after):
        kind = (after.get(pid) or before[pid])[0]
        by_kind[kind] += ((after[pid][1] if pid in after else 0) - (before[pid][1] if pid in before else 0)) / TICK
    out = {k: round(v, 2) for k, v in sorted(by_kind.items())}
    out["total"] = round(sum(by_kind.values()), 2)
    return out


# -- data ---------------------------------------------------------------------------------------
def order_ts(i: int) -> int:
    return BASE_TS + i * STEP_MS + 1  # odd: never on a window boundary


def produce_enrich(bootstrap: str, orders: str, customers: str, n: int, customer_ts: int = BASE_TS - WINDOW_MS) -> None:
    """The customers (``c<j>`` → region ``r<j % REGIONS>``), then ``n`` orders of customer
    ``c<i % CUSTOMERS>``, in time order, partitioned by key (murmur2, as Java clients)."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "partitioner": "murmur2_random",
                         "queue.buffering.max.messages": 500_000})

    def put(topic: str, key: str, value: str, ts: int) -> None:
        while True:
            try:
                producer.produce(topic, value.encode(), key.encode(), timestamp=ts)
                return
            except BufferError:
                producer.poll(0.05)

    for j in range(CUSTOMERS):
        put(customers, f"c{j}", f"r{j % REGIONS}", customer_ts)
    producer.flush(60)
    for i in range(n):
        put(orders, f"c{i % CUSTOMERS}", "o", order_ts(i))
    if producer.flush(120):
        raise RuntimeError("not every input record was acknowledged within 120 s")


def produce_sentinels(bootstrap: str, app: str, source: str, last_ts: int) -> int:
    """Records at the input's last timestamp that close nothing (Kafka Streams' on-close emission
    is checked only when a record arrives, at most once a second per task): for ``session`` one
    per partition under a key of its own, for ``enrich`` one order per region. Returns how many."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "partitioner": "murmur2_random"})
    if app == "session":
        records = [(f"~sentinel-{p}", b"click", p) for p in range(PARTITIONS[app])]
    else:
        records = [(f"c{r}", b"o", None) for r in range(REGIONS)]  # customer c<r> is in region r<r>
    for key, value, partition in records:
        kw = {} if partition is None else {"partition": partition}
        producer.produce(source, value, key.encode(), timestamp=last_ts, **kw)
    if producer.flush(30):
        raise RuntimeError("sentinel records were not acknowledged within 30 s")
    return len(records)


Window = tuple[str, int, int, int]  # key, start, end, count


def expected_enrich(n: int) -> list[Window]:
    """The closed 1-minute windows of ``n`` orders plus the sentinels (stream time = the last
    order's timestamp): ``(region, start, end, count)``."""
    last = order_ts(n - 1)
    counts: collections.Counter[tuple[str, int]] = collections.Counter()
    for i in range(n):
        ts = order_ts(i)
        counts[(f"r{(i % CUSTOMERS) % REGIONS}", ts - ts % WINDOW_MS)] += 1
    return sorted((r, s, s + WINDOW_MS, c) for (r, s), c in counts.items() if s + WINDOW_MS <= last)


def enrich_windows(records: list[Any]) -> list[Window]:
    out = []
    for r in records:
        region, start = r.key.decode().rsplit("@", 1)
        out.append((region, int(start), int(start) + WINDOW_MS, struct.unpack(">q", r.value)[0]))
    return sorted(out)


def parse_output(app: str, records: list[Any]) -> list[Any]:
    return streamsdsl_sessions(records) if app == "session" else enrich_windows(records)


def expected_output(app: str, n: int, keys: int) -> list[Any] | int:
    return expected_closed(n, keys) if app == "session" else expected_enrich(n)


def last_input_ts(app: str, n: int, keys: int) -> int:
    return timestamp_of(n - 1, keys) if app == "session" else order_ts(n - 1)


def output_size(bootstrap: str, topic: str, partitions: int) -> int:
    """Records in ``topic``: the sum of its high watermarks (no transactions here)."""
    from confluent_kafka import Consumer, TopicPartition

    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"p9-size-{uuid.uuid4().hex[:8]}"})
    try:
        return sum(c.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(partitions))
    finally:
        c.close()


# -- streamsdsl -----------------------------------------------------------------------------
#: The enrichment's joiner (``--joiner``): the built-in ``Joiners.right()`` or a Python lambda.
JOINER = {"name": "builtin"}


def sdsl_topology(app: str, on_close: bool, source: str, customers: str | None, sink: str) -> Any:
    from streamsdsl import Consumed, EmitStrategy, Grouped, Joiners, Produced, Serdes, SessionWindows, StreamsBuilder
    from streamsdsl import TimeWindows

    s = Serdes.String()
    b = StreamsBuilder()
    if app == "session":
        windowed = (b.stream(source, Consumed.with_serdes(s, Serdes.Bytes())).group_by_key()
                    .windowed_by(SessionWindows.with_gap(GAP_MS)))
        if on_close:
            windowed = windowed.emit_strategy(EmitStrategy.on_window_close())
        windowed.count().to_stream().to(sink, Produced.with_serdes(s, Serdes.Long()))
    else:
        strings = Consumed.with_serdes(s, s)
        joiner = Joiners.right() if JOINER["name"] == "builtin" else (lambda order, region: region)
        windowed = (b.stream(source, strings).join(b.table(customers, strings), joiner)
                    .group_by(lambda customer, region: region, Grouped.with_serdes(s, s))
                    .windowed_by(TimeWindows.of_size_with_no_grace(WINDOW_MS)))
        if on_close:
            windowed = windowed.emit_strategy(EmitStrategy.on_window_close())
        (windowed.count().to_stream().map(lambda w, n: (f"{w.key}@{w.window.start}", n))
         .to(sink, Produced.with_serdes(s, Serdes.Long())))
    return b.build()


def add_driver_java_options(parser: argparse.ArgumentParser) -> None:
    """``--driver-java-options``: the Spark driver's JVM options of the session a P9 benchmark
    builds (`driver_session`)."""
    parser.add_argument("--driver-java-options", default=None,
                        help="the Spark driver's JVM options (spark.driver.extraJavaOptions, e.g. the JIT's thresholds; "
                             "write -XX:... options as --driver-java-options=-XX:...)")


def driver_session(java_options: str | None) -> tuple[Any, str | None]:
    """The session streamsdsl builds (`get_session`), with ``java_options`` as the driver's JVM
    options when given; and the driver's JVM options it was started with (for the JSON)."""
    from streamsdsl.runtime.session import get_session

    spark = get_session(conf=None if java_options is None else {"spark.driver.extraJavaOptions": java_options})
    return spark, spark.conf.get("spark.driver.extraJavaOptions", None)


def sdsl_app(bootstrap: str, topology: Any, state_dir: str, connector: str = "python") -> Any:
    from streamsdsl import KafkaStreams

    return KafkaStreams(topology, {
        "application.id": f"p9-{uuid.uuid4().hex[:8]}",
        "bootstrap.servers": bootstrap,
        "state.dir": state_dir,
        "commit.interval.ms": COMMIT_MS,
        **({} if connector == "python" else {"kafka.connector": connector}),
    })


PHASES = ("latestOffset", "getBatch", "queryPlanning", "addBatch", "walCommit", "commitOffsets", "triggerExecution")


def progress_profile(progress: list[Any]) -> dict[str, Any]:
    """Spark's per-micro-batch phase durations summed over ``progress`` (ms), and the batches."""
    totals: dict[str, int] = collections.defaultdict(int)
    for p in progress:
        for k, v in dict(p["durationMs"]).items():
            totals[k] += int(v)
    return {
        "batches": len(progress),
        "batches_with_data": sum(1 for p in progress if int(p["numInputRows"]) > 0),
        "input_rows": sum(int(p["numInputRows"]) for p in progress),
        "duration_ms": {k: totals[k] for k in [*PHASES, *sorted(set(totals) - set(PHASES))] if k in totals},
        "per_batch_trigger_ms": [int(dict(p["durationMs"]).get("triggerExecution", 0)) for p in progress],
    }


def run_sdsl_throughput(bootstrap: str, app: str, source: str, customers: str | None, sink: str,
                        state_dir: str, connector: str = "python") -> dict[str, Any]:
    from datetime import datetime

    streams = sdsl_app(bootstrap, sdsl_topology(app, True, source, customers, sink), state_dir, connector)
    before = tree_ticks(set())
    wall = time.time()
    start = time.perf_counter()
    streams.start()
    try:
        streams.process_all_available()
        seconds = time.perf_counter() - start
        after = tree_ticks(set())
        progress = list(streams.streaming_query.recentProgress)
    finally:
        streams.close()
    first = datetime.fromisoformat(progress[0]["timestamp"].replace("Z", "+00:00")).timestamp() if progress else wall
    return {"seconds": seconds, "cpu": cpu_delta(before, after), "startup_seconds": round(first - wall, 3),
            "profile": progress_profile(progress)}


#: The enrichment hand-written in Spark (`_floor_p9.floor_query`, emit on close: append mode), by
#: connector: Spark's own Kafka source and sink, or the ``streamsdsl-kafka`` source and writer.
FLOORS = {"spark_jvm": True, "spark_python": False}


def run_floor_throughput(spark: Any, bootstrap: str, source: str, customers: str, sink: str, checkpoint: str,
                         floor: str) -> dict[str, Any]:
    """`floor_query` on the enrichment's topics from the earliest offset until
    ``processAllAvailable()`` returns, timed and its CPU measured as `run_sdsl_throughput` does
    (the customers' read inside the interval, as streamsdsl reads its table topic there)."""
    from datetime import datetime

    before = tree_ticks(set())
    wall = time.time()
    start = time.perf_counter()
    query = floor_query(spark, bootstrap, {"source": source, "customers": customers, "sink": sink}, checkpoint,
                        COMMIT_MS, jvm=FLOORS[floor], mode="append", starting="earliest")
    try:
        query.processAllAvailable()
        seconds = time.perf_counter() - start
        after = tree_ticks(set())
        progress = list(query.recentProgress)
    finally:
        query.stop()
    first = datetime.fromisoformat(progress[0]["timestamp"].replace("Z", "+00:00")).timestamp() if progress else wall
    return {"seconds": seconds, "cpu": cpu_delta(before, after), "startup_seconds": round(first - wall, 3),
            "profile": progress_profile(progress)}


# -- Kafka Streams ------------------------------------------------------------------------------
def run_ks_throughput(kafka: Any, classpath: str, app: str, topics: dict[str, Any], n: int, keys: int,
                      state_dir: str, expected_count: int, commit_ms: int = COMMIT_MS) -> dict[str, Any]:
    java = JavaApp(classpath, app=app, emit="close", bootstrap=kafka.bootstrap_servers,
                   application_id=f"p9-ks-{app}-{uuid.uuid4().hex[:6]}", state_dir=state_dir,
                   commit_interval_ms=commit_ms, retention_ms=KS_RETENTION_MS, source=topics["source"],
                   customers=topics.get("customers"), sink=topics["sink"], records=n, warmup_source=topics["warm_source"],
                   warmup_customers=topics.get("warm_customers"), warmup_sink=topics["warm_sink"],
                   warmup_records=topics["warm_records"])
    try:
        java.wait("warmed")
        java.wait("started")
        processed = java.wait("processed", timeout=1800)
        # on-close results wait for a record after the emit interval (1 s): feed sentinels until
        # every closed window is out (they close nothing, so the expected output stays the same)
        sentinels = 0
        for _ in range(20 if commit_ms <= 1000 else 40):
            time.sleep(1.2)
            sentinels += produce_sentinels(kafka.bootstrap_servers, app, topics["source"], last_input_ts(app, n, keys))
            deadline = time.monotonic() + 3
            while time.monotonic() < deadline and output_size(kafka.bootstrap_servers, topics["sink"],
                                                              PARTITIONS[app]) < expected_count:
                time.sleep(0.2)
            if output_size(kafka.bootstrap_servers, topics["sink"], PARTITIONS[app]) >= expected_count:
                break
        closed = java.close()
    finally:
        java.kill()
    return {"seconds": processed["seconds"], "cpu_seconds": processed["cpu_seconds"], "sentinels": sentinels,
            "cpu_seconds_to_close": closed["cpu_seconds"]}


# -- latency ------------------------------------------------------------------------------------
def loadgen(spec: dict[str, Any]) -> dict[str, Any]:
    """Produce ``rate`` records/s for ``seconds`` (timestamped with the wall clock) while reading
    the output; latency = receive time - output record timestamp. Runs in its own process."""
    from confluent_kafka import Producer

    bootstrap, rate, seconds = spec["bootstrap"], spec["rate"], spec["seconds"]
    tail = SinkTail(bootstrap, spec["sink"], PARTITIONS[spec["app"]], output_stamp, "p9-lat")
    tail.start()
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "partitioner": "murmur2_random"})
    start = time.time()
    sent = 0
    tick = 0.01
    while True:
        now = time.time()
        if now - start >= seconds:
            break
        due = int((now - start) * rate)
        ts = int(now * 1000)
        while sent < due:
            if spec["app"] == "session":
                producer.produce(spec["source"], b"click", f"u{sent % spec['keys']}".encode(), timestamp=ts)
            else:
                producer.produce(spec["source"], b"o", f"c{sent % CUSTOMERS}".encode(), timestamp=ts)
            sent += 1
        producer.poll(0)
        time.sleep(tick)
    producer.flush(30)
    end_ms = time.time() * 1000
    time.sleep(spec["drain"])
    tail.stop()
    samples = tail.samples
    cutoff = start * 1000 + spec["warmup"] * 1000
    lat = sorted(recv - ts for ts, recv in samples if ts >= cutoff and ts <= end_ms)
    last_input = max((ts for ts, _ in samples), default=0)

    def q(p: float) -> float | None:
        return round(lat[min(len(lat) - 1, int(p * len(lat)))], 1) if lat else None

    return {"produced": sent, "rate_achieved": round(sent / seconds, 1), "outputs": len(samples),
            "outputs_measured": len(lat), "p50_ms": q(0.50), "p90_ms": q(0.90), "p99_ms": q(0.99),
            "max_ms": round(lat[-1], 1) if lat else None,
            "mean_ms": round(statistics.fmean(lat), 1) if lat else None,
            "newest_output_lag_ms": round(end_ms - last_input, 1) if samples else None}


def output_stamp(message: Any) -> int:
    """An output record's stamp: its timestamp, or the header ``p9.ts`` (a big-endian Long) when it
    has one (Spark's Kafka sink, used by ``p9_latency_floor.py``'s floor, writes no timestamp)."""
    for key, value in message.headers() or ():
        if key == "p9.ts" and value is not None:
            return int(struct.unpack(">q", value)[0])
    return int(message.timestamp()[1])


def run_loadgen(spec: dict[str, Any]) -> tuple[subprocess.Popen[str], Any]:
    out = tempfile.TemporaryFile(mode="w+")
    proc = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--loadgen", json.dumps(spec)],
                            stdout=out, text=True)
    return proc, out


def finish_loadgen(proc: subprocess.Popen[str], out: Any) -> dict[str, Any]:
    if proc.wait(600) != 0:
        raise RuntimeError(f"the load generator failed (exit {proc.returncode})")
    out.seek(0)
    return json.loads(out.read().strip().splitlines()[-1])


def wait_for_output(bootstrap: str, source: str, sink: str, app: str, timeout: float = 180) -> float:
    """Produce one record now and wait until the output topic grows: the application is running
    and keeping up. Returns the seconds it took."""
    from confluent_kafka import Producer

    before = output_size(bootstrap, sink, PARTITIONS[app])
    producer = Producer({"bootstrap.servers": bootstrap, "partitioner": "murmur2_random"})
    key = b"u0" if app == "session" else b"c0"
    producer.produce(source, b"o", key, timestamp=int(time.time() * 1000))
    producer.flush(30)
    start = time.monotonic()
    while output_size(bootstrap, sink, PARTITIONS[app]) <= before:
        if time.monotonic() - start > timeout:
            raise TimeoutError(f"no output on {sink} within {timeout} s")
        time.sleep(0.1)
    return time.monotonic() - start


def latency_topics(kafka: Any, app: str, engine: str) -> dict[str, Any]:
    tag = uuid.uuid4().hex[:6]
    topics = {"source": f"p9-lat-{app}-{engine}-in-{tag}", "sink": f"p9-lat-{app}-{engine}-out-{tag}"}
    kafka.create_topic(topics["source"], PARTITIONS[app])
    kafka.create_topic(topics["sink"], PARTITIONS[app])
    if app == "enrich":
        topics["customers"] = f"p9-lat-{app}-{engine}-customers-{tag}"
        kafka.create_topic(topics["customers"], PARTITIONS[app])
        produce_enrich(kafka.bootstrap_servers, topics["source"], topics["customers"], 0,
                       customer_ts=int(time.time() * 1000) - WINDOW_MS)
    return topics


def run_latency(kafka: Any, classpath: str, app: str, engine: str, args: argparse.Namespace,
                state_dir: str) -> dict[str, Any]:
    topics = latency_topics(kafka, app, engine)
    spec = {"bootstrap": kafka.bootstrap_servers, "app": app, "source": topics["source"], "sink": topics["sink"],
            "rate": args.rate, "seconds": args.latency_seconds, "warmup": args.latency_warmup, "keys": args.keys,
            "drain": 5}
    if engine == "kafka-streams":
        java = JavaApp(classpath, app=app, emit="update", bootstrap=kafka.bootstrap_servers,
                       application_id=f"p9-lat-{uuid.uuid4().hex[:6]}", state_dir=state_dir,
                       commit_interval_ms=COMMIT_MS, retention_ms=KS_RETENTION_MS, source=topics["source"],
                       customers=topics.get("customers"), sink=topics["sink"], records=0)
        try:
            java.wait("started")
            ready = wait_for_output(kafka.bootstrap_servers, topics["source"], topics["sink"], app)
            proc, out = run_loadgen(spec)
            result = finish_loadgen(proc, out)
            closed = java.close()
        finally:
            java.kill()
        result["cpu_seconds_whole_run"] = closed["cpu_seconds"]
    else:
        streams = sdsl_app(kafka.bootstrap_servers,
                           sdsl_topology(app, False, topics["source"], topics.get("customers"), topics["sink"]),
                           state_dir)
        streams.start()
        try:
            ready = wait_for_output(kafka.bootstrap_servers, topics["source"], topics["sink"], app)
            first_batch = int(streams.streaming_query.lastProgress["batchId"]) if streams.streaming_query.lastProgress else 0
            proc, out = run_loadgen(spec)
            result = finish_loadgen(proc, out)
            progress = [p for p in streams.streaming_query.recentProgress if int(p["batchId"]) > first_batch]
        finally:
            streams.close()
        prof = progress_profile(progress)
        triggers = [t for t, p in zip(prof["per_batch_trigger_ms"], progress) if int(p["numInputRows"]) > 0]
        result["micro_batches"] = prof["batches"]
        result["median_trigger_ms_with_data"] = statistics.median(triggers) if triggers else None
        result["phase_ms_per_batch"] = {k: round(v / max(1, prof["batches"]), 1) for k, v in prof["duration_ms"].items()}
    result["seconds_to_first_output"] = round(ready, 2)
    return result


# -- main ---------------------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=20_000, help="input records of each throughput run")
    parser.add_argument("--keys", type=int, default=500, help="keys of the session application")
    parser.add_argument("--warmup-records", type=int, default=0,
                        help="records of each engine's warm-up run before its timed run (0: ten per key, at most "
                             "--records); a multiple of --keys")
    parser.add_argument("--rate", type=int, default=2_000, help="records/s of the latency runs")
    parser.add_argument("--latency-seconds", type=float, default=15, help="seconds of each latency run (0: none)")
    parser.add_argument("--latency-warmup", type=float, default=5, help="seconds left out at a latency run's start")
    parser.add_argument("--apps", default=",".join(APPS), help="applications to run (session,enrich)")
    parser.add_argument("--ks-default-commit", action=argparse.BooleanOptionalAction, default=True,
                        help="also time Kafka Streams with its default commit interval (30 s)")
    parser.add_argument("--joiner", choices=["builtin", "python"], default="builtin",
                        help="the enrichment's joiner: Joiners.right() or the same Python lambda")
    parser.add_argument("--floors", default="",
                        help=f"enrich only: also time the enrichment hand-written in Spark, comma-separated of "
                             f"{', '.join(FLOORS)} (Spark's Kafka connector and sink; the streamsdsl-kafka ones)")
    parser.add_argument("--sdsl-connectors", default="python",
                        help="streamsdsl's kafka.connector values to time, comma-separated (python, jvm); the first "
                             "is the reported streamsdsl row")
    parser.add_argument("--variants-first", action="store_true",
                        help="run the --floors and the other --sdsl-connectors before streamsdsl, not after")
    add_driver_java_options(parser)
    parser.add_argument("--out", default=None,
                        help="write the JSON here instead of benchmarks/results/p9.json (and no p9.md)")
    parser.add_argument("--loadgen", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    JOINER["name"] = args.joiner
    if args.loadgen:
        print(json.dumps(loadgen(json.loads(args.loadgen))))
        return 0
    if args.records <= 0 or args.keys <= 0 or args.rate <= 0:
        parser.error("--records, --keys and --rate must be positive")
    if args.warmup_records < 0:
        parser.error(f"--warmup-records must be 0 (ten per key) or more (got {args.warmup_records})")
    if args.records % args.keys or args.warmup_records % args.keys:
        parser.error("--records and --warmup-records must be multiples of --keys (every key gets the same rounds)")
    apps = [a for a in args.apps.split(",") if a]
    if not apps or set(apps) - set(APPS):
        parser.error(f"--apps: choose from {', '.join(APPS)}")
    floors = [f for f in args.floors.split(",") if f]
    if set(floors) - set(FLOORS):
        parser.error(f"--floors: choose from {', '.join(FLOORS)}")
    connectors = [c for c in args.sdsl_connectors.split(",") if c]
    if not connectors or set(connectors) - {"python", "jvm"}:
        parser.error("--sdsl-connectors: choose from python, jvm")

    sys.path.insert(0, os.path.dirname(HERE))
    import pyspark

    from streamsdsl.testing.local_kafka import local_kafka

    classpath = java_classpath()
    n, keys = args.records, args.keys
    warm_n = args.warmup_records or min(n, 10 * keys)
    load_start = os.getloadavg()
    results: dict[str, Any] = {}
    with local_kafka() as kafka, tempfile.TemporaryDirectory(prefix="p9-") as tmp:
        bootstrap = kafka.bootstrap_servers
        spark, java_options = driver_session(args.driver_java_options)
        for app in apps:
            tag = uuid.uuid4().hex[:6]
            topics: dict[str, Any] = {"source": f"p9-{app}-in-{tag}", "warm_source": f"p9-{app}-warm-{tag}",
                                      "warm_records": warm_n}
            for t in ("source", "warm_source"):
                kafka.create_topic(topics[t], PARTITIONS[app])
            if app == "enrich":
                topics["customers"] = f"p9-{app}-customers-{tag}"
                topics["warm_customers"] = f"p9-{app}-warm-customers-{tag}"
                for t in ("customers", "warm_customers"):
                    kafka.create_topic(topics[t], PARTITIONS[app])
            t0 = time.perf_counter()
            if app == "session":
                produce_sessions(bootstrap, topics["source"], n, keys)
                produce_sessions(bootstrap, topics["warm_source"], warm_n, keys)
            else:
                produce_enrich(bootstrap, topics["source"], topics["customers"], n)
                produce_enrich(bootstrap, topics["warm_source"], topics["warm_customers"], warm_n)
            produce_s = time.perf_counter() - t0
            expected = expected_output(app, n, keys)
            expected_count = expected if isinstance(expected, int) else len(expected)

            extra = [*(f"sdsl-{c}" for c in connectors[1:]), *(floors if app == "enrich" else [])]
            sinks = {e: f"p9-{app}-out-{e}-{tag}" for e in ("ks", "sdsl", "ks-warm", "sdsl-warm", "ks-default",
                                                            "ks-warm2", *extra, *(f"{e}-warm" for e in extra))}
            for s in sinks.values():
                kafka.create_topic(s, PARTITIONS[app])
            print(f"P9 {app}: Kafka Streams on {n:,} records", file=sys.stderr, flush=True)
            ks = run_ks_throughput(kafka, classpath, app,
                                   {**topics, "sink": sinks["ks"], "warm_sink": sinks["ks-warm"]}, n, keys,
                                   os.path.join(tmp, f"ks-{app}"), expected_count)
            ks_out = parse_output(app, kafka.consume_all(sinks["ks"]))
            ks_default = None
            if args.ks_default_commit:
                print(f"P9 {app}: Kafka Streams, default commit interval", file=sys.stderr, flush=True)
                ks_default = run_ks_throughput(kafka, classpath, app,
                                               {**topics, "sink": sinks["ks-default"], "warm_sink": sinks["ks-warm2"]},
                                               n, keys, os.path.join(tmp, f"ks-default-{app}"), expected_count,
                                               commit_ms=KS_DEFAULT_COMMIT_MS)
                ks_default_out = parse_output(app, kafka.consume_all(sinks["ks-default"]))

            # streamsdsl, then the variants (``--variants-first``: the other way round), each after a
            # warm-up on the small topic: streamsdsl on its other connectors, the query hand-written in Spark
            variants: dict[str, Any] = {}

            def run_streamsdsl() -> tuple[dict[str, Any], list[Any]]:
                print(f"P9 {app}: streamsdsl on {n:,} records", file=sys.stderr, flush=True)
                run_sdsl_throughput(bootstrap, app, topics["warm_source"], topics.get("warm_customers"),
                                    sinks["sdsl-warm"], os.path.join(tmp, f"sdsl-warm-{app}"), connectors[0])
                got = run_sdsl_throughput(bootstrap, app, topics["source"], topics.get("customers"), sinks["sdsl"],
                                          os.path.join(tmp, f"sdsl-{app}"), connectors[0])
                return got, parse_output(app, kafka.consume_all(sinks["sdsl"]))

            def run_variants() -> None:
                for name in extra:
                    print(f"P9 {app}: {name} on {n:,} records", file=sys.stderr, flush=True)
                    for warm in (True, False):
                        suffix = "-warm" if warm else ""
                        src, cust = (topics["warm_source"], topics.get("warm_customers")) if warm else \
                            (topics["source"], topics.get("customers"))
                        where = os.path.join(tmp, f"{name}{suffix}-{app}")
                        if name in FLOORS:
                            got = run_floor_throughput(spark, bootstrap, src, cust, sinks[name + suffix], where, name)
                        else:
                            got = run_sdsl_throughput(bootstrap, app, src, cust, sinks[name + suffix], where,
                                                      name.removeprefix("sdsl-"))
                    out = parse_output(app, kafka.consume_all(sinks[name]))
                    ok = (len(set(out)) == expected == len(out)) if isinstance(expected, int) else out == expected
                    variants[name] = {
                        "seconds": round(got["seconds"], 3), "records_per_second": round(n / got["seconds"]),
                        "startup_seconds": got["startup_seconds"], "cpu_seconds": got["cpu"]["total"],
                        "cpu_by_process": got["cpu"],
                        "cpu_seconds_per_million_records": round(got["cpu"]["total"] / n * 1e6, 1),
                        "outputs": len(out), "outputs_as_expected": ok, "profile": got["profile"],
                        "ratio_records_per_second_to_kafka_streams": round(ks["seconds"] / got["seconds"], 3),
                        "ratio_cpu_per_record_to_kafka_streams":
                            round(got["cpu"]["total"] / max(ks["cpu_seconds"], 1e-9), 2),
                    }
                    print(json.dumps({name: {k: v for k, v in variants[name].items() if k != "profile"}}),
                          file=sys.stderr, flush=True)

            if args.variants_first:
                run_variants()
            sd, sd_out = run_streamsdsl()
            if not args.variants_first:
                run_variants()
            for v in variants.values():
                v["streamsdsl_ratio_records_per_second"] = round(v["seconds"] / sd["seconds"], 3)
                v["streamsdsl_ratio_cpu_per_record"] = round(sd["cpu"]["total"] / max(v["cpu_seconds"], 1e-9), 2)

            if isinstance(expected, int):
                ks_ok, sd_ok = len(set(ks_out)) == expected == len(ks_out), len(set(sd_out)) == expected == len(sd_out)
            else:
                ks_ok, sd_ok = ks_out == expected, sd_out == expected
            ks_rate, sd_rate = n / ks["seconds"], n / sd["seconds"]
            results[app] = {
                "records": n,
                "partitions": PARTITIONS[app],
                "differences": {"only_kafka_streams": [list(x) for x in sorted(set(ks_out) - set(sd_out))[:5]],
                                "only_streamsdsl": [list(x) for x in sorted(set(sd_out) - set(ks_out))[:5]],
                                "expected_not_in_streamsdsl": [] if isinstance(expected, int) else
                                [list(x) for x in sorted(set(expected) - set(sd_out))[:5]]},
                "produce_seconds": round(produce_s, 2),
                "expected_outputs": expected_count,
                "outputs_equal": ks_out == sd_out and ks_ok and sd_ok
                and (ks_default is None or ks_default_out == ks_out)
                and all(v["outputs_as_expected"] for v in variants.values()),
                "kafka_streams": {
                    "seconds": round(ks["seconds"], 3), "records_per_second": round(ks_rate),
                    "cpu_seconds": round(ks["cpu_seconds"], 2),
                    "cpu_seconds_per_million_records": round(ks["cpu_seconds"] / n * 1e6, 1),
                    "outputs": len(ks_out), "outputs_as_expected": ks_ok, "sentinel_records": ks["sentinels"],
                },
                "streamsdsl": {
                    "seconds": round(sd["seconds"], 3), "records_per_second": round(sd_rate),
                    "startup_seconds": sd["startup_seconds"],
                    "cpu_seconds": sd["cpu"]["total"], "cpu_by_process": sd["cpu"],
                    "cpu_seconds_per_million_records": round(sd["cpu"]["total"] / n * 1e6, 1),
                    "outputs": len(sd_out), "outputs_as_expected": sd_ok, "profile": sd["profile"],
                },
                **({} if ks_default is None else {"kafka_streams_default_commit": {
                    "commit_interval_ms": KS_DEFAULT_COMMIT_MS,
                    "seconds": round(ks_default["seconds"], 3), "records_per_second": round(n / ks_default["seconds"]),
                    "cpu_seconds": round(ks_default["cpu_seconds"], 2),
                    "cpu_seconds_per_million_records": round(ks_default["cpu_seconds"] / n * 1e6, 1),
                    "outputs_equal": ks_default_out == ks_out}}),
                "ratio_records_per_second": round(sd_rate / ks_rate, 3),
                "ratio_cpu_per_record": round(sd["cpu"]["total"] / max(ks["cpu_seconds"], 1e-9), 2),
                # streamsdsl_ratio_*: the reported streamsdsl row's records/s and CPU per record over the
                # variant's (below 1 and above 1: streamsdsl is slower and costs more)
                **({"streamsdsl_connector": connectors[0], "variants_first": args.variants_first,
                    "variants": variants} if variants else {}),
            }
            print(json.dumps({app: {k: v for k, v in results[app].items()}}, indent=1, default=str)[:3000],
                  file=sys.stderr, flush=True)
            if args.latency_seconds > 0:
                latency = {}
                for engine in ("kafka-streams", "streamsdsl"):
                    print(f"P9 {app}: latency of {engine} at {args.rate:,} records/s", file=sys.stderr, flush=True)
                    latency[engine] = run_latency(kafka, classpath, app, engine, args,
                                                  os.path.join(tmp, f"lat-{engine}-{app}"))
                    print(json.dumps(latency[engine]), file=sys.stderr, flush=True)
                results[app]["latency"] = latency
        master = spark.sparkContext.master
        spark.stop()

    equal = all(r["outputs_equal"] for r in results.values())
    first = results[apps[0]]
    result = {
        "id": "P9",
        "ratio": first["ratio_records_per_second"],
        "goal": f"none (measured): streamsdsl's records/s / Kafka Streams' on the {apps[0]} application",
        "goal_met": None,
        "benchmark": "P9 Kafka Streams 4.4 as the peer: session count and enrichment, same broker and data",
        "records": n,
        "warmup_records": warm_n,
        "keys": keys,
        "partitions": PARTITIONS,
        "kafka_streams_store_retention_ms": KS_RETENTION_MS,
        "commit_interval_ms": COMMIT_MS,
        "latency_rate": args.rate,
        "latency_seconds": args.latency_seconds,
        "latency_warmup_seconds": args.latency_warmup,
        "latency_measure": "consumer receive time - output record timestamp (the newest input record's wall-clock "
                           "produce time); emit on every update",
        "outputs_equal": equal,
        "enrich_joiner": "Joiners.right()" if args.joiner == "builtin" else "lambda order, region: region",
        "apps": results,
        "driver_java_options": java_options,
        "environment": {"master": master, "pyspark": pyspark.__version__, "kafka_streams": "4.4.0",
                        "java": subprocess.run(["java", "-version"], capture_output=True, text=True).stderr
                        .splitlines()[0], "cores": os.cpu_count(),
                        "load_average_at_start": [round(x, 2) for x in load_start],
                        "load_average_at_end": [round(x, 2) for x in os.getloadavg()]},
        "timestamp": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    write_json("p9", result, args.out)
    md = markdown(result)
    if args.out is None:
        with open(os.path.join(HERE, "results", "p9.md"), "w") as f:
            f.write(md)
    print(md)
    if not equal:
        print("P9: the engines' outputs differ from each other or from the expected windows", file=sys.stderr)
        return 1
    return 0


def markdown(result: dict[str, Any]) -> str:
    """The result as a markdown table: records/s, CPU per million records, latency, ratios."""
    lines = [f"### P9: Kafka Streams as the peer, {result['records']:,} records, latency at "
             f"{result['latency_rate']:,} records/s", "",
             "| app | engine | records/s | CPU s / M records | latency p50 / p99 ms |", "|---|---|---|---|---|"]
    for app, r in result["apps"].items():
        for engine, key in (("Kafka Streams", "kafka_streams"), ("streamsdsl", "streamsdsl")):
            lat = r.get("latency", {}).get("kafka-streams" if key == "kafka_streams" else "streamsdsl", {})
            lines.append(f"| {app} | {engine} | {r[key]['records_per_second']:,} | "
                         f"{r[key]['cpu_seconds_per_million_records']} | {lat.get('p50_ms')} / {lat.get('p99_ms')} |")
        if "kafka_streams_default_commit" in r:
            d = r["kafka_streams_default_commit"]
            lines.append(f"| {app} | Kafka Streams, commit every 30 s | {d['records_per_second']:,} | "
                         f"{d['cpu_seconds_per_million_records']} | |")
        lines.append(f"| {app} | ratio | {r['ratio_records_per_second']}× | {r['ratio_cpu_per_record']}× | |")
        for name, v in r.get("variants", {}).items():
            lines.append(f"| {app} | {name} | {v['records_per_second']:,} | {v['cpu_seconds_per_million_records']} | |")
            lines.append(f"| {app} | {name} / Kafka Streams | {v['ratio_records_per_second_to_kafka_streams']}× | "
                         f"{v['ratio_cpu_per_record_to_kafka_streams']}× | |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    raise SystemExit(main())
