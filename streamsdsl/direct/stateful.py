"""The direct engine's stateful steps: each hosts the kernel of its operator family with an
in-memory state (a `Journal`, so that a failed record leaves no trace) and Kafka's per-record
stream time. The kernels are the ones the Spark processors and the reference runs call:
`AggregateKernel` (aggregations, cogroup, suppress), `StreamJoinKernel` (stream–stream
joins) and the per-key steps of tables, stream–table and table–table joins and grouped tables.
"""

from __future__ import annotations

from typing import Any

import attrs

from streamsdsl import ir
from streamsdsl.direct.records import Host, Record, Typed, call_user, hold, result_error, user_error
from streamsdsl.direct.steps import Step, _refuse_column
from streamsdsl.errors import RecordError
from streamsdsl.operators.codecs import KeyCodec, SessionKeyCodec
from streamsdsl.operators.descriptions import (
    AggregateDescription,
    FkJoinDescription,
    GlobalTableJoinDescription,
    GroupedAggregateDescription,
    StreamJoinDescription,
    StreamTableJoinDescription,
    SuppressDescription,
    TableDescription,
    TableGroupByDescription,
    TableJoinDescription,
    description_of,
)
from streamsdsl.operators.functions import function_names, function_of, selector_pair
from streamsdsl.semantics.grouped_table import grouped_aggregate_step, regroup
from streamsdsl.semantics.kernels import DROPPED_NULL_VALUE, AggregateKernel, FlushPolicy, InputRecordCache, KernelStep, Out
from streamsdsl.semantics.stream_stream import LEFT, RIGHT, StreamJoinKernel
from streamsdsl.semantics.stream_table import global_join_step, stream_join_step, table_update
from streamsdsl.semantics.fk_join import (
    DROP_NULL_FOREIGN_KEY, ResolveState, Response, fk_foreign_step, fk_resolve_step, fk_send_step, fk_subscription_step,
)
from streamsdsl.semantics.suppress import FinalResultsWindowing
from streamsdsl.semantics.table_table import TableJoinState, join_store_entry, table_join_step
from streamsdsl.semantics.tables import Change, TableValue, table_source_step
from streamsdsl.semantics.versioned import NO_TIME, NOT_FORWARDED, GraceBuffer, VersionHistory, grace_step
from streamsdsl.semantics.versioned import versioned_get, versioned_put, versioned_source_step
from streamsdsl.values.windows import SessionWindow, TimeWindow, Windowed


__all__ = ["AggregateStep", "FlushPolicy", "Journal", "StatefulStep"]

_ABSENT = object()
#: A versioned table's store time and a grace join's buffer: state of the whole step, kept in its
#: journal beside the keys so that a failed record rolls them back too.
_STORE_TIME = object()
_BUFFER = object()


class Journal(dict):  # type: ignore[type-arg]
    """A dict that remembers, from `begin` on, the value each key had, so that `rollback` puts
    it back: the state I/O of the direct engine's kernels."""

    def __init__(self) -> None:
        super().__init__()
        self._undo: dict[Any, Any] = {}

    def begin(self) -> None:
        self._undo = {}

    def _remember(self, key: Any) -> None:
        if key not in self._undo:
            self._undo[key] = dict.get(self, key, _ABSENT)

    def __setitem__(self, key: Any, value: Any) -> None:
        self._remember(key)
        super().__setitem__(key, value)

    def __delitem__(self, key: Any) -> None:
        self._remember(key)
        super().__delitem__(key)

    def pop(self, key: Any, *default: Any) -> Any:  # type: ignore[override]
        self._remember(key)
        return super().pop(key, *default)

    def rollback(self) -> None:
        for key, value in self._undo.items():
            if value is _ABSENT:
                dict.pop(self, key, None)
            else:
                dict.__setitem__(self, key, value)
        self._undo = {}


