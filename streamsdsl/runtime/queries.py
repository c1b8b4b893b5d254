"""Interactive queries (Kafka Streams' ``KafkaStreams#store``): read-only views of a running
application's named stores, over the state of its last committed micro-batch.

A query reads the application's checkpoint with Spark's state data source (``statestore``,
``state-metadata``): each streamsdsl operator names its state variable after the store it
holds (an aggregation's, a materialized table's, a processor's), so a store is found by name,
on the Python and on the JVM operator alike, and decoded with the encodings the compiled plan
gives its node. Each answer is the state as of the latest micro-batch committed when it is
asked: a view reads the store again once a newer batch committed, and answers from the rows it
read last while none did (`StoreReader`: one per running application).

Kafka Streams answers from the local RocksDB instance of the store, at once; here every call is
a small Spark batch job over the checkpoint (its latency is in ``docs/performance.md``).
"""

from __future__ import annotations

import json
import pickle
import struct
from typing import TYPE_CHECKING, Any, Callable

import attrs

from streamsdsl import ir
from streamsdsl._validation import validate_name
from streamsdsl.errors import InvalidTypeError, StreamsDslError
from streamsdsl.operators.functions import joiner_of
from streamsdsl.records import GENERATED_STORE_NAME
from streamsdsl.semantics.table_table import TableJoinState, join_store_entry
from streamsdsl.semantics.tables import TableValue
from streamsdsl.runtime.checkpoint import last_commit
from streamsdsl.runtime.stores import ReadOnlyKeyValueStore, ReadOnlySessionStore, ReadOnlyWindowStore, StoreEntry
from streamsdsl.state import MemoryBackend, open_store

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from streamsdsl.compiler.plan import CompiledTopology

__all__ = ["InvalidStateStoreError", "QueryableStoreType", "QueryableStoreTypes", "StoreQueryParameters",
           "StoreReader"]



class InvalidStateStoreError(StreamsDslError, RuntimeError):
    """A store cannot be queried (Kafka's ``InvalidStateStoreException``): not a store of the
    topology, not queryable, of another type, or the application is not running yet."""


@attrs.frozen
class QueryableStoreType:
    """What kind of store a query expects (Kafka's ``QueryableStoreType``): ``kind`` is
    ``"key-value"``, ``"window"`` or ``"session"``; ``timestamped``: values are `ValueAndTimestamp`."""

    kind: str
    timestamped: bool = False


class QueryableStoreTypes:
    """The store types a query can ask for (Kafka's ``QueryableStoreTypes``)."""

    @staticmethod
    def key_value_store() -> QueryableStoreType:
        """A key-value store: ``get``, ``range``, ``all``, ``approximate_num_entries``."""
        return QueryableStoreType("key-value")

    @staticmethod
    def timestamped_key_value_store() -> QueryableStoreType:
        """A key-value store whose values are `ValueAndTimestamp`."""
        return QueryableStoreType("key-value", True)

    @staticmethod
    def window_store() -> QueryableStoreType:
        """A window store: ``fetch``, ``fetch_all``, ``backward_fetch``, ``all``."""
        return QueryableStoreType("window")

    @staticmethod
    def timestamped_window_store() -> QueryableStoreType:
        """A window store whose values are `ValueAndTimestamp`."""
        return QueryableStoreType("window", True)

    @staticmethod
    def session_store() -> QueryableStoreType:
        """A session store: ``fetch``, ``find_sessions``, ``fetch_session``."""
        return QueryableStoreType("session")


@attrs.frozen
class StoreQueryParameters:
    """Which store a query reads (Kafka's ``StoreQueryParameters``):
    ``StoreQueryParameters.from_name_and_type("counts", QueryableStoreTypes.key_value_store())``.

    ``with_partition`` and ``enable_stale_stores`` are accepted: a query here always reads every
    partition of the last committed micro-batch (there are no standby replicas to choose from)."""

    store_name: str = attrs.field(converter=lambda n: validate_name(n, "store_name"))
    queryable_store_type: QueryableStoreType = attrs.field()
    partition: int | None = None
    stale_stores: bool = False

    @queryable_store_type.validator
    def _check_type(self, attribute: Any, value: Any) -> None:
        if not isinstance(value, QueryableStoreType):
            raise InvalidTypeError(
                f"'queryable_store_type' must come from QueryableStoreTypes (e.g. QueryableStoreTypes.key_value_store()); "
                f"got {type(value).__name__}: {value!r}.")

    @classmethod
    def from_name_and_type(cls, store_name: str, queryable_store_type: QueryableStoreType) -> StoreQueryParameters:
        return cls(store_name, queryable_store_type)

    def with_partition(self, partition: int) -> StoreQueryParameters:
        return attrs.evolve(self, partition=partition)

    def enable_stale_stores(self) -> StoreQueryParameters:
        return attrs.evolve(self, stale_stores=True)


