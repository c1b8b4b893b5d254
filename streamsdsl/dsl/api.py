"""The fluent DSL's entry point, `StreamsBuilder`, and the public stages (one immutable class per
legal stage, mirroring Kafka Streams in snake_case; each in its module, re-exported here).

Only `StreamsBuilder` holds mutable bookkeeping (the append-only node list and the name
counter, exactly Kafka Streams' ``InternalStreamsBuilder``); every stage is frozen and every
method returns a new stage for a new node, so reusing a stage never changes another branch.
This module is the top of the DSL: the builder knows every stage class and makes the stages a
module below cannot import (`_stream`, `_table`, `_cogroup`; `streamsdsl.dsl.stage`).
"""

from __future__ import annotations

from typing import Iterable

import attrs

from streamsdsl import ir
from streamsdsl._validation import refuse_pattern, validate_name, validate_topic
from streamsdsl.dsl.cogroup import CogroupedKStream, SessionWindowedCogroupedKStream, TimeWindowedCogroupedKStream
from streamsdsl.dsl.grouped import KGroupedStream, SessionWindowedKStream, TimeWindowedKStream
from streamsdsl.dsl.options import Consumed, Materialized, check_option, resolve_name
from streamsdsl.dsl.stage import NameArg, _materialized
from streamsdsl.dsl.stream import Branched, BranchedKStream, KStream
from streamsdsl.dsl.table import KTable
from streamsdsl.errors import InvalidArgumentError, NotYetAttributes, TopologyError
from streamsdsl.ir.topology import Topology
from streamsdsl.values.windows import SessionWindows, SlidingWindows, TimeWindows

__all__ = [
    "Branched",
    "BranchedKStream",
    "CogroupedKStream",
    "KGroupedStream",
    "SessionWindowedCogroupedKStream",
    "KStream",
    "KTable",
    "SessionWindowedKStream",
    "StreamsBuilder",
    "TimeWindowedCogroupedKStream",
    "TimeWindowedKStream",
]


