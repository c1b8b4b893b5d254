"""The ``streamsdsl`` command line.

Sub-commands
------------
``streamsdsl dev-broker [--prefer KIND] [--topic NAME[:PARTITIONS]]...``
    Start a local Apache Kafka broker as `streamsdsl.testing.local_kafka` chooses it (a
    container when a Docker engine answers: the registry image, else an image built locally
    with no pull; without Docker a JVM process; ``--prefer`` or ``STREAMSDSL_BROKER`` forces a
    kind), print its ``bootstrap.servers``, and keep it running until Ctrl-C.

``streamsdsl kafka-jars``
    Resolve Apache Kafka's jars (``org.apache.kafka:kafka_2.13`` and its runtime dependencies)
    from Maven Central with ``mvn`` into the user's cache (`streamsdsl.testing.kafka_dist`) and
    print their directory; nothing to do when they are there. ``make install`` runs it; the
    local broker needs it. Exit code 1, with what went wrong, when ``mvn`` is missing or fails.

``streamsdsl kafka-connector``
    Resolve Spark's Kafka connector (``org.apache.spark:spark-sql-kafka-0-10_2.13`` of the
    installed PySpark's version, and its runtime dependencies) from Maven Central with ``mvn``
    into the user's cache (`streamsdsl.runtime.jvm_connector`) and print their directory. The
    sessions streamsdsl builds or configures load it from there, for ``kafka.connector = "jvm"``.
    ``make install`` runs it. Exit code 1, with what went wrong, when ``mvn`` is missing or fails
    (e.g. Maven Central does not serve the connector for that Spark version).

``streamsdsl class-archive``
    Write the class-data-sharing archive of the Spark driver's classes for the installed PySpark
    and JDK into the user's cache (`streamsdsl.runtime.class_archive`), and print its path;
    nothing to do when it is there. The sessions streamsdsl builds or configures start their
    driver from it (a cold start ≈ 4 s sooner on two cores). ``make install`` runs it. Exit
    code 1, with what went wrong, when there is no JDK or the child process that writes it fails.

``streamsdsl describe MODULE:ATTR [--format text|mermaid]``
    Print a topology's ``describe()``: Kafka Streams' text (the default) or a Mermaid flowchart
    (``--format mermaid``, `TopologyDescription.to_mermaid`). ``MODULE`` is an importable module
    (``examples.order_enrichment``) or a ``.py`` file; ``ATTR`` names a `Topology`, a
    `StreamsBuilder` (built) or a function taking no arguments that returns either. Exit code 2
    on a usage error or when ``MODULE:ATTR`` cannot be loaded or is not a topology.

``streamsdsl jar-path``
    Print the path of the JVM operator's jar (for ``spark-submit --jars "$(streamsdsl jar-path)"``);
    exit code 1, with how to build it, when it is not built.

``streamsdsl ship``
    Print the ``spark-submit`` options that give a session of the user's own streamsdsl's parts
    (`streamsdsl.runtime.session.submit_options`): the JVM operator's jar and Spark's Kafka
    connector (``--jars``), streamsdsl's Python code and dependencies (``--py-files`` and
    ``--archives``, built once into the user's cache: `streamsdsl.runtime.shipping`), and the
    settings it needs (``--conf``), on one line, separated by spaces (for the shell's word
    splitting of ``$(...)``; exit code 1 when a path holds white space):
    ``spark-submit --master spark://host:7077 $(streamsdsl ship) app.py`` (docs/deploy.md).

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
from collections.abc import Callable, Sequence
from typing import Any

__all__ = ["main"]

_USAGE = """usage: streamsdsl <command> [options]

