"""A key with its value, and a value with its timestamp: Kafka Streams' ``KeyValue`` and
``ValueAndTimestamp``.

Both are plain `NamedTuple` s, so they unpack (``key, value = kv``) and compare as tuples. They sit
with the other value objects, below everything that hands them out: the test driver's outputs
and store views (`streamsdsl.runtime`), and the state stores of the Processor API
(`streamsdsl.state`).

Examples
--------
>>> kv = KeyValue("alice", 3)
>>> kv.key, kv.value
('alice', 3)
>>> key, value = kv
>>> ValueAndTimestamp("x", 1_000)
ValueAndTimestamp(value='x', timestamp=1000)
"""

from __future__ import annotations

from typing import Any, NamedTuple

__all__ = ["KeyValue", "ValueAndTimestamp"]


class KeyValue(NamedTuple):
    """A key and a value, as Kafka Streams' ``KeyValue``."""

    key: Any
    value: Any


class ValueAndTimestamp(NamedTuple):
    """A stored value and its timestamp, as Kafka Streams' ``ValueAndTimestamp`` (what a
    timestamped store's view returns: `TopologyTestDriver.get_timestamped_key_value_store`)."""

    value: Any
    timestamp: int