class StreamsBuilder(NotYetAttributes):
    """Entry point of the DSL: create source streams, then `build` a `Topology`.

    Examples
    --------
    >>> builder = StreamsBuilder()
    >>> builder.stream("words").filter(lambda k, v: v != "").to("out")
    >>> print(builder.build().describe(), end="")
    Topologies:
       Sub-topology: 0
        Source: KSTREAM-SOURCE-0000000000 (topics: [words])
          --> KSTREAM-FILTER-0000000001
        Processor: KSTREAM-FILTER-0000000001 (stores: [])
          --> KSTREAM-SINK-0000000002
          <-- KSTREAM-SOURCE-0000000000
        Sink: KSTREAM-SINK-0000000002 (topic: out)
          <-- KSTREAM-FILTER-0000000001
    <BLANKLINE>
    """

    def __init__(self) -> None:
        self._nodes: dict[str, ir.Node] = {}
        self._index = 0
        self._topics: dict[str, str] = {}
        #: The last repartition made for a join of each re-keyed stream (`repartition_for_join`).
        self._join_repartitions: dict[str, str] = {}

    # -- bookkeeping (internal) ------------------------------------------------------------
    def _next_index(self) -> int:
        index = self._index
        self._index += 1
        return index

    def _new_name(self, prefix: str) -> str:
        return f"{prefix}{self._next_index():010d}"

    def _processor_name(self, user_name: str | None, prefix: str) -> str:
        # Kafka Streams burns an index even for a user-given name (topology compatibility).
        generated = self._new_name(prefix)
        return user_name if user_name is not None else generated

    def _burn_index_for_materialized_count(self, materialized: Materialized | None, prefix: str) -> None:
        """count(materialized=...) without a store name burns one index, as Kafka Streams does."""
        if materialized is not None and materialized.store_name is None:
            self._new_name(f"{prefix}STATE-STORE-")

    def _store_name(self, materialized: Materialized | None, prefix: str) -> str:
        if materialized is not None and materialized.store_name is not None:
            return materialized.store_name
        return self._new_name(f"{prefix}STATE-STORE-")

    def _add(self, node: ir.Node) -> ir.Node:
        if node.name in self._nodes:
            raise TopologyError(
                f"Processor name {node.name!r} is already used in this topology; "
                "names given with name= or Named.as_() must be unique."
            )
        self._nodes[node.name] = node
        return node

    # -- public ------------------------------------------------------------------------------
    def stream(
        self, topics: str | Iterable[str], consumed: Consumed | None = None, *, name: NameArg = None
    ) -> KStream:
        """A `KStream` reading ``topics`` (one topic or a list), deserialized with ``consumed``."""
        consumed = check_option(consumed, Consumed, "consumed")
        refuse_pattern(topics, "topics")
        topic_list = [topics] if isinstance(topics, str) else list(topics) if topics is not None else []
        if not topic_list:
            raise InvalidArgumentError("'topics' must name at least one topic, e.g. builder.stream('orders').")
        for t in topic_list:
            validate_topic(t, "topics")
            if t in self._topics:
                raise TopologyError(
                    f"Topic {t!r} is already consumed by {self._topics[t]}; a topic can be a source "
                    "only once. Reuse the KStream returned by the first stream() call."
                )
        node_name = self._processor_name(resolve_name(name, consumed and consumed.name), "KSTREAM-SOURCE-")
        node = self._add(
            ir.SourceNode(
                node_name,
                (),
                tuple(topic_list),
                consumed.key_serde if consumed else None,
                consumed.value_serde if consumed else None,
            )
        )
        for t in topic_list:
            self._topics[t] = node.name
        return KStream(self, node.name)

    def table(
        self, topic: str, consumed: Consumed | None = None, materialized: Materialized | None = None, *,
        name: NameArg = None,
    ) -> KTable:
        """A `KTable` reading ``topic`` as a changelog: the latest value per key.

        A record with a ``None`` value is a tombstone that deletes its key; a record with a
        ``None`` key is dropped (and counted in ``dropped-records-total``). Out-of-order
        updates replace the stored value, as in Kafka Streams' (non-versioned) table.

        Examples
        --------
        >>> b = StreamsBuilder()
        >>> customers = b.table("customers", materialized=Materialized.as_("customer-store"))
        >>> print(b.build().describe(), end="")
        Topologies:
           Sub-topology: 0
            Source: KSTREAM-SOURCE-0000000000 (topics: [customers])
              --> KTABLE-SOURCE-0000000001
            Processor: KTABLE-SOURCE-0000000001 (stores: [customer-store])
              --> none
              <-- KSTREAM-SOURCE-0000000000
        <BLANKLINE>
        """
        consumed = check_option(consumed, Consumed, "consumed")
        materialized = _materialized(materialized)
        validate_topic(topic, "topic")
        if topic in self._topics:
            raise TopologyError(
                f"Topic {topic!r} is already consumed by {self._topics[topic]}; a topic can be a source only once."
            )
        # Kafka Streams' order (StreamsBuilder.table, InternalStreamsBuilder.table): the store
        # name first ("<topic>-STATE-STORE-<n>"), then the source, then the table source.
        store = self._store_name(materialized, f"{topic}-")
        user_name = resolve_name(name, consumed and consumed.name)
        source_name = self._processor_name(user_name, "KSTREAM-SOURCE-")
        generated = self._new_name("KTABLE-SOURCE-")
        table_name = validate_name(f"{user_name}-table-source", "name") if user_name is not None else generated
        key_serde = (materialized and materialized.key_serde) or (consumed and consumed.key_serde)
        value_serde = (materialized and materialized.value_serde) or (consumed and consumed.value_serde)
        node = self._add(ir.TableSourceNode(
            table_name, (), (topic,), key_serde or None, value_serde or None, source_name=source_name, store=store,
            materialized=materialized is not None and materialized.store_name is not None,
        ))
        self._topics[topic] = node.name
        return KTable(self, node.name)

    def _materialize(self, table_node: str) -> str:
        """Materialize the store a join reads (Kafka Streams' ``KTableSource.materialize()``):
        the store of the table ``table_node`` is derived from, walking up through stateless
        table steps. Returns the store name."""
        node = self._nodes[table_node]
        while isinstance(node, (ir.TableFilterNode, ir.TableMapValuesNode)):
            node = self._nodes[node.parents[0]]
        if isinstance(node, (ir.TableSourceNode, ir.StreamToTableNode)):
            if not node.materialized:
                self._nodes[node.name] = attrs.evolve(node, materialized=True)
            return node.store
        stores = node.stores
        if not stores:
            raise TopologyError(f"The table of {table_node} has no state store to join with.")
        return stores[0]

    # -- the stages the modules below make (streamsdsl.dsl.stage) -------------------------------
    def _stream(self, node_name: str, repartition_required: bool = False) -> KStream:
        return KStream(self, node_name, repartition_required)

    def _table(self, node_name: str, windows: SessionWindows | TimeWindows | SlidingWindows | None = None) -> KTable:
        return KTable(self, node_name, windows)

    def _cogroup(self, groups: tuple[tuple[KGroupedStream, ir.UserFn], ...]) -> CogroupedKStream:
        return CogroupedKStream(self, groups)

    def build(self) -> Topology:
        """Freeze what was built so far into an immutable `Topology`."""
        return Topology(tuple(self._nodes.values()))
