"""The direct engine's steps: one per IR node, each processing one record at a time and
forwarding what it produces to its children at once (depth first), as a Kafka Streams task runs
its processors. This module holds the base, the sources and sinks and the stateless steps;
`streamsdsl.direct.stateful` the stateful ones.

Every step mirrors the lowering rule of its node (`streamsdsl.compiler.lowering`): the same
functions called with the same arguments, the same encodings (`Typed`, `hold`), the same
drops and errors, so that the engines agree record for record.
"""

from __future__ import annotations

import logging
from typing import Any, Callable

import attrs

from streamsdsl import ir
from streamsdsl.operators.codecs import KeyCodec
from streamsdsl.records import DLQ_EXCEPTION, DLQ_HEADERS, DROP_REASONS
from streamsdsl.direct.records import Host, Record, Typed, call_user, hold, invalid_reason, result_error
from streamsdsl.dsl.options import DeserializationHandler
from streamsdsl.values.serdes import DEFAULT_SERDE, PlanSerde
from streamsdsl.values.windows import Windowed
from streamsdsl.errors import OperationNotDefinedError, RecordDeserializationError
from streamsdsl.operators.descriptions import merged_encoding, selected_key
from streamsdsl.operators.descriptions import regrouped as encodings_regrouped
from streamsdsl.operators.functions import first_match, mapper_pair, null_keys_pass, sink_write_error, value_mapper
from streamsdsl.errors import DESERIALIZATION_HINT, with_json_position


__all__ = ["MapStep", "SinkStep", "SourceStep", "Step", "TableStep", "regrouped"]

log = logging.getLogger("streamsdsl")


class Step:
    """A node's processor in the direct engine.

    ``children``: (step, port) pairs fed with this step's records (port: which parent the child
    receives on); ``record_children``: the table joins fed with a table's records before its
    store (what the Spark plan's joins read: `streamsdsl.compiler.frame.Frame.table_records`),
    only on steps that keep such a channel (`keeps_records`)."""

    #: Whether this step forwards a table's records besides its changelog.
    keeps_records: bool = False

    def __init__(self, node: ir.Node, typed: Typed, run: Host) -> None:
        self.node = node
        self.name = node.name
        self.typed = typed
        self.run = run
        self.children: list[tuple[Step, int]] = []
        self.record_children: list[tuple[Step, int]] = []

    def receive(self, rec: Record, port: int, records: bool = False) -> None:
        """One record from the parent on ``port`` (``records``: on the table-records channel)."""
        raise NotImplementedError

    def forward(self, rec: Record) -> None:
        for step, port in self.children:
            step.receive(rec, port)

    def forward_records(self, rec: Record) -> None:
        for step, port in self.record_children:
            step.receive(rec, port, True)

    def drop(self, part: str, rec: Record | None = None, count: int = 1, detail: str | None = None,
             processor: str | None = None) -> None:
        """Count (and log, as the Spark runners do) ``count`` records this step drops (``processor``:
        the processor that logs it, when not the step's node)."""
        run = self.run
        run.dropped += count
        reason = DROP_REASONS.get(part, "Skipping record")
        topic, partition, offset = run.coordinates
        more = f" reason=[{detail}]" if detail else ""
        ts = rec.timestamp if rec is not None else run.timestamp
        log.warning("%s: %s. topic=[%s] partition=[%s] offset=[%s] timestamp=[%s]%s", processor or self.name, reason,
                    topic, partition, offset, ts, more)

    def store_entries(self) -> list[tuple[Any, int, int, Any, int]]:
        """What the step's store holds: (key, start, end, value, timestamp) per entry (a step
        without a store: none)."""
        return []

    # -- state that a failed record rolls back (stateful steps override) --------------------------
    def begin(self) -> None:
        """A record starts: remember what `rollback` restores."""

    def rollback(self) -> None:
        """The record failed: forget what it did to the state."""

    def commit(self) -> None:
        """The input record is done: forward what the step's record cache holds (Kafka's commit)."""


