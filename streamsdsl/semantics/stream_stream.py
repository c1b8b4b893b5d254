"""Windowed stream–stream join (``KStream#join`` / ``leftJoin`` / ``outerJoin`` with ``JoinWindows``).

Kafka Streams' rules (``KI/KStreamKStreamJoin.java``, ``KI/KStreamImplJoin.java``,
``KAFKA_STREAMS_SEMANTICS.md`` §5.2), with the spurious-result fix ON (KIP-633, every
``JoinWindows.of_time_difference_*``) unless `JoinWindowsSpec.spurious_result_fix` is off:

- **Matching.** A left record at ``t`` joins every right record of its key with
  ``t - before <= t' <= t + after``; a right record at ``t'`` uses the mirrored window
  ``[t' - after, t' + before]``; both bounds are clamped at 0. Output
  ``joiner(left_value, right_value)`` with ts ``max(t, t')``, in the other side's store order
  (timestamp, then arrival). Duplicates are kept.
- **Buffers.** A record is joined *before* it is put into its own side's buffer. Null keys and
  null values are never buffered. A buffer read never returns records older than
  ``store_time - (before + after + grace) + 1``, where ``store_time`` is the max timestamp put
  into that side's buffer (over all keys). There is no late-record drop in the join itself.
- **Stream time** is shared by both inputs: the max timestamp seen on either, advanced by every
  record first (null keys and values included).
- **Null key / value.** A left (left and outer join) or right (outer join) record with a null
  key and a value is forwarded at once as a null-join with its own ts; every other record with a
  null key or value is dropped and counted.
- **Non-joined records (left/outer, fix ON).** A record that finds no match is null-joined at
  once if its window has already closed (``t + after < stream_time`` for a left record,
  ``t' + before < stream_time`` for a right one); otherwise it is *held*. A held record that a
  later record of the other side matches is dropped from the held set (all held records of that
  key, side and timestamp). Held records are emitted while processing a record whose ts equals
  stream time, **before** that record is joined: a held left record at ``t`` once
  ``t + after + grace < stream_time``, a held right one once ``t' + before + grace < stream_time``.
- **Fix OFF** (deprecated ``JoinWindows.of``): a record without a match is null-joined at once.

State
-----
One operator keyed by the join key holds one `StreamJoinState` per key: both sides' buffers and
the key's held records, all plain ``(ts, value)`` / ``(ts, side, value)`` tuples
(`StreamJoinState.to_plain`). The per-key steps are `stream_join_step` (one record: its matches,
its null-join or hold), `stream_join_close` (stream time reached: emit the key's expired held
records, in Kafka's order within the key, and prune the buffers; an operator calls it from an
event-time timer at `stream_join_timer_threshold` ``+ 1``) and `stream_join_operator_step` (what
the operator does per record: close first when the record is in order, then the record step).
`stream_join_reference_run` reproduces Kafka's TopologyTestDriver output order over a whole
input, using the same `stream_join_step`, plus Kafka's cross-key emission of held records.

Where a per-key operator differs from Kafka (order and timing, for docs/differences.md)
-------------------------------------------------------------------------------------
1. **Held records come out per key, not in one cross-key scan.** Kafka keeps every key's held
   records in one shared store and, on the first in-order record (of *any* key) after they
   expire, emits all expired ones ordered by (timestamp, right before left, serialized key). A
   per-key operator emits a key's expired held records when that key is processed or its timer
   fires: the same records with the same timestamps, but interleaved differently with other keys'
   output (and, in streaming, in the micro-batch whose watermark passes their threshold).
2. **Kafka can emit late.** Kafka skips the scan while ``min_time + after + grace >=
   stream_time``, where ``min_time`` is the timestamp of the *last* held record the previous
   scan looked at (not the smallest one left), and an out-of-order record never scans. Kafka
   therefore sometimes emits an expired held record one or more records later than its
   threshold; the per-key operator emits it at the first stream time past the threshold.
3. **Buffer visibility.** Kafka's buffer cut-off uses each side's max timestamp over all keys;
   the operator passes the stream time it has (`stream_join_step`'s ``other_store_time``).
Points 2 and 3 change *which* records are produced only for records later than the grace
period: a record that arrives after ``stream_time - grace`` can still match a held record that
Kafka has not emitted yet but the operator has already null-joined (or a buffered record one
cut-off hides and the other does not). With no such late records, the operator produces exactly
Kafka's records (the property tests check the multiset).

Examples
--------
>>> spec = StreamJoinSpec("left", JoinWindowsSpec.of_time_difference_and_grace(100, 0))
>>> run = stream_join_reference_run(
...     [("left", 0, "A0", 0), ("right", 0, "a0", 50), ("left", 1, "A1", 60), ("right", 9, "x", 300)],
...     spec, lambda l, r: f"{l}+{r}")
>>> [(o.key, o.value, o.timestamp) for o in run.outputs]
[(0, 'A0+a0', 50), (1, 'A1+None', 60)]
"""

