"""The JVM operator of the built-in aggregations through Spark: in the driver's replay, record for
record the output of the Python kernel (`AggregateKernel`, which the direct engine runs and the
Python operator hosts); in streaming, the Python operator's output, restart from its own
checkpoint and a clear error on a checkpoint of the other operator; the configuration key,
explain(), and loading. The Java rules beside the kernel without Spark:
``test_kernel_differential.py``."""

from __future__ import annotations

import operator
import random
from typing import Any, Callable

import pytest

from streamsdsl import (
    Aggregations,
    Consumed,
    EmitStrategy,
    Serdes,
    SessionWindows,
    SlidingWindows,
    StreamsBuilder,
    TimeWindows,
    TopologyTestDriver,
    explain,
)
from streamsdsl.jvm import CheckpointOperatorError, Operator
from streamsdsl.runtime.config import DriverConfig, StreamsConfig, StreamsConfigError
from streamsdsl.runtime.streaming import start_streaming
from streamsdsl.testing.files import FileTopic
from tests._support import Collect

pytestmark = pytest.mark.spark

LONGS = (Serdes.String(), Serdes.Long())
JSON = (Serdes.Json(), Serdes.Json())
SESSION = SessionWindows.of_inactivity_gap_and_grace(5, 3)
HOPPING = TimeWindows.of_size_and_grace(10, 5).advance_by(5)
TUMBLING = TimeWindows.of_size_with_no_grace(10)
SLIDING = SlidingWindows.of_time_difference_and_grace(10, 5)
CLOSE = EmitStrategy.on_window_close()


def _numbers(seed: int, n: int = 30) -> list[tuple[Any, Any, int]]:
    rng = random.Random(seed)
    return [(rng.choice(["a", "b", "c", None]), rng.randint(-3, 9), rng.randint(0, 60)) for _ in range(n)]


def _documents(seed: int, n: int = 30) -> list[tuple[Any, Any, int]]:
    rng = random.Random(seed)
    values = [{"amount": 3}, {"amount": -2}, {"amount": 1.5}, {"other": 1}, None, [1], {"amount": "2"},
              {"amount": True}]
    return [(rng.choice(["x", "y", 7]), rng.choice(values), rng.randint(0, 60)) for _ in range(n)]


def _driver(topology: Any, choice: str, spark: Any, config: dict[str, Any] | None = None) -> TopologyTestDriver:
    """``jvm``: the Spark engine with the JVM operator; ``direct``: the direct engine, which runs
    the Python kernels (the Python operator's) in the test process."""
    if choice == "direct":
        return TopologyTestDriver(topology, config or {}, engine="direct")
    return TopologyTestDriver(topology, {**(config or {}), "streamsdsl.operator": choice}, engine="spark", spark=spark)


def _runs_on_both(topology: Any, spark: Any, runs: list[list[tuple[str, Any, Any, int]]],
                  record: Any, config: dict[str, Any] | None = None) -> list[tuple[list[Any], float]]:
    """Per operator (direct, then jvm): each run's records piped to their topics, then
    ``out`` read (``record(r)`` of each output record), and the dropped-records total."""
    outs = []
    for choice in ("direct", "jvm"):
        with _driver(topology, choice, spark, config) as driver:
            topics = {t: driver.create_input_topic(t) for t in topology.source_topics}
            out = driver.create_output_topic("out")
            got: list[Any] = []
            for run in runs:
                for t, k, v, ts in run:
                    topics[t].pipe_input(k, v, ts)
                got += [record(r) for r in out.read_records_to_list()]
            outs.append((got, driver.metrics()["dropped-records-total"]))
    return outs


def _metrics(metrics: dict[str, float]) -> list[tuple[str, str]]:
    return sorted((k, str(v)) for k, v in metrics.items())  # NaN latencies compare as text


def _drive(topology: Any, records: list[tuple[Any, Any, int]], choice: str, spark: Any) -> tuple[Any, ...]:
    """Pipe the records in two runs (state carried between them); the output and metrics."""
    with _driver(topology, choice, spark) as driver:
        topic, out = driver.create_input_topic("in"), driver.create_output_topic("out")
        half = len(records) // 2
        got = []
        for part in (records[:half], records[half:]):
            for k, v, ts in part:
                topic.pipe_input(k, v, ts)
            got += out.read_records_to_list()
        return got, _metrics(driver.metrics())


