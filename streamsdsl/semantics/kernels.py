"""The aggregation kernel: Kafka Streams' windowed and unwindowed aggregation over every key of
one operator, record by record, as Kafka's TopologyTestDriver runs it.

`AggregateKernel` is what the test driver's direct engine runs for an aggregation (and for a
``suppress`` folded into one), and what `streamsdsl.semantics.reference.reference_run` runs for
the property tests. It holds no rule of its own: every record goes through
`streamsdsl.semantics.windowing.record_step` (the Spark processors' step too), the windows
stream time closes through `close_step`, and a suppress node's releases through
`streamsdsl.semantics.suppress.final_results_release` / `time_limit_release`. What is passed
in: the window kind, the functions (one set per input for a cogroup), the emit strategy, the
record cache (`FlushPolicy`) and the state I/O (any mutable mapping of key → `KeyState`).
"""

from __future__ import annotations

import enum
from typing import Any, Callable, Iterable, MutableMapping, Sequence

import attrs

from streamsdsl.semantics.aggregation import AggFunctions
from streamsdsl.semantics.changes import ChangeBuffer
from streamsdsl.semantics.suppress import FinalResultsWindowing, TimeLimitBuffer, final_results_release
from streamsdsl.semantics.suppress import time_limit_release
from streamsdsl.semantics.tables import key_bytes
from streamsdsl.semantics.unwindowed import Unwindowed
from streamsdsl.semantics.windowing import KeyState, RecordStep, WindowAgg, Windowing, advance_stream_time
from streamsdsl.semantics.windowing import FoldStep, close_step, fold_records, idle_close_step, record_step

__all__ = ["DROPPED_EXPIRED", "DROPPED_NULL_VALUE", "AggregateKernel", "BatchStep", "FlushPolicy", "InputRecordCache",
           "KernelStep", "Out", "forwarded_updates", "store_clock"]


class FlushPolicy(enum.Enum):
    """When an aggregation's store writes are forwarded (Kafka's record cache).

    ``PER_RECORD``: the cache is flushed after every record (Kafka's TopologyTestDriver with the
    default ``statestore.cache.max.bytes``): the last value per window, a tombstone only for a
    window that had been forwarded before. ``EVERY_WRITE``: no cache (``statestore.cache.max.bytes
    = 0``): every delete and every put is forwarded, in Kafka's order."""

    PER_RECORD = "per-record"
    EVERY_WRITE = "every-write"

    @classmethod
    def of_cache_bytes(cls, max_bytes: int) -> FlushPolicy:
        """Kafka Streams' rule: a cache of 0 bytes forwards every write."""
        return cls.EVERY_WRITE if max_bytes == 0 else cls.PER_RECORD


@attrs.frozen
class Out:
    """One forwarded record: key, window bounds (``None`` when unwindowed), value (``None`` =
    tombstone), timestamp; ``final``: an on-close (or suppress) release, which carries no headers."""

    key: Any
    start: int | None
    end: int | None
    value: Any
    timestamp: int
    final: bool = attrs.field(default=False, eq=False, repr=False)
    #: The forwarded window (``None`` for a tombstone): what a host orders finals by.
    window: WindowAgg | None = attrs.field(default=None, eq=False, repr=False)
    #: A folded suppress's release of a window the record wrote again after its release (it
    #: comes out with the record, after what stream time released).
    immediate: bool = attrs.field(default=False, eq=False, repr=False)


#: Why an aggregation drops a record (`KernelStep.reason`), in Kafka Streams' log words: a null
#: value where the operator skips one (``KStreamAggregate``, ``KStreamSlidingWindowAggregate``:
#: "due to null key or value"), or a record too late for every window it falls in.
DROPPED_NULL_VALUE = "null-value"
DROPPED_EXPIRED = "expired"


@attrs.frozen
class KernelStep:
    """What one record does: the forwarded records in order, how often it counts as dropped and
    why (`DROPPED_NULL_VALUE`, `DROPPED_EXPIRED`; ``None`` when not dropped), and the emit-final
    latencies (ms of stream time past each released window's close)."""

    outputs: tuple[Out, ...] = ()
    dropped: int = 0
    final_latencies: tuple[int, ...] = ()
    reason: str | None = None