from __future__ import annotations

import operator
from typing import Any, Callable, Iterable, Literal, MutableMapping, Sequence

import attrs

from streamsdsl._validation import duration_field, millis, one_of
from streamsdsl.errors import InvalidArgumentError
from streamsdsl.semantics.joiners import Joiner, for_key
from streamsdsl.semantics.tables import DROP_NULL_KEY, DROP_NULL_VALUE, Output, key_bytes

__all__ = [
    "LEFT", "RIGHT", "JoinWindowsSpec", "StreamJoinClose", "StreamJoinResult", "StreamJoinSpec", "StreamJoinState",
    "JoinClock", "StreamJoinKernel", "StreamJoinKernelStep", "StreamJoinStep", "stream_join_close", "stream_join_operator_step",
    "stream_join_reference_run",
    "stream_join_step", "stream_join_timer_threshold",
]

LEFT = "left"
RIGHT = "right"
_SIDES = (LEFT, RIGHT)
#: Kafka's outer-store key layout puts the right side before the left at equal timestamps.
_SIDE_RANK = {RIGHT: 0, LEFT: 1}
_DAY_MS = 24 * 60 * 60 * 1000
_NO_TIME = -1
_MAX = 2**63 - 1



def _window_size(inst: JoinWindowsSpec, attribute: attrs.Attribute[Any], value: int) -> None:
    if inst.before + value < 0:
        raise InvalidArgumentError(
            f"'before' + 'after' must be >= 0 ms (got {inst.before} + {value} = {inst.before + value}). "
            "A join window [t - before, t + after] cannot be empty; use e.g. "
            "JoinWindows.of_time_difference_with_no_grace(timedelta(seconds=5))."
        )


@attrs.frozen
class JoinWindowsSpec:
    """``JoinWindows``: a left record at ``t`` joins right records in ``[t - before, t + after]``
    (ms); ``grace`` (ms) keeps buffers and held records after the window; the spurious-result
    fix holds non-joined records until their window closes.

    Examples
    --------
    >>> JoinWindowsSpec.of_time_difference_with_no_grace(100)
    JoinWindowsSpec(before=100, after=100, grace=0, spurious_result_fix=True)
    >>> JoinWindowsSpec.of(100)
    JoinWindowsSpec(before=100, after=100, grace=86399800, spurious_result_fix=False)
    >>> JoinWindowsSpec(10, -20, 0)
    Traceback (most recent call last):
    ...
    streamsdsl.errors.InvalidArgumentError: 'before' + 'after' must be >= 0 ms (got 10 + -20 = -10). A join window [t - before, t + after] cannot be empty; use e.g. JoinWindows.of_time_difference_with_no_grace(timedelta(seconds=5)).
    """

    before: int = attrs.field(converter=millis("before"))
    after: int = attrs.field(converter=millis("after"), validator=_window_size)
    grace: int = duration_field("grace", positive=False, fix="Use 0 to keep no record after its window.")
    spurious_result_fix: bool = True

    @classmethod
    def of_time_difference_and_grace(cls, difference: int, grace: int) -> JoinWindowsSpec:
        return cls(_non_negative(difference), _non_negative(difference), grace)

    @classmethod
    def of_time_difference_with_no_grace(cls, difference: int) -> JoinWindowsSpec:
        return cls(_non_negative(difference), _non_negative(difference), 0)

    @classmethod
    def of(cls, difference: int) -> JoinWindowsSpec:
        """The deprecated ``JoinWindows.of``: grace ``max(24 h - 2 * difference, 0)``, fix off."""
        d = _non_negative(difference)
        return cls(d, d, max(_DAY_MS - 2 * d, 0), spurious_result_fix=False)

    @property
    def size(self) -> int:
        return self.before + self.after

    @property
    def retention(self) -> int:
        """How long a side's buffer keeps a record: ``before + after + grace`` ms."""
        return self.before + self.after + self.grace


