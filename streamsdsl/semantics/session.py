"""Session windows (KIP-94): the per-record rule of ``KStreamSessionWindowAggregate``.

A key's state is its list of open sessions. `session_step` applies one record and
returns the new list plus the store operations Kafka Streams performs (deletes of merged-away
sessions, then one put). What is *forwarded* downstream is decided by the emit strategy:
on update the store operations pass through a `ChangeBuffer`
(Kafka's record cache); on close, `closed_sessions` yields each session once, when
stream time passes ``end + gap + grace``.

Sessions are ``[start, end]`` with both ends inclusive.
"""

from __future__ import annotations

import operator
from typing import Any, Iterable

import attrs

from streamsdsl.semantics.aggregation import AggFunctions


@attrs.frozen(order=True)
class Session:
    """One session of one key: its window and its aggregate (ordered by (end, start))."""

    end: int
    start: int
    agg: Any = attrs.field(order=False)

    @property
    def window(self) -> tuple[int, int]:
        return (self.start, self.end)


#: Sort key of sessions, (end, start): Kafka's iteration order (faster than attrs' ordering).
_END_START = operator.attrgetter("end", "start")


@attrs.frozen
class SessionStep:
    """The outcome of one record.

    ``dropped`` is ``"null-key"``, ``"late"`` or ``None``; ``deleted`` lists the sessions that
    were merged away (in Kafka's iteration order); ``put`` is the new or updated session.
    """

    sessions: tuple[Session, ...]
    dropped: str | None = None
    deleted: tuple[Session, ...] = ()
    put: Session | None = None


def close_time(stream_time: int, gap: int, grace: int) -> int:
    """Sessions ending before this time are closed (final)."""
    return stream_time - grace - gap


def session_step(
    sessions: Iterable[Session],
    key: Any,
    value: Any,
    ts: int,
    stream_time: int,
    gap: int,
    grace: int,
    fns: AggFunctions,
) -> SessionStep:
    """Apply one record (``stream_time`` already includes ``ts``) to a key's sessions.

    Follows KStreamSessionWindowAggregate.process: find every session with ``end >= ts - gap``
    and ``start <= ts + gap`` that is not closed; fold them, in (end, start) order, into
    ``initializer()`` with the merger; drop the record if the merged session is closed;
    otherwise delete the merged sessions (unless the result is the same ``[ts, ts]`` window),
    apply the aggregator and put the merged session.

    Examples
    --------
    >>> from streamsdsl.semantics.aggregation import AggFunctions
    >>> count = AggFunctions(lambda: 0, lambda k, v, a: a + 1, lambda k, a, b: a + b)
    >>> s1 = session_step((), "k", "v", 10, 10, 5, 0, count)
    >>> s2 = session_step(s1.sessions, "k", "v", 14, 14, 5, 0, count)
    >>> s2.put, s2.deleted
    (Session(end=14, start=10, agg=2), (Session(end=10, start=10, agg=1),))
    """
    current = sorted(sessions, key=_END_START)
    closing = close_time(stream_time, gap, grace)
    found = [s for s in current if s.end >= ts - gap and s.start <= ts + gap and s.end >= closing]
    agg = fns.initializer()
    start, end = ts, ts
    for s in found:
        agg = fns.merger(key, agg, s.agg) if fns.merger is not None else agg
        start, end = min(start, s.start), max(end, s.end)
    if end < closing:
        return SessionStep(tuple(current), dropped="late")
    merged = {id(s) for s in found}
    remaining = [s for s in current if id(s) not in merged]
    deleted: tuple[Session, ...] = ()
    if (start, end) != (ts, ts):
        deleted = tuple(found)
    agg = fns.aggregator(key, value, agg)
    put = Session(end, start, agg)
    return SessionStep(tuple(sorted([*remaining, put], key=_END_START)), deleted=deleted, put=put)


def closed_sessions(sessions: Iterable[Session], stream_time: int, gap: int, grace: int) -> tuple[list[Session], list[Session]]:
    """Split sessions into (closed, still open) at ``stream_time``; closed ones in (end, start) order.

    A session ``[s, e]`` is closed once ``e < stream_time - grace - gap``; from then on no record
    can merge into it (Kafka's retention makes it invisible) and on-close emission forwards it.
    """
    closing = close_time(stream_time, gap, grace)
    ordered = sorted(sessions, key=_END_START)
    return [s for s in ordered if s.end < closing], [s for s in ordered if s.end >= closing]


def close_threshold(session: Session, gap: int, grace: int) -> int:
    """The session closes at the first stream time strictly greater than this."""
    return session.end + gap + grace
