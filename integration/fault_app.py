"""The applications the crash tests (``integration/test_faults.py``) kill and restart.

Word counts as a production run would have them: each ``--app`` is a `KafkaStreams` with a fixed
``application.id`` and ``state.dir`` (so each start resumes from the checkpoint the last one
left), counting the records per key of its source topic into its sink topic (String keys, Long
counts), at most ``MAX_OFFSETS`` offsets per micro-batch, with ``processing.guarantee``
``GUARANTEE`` (``at_least_once`` or ``exactly_once_v2``). Several ``--app`` run side by side in
one driver (one Python process, one Spark JVM): a SIGKILL of the process group kills them all
at once, and one process start serves them all.

It prints ``RUNNING`` once every query runs, then runs until it is killed; when an application
stops by itself (it failed, or was fenced), it prints ``STOPPED``, the state and the error of
each stopped one and exits 1.

Usage::

    python integration/fault_app.py --bootstrap HOST:PORT \\
        --app GUARANTEE SOURCE SINK APP_ID STATE_DIR MAX_OFFSETS [--app ...]
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from streamsdsl.ir.topology import Topology

GUARANTEES = ("at_least_once", "exactly_once_v2")


class AppSpec(NamedTuple):
    """One application of the process: the arguments of one ``--app``."""

    guarantee: str
    source: str
    sink: str
    app_id: str
    state_dir: str
    max_offsets: int

    def args(self) -> list[str]:
        """This application as ``fault_app.py`` arguments."""
        return ["--app", *map(str, self)]

    def config(self, bootstrap: str) -> dict[str, object]:
        """The application's `KafkaStreams` configuration (the same in every process that runs it)."""
        return {
            "application.id": self.app_id,
            "bootstrap.servers": bootstrap,
            "state.dir": self.state_dir,
            "commit.interval.ms": 50,
            "max.offsets.per.trigger": self.max_offsets,
            "spark.ui.enabled": "false",
            "processing.guarantee": self.guarantee,
        }


def count_topology(source: str, sink: str) -> Topology:
    """``source`` → group by key → ``count()`` → ``sink`` (String keys, Long counts)."""
    from streamsdsl import Consumed, Produced, Serdes, StreamsBuilder

    builder = StreamsBuilder()
    (
        builder.stream(source, Consumed.with_serdes(Serdes.String(), Serdes.String()))
        .group_by_key()
        .count()
        .to_stream()
        .to(sink, Produced.with_serdes(Serdes.String(), Serdes.Long()))
    )
    return builder.build()


def _spec(values: list[str]) -> AppSpec:
    guarantee, source, sink, app_id, state_dir, max_offsets = values
    if guarantee not in GUARANTEES:
        raise SystemExit(f"--app: GUARANTEE must be one of {', '.join(GUARANTEES)} (got {guarantee!r})")
    return AppSpec(guarantee, source, sink, app_id, state_dir, int(max_offsets))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--app", nargs=6, action="append", required=True,
                        metavar=("GUARANTEE", "SOURCE", "SINK", "APP_ID", "STATE_DIR", "MAX_OFFSETS"))
    args = parser.parse_args(argv)
    specs = [_spec(values) for values in args.app]

    from streamsdsl.runtime.app import KafkaStreams, State

    apps = [KafkaStreams(count_topology(spec.source, spec.sink), spec.config(args.bootstrap)) for spec in specs]
    for app in apps:
        app.start()
    print("RUNNING", flush=True)
    while all(app.state() is State.RUNNING for app in apps):  # until killed
        time.sleep(0.5)
    for app in apps:
        if app.state() is State.RUNNING:
            continue
        try:
            app.await_termination(30)
            error = None
        except Exception as exc:  # noqa: BLE001 - reported to the test
            error = f"{type(exc).__name__}: {exc}"
        print(f"STOPPED {app.state()} {error}", flush=True)
    return 1


if __name__ == "__main__":
    sys.exit(main())