CASES: dict[str, tuple[Callable[[Any], Any], tuple[Any, Any], Callable[[int], Any]]] = {
    "session-count": (lambda g: g.windowed_by(SESSION).count(), LONGS, _numbers),
    "session-count-on-close": (lambda g: g.windowed_by(SESSION).emit_strategy(CLOSE).count(), LONGS, _numbers),
    "session-sum": (lambda g: g.windowed_by(SESSION).reduce(operator.add), LONGS, _numbers),
    "tumbling-count-on-close": (lambda g: g.windowed_by(TUMBLING).emit_strategy(CLOSE).count(), LONGS, _numbers),
    "hopping-max": (lambda g: g.windowed_by(HOPPING).reduce(max), LONGS, _numbers),
    "sliding-min": (lambda g: g.windowed_by(SLIDING).reduce(min), LONGS, _numbers),
    "sliding-count-on-close": (lambda g: g.windowed_by(SLIDING).emit_strategy(CLOSE).count(), LONGS, _numbers),
    "unwindowed-sum": (lambda g: g.reduce(operator.add), LONGS, _numbers),
    "field-sum-hopping": (lambda g: g.windowed_by(HOPPING).aggregate(*Aggregations.sum("amount")), JSON, _documents),
    "field-max-int-session-on-close": (
        lambda g: g.windowed_by(SESSION).emit_strategy(CLOSE).aggregate(
            *Aggregations.max("amount", value_type=int).with_merger()), JSON, _documents),
    "field-min-sliding": (lambda g: g.windowed_by(SLIDING).aggregate(*Aggregations.min("amount")), JSON, _documents),
    "count-helper-unwindowed": (lambda g: g.aggregate(*Aggregations.count()), JSON, _documents),
}


