"""Run the benchmarks and print their results.

Each benchmark runs in its own Python process (its own SparkSession), compares streamsdsl with a
baseline in that same process on the same data, and writes ``results/<name>.json`` (starting
with ``id``, ``ratio``, ``goal``, ``goal_met``) and, for most, ``results/<name>.md``. This runner
prints each result as it finishes, then one line per benchmark against its goal, and exits
non-zero if a benchmark fails (a result that disagrees with its baseline fails the benchmark).

    .venv/bin/python benchmarks/run.py                    # every benchmark at its default size
    .venv/bin/python benchmarks/run.py p2 --quick         # P2 only, small input (a smoke run)
    .venv/bin/python benchmarks/run.py p4 --records 500000  # P4 on 500,000 input records

``--records N`` sets the input size of any benchmark (for P6: the records piped per test; for
P7: the orders in the input topic; for P8: the orders of the stream–table join, the orders and
payments of the stream–stream join; for P9: the input records of each application's throughput
run, a multiple of its 500 session keys).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))

BENCHMARKS = {
    "p1": ("p1_stateless_count.py", ["--records", "200000", "--python-records", "20000", "--repeats", "3"]),
    "p2": ("p2_session_count.py", ["--records", "100000", "--keys", "5000", "--repeats", "1"]),
    "p2b": ("p2b_time_window_count.py", ["--records", "100000", "--keys", "5000", "--repeats", "1"]),
    "p3": ("p3_cogroup.py", ["--records", "60000", "--keys", "5000", "--repeats", "1"]),
    "p4": ("p4_kafka_source.py", ["--records", "50000", "--partitions", "3"]),
    "p5": ("p5_quix_session.py", ["--records", "20000", "--keys", "500"]),
    "p5b": ("p5b_exactly_once.py", ["--records", "5000", "--keys", "500", "--repeats", "1"]),
    "p6": ("p6_driver.py", ["--tests", "2"]),
    "p7": ("p7_startup.py", ["--repeats", "1"]),
    "p8": ("p8_joins.py", ["--records", "20000", "--keys", "2000", "--repeats", "1"]),
    "p9": ("p9_kafka_streams_peer.py", ["--records", "5000", "--latency-seconds", "8", "--latency-warmup", "2",
                                        "--no-ks-default-commit"]),
    "p10": ("p10_state_bounded.py", ["--quick"]),
    "p11": ("p11_interactive_queries.py", ["--records", "20000", "--keys", "2000", "--queries", "10"]),
    "p12": ("p12_backfill.py", ["--records", "200000", "--batches", "10"]),
}


def _summary_line(name: str) -> str:
    """``P4: ratio 0.61 (goal: ...) met`` from ``results/<name>.json``."""
    path = os.path.join(HERE, "results", f"{name}.json")
    try:
        with open(path) as f:
            r = json.load(f)
        met = "no goal" if r["goal_met"] is None else "met" if r["goal_met"] else "NOT met"
        return f"  {r['id']}: ratio {r['ratio']} ({r['goal']}) {met}"
    except (OSError, ValueError, KeyError) as exc:
        return f"  {name}: no comparable result in {path} ({exc})"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", metavar="name", help=f"benchmarks to run: {', '.join(BENCHMARKS)} (default: all)")
    parser.add_argument("--quick", action="store_true", help="small inputs (a smoke run, not a measurement)")
    parser.add_argument("--records", type=int, metavar="N", help="input records of each benchmark run")
    args = parser.parse_args(argv)
    if args.records is not None and args.records <= 0:
        parser.error(f"--records must be positive (got {args.records})")
    unknown = [n for n in args.names if n not in BENCHMARKS]
    if unknown:
        # argparse's choices= rejects an empty list with nargs="*" (Python 3.11), so check here
        parser.error(f"unknown benchmark(s) {', '.join(unknown)}; choose from {', '.join(BENCHMARKS)}")
    failed = []
    summary = []
    for name in args.names or list(BENCHMARKS):
        script, quick_args = BENCHMARKS[name]
        cmd = [sys.executable, os.path.join(HERE, script), *(quick_args if args.quick else [])]
        if args.records is not None:
            cmd += ["--records", str(args.records)]  # argparse: the last --records wins
        print(f"== {name}: {' '.join(cmd[1:])}", flush=True)
        start = time.perf_counter()
        code = subprocess.call(cmd, cwd=os.path.dirname(HERE))
        print(f"== {name}: exit {code} after {time.perf_counter() - start:.0f} s", flush=True)
        if code != 0:
            failed.append(name)
            continue
        for ext in ("md", "json"):
            path = os.path.join(HERE, "results", f"{name}.{ext}")
            if os.path.exists(path):
                with open(path) as f:
                    print(f.read())
                break
        summary.append(_summary_line(name))
    if summary:
        print("\n".join(["summary:", *summary]))
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
