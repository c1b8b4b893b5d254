"""The topics an application reads and writes must exist before it starts (`check_topics`); the
records a source reads among raw records (`reads_topic`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterable

from streamsdsl.ir.topology import Topology
from streamsdsl.runtime.config import StreamsConfig
from streamsdsl.runtime.errors import MissingTopicError, StreamsError

if TYPE_CHECKING:
    from streamsdsl import ir

__all__ = ["check_topics", "reads_topic", "source_partitions"]


def check_topics(config: StreamsConfig, topology: Topology) -> None:
    """Raise `MissingTopicError` naming every source, sink and dead-letter topic the brokers do not
    have (the application does not create topics; a pattern source needs none: it reads the
    matching topics as they appear), `StreamsError` when they cannot be reached or when two
    sources' patterns match one of their topics."""
    from confluent_kafka.admin import AdminClient

    try:
        meta = AdminClient(config.admin_conf).list_topics(timeout=30)
    except Exception as exc:
        raise StreamsError(
            f"cannot reach the brokers at 'bootstrap.servers' = {config.bootstrap_servers!r}: {exc}"
        ) from exc
    existing = {name for name, t in meta.topics.items() if t.error is None}
    needed = [("source", t) for t in topology.source_topics] + [("sink", t) for t in topology.sink_topics]
    if config.dead_letter_topic:
        needed.append(("dead-letter", config.dead_letter_topic))
    missing = [(role, t) for role, t in needed if t not in existing]
    _check_pattern_overlap(topology, existing)
    if missing:
        listed = ", ".join(f"{t!r} ({role})" for role, t in missing)
        raise MissingTopicError(
            f"topic(s) {listed} do not exist on {config.bootstrap_servers}; create them first, e.g. "
            f"kafka-topics.sh --create --topic {missing[0][1]} --partitions 3 (the application does not "
            "create topics)."
        )


def _check_pattern_overlap(topology: Topology, existing: set[str]) -> None:
    """Raise `StreamsError` when a topic on the brokers is matched by two sources' patterns, as
    Kafka Streams fails then ("Topic ... is already matched for another regex pattern ...")."""
    for topic in sorted(existing):
        found = [s.pattern.pattern for s in topology.sources_reading(topic) if s.pattern is not None]
        if len(found) > 1:
            raise StreamsError(
                f"Topic {topic} is already matched for another regex pattern {found[0]} and hence cannot be matched "
                f"to this regex pattern {found[1]} any more. A topic is read by one source: narrow the patterns.")


def source_partitions(config: StreamsConfig, topology: Topology) -> int | None:
    """The number of partitions of the widest source topic (Kafka Streams' number of tasks of a
    sub-topology reading it), or ``None`` when the brokers cannot tell (unreachable, or no source
    topic exists yet: `check_topics` then says so)."""
    from confluent_kafka.admin import AdminClient

    try:
        meta = AdminClient(config.admin_conf).list_topics(timeout=30)
    except Exception:  # noqa: BLE001 - check_topics reports the brokers' failure
        return None
    found = [len(t.partitions) for name, t in meta.topics.items()
             if t.error is None and any(s.reads(name) for s in topology.sources)]
    return max(found) if found else None


def reads_topic(node: ir.SourceNode, known: Iterable[str] | None = None) -> Any:
    """A Column that is true for the records of ``raw`` that source ``node`` reads: its topics,
    or (a pattern source) the ``known`` topics its pattern matches in full (Python's matching,
    as the driver routes them), else the topics Java's regular expressions match in full, as
    Spark's own Kafka connector (``subscribePattern``) matches them."""
    from pyspark.sql import functions as F

    if node.pattern is None:
        return F.col("topic").isin(list(node.topics))
    if known is not None:
        return F.col("topic").isin(sorted(t for t in set(known) if node.reads(t)))
    return F.col("topic").rlike(f"^(?:{node.pattern.pattern})$")
