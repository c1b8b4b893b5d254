"""Idle close (issue 43, item 3): once no record has reached an on-close aggregation for
``idle_close`` ms of wall-clock time, every window it holds open closes, as if stream time had
passed its close.

The rule is the kernel's (`AggregateKernel.close_idle`, `idle_close_step`); these tests run it on
the test driver's direct engine, exact records and timestamps, plus hypothesis properties: never
triggered, the output is Kafka's; triggered, every window is emitted once; and the engine writes
what a brute-force model of the per-aggregation rule writes. The Spark engine (the replay) writes
what the direct engine writes.
"""

from __future__ import annotations

import os
from datetime import timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamsdsl import Consumed, EmitStrategy, Serdes, SessionWindows, SlidingWindows, StreamsBuilder, TimeWindows
from streamsdsl import TopologyTestDriver
from streamsdsl.errors import InvalidArgumentError, InvalidTypeError
from streamsdsl.runtime.config import DriverConfig, StreamsConfig, StreamsConfigError
from streamsdsl.runtime.fingerprint import diff, topology_fingerprint

S = Serdes.String()
IDLE = "streamsdsl.window.idle.close.ms"


def _windowed(windows: Any, emit: EmitStrategy | None) -> Any:
    b = StreamsBuilder()
    w = b.stream("in", Consumed.with_serdes(S, S)).group_by_key().windowed_by(windows)
    if emit is not None:
        w = w.emit_strategy(emit)
    merger = {"merger": lambda k, a, b: a + b} if isinstance(windows, SessionWindows) else {}
    w.aggregate(lambda: "", lambda k, v, a: a + v, **merger).to_stream() \
        .map(lambda k, v: (k.key, f"{k.window.start}-{k.window.end}:{v}")).to("out")
    return b.build()


def _cogrouped(emit: EmitStrategy) -> Any:
    b = StreamsBuilder()
    left = b.stream("left", Consumed.with_serdes(S, S)).group_by_key()
    right = b.stream("right", Consumed.with_serdes(S, S)).group_by_key()
    left.cogroup(lambda k, v, a: a + v).cogroup(right, lambda k, v, a: a + v.upper()) \
        .windowed_by(TimeWindows.of_size_with_no_grace(10)).emit_strategy(emit) \
        .aggregate(lambda: "").to_stream().map(lambda k, v: (k.key, f"{k.window.start}:{v}")).to("out")
    return b.build()


def _out(driver: TopologyTestDriver) -> list[tuple[Any, Any, int]]:
    return [(r.key, r.value, r.timestamp) for r in driver.create_output_topic("out").read_records_to_list()]


def _driver(topology: Any, config: dict[str, Any] | None = None, engine: str = "direct") -> TopologyTestDriver:
    return TopologyTestDriver(topology, config, engine=engine, initial_wall_clock_time_ms=0)


