"""Table–table joins (``KTable.join`` / ``left_join`` / ``outer_join``): the argument checks and
Kafka Streams' names, behind the thin `KTable` methods.

Names advance exactly as in Kafka Streams' ``KTableImpl.doJoin``: a ``materialized`` without a
store name takes ``KTABLE-MERGE-STATE-STORE-<n>`` first, then the merge processor
(``KTABLE-MERGE-<n>``, or the given ``name``), then ``KTABLE-JOINTHIS-<n>`` and
``KTABLE-JOINOTHER-<n>`` (``<name>-join-this`` / ``<name>-join-other`` for a given name; an
index is burnt either way). Every join kind uses these prefixes: Kafka Streams 2.x and later
have no ``LEFTTHIS`` / ``OUTERTHIS`` processors. Both tables are materialized (their value
getters: ``KTableSource.materialize()``), so their stores appear in describe().
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from streamsdsl import ir
from streamsdsl._validation import require_arguments, validate_name
from streamsdsl.dsl.options import Materialized, Named, check_option, resolve_name
from streamsdsl.dsl.stage import StreamStage, TableStage, _user_fn, joiner_shapes
from streamsdsl.errors import InvalidTypeError, TopologyError

if TYPE_CHECKING:
    from streamsdsl.dsl.api import StreamsBuilder
    from streamsdsl.dsl.table import KTable

__all__ = ["table_join"]

_METHODS = {"inner": "join", "left": "left_join", "outer": "outer_join"}
_SHAPE = "(value, other_value) -> value"


def _getter_stores(builder: StreamsBuilder, table_node: str) -> tuple[str, ...]:
    """The stores a join reads ``table_node``'s values from (Kafka Streams'
    ``valueGetterSupplier().storeNames()``): a join result that is not materialized computes
    them from both of its sides' stores; any other table has one store, materialized here."""
    node = builder._nodes[table_node]
    while isinstance(node, (ir.TableFilterNode, ir.TableMapValuesNode)):
        node = builder._nodes[node.parents[0]]
    if isinstance(node, ir.TableTableJoinNode) and node.store is None:
        return node.stores
    return (builder._materialize(table_node),)


def table_join(table: KTable, other: Any, joiner: Any, name: str | Named | None, materialized: Any,
               kind: str) -> KTable:
    """``table.<join kind>(other, joiner)``: checks the arguments, adds a `ir.TableTableJoinNode`
    and returns the joined `KTable`.

    Examples
    --------
    >>> from streamsdsl import StreamsBuilder
    >>> b = StreamsBuilder()
    >>> joined = b.table("a").outer_join(b.table("b"), lambda x, y: (x, y), name="ab")
    >>> topology = b.build()
    >>> node = topology.node(joined.node_name)
    >>> node.name, node.join_this, node.join_other, node.this_stores, node.other_stores
    ('ab', 'ab-join-this', 'ab-join-other', ('a-STATE-STORE-0000000000',), ('b-STATE-STORE-0000000003',))
    >>> b.table("c").join(b.stream("s"), lambda x, y: x)
    Traceback (most recent call last):
    ...
    streamsdsl.errors.InvalidTypeError: KTable.join() joins two KTables (got a KStream). ...
    """
    method = _METHODS[kind]
    if isinstance(other, StreamStage):
        raise InvalidTypeError(
            f"KTable.{method}() joins two KTables (got a KStream). To look up this table for each record of the "
            f"stream, write stream.join(table, joiner) or stream.left_join(table, joiner); to join the stream's "
            f"latest value per key, turn it into a table first: table.{method}(stream.to_table(), joiner)."
        )
    if not isinstance(other, TableStage):
        raise InvalidTypeError(f"'other' must be a KTable (got {type(other).__name__}: {other!r}).")
    require_arguments(method, f"{method}(other_table, lambda value, other_value: ...)", ("joiner", joiner, _SHAPE))
    fn = _user_fn(joiner, "joiner", joiner_shapes("other_value"))
    materialized = check_option(materialized, Materialized, "materialized")
    builder = table._builder
    if other._builder is not builder:
        raise TopologyError("'other' belongs to a different StreamsBuilder; join tables of one builder.")
    if table.windows is not None or other.windows is not None:
        raise InvalidTypeError(
            f"{method}() of windowed KTables is not supported: join KTables of plain keys (the result of an "
            "unwindowed aggregation, builder.table or to_table)."
        )
    user = resolve_name(name)
    this_name = None if user is None else validate_name(f"{user}-join-this", "name")
    other_name = None if user is None else validate_name(f"{user}-join-other", "name")
    store = None if materialized is None else builder._store_name(materialized, "KTABLE-MERGE-")
    merge = builder._processor_name(user, "KTABLE-MERGE-")
    join_this = builder._processor_name(this_name, "KTABLE-JOINTHIS-")
    join_other = builder._processor_name(other_name, "KTABLE-JOINOTHER-")
    node = ir.TableTableJoinNode(
        merge, (table.node_name, other.node_name), joiner=fn, kind=kind, join_this=join_this, join_other=join_other,
        this_stores=_getter_stores(builder, table.node_name), other_stores=_getter_stores(builder, other.node_name),
        store=store, value_serde=materialized.value_serde if materialized is not None else None,
    )
    builder._add(node)
    return builder._table(node.name)
