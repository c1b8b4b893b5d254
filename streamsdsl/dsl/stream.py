"""The record stream stage, `KStream`, and its branches (`KStream.split`: `BranchedKStream`,
`Branched`). Stateless steps add one node each; grouping gives a `KGroupedStream`
(`streamsdsl.dsl.grouped`); ``to_table`` and the joins (`streamsdsl.dsl.joins` for
stream–stream) give tables and streams."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, ClassVar, Iterable, Mapping

import attrs

from streamsdsl import ir
from streamsdsl._validation import REQUIRED, require_arguments, require_callable, validate_name, validate_topic
from streamsdsl.dsl import hints
from streamsdsl.dsl.grouped import KGroupedStream
from streamsdsl.dsl.global_table import GlobalKTable, global_table_join_node, refuse_stream_options
from streamsdsl.dsl.joins import stream_stream_join_node
from streamsdsl.dsl.options import Grouped, Materialized, Produced, Repartitioned, check_option, resolve_name
from streamsdsl.dsl.printed import Printed
from streamsdsl.dsl.repartition import repartition_for_join, repartitioned_source
from streamsdsl.dsl.stage import VALUE_MAPPER, VALUES_MAPPER, NameArg, StreamStage, _fn, _Hinted, _materialized
from streamsdsl.dsl.stage import _user_fn, joiner_shapes
from streamsdsl.dsl.table import KTable
from streamsdsl.dsl.table_joins import _getter_stores
from streamsdsl.errors import InvalidArgumentError, InvalidTypeError, TopologyError
from streamsdsl.values.joins import Joined

if TYPE_CHECKING:
    from streamsdsl.dsl.api import StreamsBuilder

__all__ = ["Branched", "BranchedKStream", "KStream"]


def _check_grace(builder: Any, table: str, grace_ms: int) -> None:
    """Kafka Streams' checks of a stream–table join with a grace period (``KStreamImpl``,
    ``StreamTableJoinNode.writeToTopology``), made when the join is written."""
    versioned = builder._versioned_store(table)
    if versioned is None:
        raise InvalidArgumentError(
            "KTable must be versioned to use a grace period in a stream table join. Materialize the table with "
            "a versioned store: builder.table(topic, materialized=Materialized.as_(Stores."
            "persistent_versioned_key_value_store(name, history_retention))).")
    store, retention = versioned
    if grace_ms > retention:
        raise InvalidArgumentError(
            f"History retention must be at least grace period (grace {grace_ms} ms > history retention {retention} ms "
            f"of store {store!r}). Shorten the grace period or keep a longer history.")


@attrs.frozen
class KStream(StreamStage):
    """A record stream (Kafka Streams' ``KStream``). Every method returns a new stage."""

    _hints: ClassVar[Mapping[str, str]] = hints.STREAM

    def _child(self, node: ir.Node, *, key_changed: bool = False) -> KStream:
        self._add(node)
        return KStream(self._builder, node.name, self.repartition_required or key_changed)

    def _name(self, name: NameArg, prefix: str) -> str:
        return self._builder._processor_name(resolve_name(name), prefix)

    def filter(self, predicate: Callable[[Any, Any], bool] | Any, *, name: NameArg = None) -> KStream:
        """Keep records for which ``predicate(key, value)`` is true (or a boolean Column)."""
        fn = _fn(predicate, "predicate", "(key, value) -> bool", column_ok=True)
        return self._child(ir.FilterNode(self._name(name, "KSTREAM-FILTER-"), (self.node_name,), predicate=fn))

    def filter_not(self, predicate: Callable[[Any, Any], bool] | Any, *, name: NameArg = None) -> KStream:
        """Keep records for which ``predicate(key, value)`` is false."""
        fn = _fn(predicate, "predicate", "(key, value) -> bool", column_ok=True)
        node = ir.FilterNode(self._name(name, "KSTREAM-FILTER-"), (self.node_name,), predicate=fn, negate=True)
        return self._child(node)

    def map_values(self, mapper: Callable[[Any], Any] | Callable[[Any, Any], Any] | Any, *,
                   name: NameArg = None) -> KStream:
        """Replace each value with ``mapper(value)``, ``mapper(key, value)`` (Kafka's
        ``ValueMapperWithKey``: the key is read-only) or a Column; the key is unchanged.

        Examples
        --------
        >>> from streamsdsl import StreamsBuilder, TopologyTestDriver
        >>> b = StreamsBuilder()
        >>> b.stream("in").map_values(lambda key, value: f"{key}:{value}").to("out")
        >>> with TopologyTestDriver(b.build()) as driver:
        ...     driver.create_input_topic("in").pipe_input("k", "v")
        ...     driver.create_output_topic("out").read_key_value()
        KeyValue(key='k', value='k:v')
        """
        fn = _fn(mapper, "mapper", VALUE_MAPPER, column_ok=True)
        return self._child(ir.MapValuesNode(self._name(name, "KSTREAM-MAPVALUES-"), (self.node_name,), mapper=fn))

    def map(self, mapper: Callable[[Any, Any], tuple[Any, Any]], *, name: NameArg = None) -> KStream:
        """Replace each record with ``mapper(key, value) -> (new_key, new_value)``."""
        fn = _user_fn(mapper, "mapper", "(key, value) -> (key, value)")
        node = ir.MapNode(self._name(name, "KSTREAM-MAP-"), (self.node_name,), mapper=fn)
        return self._child(node, key_changed=True)

    def flat_map(
        self, mapper: Callable[[Any, Any], Iterable[tuple[Any, Any]]], *, name: NameArg = None
    ) -> KStream:
        """Replace each record with the records of ``mapper(key, value) -> iterable of (key, value)``."""
        fn = _user_fn(mapper, "mapper", "(key, value) -> iterable of (key, value)")
        node = ir.FlatMapNode(self._name(name, "KSTREAM-FLATMAP-"), (self.node_name,), mapper=fn)
        return self._child(node, key_changed=True)

    def flat_map_values(self, mapper: Callable[[Any], Iterable[Any]] | Callable[[Any, Any], Iterable[Any]], *,
                        name: NameArg = None) -> KStream:
        """Replace each record with one record per value of ``mapper(value) -> iterable`` (or
        ``mapper(key, value)``, Kafka's ``ValueMapperWithKey``: the key is read-only)."""
        fn = _user_fn(mapper, "mapper", VALUES_MAPPER)
        node = ir.FlatMapValuesNode(self._name(name, "KSTREAM-FLATMAPVALUES-"), (self.node_name,), mapper=fn)
        return self._child(node)

    def select_key(self, selector: Callable[[Any, Any], Any] | Any, *, name: NameArg = None) -> KStream:
        """Set each key to ``selector(key, value)`` (or a Column)."""
        fn = _fn(selector, "selector", "(key, value) -> key", column_ok=True)
        node = ir.SelectKeyNode(self._name(name, "KSTREAM-KEY-SELECT-"), (self.node_name,), selector=fn)
        return self._child(node, key_changed=True)

    def peek(self, action: Callable[[Any, Any], None], *, name: NameArg = None) -> KStream:
        """Call ``action(key, value)`` for each record and forward the record unchanged.

        The action runs inside Spark's Python workers, possibly more than once per record when
        Spark retries a task; use it for logging and metrics, not for side effects that must
        happen exactly once.
        """
        fn = _user_fn(action, "action", "(key, value) -> None")
        return self._child(ir.PeekNode(self._name(name, "KSTREAM-PEEK-"), (self.node_name,), action=fn))

    def foreach(self, action: Callable[[Any, Any], None] = REQUIRED, *, name: NameArg = None) -> None:
        """Call ``action(key, value)`` for each record: a terminal step (Kafka Streams'
        ``KStream#foreach``), named ``KSTREAM-FOREACH-<n>``; it returns ``None``, like `to`.

        On Spark the action runs in the Python workers of the executors, and a micro-batch that
        fails and is retried runs it again for the batch's records: at least once per record,
        not exactly once (docs: Stages, "foreach and print").

        Examples
        --------
        >>> from streamsdsl import StreamsBuilder, TopologyTestDriver
        >>> b = StreamsBuilder()
        >>> seen = []
        >>> b.stream("in").foreach(lambda key, value: seen.append((key, value)))
        >>> with TopologyTestDriver(b.build(), engine="direct") as driver:
        ...     driver.create_input_topic("in").pipe_input("k", "v")
        >>> seen
        [('k', 'v')]
        """
        require_arguments("foreach", "foreach(lambda key, value: print(key, value))",
                          ("action", action, "(key, value) -> None"))
        fn = _user_fn(action, "action", "(key, value) -> None")
        self._add(ir.ForeachNode(self._name(name, "KSTREAM-FOREACH-"), (self.node_name,), action=fn))

    def print(self, printed: Printed = REQUIRED) -> None:
        """Print each record (Kafka Streams' ``KStream#print``): ``[label]: key, value`` to
        standard output (`Printed.to_sys_out`) or appended to a file (`Printed.to_file`); a
        terminal step named ``KSTREAM-PRINTER-<n>`` (or `Printed.with_name`'s name). The label is
        `Printed.with_label`'s, else the name of this stream's node.

        On Spark it prints where the step runs: in the Python workers of the executors (on a
        cluster, standard output goes to the executors' logs and a file is written on each
        executor's disk), at least once per record (a retried micro-batch prints again).

        Examples
        --------
        >>> from streamsdsl import Printed, StreamsBuilder, TopologyTestDriver
        >>> b = StreamsBuilder()
        >>> b.stream("in").print(Printed.to_sys_out().with_label("in"))
        >>> with TopologyTestDriver(b.build(), engine="direct") as driver:
        ...     driver.create_input_topic("in").pipe_input("k", None)
        [in]: k, null
        """
        require_arguments("print", "print(Printed.to_sys_out())", ("printed", printed, "Printed"))
        if not isinstance(printed, Printed):
            raise InvalidTypeError("'printed' must be a Printed such as Printed.to_sys_out() or Printed.to_file(path) "
                                   f"(got {type(printed).__name__}: {printed!r}).")
        node_name = self._builder._processor_name(printed.name, "KSTREAM-PRINTER-")
        fn = ir.UserFn(printed.action(self.node_name), "(key, value) -> None")
        self._add(ir.ForeachNode(node_name, (self.node_name,), action=fn))

    def merge(self, other: KStream, *, name: NameArg = None) -> KStream:
        """The union of this stream and ``other`` (records of both, no ordering guarantee across them)."""
        if not isinstance(other, KStream):
            raise InvalidTypeError(f"'other' must be a KStream (got {type(other).__name__}).")
        if other._builder is not self._builder:
            raise TopologyError("'other' belongs to a different StreamsBuilder; merge streams of one builder.")
        node = ir.MergeNode(self._name(name, "KSTREAM-MERGE-"), (self.node_name, other.node_name))
        self._add(node)
        return KStream(self._builder, node.name, self.repartition_required or other.repartition_required)

    def repartition(self, repartitioned: Repartitioned | None = None) -> KStream:
        """The stream written through a repartition and read back (Kafka Streams'
        ``KStream#repartition``): the processors ``KSTREAM-REPARTITION-<n>`` names (or
        `Repartitioned.as_`'s name), the topic ``<name>-repartition`` in describe(), records with a
        ``None`` key dropped (and counted) unless a join that keeps them follows, as for every
        repartition. On Spark it is a shuffle by key, into
        `Repartitioned.with_number_of_partitions` partitions when given; a grouping or join after
        it does not repartition again.

        Examples
        --------
        >>> from streamsdsl import Repartitioned, StreamsBuilder
        >>> b = StreamsBuilder()
        >>> b.stream("in").repartition(Repartitioned.with_number_of_partitions(4)).to("out")
        >>> print(b.build().describe().splitlines()[7])
            Sink: KSTREAM-SINK-0000000002 (topic: KSTREAM-REPARTITION-0000000001-repartition)
        """
        if repartitioned is not None and not isinstance(repartitioned, Repartitioned):
            raise InvalidTypeError(
                "'repartitioned' must be a Repartitioned such as Repartitioned.with_number_of_partitions(4) or "
                f"Repartitioned.as_('by-user') (got {type(repartitioned).__name__}: {repartitioned!r}).")
        repartitioned = repartitioned or Repartitioned()
        name = repartitioned.name if repartitioned.name is not None else self._builder._new_name("KSTREAM-REPARTITION-")
        source = repartitioned_source(self._builder, self.node_name, name, key_serde=repartitioned.key_serde,
                                      value_serde=repartitioned.value_serde,
                                      partitions=repartitioned.number_of_partitions)
        return KStream(self._builder, source, False)

    def to_table(self, *, materialized: Materialized | None = None, name: NameArg = None) -> KTable:
        """This stream as a `KTable`: the latest value per key; a ``None`` value deletes the key
        and a ``None`` key is dropped (and counted). After a key change it reads a repartition
        (``<name>-repartition``), whose filter drops ``None`` keys (counted; Kafka Streams does not count them)."""
        materialized = _materialized(materialized, versioned=True)
        node_name = self._name(name, "KSTREAM-TOTABLE-")
        store = self._builder._store_name(materialized, "KSTREAM-TOTABLE-")
        parent = self.node_name
        if self.repartition_required:  # Kafka Streams' KStreamImpl.toTable: a repartition named after the table
            parent = repartitioned_source(self._builder, parent, node_name,
                                          key_serde=materialized and materialized.key_serde,
                                          value_serde=materialized and materialized.value_serde)
        self._add(ir.StreamToTableNode(node_name, (parent,), store=store,
                                       materialized=materialized is not None and materialized.store_name is not None,
                                       history_retention_ms=materialized and materialized.history_retention_ms))
        return KTable(self._builder, node_name)

    def join(self, other: KTable | KStream | GlobalKTable, joiner: Callable[[Any, Any], Any] = REQUIRED,
             windows: Any = None, *, stream_joined: Any = None, joined: Joined | None = None, name: NameArg = None,
             key_selector: Callable[[Any, Any], Any] | None = None) -> KStream:
        """Join each record with ``other``'s current value for its key: ``joiner(value, table_value)``
        (or ``joiner(key, value, table_value)``, Kafka's ``ValueJoinerWithKey``, for every join).

        With a `KTable` ``other`` (a stream-table join) only stream records produce output, with
        the stream record's key and timestamp, and only when the table has a value for the key;
        a table update emits nothing. Stream records with a ``None`` key or value are dropped
        (and counted).

        With a `KStream` ``other`` (a windowed stream-stream join, ``windows`` a `JoinWindows`
        is required) each record joins every record of the other stream with its key whose
        timestamp is within the window: ``joiner(value, other_value)`` with the larger of the
        two timestamps. ``stream_joined`` (`StreamJoined`) sets serdes and names.

        With a versioned `KTable` (``Stores.persistent_versioned_key_value_store``) a stream
        record joins the table's version as of its own timestamp (KIP-914);
        ``joined=Joined.with_grace_period(grace)`` holds stream records back for ``grace`` so
        that late table updates still reach them (KIP-923, ``docs/joins.md``).

        A stream re-keyed before the join (``map``, ``select_key``, ``flat_map``), on either side,
        is repartitioned first, as Kafka Streams does (`streamsdsl.dsl.repartition`).

        With a `GlobalKTable` ``other``, ``join(global_table, key_selector, joiner)``: each record
        is joined with the table's value for ``key_selector(key, value)`` (no repartition); a
        record whose selected key is ``None`` or whose value is ``None`` is dropped (and counted),
        one without a table value emits nothing. See docs/joins.md, "Global tables".
        """
        return self._stream_table_join(other, joiner, windows, stream_joined, name, "inner", joined, key_selector)

    def left_join(self, other: KTable | KStream | GlobalKTable, joiner: Callable[[Any, Any], Any] = REQUIRED,
                  windows: Any = None, *, stream_joined: Any = None, joined: Joined | None = None,
                  name: NameArg = None, key_selector: Callable[[Any, Any], Any] | None = None) -> KStream:
        """Like `join`, but every stream record produces output: ``joiner(value, None)`` when the
        table has no value for its key. A record with a ``None`` key and a value is joined with
        ``None`` too (KIP-962); a ``None`` value is dropped (and counted).

        With a `KStream` ``other`` a record without a match in its window is joined with
        ``None`` once its window and grace have closed (KIP-633).

        With a `GlobalKTable` ``other``, ``left_join(global_table, key_selector, joiner)``: a
        record without a table value for its selected key is joined with ``None``; as in Kafka
        Streams, a record with a key whose selected key is ``None`` is dropped (and counted),
        while a record with a ``None`` key is joined (with ``None`` when its selected key is
        ``None`` too)."""
        return self._stream_table_join(other, joiner, windows, stream_joined, name, "left", joined, key_selector)

    def outer_join(self, other: KStream, joiner: Callable[[Any, Any], Any] = REQUIRED, windows: Any = None, *,
                   stream_joined: Any = None, name: NameArg = None) -> KStream:
        """A windowed stream-stream join where records of either side without a match in their
        window are joined with ``None`` (``joiner(value, None)`` / ``joiner(None, other_value)``)
        once their window and grace have closed."""
        if isinstance(other, KTable):
            raise InvalidTypeError(
                "outer_join() joins two KStreams; a KStream cannot be outer-joined with a KTable. Use "
                "left_join(table, joiner) for a stream-table join, or pass a KStream and JoinWindows.")
        return self._stream_table_join(other, joiner, windows, stream_joined, name, "outer")

    def _stream_table_join(self, other: Any, joiner: Any, windows: Any, stream_joined: Any, name: NameArg,
                           kind: str, joined: Joined | None = None, key_selector: Any = None) -> KStream:
        method = {"inner": "join", "left": "left_join", "outer": "outer_join"}[kind]
        if joined is not None and not isinstance(joined, Joined):
            raise InvalidTypeError(f"'joined' must be a Joined such as Joined.with_grace_period(timedelta(seconds=5)) "
                                   f"(got {type(joined).__name__}: {joined!r}).")
        if isinstance(other, GlobalKTable) and kind != "outer":
            if joined is not None:
                raise InvalidArgumentError(
                    f"'joined' belongs to a stream-table join; a stream-global-table {method}() takes none.")
            return self._global_table_join(other, joiner, windows, stream_joined, name, kind, key_selector)
        if joined is not None and isinstance(other, KStream):
            raise InvalidArgumentError(
                f"'joined' belongs to a stream-table join; a stream-stream {method}() takes stream_joined="
                "StreamJoined... and windows=JoinWindows... instead.")
        if isinstance(other, KStream):
            if other._builder is not self._builder:
                raise TopologyError("'other' belongs to a different StreamsBuilder; join streams of one builder.")
            node = stream_stream_join_node(self._builder, self.node_name, other.node_name, joiner, windows,
                                           stream_joined, resolve_name(name), kind,
                                           (self.repartition_required, other.repartition_required))
            return KStream(self._builder, node.name)
        if not isinstance(other, KTable):
            kinds = "a KStream" if kind == "outer" else "a KTable or a KStream"
            raise InvalidTypeError(f"'other' must be {kinds} (got {type(other).__name__}: {other!r}).")
        require_arguments(method, f"{method}(table, lambda value, table_value: ...)",
                          ("joiner", joiner, joiner_shapes("table_value")[0]))
        if windows is not None or stream_joined is not None:
            raise InvalidArgumentError(
                f"'windows' and 'stream_joined' belong to a stream-stream join; a stream-table {method}() takes "
                "neither (got windows={windows!r}, stream_joined={stream_joined!r})."
            )
        if other._builder is not self._builder:
            raise TopologyError("'other' belongs to a different StreamsBuilder; join streams and tables of one builder.")
        if other.windows is not None:
            raise InvalidTypeError(f"{method}() with a windowed KTable is not supported: join with a KTable of plain keys.")
        fn = _user_fn(joiner, "joiner", joiner_shapes("table_value"))
        user_name = resolve_name(name, joined and joined.name)
        grace = joined and joined.grace_period_ms
        if grace is not None:
            _check_grace(self._builder, other.node_name, grace)
        stream = self.node_name
        if self.repartition_required:  # KStreamImpl.join(KTable): the topic is named after the join or the stream
            stream = repartition_for_join(self._builder, stream, user_name if user_name is not None else stream)
        node_name = self._name(user_name, "KSTREAM-JOIN-" if kind == "inner" else "KSTREAM-LEFTJOIN-")
        node = ir.StreamTableJoinNode(node_name, (stream, other.node_name), joiner=fn, kind=kind,
                                      table_stores=_getter_stores(self._builder, other.node_name), grace_ms=grace,
                                      buffer_store=None if grace is None else f"{node_name}-Buffer")
        self._add(node)
        return KStream(self._builder, node.name)

    def _global_table_join(self, other: GlobalKTable, joiner: Any, windows: Any, stream_joined: Any, name: NameArg,
                           kind: str, key_selector: Any) -> KStream:
        """``join(global_table, key_selector, joiner)``: positionally the key selector comes where
        a table join's joiner does, and the joiner where a stream join's windows do."""
        if key_selector is None:
            key_selector, joiner, windows = (None if joiner is REQUIRED else joiner), windows, None
        refuse_stream_options("join" if kind == "inner" else "left_join", windows, stream_joined)
        node = global_table_join_node(self._builder, self.node_name, other, key_selector,
                                      None if joiner is REQUIRED else joiner, name, kind)
        return KStream(self._builder, node.name, self.repartition_required)

    def split(self, named: NameArg = None) -> BranchedKStream:
        """Split the stream into branches: each record goes to the first branch whose predicate
        holds (`BranchedKStream.branch`), else to the default branch, if any.

        Examples
        --------
        >>> from streamsdsl import Branched, StreamsBuilder
        >>> b = StreamsBuilder()
        >>> branches = (b.stream("in").split(named="route-")
        ...             .branch(lambda k, v: v > 0, Branched.with_name("positive"))
        ...             .default_branch())
        >>> sorted(branches)
        ['route-0', 'route-positive']
        """
        splitter = self._builder._processor_name(resolve_name(named), "KSTREAM-BRANCH-")
        self._add(ir.BranchNode(splitter, (self.node_name,)))
        return BranchedKStream(self._builder, splitter, self.repartition_required)

    def process(self, supplier: Callable[[], Any] = REQUIRED, *store_names: str, named: NameArg = None) -> KStream:
        """Run a custom `Processor` on every record (Kafka Streams' ``KStream#process``).

        ``supplier()`` returns a new processor instance (pass the class, or a function making
        one): one instance per task, fed every record of the task in order, forwarding any number
        of records with ``context.forward``. ``store_names`` connect the stores added with
        `StreamsBuilder.add_state_store` (or provided by the supplier's ``stores()``) that the
        processor opens with ``context.get_state_store(name)``. Its keys may change, so a
        grouping or join after it repartitions.

        Examples
        --------
        >>> from streamsdsl import Serdes, StreamsBuilder, Stores
        >>> from streamsdsl.processor import Processor
        >>> class Dedup(Processor):
        ...     def init(self, context):
        ...         self.context, self.seen = context, context.get_state_store("seen")
        ...     def process(self, record):
        ...         if self.seen.put_if_absent(record.value, record.timestamp) is None:
        ...             self.context.forward(record)
        >>> b = StreamsBuilder()
        >>> seen = Stores.persistent_key_value_store("seen")
        >>> _ = b.add_state_store(Stores.key_value_store_builder(seen, Serdes.String(), Serdes.Long()))
        >>> b.stream("in").process(Dedup, "seen", named="dedup").to("out")
        >>> print(b.build().describe().splitlines()[4])
            Processor: dedup (stores: [seen])
        """
        return self._process(supplier, store_names, named, fixed_key=False)

    def process_values(self, supplier: Callable[[], Any] = REQUIRED, *store_names: str,
                       named: NameArg = None) -> KStream:
        """Like `process`, with a `FixedKeyProcessor` (Kafka's ``KStream#processValues``): it
        forwards records with the key it received (`FixedKeyRecord` has no ``with_key``), so no
        repartition follows it."""
        return self._process(supplier, store_names, named, fixed_key=True)

    def _process(self, supplier: Any, store_names: tuple[str, ...], named: NameArg, *, fixed_key: bool) -> KStream:
        method = "process_values" if fixed_key else "process"
        require_arguments(method, f"{method}(MyProcessor, 'store-name')", ("supplier", supplier, "() -> Processor"))
        fn = _user_fn(supplier, "supplier", "() -> Processor")
        names = tuple(validate_name(n, "store_names") for n in store_names)
        provided = self._builder._supplier_stores(supplier)
        names += tuple(n for n in provided if n not in names)
        user_name = resolve_name(named)
        prefix = "KSTREAM-PROCESSVALUES-" if fixed_key else "KSTREAM-PROCESSOR-"
        node_name = user_name if user_name is not None else self._builder._new_name(prefix)
        node = ir.ProcessNode(node_name, (self.node_name,), supplier=fn, store_names=names, fixed_key=fixed_key)
        return self._child(node, key_changed=not fixed_key)

    def to(self, topic: str, produced: Produced | None = None, *, name: NameArg = None) -> None:
        """Write the stream to ``topic``, serialized with ``produced`` (JSON by default)."""
        validate_topic(topic)
        produced = check_option(produced, Produced, "produced")
        node_name = self._builder._processor_name(resolve_name(name, produced and produced.name), "KSTREAM-SINK-")
        self._add(
            ir.SinkNode(
                node_name,
                (self.node_name,),
                topic=topic,
                key_serde=produced.key_serde if produced else None,
                value_serde=produced.value_serde if produced else None,
            )
        )

    def group_by_key(self, grouped: Grouped | None = None) -> KGroupedStream:
        """Group records by their current key (repartitioned first if a key-changing step came before)."""
        grouped = check_option(grouped, Grouped, "grouped")
        return KGroupedStream(self._builder, self.node_name, self.repartition_required, grouped or Grouped())

    def group_by(self, key_selector: Callable[[Any, Any], Any] | Any, grouped: Grouped | None = None) -> KGroupedStream:
        """Group records by ``key_selector(key, value)`` (or a Column): a key change plus a repartition."""
        grouped = check_option(grouped, Grouped, "grouped")
        fn = _fn(key_selector, "key_selector", "(key, value) -> key", column_ok=True)
        grouped = grouped or Grouped()
        node_name = self._builder._processor_name(grouped.name, "KSTREAM-KEY-SELECT-")
        node = ir.SelectKeyNode(node_name, (self.node_name,), selector=fn)
        self._add(node)
        return KGroupedStream(self._builder, node.name, True, grouped)


def _chain_field() -> Any:
    return attrs.field(default=None, eq=False, kw_only=True)


@attrs.frozen
class Branched:
    """How a branch of `KStream.split` is named (`with_name`, else by its index) and what is done
    with it: `with_function` applies a chain to the branch and puts its result in the map the
    split returns (none when it returns ``None``); `with_consumer` hands the branch to a chain and
    leaves it out of the map (Kafka Streams' ``Branched``)."""

    name: str | None = attrs.field(default=None)
    function: Callable[[KStream], KStream | None] | None = _chain_field()
    consumer: Callable[[KStream], None] | None = _chain_field()

    @classmethod
    def with_name(cls, name: str) -> Branched:
        """The branch is named ``<split prefix><name>``."""
        return cls(validate_name(name, "name"))

    @classmethod
    def as_(cls, name: str) -> Branched:
        """Alias of `with_name` (Kafka Streams' ``Branched.as``)."""
        return cls.with_name(name)

    @classmethod
    def with_function(cls, chain: Callable[[KStream], KStream | None], name: str | None = None) -> Branched:
        """Apply ``chain(branch)`` when the branch is added; the `KStream` it returns is the
        branch's entry in the map of `BranchedKStream.default_branch` / ``no_default_branch``,
        and the branch has no entry when it returns ``None``.

        Examples
        --------
        >>> from streamsdsl import StreamsBuilder
        >>> b = StreamsBuilder()
        >>> branches = (b.stream("in").split(named="s-")
        ...             .branch(lambda k, v: v > 0, Branched.with_function(lambda s: s.map_values(abs), "pos"))
        ...             .branch(lambda k, v: v < 0, Branched.with_function(lambda s: None))
        ...             .no_default_branch())
        >>> {name: stream.node_name for name, stream in branches.items()}
        {'s-pos': 'KSTREAM-MAPVALUES-0000000003'}
        """
        require_callable(chain, "chain", "(branch) -> KStream or None", check_arity=True)
        return cls(None if name is None else validate_name(name, "name"), function=chain)

    @classmethod
    def with_consumer(cls, chain: Callable[[KStream], None], name: str | None = None) -> Branched:
        """Hand the branch to ``chain(branch)`` when it is added (e.g. ``lambda s: s.to("big")``);
        the branch has no entry in the map the split returns."""
        require_callable(chain, "chain", "(branch) -> None", check_arity=True)
        return cls(None if name is None else validate_name(name, "name"), consumer=chain)


@attrs.frozen
class BranchedKStream(_Hinted):
    """The branches of `KStream.split` so far (Kafka Streams' ``BranchedKStream``); the stage is
    immutable (`branch` returns a new one) and each branch is added to the topology when it is
    written, as Kafka Streams does, so a split needs no end to run. End with `default_branch` or
    `no_default_branch`, which return the branches by name: ``<prefix><branch name>``, or
    ``<prefix><index>`` for an unnamed branch (1, 2, … in order; 0 for the default branch), where
    the prefix is the ``named`` given to ``split`` or else the generated ``KSTREAM-BRANCH-<n>``;
    a branch given to `Branched.with_consumer`, or whose `Branched.with_function` returned
    ``None``, has no entry, and one whose function returned a stream maps to that stream."""

    _builder: StreamsBuilder = attrs.field(alias="builder", eq=False, repr=False)
    splitter: str
    repartition_required: bool
    predicates: tuple[ir.UserFn, ...] = ()
    names: tuple[str, ...] = ()
    outputs: tuple[tuple[str, KStream], ...] = attrs.field(default=(), eq=False, repr=False)

    def branch(self, predicate: Callable[[Any, Any], bool] = REQUIRED, branched: Branched | None = None) -> BranchedKStream:
        """Add a branch taking the records, not taken by an earlier branch, for which
        ``predicate(key, value)`` is true."""
        require_arguments("branch", "branch(lambda key, value: value > 0)", ("predicate", predicate, "(key, value) -> bool"))
        branched = check_option(branched, Branched, "branched") or Branched()
        fn = _user_fn(predicate, "predicate", "(key, value) -> bool")
        predicates = (*self.predicates, fn)
        return self._add_branch(branched, len(predicates), predicates, default=False)

    def _add_branch(self, branched: Branched, index: int, predicates: tuple[ir.UserFn, ...], *,
                    default: bool) -> BranchedKStream:
        """Kafka Streams' ``createBranch``: the child node (an index burnt), then the chain."""
        name = validate_name(f"{self.splitter}{branched.name if branched.name is not None else index}", "name")
        if name in self.names:
            raise TopologyError(f"Two branches of {self.splitter} are named {name!r}; give each its own name.")
        self._builder._new_name(name)  # Kafka Streams burns an index per branch
        self._builder._add(ir.BranchChildNode(name, (self.splitter,), predicates=predicates, default=default))
        stream = KStream(self._builder, name, self.repartition_required)
        output: KStream | None = stream
        if branched.function is not None:
            output = branched.function(stream)
            if output is not None and not isinstance(output, KStream):
                raise InvalidTypeError(
                    f"The chain of Branched.with_function for branch {name!r} must return a KStream or None "
                    f"(got {type(output).__name__}: {output!r}).")
        elif branched.consumer is not None:
            branched.consumer(stream)
            output = None
        outputs = self.outputs if output is None else (*self.outputs, (name, output))
        return attrs.evolve(self, predicates=predicates, names=(*self.names, name), outputs=outputs)

    def default_branch(self, branched: Branched | None = None) -> dict[str, KStream]:
        """End the split with a branch for the records no predicate matched; the branches by name."""
        branched = check_option(branched, Branched, "branched") or Branched()
        return dict(self._add_branch(branched, 0, self.predicates, default=True).outputs)

    def no_default_branch(self) -> dict[str, KStream]:
        """End the split; records no predicate matched are dropped. The branches by name."""
        return dict(self.outputs)
