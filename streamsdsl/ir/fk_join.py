"""The foreign-key table–table join's IR node (KIP-213), in a module of its own: Kafka Streams'
graph for it has ten processors, two internal topics and a store of its own."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import attrs

from streamsdsl._validation import instance_of, is_name, is_topic, names_tuple
from streamsdsl.errors import InvalidArgumentError
from streamsdsl.ir.description import java_hash_set_order
from streamsdsl.ir.nodes import Node, _serde_field
from streamsdsl.ir.specs import UserFn, _user_fn
from streamsdsl.values.serdes import PlanSerde

if TYPE_CHECKING:
    from streamsdsl.ir.description import DescriptionBuilder

__all__ = ["ForeignKeyJoinNode"]


def _fk_join_kind(inst: ForeignKeyJoinNode, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value not in ("inner", "left"):
        raise InvalidArgumentError(f"'kind' of a foreign-key join must be 'inner' or 'left' (got {value!r}).")


def _fk_names(inst: ForeignKeyJoinNode, attribute: attrs.Attribute[Any], value: Any) -> None:
    names_tuple(10)(inst, attribute, value)
    if len(value) != 10:
        raise InvalidArgumentError(f"A foreign-key join has 10 processor names besides its result (got {value!r}).")
    names = (inst.name, *value)
    if len(set(names)) != len(names):
        raise InvalidArgumentError(f"A foreign-key join's processors need distinct names (got {names!r}).")


def _fk_topics(inst: ForeignKeyJoinNode, attribute: attrs.Attribute[Any], value: Any) -> None:
    if not isinstance(value, tuple) or len(value) != 2:
        raise InvalidArgumentError(f"A foreign-key join has two internal topics (got {value!r}).")
    for topic in value:
        is_topic(inst, attribute, topic)


@attrs.frozen
class ForeignKeyJoinNode(Node):
    """``KTable.join`` / ``left_join`` with a foreign-key extractor (KIP-213): ``parents`` are
    (this, other); ``name`` is the result processor (``KTABLE-FK-JOIN-OUTPUT``), whose output
    is the joined table keyed by this table's keys.

    describe() shows Kafka Streams' processors (``KTableImpl.doJoinOnForeignKey``) on two
    sub-topologies joined by two internal topics (``topics``: the subscription registration
    and the subscription response topic). ``processors`` names, in this order: the
    subscription registration processor, its sink, the registration source, the subscription
    receive processor, the subscription join (connected to ``other_stores``), the foreign-table
    join (fed by the other table), the response sink, the response source, the response
    resolver (connected to ``this_stores``) and the subscription store. ``store``: the
    result's store (``materialized``: it exists); ``value_serde``: the result's value serde.
    """

    #: ``(value) -> foreign key``, or ``(key, value)`` (Kafka 4's ``BiFunction``: ``takes_key``).
    extractor: UserFn = attrs.field(kw_only=True, validator=_user_fn)
    joiner: UserFn = attrs.field(kw_only=True, validator=_user_fn)
    kind: str = attrs.field(kw_only=True, validator=_fk_join_kind)
    processors: tuple[str, ...] = attrs.field(kw_only=True, validator=_fk_names)
    topics: tuple[str, ...] = attrs.field(kw_only=True, validator=_fk_topics)
    this_stores: tuple[str, ...] = attrs.field(kw_only=True, validator=names_tuple(1))
    other_stores: tuple[str, ...] = attrs.field(kw_only=True, validator=names_tuple(1))
    store: str = attrs.field(kw_only=True, validator=is_name)
    #: The result has a store (``Materialized.as_(name)``, or a later join reads it).
    materialized: bool = attrs.field(kw_only=True, default=False, validator=instance_of(bool))
    value_serde: PlanSerde | None = _serde_field()
    arity = 2

    @property
    def registration(self) -> str:
        """The subscription registration processor (stage 1, keyed by this table's keys)."""
        return self.processors[0]

    @property
    def receive(self) -> str:
        """The subscription receive processor (stage 2, keyed by the foreign key)."""
        return self.processors[3]

    @property
    def resolver(self) -> str:
        """The response resolver (stage 3, keyed by this table's keys)."""
        return self.processors[8]

    @property
    def subscription_store(self) -> str:
        return self.processors[9]

    @property
    def stores(self) -> tuple[str, ...]:
        """The result's store when materialized (the subscription store and the tables' stores
        belong to the processors describe() shows them on)."""
        return (self.store,) if self.materialized else ()

    def describe_into(self, builder: DescriptionBuilder) -> None:
        (registration, reg_sink, reg_source, receive, join_foreign, foreign_join, resp_sink, resp_source, resolver,
         sub_store) = self.processors
        reg_topic, resp_topic = self.topics
        builder.add_processor(registration, (), self.parents[:1])
        builder.add_sink(reg_sink, reg_topic, (registration,))
        builder.add_source(reg_source, (reg_topic,))
        builder.add_processor(receive, (sub_store,), (reg_source,))
        builder.add_processor(join_foreign, java_hash_set_order(self.other_stores), (receive,))
        builder.add_processor(foreign_join, (sub_store,), self.parents[1:])
        builder.add_sink(resp_sink, resp_topic, (join_foreign, foreign_join))
        builder.add_source(resp_source, (resp_topic,))
        builder.add_processor(resolver, java_hash_set_order(self.this_stores), (resp_source,))
        builder.add_processor(self.name, self.stores, (resolver,))
