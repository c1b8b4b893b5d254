"""Options of joins: `JoinWindows` and `StreamJoined` (a windowed stream–stream join), `Joined`
(a stream–table join).

Both are immutable (``attrs.frozen``) and validated when constructed: a `JoinWindows` whose
window would be empty or whose grace is negative cannot exist, whichever way it was built.
The join rules themselves live in `streamsdsl.semantics.stream_stream`.
"""

from __future__ import annotations

from typing import Any

import attrs

from streamsdsl._validation import millis, validate_name
from streamsdsl.values.serdes import PlanSerde, Serde, check_serde
from streamsdsl.errors import InvalidArgumentError
from streamsdsl.semantics.stream_stream import JoinWindowsSpec

__all__ = ["JoinWindows", "Joined", "StreamJoined"]


def _difference(value: Any, arg: str = "time_difference") -> int:
    ms = millis(arg)(value)
    if ms < 0:
        raise InvalidArgumentError(
            f"'{arg}' must be >= 0 ms (got {ms}). Use 0 to join records with equal timestamps only, e.g. "
            "JoinWindows.of_time_difference_with_no_grace(0).")
    return ms


def _grace(value: Any) -> int:
    ms = millis("grace")(value)
    if ms < 0:
        raise InvalidArgumentError(
            f"'grace' must be >= 0 ms (got {ms}). Use JoinWindows.of_time_difference_with_no_grace(time_difference) "
            "to keep no record after its window.")
    return ms


def _window(inst: JoinWindows, attribute: attrs.Attribute[Any], value: int) -> None:
    if inst.before_ms + value < 0:
        raise InvalidArgumentError(
            f"'before' + 'after' must be >= 0 ms (got {inst.before_ms} + {value} = {inst.before_ms + value}): the "
            "join window [t - before, t + after] would be empty. Use e.g. "
            "JoinWindows.of_time_difference_with_no_grace(100).after(0).")


@attrs.frozen
class JoinWindows:
    """The window of a stream–stream join (Kafka Streams' ``JoinWindows``).

    A left record at ``t`` joins every right record of its key with
    ``t - before <= t' <= t + after`` (ms, both ends inclusive). ``grace`` (ms) is how long after
    its window a record is still kept for late records of the other side; a left/outer join
    emits a record without a match (joined with ``None``) only once its window plus grace has
    closed (KIP-633). Build one with `of_time_difference_with_no_grace` or
    `of_time_difference_and_grace`; `before` and `after` return a copy with one side changed.

    Examples
    --------
    >>> JoinWindows.of_time_difference_with_no_grace(100).after(0)
    JoinWindows(before_ms=100, after_ms=0, grace_ms=0)
    >>> JoinWindows.of_time_difference_and_grace(-1, 0)
    Traceback (most recent call last):
    ...
    streamsdsl.errors.InvalidArgumentError: 'time_difference' must be >= 0 ms (got -1). Use 0 to join records with equal timestamps only, e.g. JoinWindows.of_time_difference_with_no_grace(0).
    """

    before_ms: int = attrs.field(converter=millis("before"))
    after_ms: int = attrs.field(converter=millis("after"), validator=_window)
    grace_ms: int = attrs.field(converter=_grace)

    @classmethod
    def of_time_difference_with_no_grace(cls, time_difference: Any) -> JoinWindows:
        """Records join when their timestamps differ by at most ``time_difference`` (ms or
        ``timedelta``); no grace: a record is dropped from the join as soon as its window closes."""
        d = _difference(time_difference)
        return cls(d, d, 0)

    @classmethod
    def of_time_difference_and_grace(cls, time_difference: Any, grace: Any) -> JoinWindows:
        """Like `of_time_difference_with_no_grace`, keeping records ``grace`` (ms) longer for
        out-of-order records of the other side."""
        d = _difference(time_difference)
        return cls(d, d, grace)

    def before(self, time_difference: Any) -> JoinWindows:
        """A copy whose window reaches ``time_difference`` ms before a left record's timestamp
        (may be negative as long as ``before + after >= 0``)."""
        return attrs.evolve(self, before_ms=millis("before")(time_difference))

    def after(self, time_difference: Any) -> JoinWindows:
        """A copy whose window reaches ``time_difference`` ms after a left record's timestamp
        (may be negative as long as ``before + after >= 0``)."""
        return attrs.evolve(self, after_ms=millis("after")(time_difference))

    @property
    def size_ms(self) -> int:
        """``before + after`` ms."""
        return self.before_ms + self.after_ms

    @property
    def spec(self) -> JoinWindowsSpec:
        """The semantics core's window (spurious-result fix on, as for every ``of_time_difference_*``)."""
        return JoinWindowsSpec(self.before_ms, self.after_ms, self.grace_ms)