class StatefulStep(Step):
    """A step with a journaled state and scalars (stream times) restored when a record fails."""

    def __init__(self, node: ir.Node, typed: Typed, run: Host) -> None:
        super().__init__(node, typed, run)
        self.state = Journal()
        self._saved: Any = None

    #: How each input (port) holds its records, where the step re-encodes keys to its own serde.
    sides: list[Typed] | tuple[Typed, ...] = ()

    def key_of(self, rec: Record, port: int) -> Any:
        """The record's key in this step's key serde (the plan converts a side held in another)."""
        side = self.sides[port] if self.sides else None
        if side is not None and side.key.serde != self.typed.key.serde and not side.key.windowed:
            return hold(self.typed.key.serde, rec.key)
        return rec.key

    def forward_result(self, key: Any, value: Any, function: str, timestamp: int, headers: Any) -> None:
        """Forward a user function's result, held in this step's value serde."""
        try:
            held = hold(self.typed.value, value)
        except Exception as exc:  # noqa: BLE001 - a result its serde cannot hold
            raise result_error(self.name, function, exc, key, self.run.position) from exc
        self.forward(Record(key, held, timestamp, headers))

    def scalars(self) -> Any:
        return None

    def restore(self, saved: Any) -> None:
        pass

    def begin(self) -> None:
        self.state.begin()
        self._saved = self.scalars()

    def rollback(self) -> None:
        self.state.rollback()
        self.restore(self._saved)


def _window_key(codec: KeyCodec, key: Any, start: int | None, end: int | None) -> Any:
    if not codec.windowed:
        return key
    return Windowed(key, SessionWindow(start, end) if isinstance(codec, SessionKeyCodec) else TimeWindow(start, end))


# --- aggregations, cogroup, suppress ----------------------------------------------------------------


class AggregateStep(StatefulStep):
    """An aggregation of one stream or of several (cogroup, ``port`` = input) on `AggregateKernel`.

    ``folded``: suppress steps folded into this aggregation (they run their own kernel on the
    same input); ``counted``: whether this aggregation runs at all (not when only suppress nodes
    read it: the Spark plan then runs only the folded operator, whose state its store shows)."""

    def __init__(self, node: ir.Node, typed: Typed, run: Host, kernel: AggregateKernel, inputs: list[Typed],
                 names: tuple[str, str, str], description: AggregateDescription | None = None) -> None:
        super().__init__(node, typed, run)
        #: The aggregation's description (None: a suppress node's step).
        self.description = description
        self.kernel = kernel
        kernel.states = self.state
        self.inputs = inputs
        self.names = names
        self.folded: list[AggregateStep] = []
        self.counted = True
        #: Per input: whether its records share the record cache of the input record that
        #: caused them (flushed at `commit`); a record that crossed a repartition topic is an
        #: input record of its own (Kafka's task processes and commits it apart).
        cacheable = kernel.flush is FlushPolicy.PER_RECORD and not kernel.emit_on_close
        parents = node.parents if cacheable else ()
        self.cached_inputs = tuple(cacheable and not isinstance(run.topology.node(parents[i]), ir.RepartitionNode)
                                   for i in range(len(inputs)))
        self.cache = InputRecordCache()

    def scalars(self) -> Any:
        return list(self.kernel.stream_times)

    def restore(self, saved: Any) -> None:
        self.kernel.stream_times = list(saved)

    def begin(self) -> None:
        super().begin()
        self.cache = InputRecordCache()

    def commit(self) -> None:
        """Flush the record cache of the input record: each window's last value, in the order
        the windows were last written."""
        for o, headers in self.kernel.flush_cache(self.cache):
            self._forward(o, headers)
        if self.cache.final_latencies:
            self.run.finals.extend(self.cache.final_latencies)
            self.cache.final_latencies.clear()

    def receive(self, rec: Record, port: int, records: bool = False) -> None:
        source = self.inputs[port]
        key = rec.key
        if source.key.serde != self.typed.key.serde and not source.key.windowed:
            key = hold(self.typed.key.serde, key)
        rec = rec if key is rec.key else Record(key, rec.value, rec.timestamp, rec.headers)
        if self.counted:  # otherwise only folded suppress steps read it: its functions run there alone
            self.apply(rec, port)
        for step in self.folded:
            step.apply(rec, port)

    def close_idle(self, now: int) -> None:
        """The wall clock is ``now``: forward what idle close closes (`AggregateKernel.close_idle`)."""
        step = self.kernel.close_idle(now)
        self.run.finals.extend(step.final_latencies)
        for o in step.outputs:
            self._forward(o, ())

    def apply(self, rec: Record, port: int) -> None:
        kernel = self.kernel
        kernel.wall_clock = self.run.system_time
        fns = kernel.fns[port]
        try:
            step: KernelStep = kernel.process(rec.key, rec.value, rec.timestamp, port,
                                              cache=self.cache if self.cached_inputs[port] else None,
                                              context=rec.headers)
        except RecordError:
            raise
        except Exception as exc:  # noqa: BLE001 - re-raised with the processor and the record
            raise user_error(self.name, function_of(exc, fns, self.names), exc, rec.key, self.run.position) from exc
        if step.dropped:
            part = "input" if rec.key is None else "null-value" if step.reason == DROPPED_NULL_VALUE else "output"
            names = getattr(self.node, "agg_names", ())  # a cogroup's per-input aggregate processors
            self.drop(part, rec, step.dropped, processor=names[port] if names else None)
        if step.final_latencies:
            self.run.finals.extend(step.final_latencies)
        for o in step.outputs:
            self._forward(o, () if o.final else rec.headers)

    def _forward(self, o: Out, headers: Any) -> None:
        try:
            value = hold(self.typed.value, o.value)
        except Exception as exc:  # noqa: BLE001 - a result its serde cannot hold
            raise result_error(self.name, self.names[1], exc, o.key, self.run.position) from exc
        self.forward(Record(_window_key(self.typed.key, o.key, o.start, o.end), value, o.timestamp, headers))

    def store_entries(self) -> list[tuple[Any, int, int, Any, int]]:
        return [(k, w.start, w.end, w.agg, w.ts) for k, state in self.state.items() for w in state.windows]


