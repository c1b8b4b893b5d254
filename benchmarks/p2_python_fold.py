"""P2, Python operator: a key's records folded per micro-batch against the record-by-record loop.

The streaming Python operator hands a key's records of one micro-batch to the kernel in one
call (``AggregateKernel.process_batch``, issue 42 item 3). This A/B runs P2's session count and
P2's Python aggregator (``aggregate(lambda: 0, lambda k, v, a: a + 1, lambda k, a, b: a + b)``)
both ways, alternated in one Spark session with Spark's native ``session_window`` count as the
baseline: the fold, and the record-by-record loop (``kernel.process`` per record, what the
operator ran before; the processor's ``batched`` set off on the driver, which pickles it to the
workers). It first checks that both write the same rows.

``--py-spy PATH`` (the ``py-spy`` program) also profiles one more run of the Python aggregator,
every Python worker sampled at 200 Hz, and prints where their time goes by category.

    .venv/bin/python benchmarks/p2_python_fold.py --records 1000000 --keys 10000 --repeats 3
"""

from __future__ import annotations

import argparse
import collections
import glob
import os
import signal
import subprocess
import tempfile
import time
from typing import Any

import p2_session_count as p2
from _common import compare, environment, summarize, write_json, write_raw_records
from _streaming import output_summary, run_stream, streamsdsl_stream

from streamsdsl.compiler import processors
from streamsdsl.runtime.session import get_session

BASELINE = "Spark native session_window count (streaming, append)"
AGG_BEFORE = "Python aggregator, record by record (before)"
AGG_AFTER = "Python aggregator, folded per key and micro-batch"
COUNT_BEFORE = "count(), Python operator, record by record (before)"
COUNT_AFTER = "count(), Python operator, folded per key and micro-batch"

_FOLD = [True]
_init = processors.StreamingAggregateProcessor.__init__


def _init_with_fold(self: Any, *args: Any, **kwargs: Any) -> None:
    _init(self, *args, **kwargs)
    self.batched = _FOLD[0]  # an instance attribute: pickled to the workers with the processor


processors.StreamingAggregateProcessor.__init__ = _init_with_fold  # type: ignore[method-assign]


def stream(spark: Any, topology: Any, directory: str, fold: bool) -> Any:
    _FOLD[0] = fold
    return streamsdsl_stream(spark, topology, directory, "python")


#: Where a worker's sample goes: the first rule (in this order) that one of its frames matches,
#: from the innermost frame outwards.
CATEGORIES = [
    ("the user's functions", "p2_session_count.py"),
    ("the packing step (records by key, Arrow)", "_pack"),
    ("state API round trips (implicit key, get, update, timers)", "stateful_processor_api_client.py"),
    ("state API round trips (implicit key, get, update, timers)", "value_state_client.py"),
    ("state API round trips (implicit key, get, update, timers)", "stateful_processor.py"),
    ("Kafka Streams' rules (the fold, the record cache)", "streamsdsl/semantics/"),
    ("the processor's own Python (unpacking, sorting, output rows, state pickling)", "streamsdsl/compiler/"),
    ("PySpark's output conversion (Row -> Arrow)", "dump_stream"),
    ("PySpark's input conversion (Arrow -> Row)", "load_stream"),
]


def _category(frames: list[str]) -> str:
    for frame in reversed(frames):
        for name, needle in CATEGORIES:
            if needle in frame:
                return name
    return "other (reading from the JVM, worker set-up)"