def _kind_of(topology: Any, name: str) -> tuple[str, ir.Node | None]:
    """A store's kind and the node that holds it (None: a processor's store)."""
    builder = topology.state_store(name)
    if builder is not None:
        return ("key-value" if builder.kind == "timestamped-key-value" else builder.kind), None
    holders = [n for n in topology.nodes if name in n.stores]
    if not holders:
        raise InvalidStateStoreError(
            f"Cannot get state store {name!r}: the topology has no such store; its stores are "
            f"{list(topology.store_names)}.")
    node = holders[0]
    windows = getattr(node, "windows", None)
    kind = "key-value" if windows is None else "session" if type(windows).__name__ == "SessionWindows" else "window"
    return kind, node


class StoreReader:
    """Reads a running application's stores from its checkpoint (see the module docs)."""

    def __init__(self, spark: SparkSession, checkpoint: str, compiled: CompiledTopology,
                 committed: Callable[[str], int | None] = last_commit) -> None:
        self.spark, self.checkpoint, self.compiled = spark, checkpoint, compiled
        #: The id of the last micro-batch committed into a checkpoint (None: unknown).
        self._committed = committed
        #: The operator id of each store found so far (the ids of a query's plan do not change).
        self._operators: dict[str, int] = {}
        #: Each store's rows as last read, with the committed batch's id before that read: while no
        #: newer batch committed, a read answers from them (they are that batch's state or newer).
        self._read: dict[str, tuple[int, list[Any]]] = {}

    def view(self, params: StoreQueryParameters) -> Any:
        """The read-only view ``params`` asks for (refused with the reason and the fix)."""
        topology = self.compiled.topology
        name, wanted = params.store_name, params.queryable_store_type
        kind, node = _kind_of(topology, name)
        if wanted.kind != kind:
            fix = {"key-value": "key_value_store()", "window": "window_store()", "session": "session_store()"}[kind]
            raise InvalidStateStoreError(
                f"Cannot get state store {name!r}: it is a {kind} store, not a {wanted.kind} store; ask for "
                f"QueryableStoreTypes.{fix}.")
        if node is None:
            return _ReadOnly(lambda: self._processor_store(name))
        if GENERATED_STORE_NAME.search(name):
            raise InvalidStateStoreError(
                f"Cannot get state store {name!r}: its name was generated (the store of {node.name}), and only "
                "named stores are queryable. Name it: materialized=Materialized.as_('my-store').")
        choice = self.compiled.operators.get(node.name)
        if choice is not None and choice.backend.value == "native":
            raise InvalidStateStoreError(
                f"Cannot get state store {name!r}: {node.name} runs on Spark's native aggregation, whose state is "
                "not a store; run it on streamsdsl's operator to query it (streamsdsl.operator = python or jvm).")
        if not isinstance(node, (ir.AggregateNode, ir.CogroupAggregateNode, ir.GroupedTableAggregateNode,
                                 ir.TableSourceNode, ir.StreamToTableNode, ir.TableTableJoinNode,
                                 ir.ForeignKeyJoinNode, ir.GlobalTableSourceNode)):
            raise InvalidStateStoreError(
                f"Cannot get state store {name!r}: the store of {node.name} ({type(node).__name__}) is not queryable "
                "(nor is it in Kafka Streams); aggregations', tables' and processors' stores are.")
        reader = lambda: self._dsl_entries(name, node)  # noqa: E731 - read again on every call
        view = {"key-value": ReadOnlyKeyValueStore, "window": ReadOnlyWindowStore, "session": ReadOnlySessionStore}[kind]
        return view(name, reader) if kind == "session" else view(name, reader, timestamped=wanted.timestamped)

    # -- the state data source ---------------------------------------------------------------------
    def _operator(self, name: str) -> int | None:
        """The id of the operator whose state variable is ``name`` (None: no batch has committed it)."""
        for row in self.spark.read.format("state-metadata").load(self.checkpoint).collect():
            props = json.loads(row.operatorProperties or "{}")
            if any(v.get("stateName") == name for v in props.get("stateVariables", ())):
                return int(row.operatorId)
        return None

    def _rows(self, name: str) -> list[Any]:
        batch = self._committed(self.checkpoint)
        last = self._read.get(name)
        if batch is not None and last is not None and last[0] == batch:
            return last[1]
        operator = self._operators.get(name)
        if operator is None:
            operator = self._operator(name)
            if operator is None:
                return []
            self._operators[name] = operator
        rows = (self.spark.read.format("statestore").option("path", self.checkpoint)
                .option("operatorId", operator).option("stateVarName", name).load().collect())
        if batch is not None:
            self._read[name] = (batch, rows)
        return rows

    def _dsl_entries(self, name: str, node: ir.Node) -> list[StoreEntry]:
        frame = self.compiled.frames[node.name]
        key_serde, value_serde = frame.key.serde, frame.value
        out: list[StoreEntry] = []
        jvm = (choice := self.compiled.operators.get(node.name)) is not None and choice.backend.value == "jvm"
        for row in self._rows(name):
            key = key_serde.from_internal(row.key[0])
            cell = row.value[0]
            if isinstance(node, ir.ForeignKeyJoinNode):  # the resolve stage's row: (left, ts, result, result ts)
                if row.value[3] is not None:
                    out.append(StoreEntry(key, 0, 0, value_serde.from_internal(row.value[2]), row.value[3]))
            elif isinstance(node, ir.TableTableJoinNode):
                joined = self._joined(node, key, row.value)
                if joined is not None:
                    out.append(StoreEntry(key, 0, 0, joined[0], joined[1]))
            elif getattr(node, "history_retention_ms", None) is not None:  # a versioned table: its latest version
                versions = cell or []
                if versions and versions[-1][1] is not None:
                    out.append(StoreEntry(key, 0, 0, value_serde.from_internal(versions[-1][1]), versions[-1][0]))
            elif isinstance(node, (ir.TableSourceNode, ir.StreamToTableNode, ir.GroupedTableAggregateNode,
                                   ir.GlobalTableSourceNode)):  # a global table: held by its joins' operators
                out.append(StoreEntry(key, 0, 0, value_serde.from_internal(cell), row.value[1]))
            elif jvm:
                out.extend(StoreEntry(key, s, e, v, ts) for s, e, v, ts in _jvm_windows(cell, value_serde.spark_type))
            else:
                out.extend(StoreEntry(key, s, e, value_serde.from_internal(agg), ts)
                           for s, e, agg, ts, _ in pickle.loads(cell))
        return out

    def _joined(self, node: ir.TableTableJoinNode, key: Any, cells: Any) -> tuple[Any, int] | None:
        """A materialized table–table join's entry from its state row (both sides' values and
        timestamps, whether the result store holds the key): `join_store_entry`."""
        left, right = (self.compiled.frames[p].value for p in node.parents)
        lv, lts, rv, rts, has_result = cells
        state = TableJoinState(None if lts is None else TableValue(left.from_internal(lv), lts),
                               None if rts is None else TableValue(right.from_internal(rv), rts), bool(has_result))
        return join_store_entry(state, joiner_of(node.joiner), key)

    def _processor_store(self, name: str) -> Any:
        backend = MemoryBackend()
        for row in self._rows(name):
            backend.put(bytes(row.user_map_key[0]), bytes(row.user_map_value[0]))
        builder = self.compiled.topology.state_store(name)
        return open_store(builder, backend)