def _aggregate(node: ir.AggregateNode, parents: list[Typed], run: Host) -> AggregateStep:
    d: AggregateDescription = description_of(node, parents, run.topology)
    _refuse_column(node, d.column)
    kernel = AggregateKernel(d.windowing(run.flush), d.functions[0], emit_on_close=d.emit_on_close, flush=run.flush,
                             key_order=d.key_serde.serialize, idle_close_ms=d.idle_close_ms)
    return AggregateStep(node, Typed(d.key, d.value, True), run, kernel, [parents[0]], d.function_names, d)


def _cogroup(node: ir.CogroupAggregateNode, parents: list[Typed], run: Host) -> AggregateStep:
    d: AggregateDescription = description_of(node, parents, run.topology)
    kernel = AggregateKernel(d.windowing(run.flush), list(d.functions), emit_on_close=d.emit_on_close,
                             per_input_time=not d.emit_on_close, flush=run.flush, key_order=d.key_serde.serialize,
                             idle_close_ms=d.idle_close_ms)
    return AggregateStep(node, Typed(d.key, d.value, True), run, kernel, parents, d.function_names, d)


def _suppress(node: ir.SuppressNode, parents: list[Typed], run: Host) -> Step:
    d: SuppressDescription = description_of(node, parents, run.topology)
    if d.aggregation is None:  # until_time_limit
        kernel = AggregateKernel(d.buffer(), d.functions, emit_on_close=True, key_order=d.key.serde.serialize)
        return AggregateStep(node, Typed(d.key, d.value, True), run, kernel, [parents[0]], function_names(None))
    owner = run.steps[d.aggregation.name]
    assert isinstance(owner, AggregateStep) and owner.description is not None
    windowing = owner.description.windowing(run.flush, final_results=d.delay)
    kernel = AggregateKernel(windowing, owner.kernel.fns, emit_on_close=True, key_order=owner.kernel.key_order)
    step = AggregateStep(node, owner.typed, run, kernel, owner.inputs, owner.names)
    if isinstance(windowing, FinalResultsWindowing):
        # the suppress node receives what the aggregation's record cache forwards: the input
        # record's writes, once per window (`final_results_release`)
        step.cached_inputs = owner.cached_inputs
    owner.folded.append(step)
    if all(isinstance(run.topology.node(c), ir.SuppressNode) for c in run.topology.children(d.aggregation.name)):
        owner.counted = False  # the plan runs only the folded operator (its store reads the folded state)
        owner.store_of = step  # type: ignore[attr-defined]
    return step


# --- tables and joins -------------------------------------------------------------------------------


