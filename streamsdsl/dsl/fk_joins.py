"""Foreign-key table–table joins (KIP-213): ``KTable.join`` / ``left_join`` with a foreign-key
extractor, the argument checks and Kafka Streams' names.

**Which join a call is.** Kafka Streams tells its overloads apart by the extractor argument;
here the extractor is what makes a call a foreign-key join: ``join(other, extractor, joiner)``
(three positional arguments) or ``join(other, joiner, foreign_key_extractor=extractor)``. With
two positional arguments and no ``foreign_key_extractor`` the call is the primary-key join. The
arity of a callable is never what decides (a ``(key, value)`` extractor and a ``(value,
other_value)`` joiner both take two arguments).

The extractor takes the value (Kafka's ``Function<V, KO>``) or the key and the value (Kafka 4's
``BiFunction<K, V, KO>``), the joiner the two values or the key too (``ValueJoinerWithKey``, as
every join here), told apart by how many positional arguments they accept (the shorter form
wins when a function accepts either).

**Names** advance as in Kafka Streams 4.0's ``KTableImpl.doJoinOnForeignKey``: every processor,
sink, source, internal topic and the subscription store burns an index, a user name
(``table_joined=TableJoined.as_(name)`` or ``name=``) too; the result's store burns one when
``materialized`` names none. Both tables are materialized (the joins read their stores).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from streamsdsl import ir
from streamsdsl._validation import REQUIRED, require_arguments, validate_name
from streamsdsl.dsl.options import Materialized, Named, TableJoined, check_option, resolve_name
from streamsdsl.dsl.stage import StreamStage, TableStage, _user_fn, joiner_shapes
from streamsdsl.dsl.table_joins import _getter_stores, table_join
from streamsdsl.errors import InvalidArgumentError, InvalidTypeError, TopologyError

if TYPE_CHECKING:
    from streamsdsl.dsl.table import KTable

__all__ = ["fk_join", "join_dispatch"]

_METHODS = {"inner": "join", "left": "left_join"}
_JOINER = "(value, other_value) -> value"
_EXTRACTOR = "(value) -> foreign_key"
_EXTRACTOR_WITH_KEY = "(key, value) -> foreign_key"


def join_dispatch(table: KTable, other: Any, args: tuple[Any, ...], foreign_key_extractor: Any, joiner: Any,
                  table_joined: Any, name: str | Named | None, materialized: Any, kind: str) -> KTable:
    """``table.join(...)`` / ``left_join(...)``: a foreign-key join when an extractor is given
    (the second of three positional arguments, or ``foreign_key_extractor=``), else the
    primary-key join (`streamsdsl.dsl.table_joins.table_join`)."""
    method = _METHODS[kind]
    if len(args) > 2:
        raise InvalidTypeError(
            f"KTable.{method}() takes the other table and a joiner (a primary-key join), or the other table, a "
            f"foreign-key extractor and a joiner (a foreign-key join); got {len(args) + 1} positional arguments."
        )
    if len(args) == 2:
        if foreign_key_extractor is not None or joiner is not None:
            raise InvalidTypeError(
                f"KTable.{method}(other, foreign_key_extractor, joiner) was also given "
                f"{'foreign_key_extractor=' if foreign_key_extractor is not None else 'joiner='}: give each once."
            )
        foreign_key_extractor, joiner = args
    elif len(args) == 1:
        if joiner is not None:
            raise InvalidTypeError(f"KTable.{method}() was given the joiner twice (positionally and as joiner=).")
        joiner = args[0]
    if joiner is None:
        joiner = REQUIRED
    if foreign_key_extractor is None:
        if table_joined is not None:
            raise InvalidTypeError(
                f"'table_joined' configures a foreign-key join; give the extractor too: table.{method}(other, "
                "lambda value: value['customer'], joiner, table_joined=...)."
            )
        return table_join(table, other, joiner, name, materialized, kind)
    return fk_join(table, other, foreign_key_extractor, joiner, table_joined, name, materialized, kind)


def fk_join(table: KTable, other: Any, extractor: Any, joiner: Any, table_joined: Any, name: str | Named | None,
            materialized: Any, kind: str) -> KTable:
    """``table.<join kind>(other, extractor, joiner)``: checks the arguments, adds an
    `ir.ForeignKeyJoinNode` and returns the joined `KTable` (keyed by ``table``'s keys).

    Examples
    --------
    >>> from streamsdsl import StreamsBuilder, TableJoined
    >>> b = StreamsBuilder()
    >>> orders, customers = b.table("orders"), b.table("customers")
    >>> joined = orders.join(customers, lambda o: o["customer"], lambda o, c: {**o, "name": c["name"]},
    ...                      table_joined=TableJoined.as_("oc"))
    >>> node = b.build().node(joined.node_name)
    >>> node.name, node.registration, node.topics[0]
    ('oc-result', 'oc-subscription-registration-processor', 'oc-subscription-registration-topic')
    >>> orders.join(customers, lambda o: o["customer"], lambda o, c: o, table_joined="oc")
    Traceback (most recent call last):
    ...
    streamsdsl.errors.InvalidTypeError: 'table_joined' must be a TableJoined such as TableJoined.as_("name") (got str: 'oc').
    """
    method = _METHODS[kind]
    if isinstance(other, StreamStage):
        raise InvalidTypeError(
            f"KTable.{method}() with a foreign-key extractor joins two KTables (got a KStream): turn the stream into "
            f"a table first, table.{method}(stream.to_table(), extractor, joiner)."
        )
    if not isinstance(other, TableStage):
        raise InvalidTypeError(f"'other' must be a KTable (got {type(other).__name__}: {other!r}).")
    require_arguments(method, f"{method}(other_table, lambda value: value['customer'], lambda value, other_value: ...)",
                      ("foreign_key_extractor", extractor, _EXTRACTOR), ("joiner", joiner, _JOINER))
    fk_fn = _user_fn(extractor, "foreign_key_extractor", (_EXTRACTOR, _EXTRACTOR_WITH_KEY))
    fn = _user_fn(joiner, "joiner", joiner_shapes("other_value"))
    materialized = check_option(materialized, Materialized, "materialized")
    if table_joined is not None and not isinstance(table_joined, TableJoined):
        raise InvalidTypeError(
            f"'table_joined' must be a TableJoined such as TableJoined.as_(\"name\") "
            f"(got {type(table_joined).__name__}: {table_joined!r})."
        )
    builder = table._builder
    if other._builder is not builder:
        raise TopologyError("'other' belongs to a different StreamsBuilder; join tables of one builder.")
    if table.windows is not None or other.windows is not None:
        raise InvalidTypeError(
            f"{method}() with a foreign-key extractor joins KTables of plain keys (the result of an unwindowed "
            "aggregation, builder.table or to_table), not windowed ones."
        )
    user = resolve_name(name)
    joined_name = None if table_joined is None else table_joined.name
    if user is not None and joined_name is not None and user != joined_name:
        raise InvalidArgumentError(
            f"name={user!r} and table_joined=TableJoined.as_({joined_name!r}) name the join twice; give one."
        )
    user = user or joined_name

    def named(suffix: str, prefix: str) -> str:
        """The next name: ``<user><suffix>`` when the join is named, else ``<prefix><index>``."""
        user_name = None if user is None else validate_name(f"{user}{suffix}", "name")
        return builder._processor_name(user_name, prefix)

    registration, processor = "KTABLE-FK-JOIN-SUBSCRIPTION-REGISTRATION-", "KTABLE-FK-JOIN-SUBSCRIPTION-PROCESSOR-"
    reg_topic = f"{named('-subscription-registration', registration)}-topic"
    reg_processor = named("-subscription-registration-processor", registration)
    reg_sink = named("-subscription-registration-sink", "KTABLE-SINK-")
    reg_source = named("-subscription-registration-source", "KTABLE-SOURCE-")
    sub_store = named("-subscription-store", "KTABLE-FK-JOIN-SUBSCRIPTION-STATE-STORE-")
    receive = named("-subscription-receive", processor)
    join_foreign = named("-subscription-join-foreign", processor)
    foreign_join = named("-foreign-join-subscription", processor)
    resp_topic = f"{named('-subscription-response', 'KTABLE-FK-JOIN-SUBSCRIPTION-RESPONSE-')}-topic"
    resp_sink = named("-subscription-response-sink", "KTABLE-SINK-")
    resp_source = named("-subscription-response-source", "KTABLE-SOURCE-")
    resolver = named("-subscription-response-resolver", "KTABLE-FK-JOIN-SUBSCRIPTION-RESPONSE-RESOLVER-PROCESSOR-")
    result = named("-result", "KTABLE-FK-JOIN-OUTPUT-")
    store = builder._store_name(materialized, "KTABLE-FK-JOIN-OUTPUT-")
    node = ir.ForeignKeyJoinNode(
        result, (table.node_name, other.node_name), extractor=fk_fn, joiner=fn,
        kind=kind,
        processors=(reg_processor, reg_sink, reg_source, receive, join_foreign, foreign_join, resp_sink, resp_source,
                    resolver, sub_store),
        topics=(reg_topic, resp_topic),
        this_stores=_getter_stores(builder, table.node_name), other_stores=_getter_stores(builder, other.node_name),
        store=store, materialized=materialized is not None and materialized.store_name is not None,
        value_serde=materialized.value_serde if materialized is not None else None,
    )
    builder._add(node)
    return builder._table(node.name)
