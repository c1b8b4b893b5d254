"""The IR nodes of global tables (``StreamsBuilder.global_table``) and of a stream's join with one
(``KStream.join`` / ``left_join`` with a key selector)."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

import attrs

from streamsdsl._validation import is_name
from streamsdsl.ir.nodes import Node, SourceNode, _join_kind, _one_topic
from streamsdsl.ir.specs import UserFn, _user_fn

if TYPE_CHECKING:
    from streamsdsl.ir.description import DescriptionBuilder

__all__ = ["GlobalTableJoinNode", "GlobalTableSourceNode"]


@attrs.frozen
class GlobalTableSourceNode(SourceNode):
    """``StreamsBuilder.global_table(topic)``: a global store (``store``, always materialized)
    kept by the ``KTABLE-SOURCE`` processor ``name`` from the source ``source_name``.

    Not a stream-time input: its records update the table and nothing else (Kafka Streams'
    global thread). describe() shows it as a sub-topology of its own, "for global store"."""

    source_name: str = attrs.field(kw_only=True, validator=is_name)
    store: str = attrs.field(kw_only=True, validator=is_name)
    #: Never versioned (Kafka Streams: "GlobalTables cannot be versioned.").
    history_retention_ms: ClassVar[int | None] = None

    def __attrs_post_init__(self) -> None:
        _one_topic(self, attrs.fields(type(self)).topics, self.topics)  # type: ignore[arg-type]

    @property
    def stores(self) -> tuple[str, ...]:
        return (self.store,)

    def describe_into(self, builder: DescriptionBuilder) -> None:
        builder.add_global_store(self.source_name, self.topics[0], self.name, self.store)


@attrs.frozen
class GlobalTableJoinNode(Node):
    """``KStream.join`` / ``left_join`` with a GlobalKTable: ``parents`` are (stream, global
    table source). Each stream record is joined with the table's value for
    ``key_selector(key, value)``; the output keeps the stream record's key and timestamp.

    describe() shows one processor fed by the stream only, with no stores (Kafka Streams'
    ``KStreamGlobalKTableJoin``: the global store is not connected to the stream's tasks)."""

    key_selector: UserFn = attrs.field(kw_only=True, validator=_user_fn)
    joiner: UserFn = attrs.field(kw_only=True, validator=_user_fn)
    kind: str = attrs.field(kw_only=True, validator=_join_kind)
    arity = 2

    def describe_into(self, builder: DescriptionBuilder) -> None:
        builder.add_processor(self.name, (), self.parents[:1])