def _non_negative(difference: Any) -> int:
    ms = millis("time_difference")(difference)
    if ms < 0:
        raise InvalidArgumentError(f"'time_difference' must be >= 0 ms (got {ms}). Use 0 to join equal timestamps only.")
    return ms


_kind = one_of(("inner", "left", "outer"), "stream-stream join")


@attrs.frozen
class StreamJoinSpec:
    """A stream–stream join: its kind and its `JoinWindowsSpec`."""

    kind: Literal["inner", "left", "outer"] = attrs.field(validator=_kind)
    windows: JoinWindowsSpec

    def outer_side(self, side: str) -> bool:
        """Does a record of ``side`` without a match produce a null-join?"""
        return self.kind == "outer" or (self.kind == "left" and side == LEFT)

    @property
    def holds(self) -> bool:
        """Are non-joined records held until their window closes (the shared outer store)?"""
        return self.kind != "inner" and self.windows.spurious_result_fix

    def window_of(self, side: str) -> tuple[int, int]:
        """(before, after) as seen by a record of ``side`` (the right side mirrors the window)."""
        w = self.windows
        return (w.before, w.after) if side == LEFT else (w.after, w.before)

    def hold_threshold(self, ts: int, side: str) -> int:
        """A held record of ``side`` at ``ts`` is emitted at the first stream time greater than this."""
        w = self.windows
        return ts + (w.after if side == LEFT else w.before) + w.grace


def _other(side: str) -> str:
    if side not in _SIDES:
        raise InvalidArgumentError(f"a join record's side must be 'left' or 'right' (got {side!r}).")
    return RIGHT if side == LEFT else LEFT


@attrs.frozen
class StreamJoinState:
    """One key's join state: each side's buffered ``(ts, value)`` records in arrival order, and
    the held (not yet joined) ``(ts, side, value)`` records in arrival order."""

    left: tuple[tuple[int, Any], ...] = ()
    right: tuple[tuple[int, Any], ...] = ()
    held: tuple[tuple[int, str, Any], ...] = ()

    def buffer(self, side: str) -> tuple[tuple[int, Any], ...]:
        return self.left if side == LEFT else self.right

    def is_empty(self) -> bool:
        return not (self.left or self.right or self.held)

    def to_plain(self) -> list[list[list[Any]]]:
        """``[left, right, held]`` as lists of lists (an operator's state value)."""
        return [[list(r) for r in self.left], [list(r) for r in self.right], [list(h) for h in self.held]]

    @classmethod
    def from_plain(cls, plain: Sequence[Sequence[Sequence[Any]]] | None) -> StreamJoinState:
        if not plain:
            return cls()
        left, right, held = plain
        return cls(tuple((int(t), v) for t, v in left), tuple((int(t), v) for t, v in right),
                   tuple((int(t), str(s), v) for t, s, v in held))


@attrs.frozen
class StreamJoinStep:
    """One record applied to one key: the new state, the forwarded records (in order), whether
    the record was held, and the drop reason (``None``: not dropped)."""

    state: StreamJoinState | None
    outputs: tuple[Output, ...] = ()
    held: bool = False
    dropped: str | None = None


@attrs.frozen
class StreamJoinClose:
    """Stream time reached for one key: the held records emitted now (null-joins) and the state."""

    state: StreamJoinState
    outputs: tuple[Output, ...] = ()


def _null_join(joiner: Callable[[Any, Any], Any], side: str, value: Any) -> Any:
    return joiner(value, None) if side == LEFT else joiner(None, value)