class TestSameOutputAsTheKernel:
    @pytest.mark.parametrize("case", sorted(CASES))
    def test_driver_records_and_metrics(self, spark: Any, case: str) -> None:
        """Random records (late ones, null keys and values, non-numbers): the JVM operator's
        output records (windowed keys, values, timestamps, tombstones, on-close order) and its
        dropped / emit-final metrics equal the Python kernel's (the direct engine's)."""
        build, serdes, data = CASES[case]
        b = StreamsBuilder()
        build(b.stream("in", Consumed.with_serdes(*serdes)).group_by_key()).to_stream().to("out")
        topology, records = b.build(), data(len(case))
        kernel = _drive(topology, records, "direct", spark)
        jvm = _drive(topology, records, "jvm", spark)
        assert jvm[0] == kernel[0]
        assert jvm[1] == kernel[1]

    @pytest.mark.parametrize("rekey", [False, True], ids=["flat_map_values", "flat_map"])
    def test_one_cache_flush_per_source_record(self, spark: Any, rekey: bool) -> None:
        """Several records of one source record reach a count: without a key change the JVM
        operator, as the kernel, forwards each window's last count once per source record;
        through a repartition (a key-changing flat_map) every update."""
        b = StreamsBuilder()
        stream = b.stream("in", Consumed.with_serdes(Serdes.String(), Serdes.String()))
        stream = stream.flat_map(lambda k, v: [(k, c) for c in v]) if rekey else stream.flat_map_values(list)
        stream.group_by_key().windowed_by(HOPPING).count().to_stream().to("out")
        topology = b.build()
        records = [("a", "xyz", 7), ("b", "pq", 8), ("a", "r", 12)]
        kernel, jvm = _drive(topology, records, "direct", spark), _drive(topology, records, "jvm", spark)
        assert jvm == kernel
        got = [(r.key.key, r.key.window.start, r.value, r.timestamp) for r in jvm[0]]
        if rekey:
            assert got == [("a", s, n, 7) for n in (1, 2, 3) for s in (0, 5)] + [
                ("b", s, n, 8) for n in (1, 2) for s in (0, 5)] + [("a", 5, 4, 12), ("a", 10, 1, 12)]
        else:
            assert got == [("a", 0, 3, 7), ("a", 5, 3, 7), ("b", 0, 2, 8), ("b", 5, 2, 8), ("a", 5, 4, 12),
                           ("a", 10, 1, 12)]
        assert "JVM operator" in explain(topology, spark, mode="simple", operator="jvm")

    @pytest.mark.parametrize("windows", [None, SESSION, HOPPING])
    def test_cogroup_of_builtins(self, spark: Any, windows: Any) -> None:
        """A cogroup of built-in aggregators (count of one stream, sums of a field of two others)
        runs on the JVM operator with the Python kernel's output (the direct engine's)."""
        b = StreamsBuilder()
        streams = [b.stream(t, Consumed.with_serdes(*JSON)).group_by_key() for t in ("in", "in2", "in3")]
        count, total = Aggregations.count(), Aggregations.sum("amount", value_type=int)
        cg = streams[0].cogroup(count.aggregator).cogroup(streams[1], total.aggregator).cogroup(
            streams[2], total.aggregator)
        if windows is not None:
            cg = cg.windowed_by(windows)
        if isinstance(windows, SessionWindows):
            table = cg.aggregate(total.initializer, total.merger)
        else:
            table = cg.aggregate(total.initializer)
        table.to_stream().to("out")
        topology = b.build()
        rng = random.Random(3)
        records = [(rng.choice(["in", "in2", "in3"]), rng.choice(["x", "y"]),
                    rng.choice([{"amount": 2}, {"amount": 5}, None]), rng.randint(0, 40)) for _ in range(24)]
        outs = []
        for choice in ("direct", "jvm"):
            with _driver(topology, choice, spark) as driver:
                topics = {t: driver.create_input_topic(t) for t in ("in", "in2", "in3")}
                for t, k, v, ts in records:
                    topics[t].pipe_input(k, v, ts)
                outs.append((driver.create_output_topic("out").read_records_to_list(), _metrics(driver.metrics())))
        assert outs[1] == outs[0]
        assert "JVM operator (cogroup of count, sum, sum" in explain(topology, spark, mode="simple", operator="jvm")

    @pytest.mark.parametrize(("config", "counted"), [({}, 2), ({"statestore.cache.max.bytes": 0}, 1)],
                             ids=["cache", "no-cache"])
    def test_cogroup_window_another_input_closed_keeps_its_count(self, spark: Any, config: dict[str, Any],
                                                                 counted: int) -> None:
        """Each cogrouped input keeps its own stream time over one store: in2's record at 25
        closes [0, 10) for in2 only; in's record at 7, piped in a later run, still counts into
        it with the cache (2; oracle case 197bb19b1746); without it, the store's time (20, the
        greatest window start put) hides [0, 10), which starts again (1; oracle case
        2851cd2fc7c6): on the JVM operator as in the kernel."""
        b = StreamsBuilder()
        streams = [b.stream(t, Consumed.with_serdes(*LONGS)).group_by_key() for t in ("in", "in2")]
        count = Aggregations.count()
        (streams[0].cogroup(count.aggregator).cogroup(streams[1], count.aggregator).windowed_by(TUMBLING)
         .aggregate(count.initializer).to_stream().to("out"))
        topology = b.build()
        runs = [[("in2", "k", 1, 5), ("in2", "k", 1, 25)], [("in", "k", 1, 7), ("in2", "k", 1, 9)]]
        outs = _runs_on_both(topology, spark, runs, lambda r: (r.key.window.start, r.value, r.timestamp), config)
        assert outs[1] == outs[0] == ([(0, 1, 5), (20, 1, 25), (0, counted, 7)], 1.0)

    def test_session_started_again_over_a_hidden_one_replaces_it(self, spark: Any) -> None:
        """Gap 2, grace 5, on close: c at 12, c at 5, then (a later run) c at 5 again, which the
        store time 12 hides [5, 5] from: its [5, 5] overwrites the first, and c at 33 emits one
        [5, 5] (oracle case 78ba5d55ed19), on the JVM operator as in the kernel."""
        b = StreamsBuilder()
        (b.stream("in", Consumed.with_serdes(*LONGS)).group_by_key()
         .windowed_by(SessionWindows.of_inactivity_gap_and_grace(2, 5)).emit_strategy(CLOSE).count()
         .to_stream().to("out"))
        runs = [[("in", "c", 1, 12), ("in", "c", 1, 5)], [("in", "c", 1, 5), ("in", "c", 1, 33)]]
        outs = _runs_on_both(b.build(), spark, runs, lambda r: (r.key.window.start, r.key.window.end, r.value))
        assert outs[1] == outs[0] == ([(5, 5, 1), (12, 12, 1)], 0.0)

    @pytest.mark.parametrize("cached", [True, False], ids=["cache", "no-cache"])
    def test_cogroup_session_the_store_time_closed_is_final(self, spark: Any, cached: bool) -> None:
        """A session cogroup (gap 2, grace 5) over one store whose time is the fastest input's:
        in's record of key b at 14 closes a's [6, 6] for every input; in2's record of a at 4,
        piped in a later run, is on time for in2 but starts [4, 4] (oracle case 234cb66c1139),
        on the JVM operator as in the kernel, cache or not."""
        b = StreamsBuilder()
        streams = [b.stream(t, Consumed.with_serdes(*LONGS)).group_by_key() for t in ("in", "in2")]
        count = Aggregations.count()
        (streams[0].cogroup(count.aggregator).cogroup(streams[1], count.aggregator)
         .windowed_by(SessionWindows.of_inactivity_gap_and_grace(2, 5))
         .aggregate(count.initializer, count.merger).to_stream().to("out"))
        topology = b.build()
        runs = [[("in", "a", 1, 6), ("in", "b", 1, 14)], [("in2", "a", 1, 4), ("in", "a", 1, 4)]]
        cache = {} if cached else {"statestore.cache.max.bytes": 0}
        outs = _runs_on_both(topology, spark, runs,
                             lambda r: (r.key.key, r.key.window.start, r.key.window.end, r.value, r.timestamp), cache)
        assert outs[1] == outs[0] == ([("a", 6, 6, 1, 6), ("b", 14, 14, 1, 14), ("a", 4, 4, 1, 4)], 1.0)