class TableSourceStep(StatefulStep):
    """A table from a topic or from ``to_table()``: a null key is dropped (and counted); with a
    store, the changelog leaves out a tombstone of an absent key; a join reads every record."""

    keeps_records = True

    def __init__(self, node: ir.Node, typed: Typed, run: Host, materialized: bool,
                 history_retention_ms: int | None = None) -> None:
        super().__init__(node, typed, run)
        self.materialized = materialized
        self.retention = history_retention_ms

    def receive(self, rec: Record, port: int, records: bool = False) -> None:
        if rec.key is None:
            self.drop("input", rec)
            return
        self.forward_records(rec)
        if self.retention is not None:
            self._versioned(rec)
            return
        if not self.materialized:
            self.forward(rec)
            return
        step = table_source_step(self.state.get(rec.key), rec.key, rec.value, rec.timestamp,
                                 materialized=self.run.flush is FlushPolicy.PER_RECORD)
        if step.state is None:
            self.state.pop(rec.key, None)
        else:
            self.state[rec.key] = step.state
        if step.forwarded is not None:
            self.forward(Record(rec.key, rec.value if step.forwarded.new is not None else None, rec.timestamp,
                                rec.headers))

    def _versioned(self, rec: Record) -> None:
        """A versioned table (KIP-914): every record its store takes is forwarded, out-of-order
        ones too; one older than the history retention is not."""
        assert self.retention is not None
        step = versioned_source_step(self.state.get(rec.key), rec.key, rec.value, rec.timestamp,
                                     store_time=self.state.get(_STORE_TIME, NO_TIME), retention=self.retention)
        self.state[rec.key] = step.history
        self.state[_STORE_TIME] = step.store_time
        if step.forwarded is NOT_FORWARDED:  # older than the history retention: Kafka's store counts it
            self.drop("input", rec)
        else:
            self.forward(Record(rec.key, step.forwarded, rec.timestamp, rec.headers))

    def store_entries(self) -> list[tuple[Any, int, int, Any, int]]:
        """The table's store: each key's current value and timestamp (a versioned table's latest)."""
        if self.retention is None:
            return [(k, 0, 0, tv.value, tv.ts) for k, tv in self.state.items()]
        latest = ((k, h.latest()) for k, h in self.state.items() if k is not _STORE_TIME)
        return [(k, 0, 0, tv.value, tv.ts) for k, tv in latest if tv is not None]


class StreamTableJoinStep(StatefulStep):
    """A stream record joined with the table's current value (port 1 updates the table)."""

    def __init__(self, d: StreamTableJoinDescription, run: Host, stream: Typed, table: Typed) -> None:
        super().__init__(d.node, Typed(d.key, d.value), run)
        self.sides = (stream, table)
        self.spec = d.spec
        self.joiner = d.joiner
        self.retention = d.history_retention_ms
        self.grace = d.grace_ms
        self.key_order = d.key_serde.serialize

    def receive(self, rec: Record, port: int, records: bool = False) -> None:
        if self.retention is not None:
            self._versioned(rec, port)
            return
        key = self.key_of(rec, port)
        position = self.run.position
        if port == 1:
            step = table_update(self.state.get(key) if key is not None else None, key, rec.value, rec.timestamp)
            if step.dropped:
                self.drop("input", rec)
            elif step.state is None:
                self.state.pop(key, None)
            else:
                self.state[key] = step.state
            return
        result = call_user(self.name, "joiner", key, position, stream_join_step, self.spec,
                           self.state.get(key) if key is not None else None, key, rec.value, rec.timestamp,
                           self.joiner)
        if result.dropped:
            self.drop("input", rec)
        if result.output is not None:
            self.forward_result(key, result.output.value, "joiner", rec.timestamp, rec.headers)


    def _versioned(self, rec: Record, port: int) -> None:
        """Against a versioned table: the table's history (port 1), a stream record joined with
        the version as of its timestamp, through the grace buffer when there is one (KIP-923)."""
        assert self.retention is not None
        key = self.key_of(rec, port)
        if port == 1:
            if key is None:
                self.drop("input", rec)
                return
            history, _, store_time = versioned_put(self.state.get(key, VersionHistory()), rec.value, rec.timestamp,
                                                   store_time=self.state.get(_STORE_TIME, NO_TIME),
                                                   retention=self.retention)
            self.state[key] = history
            self.state[_STORE_TIME] = store_time
            return
        if rec.value is None or (key is None and self.spec.kind != "left"):  # `stream_join_step`'s drops
            self.drop("input", rec)
            return
        if self.grace is None or key is None:
            self._join(key, rec.value, rec.timestamp, rec.headers)
            return
        buffer, now = grace_step(self.state.get(_BUFFER, GraceBuffer()), self.grace, key, rec.value, rec.timestamp,
                                 self.key_order(key), rec.headers)
        self.state[_BUFFER] = buffer
        for waiting in now:
            self._join(waiting.key, waiting.value, waiting.ts, waiting.extra)

    def _join(self, key: Any, value: Any, ts: int, headers: Any) -> None:
        found = None if key is None else versioned_get(self.state.get(key), ts, self.state.get(_STORE_TIME, NO_TIME),
                                                       self.retention)  # type: ignore[arg-type]
        result = call_user(self.name, "joiner", key, self.run.position, stream_join_step, self.spec, found, key, value,
                           ts, self.joiner)
        if result.output is not None:
            self.forward_result(key, result.output.value, "joiner", ts, headers)


