"""P6: TopologyTestDriver latency, as a test suite sees it.

Measured in one fresh process: starting the SparkSession; the first driver test of a run (create
the driver, pipe 3 records, read the output after each pipe); then later 3-record tests with the
same shape. The topology is a stateless step plus a session-window count (a stateful
processor), the common shape of a streamsdsl unit test.

    .venv/bin/python benchmarks/p6_driver.py [--tests 5]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def one_test(spark: object) -> float:
    from streamsdsl import Consumed, Serdes, SessionWindows, StreamsBuilder, TopologyTestDriver

    start = time.perf_counter()
    b = StreamsBuilder()
    (b.stream("in", Consumed.with_serdes(Serdes.String(), Serdes.String())).map_values(str.upper).group_by_key()
     .windowed_by(SessionWindows.with_gap(10)).count().to_stream().to("out"))
    with TopologyTestDriver(b.build(), spark=spark) as d:
        i, o = d.create_input_topic("in"), d.create_output_topic("out")
        for n, ts in enumerate((1, 5, 30)):
            i.pipe_input("k", f"v{n}", ts)
            assert o.read_records_to_list(), "every record produces an update"
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tests", type=int, default=5, help="later tests to time after the first")
    args = parser.parse_args()
    from streamsdsl.runtime.session import get_session

    t0 = time.perf_counter()
    spark = get_session()
    session_s = time.perf_counter() - t0
    first_s = one_test(spark)
    later = sorted(one_test(spark) for _ in range(args.tests))
    result = {
        "id": "P6",
        "benchmark": "TopologyTestDriver: first and later 3-record tests (a read after each pipe)",
        "session_start_seconds": round(session_s, 3),
        "first_test_seconds": round(first_s, 3),
        "first_test_with_session_seconds": round(session_s + first_s, 3),
        "later_test_seconds_median": round(later[len(later) // 2], 3),
        "later_test_seconds": [round(x, 3) for x in later],
        "load_average": list(os.getloadavg()),
        "cpus": os.cpu_count(),
    }
    out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results", "p6.json")
    with open(out, "w", encoding="utf-8") as f:
        json.dump(result, f, indent=2)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