def _session_count() -> Any:
    b = StreamsBuilder()
    b.stream("clicks", Consumed.with_serdes(Serdes.String(), Serdes.String())).group_by_key().windowed_by(
        SessionWindows.with_gap(10)).count().to_stream().to("sessions")
    return b.build()


def _stream(spark: Any, topic: FileTopic, cp: str, choice: str) -> list[tuple[int, Any, Any, int]]:
    out = Collect()
    q, _, _ = start_streaming(_session_count(), lambda n: topic.read_stream(spark, n.topics), out,
                              checkpoint_location=cp, operator=choice)
    try:
        q.processAllAvailable()
    finally:
        q.stop()
    return out.records


class TestStreamingState:
    def test_restart_from_own_checkpoint(self, spark: Any, tmp_path: Any) -> None:
        """Stopped and restarted from its checkpoint, the JVM operator continues its sessions
        (versioned state, timers) and produces what the Python operator produces."""
        s = Serdes.String()
        outputs = {}
        for choice in ("python", "jvm"):
            topic, cp = FileTopic(str(tmp_path / choice / "in")), str(tmp_path / choice / "cp")
            topic.append("clicks", [("a", "x", 0), ("a", "x", 5), ("b", "x", 3)], s, s)
            first = _stream(spark, topic, cp, choice)
            topic.append("clicks", [("a", "x", 12), ("b", "x", 40), ("a", "x", 30)], s, s)
            outputs[choice] = (first, _stream(spark, topic, cp, choice))
        assert outputs["jvm"] == outputs["python"]
        assert sorted(r[2] or 0 for r in outputs["jvm"][1]) == [0, 1, 1, 3]  # a: tombstone, [0, 12] = 3

    @pytest.mark.parametrize("first, then", [("python", "jvm"), ("jvm", "python")])
    def test_switching_operator_on_a_checkpoint_is_a_clear_error(self, spark: Any, tmp_path: Any, first: str,
                                                                 then: str) -> None:
        """A checkpoint written by one operator is not continued on the other: the restart
        fails before the query starts, naming the checkpoint and the setting to use."""
        s = Serdes.String()
        topic, cp = FileTopic(str(tmp_path / "in")), str(tmp_path / "cp")
        topic.append("clicks", [("a", "x", 0)], s, s)
        _stream(spark, topic, cp, first)
        with pytest.raises(CheckpointOperatorError, match=f"set streamsdsl.operator to '{first}'"):
            _stream(spark, topic, cp, then)


