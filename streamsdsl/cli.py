"""The ``streamsdsl`` command line.

Sub-commands
------------
``streamsdsl dev-broker [--prefer KIND] [--topic NAME[:PARTITIONS]]...``
    Start a local Kafka-compatible broker as `streamsdsl.testing.local_kafka` chooses it (a
    Kafka container when a Docker engine answers, the bundled Tansu broker as a locally built
    image when no Kafka image can be pulled, else the Tansu process; ``--prefer`` or
    ``STREAMSDSL_BROKER`` forces a kind), print its ``bootstrap.servers`` and
    ``kafka.broker.compat``, and keep it running until Ctrl-C.

``streamsdsl jar-path``
    Print the path of the JVM operator's jar (for ``spark-submit --jars "$(streamsdsl jar-path)"``);
    exit code 1, with how to build it, when it is not built.

``streamsdsl reset --application-id ID [--state-dir DIR] [--dry-run]``
    Remove a `KafkaStreams` application's checkpoint and state (Kafka's
    ``kafka-streams-application-reset``): ``DIR/ID/checkpoint`` (source offsets, commits,
    operator state, the topology fingerprint) and ``DIR/ID`` when nothing else is in it. The
    next start reads the input from ``auto.offset.reset`` with empty state; output topics are not
    touched. ``--state-dir`` is the application's ``state.dir`` (default ``/tmp/streamsdsl``).
    Prints each path removed; ``--dry-run`` prints what would be removed and removes nothing.
    Exit code 0 when something was (or would be) removed, 1 when there is nothing to reset (no
    checkpoint there), 2 on a usage error. It does not ask for confirmation (scriptable): run it
    with ``--dry-run`` first, and stop every instance of the application before.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

__all__ = ["main"]

_USAGE = """usage: streamsdsl <command> [options]

commands:
  dev-broker   start a local Kafka-compatible broker until Ctrl-C (streamsdsl dev-broker --help)
  jar-path     print the path of the JVM operator's jar (spark-submit --jars "$(streamsdsl jar-path)")
  reset        remove an application's checkpoint and state (streamsdsl reset --help)
"""


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``streamsdsl`` command; return the process exit code."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help", "help"):
        print(_USAGE, end="")
        return 0 if args else 2
    command, rest = args[0], args[1:]
    if command == "dev-broker":
        from streamsdsl.testing.local_kafka import dev_broker_main

        return dev_broker_main(rest)
    if command == "jar-path":
        from streamsdsl.jvm import JvmOperatorError, jar_path

        try:
            print(jar_path())
        except JvmOperatorError as exc:
            print(f"streamsdsl: {exc}", file=sys.stderr)
            return 1
        return 0
    if command == "reset":
        from streamsdsl.runtime.checkpoint import reset_main

        return reset_main(rest)
    print(f"streamsdsl: unknown command {command!r}\n\n{_USAGE}", end="", file=sys.stderr)
    return 2


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