class TestValidation:
    def test_idle_close_must_be_positive(self) -> None:
        """The duration is validated when the strategy is written, naming the argument, the unit and the fix."""
        with pytest.raises(InvalidArgumentError) as e:
            EmitStrategy.on_window_close(idle_close=-5)
        assert e.value.args[0] == (
            "'idle_close' must be > 0 ms (got -5). Use e.g. EmitStrategy.on_window_close("
            "idle_close=timedelta(minutes=5)), or leave it out to keep Kafka's close.")
        with pytest.raises(InvalidTypeError, match="'idle_close' must be an int"):
            EmitStrategy.on_window_close(idle_close="5m")  # type: ignore[arg-type]

    def test_idle_close_only_on_close(self) -> None:
        """A window emitted on update has nothing to close."""
        with pytest.raises(InvalidArgumentError) as e:
            EmitStrategy(EmitStrategy.Kind.ON_WINDOW_UPDATE, idle_close_ms=10)
        assert e.value.args[0] == (
            "'idle_close' (10 ms) applies only to EmitStrategy.on_window_close(): a window emitted on update has "
            "nothing to close. Use EmitStrategy.on_window_close(idle_close=...).")

    def test_repr_and_equality(self) -> None:
        """A timedelta is held as int ms; the repr names it (the fingerprint's emit field)."""
        strategy = EmitStrategy.on_window_close(idle_close=timedelta(seconds=2))
        assert strategy == EmitStrategy.on_window_close(idle_close=2000)
        assert repr(strategy) == "EmitStrategy.on_window_close(idle_close=2000ms)"
        assert strategy.with_default_idle_close(5) is strategy
        assert EmitStrategy.on_window_close().with_default_idle_close(5).idle_close_ms == 5
        assert EmitStrategy.on_window_update().with_default_idle_close(5) == EmitStrategy.on_window_update()

    def test_config_key(self) -> None:
        """Both configurations read ``streamsdsl.window.idle.close.ms``; 0 and negatives are refused."""
        assert DriverConfig.from_mapping({IDLE: "60000"}).idle_close_ms == 60000
        assert DriverConfig.from_mapping({IDLE: timedelta(seconds=1)}).idle_close_ms == 1000
        assert DriverConfig.from_mapping({}).idle_close_ms is None
        app = StreamsConfig.from_mapping({"application.id": "a", "bootstrap.servers": "k:9092", IDLE: 500})
        assert app.idle_close_ms == 500
        with pytest.raises(StreamsConfigError) as e:
            DriverConfig.from_mapping({IDLE: 0})
        assert e.value.args[0] == (
            f"'{IDLE}' must be > 0 ms (got 0): it is how long an aggregation stays without records before its open "
            "windows close. Leave the key out to keep Kafka's close.")
        with pytest.raises(StreamsConfigError, match=f"'{IDLE}' must be an integer >= 0 \\(got -1\\)"):
            DriverConfig.from_mapping({IDLE: -1})

    def test_fingerprint_changes_with_the_setting(self) -> None:
        """The setting changes what the operator keeps and how Spark runs it (processing-time
        timers): a checkpoint written without it cannot continue with it, and the reverse."""
        windows = TimeWindows.of_size_with_no_grace(10)
        plain = topology_fingerprint(_windowed(windows, EmitStrategy.on_window_close()))
        idle = topology_fingerprint(_windowed(windows, EmitStrategy.on_window_close(idle_close=100)))
        from_config = topology_fingerprint(_windowed(windows, EmitStrategy.on_window_close()).with_idle_close(100))
        assert idle == from_config
        [change] = diff(plain, idle)
        assert "idle_close=100ms" in str(change)

    def test_python_operator_with_a_stateful_operator_below(self) -> None:
        """Spark's Java API names an operator's output event time only in event-time mode: with a
        stateful operator below, the Python operator runs the idle close (the report says why)."""
        from types import SimpleNamespace

        from streamsdsl.compiler.aggregations import _check_idle_close
        from streamsdsl.compiler.lowering import PlanMode

        b = StreamsBuilder()
        b.stream("in", Consumed.with_serdes(S, S)).group_by_key().windowed_by(TimeWindows.of_size_with_no_grace(10)) \
            .emit_strategy(EmitStrategy.on_window_close(idle_close=5)).count(name="windows").to_stream() \
            .map(lambda k, v: ("all", str(v))).group_by_key().count().to_stream().to("out")
        lowering = SimpleNamespace(mode=PlanMode.STREAMING, topology=b.build())
        assert _check_idle_close(lowering, SimpleNamespace(name="windows", idle_close_ms=5)) == (
            "idle close (5 ms) with a stateful operator below runs on the Python operator's processing-time timers")


