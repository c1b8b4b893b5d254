"""The fluent DSL's entry point, `StreamsBuilder`, and the public stages (one immutable class per
legal stage, mirroring Kafka Streams in snake_case; each in its module, re-exported here).

Only `StreamsBuilder` holds mutable bookkeeping (the append-only node list and the name
counter, exactly Kafka Streams' ``InternalStreamsBuilder``); every stage is frozen and every
method returns a new stage for a new node, so reusing a stage never changes another branch.
This module is the top of the DSL: the builder knows every stage class and makes the stages a
module below cannot import (`_stream`, `_table`, `_cogroup`; `streamsdsl.dsl.stage`).
"""

from __future__ import annotations

import re
from typing import Any, Iterable

import attrs

from streamsdsl import ir
from streamsdsl._validation import REQUIRED, require_arguments, validate_name, validate_pattern, validate_topic
from streamsdsl.dsl.cogroup import CogroupedKStream, SessionWindowedCogroupedKStream, TimeWindowedCogroupedKStream
from streamsdsl.dsl.global_table import GlobalKTable
from streamsdsl.dsl.grouped import KGroupedStream, SessionWindowedKStream, TimeWindowedKStream
from streamsdsl.dsl.options import Consumed, Materialized, check_option, resolve_name
from streamsdsl.dsl.stage import NameArg, _materialized
from streamsdsl.dsl.stream import Branched, BranchedKStream, KStream
from streamsdsl.dsl.table import KTable
from streamsdsl.errors import InvalidArgumentError, InvalidTypeError, NotYetAttributes, TopologyError
from streamsdsl.ir.topology import Topology
from streamsdsl.state import StoreBuilder
from streamsdsl.values.windows import SessionWindows, SlidingWindows, TimeWindows