def _refuse_column(node: ir.Node, fn: Any) -> None:
    if isinstance(fn, ir.ColumnFn):
        raise OperationNotDefinedError(
            f"{node.name}: a pyspark Column expression ({fn!r}) needs Spark to evaluate it, and the test driver's "
            "direct engine runs without Spark. Run this topology with TopologyTestDriver(..., engine=\"spark\") "
            "(or STREAMSDSL_TEST_ENGINE=spark), or pass a Python function instead of the Column.")


# --- sources and sinks --------------------------------------------------------------------------------


class SourceStep(Step):
    """Deserializes a source record with the topic's serdes; a record they cannot read fails
    (``log_and_fail``) or is counted, logged and sent to the dead-letter output (``log_and_continue``)."""

    def __init__(self, node: ir.SourceNode, typed: Typed, run: Host) -> None:
        super().__init__(node, typed, run)
        self.key_serde: PlanSerde = node.key_serde or DEFAULT_SERDE
        self.value_serde: PlanSerde = node.value_serde or DEFAULT_SERDE

    def read(self, key: bytes | None, value: bytes | None, ts: int, headers: Any) -> Record | None:
        run = self.run
        for what, serde, data in (("key", self.key_serde, key), ("value", self.value_serde, value)):
            reason = None if data is None else invalid_reason(serde, data)
            if reason is None:
                continue
            message = f"{serde!r} cannot deserialize the record {what}: {reason}"
            if run.handler is DeserializationHandler.LOG_AND_CONTINUE:
                self.drop("deserialize", Record(None, None, ts), detail=message)
                topic, partition, offset = run.coordinates
                error_headers = tuple((n, str(v).encode("utf-8")) for n, v in zip(
                    DLQ_HEADERS, (DLQ_EXCEPTION, message, topic, partition, offset)))
                run.dead_letter(key, value, ts, (*headers, *error_headers))
                return None
            key_text = None
            if what == "value" and key is not None:
                key_text = repr(self.key_serde.deserialize(key))
            raise RecordDeserializationError(self.name, with_json_position(message, data) + DESERIALIZATION_HINT,
                                             key=key_text, position=run.position)
        return Record(self.key_serde.deserialize(key), self.value_serde.deserialize(value), ts, headers)

    def receive(self, rec: Record, port: int, records: bool = False) -> None:
        self.forward(rec)


class SinkStep(Step):
    """Serializes a record with the sink's serdes (windowed keys in Kafka Streams' wire layout)."""

    def __init__(self, node: ir.SinkNode, typed: Typed, run: Host, index: int) -> None:
        super().__init__(node, typed, run)
        self.index = index
        self.key_serde: PlanSerde = node.key_serde or typed.key.serde
        self.value_serde: PlanSerde = node.value_serde or typed.value
        self.topic = node.topic

    def key_reader(self) -> Any:
        """What a consumer of the sink's topic needs to read its keys."""
        return self.typed.key.with_serde(self.key_serde).reader()

    def _bytes(self, serde: PlanSerde, value: Any, what: str, rec: Record) -> bytes | None:
        try:
            return serde.serialize(value)
        except Exception as exc:  # noqa: BLE001 - re-raised with the sink and the record
            raise sink_write_error(self.name, what, exc, repr(_plain_key(rec.key)), self.run.position) from exc

    def receive(self, rec: Record, port: int, records: bool = False) -> None:
        key = rec.key
        if isinstance(key, Windowed):
            inner = self._bytes(self.key_serde, key.key, "key", rec) or b""
            key_bytes = inner + self.key_reader()._pack_window(key.window)
        else:
            key_bytes = self._bytes(self.key_serde, key, "key", rec)
        value = None if rec.value is None else self._bytes(self.value_serde, rec.value, "value", rec)
        self.run.emit(self.topic, key_bytes, value, rec.timestamp, rec.headers)


def _plain_key(key: Any) -> Any:
    """A key as an error message shows it (a windowed key as the struct the plan holds)."""
    if isinstance(key, Windowed):
        return {"key": key.key, "start": key.window.start, "end": key.window.end}
    return key


# --- stateless steps ----------------------------------------------------------------------------------


