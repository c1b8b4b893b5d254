"""The application the crash test (``integration/test_faults.py``) kills and restarts.

A word count as a production run would have it: ``KafkaStreams`` with a fixed ``application.id``
and ``state.dir`` (so each start resumes from the checkpoint the last one left), counting the
records per key of ``--source`` into ``--sink`` (String keys, Long counts), at most
``--max-offsets`` offsets per micro-batch.

It prints ``RUNNING`` once the query runs. Without ``--drain`` it then runs until it is killed
(or fails: then it prints ``STOPPED``, the state and the error, and exits 1); with ``--drain``
it processes everything available, closes and exits 0 (``DRAINED``). ``--exactly-once`` sets
``processing.guarantee = exactly_once_v2``.

Usage::

    python integration/fault_app.py --bootstrap HOST:PORT --source IN --sink OUT \\
        --app-id APP --state-dir DIR --max-offsets 400 [--drain] [--exactly-once]
"""

from __future__ import annotations

import argparse
import sys
import time


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--source", required=True)
    parser.add_argument("--sink", required=True)
    parser.add_argument("--app-id", required=True)
    parser.add_argument("--state-dir", required=True)
    parser.add_argument("--max-offsets", type=int, required=True)
    parser.add_argument("--drain", action="store_true", help="process all available, close, exit 0")
    parser.add_argument("--exactly-once", action="store_true", help="processing.guarantee = exactly_once_v2")
    args = parser.parse_args(argv)

    from streamsdsl import Consumed, Produced, Serdes, StreamsBuilder
    from streamsdsl.runtime.app import KafkaStreams, State

    builder = StreamsBuilder()
    (
        builder.stream(args.source, Consumed.with_serdes(Serdes.String(), Serdes.String()))
        .group_by_key()
        .count()
        .to_stream()
        .to(args.sink, Produced.with_serdes(Serdes.String(), Serdes.Long()))
    )
    app = KafkaStreams(
        builder.build(),
        {
            "application.id": args.app_id,
            "bootstrap.servers": args.bootstrap,
            "state.dir": args.state_dir,
            "commit.interval.ms": 50,
            "max.offsets.per.trigger": args.max_offsets,
            "spark.ui.enabled": "false",
            "processing.guarantee": "exactly_once_v2" if args.exactly_once else "at_least_once",
        },
    )
    app.start()
    print("RUNNING", flush=True)
    if args.drain:
        app.process_all_available()
        ok = app.close(120)
        print("DRAINED" if ok and app.state() is State.NOT_RUNNING else f"NOT DRAINED {app.state()}", flush=True)
        return 0 if ok else 1
    while app.state() is State.RUNNING:  # until killed
        time.sleep(0.5)
    try:
        app.await_termination(30)
        error = None
    except Exception as exc:  # noqa: BLE001 - reported to the test
        error = f"{type(exc).__name__}: {exc}"
    print(f"STOPPED {app.state()} {error}", flush=True)
    return 1


if __name__ == "__main__":
    sys.exit(main())