def profile(spark: Any, topology: Any, directory: str, py_spy: str) -> dict[str, Any]:
    """One run of ``topology`` with py-spy on every Python worker of this driver's JVM."""
    run_stream(stream(spark, topology, directory, True), "update")  # the workers started
    me = str(os.getpid())
    rows = [line.split(None, 2) for line in subprocess.run(["ps", "-eo", "pid,ppid,args"], capture_output=True,
                                                           text=True).stdout.splitlines()[1:]]
    jvms = {pid for pid, ppid, _ in rows if ppid == me}
    daemons = [pid for pid, ppid, args in rows if ppid in jvms and "pyspark.daemon" in args]
    out = tempfile.mkdtemp(prefix="p2-spy-")
    spies = [subprocess.Popen([py_spy, "record", "--pid", pid, "--subprocesses", "--rate", "200", "--format", "raw",
                               "--nonblocking", "--output", os.path.join(out, f"{pid}.txt")],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for pid in daemons]
    time.sleep(2)
    seconds = run_stream(stream(spark, topology, directory, True), "update")
    for spy in spies:
        spy.send_signal(signal.SIGINT)
    for spy in spies:
        spy.wait(60)
    totals: collections.Counter[str] = collections.Counter()
    for path in glob.glob(os.path.join(out, "*.txt")):
        for line in open(path):
            stack, _, n = line.rstrip("\n").rpartition(" ")
            frames = stack.split(";")
            if not frames[-1].startswith("manager (pyspark/daemon.py"):  # the daemon waiting to fork
                totals[_category(frames)] += int(n)
    samples = sum(totals.values())
    return {"seconds": round(seconds, 3), "samples": samples,
            "share": {name: round(n / samples, 3) for name, n in totals.most_common()}}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--keys", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--py-spy", default="", help="the py-spy program: profile one folded run")
    args = parser.parse_args(argv)
    spark = get_session()
    directory = tempfile.mkdtemp(prefix="p2-fold-")
    write_raw_records(spark, directory, "clicks", args.records, f"concat('u', id % {args.keys})", "'click'",
                      p2.TIMESTAMP_SQL.format(keys=args.keys))
    load_start = os.getloadavg()
    agg, count = p2.topology_python_aggregator(), p2.topology()
    written = {name: output_summary(stream(spark, topology, directory, fold), "update")
               for name, topology, fold in ((AGG_BEFORE, agg, False), (AGG_AFTER, agg, True),
                                            (COUNT_BEFORE, count, False), (COUNT_AFTER, count, True))}
    if len(set(written.values())) != 1:
        raise SystemExit(f"P2 fold invalid: the variants wrote different rows: {written}")
    runs = compare({
        BASELINE: lambda: run_stream(p2.native_stream(spark, directory), "append"),
        AGG_BEFORE: lambda: run_stream(stream(spark, agg, directory, False), "update"),
        AGG_AFTER: lambda: run_stream(stream(spark, agg, directory, True), "update"),
        COUNT_BEFORE: lambda: run_stream(stream(spark, count, directory, False), "update"),
        COUNT_AFTER: lambda: run_stream(stream(spark, count, directory, True), "update"),
    }, args.repeats)
    rows = summarize(runs, BASELINE, args.records)
    by_name = {r["variant"]: r for r in rows}
    speedup = round(by_name[AGG_BEFORE]["median_seconds"] / by_name[AGG_AFTER]["median_seconds"], 3)
    result = {
        "id": "P2-fold",
        "ratio": speedup,
        "goal": "informational: the Python aggregator folded per key and micro-batch against record by record",
        "goal_met": None,
        "records": args.records,
        "keys": args.keys,
        "rows_written": list(written[AGG_AFTER]),
        "ratio_python_aggregator": by_name[AGG_AFTER]["throughput_ratio_to_baseline"],
        "ratio_python_aggregator_before": by_name[AGG_BEFORE]["throughput_ratio_to_baseline"],
        "load_average_start": load_start,
        "load_average_end": os.getloadavg(),
        "rows": rows,
        "environment": environment(spark),
    }
    if args.py_spy:
        result["profile_python_aggregator"] = profile(spark, agg, directory, args.py_spy)
    write_json("p2_python_fold", result)
    for r in rows:
        print(f"{r['variant']:60s} median {r['median_seconds']:7.2f} s  runs {r['runs_seconds']}  "
              f"{r['throughput_ratio_to_baseline']:.3f}x native")
    print(f"load average {load_start} -> {result['load_average_end']}; aggregator {speedup}x faster folded")
    for name, share in result.get("profile_python_aggregator", {}).get("share", {}).items():
        print(f"  {100 * share:5.1f}%  {name}")
    return result


if __name__ == "__main__":
    main()
