"""The Java port of the aggregation rules beside the Python kernel, without Spark: the same records
through `streamsdsl.semantics.kernels.AggregateKernel` (built as the direct engine builds it) and
through the Java classes the JVM operator runs (``Clock``, ``Windowing``, ``Sliding``, ``Agg``,
``ChangeBuffer``), driven by ``KernelReplay`` (jvm/src/test) in one JVM per module: per record,
the same drops and the same forwarded records (the record cache flushed after every record, or
emit on close). The stream-stream join likewise: `streamsdsl.semantics.stream_stream.StreamJoinKernel`
beside ``StreamJoin`` (driven by ``JoinReplay``), under each host of the kernel (the whole task with
Kafka's scan of held records, the driver's operator, the streaming operator): per record the same
expired held records, drops and forwarded pairs, in the same order. The stream-table, table-table
and global-table joins' ports (``StreamTableJoin``, ``TableTableJoin``, the global join's step)
beside the Python kernels' steps: per record the same drop, pair or delete."""

from __future__ import annotations

import operator
import subprocess
import sys
from pathlib import Path
from typing import Any, Iterator, NamedTuple

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from streamsdsl import ir
from streamsdsl.compiler.columns import DROPPED, DROPPED_NULL_VALUE
from streamsdsl.dsl.aggregations import BuiltinAggregator, BuiltinInitializer, BuiltinMerger
from streamsdsl.operators.functions import agg_functions
from streamsdsl.semantics.aggregation import AggFunctions
from streamsdsl.semantics.kernels import DROPPED_NULL_VALUE as NULL_VALUE
from streamsdsl.semantics.kernels import AggregateKernel
from streamsdsl.semantics.session import SessionWindowing
from streamsdsl.semantics.sliding import SlidingWindowing
from streamsdsl.semantics.timewindow import TimeWindowing
from streamsdsl.semantics.unwindowed import Unwindowed

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "jvm"))

from test import compile_tests  # noqa: E402  (jvm/test.py)

#: The built-in functions of the JVM operator (`Agg.Op`) and the Python functions they mirror.
HELPERS = ("COUNT", "SUM", "MIN", "MAX")
REDUCERS = {"RSUM": operator.add, "RMIN": min, "RMAX": max}


class Case(NamedTuple):
    """An aggregation: the window kind and its three parameters (session: gap, grace; time: size,
    advance, grace; sliding: time difference, grace), emit on close, the initializer (a helper's,
    or reduce's ``RSUM`` / ``RMIN`` / ``RMAX``), the sessions' merger (``none`` elsewhere), one
    function per input (two or three: a cogroup), 64-bit integers or doubles."""

    kind: str
    a: int
    b: int
    c: int
    on_close: bool
    init: str
    merge: str
    ops: tuple[str, ...]
    double: bool = False


#: A record: key, timestamp, input, value (``None``: a null value); key `IDLE`: every key idle.
Record = tuple[str, int, int, int | float | None]
#: The key of the event "every key has been idle" (idle close, `AggregateKernel.close_idle`).
IDLE = "*"


class Replay:
    """One ``KernelReplay`` JVM: a case in, per record its drops and forwarded records out."""

    main = "io.streamsdsl.jvm.KernelReplay"

    def __init__(self, compiled: tuple[str, str]) -> None:
        java, classpath = compiled
        self.proc = subprocess.Popen([java, "-cp", classpath, self.main],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def run(self, case: Case, records: list[Record]) -> list[tuple[Any, ...]]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        init = "null" if case.init in ("MIN", "MAX", *REDUCERS) else "zero"
        head = f"case {case.kind} {case.a} {case.b} {case.c} {int(case.on_close)} {init} {case.merge} " \
               f"{'double' if case.double else 'long'} {' '.join(case.ops)}"
        lines = [head, *("idle" if k == IDLE else f"rec {k} {ts} {i} {'null' if v is None else repr(v)}"
                         for k, ts, i, v in records), "end"]
        self.proc.stdin.write("\n".join(lines) + "\n")
        self.proc.stdin.flush()
        got: list[tuple[Any, ...]] = []
        for line in iter(self.proc.stdout.readline, "done\n"):
            f = line.split()
            if f[0] == "out":
                value = None if f[4] == "null" else repr(float(f[4])) if case.double else int(f[4])
                got.append((f[1], int(f[2]), int(f[3]), value, int(f[5])))
            else:
                got.append(("step", int(f[1]), f[2]))
        return got

    def close(self) -> None:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=30)
        self.proc.stdout.close()


