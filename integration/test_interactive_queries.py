"""Interactive queries against a running `KafkaStreams` application: ``KafkaStreams.store`` reads
the named stores of the last committed micro-batch (aggregations on both operators, a table, a
processor's store), and refuses what it cannot read with the fix."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pytest

from streamsdsl import Consumed, Materialized, Produced, QueryableStoreTypes, Serdes, StoreQueryParameters
from streamsdsl import Processor, SessionWindow, SessionWindows, StreamsBuilder, TimeWindow, TimeWindows, Windowed
from streamsdsl.runtime.app import KafkaStreams
from streamsdsl.runtime.errors import IllegalStateError
from streamsdsl.runtime.queries import InvalidStateStoreError
from streamsdsl.runtime.stores import KeyValue, ValueAndTimestamp
from streamsdsl.testing.local_kafka import LocalKafka

if TYPE_CHECKING:
    from streamsdsl.ir.topology import Topology

pytestmark = [pytest.mark.integration, pytest.mark.spark]

T = 1_700_000_000_000
STRINGS = Consumed.with_serdes(Serdes.String(), Serdes.String())
KV, WINDOW = QueryableStoreTypes.key_value_store(), QueryableStoreTypes.window_store()


def _topology(source: str, sink: str, table: str = "iq-table", other: str = "iq-other") -> Topology:
    b = StreamsBuilder()
    grouped = b.stream(source, STRINGS).group_by_key()
    grouped.count(materialized=Materialized.as_("counts")).to_stream().to(sink, Produced.with_serdes(Serdes.String(),
                                                                                                     Serdes.Long()))
    concat = grouped.aggregate(lambda: "", lambda k, v, a: a + v, materialized=Materialized.as_("concat"))
    concat.to_stream().to(sink)
    windowed = grouped.windowed_by(TimeWindows.of_size_and_grace(10, 100))
    windowed.count(materialized=Materialized.as_("per-10ms")).to_stream().map(lambda k, v: (k.key, v)).to(sink)
    grouped.reduce(lambda a, v: a + v).to_stream().to(sink)  # an unnamed store
    sessions = grouped.windowed_by(SessionWindows.of_inactivity_gap_and_grace(5, 100))
    sessions.count(materialized=Materialized.as_("sessions")).to_stream().map(lambda k, v: (k.key, v)).to(sink)
    regions = b.table(table, STRINGS, materialized=Materialized.as_("tbl"))
    regions.to_stream().to(sink)
    regions.group_by(lambda k, v: (v, v)).count(materialized=Materialized.as_("per-region"))
    regions.join(b.table(other, STRINGS), lambda region, tier: f"{region}/{tier}", materialized=Materialized.as_("joined"))
    # the same windows and sessions counted by Python aggregators: always on the Python operator
    windowed.aggregate(lambda: 0, lambda k, v, a: a + 1, materialized=Materialized.as_("per-10ms-py"))
    sessions.aggregate(lambda: 0, lambda k, v, a: a + 1, lambda k, a, b: a + b,
                       materialized=Materialized.as_("sessions-py"))
    return b.build()


def test_named_stores_of_a_running_application(kafka: LocalKafka, new_topic: Callable[..., str],
                                               streams_config: Callable[..., dict[str, object]],
                                               app_factory: Callable[[Topology, dict[str, Any]], KafkaStreams]) -> None:
    """Counts on the JVM operator and Python aggregates on the Python operator, side by side in
    one application (each operator's key-value, window and session stores), a table, a grouped
    table and a table-table join answer point, range and window queries with the state of the
    last committed micro-batch; a later batch shows."""
    source, sink, table, other = new_topic(1), new_topic(1), new_topic(1), new_topic(1)
    s = Serdes.String()
    kafka.produce(source, [(s.serialize(k), s.serialize(v), T + ts, 0)
                           for k, v, ts in (("a", "x", 1), ("b", "y", 2), ("a", "z", 13))])
    kafka.produce(table, [(s.serialize("k1"), s.serialize("EU"), T + 1, 0), (s.serialize("k2"), s.serialize("US"), T + 2, 0)])
    kafka.produce(other, [(s.serialize("k1"), s.serialize("gold"), T + 3, 0)])
    app = app_factory(_topology(source, sink, table, other), streams_config("iq", {"streamsdsl.operator": "jvm"}))
    with pytest.raises(IllegalStateError):
        app.store(StoreQueryParameters.from_name_and_type("counts", KV))
    app.start()
    app.process_all_available()
    counts = app.store(StoreQueryParameters.from_name_and_type("counts", KV))
    assert counts.get("a") == 2
    assert counts.get("nope") is None
    assert counts.all() == [KeyValue("a", 2), KeyValue("b", 1)]
    assert counts.approximate_num_entries() == 2
    stamped = app.store(StoreQueryParameters.from_name_and_type("counts", QueryableStoreTypes.timestamped_key_value_store()))
    assert stamped.get("a") == ValueAndTimestamp(2, T + 13)
    concat = app.store(StoreQueryParameters.from_name_and_type("concat", KV))
    assert concat.get("a") == "xz"
    windows = app.store(StoreQueryParameters.from_name_and_type("per-10ms", WINDOW))
    assert windows.fetch("a", T, T + 20) == [KeyValue(T, 1), KeyValue(T + 10, 1)]
    assert windows.fetch_all(T, T + 5) == [KeyValue(Windowed("a", TimeWindow(T, T + 10)), 1),
                                           KeyValue(Windowed("b", TimeWindow(T, T + 10)), 1)]

    windows_py = app.store(StoreQueryParameters.from_name_and_type("per-10ms-py", WINDOW))
    assert windows_py.fetch("a", T, T + 20) == [KeyValue(T, 1), KeyValue(T + 10, 1)]
    assert windows_py.fetch_all(T, T + 5) == windows.fetch_all(T, T + 5)

    for name in ("sessions", "sessions-py"):
        sessions = app.store(StoreQueryParameters.from_name_and_type(name, QueryableStoreTypes.session_store()))
        assert sessions.fetch("a") == [KeyValue(Windowed("a", SessionWindow(T + 1, T + 1)), 1),
                                       KeyValue(Windowed("a", SessionWindow(T + 13, T + 13)), 1)], name
        assert sessions.fetch_session("b", T + 2, T + 2) == 1, name
    tbl = app.store(StoreQueryParameters.from_name_and_type("tbl", KV))
    assert tbl.all() == [KeyValue("k1", "EU"), KeyValue("k2", "US")]
    per_region = app.store(StoreQueryParameters.from_name_and_type("per-region", KV))
    assert per_region.all() == [KeyValue("EU", 1), KeyValue("US", 1)]  # a grouped table's, with no sink
    joined = app.store(StoreQueryParameters.from_name_and_type("joined", QueryableStoreTypes.timestamped_key_value_store()))
    assert joined.all() == [KeyValue("k1", ValueAndTimestamp("EU/gold", T + 3))]  # a table-table join's

    kafka.produce(source, [(s.serialize("b"), s.serialize("w"), T + 14, 0)])
    app.process_all_available()
    assert counts.get("b") == 2  # the view reads again: the new batch's state

    with pytest.raises(InvalidStateStoreError) as info:
        app.store(StoreQueryParameters.from_name_and_type("KSTREAM-REDUCE-STATE-STORE-0000000011", KV))
    assert str(info.value) == (
        "Cannot get state store 'KSTREAM-REDUCE-STATE-STORE-0000000011': its name was generated (the store of "
        "KSTREAM-REDUCE-0000000012), and only named stores are queryable. Name it: "
        "materialized=Materialized.as_('my-store').")
    with pytest.raises(InvalidStateStoreError) as info:
        app.store(StoreQueryParameters.from_name_and_type("per-10ms", KV))
    assert str(info.value) == ("Cannot get state store 'per-10ms': it is a window store, not a key-value store; ask "
                               "for QueryableStoreTypes.window_store().")


class _LastSeen(Processor):
    """A processor keeping each key's last timestamp in the store ``last-seen``."""

    def init(self, context: Any) -> None:
        self.store = context.get_state_store("last-seen")
        self.context = context

    def process(self, record: Any) -> None:
        self.store.put(record.key, record.timestamp)
        self.context.forward(record)


def test_a_processor_store_of_a_running_application(kafka: LocalKafka, new_topic: Callable[..., str],
                                                    streams_config: Callable[..., dict[str, object]],
                                                    app_factory: Callable[[Topology, dict[str, Any]], KafkaStreams]) -> None:
    """A processor's key-value store answers get, range and all over every task (two partitions),
    read-only; asking for it as a window store names the right type."""
    from streamsdsl import Stores

    source, sink = new_topic(2), new_topic(1)
    s = Serdes.String()
    kafka.produce(source, [(s.serialize(k), s.serialize("v"), T + ts, p)
                           for k, ts, p in (("a", 1, 0), ("b", 2, 1), ("a", 5, 0), ("c", 7, 1))])
    b = StreamsBuilder()
    b.add_state_store(Stores.key_value_store_builder(Stores.persistent_key_value_store("last-seen"), Serdes.String(),
                                                     Serdes.Long()))
    b.stream(source, STRINGS).process(_LastSeen, "last-seen", named="last").to(sink, Produced.with_serdes(
        Serdes.String(), Serdes.String()))
    app = app_factory(b.build(), streams_config("iq-processor"))
    app.start()
    app.process_all_available()
    store = app.store(StoreQueryParameters.from_name_and_type("last-seen", KV))
    assert store.get("a") == T + 5
    assert store.approximate_num_entries() == 3
    with store.range("a", "b") as it:
        assert list(it) == [KeyValue("a", T + 5), KeyValue("b", T + 2)]
    with store.all() as it:
        assert [kv.key for kv in it] == ["a", "b", "c"]
    with pytest.raises(AttributeError, match="read-only"):
        store.put("z", 1)
    with pytest.raises(InvalidStateStoreError, match="ask for QueryableStoreTypes.key_value_store()"):
        app.store(StoreQueryParameters.from_name_and_type("last-seen", WINDOW))