@attrs.frozen
class BatchStep:
    """What one key's records of a micro-batch do (`AggregateKernel.process_batch`):
    ``outputs``, the forwarded records with the index of the record that wrote each (in order;
    none when the writes went to a record cache), and ``dropped``, ``(record index, count,
    reason)`` per dropped record."""

    outputs: tuple[tuple[int, Out], ...] = ()
    dropped: tuple[tuple[int, int, str], ...] = ()


def forwarded_updates(before: KeyState, step: RecordStep, policy: FlushPolicy) -> list[tuple[tuple[int, int], WindowAgg | None]]:
    """The store writes of one record that an emit-on-update aggregation forwards: ``(bounds,
    window)`` pairs, ``window`` ``None`` (or its ``agg`` ``None``) for a tombstone."""
    if policy is FlushPolicy.EVERY_WRITE:
        return [*((w.bounds, None) for w in step.deletes), *((w.bounds, w) for w in step.puts)]
    buffer = ChangeBuffer(w.bounds for w in before.windows)
    step.write_to(buffer)
    return buffer.flush()


def store_clock(windowing: Windowing, flush: FlushPolicy, emit_on_close: bool, times_before: Sequence[int], slot: int,
                stream_time: int) -> tuple[int | None, int]:
    """When one store serves several inputs that keep their own stream times (Kafka's cogroup:
    one aggregate processor per input over one store), the times a record of input ``slot``
    works with: ``(expiry_time, store_time)``. ``times_before``: every input's stream time
    before the record; ``stream_time``: input ``slot``'s after it.

    ``expiry_time`` is the stream time windows expire by (``None``: the record's own stream
    time): a session leaves the state once the store's time, the greatest of the inputs', has
    closed it (`WindowingRules.store_time_expires_windows`); with the record cache, a time or
    sliding window leaves it only once every input's stream time has expired it (the least of
    them, `WindowingRules.cache_keeps_expired_windows`); without the cache once the store's own
    time has (`WindowingRules.uncached_store_time_unit`: for time windows the greatest window
    start put). ``store_time`` is the stream time before the record that decides what the store
    still shows (`record_step`'s ``stream_time_before``). The one implementation of this rule:
    the direct engine's kernel calls it with its own stream times, and a Spark host's kernel
    with the ones its plan computed (the JVM operator's ``Clock.java`` mirrors it).

    Examples
    --------
    >>> from streamsdsl.semantics.session import SessionWindowing
    >>> store_clock(SessionWindowing(10, 0), FlushPolicy.PER_RECORD, False, [50, 20], 1, 30)
    (50, 50)
    >>> store_clock(SessionWindowing(10, 0), FlushPolicy.PER_RECORD, False, [50], 0, 60)
    (None, 50)
    """
    before_time = times_before[slot]
    if len(times_before) < 2:
        return None, before_time
    times = [stream_time if i == slot else t for i, t in enumerate(times_before)]
    if getattr(windowing, "store_time_expires_windows", False):
        # one store for all inputs, its time the fastest input's: a session it has closed is
        # final, whichever input and key the record has
        return max(times), max(times_before)
    if flush is FlushPolicy.PER_RECORD and getattr(windowing, "cache_keeps_expired_windows", False):
        # one record cache for all inputs: a window stays in it until every input's stream time
        # has expired it
        return min(times), before_time
    if flush is FlushPolicy.EVERY_WRITE and not emit_on_close and (unit := windowing.uncached_store_time_unit) is not None:
        # no cache: one store for all inputs, which hides a window by its own time
        latest = max(times_before)
        return latest - latest % unit, before_time
    return None, before_time


