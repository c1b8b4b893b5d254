"""Run the benchmarks and print their results.

Each benchmark runs in its own Python process (its own SparkSession), compares streamsdsl with a
baseline in that same process on the same data, and writes ``results/<name>.json`` and
``results/<name>.md``. This runner prints each markdown table as it finishes and exits non-zero
if a benchmark fails (a result that disagrees with its baseline fails the benchmark).

    .venv/bin/python benchmarks/run.py            # P1..P4 at their default sizes
    .venv/bin/python benchmarks/run.py p2 --quick  # P2 only, small input
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))

BENCHMARKS = {
    "p1": ("p1_stateless_count.py", ["--records", "200000", "--python-records", "20000", "--repeats", "3"]),
    "p2": ("p2_session_count.py", ["--records", "100000", "--keys", "5000", "--repeats", "1"]),
    "p3": ("p3_cogroup.py", ["--records", "60000", "--keys", "5000", "--repeats", "1"]),
    "p4": ("p4_kafka_source.py", ["--records", "50000", "--partitions", "3"]),
    "p6": ("p6_driver.py", ["--tests", "2"]),
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", metavar="name", help=f"benchmarks to run: {', '.join(BENCHMARKS)} (default: all)")
    parser.add_argument("--quick", action="store_true", help="small inputs (a smoke run, not a measurement)")
    args = parser.parse_args(argv)
    unknown = [n for n in args.names if n not in BENCHMARKS]
    if unknown:
        # argparse's choices= rejects an empty list with nargs="*" (Python 3.11), so check here
        parser.error(f"unknown benchmark(s) {', '.join(unknown)}; choose from {', '.join(BENCHMARKS)}")
    failed = []
    for name in args.names or list(BENCHMARKS):
        script, quick_args = BENCHMARKS[name]
        cmd = [sys.executable, os.path.join(HERE, script), *(quick_args if args.quick else [])]
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
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