class GlobalTableJoinStep(StatefulStep):
    """A stream record joined with a global table's value for its selected key (port 1: the
    global table's records, which update the table as they arrive)."""

    def __init__(self, d: GlobalTableJoinDescription, run: Host) -> None:
        super().__init__(d.node, Typed(d.key, d.value), run)
        self.table_key = d.table_key
        self.spec = d.spec
        self.key_selector = d.key_selector
        self.joiner = d.joiner

    def receive(self, rec: Record, port: int, records: bool = False) -> None:
        position = self.run.position
        if port == 1:
            step = table_update(self.state.get(rec.key), rec.key, rec.value, rec.timestamp)
            if step.state is None:
                self.state.pop(rec.key, None)
            else:
                self.state[rec.key] = step.state
            return
        selected = call_user(self.name, "key selector", rec.key, position, self.key_selector, rec.key, rec.value)
        try:
            table_key = hold(self.table_key, selected)
        except Exception as exc:  # noqa: BLE001 - a key the table's key serde cannot hold
            raise result_error(self.name, "key selector", exc, rec.key, position) from exc
        result = call_user(self.name, "joiner", rec.key, position, global_join_step, self.spec,
                           self.state.get(table_key) if table_key is not None else None, rec.key, table_key,
                           rec.value, rec.timestamp, self.joiner)
        if result.dropped:
            self.drop("input", rec)
        if result.output is not None:
            self.forward_result(rec.key, result.output.value, "joiner", rec.timestamp, rec.headers)


class TableJoinStep(StatefulStep):
    """A table–table join: either side's update looks up the other side (port 0 left, 1 right)."""

    def __init__(self, d: TableJoinDescription, run: Host, sides: list[Typed]) -> None:
        super().__init__(d.node, Typed(d.key, d.value, True), run)
        self.sides = sides
        self.spec = d.spec(run.flush)
        self.joiner = d.joiner

    def receive(self, rec: Record, port: int, records: bool = False) -> None:
        key = self.key_of(rec, port)
        position = self.run.position
        state = self.state.get(key) or TableJoinState()
        tombstone = rec.tombstone if records else None
        step = call_user(self.name, "joiner", key, position, lambda *args: table_join_step(*args, tombstone=tombstone),
                         self.spec, state, LEFT if port == 0 else RIGHT, key, rec.value, rec.timestamp, self.joiner)
        if step.dropped:
            self.drop("input", rec)
            return
        new = step.state
        if new.left is None and new.right is None and not new.has_result:
            self.state.pop(key, None)
        else:
            self.state[key] = new
        if step.output is not None:
            self.forward_result(key, step.output.change.new, "joiner", step.output.timestamp, rec.headers)

    def store_entries(self) -> list[tuple[Any, int, int, Any, int]]:
        """The join's materialized store: each key's joined value (`join_store_entry`)."""
        entries = ((k, join_store_entry(state, self.joiner, k)) for k, state in self.state.items())
        return [(k, 0, 0, e[0], e[1]) for k, e in entries if e is not None]


