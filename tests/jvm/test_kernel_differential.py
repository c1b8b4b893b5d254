"""The Java port of the window rules beside the Python kernel, without Spark: the same records
through `streamsdsl.semantics.kernels.AggregateKernel` (a count, the record cache flushed after
every record, or emit on close) and through the Java classes the JVM operator runs
(``Windowing``, ``Sliding``, ``ChangeBuffer``), driven by ``KernelReplay`` (jvm/src/test) in one
JVM per module; the forwarded records and the drop counts must be equal, record for record."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any, Iterator

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from streamsdsl.semantics.aggregation import AggFunctions
from streamsdsl.semantics.kernels import AggregateKernel
from streamsdsl.semantics.session import SessionWindowing
from streamsdsl.semantics.sliding import SlidingWindowing
from streamsdsl.semantics.timewindow import TimeWindowing
from streamsdsl.semantics.unwindowed import Unwindowed

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "jvm"))

from test import compile_tests  # noqa: E402  (jvm/test.py)

COUNT = AggFunctions(lambda: 0, lambda k, v, a: a + 1, lambda k, a, b: a + b)


class Replay:
    """One ``KernelReplay`` JVM: a case in, its forwarded records and drop count out."""

    def __init__(self, out: str) -> None:
        java, jars, _ = compile_tests(out)
        self.proc = subprocess.Popen([java, "-cp", f"{out}:{jars}/*", "io.streamsdsl.jvm.KernelReplay"],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def run(self, case: str, records: list[tuple[str, int, bool]]) -> tuple[list[tuple[Any, ...]], int]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        lines = [case, *(f"rec {k} {ts} {int(null)}" for k, ts, null in records), "end"]
        self.proc.stdin.write("\n".join(lines) + "\n")
        self.proc.stdin.flush()
        outputs: list[tuple[Any, ...]] = []
        dropped = -1
        for line in iter(self.proc.stdout.readline, "done\n"):
            f = line.split()
            if f[0] == "out":
                outputs.append((f[1], int(f[2]), int(f[3]), None if f[4] == "null" else int(f[4]), int(f[5])))
            else:
                dropped = int(f[1])
        return outputs, dropped

    def close(self) -> None:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=30)
        self.proc.stdout.close()


@pytest.fixture(scope="module")
def replay(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Replay]:
    r = Replay(str(tmp_path_factory.mktemp("kernel-replay")))
    yield r
    r.close()


def python_kernel(kind: str, a: int, b: int, c: int, on_close: bool,
                  records: list[tuple[str, int, bool]]) -> tuple[list[tuple[Any, ...]], int]:
    windowing = {"session": lambda: SessionWindowing(a, b, cached=not on_close),
                 "time": lambda: TimeWindowing(a, b, c), "sliding": lambda: SlidingWindowing(a, b),
                 "unwindowed": Unwindowed}[kind]()
    kernel = AggregateKernel(windowing, COUNT, emit_on_close=on_close)
    outputs: list[tuple[Any, ...]] = []
    dropped = 0
    for key, ts, null in records:
        step = kernel.process(key, None if null else "v", ts)
        dropped += step.dropped
        for o in step.outputs:
            start, end = (0, 0) if o.start is None else (o.start, o.end)
            outputs.append((o.key, start, end, o.value, o.timestamp))
    return outputs, dropped



def _cases() -> st.SearchStrategy[tuple[str, int, int, int, bool]]:
    session = st.tuples(st.just("session"), st.integers(1, 12), st.integers(0, 12), st.just(0), st.booleans())
    time = st.integers(1, 15).flatmap(lambda size: st.tuples(
        st.just("time"), st.just(size), st.integers(1, size), st.integers(0, 12), st.booleans()))
    sliding = st.tuples(st.just("sliding"), st.integers(1, 12), st.integers(0, 12), st.just(0), st.booleans())
    unwindowed = st.tuples(st.just("unwindowed"), st.just(0), st.just(0), st.just(0), st.just(False))
    return st.one_of(session, time, sliding, unwindowed)


@settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck))
@given(_cases(), st.lists(st.tuples(st.sampled_from("abc"), st.integers(0, 60), st.integers(0, 9).map(lambda n: n == 0)),
                          min_size=1, max_size=25))
@example(("session", 5, 0, 0, False), [("a", 0, False), ("a", 4, False), ("a", 10, False), ("a", 5, False)])
@example(("sliding", 10, 100, 0, False), [("k", 100, False), ("k", 106, False), ("k", 103, False)])
@example(("time", 10, 5, 0, True), [("b", 2, False), ("a", 1, False), ("a", 9, False), ("b", 25, False)])
@example(("unwindowed", 0, 0, 0, False), [("a", 1, False), ("a", 2, True), ("a", 3, False)])
def test_java_port_forwards_what_the_python_kernel_forwards(replay: Replay, case: tuple[str, int, int, int, bool],
                                                           records: list[tuple[str, int, bool]]) -> None:
    """Every window kind, emit on update and on close, grace, out-of-order and null values."""
    kind, a, b, c, on_close = case
    java = replay.run(f"case {kind} {a} {b} {c} {int(on_close)}", records)
    assert java == python_kernel(kind, a, b, c, on_close, records)