def stream_join_step(spec: StreamJoinSpec, state: StreamJoinState | None, side: str, key: Any, value: Any, ts: int,
                     stream_time: int, joiner: Joiner, *, other_store_time: int | None = None) -> StreamJoinStep:
    """Join one record of ``side`` (``"left"``/``"right"``) with its key's state.

    ``stream_time`` already includes ``ts``; ``other_store_time`` is the max timestamp put into
    the other side's buffer so far (over all keys; Kafka's cut-off), by default ``stream_time``.
    Emitting expired held records is not part of this step (see `stream_join_close`).

    Examples
    --------
    >>> spec = StreamJoinSpec("inner", JoinWindowsSpec.of_time_difference_with_no_grace(10))
    >>> s = stream_join_step(spec, StreamJoinState(), "left", "k", "A", 5, 5, lambda l, r: l + r).state
    >>> stream_join_step(spec, s, "right", "k", "b", 15, 15, lambda l, r: l + r).outputs
    (Output(key='k', value='Ab', timestamp=15),)
    """
    other = _other(side)
    joiner = for_key(joiner, key)
    if key is None or value is None:
        if key is None and value is not None and spec.outer_side(side):
            return StreamJoinStep(state, (Output(key, _null_join(joiner, side, value), ts),))
        return StreamJoinStep(state, dropped=DROP_NULL_KEY if key is None else DROP_NULL_VALUE)
    state = state or StreamJoinState()
    before, after = spec.window_of(side)
    time_from = max(0, ts - before)
    time_to = max(0, ts + after)
    cutoff = (stream_time if other_store_time is None else other_store_time) - spec.windows.retention + 1
    lo = max(time_from, cutoff)
    matches = sorted((r for r in state.buffer(other) if lo <= r[0] <= time_to), key=operator.itemgetter(0))
    outputs: list[Output] = []
    held = state.held
    for other_ts, other_value in matches:
        if held:
            held = tuple(h for h in held if not (h[0] == other_ts and h[1] == other))
        joined = joiner(value, other_value) if side == LEFT else joiner(other_value, value)
        outputs.append(Output(key, joined, max(ts, other_ts)))
    holding = False
    if not matches and spec.outer_side(side):
        if not spec.holds or time_to < stream_time:
            outputs.append(Output(key, _null_join(joiner, side, value), ts))
        else:
            held = (*held, (ts, side, value))
            holding = True
    record = ((ts, value),)
    new = (attrs.evolve(state, left=state.left + record, held=held) if side == LEFT
           else attrs.evolve(state, right=state.right + record, held=held))
    return StreamJoinStep(new, tuple(outputs), holding)


def _expired_held(spec: StreamJoinSpec, state: StreamJoinState, stream_time: int) -> list[int]:
    return [i for i, (ts, side, _) in enumerate(state.held) if spec.hold_threshold(ts, side) < stream_time]


def stream_join_close(spec: StreamJoinSpec, state: StreamJoinState, key: Any, stream_time: int, joiner: Joiner, *,
                      left_store_time: int | None = None, right_store_time: int | None = None) -> StreamJoinClose:
    """Stream time ``stream_time`` reached for one key: emit its expired held records as
    null-joins, ordered (ts, right before left, arrival), and drop buffered records no read
    returns any more (older than ``store_time - retention + 1``; the store times default to
    ``stream_time``).

    Examples
    --------
    >>> spec = StreamJoinSpec("outer", JoinWindowsSpec.of_time_difference_with_no_grace(10))
    >>> state = StreamJoinState(held=((3, "left", "A"), (1, "right", "b")))
    >>> stream_join_close(spec, state, "k", 14, lambda l, r: f"{l}+{r}").outputs
    (Output(key='k', value='None+b', timestamp=1), Output(key='k', value='A+None', timestamp=3))
    """
    expired = _expired_held(spec, state, stream_time)
    joiner = for_key(joiner, key)
    outputs: tuple[Output, ...] = ()
    held = state.held
    if expired:
        chosen = sorted(expired, key=lambda i: (held[i][0], _SIDE_RANK[held[i][1]], i))
        outputs = tuple(Output(key, _null_join(joiner, held[i][1], held[i][2]), held[i][0]) for i in chosen)
        gone = set(expired)
        held = tuple(h for i, h in enumerate(held) if i not in gone)
    retention = spec.windows.retention
    left_cut = (stream_time if left_store_time is None else left_store_time) - retention + 1
    right_cut = (stream_time if right_store_time is None else right_store_time) - retention + 1
    left = tuple(r for r in state.left if r[0] >= left_cut)
    right = tuple(r for r in state.right if r[0] >= right_cut)
    if not expired and len(left) == len(state.left) and len(right) == len(state.right):
        return StreamJoinClose(state)
    return StreamJoinClose(StreamJoinState(left, right, held), outputs)


def stream_join_timer_threshold(spec: StreamJoinSpec, state: StreamJoinState) -> int | None:
    """When the key next needs `stream_join_close`: at the first stream time greater than this
    (the earliest held-record threshold or buffer expiry); ``None`` when the state is empty."""
    thresholds = [spec.hold_threshold(ts, side) for ts, side, _ in state.held]
    retention = spec.windows.retention
    thresholds += [ts + retention - 1 for ts, _ in (*state.left, *state.right)]
    return min(thresholds) if thresholds else None