class FkJoinStep(StatefulStep):
    """A foreign-key join (port 0 this table, 1 the other): the three stages of
    `streamsdsl.semantics.fk_join` over whole-table state, each record to its end (its
    subscriptions, their responses), as Kafka's test driver runs the internal topics. The journal
    holds ``("left", key)``: `ResolveState` (this table's value, the result's row) and
    ``("foreign", foreign_key)``: `ForeignState` (the other table's value, the subscribers)."""

    def __init__(self, d: FkJoinDescription, run: Host) -> None:
        super().__init__(d.node, Typed(d.key, d.value, True), run)
        self.d = d
        self.spec = d.spec(run.flush)
        self.extractor, self.joiner = d.extractor, d.joiner

    def _put(self, tag: str, key: Any, state: Any) -> None:
        if state.empty:
            self.state.pop((tag, key), None)
        else:
            self.state[(tag, key)] = state

    def receive(self, rec: Record, port: int, records: bool = False) -> None:
        node: ir.ForeignKeyJoinNode = self.d.node
        position = self.run.position
        tombstone = rec.tombstone if records else None
        if port == 0:
            key = rec.key
            current = self.state.get(("left", key)) or ResolveState()
            send = call_user(self.name, "foreign_key_extractor", key, position,
                             lambda *a: fk_send_step(*a, tombstone=tombstone), self.spec, current.left, key, rec.value,
                             rec.timestamp, self.extractor)
            if send.dropped is not None and send.dropped != DROP_NULL_FOREIGN_KEY:
                self.drop("input", rec)
                return
            self._put("left", key, attrs.evolve(current, left=send.state))
            if send.dropped is not None:
                self.drop("null-foreign-key", rec, processor=node.registration)
            responses: list[Response] = []
            for sub in send.subscriptions:
                state, response = fk_subscription_step(self.state.get(("foreign", sub.foreign_key)), sub)
                if sub.foreign_key is not None:
                    self._put("foreign", sub.foreign_key, state)
                if response is not None:
                    responses.append(response)
        else:
            state, found, dropped = fk_foreign_step(self.spec, self.state.get(("foreign", rec.key)), rec.key, rec.value,
                                                    rec.timestamp, tombstone=tombstone)
            if dropped is not None:
                self.drop("input", rec)
                return
            self._put("foreign", rec.key, state)
            responses = list(found)
        for response in responses:
            state, output, dropped = call_user(self.name, "joiner", response.key, position, fk_resolve_step, self.spec,
                                               self.state.get(("left", response.key)), response, self.joiner)
            self._put("left", response.key, state)
            if dropped is not None:
                self.drop("stale-response", rec, processor=node.resolver)
            if output is not None:
                self.forward_result(output.key, output.change.new, "joiner", output.timestamp, rec.headers)

    def store_entries(self) -> list[tuple[Any, int, int, Any, int]]:
        """The join's materialized result store."""
        return [(k[1], 0, 0, s.result[0], s.result[1]) for k, s in self.state.items()
                if k[0] == "left" and s.result is not None]


class StreamJoinStep(StatefulStep):
    """A windowed stream–stream join on `StreamJoinKernel` (port 0 this side, 1 the other)."""

    def __init__(self, d: StreamJoinDescription, run: Host, sides: list[Typed]) -> None:
        super().__init__(d.node, Typed(d.key, d.value), run)
        self.sides, self.values = sides, (d.left_value, d.right_value)
        # every in-order record emits every expired held record (the documented rule the Spark
        # plan follows, docs/differences.md), not Kafka's skipped and early-stopped scan
        self.kernel = StreamJoinKernel(d.spec, d.joiner, states=self.state, kafka_scan=False)

    def scalars(self) -> Any:
        return self.kernel.times()

    def restore(self, saved: Any) -> None:
        self.kernel.restore(saved)

    def receive(self, rec: Record, port: int, records: bool = False) -> None:
        key, value = self.key_of(rec, port), rec.value
        if self.sides[port].value != self.values[port]:
            value = hold(self.values[port], value)
        position = self.run.position
        step = call_user(self.name, "joiner", key, position, self.kernel.process, LEFT if port == 0 else RIGHT, key,
                         value, rec.timestamp)
        if step.dropped:
            self.drop("input", rec)
        for outputs, headers in ((step.scanned, ()), (step.outputs, rec.headers)):
            for o in outputs:
                self.forward_result(o.key, o.value, "joiner", o.timestamp, headers)


# --- grouped tables ----------------------------------------------------------------------------------


@attrs.frozen
class GroupedChange:
    """A re-keyed table change on its way to its group's aggregation (new and old value)."""

    new: Any
    old: Any