def _busy_then_quiet(engine: str) -> list[Any]:
    """What the driver writes after each advance of a scenario: "a" goes quiet while "b" keeps
    the aggregation busy, then the whole aggregation goes quiet; last the drop and final counts."""
    topology = _windowed(TimeWindows.of_size_and_grace(10, 5), EmitStrategy.on_window_close(idle_close=100))
    with _driver(topology, engine=engine) as driver:
        pipe = driver.create_input_topic("in", S, S)
        pipe.pipe_input("a", "1", 1)
        pipe.pipe_input("b", "2", 2)
        driver.advance_wall_clock_time(60)
        out = [_out(driver)]
        pipe.pipe_input("b", "3", 4)  # the aggregation's last record: wall clock 60
        driver.advance_wall_clock_time(40)  # "a" has been quiet for 100 ms, the aggregation for 40
        out.append(_out(driver))
        pipe.pipe_input("a", "4", 8)  # within a's [0, 10) grace: taken (per key it would be late)
        driver.advance_wall_clock_time(100)
        out.append(_out(driver))
        pipe.pipe_input("a", "late", 9)  # its window closed idle: late
        out.append(_out(driver))
        metrics = driver.metrics()
        return [*out, (metrics["dropped-records-total"], metrics["emit-final-records-total"])]


