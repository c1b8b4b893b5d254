"""Offset arithmetic of the Kafka source: pure functions, no broker and no Spark.

A position is a ``(topic, partition)`` key (`TopicPartitionKey`) mapped to an offset, the
next offset to read. This module holds:

* the checkpoint form of offsets, ``{"topic": {"0": 23}}`` (`offsets_to_json`,
  `offsets_from_json`);
* the ``startingOffsets``/``endingOffsets`` sentinels `EARLIEST` (``-2``) and `LATEST` (``-1``),
  the offsets a spec asks for (`requested_offsets`) and their replacement by the broker's
  values (`fill_sentinels`);
* micro-batch planning: the end of the next batch (`batch_end`), its admission-control
  split (`allocate_rate_limit`) and its per-partition ranges (`plan_ranges`);
* the partitions whose end on the broker fell below the query's position (`moved_back`: the
  topic was deleted and re-created).

The broker is asked elsewhere (`streamsdsl.io.client`); these functions only compute.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import NamedTuple

from streamsdsl.io.errors import KafkaOptionError

__all__ = [
    "EARLIEST",
    "LATEST",
    "OffsetRange",
    "OffsetSpec",
    "OffsetsJson",
    "TopicPartitionKey",
    "allocate_rate_limit",
    "batch_end",
    "fill_sentinels",
    "moved_back",
    "offsets_from_json",
    "offsets_to_json",
    "plan_ranges",
    "requested_offsets",
]

#: Sentinel offset of ``startingOffsets``/``endingOffsets`` JSON: the earliest available offset.
EARLIEST = -2
#: Sentinel offset of ``startingOffsets``/``endingOffsets`` JSON: the end of the partition.
LATEST = -1

#: A partition: ``(topic, partition)``.
TopicPartitionKey = tuple[str, int]
#: Offsets as they are in a checkpoint: ``{topic: {"partition": next_offset}}``.
OffsetsJson = dict[str, dict[str, int]]
#: A validated ``startingOffsets``/``endingOffsets`` option: ``"earliest"``, ``"latest"`` or JSON.
OffsetSpec = str | OffsetsJson


class OffsetRange(NamedTuple):
    """The offsets ``[start, end)`` of one partition that one Spark task reads."""

    topic: str
    partition: int
    start: int
    end: int


def offsets_from_json(offsets: Mapping[str, Mapping[str, int]] | None) -> dict[TopicPartitionKey, int]:
    """Checkpoint JSON (or ``None``) to ``{(topic, partition): offset}``.

    Examples
    --------
    >>> offsets_from_json({"t": {"1": 7, "0": 23}})
    {('t', 1): 7, ('t', 0): 23}
    >>> offsets_from_json(None)
    {}
    """
    out: dict[TopicPartitionKey, int] = {}
    for topic, parts in (offsets or {}).items():
        for part, offset in parts.items():
            out[(topic, int(part))] = int(offset)
    return out


def offsets_to_json(offsets: Mapping[TopicPartitionKey, int]) -> OffsetsJson:
    """``{(topic, partition): offset}`` to checkpoint JSON, sorted by topic and partition.

    Examples
    --------
    >>> offsets_to_json({("t", 10): 1, ("a", 0): 5, ("t", 2): 3})
    {'a': {'0': 5}, 't': {'2': 3, '10': 1}}
    """
    out: OffsetsJson = {}
    for (topic, part), offset in sorted(offsets.items()):
        out.setdefault(topic, {})[str(part)] = int(offset)
    return out


def requested_offsets(
    spec: OffsetSpec, tps: Sequence[TopicPartitionKey], name: str, *, default: int
) -> dict[TopicPartitionKey, int]:
    """The offset ``spec`` asks for on each partition of ``tps``, sentinels kept.

    ``"earliest"``/``"latest"`` give `EARLIEST`/`LATEST` everywhere. A JSON spec must list
    every partition of the topics it names; subscribed topics it does not name get
    ``default`` (`EARLIEST` or `LATEST`). `fill_sentinels` replaces the sentinels.

    Parameters
    ----------
    spec : str or dict
        The validated option (``KafkaSourceOptions.starting_offsets`` or ``ending_offsets``).
    tps : sequence of (str, int)
        The partitions that exist on the broker.
    name : str
        The option's name, for error messages.
    default : int
        The offset of partitions of topics the JSON does not name.

    Raises
    ------
    KafkaOptionError
        If the JSON names partitions that do not exist or omits partitions of a topic it names.

    Examples
    --------
    >>> tps = [("a", 0), ("a", 1), ("b", 0)]
    >>> requested_offsets({"a": {"0": 5, "1": -1}}, tps, "startingOffsets", default=EARLIEST)
    {('a', 0): 5, ('a', 1): -1, ('b', 0): -2}
    >>> requested_offsets("latest", tps, "startingOffsets", default=EARLIEST)
    {('a', 0): -1, ('a', 1): -1, ('b', 0): -1}
    """
    if spec == "earliest":
        return dict.fromkeys(tps, EARLIEST)
    if spec == "latest":
        return dict.fromkeys(tps, LATEST)
    assert isinstance(spec, dict)
    given = offsets_from_json(spec)
    unknown = sorted(set(given) - set(tps))
    if unknown:
        raise KafkaOptionError(
            f"option '{name}' names partitions that do not exist: "
            f"{', '.join(f'{t}-{p}' for t, p in unknown)}."
        )
    missing = [f"{t}-{p}" for t, p in tps if t in spec and (t, p) not in given]
    if missing:
        raise KafkaOptionError(
            f"option '{name}' must give an offset for every partition of the topics it names; "
            f"missing: {', '.join(missing)}. Use -2 for earliest or -1 for latest."
        )
    return {tp: given.get(tp, default) for tp in tps}


def fill_sentinels(
    wanted: Mapping[TopicPartitionKey, int],
    *,
    earliest: Mapping[TopicPartitionKey, int],
    latest: Mapping[TopicPartitionKey, int],
) -> dict[TopicPartitionKey, int]:
    """Replace `EARLIEST`/`LATEST` in ``wanted`` by the broker's offsets of that partition.

    Examples
    --------
    >>> fill_sentinels({("t", 0): -2, ("t", 1): -1, ("t", 2): 4},
    ...                earliest={("t", 0): 3}, latest={("t", 1): 9})
    {('t', 0): 3, ('t', 1): 9, ('t', 2): 4}
    """
    return {
        tp: earliest[tp] if v == EARLIEST else latest[tp] if v == LATEST else v for tp, v in wanted.items()
    }


def allocate_rate_limit(
    start: Mapping[TopicPartitionKey, int], end: Mapping[TopicPartitionKey, int], limit: int
) -> dict[TopicPartitionKey, int]:
    """Cap ``end`` so that at most ``limit`` offsets are read, shared by backlog.

    Each partition gets ``floor(limit * backlog / total)``; the offsets left over go one
    each to the partitions with the largest remainders (ties: topic, partition order). So a
    batch reads exactly ``min(limit, total backlog)`` offsets and always makes progress.
    The arithmetic is on integers: no rounding error, however large the offsets.
    A partition missing from ``start`` has no backlog (it stays at its ``end``).

    Examples
    --------
    >>> allocate_rate_limit({("t", 0): 0, ("t", 1): 0}, {("t", 0): 10, ("t", 1): 5}, 6)
    {('t', 0): 4, ('t', 1): 2}
    """
    backlog = {tp: max(0, end[tp] - start.get(tp, end[tp])) for tp in end}
    total = sum(backlog.values())
    if total <= limit:
        return dict(end)
    # share = limit * n / total = take + remainder / total
    take = {tp: limit * n // total for tp, n in backlog.items()}
    remainder = {tp: limit * n % total for tp, n in backlog.items()}
    left = limit - sum(take.values())
    by_remainder = sorted((tp for tp in backlog if remainder[tp]), key=lambda tp: (-remainder[tp], tp))
    for tp in by_remainder[:left]:
        take[tp] += 1
    return {tp: start.get(tp, end[tp]) + take[tp] for tp in end}


def batch_end(
    start: Mapping[TopicPartitionKey, int], latest: Mapping[TopicPartitionKey, int], limit: int | None
) -> dict[TopicPartitionKey, int]:
    """End offsets of the next micro-batch.

    Parameters
    ----------
    start : mapping
        Where each partition's next batch starts (partitions new to the query at their
        earliest offset).
    latest : mapping
        The broker's end offset of each partition that exists now.
    limit : int or None
        At most this many offsets in the batch (`allocate_rate_limit`); ``None``: no limit.

    Returns
    -------
    dict
        Every partition of ``latest`` (never before its start) and every partition of
        ``start`` that vanished from the broker, at its start.

    Examples
    --------
    Partition 2 is new (its start is its earliest offset), ``gone-0`` was deleted, and the
    broker's end of partition 0 is behind the query's position (the topic was re-created,
    `moved_back`): the batch plans nothing there.

    >>> batch_end({("t", 0): 5, ("t", 1): 0, ("t", 2): 0, ("gone", 0): 7},
    ...           {("t", 0): 3, ("t", 1): 8, ("t", 2): 4}, 6)
    {('t', 0): 5, ('t', 1): 4, ('t', 2): 2, ('gone', 0): 7}
    """
    end = {tp: max(offset, start.get(tp, 0)) for tp, offset in latest.items()}
    if limit is not None:
        end = allocate_rate_limit(start, end, limit)
    for tp, offset in start.items():
        end.setdefault(tp, offset)
    return end


def plan_ranges(start: Mapping[TopicPartitionKey, int], end: Mapping[TopicPartitionKey, int]) -> list[OffsetRange]:
    """One `OffsetRange` per partition of ``end`` (in its order) with offsets in ``[start, end)``.

    Every partition of ``end`` must be in ``start``.

    Examples
    --------
    >>> plan_ranges({("t", 0): 2, ("t", 1): 4}, {("t", 0): 5, ("t", 1): 4})
    [OffsetRange(topic='t', partition=0, start=2, end=5)]
    """
    return [
        OffsetRange(topic, part, start[(topic, part)], stop)
        for (topic, part), stop in end.items()
        if stop > start[(topic, part)]
    ]


def moved_back(
    start: Mapping[TopicPartitionKey, int], latest: Mapping[TopicPartitionKey, int]
) -> dict[TopicPartitionKey, int]:
    """Partitions whose end on the broker (``latest``) is below the query's position (``start``).

    A partition's end never moves back: the query only plans offsets up to an end the broker
    reported, so an end below the position means the partition lost records the query had
    already seen -- the topic was deleted and re-created (or the broker lost its data).

    Examples
    --------
    >>> moved_back({("t", 0): 3305, ("t", 1): 7, ("u", 0): 4}, {("t", 0): 12, ("t", 1): 7, ("t", 2): 0})
    {('t', 0): 12}
    """
    return {tp: end for tp, end in latest.items() if tp in start and end < start[tp]}