class TableGroupByStep(StatefulStep):
    """``KTable.group_by``: the table's value per key, so each update becomes a change with its
    old value, re-keyed to its old group first, then its new group."""

    def __init__(self, d: TableGroupByDescription, run: Host, table: Typed) -> None:
        super().__init__(d.node, Typed(d.key, d.value, True), run)
        self.selector = d.node.selector.fn
        self.table = table

    def receive(self, rec: Record, port: int, records: bool = False) -> None:
        k, new, ts = rec.key, rec.value, rec.timestamp
        position = self.run.position
        old = self.state.get(k)
        try:
            changes = regroup(k, Change(new, None if old is None else old.value), ts,
                              lambda key, value: selector_pair(self.selector(key, value), self.name))
        except Exception as exc:  # noqa: BLE001 - re-raised with the processor and the record
            raise user_error(self.name, "selector", exc, k, position) from exc
        if new is None:
            self.state.pop(k, None)
        else:
            self.state[k] = TableValue(new, ts)
        key_serde, value_serde = self.typed.key.serde, self.typed.value
        for group, change, t in changes:
            try:
                g = hold(key_serde, group)
                value = GroupedChange(hold(value_serde, change.new), hold(value_serde, change.old))
            except Exception as exc:  # noqa: BLE001 - a result its serde cannot hold
                raise result_error(self.name, "selector", exc, k, position) from exc
            self.forward(Record(g, value, t, rec.headers))


class GroupedAggregateStep(StatefulStep):
    """A grouped table's aggregation: subtract the old value, add the new one."""

    def __init__(self, d: GroupedAggregateDescription, run: Host, grouped: Typed) -> None:
        super().__init__(d.node, Typed(d.key, d.value, True), run)
        self.fns = d.functions
        self.sides = [grouped]

    def receive(self, rec: Record, port: int, records: bool = False) -> None:
        group = self.key_of(rec, 0)
        position = self.run.position
        change = Change(rec.value.new, rec.value.old)
        step = call_user(self.name, "adder/subtractor", group, position, grouped_aggregate_step,
                         self.state.get(group), group, change, rec.timestamp, self.fns)
        if step.state is None:
            self.state.pop(group, None)
        else:
            self.state[group] = step.state
        if step.output is not None:
            self.forward_result(group, step.output.change.new, "adder", step.output.timestamp, rec.headers)

    def store_entries(self) -> list[tuple[Any, int, int, Any, int]]:
        return [(k, 0, 0, v.value, v.ts) for k, v in self.state.items()]


# --- the rules of the stateful nodes (`streamsdsl.direct.rules`) ------------------------------------


def _table(node: ir.TableSourceNode | ir.StreamToTableNode | ir.GlobalTableSourceNode, parents: list[Typed], run: Host) -> Step:
    d: TableDescription = description_of(node, parents, run.topology)
    return TableSourceStep(node, Typed(d.key, d.value, True), run, d.materialized, d.history_retention_ms)


def _stream_table_join(node: ir.StreamTableJoinNode, parents: list[Typed], run: Host) -> Step:
    stream, table = parents
    return StreamTableJoinStep(description_of(node, parents, run.topology), run, stream, table)


def _global_table_join(node: ir.GlobalTableJoinNode, parents: list[Typed], run: Host) -> Step:
    return GlobalTableJoinStep(description_of(node, parents, run.topology), run)


def _table_table_join(node: ir.TableTableJoinNode, parents: list[Typed], run: Host) -> Step:
    return TableJoinStep(description_of(node, parents, run.topology), run, parents)


def _fk_join(node: ir.ForeignKeyJoinNode, parents: list[Typed], run: Host) -> Step:
    return FkJoinStep(description_of(node, parents, run.topology), run)


def _stream_stream_join(node: ir.StreamStreamJoinNode, parents: list[Typed], run: Host) -> Step:
    return StreamJoinStep(description_of(node, parents, run.topology), run, parents)


def _table_group_by(node: ir.TableGroupByNode, parents: list[Typed], run: Host) -> Step:
    return TableGroupByStep(description_of(node, parents, run.topology), run, parents[0])


def _grouped_aggregate(node: ir.GroupedTableAggregateNode, parents: list[Typed], run: Host) -> Step:
    return GroupedAggregateStep(description_of(node, parents, run.topology), run, parents[0])