class MapStep(Step):
    """A stateless Python step ``fn(key, value) -> [(key, value), ...]`` (`apply_python`): its
    results held in the step's encodings."""

    def __init__(self, node: ir.Node, typed: Typed, run: Host, fn: Callable[[Any, Any], Any], function: str,
                 change_key: bool, change_value: bool) -> None:
        super().__init__(node, typed, run)
        self.fn, self.function = fn, function
        self.change_key, self.change_value = change_key, change_value

    def receive(self, rec: Record, port: int, records: bool = False) -> None:
        results = call_user(self.name, self.function, rec.key, self.run.position, self.fn, rec.key, rec.value)
        key_codec, value_serde = self.typed.key, self.typed.value
        for nk, nv in results:
            try:
                if self.change_key:
                    nk = key_codec.from_cell(key_codec.to_cell(nk))
                if self.change_value:
                    nv = hold(value_serde, nv)
            except Exception as exc:  # noqa: BLE001 - a result its serde cannot hold
                raise result_error(self.name, self.function, exc, rec.key, self.run.position) from exc
            out = rec if nk is rec.key and nv is rec.value else Record(nk, nv, rec.timestamp, rec.headers)
            if records:
                if out is not rec:  # a table step: whether the source's value was a tombstone goes along
                    out = attrs.evolve(out, tombstone=rec.value is None if rec.tombstone is None else rec.tombstone)
                self.forward_records(out)
            else:
                self.forward(out)


class PassStep(Step):
    """Forwards every record unchanged (a sink's parent side, a split's node, to_stream)."""

    def receive(self, rec: Record, port: int, records: bool = False) -> None:
        self.forward(rec)


class ConvertStep(Step):
    """Re-encodes key and value where the plan converts them (a merge of differently held
    streams, ``Grouped.with_serdes``), then forwards (``drop_null_keys``: a repartition's filter)."""

    def __init__(self, node: ir.Node, typed: Typed, run: Host, sources: list[Typed], drop_null_keys: bool = False) -> None:
        super().__init__(node, typed, run)
        self.sources = sources
        self.drop_null_keys = drop_null_keys

    def receive(self, rec: Record, port: int, records: bool = False) -> None:
        source = self.sources[port]
        key, value = rec.key, rec.value
        if source.key != self.typed.key and not self.typed.key.windowed:
            key = hold(self.typed.key.serde, key)
        if source.value != self.typed.value:
            value = hold(self.typed.value, value)
        if self.drop_null_keys and key is None:
            self.drop("input", rec)
            return
        self.forward(rec if key is rec.key and value is rec.value else Record(key, value, rec.timestamp, rec.headers))


def _python_filter(predicate: Callable[[Any, Any], Any], negate: bool) -> Callable[[Any, Any], list[tuple[Any, Any]]]:
    def step(k: Any, v: Any) -> list[tuple[Any, Any]]:
        return [(k, v)] if bool(predicate(k, v)) != negate else []

    return step


_JSON_KEY = KeyCodec(DEFAULT_SERDE)


def _filter(node: ir.FilterNode, parents: list[Typed], run: Host) -> Step:
    _refuse_column(node, node.predicate)
    return MapStep(node, parents[0], run, _python_filter(node.predicate.fn, node.negate), "predicate", False, False)


def _map_values(node: ir.MapValuesNode, parents: list[Typed], run: Host) -> Step:
    _refuse_column(node, node.mapper)
    mapper = value_mapper(node.mapper)
    return MapStep(node, Typed(parents[0].key, DEFAULT_SERDE), run, lambda k, v: [(k, mapper(k, v))], "mapper",
                   False, True)


def _map(node: ir.MapNode, parents: list[Typed], run: Host) -> Step:
    fn = node.mapper.fn
    return MapStep(node, Typed(_JSON_KEY, DEFAULT_SERDE), run, lambda k, v: [mapper_pair(fn(k, v), node.name)], "mapper",
                   True, True)


def _flat_map(node: ir.FlatMapNode, parents: list[Typed], run: Host) -> Step:
    fn = node.mapper.fn
    return MapStep(node, Typed(_JSON_KEY, DEFAULT_SERDE), run,
                   lambda k, v: [mapper_pair(p, node.name) for p in (fn(k, v) or ())], "mapper", True, True)


def _flat_map_values(node: ir.FlatMapValuesNode, parents: list[Typed], run: Host) -> Step:
    fn = value_mapper(node.mapper)
    return MapStep(node, Typed(parents[0].key, DEFAULT_SERDE), run, lambda k, v: [(k, x) for x in (fn(k, v) or ())],
                   "mapper", False, True)