class InputRecordCache:
    """Kafka's record cache of one aggregation over all its keys, flushed once per input record.

    Kafka's TopologyTestDriver commits, and so flushes the cache, after each record a task
    processes: after the source record and everything it caused in its sub-topology. When one
    input record reaches an aggregation several times (a ``flat_map_values`` before it, a join
    with several matches), the flush forwards each window's last value once, the windows in the
    order they were last written, across keys (SI/NamedCache.java); a record that crossed a
    repartition topic is an input record of its own. Each write keeps a ``context`` (the
    writing record's headers), forwarded with the window as Kafka's cache entry keeps its
    record context.

    Examples
    --------
    >>> from streamsdsl.semantics.aggregation import AggFunctions
    >>> from streamsdsl.semantics.unwindowed import Unwindowed
    >>> kernel = AggregateKernel(Unwindowed(), AggFunctions(lambda: 0, lambda k, v, a: a + 1))
    >>> cache = InputRecordCache()
    >>> [kernel.process(k, "v", 5, cache=cache).outputs for k in ("a", "b", "a")]
    [(), (), ()]
    >>> [(o.key, o.value) for o, _ in kernel.flush_cache(cache)]
    [('b', 1), ('a', 2)]
    """

    def __init__(self) -> None:
        self.buffer = ChangeBuffer()
        self._seen: set[Any] = set()
        self._contexts: dict[Any, Any] = {}
        #: A suppress folded into the aggregation (`FinalResultsWindowing`): per key, its state
        #: and the stream time before the input record's first record of it, its steps, and the
        #: stream time after the last (`final_results_release` of them all at the flush).
        self.finals: dict[Any, tuple[KeyState, int, list[RecordStep], int]] = {}
        self.final_latencies: list[int] = []

    def write(self, key: Any, before: KeyState, step: RecordStep, context: Any = None) -> None:
        if key not in self._seen:
            self._seen.add(key)
            self.buffer.mark_flushed((key, w.bounds) for w in before.windows)
        step.write_to(self.buffer, key)
        for w in (*step.deletes, *step.puts):
            self._contexts[(key, w.bounds)] = context

    def write_fold(self, key: Any, before: KeyState, writes: dict[tuple[int, int], tuple[WindowAgg | None, Any]]) -> None:
        """The writes of a key's records folded together (`FoldStep`, compacted), as `write`
        per record leaves the cache."""
        if key not in self._seen:
            self._seen.add(key)
            self.buffer.mark_flushed((key, w.bounds) for w in before.windows)
        buffer, contexts = self.buffer, self._contexts
        for bounds, (w, context) in writes.items():
            if w is None:
                buffer.delete((key, bounds))
            else:
                buffer.put((key, bounds), w)
            contexts[(key, bounds)] = context

    def flush(self) -> list[tuple[Any, tuple[int, int], WindowAgg | None, Any]]:
        """``(key, bounds, window, context)`` per forwarded window, ``window`` ``None`` for a
        tombstone; the cache is empty afterwards."""
        out = [(key, bounds, w, self._contexts[(key, bounds)]) for (key, bounds), w in self.buffer.flush()]
        self.buffer, self._seen, self._contexts = ChangeBuffer(), set(), {}
        return out