def _serde(arg: str) -> Any:
    return attrs.field(default=None, converter=lambda v: check_serde(v, arg))


def _optional_name(arg: str) -> Any:
    def convert(value: Any) -> str | None:
        return None if value is None else validate_name(value, arg)

    return convert


@attrs.frozen
class StreamJoined:
    """Serdes and names of a stream–stream join (Kafka Streams' ``StreamJoined``).

    ``key_serde``, ``value_serde`` and ``other_value_serde`` are how the join holds the key, this
    stream's values and the other stream's values (default: each input's own serdes). ``name``
    names the join's processors (``<name>-this-windowed``, ``<name>-this-join``, ...);
    ``store_name`` names its stores (``<store_name>-this-join-store``, ...).

    Examples
    --------
    >>> from streamsdsl import Serdes
    >>> StreamJoined.with_serdes(Serdes.Integer(), Serdes.String(), Serdes.String()).with_name("enrich").name
    'enrich'
    """

    key_serde: PlanSerde | None = _serde("key_serde")
    value_serde: PlanSerde | None = _serde("value_serde")
    other_value_serde: PlanSerde | None = _serde("other_value_serde")
    name: str | None = attrs.field(default=None, converter=_optional_name("name"))
    store_name: str | None = attrs.field(default=None, converter=_optional_name("store_name"))

    @classmethod
    def with_serdes(cls, key: Serde | None = None, value: Serde | None = None,
                    other_value: Serde | None = None) -> StreamJoined:
        """The serdes of the key, this stream's values and the other stream's values."""
        return cls(key, value, other_value)

    def with_name(self, name: str) -> StreamJoined:
        """A copy naming the join's processors after ``name``."""
        return attrs.evolve(self, name=name)

    def with_store_name(self, store_name: str) -> StreamJoined:
        """A copy naming the join's stores after ``store_name``."""
        return attrs.evolve(self, store_name=store_name)


def _grace(value: Any) -> int | None:
    if value is None:
        return None
    ms = millis("grace")(value)
    if ms < 0:
        raise InvalidArgumentError(
            f"'grace' must be >= 0 ms (got {ms}). Pass how long a stream record waits for late table "
            "updates, e.g. Joined.with_grace_period(timedelta(seconds=10)).")
    return ms


@attrs.frozen
class Joined:
    """Options of a stream–table join (Kafka Streams' ``Joined``): the processor's ``name`` and
    a grace period (KIP-923).

    With ``grace_period_ms`` the join holds each stream record in a buffer (the store
    ``<join name>-Buffer``) until the buffer's stream time (the largest timestamp buffered) has
    passed the record's timestamp plus the grace period, and then joins it with the table's
    version as of the record's timestamp: table updates that arrive late, within the grace
    period, still reach it. A record older than that joins at once. The table must be versioned
    (``Stores.persistent_versioned_key_value_store``) with a history retention at least the grace
    period; see ``docs/joins.md``.

    Examples
    --------
    >>> from datetime import timedelta
    >>> Joined.with_grace_period(timedelta(seconds=2)).with_name("enrich")
    Joined(name='enrich', grace_period_ms=2000)
    >>> Joined.with_grace_period(-1)
    Traceback (most recent call last):
    ...
    streamsdsl.errors.InvalidArgumentError: 'grace' must be >= 0 ms (got -1). Pass how long a stream record waits for late table updates, e.g. Joined.with_grace_period(timedelta(seconds=10)).
    """

    name: str | None = attrs.field(default=None, converter=_optional_name("name"))
    grace_period_ms: int | None = attrs.field(default=None, converter=_grace)

    @classmethod
    def as_(cls, name: str) -> Joined:
        """Options naming the join's processor."""
        return cls(name)

    @classmethod
    def with_grace_period(cls, grace: Any) -> Joined:
        """Options with a grace period (``int`` ms or ``timedelta``, ``>= 0``)."""
        return cls(None, grace)

    def with_name(self, name: str) -> Joined:
        """A copy naming the join's processor."""
        return attrs.evolve(self, name=name)

    def grace_period(self, grace: Any) -> Joined:
        """A copy with this grace period (Kafka's ``withGracePeriod`` on an instance)."""
        return attrs.evolve(self, grace_period_ms=grace)
