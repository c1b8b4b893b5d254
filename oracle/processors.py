"""The menu of processors the oracle harness may put into a topology (issue 39, item 6).

Every processor exists in both languages: here with streamsdsl's Processor API
(`streamsdsl.processor`, `streamsdsl.state`), in ``oracle/java/.../Processors.java`` with Kafka
Streams' (``api.Processor`` for ``process``, ``api.FixedKeyProcessor`` for ``process_values``),
line for line the same logic. A recipe of shape ``process`` (`oracle.recipe`) names one of them
(or two, one after the other) with its parameters and its store's options; `supplier` makes the
supplier streamsdsl is given (a `MenuProcessor`, which the spec names, as it names menu
functions), `store_builder` its store.

``dedup``
    A key-value store of the ids seen (the record's value, or with ``by="key"`` its key, as text:
    `oracle.menu.text`) with the timestamp of the first record of each. A first occurrence is
    forwarded unchanged, a record without an id (``None``) too, a repeat is not. A stream-time
    punctuator every ``interval`` ms deletes the ids first seen before the punctuation time minus
    ``horizon`` (collected over ``all()``, then deleted), so an id is forwarded again once purged.
``window_count``
    A per-key count in a window store of tumbling windows of ``size`` ms, retention
    ``retention`` ms: ``fetch(key, start)``, then ``put(key, count, start)``; each record is
    forwarded with that count as its value. A record with a ``None`` key is not counted and not
    forwarded (a window store has no ``None`` key).
``store_size``
    ``process`` only: keeps each key's latest value as text (a ``None`` value deletes the key, a
    ``None`` key is not stored) and forwards every record unchanged; a stream-time punctuator (a
    wall-clock one with ``punctuation="wall_clock"``) every ``interval`` ms forwards, with the punctuation time as its timestamp, ``("size",
    approximate_num_entries())`` (``emit="approximate"``), ``("size", the count of all())``
    (``"count"``) or every entry of ``all()`` in key order (``"entries"``). A punctuator of a
    ``FixedKeyProcessor`` can make no new record, in Kafka Streams as here.
"""

from __future__ import annotations

from typing import Any

import attrs

from streamsdsl import Serdes
from streamsdsl.processor import FixedKeyProcessor, Processor, ProcessorContext, PunctuationType, Record
from streamsdsl.state import StoreBuilder, Stores

from oracle.menu import text

__all__ = ["PROCESSORS", "MenuProcessor", "STORE_SERDES", "processor_class", "store_builder", "store_name", "supplier"]

#: The processors of the menu: name → whether it has a ``process_values`` variant.
PROCESSORS: dict[str, bool] = {"dedup": True, "window_count": True, "store_size": False}

#: Each processor's store: (kind, key serde, value serde), the serdes by their Java name.
STORE_SERDES: dict[str, tuple[str, str, str]] = {
    "dedup": ("key-value", "String", "Long"),
    "window_count": ("window", "String", "Long"),
    "store_size": ("key-value", "String", "String"),
}


def store_name(processor: str) -> str:
    """The name of ``processor``'s store (one per processor)."""
    return f"{processor.replace('_', '-')}-store"


# ---- the processors: one core per processor, which its Processor and FixedKeyProcessor share --


class Dedup:
    """The deduplication of ``dedup``."""

    def __init__(self, store: str, by: str, horizon: int, interval: int) -> None:
        self.store_name, self.by_key, self.horizon, self.interval = store, by == "key", horizon, interval
        self.seen: Any = None
        self.context: Any = None

    def init(self, context: ProcessorContext) -> None:
        self.context = context
        self.seen = context.get_state_store(self.store_name)
        context.schedule(self.interval, PunctuationType.STREAM_TIME, self.purge)

    def first(self, key: Any, value: Any, timestamp: int) -> bool:
        """Whether the record is the first of its id (then the id is stored with its timestamp)."""
        id_ = key if self.by_key else value
        if id_ is None:
            return True
        if self.seen.get(text(id_)) is not None:
            return False
        self.seen.put(text(id_), timestamp)
        return True

    def purge(self, timestamp: int) -> None:
        """Deletes the ids first seen before ``timestamp - horizon`` (collected first, then deleted)."""
        with self.seen.all() as entries:
            old = [entry.key for entry in entries if entry.value < timestamp - self.horizon]
        for id_ in old:
            self.seen.delete(id_)

    def process(self, record: Record) -> None:
        if self.first(record.key, record.value, record.timestamp):
            self.context.forward(record)


class WindowCount:
    """The windowed count of ``window_count``."""

    def __init__(self, store: str, size: int) -> None:
        self.store_name, self.size = store, size
        self.counts: Any = None
        self.context: Any = None

    def init(self, context: ProcessorContext) -> None:
        self.context = context
        self.counts = context.get_state_store(self.store_name)

    def process(self, record: Record) -> None:
        if record.key is None:
            return
        start = record.timestamp - record.timestamp % self.size
        before = self.counts.fetch(record.key, start)
        count = (0 if before is None else before) + 1
        self.counts.put(record.key, count, start)
        self.context.forward(record.with_value(count))


