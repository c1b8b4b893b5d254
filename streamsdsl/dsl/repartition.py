"""Repartitions: where Kafka Streams writes a re-keyed stream through an internal topic.

A stream whose key was changed (``map``, ``select_key``, ``flat_map``) is repartitioned before
it is grouped, joined or made a table (Kafka Streams' ``KStreamImpl.createRepartitionedSource``
and ``repartitionForJoin``). The IR node is a `RepartitionNode`; describe() shows its three
processors (a filter, a sink and a source in a new sub-topology) and the topic, below; on
Spark the shuffle of the stateful operator downstream moves the records to their new key
(docs/differences.md).

Examples
--------
>>> from streamsdsl import StreamsBuilder
>>> b = StreamsBuilder()
>>> b.stream("in").map(lambda k, v: (v, k)).to_table().to_stream().to("out")
>>> for line in b.build().describe().splitlines():
...     if "repartition" in line:
...         print(line.strip())
Sink: KSTREAM-SINK-0000000004 (topic: KSTREAM-TOTABLE-0000000002-repartition)
Source: KSTREAM-SOURCE-0000000006 (topics: [KSTREAM-TOTABLE-0000000002-repartition])
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from streamsdsl import ir
from streamsdsl.values.serdes import PlanSerde

if TYPE_CHECKING:
    from streamsdsl.dsl.api import StreamsBuilder

__all__ = ["repartitioned_source", "repartition_for_join"]

_GENERATED = re.compile(r"KSTREAM.*-[0-9]{10}")


def repartitioned_source(builder: StreamsBuilder, parent: str, prefix: str, *, key_serde: PlanSerde | None = None,
                         value_serde: PlanSerde | None = None, partitions: int | None = None) -> str:
    """Add a `RepartitionNode` after ``parent`` writing ``<prefix>-repartition``; its source's name.

    Names as Kafka Streams' ``createRepartitionedSource``: three indexes are burnt (sink, filter,
    source); the generated names are kept when ``prefix`` is itself a generated name, else the
    processors are ``<topic>-sink``, ``<topic>-filter`` and ``<topic>-source``.
    """
    topic = prefix if prefix.endswith("-repartition") else f"{prefix}-repartition"
    gen_sink = builder._new_name("KSTREAM-SINK-")
    gen_filter = builder._new_name("KSTREAM-FILTER-")
    gen_source = builder._new_name("KSTREAM-SOURCE-")
    if _GENERATED.fullmatch(prefix):
        sink, filt, source = gen_sink, gen_filter, gen_source
    else:
        sink, filt, source = f"{topic}-sink", f"{topic}-filter", f"{topic}-source"
    builder._add(ir.RepartitionNode(source, (parent,), topic=topic, filter_name=filt, sink_name=sink,
                                    key_serde=key_serde, value_serde=value_serde, partitions=partitions))
    return source


def repartition_for_join(builder: StreamsBuilder, stream: str, repartition_name: str, *,
                         key_serde: Any = None, value_serde: Any = None) -> str:
    """The repartitioned source a join reads from the re-keyed ``stream`` (Kafka Streams'
    ``KStreamImpl.repartitionForJoin``), writing ``<repartition_name>-repartition``.

    As in Kafka Streams, a stream joined again under its own name (an unnamed join) reuses the
    repartition it made last (the three indexes are burnt again); a named join makes its own."""
    cache = builder._join_repartitions
    if repartition_name == stream and stream in cache:
        for prefix in ("KSTREAM-SINK-", "KSTREAM-FILTER-", "KSTREAM-SOURCE-"):
            builder._new_name(prefix)
        return cache[stream]
    source = repartitioned_source(builder, stream, repartition_name, key_serde=key_serde, value_serde=value_serde)
    cache[stream] = source
    return source