class TestCheckpointCheck:
    """`check_checkpoint` reads the operator instances a checkpoint's state metadata records."""

    @staticmethod
    def _checkpoint(tmp_path: Any, names: list[str]) -> str:
        for i, name in enumerate(names):
            meta = tmp_path / "cp" / "state" / str(i) / "_metadata" / "v2"
            meta.mkdir(parents=True)
            (meta / "0").write_text(f'v2\n{{"operatorInfo":{{"operatorId":{i},"operatorName":"{name}"}}}}\n')
        return str(tmp_path / "cp")

    @pytest.mark.parametrize("written, now, error", [
        (["transformWithStateExec"] * 2, ["jvm"], None),  # one node planned twice (two branches below it)
        (["transformWithStateExec", "transformWithStateInPySparkExec"], ["jvm", "python"], None),
        (["transformWithStateInPySparkExec"], ["jvm"], "set streamsdsl.operator to 'python'"),
        (["transformWithStateExec"], ["python"], "set streamsdsl.operator to 'jvm'"),
        (["transformWithStateExec"], ["jvm", "jvm"], "set streamsdsl.operator to 'python'"),
    ])
    def test_instances_against_this_runs_choices(self, tmp_path: Any, written: list[str], now: list[str],
                                                 error: str | None) -> None:
        from streamsdsl.compiler.jvm_operator import Backend, OperatorChoice, check_checkpoint

        report = {f"node-{i}": OperatorChoice(Backend.JVM if how == "jvm" else Backend.PYTHON)
                  for i, how in enumerate(now)}
        cp = self._checkpoint(tmp_path, written)
        if error is None:
            check_checkpoint(cp, report)
        else:
            with pytest.raises(CheckpointOperatorError, match=error):
                check_checkpoint(cp, report)


class TestConfiguration:
    def test_key_accepted_by_both_configs(self) -> None:
        """streamsdsl.operator is a known key of KafkaStreams' and the driver's configuration."""
        assert DriverConfig.from_mapping({"streamsdsl.operator": "JVM"}).operator is Operator.JVM
        app = StreamsConfig.from_mapping({"application.id": "a", "bootstrap.servers": "k:9092",
                                          "streamsdsl.operator": "python"})
        assert app.operator is Operator.PYTHON

    def test_invalid_value(self) -> None:
        """A value other than auto, jvm or python names the three."""
        with pytest.raises(StreamsConfigError, match="'streamsdsl.operator' must be 'auto' or 'jvm' or 'python'"):
            DriverConfig.from_mapping({"streamsdsl.operator": "java"})

    def test_explain_names_the_operator(self, spark: Any) -> None:
        """explain() says which operator runs each aggregation, and why Python for user functions."""
        b = StreamsBuilder()
        grouped = b.stream("in", Consumed.with_serdes(*LONGS)).group_by_key()
        grouped.windowed_by(SESSION).count().to_stream().to("out")
        grouped.windowed_by(TUMBLING).reduce(lambda a, v: a + v).to_stream().to("out2")
        grouped.count().to_stream().to("out3")
        text = explain(b.build(), spark, mode="simple")
        assert "KSTREAM-AGGREGATE-0000000002: JVM operator (count, session windows)" in text
        assert "KSTREAM-REDUCE-0000000006: Python operator (tumbling windows: a Python reducer)" in text
        assert "KSTREAM-AGGREGATE-0000000010: Spark native aggregation" in text
        python = explain(b.build(), spark, mode="simple", operator="python")
        assert "Python operator (count, session windows; streamsdsl.operator=python)" in python