@pytest.fixture(scope="module")
def compiled(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    """The main and test sources compiled once: the ``java`` command and the class path."""
    out = str(tmp_path_factory.mktemp("kernel-replay"))
    java, jars, _ = compile_tests(out)
    return java, f"{out}:{jars}/*"


@pytest.fixture(scope="module")
def replay(compiled: tuple[str, str]) -> Iterator[Replay]:
    r = Replay(compiled)
    yield r
    r.close()


def _functions(case: Case) -> list[AggFunctions]:
    """The Python functions of a case: `Aggregations`' helpers (a cogroup's aggregators with
    one initializer and merger), or reduce's (`operators.functions.agg_functions`)."""
    if case.init in REDUCERS:
        return [agg_functions(ir.ReduceAgg(ir.UserFn(REDUCERS[case.init], "(agg, value)")))]
    kind = float if case.double else int
    merger = None if case.merge == "none" else BuiltinMerger({"ADD": "sum"}.get(case.merge, case.merge.lower()), kind)
    return [AggFunctions(BuiltinInitializer(case.init.lower(), kind), BuiltinAggregator(op.lower(), None, kind), merger)
            for op in case.ops]


def python_kernel(case: Case, records: list[Record]) -> list[tuple[Any, ...]]:
    """The case through `AggregateKernel` as the direct engine builds it (a cogroup's inputs keep
    their own stream times unless it emits on close); a double as its ``repr`` (-0.0 is not 0.0)."""
    a, b, c = case.a, case.b, case.c
    windowing = {"session": lambda: SessionWindowing(a, b, cached=not case.on_close),
                 "time": lambda: TimeWindowing(a, b, c), "sliding": lambda: SlidingWindowing(a, b),
                 "unwindowed": Unwindowed}[case.kind]()
    fns = _functions(case)
    kernel = AggregateKernel(windowing, fns, emit_on_close=case.on_close,
                             per_input_time=len(fns) > 1 and not case.on_close,
                             idle_close_ms=1 if any(r[0] == IDLE for r in records) else None)
    kernel.wall_clock = 0  # the records come at wall clock 0; an idle event is long after
    got: list[tuple[Any, ...]] = []
    for key, ts, source, value in records:
        step = kernel.close_idle(2**40) if key == IDLE else kernel.process(key, value, ts, source)
        metric = "-" if not step.dropped else DROPPED_NULL_VALUE if step.reason == NULL_VALUE else DROPPED
        got.append(("step", step.dropped, metric))
        for o in step.outputs:
            start, end = (0, 0) if o.start is None else (o.start, o.end)
            value = repr(o.value) if case.double and o.value is not None else o.value
            got.append((o.key, start, end, value, o.timestamp))
    return got


@st.composite
def _cases(draw: st.DrawFn) -> Case:
    kind = draw(st.sampled_from(["session", "time", "sliding"] * 2 + ["unwindowed"]))
    if kind == "time":
        size = draw(st.integers(1, 15))
        a, b, c = size, draw(st.integers(1, size)), draw(st.integers(0, 12))
    elif kind == "unwindowed":
        a = b = c = 0
    else:
        a, b, c = draw(st.integers(1, 12)), draw(st.integers(0, 12)), 0
    on_close = kind != "unwindowed" and draw(st.booleans())
    double = draw(st.booleans())
    if draw(st.integers(0, 4)) == 0:  # reduce(operator.add | min | max) of one stream
        init = draw(st.sampled_from(sorted(REDUCERS)))
        return Case(kind, a, b, c, on_close, init, init if kind == "session" else "none", (init,), double)
    # count is of integers; a null initial aggregate takes only min and max (a count or sum of
    # None fails on both sides)
    init = draw(st.sampled_from(HELPERS[1:] if double else HELPERS))
    ops = ("MIN", "MAX") if init in ("MIN", "MAX") else HELPERS[1:] if double else HELPERS
    inputs = tuple(draw(st.sampled_from(ops)) for _ in range(draw(st.sampled_from([1, 2, 2, 3]))))
    merge = "none" if kind != "session" else "ADD" if init in ("COUNT", "SUM") else draw(st.sampled_from(["MIN", "MAX"]))
    return Case(kind, a, b, c, on_close, init, merge, inputs, double)


@st.composite
def _records(draw: st.DrawFn, case: Case) -> list[Record]:
    """Up to 25 records; a cogroup's inputs each ahead of the others by their own offset, so that
    their stream times part (what `Clock.java` and `store_clock` decide on). Doubles include
    -0.0 and 0.0, which tell Python's tie rule of ``min`` and ``max`` (the first wins)."""
    inputs = len(case.ops)
    offsets = draw(st.lists(st.integers(0, 30), min_size=inputs, max_size=inputs))
    number: st.SearchStrategy[Any] = st.integers(-5, 9)
    if case.double:
        number = st.one_of(st.integers(-5, 9).map(lambda n: n / 2), st.just(-0.0))
    value = number if case.init in REDUCERS else st.one_of(number, st.none())  # reduce fails on a null
    n = draw(st.integers(1, 25))
    raw = draw(st.lists(st.tuples(st.sampled_from("abc"), st.integers(0, 40), st.integers(0, inputs - 1), value),
                        min_size=n, max_size=n))
    return [(key, ts + offsets[i], i, v) for key, ts, i, v in raw]


def _case_and_records() -> st.SearchStrategy[tuple[Case, list[Record]]]:
    return _cases().flatmap(lambda case: st.tuples(st.just(case), _records(case)))


COUNT = ("COUNT", "ADD", ("COUNT",))
COUNT2 = ("COUNT", "ADD", ("COUNT", "COUNT"))
COUNTED = ("COUNT", "none", ("COUNT",))


@settings(max_examples=500, deadline=None, suppress_health_check=list(HealthCheck))
@given(_case_and_records())
@example((Case("session", 5, 0, 0, False, *COUNT), [("a", 0, 0, 1), ("a", 4, 0, 1), ("a", 10, 0, 1), ("a", 5, 0, 1)]))
@example((Case("sliding", 10, 100, 0, False, *COUNTED), [("k", 100, 0, 1), ("k", 106, 0, 1), ("k", 103, 0, 1)]))
@example((Case("time", 10, 5, 0, True, *COUNTED), [("b", 2, 0, 1), ("a", 1, 0, 1), ("a", 9, 0, 1), ("b", 25, 0, 1)]))
@example((Case("unwindowed", 0, 0, 0, False, "SUM", "none", ("SUM",)),
          [("a", 1, 0, 4), ("a", 2, 0, None), ("a", 3, 0, 2)]))
# a sliding window stays in the state until two time differences after its close: the record at
# 24 (too late for its own left window) still creates the record at 20's right window [21, 27]
@example((Case("sliding", 6, 2, 0, False, *COUNTED), [("a", 20, 0, 1), ("a", 29, 0, 1), ("a", 24, 0, 1)]))
# a record exactly a time difference after the previous one: its left window starts from the
# previous record's left window (Kafka's processReverse)
@example((Case("sliding", 10, 5, 0, False, *COUNTED), [("a", 10, 0, 1), ("a", 20, 0, 1)]))
# on close (no record cache) the store's time, 7, hides [5, 5] from a's record at 7: [7, 7] starts
@example((Case("session", 2, 0, 0, True, *COUNT), [("a", 5, 0, 1), ("b", 7, 0, 1), ("a", 7, 0, 1), ("c", 9, 0, 1)]))
# ... and a session started again over a hidden one of the same bounds replaces it, emitted once
# (oracle case 78ba5d55ed19)
@example((Case("session", 2, 5, 0, True, *COUNT), [("c", 12, 0, 1), ("c", 5, 0, 1), ("c", 5, 0, 1), ("c", 33, 0, 1)]))
# a cogroup's slower input still adds to a window the faster input's stream time closed (oracle
# case 197bb19b1746: the record cache keeps it until every input's stream time expired it)
@example((Case("time", 10, 10, 0, False, "COUNT", "none", ("COUNT", "COUNT")),
          [("k", 5, 1, 1), ("k", 25, 1, 1), ("k", 7, 0, 1), ("k", 9, 1, 1)]))
# a session cogroup's store time, the fastest input's, closes a session for every input (oracle
# case 234cb66c1139)
@example((Case("session", 2, 5, 0, False, *COUNT2), [("a", 6, 0, 1), ("b", 14, 0, 1), ("a", 4, 1, 1), ("a", 4, 0, 1)]))
# min of a null value: a null aggregate, which deletes the window (Kafka's put(window, null))
@example((Case("time", 10, 10, 0, False, "MIN", "none", ("MIN", "MAX")), [("a", 1, 0, None), ("a", 2, 1, 3)]))
# Python's min and max keep the aggregate on a tie: 0.0 stays 0.0, -0.0 stays -0.0
@example((Case("time", 10, 10, 0, False, "MIN", "none", ("MIN", "MAX"), True),
          [("a", 1, 0, 0.0), ("a", 2, 0, -0.0), ("a", 3, 1, -0.0), ("b", 1, 1, -0.0), ("b", 2, 0, 0.0)]))
def test_java_port_forwards_what_the_python_kernel_forwards(replay: Replay, case_records: tuple[Case, list[Record]]
                                                           ) -> None:
    """Every window kind, emit on update and on close, grace, out-of-order records and null
    values; count, sum, min, max and reduce, of integers and of doubles; a cogroup of up to three
    inputs (each its own stream time: `Clock.java` beside `store_clock`): per record the same
    drops (count and metric) and the same forwarded records."""
    case, records = case_records
    assert replay.run(case, records) == python_kernel(case, records)


def _idle_case_and_records() -> st.SearchStrategy[tuple[Case, list[Record]]]:
    """On-close cases whose records are interleaved with idle events."""
    cases = _cases().filter(lambda c: c.on_close)
    return cases.flatmap(lambda case: st.tuples(st.just(case), _records(case).flatmap(
        lambda records: st.lists(st.integers(0, len(records)), max_size=3).map(
            lambda at: [r for i, rec in enumerate(records) for r in ([(IDLE, 0, 0, None)] * at.count(i) + [rec])]
            + [(IDLE, 0, 0, None)] * at.count(len(records))))))


@settings(max_examples=100, deadline=None, suppress_health_check=list(HealthCheck))
@given(_idle_case_and_records())
@example((Case("time", 10, 10, 5, True, *COUNTED), [("a", 1, 0, 1), ("a", 12, 0, 1), (IDLE, 0, 0, None),
                                                     ("a", 14, 0, 1), ("a", 26, 0, 1)]))
def test_java_idle_close_closes_what_the_python_kernel_closes(replay: Replay, case_records: tuple[Case, list[Record]]
                                                              ) -> None:
    """Idle close (streamsdsl's, not Kafka's): every window kind that emits on close, a cogroup
    too; after an idle event every key's open windows come out in the same order, and the keys'
    later records are judged by the same floors (the same drops, the same windows)."""
    case, records = case_records
    assert replay.run(case, records) == python_kernel(case, records)


# --- the stream-stream join -------------------------------------------------------------------------

class JoinCase(NamedTuple):
    """A stream-stream join (`StreamJoinSpec`) and the host driving the kernel: ``kafka`` (one task
    over all keys, Kafka's scan of held records), ``replay`` (the driver's operator, times from
    the plan) or ``streaming`` (the streaming operator, one record per micro-batch)."""

    kind: str
    before: int
    after: int
    grace: int
    fix: bool
    mode: str


#: A join record: side (0 left, 1 right), key, timestamp, value (``None``: a null key or value).
JoinRecord = tuple[int, str | None, int, str | None]
FLUSH = 10**9


class JoinReplay(Replay):
    """One ``JoinReplay`` JVM: a join case in, per record its expired held records, drop and
    forwarded pairs out."""

    main = "io.streamsdsl.jvm.JoinReplay"

    def join(self, case: JoinCase, records: list[JoinRecord]) -> list[tuple[Any, ...]]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        head = f"case {case.kind} {case.before} {case.after} {case.grace} {int(case.fix)} {case.mode}"
        lines = [head, *(f"rec {s} {'null' if k is None else k} {ts} {'null' if v is None else v}"
                         for s, k, ts, v in records), "end"]
        self.proc.stdin.write("\n".join(lines) + "\n")
        self.proc.stdin.flush()
        got: list[tuple[Any, ...]] = []
        for line in iter(self.proc.stdout.readline, "done\n"):
            f = [None if x == "null" else x for x in line.split()]
            got.append(("step", None if f[1] == "-" else f[1]) if f[0] == "step" else (f[1], f[2], f[3], int(f[4])))  # type: ignore[arg-type]
        return got


@pytest.fixture(scope="module")
def join_replay(compiled: tuple[str, str]) -> Iterator[JoinReplay]:
    r = JoinReplay(compiled)
    yield r
    r.close()


def python_join_kernel(case: JoinCase, records: list[JoinRecord]) -> list[tuple[Any, ...]]:
    """The case through `StreamJoinKernel` as its hosts drive it: the direct engine (``kafka``),
    `ReplayStreamJoinProcessor` with the plan's times (``replay``) and
    `StreamingStreamJoinProcessor` (``streaming``), with the joiner ``(left, right)``."""
    from streamsdsl.semantics.stream_stream import (
        LEFT, RIGHT, JoinClock, JoinWindowsSpec, StreamJoinKernel, StreamJoinSpec)

    spec = StreamJoinSpec(case.kind, JoinWindowsSpec(case.before, case.after, case.grace, case.fix))  # type: ignore[arg-type]
    kernel = StreamJoinKernel(spec, lambda left, right: (left, right))
    got: list[tuple[Any, ...]] = []

    def emit(outputs: Any) -> None:
        got.extend((o.key, *o.value, o.timestamp) for o in outputs)

    stream_time = scan_time = -1
    store = [-1, -1]
    for s, key, ts, value in records:
        side = (LEFT, RIGHT)[s]
        if case.mode == "kafka":
            step = kernel.process(side, key, value, ts)
            got.append(("step", step.dropped))
            emit(step.scanned + step.outputs)
            continue
        watermark, stream_time = stream_time, max(stream_time, ts)
        valid = key is not None and value is not None
        if valid and ts == stream_time:
            scan_time = ts
        if valid:
            store[s] = max(store[s], ts)
        if key is None:
            clock = JoinClock(ts)
        elif case.mode == "replay":
            if value is not None and spec.holds:
                emit(kernel.expire(key, scan_time, left_store_time=store[0], right_store_time=store[1]))
            clock = JoinClock(stream_time, store[1 - s])
        else:
            emit(kernel.expire(key, watermark))
            now = max(watermark, ts)
            if value is not None and spec.holds and ts == now:
                emit(kernel.expire(key, now))
            clock = JoinClock(now)
        step = kernel.process(side, key, value, ts, clock=clock)
        got.append(("step", step.dropped))
        emit(step.outputs)
    for key in sorted(kernel.states) if case.mode != "kafka" else ():  # keys in order, as `JoinReplay`
        if case.mode == "replay":
            emit(kernel.expire(key, scan_time, left_store_time=store[0], right_store_time=store[1]))
        else:
            emit(kernel.expire(key, FLUSH))
    return got


@st.composite
def _join_case_and_records(draw: st.DrawFn) -> tuple[JoinCase, list[JoinRecord]]:
    """A window that may be one-sided (a negative ``before`` or ``after``), grace, the fix on or
    off; up to 25 records of three keys, a few with a null key or value, out of order by up to
    the grace period and sometimes later."""
    before = draw(st.integers(-5, 20))
    after = draw(st.integers(max(-before, -5), 20))
    grace = draw(st.integers(0, 15))
    case = JoinCase(draw(st.sampled_from(["inner", "left", "outer"])), before, after, grace,
                    draw(st.integers(0, 4)) > 0, draw(st.sampled_from(["kafka", "replay", "streaming"])))
    records: list[JoinRecord] = []
    stream_time = -1
    for i in range(draw(st.integers(1, 25))):
        s = draw(st.integers(0, 1))
        key = None if draw(st.integers(0, 12)) == 0 else draw(st.sampled_from("abc"))
        value = None if draw(st.integers(0, 14)) == 0 else f"{'lr'[s]}{i}"
        ts = draw(st.integers(0, 120))
        if draw(st.integers(0, 3)) > 0:
            ts = max(ts, stream_time - grace)
        stream_time = max(stream_time, ts)
        records.append((s, key, ts, value))
    return case, records


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(_join_case_and_records())
# KStreamKStreamOuterJoinTest.testOuterJoinDuplicates: held records of two keys, right before left
@example((JoinCase("outer", 100, 100, 10, True, "kafka"),
          [(0, "a", 0, "A0"), (0, "a", 0, "A1"), (1, "b", 0, "b1"), (1, "b", 0, "b2"), (1, "b", 111, "b3"),
           (1, "c", 315, "c")]))
# the scan's min time delays emission (KStreamKStreamJoin.emitNonJoinedOuterRecords)
@example((JoinCase("outer", 10, 10, 0, True, "kafka"),
          [(0, "a", 39, "L1"), (0, "b", 40, "L2"), (1, "c", 45, "R3"), (0, "a", 48, "L4"), (1, "c", 50, "x"),
           (1, "c", 51, "y"), (1, "c", 59, "z")]))
# a match releases every held record of its timestamp and side; an out-of-order record joins
# in the other side's (timestamp, arrival) order
@example((JoinCase("left", 10, 10, 5, True, "replay"),
          [(0, "a", 5, "A"), (0, "a", 5, "B"), (1, "a", 9, "x"), (1, "a", 2, "y"), (0, "a", 6, "C"),
           (1, "b", 40, "z")]))
# an empty window without grace: nothing is visible in the other store (its retention is 0), so a
# left and a right record of one key and timestamp are both held, and expire together: right first
@example((JoinCase("outer", 0, 0, 0, True, "replay"), [(1, "a", 10, "r"), (0, "a", 10, "l"), (1, "b", 11, "x")]))
@example((JoinCase("outer", 0, 0, 0, True, "streaming"), [(1, "a", 10, "r"), (0, "a", 10, "l"), (1, "b", 11, "x")]))
def test_java_join_port_forwards_what_the_python_kernel_forwards(join_replay: JoinReplay,
                                                                 case_records: tuple[JoinCase, list[JoinRecord]]
                                                                 ) -> None:
    """Inner, left and outer joins, one-sided windows, grace, the spurious-result fix on and off,
    out-of-order and late records, null keys and values, under each of the kernel's three hosts:
    per record the same expired held records, drop and forwarded pairs, in the same order."""
    case, records = case_records
    assert join_replay.join(case, records) == python_join_kernel(case, records)


# --- the stream-table join -------------------------------------------------------------------------

#: A stream-table join record: side, key, value (``None``: a null key or value), timestamp.
TableJoinRecord = tuple[str, str | None, str | None, int]


class StreamTableReplay(Replay):
    """One ``StreamTableReplay`` JVM: a stream-table join in, per record its drop or pair out."""

    main = "io.streamsdsl.jvm.StreamTableReplay"

    def join(self, kind: str, records: list[TableJoinRecord]) -> list[tuple[Any, ...]]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        lines = [f"case {kind}", *(f"rec {side} {'null' if k is None else k} {'null' if v is None else v} {ts}"
                                   for side, k, v, ts in records), "end"]
        self.proc.stdin.write("\n".join(lines) + "\n")
        self.proc.stdin.flush()
        got: list[tuple[Any, ...]] = []
        for line in iter(self.proc.stdout.readline, "done\n"):
            f = [None if x == "null" else x for x in line.split()]
            got.append(("drop", f[1]) if f[0] == "drop" else (f[1], (f[2], f[3]), int(f[4])))  # type: ignore[arg-type]
        return got


@pytest.fixture(scope="module")
def table_replay(compiled: tuple[str, str]) -> Iterator[StreamTableReplay]:
    r = StreamTableReplay(compiled)
    yield r
    r.close()


def python_stream_table(kind: str, records: list[TableJoinRecord]) -> list[tuple[Any, ...]]:
    """The records through the Python kernel's steps (`table_update`, `stream_join_step`) in order,
    the joiner ``(value, table_value)``: per record its drop or its pair."""
    from streamsdsl.semantics.stream_table import StreamTableJoin, stream_join_step, table_update

    spec, table, got = StreamTableJoin(kind), {}, []  # type: ignore[arg-type]
    for side, key, value, ts in records:
        state = table.get(key) if key is not None else None
        if side == "table":
            step = table_update(state, key, value, ts)
            if step.dropped:
                got.append(("drop", step.dropped))
            elif step.state is None:
                table.pop(key, None)
            else:
                table[key] = step.state
            continue
        result = stream_join_step(spec, state, key, value, ts, lambda v, t: (v, t))
        if result.dropped:
            got.append(("drop", result.dropped))
        if result.output is not None:
            got.append((result.output.key, result.output.value, result.output.timestamp))
    return got


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(kind=st.sampled_from(["inner", "left"]),
       records=st.lists(st.tuples(st.sampled_from(["stream", "table"]), st.sampled_from([None, "a", "b"]),
                                  st.sampled_from([None, "x", "y", "z"]), st.integers(0, 20)), max_size=14))
@example(kind="left", records=[("stream", None, "x", 1), ("table", "a", "y", 2), ("table", "a", "z", 1),
                               ("stream", "a", "x", 0), ("table", "a", None, 3), ("stream", "a", None, 4),
                               ("stream", "a", "x", 5)])
def test_java_stream_table_port_joins_as_the_python_kernel(table_replay: StreamTableReplay, kind: str,
                                                           records: list[TableJoinRecord]) -> None:
    """Inner and left stream-table joins: table updates older than the stored one, tombstones,
    null keys and values on both sides; per record the same drop or pair (with the stream
    record's key and timestamp and the table's value when it was processed)."""
    assert table_replay.join(kind, records) == python_stream_table(kind, records)


# --- the table-table join and the global-table join -----------------------------------------------

#: A table-table join record: side, key, value (``None``: a null key, a tombstone or a mapped
#: ``None``), whether the source's value was a tombstone (``None``: the value says it), timestamp.
TableTableRecord = tuple[str, str | None, str | None, bool | None, int]
#: A global-table join record: ``("table", key, value, ts)`` or ``("stream", key, table_key, value, ts)``.
GlobalRecord = tuple[Any, ...]


class TableTableReplay(Replay):
    """One ``TableTableReplay`` JVM: a table-table or global-table join in, per record its drop,
    pair or delete out."""

    main = "io.streamsdsl.jvm.TableTableReplay"

    def ask(self, head: str, lines: list[str]) -> list[tuple[Any, ...]]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write("\n".join([head, *lines, "end"]) + "\n")
        self.proc.stdin.flush()
        got: list[tuple[Any, ...]] = []
        for line in iter(self.proc.stdout.readline, "done\n"):
            f = [None if x == "null" else x for x in line.split()]
            if f[0] == "drop":
                got.append(("drop",))
            elif f[0] == "delete":
                got.append((f[1], None, int(f[2])))  # type: ignore[arg-type]
            else:
                got.append((f[1], (f[2], f[3]), int(f[4])))  # type: ignore[arg-type]
        return got


def _cell(x: Any) -> str:
    return "null" if x is None else ("1" if x is True else "0" if x is False else str(x))


@pytest.fixture(scope="module")
def tt_replay(compiled: tuple[str, str]) -> Iterator[TableTableReplay]:
    r = TableTableReplay(compiled)
    yield r
    r.close()


def python_table_table(spec: Any, records: list[TableTableRecord]) -> list[tuple[Any, ...]]:
    """The records through `table_join_step` (the joiner ``(left, right)``, no old values, as the
    operator runs it): per record its drop, or its forwarded change (``None``: a delete)."""
    from streamsdsl.semantics.table_table import table_join_step

    states: dict[Any, Any] = {}
    got: list[tuple[Any, ...]] = []
    for side, key, value, tombstone, ts in records:
        step = table_join_step(spec, states.get(key), side, key, value, ts, lambda left, right: (left, right),
                               tombstone=tombstone)
        if step.dropped:
            got.append(("drop",))
            continue
        s = step.state
        if s.left is None and s.right is None and not s.has_result:
            states.pop(key, None)
        else:
            states[key] = s
        if step.output is not None:
            got.append((key, step.output.change.new, step.output.timestamp))
    return got


@st.composite
def _table_table_records(draw: st.DrawFn) -> list[TableTableRecord]:
    """Up to 16 records of both sides, two keys and a null one; a null value a tombstone, a
    ``map_values`` ``None`` (not a tombstone) or one the value alone says."""
    records: list[TableTableRecord] = []
    for i in range(draw(st.integers(0, 16))):
        side = draw(st.sampled_from(["left", "right"]))
        key = draw(st.sampled_from([None, "a", "b", "a"]))
        value = None if draw(st.integers(0, 2)) == 0 else f"{side[0]}{i}"
        tombstone = draw(st.sampled_from([None, True, False] if value is None else [None, False]))
        records.append((side, key, value, tombstone, draw(st.integers(0, 20))))
    return records


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(kind=st.sampled_from(["inner", "left", "outer"]), materialized=st.booleans(), cached=st.booleans(),
       filtered=st.sampled_from([(), ("left",), ("right",), ("left", "right")]), records=_table_table_records())
# Kafka's KTableKTableOuterJoinTest: deleting the last side deletes the row; a mapped None is not absent
@example(kind="outer", materialized=True, cached=True, filtered=(),
         records=[("right", "a", "x", None, 53), ("left", "a", None, False, 56), ("left", "a", None, None, 57),
                  ("right", "a", None, None, 58), ("right", "a", None, None, 59)])
# without the record cache a materialized result forwards the delete of a row it never held
@example(kind="inner", materialized=True, cached=False, filtered=(),
         records=[("right", "a", "y", None, 1), ("left", "a", None, None, 2), ("left", "b", None, None, 3)])
def test_java_table_table_port_joins_as_the_python_kernel(tt_replay: TableTableReplay, kind: str, materialized: bool,
                                                          cached: bool, filtered: tuple[str, ...],
                                                          records: list[TableTableRecord]) -> None:
    """Inner, left and outer table-table joins, materialized or not, with and without the record
    cache, either side read through a filter: tombstones (of a held key, of an absent one), a
    ``map_values`` ``None``, null keys, out-of-order timestamps; per record the same drop, pair
    (at the later of the two sides' timestamps) or delete."""
    from streamsdsl.semantics.table_table import TableJoinSpec

    spec = TableJoinSpec(kind, materialized=materialized, cached=cached,  # type: ignore[arg-type]
                         filtered_sides=frozenset(filtered))
    head = (f"case table {kind} {int(materialized)} {int(cached)} {int('left' in filtered)} "
            f"{int('right' in filtered)}")
    lines = [f"rec {side} {_cell(k)} {_cell(v)} {_cell(t)} {ts}" for side, k, v, t, ts in records]
    assert tt_replay.ask(head, lines) == python_table_table(spec, records)


def python_global(kind: str, records: list[GlobalRecord]) -> list[tuple[Any, ...]]:
    """The records through `table_update` and `global_join_step` (the joiner ``(value, table value)``)
    in order, a null-key table record dropped by the source: per stream record its drop or pair."""
    from streamsdsl.semantics.stream_table import StreamTableJoin, global_join_step, table_update

    spec, table, got = StreamTableJoin(kind), {}, []  # type: ignore[arg-type]
    for rec in records:
        if rec[0] == "table":
            _, key, value, ts = rec
            if key is None:
                continue
            step = table_update(table.get(key), key, value, ts)
            if step.state is None:
                table.pop(key, None)
            else:
                table[key] = step.state
            continue
        _, key, table_key, value, ts = rec
        result = global_join_step(spec, table.get(table_key) if table_key is not None else None, key, table_key,
                                  value, ts, lambda v, t: (v, t))
        if result.dropped:
            got.append(("drop",))
        if result.output is not None:
            got.append((result.output.key, result.output.value, result.output.timestamp))
    return got


_KEY = st.sampled_from([None, "a", "b"])
_VALUE = st.sampled_from([None, "x", "y"])


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(kind=st.sampled_from(["inner", "left"]),
       records=st.lists(st.one_of(st.tuples(st.just("table"), _KEY, _VALUE, st.integers(0, 20)),
                                  st.tuples(st.just("stream"), _KEY, _KEY, _VALUE, st.integers(0, 20))), max_size=14))
def test_java_global_table_port_joins_as_the_python_kernel(tt_replay: TableTableReplay, kind: str,
                                                           records: list[GlobalRecord]) -> None:
    """Inner and left stream-global-table joins: table updates and deletes, a null selected table
    key (dropped, but joined with None by the left join of a null-key record, KIP-962), null
    stream values; per stream record the same drop or pair (the stream's key and timestamp)."""
    lines = [" ".join(["rec", *map(_cell, rec)]) for rec in records]
    assert tt_replay.ask(f"case global {kind}", lines) == python_global(kind, records)