class TestIdleCloseDirect:
    def test_time_windows_close_when_the_key_is_idle(self) -> None:
        """Records at wall clock 0; at 30 s the aggregation is idle: every open window of every key is emitted (final
        order: window start, then key bytes), with its own timestamp; a record for a closed window
        afterwards is late (dropped, counted), a newer one opens a new window."""
        topology = _windowed(TimeWindows.of_size_and_grace(10, 5),
                             EmitStrategy.on_window_close(idle_close=timedelta(seconds=30)))
        with _driver(topology) as driver:
            pipe = driver.create_input_topic("in", S, S)
            pipe.pipe_input("b", "1", 3)
            pipe.pipe_input("a", "2", 1)
            pipe.pipe_input("a", "3", 12)
            assert _out(driver) == []
            driver.advance_wall_clock_time(29_999)
            assert _out(driver) == []
            driver.advance_wall_clock_time(1)
            assert _out(driver) == [("a", "0-10:2", 1), ("b", "0-10:1", 3), ("a", "10-20:3", 12)]
            assert driver.metrics()["emit-final-records-total"] == 3.0
            pipe.pipe_input("a", "late", 14)  # a's stream time is past [10, 20)'s close (24): late
            pipe.pipe_input("a", "4", 26)
            pipe.pipe_input("b", "5", 9)  # b's too: past [0, 10)'s close (14)
            assert _out(driver) == []
            assert driver.metrics()["dropped-records-total"] == 2.0
            driver.advance_wall_clock_time(30_000)
            assert _out(driver) == [("a", "20-30:4", 26)]

    @pytest.mark.spark
    def test_spark_engine(self, spark: Any) -> None:
        """The test driver's Spark engine (the replay plan: the driver learns the aggregation's
        last input time from each run and passes it to the advance's run, the keys' floors carried
        between runs) writes what the direct engine writes, in the same order: a busy aggregation
        keeps a quiet key's window open (a record within its grace is taken), a quiet one closes
        every key's, and a record for a closed window is then late."""
        for engine in ("direct", "spark"):
            assert _busy_then_quiet(engine) == [
                [], [], [("a", "0-10:14", 8), ("b", "0-10:23", 4)], [], (1.0, 2.0)], engine

    def test_a_busy_aggregation_keeps_a_quiet_keys_windows(self) -> None:
        """Idleness is per aggregation: while records of any key reach it, a quiet key's windows
        stay open (Kafka's stream time may still close them), so a record for one within grace is
        still taken; once the whole aggregation is quiet, every key's windows close."""
        topology = _windowed(TimeWindows.of_size_and_grace(10, 5), EmitStrategy.on_window_close(idle_close=100))
        with _driver(topology) as driver:
            pipe = driver.create_input_topic("in", S, S)
            pipe.pipe_input("a", "1", 1)
            pipe.pipe_input("b", "2", 2)
            driver.advance_wall_clock_time(60)
            pipe.pipe_input("b", "3", 4)  # the aggregation's last record: wall clock 60
            driver.advance_wall_clock_time(40)  # "a" has been quiet for 100 ms, the aggregation for 40
            assert _out(driver) == []
            pipe.pipe_input("a", "4", 8)  # within a's [0, 10) grace: taken (per key it would be late)
            driver.advance_wall_clock_time(99)
            assert _out(driver) == []
            driver.advance_wall_clock_time(1)
            assert _out(driver) == [("a", "0-10:14", 8), ("b", "0-10:23", 4)]
            pipe.pipe_input("a", "late", 9)  # its window closed idle: late
            assert driver.metrics()["dropped-records-total"] == 1.0
            driver.advance_wall_clock_time(10**6)
            assert _out(driver) == []

    def test_a_quiet_aggregation_closes_every_key(self) -> None:
        """No record for idle_close ms: every key's open windows close at once, each key's later
        records for them are late, and the idle close repeats only after new records."""
        topology = _windowed(TimeWindows.of_size_and_grace(10, 5), EmitStrategy.on_window_close(idle_close=100))
        with _driver(topology) as driver:
            pipe = driver.create_input_topic("in", S, S)
            pipe.pipe_input("b", "1", 1)
            driver.advance_wall_clock_time(50)
            pipe.pipe_input("a", "2", 2)
            pipe.pipe_input("c", "3", 13)
            driver.advance_wall_clock_time(99)
            assert _out(driver) == []
            driver.advance_wall_clock_time(1)
            assert _out(driver) == [("a", "0-10:2", 2), ("b", "0-10:1", 1), ("c", "10-20:3", 13)]
            pipe.pipe_input("a", "late", 5)
            pipe.pipe_input("b", "late", 9)
            pipe.pipe_input("c", "late", 19)
            pipe.pipe_input("b", "4", 20)
            assert driver.metrics()["dropped-records-total"] == 3.0
            driver.advance_wall_clock_time(99)
            assert _out(driver) == []
            driver.advance_wall_clock_time(1)
            assert _out(driver) == [("b", "20-30:4", 20)]

    def test_default_keeps_kafkas_close(self) -> None:
        """Without the setting the wall clock closes nothing."""
        topology = _windowed(TimeWindows.of_size_with_no_grace(10), EmitStrategy.on_window_close())
        with _driver(topology) as driver:
            driver.create_input_topic("in", S, S).pipe_input("a", "1", 1)
            driver.advance_wall_clock_time(10**9)
            assert _out(driver) == []

    def test_config_sets_it_and_a_strategy_overrides_it(self) -> None:
        """``streamsdsl.window.idle.close.ms`` applies to every on-close aggregation that sets none."""
        plain = _windowed(TimeWindows.of_size_with_no_grace(10), EmitStrategy.on_window_close())
        own = _windowed(TimeWindows.of_size_with_no_grace(10), EmitStrategy.on_window_close(idle_close=500))
        for topology, closes_at in ((plain, 50), (own, 500)):
            with _driver(topology, {IDLE: 50}) as driver:
                driver.create_input_topic("in", S, S).pipe_input("a", "1", 1)
                driver.advance_wall_clock_time(closes_at - 1)
                assert _out(driver) == []
                driver.advance_wall_clock_time(1)
                assert _out(driver) == [("a", "0-10:1", 1)]

    def test_sessions(self) -> None:
        """A session closes idle as at the first stream time past end + gap + grace (the key's
        stream time is then 19): a later record inside it is late, as at that stream time; one past
        it starts a new session."""
        topology = _windowed(SessionWindows.of_inactivity_gap_and_grace(10, 0),
                             EmitStrategy.on_window_close(idle_close=100))
        with _driver(topology) as driver:
            pipe = driver.create_input_topic("in", S, S)
            pipe.pipe_input("a", "1", 5)
            pipe.pipe_input("a", "2", 8)
            driver.advance_wall_clock_time(100)
            assert _out(driver) == [("a", "5-8:12", 8)]
            pipe.pipe_input("a", "late", 7)  # a session ending before 19 - 10 - 0 = 9 is late
            pipe.pipe_input("a", "3", 40)
            driver.advance_wall_clock_time(100)
            assert _out(driver) == [("a", "40-40:3", 40)]
            assert driver.metrics()["dropped-records-total"] == 1.0

    def test_sliding_windows(self) -> None:
        """Sliding windows close idle in their final order, each once."""
        topology = _windowed(SlidingWindows.of_time_difference_and_grace(5, 0),
                             EmitStrategy.on_window_close(idle_close=100))
        with _driver(topology) as driver:
            pipe = driver.create_input_topic("in", S, S)
            pipe.pipe_input("a", "1", 10)
            pipe.pipe_input("a", "2", 12)
            driver.advance_wall_clock_time(100)
            assert _out(driver) == [("a", "5-10:1", 10), ("a", "7-12:12", 12), ("a", "11-16:2", 12)]

    def test_cogroup(self) -> None:
        """A windowed cogroup on close: one stream time and one idle clock over its inputs."""
        with _driver(_cogrouped(EmitStrategy.on_window_close(idle_close=100))) as driver:
            driver.create_input_topic("left", S, S).pipe_input("a", "x", 1)
            driver.advance_wall_clock_time(50)
            driver.create_input_topic("right", S, S).pipe_input("a", "y", 2)
            driver.advance_wall_clock_time(99)
            assert _out(driver) == []
            driver.advance_wall_clock_time(1)
            assert _out(driver) == [("a", "0:xY", 2)]