__all__ = [
    "Branched",
    "BranchedKStream",
    "CogroupedKStream",
    "GlobalKTable",
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
        #: The sources' topic patterns: pattern text -> (pattern, source name).
        self._patterns: dict[str, tuple[re.Pattern[str], str]] = {}
        #: The last repartition made for a join of each re-keyed stream (`repartition_for_join`).
        self._join_repartitions: dict[str, str] = {}
        #: The stores added for processors (`add_state_store`), by name, in the order added.
        self._state_stores: dict[str, StoreBuilder] = {}

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
        self, topics: str | Iterable[str] | re.Pattern[str], consumed: Consumed | None = None, *,
        name: NameArg = None,
    ) -> KStream:
        """A `KStream` reading ``topics``, deserialized with ``consumed``: one topic, a list of
        topics, or a compiled pattern, ``re.compile("orders-.*")`` (Kafka Streams'
        ``stream(Pattern)``), which reads every topic it matches in full, including topics created
        while the application runs (docs/kafka.md, *Topic patterns*).

        A topic is read by one source: a topic (or a pattern matching it) given to two
        ``stream()``/``table()`` calls is refused, as Kafka Streams refuses it.

        Examples
        --------
        >>> import re
        >>> b = StreamsBuilder()
        >>> b.stream(re.compile("orders-.*")).to("all-orders")
        >>> print(b.build().describe(), end="")
        Topologies:
           Sub-topology: 0
            Source: KSTREAM-SOURCE-0000000000 (topics: orders-.*)
              --> KSTREAM-SINK-0000000001
            Sink: KSTREAM-SINK-0000000001 (topic: all-orders)
              <-- KSTREAM-SOURCE-0000000000
        <BLANKLINE>
        """
        consumed = check_option(consumed, Consumed, "consumed")
        pattern: re.Pattern[str] | None = None
        topic_list: list[str] = []
        if isinstance(topics, re.Pattern):
            pattern = validate_pattern(topics, "topics")
            self._claim_pattern(pattern)
        else:
            if topics is not None and not isinstance(topics, Iterable):
                raise InvalidTypeError(
                    "'topics' must be a topic name, a list of topic names or a compiled pattern, "
                    f"re.compile('orders-.*') (got {type(topics).__name__}: {topics!r}).")
            topic_list = [topics] if isinstance(topics, str) else list(topics) if topics is not None else []
            if not topic_list:
                raise InvalidArgumentError("'topics' must name at least one topic, e.g. builder.stream('orders').")
            for t in topic_list:
                validate_topic(t, "topics")
                self._claim_topic(t, " Reuse the KStream returned by the first stream() call.")
            if len(set(topic_list)) != len(topic_list):
                raise InvalidArgumentError(f"'topics' names a topic twice: {topic_list!r}.")
        node_name = self._processor_name(resolve_name(name, consumed and consumed.name), "KSTREAM-SOURCE-")
        node = self._add(
            ir.SourceNode(
                node_name,
                (),
                tuple(topic_list),
                consumed.key_serde if consumed else None,
                consumed.value_serde if consumed else None,
                pattern=pattern,
            )
        )
        for t in topic_list:
            self._topics[t] = node.name
        if pattern is not None:
            self._patterns[pattern.pattern] = (pattern, node.name)
        return KStream(self, node.name)

    def _claim_topic(self, topic: str, hint: str = "") -> None:
        """Refuse ``topic`` as a new source's if a source reads it already (by name or pattern),
        with Kafka Streams' message (``InternalTopologyBuilder.validateTopicNotAlreadyRegistered``)."""
        if topic in self._topics:
            raise TopologyError(
                f"Topic {topic!r} is already consumed by {self._topics[topic]}; a topic can be a source only once."
                + hint)
        for pattern, owner in self._patterns.values():
            if pattern.fullmatch(topic):
                raise TopologyError(
                    f"Topic {topic} matches a Pattern already registered by another source: {pattern.pattern} "
                    f"({owner}). A topic is read by one source; read it from the KStream of that pattern, or "
                    "narrow the pattern.")

    def _claim_pattern(self, pattern: re.Pattern[str]) -> None:
        """Refuse ``pattern`` as a new source's if it matches a topic a source reads already, or
        another source reads the same pattern (Kafka Streams' ``addSource(Pattern)``)."""
        if pattern.pattern in self._patterns:
            raise TopologyError(
                f"Pattern {pattern.pattern} is already consumed by {self._patterns[pattern.pattern][1]}; a pattern "
                "can be a source only once. Reuse the KStream returned by the first stream() call.")
        for topic, owner in self._topics.items():
            if pattern.fullmatch(topic):
                raise TopologyError(
                    f"Pattern {pattern.pattern} will match a topic that has already been registered by another "
                    f"source: {topic} ({owner}). A topic is read by one source; narrow the pattern so that it does not "
                    f"match {topic}, or read {topic} from the KStream of {owner}.")

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
        materialized = _materialized(materialized, versioned=True)
        validate_topic(topic, "topic")
        self._claim_topic(topic)
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
            history_retention_ms=materialized and materialized.history_retention_ms,
        ))
        self._topics[topic] = node.name
        return KTable(self, node.name)

    def global_table(
        self, topic: str, consumed: Consumed | None = None, materialized: Materialized | None = None, *,
        name: NameArg = None,
    ) -> GlobalKTable:
        """A `GlobalKTable` reading the whole of ``topic``: every key, seen by every record of a
        stream joined with it (`KStream.join` / `KStream.left_join` with a key selector).

        As in Kafka Streams, the table is read up to its end before the streams are processed
        at start, later updates apply as they arrive, and its records do not advance stream
        time. A ``None`` value deletes its key; a ``None`` key is dropped (and counted). The table
        is always materialized: ``materialized`` names its store (else
        ``<topic>-STATE-STORE-<n>``). On Spark the table is kept per micro-batch: docs/joins.md,
        "Global tables".

        Examples
        --------
        >>> b = StreamsBuilder()
        >>> customers = b.global_table("customers")
        >>> orders = b.stream("orders")
        >>> orders.join(customers, lambda k, v: v["customer"], lambda v, c: {**v, "name": c}).to("out")
        >>> print(b.build().describe(), end="")
        Topologies:
           Sub-topology: 0 for global store (will not generate tasks)
            Source: KSTREAM-SOURCE-0000000001 (topics: [customers])
              --> KTABLE-SOURCE-0000000002
            Processor: KTABLE-SOURCE-0000000002 (stores: [customers-STATE-STORE-0000000000])
              --> none
              <-- KSTREAM-SOURCE-0000000001
          Sub-topology: 1
            Source: KSTREAM-SOURCE-0000000003 (topics: [orders])
              --> KSTREAM-LEFTJOIN-0000000004
            Processor: KSTREAM-LEFTJOIN-0000000004 (stores: [])
              --> KSTREAM-SINK-0000000005
              <-- KSTREAM-SOURCE-0000000003
            Sink: KSTREAM-SINK-0000000005 (topic: out)
              <-- KSTREAM-LEFTJOIN-0000000004
        <BLANKLINE>
        """
        consumed = check_option(consumed, Consumed, "consumed")
        if isinstance(materialized, Materialized) and materialized.history_retention_ms is not None:
            raise TopologyError(
                f"GlobalTables cannot be versioned (got the versioned store {materialized.store_name!r}), as in Kafka "
                "Streams: materialize it with Materialized.as_(name), or join a versioned builder.table(...) instead.")
        materialized = _materialized(materialized)
        validate_topic(topic, "topic")
        if topic in self._topics:
            raise TopologyError(
                f"Topic {topic!r} is already consumed by {self._topics[topic]}; a topic can be a source only once."
            )
        # Kafka Streams' order (StreamsBuilder.globalTable, InternalStreamsBuilder.globalTable):
        # the store name ("<topic>-STATE-STORE-<n>"), the source ("<name>-source"), the processor.
        store = self._store_name(materialized, f"{topic}-")
        user_name = resolve_name(name, consumed and consumed.name)
        generated_source = self._new_name("KSTREAM-SOURCE-")
        source_name = validate_name(f"{user_name}-source", "name") if user_name is not None else generated_source
        table_name = self._processor_name(user_name, "KTABLE-SOURCE-")
        key_serde = (consumed and consumed.key_serde) or (materialized and materialized.key_serde)
        value_serde = (consumed and consumed.value_serde) or (materialized and materialized.value_serde)
        node = self._add(ir.GlobalTableSourceNode(
            table_name, (), (topic,), key_serde or None, value_serde or None, source_name=source_name, store=store))
        self._topics[topic] = node.name
        named = materialized is not None and materialized.store_name is not None
        return GlobalKTable(self, node.name, store if named else None)

    def _materialize(self, table_node: str) -> str:
        """Materialize the store a join reads (Kafka Streams' ``KTableSource.materialize()``):
        the store of the table ``table_node`` is derived from, walking up through stateless
        table steps. Returns the store name."""
        node = self._nodes[table_node]
        while isinstance(node, (ir.TableFilterNode, ir.TableMapValuesNode)):
            node = self._nodes[node.parents[0]]
        if isinstance(node, (ir.TableSourceNode, ir.StreamToTableNode, ir.ForeignKeyJoinNode)):
            if not node.materialized:
                self._nodes[node.name] = attrs.evolve(node, materialized=True)
            return node.store
        stores = node.stores
        if not stores:
            raise TopologyError(f"The table of {table_node} has no state store to join with.")
        return stores[0]

    def _versioned_store(self, table_node: str) -> tuple[str, int] | None:
        """The versioned store a table reads through (KIP-914: a table source materialized with
        a versioned store, then stateless table steps): its name and history retention (ms);
        ``None`` when the table is not versioned."""
        node = self._nodes[table_node]
        while isinstance(node, (ir.TableFilterNode, ir.TableMapValuesNode)):
            node = self._nodes[node.parents[0]]
        if isinstance(node, (ir.TableSourceNode, ir.StreamToTableNode)) and node.history_retention_ms is not None:
            return node.store, node.history_retention_ms
        return None

    # -- the stages the modules below make (streamsdsl.dsl.stage) -------------------------------
    def _stream(self, node_name: str, repartition_required: bool = False) -> KStream:
        return KStream(self, node_name, repartition_required)

    def _table(self, node_name: str, windows: SessionWindows | TimeWindows | SlidingWindows | None = None) -> KTable:
        return KTable(self, node_name, windows)

    def _cogroup(self, groups: tuple[tuple[KGroupedStream, ir.UserFn], ...]) -> CogroupedKStream:
        return CogroupedKStream(self, groups)

    def add_state_store(self, builder: StoreBuilder = REQUIRED) -> StreamsBuilder:
        """Add a state store for processors (Kafka Streams' ``StreamsBuilder#addStateStore``):
        ``builder`` from `Stores` (``Stores.key_value_store_builder(Stores.persistent_key_value_store(
        "name"), key_serde, value_serde)``, a window or a session store builder). A processor opens it once it names it:
        ``stream.process(supplier, "name")``. Returns this builder.

        A store belongs to the processors connected to it; `TopologyTestDriver` and
        ``KafkaStreams.store`` read it by name."""
        require_arguments("add_state_store", "add_state_store(Stores.key_value_store_builder("
                          "Stores.persistent_key_value_store('name'), Serdes.String(), Serdes.Long()))",
                          ("builder", builder, "StoreBuilder"))
        if not isinstance(builder, StoreBuilder):
            raise InvalidTypeError(
                f"'builder' must be a StoreBuilder from Stores (e.g. Stores.key_value_store_builder("
                f"Stores.persistent_key_value_store('name'), Serdes.String(), Serdes.Long())); got "
                f"{type(builder).__name__}: {builder!r}.")
        existing = self._state_stores.get(builder.name)
        if existing is not None and existing != builder:
            raise TopologyError(f"A state store named {builder.name!r} was already added (as {existing!r}); "
                                "store names must be unique.")
        self._state_stores[builder.name] = builder
        return self

    def _supplier_stores(self, supplier: Any) -> tuple[str, ...]:
        """The stores a processor supplier provides (Kafka's ``ConnectedStoreProvider.stores()``:
        a ``stores()`` method returning store builders), added to the topology; their names."""
        provider = getattr(supplier, "stores", None)
        if provider is None:
            return ()
        if not callable(provider):
            raise InvalidTypeError(f"The supplier's 'stores' must be a method returning StoreBuilders (got {provider!r}).")
        provided = provider()
        for store in provided or ():
            self.add_state_store(store)
        return tuple(store.name for store in provided or ())

    def build(self) -> Topology:
        """Freeze what was built so far into an immutable `Topology`.

        Every store a processor names must have been added (`add_state_store`) by then, as Kafka
        Streams checks when it builds the topology."""
        nodes = tuple(self._nodes.values())
        dsl_stores = {s: n.name for n in nodes if not isinstance(n, ir.ProcessNode) for s in n.stores}
        for node in nodes:
            if not isinstance(node, ir.ProcessNode):
                continue
            for store in node.store_names:
                if store in dsl_stores:
                    raise TopologyError(
                        f"Processor {node.name} names state store {store!r}, which is the store of {dsl_stores[store]}: "
                        "a processor can be connected only to stores added with add_state_store() (connecting it to "
                        "a DSL operator's store is not supported yet; see docs/differences.md).")
                if store not in self._state_stores:
                    raise TopologyError(
                        f"Invalid topology: state store {store!r} of processor {node.name} is not added yet. Add it "
                        f"with builder.add_state_store(Stores.key_value_store_builder(Stores."
                        f"persistent_key_value_store({store!r}), key_serde, value_serde)) (or a window or session "
                        "store builder).")
        clash = sorted(set(self._state_stores) & set(dsl_stores))
        if clash:
            raise TopologyError(f"State store {clash[0]!r} was added with add_state_store() and is also the store of "
                                f"{dsl_stores[clash[0]]}; store names must be unique.")
        return Topology(nodes, tuple(self._state_stores.values()))