def stream_join_operator_step(spec: StreamJoinSpec, state: StreamJoinState | None, side: str, key: Any, value: Any,
                              ts: int, stream_time: int, joiner: Joiner, *,
                              other_store_time: int | None = None) -> StreamJoinStep:
    """What a per-key operator does with one record: when the record is in order (``ts ==
    stream_time``), first `stream_join_close` (the key's expired held records come out before
    the record's own results, as in Kafka), then `stream_join_step`. The close keeps what the
    other side's store still returns (cut at ``other_store_time``, as the step reads it); the
    record's own side is cut at ``stream_time``, its store's time once the record is in."""
    emitted: tuple[Output, ...] = ()
    if key is not None and value is not None and state is not None and spec.holds and ts == stream_time:
        other = {"left_store_time": other_store_time} if side == RIGHT else {"right_store_time": other_store_time}
        close = stream_join_close(spec, state, key, stream_time, joiner, **other)
        state, emitted = close.state, close.outputs
    step = stream_join_step(spec, state, side, key, value, ts, stream_time, joiner, other_store_time=other_store_time)
    return attrs.evolve(step, outputs=emitted + step.outputs) if emitted else step


@attrs.frozen
class StreamJoinResult:
    """A reference run: the forwarded records in Kafka's order, the drop reasons, the final
    per-key states and the stream time."""

    outputs: list[Output]
    dropped: list[str]
    states: dict[Any, StreamJoinState]
    stream_time: int


def stream_join_reference_run(records: Iterable[tuple[str, Any, Any, int]], spec: StreamJoinSpec, joiner: Joiner,
                              *, key_order: Callable[[Any], Any] = key_bytes) -> StreamJoinResult:
    """Run ``(side, key, value, ts)`` records through the join exactly as Kafka Streams'
    TopologyTestDriver does (one partition, pipe order, emit interval 0).

    On top of `stream_join_step` this adds what only a whole-partition view has: the per-side
    buffer cut-off times, and the scan of the shared outer store on every in-order record —
    skipped while ``min_time + after(processing side) + grace >= stream_time``, ordered
    (ts, right before left, ``key_order(key)``), stopping once both sides met an open record,
    with ``min_time`` left at the timestamp of the last record the scan looked at
    (``KStreamKStreamJoin.emitNonJoinedOuterRecords``).
    """
    kernel = StreamJoinKernel(spec, joiner, key_order=key_order)
    outputs: list[Output] = []
    dropped: list[str] = []
    for side, key, value, ts in records:
        step = kernel.process(side, key, value, ts)
        outputs.extend(step.scanned)
        outputs.extend(step.outputs)
        if step.dropped:
            dropped.append(step.dropped)
    return StreamJoinResult(outputs, dropped, dict(kernel.states), kernel.stream_time)


@attrs.frozen
class StreamJoinKernelStep:
    """One record through the join: ``scanned``, the held records of any key the shared outer
    store's scan emitted first (no headers: not this record's); ``outputs``, the record's own
    results; ``dropped``, the drop reason (``None``: not dropped)."""

    scanned: tuple[Output, ...] = ()
    outputs: tuple[Output, ...] = ()
    dropped: str | None = None