# -- the property ------------------------------------------------------------------------------------
_EVENTS = st.lists(
    st.one_of(st.tuples(st.just("rec"), st.sampled_from("abc"), st.integers(0, 60)),
              st.tuples(st.just("wall"), st.just(""), st.integers(1, 150))),
    min_size=1, max_size=16)
_WINDOWS = st.one_of(
    st.builds(lambda size, grace: TimeWindows.of_size_and_grace(size, grace), st.integers(1, 15), st.integers(0, 10)),
    st.builds(SlidingWindows.of_time_difference_and_grace, st.integers(1, 12), st.integers(0, 10)),
    st.builds(SessionWindows.of_inactivity_gap_and_grace, st.integers(1, 12), st.integers(0, 10)),
)


def _run(windows: Any, idle: int | None, events: list[tuple[str, str, int]], *, drain: bool) -> list[Any]:
    emit = EmitStrategy.on_window_close() if idle is None else EmitStrategy.on_window_close(idle_close=idle)
    with _driver(_windowed(windows, emit)) as driver:
        pipe = driver.create_input_topic("in", S, S)
        for i, (kind, key, n) in enumerate(events):
            if kind == "rec":
                pipe.pipe_input(key, f"{i}.", n)
            else:
                driver.advance_wall_clock_time(n)
        if drain:
            driver.advance_wall_clock_time(idle or 0)
        return _out(driver)