commands:
  class-archive
               write the archive of the Spark driver's classes into the user's cache (a faster cold start)
  describe     print a topology's describe(), as text or Mermaid (streamsdsl describe --help)
  dev-broker   start a local Apache Kafka broker until Ctrl-C (streamsdsl dev-broker --help)
  jar-path     print the path of the JVM operator's jar (spark-submit --jars "$(streamsdsl jar-path)")
  kafka-jars   resolve Apache Kafka's jars from Maven Central into the user's cache (the local broker's)
  kafka-connector
               resolve Spark's Kafka connector into the user's cache (kafka.connector = "jvm")
  reset        remove an application's checkpoint and state (streamsdsl reset --help)
  ship         print the spark-submit options that ship streamsdsl to a cluster (spark-submit $(streamsdsl ship) app.py)
"""


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``streamsdsl`` command; return the process exit code."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help", "help"):
        print(_USAGE, end="")
        return 0 if args else 2
    command, rest = args[0], args[1:]
    if command == "class-archive":
        from streamsdsl.runtime.class_archive import ClassArchiveError, build

        return _resolve_main("class-archive", "the archive of the Spark driver's classes", rest, build,
                             ClassArchiveError, verb="write", source="by running a first application in a child process")
    if command == "describe":
        return _describe_main(rest)
    if command == "dev-broker":
        from streamsdsl.testing.local_kafka import dev_broker_main

        return dev_broker_main(rest)
    if command == "jar-path":
        from streamsdsl.jvm import JvmOperatorError, jar_path

        return _print_path("streamsdsl", jar_path, JvmOperatorError)
    if command == "kafka-jars":
        return _kafka_jars_main(rest)
    if command == "kafka-connector":
        return _kafka_connector_main(rest)
    if command == "ship":
        if rest:
            print(f"streamsdsl ship: takes no arguments (got {' '.join(rest)})", file=sys.stderr)
            return 2
        from streamsdsl.runtime.session import submit_options

        options = submit_options()
        spaced = [o for o in options if any(c.isspace() for c in o)]
        if spaced:  # $(streamsdsl ship) splits the line at white space, and does not undo quotes
            print(f"streamsdsl ship: {spaced[0]!r} holds white space, which $(streamsdsl ship) would split: set "
                  "STREAMSDSL_CACHE_DIR to a directory whose path has none", file=sys.stderr)
            return 1
        print(" ".join(options))
        return 0
    if command == "reset":
        from streamsdsl.runtime.checkpoint import reset_main

        return reset_main(rest)
    print(f"streamsdsl: unknown command {command!r}\n\n{_USAGE}", end="", file=sys.stderr)
    return 2


def _kafka_jars_main(args: list[str]) -> int:
    from streamsdsl.testing.kafka_dist import KAFKA_VERSION, KafkaJarsMissingError, resolve_kafka_jars

    what = f"Apache Kafka {KAFKA_VERSION}'s jars (the local broker's)"
    return _resolve_main("kafka-jars", what, args, resolve_kafka_jars, KafkaJarsMissingError)


def _kafka_connector_main(args: list[str]) -> int:
    from pyspark.version import __version__

    from streamsdsl.runtime.jvm_connector import ConnectorJarsMissingError, resolve_connector

    what = f"Spark's Kafka connector for Spark {__version__} (kafka.connector = \"jvm\")"
    return _resolve_main("kafka-connector", what, args, resolve_connector, ConnectorJarsMissingError)


def _resolve_main(command: str, what: str, args: list[str], resolve: Callable[[], object],
                  error: type[Exception], *, verb: str = "resolve", source: str = "from Maven Central (mvn)") -> int:
    """``streamsdsl <command>``: resolve (or write) ``what`` with ``resolve()`` and print where it is."""
    if args:
        if args[0] in ("-h", "--help"):
            print(f"usage: streamsdsl {command}\n\n  {verb} {what} {source} into the user's "
                  "cache and print where it is")
            return 0
        print(f"streamsdsl {command}: no arguments expected (got {' '.join(args)})", file=sys.stderr)
        return 2
    return _print_path(f"streamsdsl {command}", resolve, error)


def _print_path(prefix: str, find: Callable[[], object], error: type[Exception]) -> int:
    """Print what ``find()`` returns (a path) and return 0; on ``error``, print it after
    ``prefix`` to stderr and return 1."""
    try:
        print(find())
    except error as exc:
        print(f"{prefix}: {exc}", file=sys.stderr)
        return 1
    return 0


_DESCRIBE_USAGE = """usage: streamsdsl describe MODULE:ATTR [--format text|mermaid]

  MODULE   an importable module (examples.order_enrichment) or a .py file
  ATTR     a Topology, a StreamsBuilder, or a function of no arguments returning either
  --format text (Kafka Streams' describe(), the default) or mermaid (a flowchart)
"""


def _describe_main(args: list[str]) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="streamsdsl describe", add_help=False)
    parser.add_argument("target")
    parser.add_argument("--format", choices=("text", "mermaid"), default="text")
    if not args or args[0] in ("-h", "--help"):
        print(_DESCRIBE_USAGE, end="")
        return 0 if args else 2
    try:
        parsed = parser.parse_args(args)
    except SystemExit as exc:
        return int(exc.code or 0)
    try:
        topology = _load_topology(parsed.target)
    except (ImportError, AttributeError, OSError, TypeError, ValueError) as exc:
        print(f"streamsdsl describe: {exc}", file=sys.stderr)
        return 2
    description = topology.describe()
    print(description.to_mermaid() if parsed.format == "mermaid" else description, end="")
    if parsed.format == "mermaid":
        print()
    return 0


def _load_topology(target: str) -> Any:
    """The `Topology` that ``MODULE:ATTR`` names (a builder is built, a function called)."""
    import importlib
    import importlib.util
    from pathlib import Path

    from streamsdsl.dsl.api import StreamsBuilder
    from streamsdsl.ir.topology import Topology

    module_name, sep, attr = target.rpartition(":")
    if not sep or not module_name or not attr:
        raise ValueError(f"expected MODULE:ATTR (got {target!r}), e.g. examples.order_enrichment:build_topology")
    if module_name.endswith(".py"):
        path = Path(module_name)
        spec = importlib.util.spec_from_file_location(path.stem, path)
        if spec is None or spec.loader is None or not path.is_file():
            raise ImportError(f"no Python file {module_name}")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    else:
        if "" not in sys.path:
            sys.path.insert(0, "")  # as `python -m` does: MODULE may live in the current directory
        module = importlib.import_module(module_name)
    value: Any = module
    for part in attr.split("."):
        value = getattr(value, part)
    if callable(value) and not isinstance(value, (Topology, StreamsBuilder)):
        value = value()
    if isinstance(value, StreamsBuilder):
        value = value.build()
    if not isinstance(value, Topology):
        raise TypeError(f"{target} is a {type(value).__name__}, not a Topology, a StreamsBuilder "
                        "or a function returning one")
    return value


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