class StreamJoinKernel:
    """A stream-stream join over all its keys, as Kafka Streams runs it in one task: one shared
    stream time, per-side store times (the buffers' cut-off), the shared outer store's scan on
    every in-order record (skipped while ``min_time + after(processing side) + grace >=
    stream_time``), ordered (ts, right before left, ``key_order(key)``), stopping once both
    sides met an open record (``KStreamKStreamJoin.emitNonJoinedOuterRecords``).

    ``states`` is the state I/O: key → `StreamJoinState`."""

    def __init__(self, spec: StreamJoinSpec, joiner: Joiner, *, key_order: Callable[[Any], Any] = key_bytes,
                 states: MutableMapping[Any, StreamJoinState] | None = None, kafka_scan: bool = True) -> None:
        self.spec, self.joiner, self.key_order = spec, joiner, key_order
        #: Kafka's scan (skipped while ``min_time`` says nothing can have expired, stopped at the
        #: first open record of each side); ``False``: every in-order record emits every held
        #: record that has expired (streamsdsl's documented rule, which the Spark plan follows).
        self.kafka_scan = kafka_scan
        self.states: MutableMapping[Any, StreamJoinState] = {} if states is None else states
        self.store_time = {LEFT: _NO_TIME, RIGHT: _NO_TIME}
        self.stream_time = _NO_TIME
        self.min_time = _MAX

    def times(self) -> tuple[int, int, int, int]:
        """The kernel's scalars (stream time, store times, scan floor), to save and restore."""
        return (self.stream_time, self.store_time[LEFT], self.store_time[RIGHT], self.min_time)

    def restore(self, times: tuple[int, int, int, int]) -> None:
        self.stream_time, self.store_time[LEFT], self.store_time[RIGHT], self.min_time = times

    def process(self, side: str, key: Any, value: Any, ts: int, *,
                clock: JoinClock | None = None) -> StreamJoinKernelStep:
        """One record of ``side``. Without ``clock`` the kernel keeps the stream and store times
        over every key it holds and scans the shared outer store (the direct engine). A host that
        holds one key at a time passes the ``clock`` it knows (a Spark operator: the plan's times,
        or the watermark raised by the key's records) and emits expired held records itself with
        `expire` (Kafka's scan over all keys is the plan's placement of them)."""
        spec, joiner = self.spec, self.joiner
        if clock is not None:
            step = stream_join_step(spec, self.states.get(key), side, key, value, ts, clock.stream_time, joiner,
                                    other_store_time=clock.other_store_time)
            if not step.dropped and key is not None and step.state is not None:
                self.states[key] = step.state
            return StreamJoinKernelStep(outputs=step.outputs, dropped=step.dropped)
        self.stream_time = stream_time = max(self.stream_time, ts)
        if key is None or value is None:
            step = stream_join_step(spec, None, side, key, value, ts, stream_time, joiner)
            return StreamJoinKernelStep(outputs=step.outputs, dropped=step.dropped)
        scanned: list[Output] = []
        w = spec.windows
        if spec.holds and ts == stream_time:
            join_after = w.after if side == LEFT else w.before
            if not self.kafka_scan:
                _scan(spec, self.states, stream_time, joiner, self.key_order, scanned, whole=True)
            elif self.min_time + join_after + w.grace < stream_time:
                self.min_time = _scan(spec, self.states, stream_time, joiner, self.key_order, scanned)
        step = stream_join_step(spec, self.states.get(key), side, key, value, ts, stream_time, joiner,
                                other_store_time=self.store_time[_other(side)])
        assert step.state is not None
        self.states[key] = step.state
        if step.held:
            self.min_time = min(self.min_time, ts)
        self.store_time[side] = max(self.store_time[side], ts)
        return StreamJoinKernelStep(tuple(scanned), step.outputs)


    def expire(self, key: Any, stream_time: int, *, left_store_time: int | None = None,
               right_store_time: int | None = None) -> tuple[Output, ...]:
        """Stream time ``stream_time`` reached for ``key`` (a host of one key at a time): its
        expired held records as null-joins, and the buffered records no read returns any more
        leave its state (`stream_join_close`; the store times default to ``stream_time``)."""
        state = self.states.get(key)
        if state is None:
            return ()
        close = stream_join_close(self.spec, state, key, stream_time, self.joiner, left_store_time=left_store_time,
                                  right_store_time=right_store_time)
        if close.state is not state:
            self.states[key] = close.state
        return close.outputs


@attrs.frozen
class JoinClock:
    """The times a host of one key at a time gives `StreamJoinKernel.process`: stream time after
    the record, and the other side's store time (``None``: stream time)."""

    stream_time: int
    other_store_time: int | None = None


def _scan(spec: StreamJoinSpec, states: MutableMapping[Any, StreamJoinState], stream_time: int, joiner: Joiner,
          key_order: Callable[[Any], Any], outputs: list[Output], *, whole: bool = False) -> int:
    """One scan of the shared outer store; returns the new ``min_time``. ``whole``: do not stop
    at the first open record of each side (every expired record is emitted)."""
    entries = sorted(
        ((ts, _SIDE_RANK[side], key_order(key), i, key) for key, st in states.items()
         for i, (ts, side, _) in enumerate(st.held)),
        key=operator.itemgetter(0, 1, 2, 3),
    )
    min_time = _MAX
    open_sides: set[str] = set()
    emitted: dict[Any, set[int]] = {}
    for ts, rank, _, i, key in entries:
        min_time = ts
        if len(open_sides) == 2 and not whole:
            break
        _, side, value = states[key].held[i]
        if spec.hold_threshold(ts, side) >= stream_time:
            open_sides.add(side)
            continue
        outputs.append(Output(key, _null_join(for_key(joiner, key), side, value), ts))
        emitted.setdefault(key, set()).add(i)
    for key, gone in emitted.items():
        st = states[key]
        states[key] = attrs.evolve(st, held=tuple(h for i, h in enumerate(st.held) if i not in gone))
    return min_time