@settings(max_examples=int(os.environ.get("STREAMSDSL_PROPERTY_EXAMPLES", "200")) // 2, deadline=None)
@given(events=_EVENTS, windows=_WINDOWS)
def test_idle_close_property(events: list[tuple[str, str, int]], windows: Any) -> None:
    """Never triggered (no key idle for 10**6 ms), the output is Kafka's exactly; triggered (100
    ms), each window is emitted once, and (tumbling windows) each record is in at most one."""
    assert _run(windows, 10**6, events, drain=False) == _run(windows, None, events, drain=False)
    out = _run(windows, 100, events, drain=True)
    windows_out = [(k, v.split(":")[0]) for k, v, _ in out]
    assert len(windows_out) == len(set(windows_out))
    # every record that was not late is in exactly one emitted window's aggregate (time windows
    # may hold a record in several; sessions and sliding windows keep merging/overlap rules)
    if isinstance(windows, TimeWindows) and windows.advance_ms == windows.size_ms:
        values = "".join(v.split(":")[1] for _, v, _ in out)
        assert len(values.split(".")) - 1 == len({p for p in values.split(".") if p})


def _model(size: int, grace: int, idle: int, events: list[tuple[str, str, int]]) -> list[Any]:
    """Tumbling windows on close with idle close, written out by brute force: at each wall-clock
    advance the aggregation's last input time is found by scanning back through the events; if
    it is ``idle`` ms or more ago, every key's open windows close and the key's own stream time
    (its floor) moves past their close."""
    stream_time, wall = -1, 0
    floors: dict[str, int] = {}
    open_windows: dict[tuple[str, int], tuple[str, int]] = {}  # (key, start) -> (aggregate, timestamp)
    walls: list[tuple[str, int]] = []  # (kind, wall clock) per event so far
    out: list[Any] = []

    def emit(closing: list[tuple[str, int]]) -> None:
        for key, start in sorted(closing, key=lambda ks: (ks[1], ks[0].encode())):
            agg, ts = open_windows.pop((key, start))
            out.append((key, f"{start}-{start + size}:{agg}", ts))

    for i, (kind, key, n) in enumerate(events):
        if kind == "rec":
            walls.append(("rec", wall))
            stream_time = max(stream_time, n)
            start = n - n % size
            if start + size + grace > max(stream_time, floors.get(key, -1)):  # else late
                agg, ts = open_windows.get((key, start), ("", -1))
                open_windows[(key, start)] = (agg + f"{i}.", max(ts, n))
            emit([(k, s) for k, s in open_windows if s + size + grace <= stream_time])
        else:
            wall += n
            walls.append(("wall", wall))
            last = max((w for kind_, w in walls if kind_ == "rec"), default=None)
            if last is not None and wall - last >= idle:
                for k in {k for k, _ in open_windows}:
                    ends = [s + size + grace for kk, s in open_windows if kk == k]
                    floors[k] = max(floors.get(k, -1), stream_time, *ends)
                emit(list(open_windows))
    return out


@settings(max_examples=int(os.environ.get("STREAMSDSL_PROPERTY_EXAMPLES", "200")) // 2, deadline=None)
@given(events=_EVENTS, size=st.integers(1, 15), grace=st.integers(0, 10), idle=st.integers(1, 200))
def test_idle_close_per_aggregation_matches_a_brute_force_model(
        events: list[tuple[str, str, int]], size: int, grace: int, idle: int) -> None:
    """The direct engine's idle close (the kernel's rule) writes what the brute-force model of
    the per-aggregation rule writes: the same records, timestamps and order."""
    assert _run(TimeWindows.of_size_and_grace(size, grace), idle, events, drain=False) == \
        _model(size, grace, idle, events)


# -- streaming: processing-time timers ------------------------------------------------------------
def _wait_for(condition: Any, query: Any, timeout_s: float = 60.0, seen: Any = None, metrics: Any = None) -> None:
    """Poll ``condition`` while the query runs its processing-time micro-batches (counting each
    one's progress into ``metrics`` before Spark's recent reports drop it); a timeout says what
    ``seen()`` returns then (the records written, the metrics)."""
    import time

    def done() -> bool:
        if metrics is not None:
            metrics.refresh(0)
        return bool(condition())

    deadline = time.monotonic() + timeout_s
    while not done():
        assert query.exception() is None, query.exception()
        assert time.monotonic() < deadline, f"timed out waiting for the idle close; seen: {seen() if seen else None}"
        time.sleep(0.1)


@pytest.mark.spark
class TestIdleCloseStreaming:
    @pytest.mark.usefixtures("operator")
    def test_idle_close_waits_for_the_whole_aggregation(self, spark: Any, tmp_path: Any, operator: str) -> None:
        """A streaming query on processing-time timers, on each operator, over two state
        partitions: while another key keeps reaching the aggregation (from the other partition), a
        quiet key's open window stays open; once the whole aggregation is quiet for the idle close
        (4 s, longer than a loaded machine's micro-batch), every key's open windows are emitted (the direct engine's records and timestamps).
        A window the watermark closed comes out at its key's timer either way."""
        import time

        from streamsdsl.compiler.idle_channel import _parse
        from streamsdsl.io.files import FileTopic
        from streamsdsl.runtime.streaming import start_streaming
        from tests._support import Collect

        b = StreamsBuilder()
        b.stream("in", Consumed.with_serdes(S, S)).group_by_key().windowed_by(TimeWindows.of_size_with_no_grace(10)) \
            .emit_strategy(EmitStrategy.on_window_close(idle_close=4000)).count().to_stream() \
            .map(lambda k, v: (k.key, f"{k.window.start}-{k.window.end}:{v}")).to("out")
        topic = FileTopic(str(tmp_path / "in"))
        topic.append("in", [("w", "0", 1)], S, S)  # the first micro-batch, slow (workers start): "w" alone
        out = Collect()
        spark.conf.set("spark.sql.shuffle.partitions", "2")
        try:
            query, compiled, metrics = start_streaming(b.build(), lambda n: topic.read_stream(spark, n.topics), out,
                                                       checkpoint_location=str(tmp_path / "cp"),
                                                       trigger={"processingTime": "250 milliseconds"})
        finally:
            spark.conf.set("spark.sql.shuffle.partitions", "1")
        try:
            assert [c.backend.value for c in compiled.operators.values()] == [operator]
            _wait_for(lambda: query.lastProgress is not None, query, metrics=metrics)
            # "a" and "busy" are in different state partitions of two (Spark's hash of the key)
            topic.append("in", [("a", "1", 1), ("b", "2", 3), ("a", "3", 4), ("a", "4", 12)], S, S)
            _wait_for(lambda: ("a", "0-10:2", 4) in [r[1:] for r in out.records], query,  # closed by a's record at 12
                      metrics=metrics)
            # "busy" within [10, 20) (the watermark stays at 12) in every micro-batch for longer than the
            # idle close: the file source reads one file a micro-batch, the next is written once it is read
            start, written, n, read = time.monotonic(), 5, 0, {}
            while time.monotonic() - start < 4.5:
                read.update((p["batchId"], p["numInputRows"]) for p in query.recentProgress)
                if sum(read.values()) >= written:
                    topic.append("in", [("busy", "x", 13)], S, S)
                    written, n = written + 1, n + 1
                time.sleep(0.05)
                metrics.refresh(0)  # a micro-batch every trigger: count each before Spark's recent reports drop it
                assert query.exception() is None, query.exception()
            while_busy = [(k, v) for _, k, v, _ in out.records]
            _wait_for(lambda: len(out.records) == 5 and metrics.snapshot()["emit-final-records-total"] == 5.0, query,
                      seen=lambda: (out.records, metrics.snapshot()["emit-final-records-total"],
                                    [(p["batchId"], p["timestamp"], p["numInputRows"]) for p in query.recentProgress]),
                      metrics=metrics)
        finally:
            query.stop()
        # a's [10, 20) stayed open while "busy" kept coming, though a had no record for longer than
        # the idle close; b's and w's [0, 10), which the watermark closed, come out at their key's timer
        assert ("a", "10-20:1") not in while_busy
        assert sorted((k, v, ts) for _, k, v, ts in out.records) == [
            ("a", "0-10:2", 4), ("a", "10-20:1", 12), ("b", "0-10:1", 3), ("busy", f"10-20:{n}", 13), ("w", "0-10:1", 1)]
        assert [k for _, k, _, _ in out.records[-2:]] in (["a", "busy"], ["busy", "a"])
        [store] = os.listdir(tmp_path / "cp" / "streamsdsl" / "idle")
        markers = [_parse(name) for name in os.listdir(tmp_path / "cp" / "streamsdsl" / "idle" / store)]
        assert {m[0] for m in markers if m is not None} == {0, 1}

    def test_the_drivers_streaming_engine_counts_every_micro_batch(self, spark: Any) -> None:
        """With idle close the query runs a micro-batch every trigger, also between two reads of
        the driver: the metrics count every micro-batch's progress as it ends, not only those
        Spark still keeps (here two: ``numRecentProgressUpdates``), so the null key's drop survives
        the timer micro-batches after it."""
        import time

        topology = _windowed(TimeWindows.of_size_with_no_grace(10), EmitStrategy.on_window_close(idle_close=60_000))
        key = "spark.sql.streaming.numRecentProgressUpdates"
        before = spark.conf.get(key)
        spark.conf.set(key, "2")
        try:
            with TopologyTestDriver(topology, engine="streaming", spark=spark) as driver:
                driver.create_input_topic("in").pipe_input(None, "dropped", 1)
                assert driver.create_output_topic("out").read_records_to_list() == []  # the query runs it
                engine = driver._engine
                progressed = engine._query.lastProgress["batchId"]
                deadline = time.monotonic() + 60
                while engine._query.lastProgress["batchId"] < progressed + 4:  # timer micro-batches since
                    assert time.monotonic() < deadline, "no micro-batch ran on the processing-time trigger"
                    time.sleep(0.1)
                assert progressed not in [p["batchId"] for p in engine._query.recentProgress]
                assert driver.metrics()["dropped-records-total"] == 1.0
        finally:
            spark.conf.set(key, before)

    def test_a_streaming_query_needs_its_checkpoint(self, spark: Any, tmp_path: Any) -> None:
        """The markers live under the checkpoint: compiling an idle-close aggregation for
        streaming without one is an error that says so."""
        from streamsdsl.compiler import PlanMode, compile_topology
        from streamsdsl.compiler.plan import CompileOptions
        from streamsdsl.errors import TopologyError
        from streamsdsl.records import RAW_RECORD_DDL

        topology = _windowed(TimeWindows.of_size_with_no_grace(10), EmitStrategy.on_window_close(idle_close=100))
        with pytest.raises(TopologyError, match="needs the query's checkpoint location"):
            compile_topology(topology, lambda n: spark.readStream.schema(RAW_RECORD_DDL).parquet(str(tmp_path)),
                             CompileOptions(PlanMode.STREAMING, "python"))


class TestIdleChannel:
    """The markers through which a streaming idle-close aggregation's tasks learn when it last had
    a record (`streamsdsl.compiler.idle_channel`; the JVM twin's cases are IdleChannelTest.java)."""

    def test_last_input_is_the_newest_marker_of_an_earlier_batch(self, tmp_path: Any) -> None:
        from streamsdsl.compiler.idle_channel import IdleChannel, channel_directory

        directory = channel_directory(str(tmp_path), "store")
        assert directory == f"{tmp_path}/streamsdsl/idle/store"
        p0, p1 = IdleChannel(directory), IdleChannel(directory)
        assert p0.last_input_before(0) == -1
        p0.record(0, 0, 1000)
        p1.record(1, 1, 1500)
        reader = IdleChannel(directory)
        assert reader.last_input_before(0) == -1  # batch 0's own records do not count
        assert reader.last_input_before(1) == 1000
        assert IdleChannel(directory).last_input_before(2) == 1500
        # read once per micro-batch: a marker written later in the same batch is not read again
        p0.record(0, 2, 2000)
        assert IdleChannel(directory).last_input_before(2) == 1500
        assert reader.last_input_before(1) == 1000
        assert reader.last_input_before(3) == 2000

    def test_a_partition_keeps_its_two_newest_markers(self, tmp_path: Any) -> None:
        from streamsdsl.compiler.idle_channel import IdleChannel

        directory = f"file://{tmp_path}/idle"
        for batch in range(4):
            IdleChannel(directory).record(0, batch, 100 * batch)
        IdleChannel(directory).record(3, 2, 250)
        assert sorted(os.listdir(tmp_path / "idle")) == ["0-2-200", "0-3-300", "3-2-250"]
        # a retried micro-batch creates the same marker again; a reader of batch 3 still sees batch 2's
        IdleChannel(directory).record(0, 3, 300)
        assert sorted(os.listdir(tmp_path / "idle")) == ["0-2-200", "0-3-300", "3-2-250"]
        assert IdleChannel(directory).last_input_before(3) == 250
        (tmp_path / "idle" / ".0-3-300.crc").write_text("a file system's checksum, not a marker")
        assert IdleChannel(directory).last_input_before(9) == 300
