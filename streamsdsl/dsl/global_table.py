"""The global table stage, `GlobalKTable` (``StreamsBuilder.global_table``), and the node of a
stream's join with one (``KStream.join`` / ``left_join`` with a key selector).

A global table is the whole of its topic, seen by every task: it is read up to its end before
the stream is processed at start, later updates apply in arrival order, and its records are not
a stream-time input. A stream record is joined with the table's value for
``key_selector(key, value)``, so the stream needs no repartition (Kafka Streams'
``KStreamImpl.globalTableJoin``). How the Spark plan keeps that table: docs/joins.md, "Global
tables", and `streamsdsl.compiler.global_tables`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import attrs

from streamsdsl import ir
from streamsdsl._validation import REQUIRED, require_arguments
from streamsdsl.dsl.options import resolve_name
from streamsdsl.dsl.stage import NameArg, _Stage, _user_fn, joiner_shapes
from streamsdsl.errors import InvalidArgumentError, TopologyError

if TYPE_CHECKING:
    from streamsdsl.dsl.api import StreamsBuilder

__all__ = ["GlobalKTable", "global_table_join_node"]


@attrs.frozen
class GlobalKTable(_Stage):
    """A global table (Kafka Streams' ``GlobalKTable``): every key of its topic, available to
    every record of a stream joined with it (`KStream.join` / `KStream.left_join` with a key
    selector). It has no operations of its own besides being joined.

    Examples
    --------
    >>> from streamsdsl import Materialized, StreamsBuilder
    >>> b = StreamsBuilder()
    >>> customers = b.global_table("customers", materialized=Materialized.as_("customer-store"))
    >>> customers.queryable_store_name
    'customer-store'
    """

    #: The name of the table's store when it was given (``Materialized.as_``), else ``None``
    #: (Kafka Streams' ``queryableStoreName()``).
    queryable_store_name: str | None = None


def global_table_join_node(builder: StreamsBuilder, stream: str, table: GlobalKTable, key_selector: Any, joiner: Any,
                           name: NameArg, kind: str) -> ir.Node:
    """Check a stream–global-table join as written and add its node: named ``KSTREAM-LEFTJOIN-``
    for both kinds, as Kafka Streams names it (``KStreamImpl.globalTableJoin``)."""
    method = "join" if kind == "inner" else "left_join"
    example = f"{method}(global_table, lambda key, value: value['customer_id'], lambda value, table_value: ...)"
    require_arguments(method, example, ("key_selector", REQUIRED if key_selector is None else key_selector,
                                        "(key, value) -> table key"),
                      ("joiner", REQUIRED if joiner is None else joiner, joiner_shapes("table_value")[0]))
    if table._builder is not builder:
        raise TopologyError("'other' belongs to a different StreamsBuilder; join streams and tables of one builder.")
    selector = _user_fn(key_selector, "key_selector", "(key, value) -> table key")
    fn = _user_fn(joiner, "joiner", joiner_shapes("table_value"))
    node_name = builder._processor_name(resolve_name(name), "KSTREAM-LEFTJOIN-")
    node = ir.GlobalTableJoinNode(node_name, (stream, table.node_name), key_selector=selector, joiner=fn, kind=kind)
    builder._add(node)
    return node


def refuse_stream_options(method: str, windows: Any, stream_joined: Any) -> None:
    """A stream–global-table join has no windows and no `StreamJoined`."""
    if windows is not None or stream_joined is not None:
        raise InvalidArgumentError(
            f"'windows' and 'stream_joined' belong to a stream-stream join; a stream-global-table {method}() takes "
            f"neither (got windows={windows!r}, stream_joined={stream_joined!r}).")
