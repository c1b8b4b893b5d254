"""Foreign-key table–table join (KIP-213: ``KTable#join`` / ``leftJoin`` with a foreign-key
extractor), non-versioned tables.

Kafka Streams runs it as three processors on two sub-topologies, joined by two internal topics
(``KI/foreignkeyjoin/``); the rules below are theirs, stage by stage, and so is the state:

1. **Subscription send** (``SubscriptionSendProcessorSupplier``), per left (primary) key. The
   left table sends old values; its ``Change(new, old)`` becomes subscription records keyed by
   foreign key, each with an instruction, the left key and the "hash" of the new left value
   (here the value itself; ``None`` when ``new`` is a tombstone):

   - **inner join**: with an old value whose foreign key is ``None``, or a new value whose
     foreign key is ``None``, the record is **dropped** (counted; nothing is retracted — the old
     subscription stays, and a later response through it is stale, see 3). A changed foreign key
     sends ``DELETE_KEY_NO_PROPAGATE`` to the old one, then ``PROPAGATE_NULL_IF_NO_FK_VAL_AVAILABLE``
     to the new one (the same instruction when the key did not change); a delete sends
     ``DELETE_KEY_AND_PROPAGATE`` to the old key; a first value sends
     ``PROPAGATE_ONLY_IF_FK_VAL_AVAILABLE``.
   - **left join**: with an old value whose foreign key is not ``None`` and differs from the new
     one (a delete's new key is ``None``), ``DELETE_KEY_AND_PROPAGATE`` to the old key; then,
     whenever there is an old or a new value, ``PROPAGATE_NULL_IF_NO_FK_VAL_AVAILABLE`` to the
     new key, also when that is ``None``. A left join therefore forwards twice for a changed
     foreign key (``joiner(left, None)`` from the old one, then the new match) and twice for a
     delete (two tombstones).

2. **Subscription receive and join** (``SubscriptionReceiveProcessorSupplier``,
   ``SubscriptionJoinProcessorSupplier``, ``ForeignTableJoinProcessorSupplier``), per foreign
   key: the subscription store holds ``(left key -> hash, timestamp)`` per foreign key; the
   right table's value is read from its store.

   - A subscription is stored (``DELETE_*``: removed) and answered: ``DELETE_KEY_AND_PROPAGATE``
     with no right value, ``PROPAGATE_NULL_IF_NO_FK_VAL_AVAILABLE`` with the right value or none,
     ``PROPAGATE_ONLY_IF_FK_VAL_AVAILABLE`` only when there is a right value,
     ``DELETE_KEY_NO_PROPAGATE`` never. The response's timestamp is the latest of the
     subscription's and the right value's. A ``None`` foreign key (left join) is answered
     without a right value and not stored.
   - A right table update answers **every** subscriber of its key (in the order of their
     serialized left keys, the store's prefix scan) with its new value (``None``: a delete),
     under the **right record's** timestamp.

3. **Response resolve** (``ResponseJoinProcessorSupplier``), per left key: a response whose hash
   is not the current left value's (``None`` for an absent key) is stale and **dropped**
   (counted). Else the result is ``None`` (a tombstone) when there is no right value and the
   join is inner or the left key is absent, else ``joiner(left, right)``. The result table
   (``KTABLE-FK-JOIN-OUTPUT``) forwards it; materialized (a store with a record cache), it does
   not forward a delete of a key that has no result.

Within one input record everything happens before the next record is read (the test driver's
internal topics), so the responses of a record are resolved against the left value the record
left behind. The per-stage steps (`fk_send_step`, `fk_subscription_step`, `fk_foreign_step`,
`fk_resolve_step`) are what a keyed operator per stage runs; `fk_join_reference_run` chains
them over whole-table state in Kafka's order.

Examples
--------
>>> spec = FkJoinSpec("inner")
>>> fk, pair = (lambda k, v: v.split("|")[0]), (lambda l, r: f"{l}+{r}")
>>> out, drops = fk_join_reference_run([("left", "k1", "A|1", 10), ("right", "A", "ra", 5),
...                                     ("left", "k1", "B|1", 30)], spec, fk, pair)
>>> [(o.key, o.change.new, o.timestamp) for o in out]
[('k1', 'A|1+ra', 5), ('k1', None, 30)]
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Literal, Sequence

import attrs

from streamsdsl._validation import one_of
from streamsdsl.errors import InvalidArgumentError
from streamsdsl.semantics.joiners import Joiner, for_key
from streamsdsl.semantics.table_table import table_side_step
from streamsdsl.semantics.tables import Change, KeyedChange, TableValue, key_bytes

__all__ = [
    "DELETE_KEY_AND_PROPAGATE", "DELETE_KEY_NO_PROPAGATE", "DROP_NULL_FOREIGN_KEY", "DROP_STALE_RESPONSE",
    "PROPAGATE_NULL_IF_NO_FK_VAL_AVAILABLE", "PROPAGATE_ONLY_IF_FK_VAL_AVAILABLE", "FkJoinSpec", "ForeignState",
    "ResolveState", "Response", "SendStep", "Subscription", "fk_foreign_step", "fk_join_reference_run",
    "fk_resolve_step", "fk_send_step", "fk_subscription_step", "fk_table_step",
]

LEFT = "left"
RIGHT = "right"

#: Kafka's ``SubscriptionWrapper.Instruction``.
DELETE_KEY_NO_PROPAGATE = "DELETE_KEY_NO_PROPAGATE"
DELETE_KEY_AND_PROPAGATE = "DELETE_KEY_AND_PROPAGATE"
PROPAGATE_NULL_IF_NO_FK_VAL_AVAILABLE = "PROPAGATE_NULL_IF_NO_FK_VAL_AVAILABLE"
PROPAGATE_ONLY_IF_FK_VAL_AVAILABLE = "PROPAGATE_ONLY_IF_FK_VAL_AVAILABLE"
INSTRUCTIONS = (DELETE_KEY_NO_PROPAGATE, DELETE_KEY_AND_PROPAGATE, PROPAGATE_NULL_IF_NO_FK_VAL_AVAILABLE,
                PROPAGATE_ONLY_IF_FK_VAL_AVAILABLE)

#: Drop reasons (both counted in ``dropped-records``, as Kafka's processors record them).
DROP_NULL_FOREIGN_KEY = "null_foreign_key"
DROP_STALE_RESPONSE = "stale_response"

Extractor = Callable[[Any, Any], Any]  # (left key, left value) -> foreign key

_kind = one_of(("inner", "left"), "foreign-key join")


@attrs.frozen
class FkJoinSpec:
    """A foreign-key join: its kind, whether its result is materialized, whether the stores have
    a record cache (`streamsdsl.semantics.table_table.TableJoinSpec.cached`) and which tables
    (``"left"``, ``"right"``) are read through a filter."""

    kind: Literal["inner", "left"] = attrs.field(validator=_kind)
    materialized: bool = False
    cached: bool = True
    filtered_sides: frozenset[str] = attrs.field(default=frozenset(), converter=frozenset)


@attrs.frozen
class Subscription:
    """A subscription record (``SubscriptionWrapper``) keyed by ``foreign_key``: the left
    ``key``, the left value it was sent for (Kafka's value hash; ``None``: a delete) and the left
    record's ``timestamp``."""

    foreign_key: Any
    instruction: str = attrs.field(validator=attrs.validators.in_(INSTRUCTIONS))
    key: Any
    value: Any
    timestamp: int


@attrs.frozen
class Response:
    """A response record (``SubscriptionResponseWrapper``) keyed by the left ``key``: the left
    value its subscription was sent for (the hash), the right value (``None``: none) and the
    timestamp."""

    key: Any
    value: Any
    foreign: Any
    timestamp: int


@attrs.frozen
class SendStep:
    """A left record's effect on its key: the left table's new state, the subscriptions sent
    (in order) and the drop reason (``None``: not dropped)."""

    state: TableValue | None
    subscriptions: tuple[Subscription, ...] = ()
    dropped: str | None = None


@attrs.frozen
class ForeignState:
    """One foreign key's state: the right table's value and the subscribers, ``(left key, hash,
    timestamp)`` in serialized-key order (the subscription store's prefix scan)."""

    right: TableValue | None = None
    subscribers: tuple[tuple[Any, Any, int], ...] = ()

    @property
    def empty(self) -> bool:
        return self.right is None and not self.subscribers

    def to_plain(self) -> list[Any]:
        return [None if self.right is None else self.right.to_plain(), [list(s) for s in self.subscribers]]

    @classmethod
    def from_plain(cls, plain: Sequence[Any] | None) -> ForeignState:
        if not plain:
            return cls()
        right, subs = plain
        return cls(TableValue.from_plain(right), tuple((k, v, int(ts)) for k, v, ts in subs))

    def subscribe(self, key: Any, value: Any, ts: int) -> ForeignState:
        subs = {k: (k, v, t) for k, v, t in self.subscribers}
        subs[key] = (key, value, ts)
        return attrs.evolve(self, subscribers=tuple(sorted(subs.values(), key=lambda s: key_bytes(s[0]))))

    def unsubscribe(self, key: Any) -> ForeignState:
        return attrs.evolve(self, subscribers=tuple(s for s in self.subscribers if s[0] != key))


@attrs.frozen
class ResolveState:
    """One left key's state where responses are resolved: the left table's current value and
    the result store's row (``result``: ``(value, timestamp)``; ``None``: no row)."""

    left: TableValue | None = None
    result: tuple[Any, int] | None = None

    @property
    def empty(self) -> bool:
        return self.left is None and self.result is None


def fk_table_step(spec: FkJoinSpec, side: str, this: TableValue | None, key: Any, value: Any, ts: int, *,
                  tombstone: bool | None = None) -> Any:
    """One record of the ``side`` table (`streamsdsl.semantics.table_table.table_side_step`:
    both tables are materialized, Kafka reads them through their value getters)."""
    if side not in (LEFT, RIGHT):
        raise InvalidArgumentError(f"a join record's side must be 'left' or 'right' (got {side!r}).")
    return table_side_step(this, key, value, ts, tombstone=tombstone, cached=spec.cached,
                           filtered=side in spec.filtered_sides)


def _subscriptions(kind: str, key: Any, change: Change, ts: int, extractor: Extractor
                   ) -> tuple[tuple[Subscription, ...], str | None]:
    """``SubscriptionSendProcessorSupplier``: the subscriptions a left ``change`` sends."""
    new, old = change.new, change.old

    def sub(fk: Any, instruction: str) -> Subscription:
        return Subscription(fk, instruction, key, new, ts)

    if kind == "left":
        subs: list[Subscription] = []
        if old is not None:
            old_fk = extractor(key, old)
            new_fk = None if new is None else extractor(key, new)
            if old_fk is not None and (new_fk is None or key_bytes(new_fk) != key_bytes(old_fk)):
                subs.append(sub(old_fk, DELETE_KEY_AND_PROPAGATE))
            subs.append(sub(new_fk, PROPAGATE_NULL_IF_NO_FK_VAL_AVAILABLE))
        elif new is not None:
            subs.append(sub(extractor(key, new), PROPAGATE_NULL_IF_NO_FK_VAL_AVAILABLE))
        return tuple(subs), None
    if old is not None:
        old_fk = extractor(key, old)
        if old_fk is None:
            return (), DROP_NULL_FOREIGN_KEY
        if new is None:
            return (sub(old_fk, DELETE_KEY_AND_PROPAGATE),), None
        new_fk = extractor(key, new)
        if new_fk is None:
            return (), DROP_NULL_FOREIGN_KEY
        moved = (sub(old_fk, DELETE_KEY_NO_PROPAGATE),) if key_bytes(new_fk) != key_bytes(old_fk) else ()
        return (*moved, sub(new_fk, PROPAGATE_NULL_IF_NO_FK_VAL_AVAILABLE)), None
    if new is not None:
        new_fk = extractor(key, new)
        if new_fk is None:
            return (), DROP_NULL_FOREIGN_KEY
        return (sub(new_fk, PROPAGATE_ONLY_IF_FK_VAL_AVAILABLE),), None
    return (), None


def fk_send_step(spec: FkJoinSpec, state: TableValue | None, key: Any, value: Any, ts: int, extractor: Extractor,
                 *, tombstone: bool | None = None) -> SendStep:
    """Apply one left-table record to its key: the left table's new state and the subscriptions
    it sends (stage 1).

    Examples
    --------
    >>> fk = lambda k, v: v[0]
    >>> s = fk_send_step(FkJoinSpec("inner"), None, "k", "A1", 1, fk)
    >>> [(x.foreign_key, x.instruction) for x in s.subscriptions]
    [('A', 'PROPAGATE_ONLY_IF_FK_VAL_AVAILABLE')]
    >>> s = fk_send_step(FkJoinSpec("left"), s.state, "k", "B1", 2, fk)
    >>> [(x.foreign_key, x.instruction) for x in s.subscriptions]
    [('A', 'DELETE_KEY_AND_PROPAGATE'), ('B', 'PROPAGATE_NULL_IF_NO_FK_VAL_AVAILABLE')]
    """
    source = fk_table_step(spec, LEFT, state, key, value, ts, tombstone=tombstone)
    if source.dropped:
        return SendStep(state, dropped=source.dropped)
    if source.forwarded is None:
        return SendStep(source.state)
    subs, dropped = _subscriptions(spec.kind, key, source.forwarded, ts, extractor)
    return SendStep(source.state, subs, dropped)


def _respond(sub: Subscription, right: TableValue | None) -> Response | None:
    """``SubscriptionJoinProcessorSupplier``: the answer to a stored subscription."""
    has = right is not None and right.value is not None
    ts = max(sub.timestamp, right.ts) if has and right is not None else sub.timestamp
    foreign = right.value if has and right is not None else None
    if sub.instruction == DELETE_KEY_AND_PROPAGATE:
        return Response(sub.key, sub.value, None, ts)
    if sub.instruction == PROPAGATE_NULL_IF_NO_FK_VAL_AVAILABLE:
        return Response(sub.key, sub.value, foreign, ts)
    if sub.instruction == PROPAGATE_ONLY_IF_FK_VAL_AVAILABLE:
        return Response(sub.key, sub.value, foreign, ts) if has else None
    return None  # DELETE_KEY_NO_PROPAGATE


def fk_subscription_step(state: ForeignState | None, sub: Subscription) -> tuple[ForeignState, Response | None]:
    """A subscription reaches its foreign key (stage 2): the key's new state and the response
    (``None``: none). A ``None`` foreign key (a left join's) is answered without a right value.

    Examples
    --------
    >>> s, r = fk_subscription_step(ForeignState(TableValue("ra", 9)),
    ...                             Subscription("A", "PROPAGATE_ONLY_IF_FK_VAL_AVAILABLE", "k", "A1", 4))
    >>> r, s.subscribers
    (Response(key='k', value='A1', foreign='ra', timestamp=9), (('k', 'A1', 4),))
    """
    state = state or ForeignState()
    if sub.foreign_key is None:
        return state, Response(sub.key, sub.value, None, sub.timestamp)
    if sub.instruction in (DELETE_KEY_AND_PROPAGATE, DELETE_KEY_NO_PROPAGATE):
        state = state.unsubscribe(sub.key)
    else:
        state = state.subscribe(sub.key, sub.value, sub.timestamp)
    return state, _respond(sub, state.right)


def fk_foreign_step(spec: FkJoinSpec, state: ForeignState | None, key: Any, value: Any, ts: int, *,
                    tombstone: bool | None = None) -> tuple[ForeignState, tuple[Response, ...], str | None]:
    """Apply one right-table record to its key (stage 2): the key's new state, a response to
    every subscriber (the new right value, the right record's timestamp) and the drop reason.

    Examples
    --------
    >>> s = ForeignState(None, (("k1", "A1", 3), ("k2", "A2", 4)))
    >>> fk_foreign_step(FkJoinSpec("inner"), s, "A", "ra", 2)[1]
    (Response(key='k1', value='A1', foreign='ra', timestamp=2), Response(key='k2', value='A2', foreign='ra', timestamp=2))
    """
    state = state or ForeignState()
    source = fk_table_step(spec, RIGHT, state.right, key, value, ts, tombstone=tombstone)
    if source.dropped:
        return state, (), source.dropped
    state = attrs.evolve(state, right=source.state)
    if source.forwarded is None:
        return state, (), None
    new = source.forwarded.new
    return state, tuple(Response(k, h, new, ts) for k, h, _ in state.subscribers), None


def fk_resolve_step(spec: FkJoinSpec, state: ResolveState | None, response: Response, joiner: Joiner
                    ) -> tuple[ResolveState, KeyedChange | None, str | None]:
    """A response reaches its left key (stage 3): the key's new state, the forwarded result
    (``None``: nothing) and the drop reason (a stale response).

    Examples
    --------
    >>> pair = lambda l, r: f"{l}+{r}"
    >>> s = ResolveState(TableValue("A1", 3))
    >>> fk_resolve_step(FkJoinSpec("left"), s, Response("k", "A1", None, 3), pair)[1]
    KeyedChange(key='k', change=Change(new='A1+None', old=None), timestamp=3)
    >>> fk_resolve_step(FkJoinSpec("left"), s, Response("k", "A0", "ra", 3), pair)[2]
    'stale_response'
    """
    state = state or ResolveState()
    current = None if state.left is None else state.left.value
    if response.value != current:
        return state, None, DROP_STALE_RESPONSE
    if response.foreign is None and (spec.kind == "inner" or current is None):
        result = None
    else:
        result = for_key(joiner, response.key)(current, response.foreign)
    if spec.materialized:
        if result is None and state.result is None and spec.cached:
            return state, None, None
        state = attrs.evolve(state, result=None if result is None else (result, response.timestamp))
    return state, KeyedChange(response.key, Change(result), response.timestamp), None


def fk_join_reference_run(records: Iterable[tuple[str, Any, Any, int]], spec: FkJoinSpec, extractor: Extractor,
                          joiner: Joiner) -> tuple[list[KeyedChange], list[str]]:
    """Run ``(side, key, value, ts)`` records in order, each to its end (its subscriptions, then
    their responses, as the test driver's internal topics do): the results and the drop reasons.

    Examples
    --------
    >>> run = [("left", "k", "A1", 5), ("left", "k", "B1", 6)]
    >>> out, _ = fk_join_reference_run(run, FkJoinSpec("left"), lambda k, v: v[0], lambda l, r: f"{l}+{r}")
    >>> [(o.change.new, o.timestamp) for o in out]
    [('A1+None', 5), ('B1+None', 6), ('B1+None', 6)]
    """
    resolved: dict[Any, ResolveState] = {}
    foreign: dict[Any, ForeignState] = {}
    out: list[KeyedChange] = []
    drops: list[str] = []
    for side, key, value, ts in records:
        if side == LEFT:
            current = resolved.get(key, ResolveState())
            send = fk_send_step(spec, current.left, key, value, ts, extractor)
            if send.dropped == DROP_NULL_FOREIGN_KEY or not send.dropped:
                resolved[key] = attrs.evolve(current, left=send.state)
            if send.dropped:
                drops.append(send.dropped)
            responses = []
            for sub in send.subscriptions:
                fstate, response = fk_subscription_step(foreign.get(sub.foreign_key), sub)
                if sub.foreign_key is not None:
                    foreign[sub.foreign_key] = fstate
                if response is not None:
                    responses.append(response)
        else:
            fstate, responses_t, dropped = fk_foreign_step(spec, foreign.get(key), key, value, ts)
            if dropped:
                drops.append(dropped)
                continue
            foreign[key] = fstate
            responses = list(responses_t)
        for response in responses:
            state, output, dropped = fk_resolve_step(spec, resolved.get(response.key), response, joiner)
            resolved[response.key] = state
            if dropped:
                drops.append(dropped)
            if output is not None:
                out.append(output)
    return out, drops
