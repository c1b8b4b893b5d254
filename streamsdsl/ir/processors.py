"""The IR node of a user's processor (``KStream.process`` / ``process_values``): the supplier
that makes one processor instance per task and the names of the stores it is connected to.
The stores themselves are the topology's (`Topology.state_stores`, added with
``StreamsBuilder.add_state_store``)."""

from __future__ import annotations

import attrs

from streamsdsl._validation import instance_of, names_tuple
from streamsdsl.ir.description import DescriptionBuilder, java_hash_set_order
from streamsdsl.ir.nodes import UnaryNode
from streamsdsl.ir.specs import UserFn, _user_fn

__all__ = ["ProcessNode"]


@attrs.frozen
class ProcessNode(UnaryNode):
    """``process`` (``fixed_key`` False: keys may change, so a grouping after it repartitions) or
    ``process_values`` (``fixed_key`` True: a `FixedKeyProcessor` that keeps every key).

    ``supplier()`` returns a new processor instance; ``store_names`` are the stores it may open
    with ``context.get_state_store`` (Kafka's ``stateStoreNames``), in the order given."""

    supplier: UserFn = attrs.field(kw_only=True, validator=_user_fn)
    store_names: tuple[str, ...] = attrs.field(kw_only=True, default=(), validator=names_tuple(0))
    fixed_key: bool = attrs.field(kw_only=True, default=False, validator=instance_of(bool))

    @property
    def stores(self) -> tuple[str, ...]:
        return self.store_names

    def describe_into(self, builder: DescriptionBuilder) -> None:
        builder.add_processor(self.name, java_hash_set_order(self.store_names), self.parents)