class StoreSize:
    """The latest value per key, and the punctuator of ``store_size`` that reports the store."""

    def __init__(self, store: str, interval: int, emit: str, punctuation: str = "stream_time") -> None:
        self.store_name, self.interval, self.emit = store, interval, emit
        self.type = PunctuationType.WALL_CLOCK_TIME if punctuation == "wall_clock" else PunctuationType.STREAM_TIME
        self.latest: Any = None
        self.context: Any = None

    def init(self, context: ProcessorContext) -> None:
        self.context = context
        self.latest = context.get_state_store(self.store_name)
        context.schedule(self.interval, self.type, self.punctuate)

    def process(self, record: Record) -> None:
        if record.key is not None:
            self.latest.put(record.key, None if record.value is None else text(record.value))
        self.context.forward(record)

    def punctuate(self, timestamp: int) -> None:
        if self.emit == "approximate":
            self.context.forward(Record("size", self.latest.approximate_num_entries(), timestamp))
        elif self.emit == "count":
            with self.latest.all() as entries:
                count = sum(1 for _ in entries)
            self.context.forward(Record("size", count, timestamp))
        else:
            with self.latest.all() as entries:
                for entry in entries:
                    self.context.forward(Record(entry.key, entry.value, timestamp))


class _Delegating:
    """A processor that hands ``init`` and ``process`` to its core."""

    core_class: type

    def __init__(self, **params: Any) -> None:
        self.core = self.core_class(**params)

    def init(self, context: ProcessorContext) -> None:
        self.core.init(context)

    def process(self, record: Record) -> None:
        self.core.process(record)


class DedupProcessor(_Delegating, Processor):
    core_class = Dedup


class DedupFixedKeyProcessor(_Delegating, FixedKeyProcessor):
    core_class = Dedup


class WindowCountProcessor(_Delegating, Processor):
    core_class = WindowCount


class WindowCountFixedKeyProcessor(_Delegating, FixedKeyProcessor):
    core_class = WindowCount


class StoreSizeProcessor(_Delegating, Processor):
    core_class = StoreSize


#: The class of each processor for process (False) and process_values (True).
_CLASSES: dict[tuple[str, bool], type] = {
    ("dedup", False): DedupProcessor,
    ("dedup", True): DedupFixedKeyProcessor,
    ("window_count", False): WindowCountProcessor,
    ("window_count", True): WindowCountFixedKeyProcessor,
    ("store_size", False): StoreSizeProcessor,
}


def processor_class(name: str, values: bool) -> type:
    """The class of processor ``name`` (``values``: the `FixedKeyProcessor` of ``process_values``)."""
    if name not in PROCESSORS:
        raise KeyError(
            f"{name!r} is not on the oracle's menu of processors (oracle/processors.py): {sorted(PROCESSORS)}")
    if values and not PROCESSORS[name]:
        raise ValueError(f"{name} has no process_values variant: its punctuator forwards new records")
    return _CLASSES[name, values]


def _params(value: Any) -> tuple[tuple[str, Any], ...]:
    return tuple(sorted(dict(value).items()))


@attrs.frozen
class MenuProcessor:
    """The supplier of a processor of the menu: a zero-argument callable that returns a new
    instance each call, named (``name``, ``values``, ``params``) so that the spec can name it."""

    name: str
    values: bool
    params: tuple[tuple[str, Any], ...] = attrs.field(converter=_params)

    def __call__(self) -> Processor:
        instance: Processor = processor_class(self.name, self.values)(**dict(self.params))
        return instance


def supplier(op: dict[str, Any]) -> MenuProcessor:
    """The supplier of the recipe op's processor."""
    return MenuProcessor(op["processor"], op["values"], {"store": store_name(op["processor"]), **op["params"]})


def store_builder(op: dict[str, Any]) -> StoreBuilder:
    """The store builder of the recipe op's processor, with the op's ``store`` options
    (``persistent``, ``caching``, ``logging``, and a window store's ``retention``)."""
    kind, key_serde, value_serde = STORE_SERDES[op["processor"]]
    serdes = {"String": Serdes.String(), "Long": Serdes.Long()}
    options, name = op["store"], store_name(op["processor"])
    if kind == "window":
        make = Stores.persistent_window_store if options["persistent"] else Stores.in_memory_window_store
        builder = Stores.window_store_builder(make(name, options["retention"], op["params"]["size"], False),
                                              serdes[key_serde], serdes[value_serde])
    else:
        make_kv = Stores.persistent_key_value_store if options["persistent"] else Stores.in_memory_key_value_store
        builder = Stores.key_value_store_builder(make_kv(name), serdes[key_serde], serdes[value_serde])
    builder = builder.with_caching_enabled() if options["caching"] else builder.with_caching_disabled()
    return builder.with_logging_enabled() if options["logging"] else builder.with_logging_disabled()