def _jvm_windows(data: bytes, value_type: str) -> list[tuple[int, int, Any, int]]:
    """The JVM operator's stored windows (``AggregateProcessor.save``: a layout version, the
    timer, the count, then per window start, end, timestamp, flags and the aggregate's long bits)."""
    version, _, n = struct.unpack_from(">bqi", data, 0)
    if version != 1:
        raise InvalidStateStoreError(f"The JVM operator's state has layout version {version}; this version reads 1.")
    at, out = 13, []
    for _ in range(n):
        start, end, ts, flags = struct.unpack_from(">qqqb", data, at)
        at += 25
        agg = None
        if not flags & 2:
            (bits,) = struct.unpack_from(">q", data, at)
            at += 8
            agg = struct.unpack(">d", struct.pack(">q", bits))[0] if value_type == "double" else bits
        out.append((start, end, agg, ts))
    return out


class _ReadOnly:
    """A processor's store, read-only: its read methods, each reading the state again."""

    _READS = frozenset({"get", "range", "reverse_range", "all", "reverse_all", "prefix_scan", "approximate_num_entries",
                        "fetch", "backward_fetch", "fetch_all", "backward_fetch_all", "backward_all",
                        "find_sessions", "backward_find_sessions", "fetch_session", "name", "persistent"})

    def __init__(self, open_: Callable[[], Any]) -> None:
        self._open = open_

    def __getattr__(self, attr: str) -> Any:
        if attr not in self._READS:
            raise AttributeError(f"{attr!r}: a store from KafkaStreams.store() is read-only (Kafka's "
                                 "ReadOnly*Store); write it from its processor.")
        return getattr(self._open(), attr)


def store_view(reader: StoreReader, params: Any) -> Any:
    """``KafkaStreams.store``: check ``params`` and return the view ``reader`` reads."""
    if not isinstance(params, StoreQueryParameters):
        raise InvalidTypeError(
            "KafkaStreams.store() takes StoreQueryParameters.from_name_and_type(name, QueryableStoreTypes."
            f"key_value_store()) (got {type(params).__name__}: {params!r}).")
    return reader.view(params)