def _select_key(node: ir.SelectKeyNode, parents: list[Typed], run: Host) -> Step:
    _refuse_column(node, node.selector)
    fn = node.selector.fn
    return MapStep(node, Typed(selected_key(node, run.topology), parents[0].value), run, lambda k, v: [(fn(k, v), v)],
                   "key selector", True, False)


def _peek(node: ir.PeekNode, parents: list[Typed], run: Host) -> Step:
    action = node.action.fn

    def peek(k: Any, v: Any) -> list[tuple[Any, Any]]:
        action(k, v)
        return [(k, v)]

    return MapStep(node, parents[0], run, peek, "action", False, False)


def _foreach(node: ir.ForeachNode, parents: list[Typed], run: Host) -> Step:
    action = node.action.fn

    def foreach(k: Any, v: Any) -> list[tuple[Any, Any]]:
        action(k, v)
        return []

    return MapStep(node, parents[0], run, foreach, "action", False, False)


def _merge(node: ir.MergeNode, parents: list[Typed], run: Host) -> Step:
    merged = merged_encoding(node, *parents)
    return ConvertStep(node, Typed(merged.key, merged.value), run, parents)


def _repartition(node: ir.RepartitionNode, parents: list[Typed], run: Host) -> Step:
    return ConvertStep(node, regrouped(parents[0], node.key_serde, node.value_serde), run, [parents[0]],
                       drop_null_keys=not null_keys_pass(run.topology, node.name))


def _pass(node: ir.BranchNode, parents: list[Typed], run: Host) -> Step:
    return PassStep(node, parents[0], run)


def _table_to_stream(node: ir.TableToStreamNode, parents: list[Typed], run: Host) -> Step:
    return PassStep(node, Typed(parents[0].key, parents[0].value, False), run)


def _branch_child(node: ir.BranchChildNode, parents: list[Typed], run: Host) -> Step:
    keep = first_match(tuple(p.fn for p in node.predicates), node.default)
    return MapStep(node, parents[0], run, _python_filter(keep, False), "predicate", False, False)


def _table_filter(node: ir.TableFilterNode, parents: list[Typed], run: Host) -> Step:
    _refuse_column(node, node.predicate)
    pred, negate = node.predicate.fn, node.negate

    def table_filter(k: Any, v: Any) -> list[tuple[Any, Any]]:
        return [(k, None if v is None or bool(pred(k, v)) == negate else v)]

    return TableStep(node, parents[0], run, table_filter, "predicate", False)


def _table_map_values(node: ir.TableMapValuesNode, parents: list[Typed], run: Host) -> Step:
    _refuse_column(node, node.mapper)
    fn = value_mapper(node.mapper)
    return TableStep(node, Typed(parents[0].key, DEFAULT_SERDE, True), run,
                     lambda k, v: [(k, None if v is None else fn(k, v))], "mapper", True)


def _source(node: ir.SourceNode, parents: list[Typed], run: Host) -> Step:
    return SourceStep(node, Typed(KeyCodec(node.key_serde or DEFAULT_SERDE), node.value_serde or DEFAULT_SERDE), run)


def _sink(node: ir.SinkNode, parents: list[Typed], run: Host) -> Step:
    return SinkStep(node, parents[0], run, len(run.sinks))


class TableStep(MapStep):
    """A stateless table step, on the changelog and on a table source's records alike."""

    def __init__(self, node: ir.Node, typed: Typed, run: Host, fn: Callable[[Any, Any], Any], function: str,
                 change_value: bool) -> None:
        super().__init__(node, typed, run, fn, function, False, change_value)

    @property
    def keeps_records(self) -> bool:  # type: ignore[override]
        return self.run.keeps_records(self.node.parents[0])


def regrouped(typed: Typed, key_serde: PlanSerde | None, value_serde: PlanSerde | None) -> Typed:
    """The encodings after ``Grouped.with_serdes`` (`streamsdsl.operators.descriptions.regrouped`)."""
    encoding = encodings_regrouped(typed, key_serde, value_serde)
    return Typed(encoding.key, encoding.value, typed.is_table)