class AggregateKernel:
    """One aggregation operator over all its keys.

    ``per_input_time``: each input keeps its own stream time (Kafka's cogroup: one aggregate
    processor per input stream, over one store); with the record cache, a time or sliding window
    leaves the state only once every input's stream time has expired it (`record_step`'s
    ``expiry_time``, `WindowingRules.cache_keeps_expired_windows`), and without it once the
    store's time has (`WindowingRules.uncached_store_time_unit`: for time windows the greatest
    window start put), while a session leaves it once the store's time, the greatest of the inputs'
    stream times, has closed it (`WindowingRules.store_time_expires_windows`); otherwise one
    stream time spans the inputs.
    ``states`` is the
    state I/O: key → `KeyState`; keys without windows are removed from it. ``key_order``: the
    key's serialized bytes (Kafka's store order), which order the windows one stream-time step
    closes at the same window bounds (default: `streamsdsl.semantics.tables.key_bytes`).

    ``idle_close_ms`` (emit on close only; ``None``: Kafka's rules alone): streamsdsl's idle
    close, per aggregation. The host sets ``wall_clock`` (ms) before records; each record with a
    key (a late one too) sets `last_input_at`, the aggregation's last input time, to it (and
    stamps its key's `KeyState.last_record_at`, which a host's per-key timer may read), and
    `close_idle` closes the open windows of every key once the aggregation has had no record
    for that long (`streamsdsl.semantics.windowing.idle_close_step`).
    """

    def __init__(self, windowing: Windowing, fns: AggFunctions | Sequence[AggFunctions], *, emit_on_close: bool = False,
                 per_input_time: bool = False, flush: FlushPolicy = FlushPolicy.PER_RECORD,
                 states: MutableMapping[Any, KeyState] | None = None, stream_times: Sequence[int] | None = None,
                 key_order: Callable[[Any], Any] = key_bytes, suppress_release: bool = True,
                 idle_close_ms: int | None = None) -> None:
        self.windowing = windowing
        self.fns = (fns,) if isinstance(fns, AggFunctions) else tuple(fns)
        self.emit_on_close = emit_on_close
        self.per_input_time = per_input_time
        self.flush = flush
        self.states: MutableMapping[Any, KeyState] = {} if states is None else states
        self.stream_times = list(stream_times) if stream_times else [-1] * (len(self.fns) if per_input_time else 1)
        self.windowed = not isinstance(windowing, Unwindowed)
        self.key_order = key_order
        self.suppress_release = suppress_release
        self.idle_close_ms = idle_close_ms
        #: The host's wall clock (ms), which a record stamps on its key with idle close.
        self.wall_clock = -1
        #: With idle close: the wall clock (ms) when the last record with a key reached this
        #: kernel (-1: none yet). A kernel that sees every key (the direct engine's) holds the
        #: aggregation's; a host that sees some keys passes the aggregation's to `close_idle`.
        self.last_input_at = -1

    @property
    def stream_time(self) -> int:
        return max(self.stream_times)

    def process(self, key: Any, value: Any, ts: int, source: int = 0, *, cache: InputRecordCache | None = None,
                context: Any = None) -> KernelStep:
        """One record of input ``source``. A null key is dropped (and counted) before stream
        time advances. ``cache``: the input record's record cache (with `FlushPolicy.PER_RECORD`
        and emit on update, the store writes go there, with ``context``, instead of out; the host
        forwards them with `flush_cache` once the input record is done); ``None``: the cache is
        flushed after this record."""
        if key is None:
            return KernelStep(dropped=1)
        if self.idle_close_ms is not None:
            self.last_input_at = self.wall_clock
        windowing = self.windowing
        slot = source if self.per_input_time else 0
        before_time = self.stream_times[slot]
        stream_time = advance_stream_time(windowing, before_time, ts, value)
        before = self.states.get(key) or KeyState()
        if isinstance(windowing, TimeLimitBuffer):
            state, release = time_limit_release(windowing, before, value, ts, before_time, stream_time)
            self.stream_times[slot] = stream_time
            self._store(key, state)
            return self._released(key, release.passed, release.immediate, stream_time)
        expiry_time, store_time = store_clock(windowing, self.flush, self.emit_on_close, self.stream_times, slot,
                                              stream_time) if self.per_input_time else (None, before_time)
        key_time = stream_time if before.floor < 0 else max(stream_time, before.floor)  # after an idle close
        step = record_step(windowing, before, key, value, ts, key_time, self.fns[source],
                           stream_time_before=store_time, expiry_time=expiry_time)
        self.stream_times[slot] = stream_time
        if self.idle_close_ms is not None:
            self._store(key, attrs.evolve(step.state, last_record_at=self.wall_clock))
        else:
            self._store(key, step.state)
        reason = None if not step.dropped else DROPPED_NULL_VALUE if value is None and windowing.drops_null_values \
            else DROPPED_EXPIRED
        if isinstance(windowing, FinalResultsWindowing) and self.suppress_release:
            if cache is not None and windowing.cached:  # released at the input record's flush
                first = cache.finals.get(key)
                steps = [step] if first is None else [*first[2], step]
                cache.finals[key] = (before, before_time, steps, stream_time) if first is None \
                    else (first[0], first[1], steps, stream_time)
                return KernelStep(dropped=step.dropped, reason=reason)
            release = final_results_release(windowing, before, step, before_time, stream_time)
            return self._released(key, release.passed, release.immediate, stream_time, step.dropped, reason)
        outputs: list[Out] = []
        latencies: list[int] = []
        if self.emit_on_close:
            closing = [(w, key) for w in step.closed]
            closing += self._close_others(key, stream_time)
            self._finals(closing, stream_time, outputs, latencies)
        elif cache is not None and self.flush is FlushPolicy.PER_RECORD:
            cache.write(key, before, step, context)
        else:
            for bounds, w in forwarded_updates(before, step, self.flush):
                outputs.append(self.out(key, bounds, w))
        return KernelStep(tuple(outputs), step.dropped, tuple(latencies), reason)

    @property
    def folds(self) -> bool:
        """Whether `process_batch` applies: emit on update (so no idle close either), one stream
        time over the inputs, and no suppress node folded in (its releases follow each record's
        stream time)."""
        return not (self.emit_on_close or self.per_input_time or self.idle_close_ms is not None
                    or isinstance(self.windowing, (TimeLimitBuffer, FinalResultsWindowing)))

    def process_batch(self, key: Any, records: Sequence[tuple[Any, int, int, Any]],
                      cache: InputRecordCache | None = None) -> BatchStep:
        """One key's records of a micro-batch, ``(value, timestamp, input, context)`` each in
        order, where `folds` holds: the same state, stream time, drops and forwarded records as
        `process` per record with the same ``cache`` (with `FlushPolicy.PER_RECORD` the
        writes go to ``cache``, required; with `FlushPolicy.EVERY_WRITE` every write is
        forwarded, each with the index of its record). The user's functions are called per
        record, in the same order; around them the key's windows are held once for the batch
        (`streamsdsl.semantics.windowing.fold_records`, a window kind's ``fold_cached``). A
        user function's exception leaves as `streamsdsl.semantics.windowing.FoldFailed`
        naming the record."""
        assert self.folds and key is not None
        if not records:
            return BatchStep()
        windowing = self.windowing
        before = self.states.get(key) or KeyState()
        compact = self.flush is FlushPolicy.PER_RECORD
        fold = getattr(windowing, "fold_cached", None) if compact and not before.finals else None
        if fold is not None:
            step: FoldStep = fold(before.windows, key, records, self.stream_times[0], self.fns)
        else:
            step = fold_records(windowing, before, key, records, self.stream_times[0], self.fns, compact=compact)
        self.stream_times[0] = step.stream_time
        self._store(key, step.state)
        drops = windowing.drops_null_values
        dropped = tuple((i, n, DROPPED_NULL_VALUE if drops and records[i][0] is None else DROPPED_EXPIRED)
                        for i, n in step.dropped)
        if compact:
            assert cache is not None, "with the record cache the writes go to it"
            cache.write_fold(key, before, step.writes)
            return BatchStep((), dropped)
        return BatchStep(tuple((i, self.out(key, bounds, w)) for i, bounds, w in step.writes), dropped)

    def flush_cache(self, cache: InputRecordCache) -> list[tuple[Out, Any]]:
        """What the input record's cache forwards at its flush: ``(record, context)`` pairs; with
        a folded suppress, what its node releases of what the cache forwards (context ``()``;
        the latencies are added to ``cache.final_latencies``)."""
        if cache.finals:
            windowing = self.windowing
            assert isinstance(windowing, FinalResultsWindowing)
            finals, cache.finals = cache.finals, {}
            out: list[tuple[Out, Any]] = []
            for key, (before, before_time, steps, stream_time) in finals.items():
                release = final_results_release(windowing, before, steps, before_time, stream_time)
                step = self._released(key, release.passed, release.immediate, stream_time)
                out.extend((o, ()) for o in step.outputs)
                cache.final_latencies.extend(step.final_latencies)
            return out
        return [(self.out(key, bounds, w), context) for key, bounds, w, context in cache.flush()]

    def advance_to(self, stream_time: int) -> KernelStep:
        """Stream time reaches ``stream_time`` without a record (a host's event-time timer):
        every key's windows it closes leave the state, and with emit on close they are forwarded
        as final, in the window kind's final order and then the key's bytes."""
        self.stream_times = [max(t, stream_time) for t in self.stream_times]
        closing = self._close_others(None, stream_time)
        outputs: list[Out] = []
        latencies: list[int] = []
        if self.emit_on_close:
            self._finals(closing, stream_time, outputs, latencies)
        return KernelStep(tuple(outputs), 0, tuple(latencies))

    def close_idle(self, now: int, last_input_at: int | None = None) -> KernelStep:
        """The host's wall clock is ``now``: if the last record reached the aggregation
        ``idle_close_ms`` or longer ago, every key's open windows close
        (`streamsdsl.semantics.windowing.idle_close_step`), forwarded as final in the window
        kind's final order and then the key's bytes (emit-final latency 0: stream time has not
        passed them). ``last_input_at``: the aggregation's last input time (ms), for a host whose
        kernel sees only some of its keys; by default this kernel's `last_input_at`. Nothing
        without ``idle_close_ms``, nor before any record (-1).

        Examples
        --------
        >>> from streamsdsl.semantics.timewindow import TimeWindowing
        >>> from streamsdsl.semantics.aggregation import AggFunctions
        >>> kernel = AggregateKernel(TimeWindowing(size=10, advance=10, grace=0),
        ...                          AggFunctions(lambda: 0, lambda k, v, a: a + v), emit_on_close=True,
        ...                          idle_close_ms=100)
        >>> kernel.wall_clock = 0
        >>> _ = kernel.process("a", 1, 3)
        >>> kernel.wall_clock = 60
        >>> _ = kernel.process("b", 2, 4)
        >>> kernel.close_idle(100).outputs  # "b" came 40 ms ago: the aggregation is not idle
        ()
        >>> [(o.key, o.value) for o in kernel.close_idle(160).outputs]
        [('a', 1), ('b', 2)]
        """
        if self.idle_close_ms is None:
            return KernelStep()
        last = self.last_input_at if last_input_at is None else last_input_at
        if last < 0 or now - last < self.idle_close_ms:
            return KernelStep()
        closing: list[tuple[WindowAgg, Any]] = []
        stream_time = self.stream_time
        for key in list(self.states):
            state = self.states[key]
            step = idle_close_step(self.windowing, state, stream_time)
            if step.closed:
                self._store(key, step.state)
                closing.extend((w, key) for w in step.closed)
        outputs: list[Out] = []
        latencies: list[int] = []
        self._finals(closing, stream_time, outputs, latencies)
        return KernelStep(tuple(outputs), 0, tuple(max(0, latency) for latency in latencies))

    def out(self, key: Any, bounds: tuple[int, int], window: WindowAgg | None, final: bool = False,
            immediate: bool = False) -> Out:
        """The record that forwards ``window`` of ``key`` (``None``: a tombstone of ``bounds``)."""
        start, end = bounds if self.windowed else (None, None)
        if window is None or window.agg is None:
            return Out(key, start, end, None, bounds[1] if window is None else window.ts, final, window, immediate)
        return Out(key, start, end, window.agg, window.ts, final, window, immediate)

    # -- helpers ---------------------------------------------------------------------------------
    def _store(self, key: Any, state: KeyState) -> None:
        if state.floor >= 0 and state.floor <= self.stream_time:
            state = attrs.evolve(state, floor=-1)  # stream time has caught up with the idle close
        if state.windows or state.floor >= 0:
            self.states[key] = state
        elif key in self.states:
            del self.states[key]

    def _close_others(self, key: Any, stream_time: int) -> list[tuple[WindowAgg, Any]]:
        """Close every other key's windows that ``stream_time`` closes."""
        closing: list[tuple[WindowAgg, Any]] = []
        for other in list(self.states):
            if other == key:
                continue
            close = close_step(self.windowing, self.states[other], stream_time)
            if close.closed or close.state is not self.states[other] or 0 <= close.state.floor <= stream_time:
                self._store(other, close.state)
                closing.extend((w, other) for w in close.closed)
        return closing

    def _finals(self, closing: list[tuple[WindowAgg, Any]], stream_time: int, outputs: list[Out],
                latencies: list[int]) -> None:
        """On-close records, in the window kind's final order and then the key's bytes (Kafka's
        store order; the Spark plan orders them so too)."""
        order, key_order = self.windowing.final_order, self.key_order
        threshold = self.windowing.close_threshold
        closing.sort(key=lambda pair: (order(pair[0]), key_order(pair[1])))
        for w, k in closing:
            outputs.append(self.out(k, w.bounds, w, final=True))
            latencies.append(stream_time - threshold(w) - 1)

    def _released(self, key: Any, passed: Iterable[WindowAgg], immediate: Iterable[WindowAgg], stream_time: int,
                  dropped: int = 0, reason: str | None = None) -> KernelStep:
        """A suppress node's releases around one record: what stream time passed (this key's and
        every other key's, in (end, key) order), then what the record re-wrote after its release."""
        outputs: list[Out] = []
        latencies: list[int] = []
        closing = [(w, key) for w in passed] + self._close_others(key, stream_time)
        self._finals(closing, stream_time, outputs, latencies)
        threshold = self.windowing.close_threshold
        for w in immediate:
            outputs.append(self.out(key, w.bounds, w, final=True, immediate=True))
            latencies.append(stream_time - threshold(w) - 1)
        return KernelStep(tuple(outputs), dropped, tuple(latencies), reason)
