"""TopologyTestDriver.get_key_value_store / get_window_store / get_session_store: read-only,
live views of an aggregation's state, as Kafka's driver returns them; advance_wall_clock_time."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from streamsdsl import Consumed, Materialized, Serdes, SessionWindow, SessionWindows, StreamsBuilder, TimeWindow
from streamsdsl import TimeWindows, TopologyError, TopologyTestDriver, Windowed
from streamsdsl.errors import InvalidArgumentError, InvalidTypeError
from streamsdsl.runtime.driver import KeyValue

pytestmark = pytest.mark.spark

STRINGS = Consumed.with_serdes(Serdes.String(), Serdes.String())


def _counts(materialized: Any = None) -> Any:
    b = StreamsBuilder()
    b.stream("in", STRINGS).group_by_key().count(materialized=materialized).to_stream().to("out")
    return b.build()


def test_key_value_store_of_a_count_is_live(spark: Any) -> None:
    """The store follows the records piped so far; a store read before a pipe sees it after."""
    with TopologyTestDriver(_counts(Materialized.as_("counts")), spark=spark) as d:
        i = d.create_input_topic("in")
        store = d.get_key_value_store("counts")
        assert store.all() == []
        i.pipe_input("a", "x", 1)
        i.pipe_input("b", "x", 2)
        i.pipe_input("a", "x", 3)
        assert store.get("a") == 2
        assert store.get("missing") is None
        assert store.all() == [KeyValue("a", 2), KeyValue("b", 1)]
        i.pipe_input("b", "x", 4)
        assert store.range("b", "z") == [KeyValue("b", 2)]
        assert store.approximate_num_entries() == 2


def test_key_value_store_of_a_python_aggregate(spark: Any) -> None:
    """A Python aggregate's store holds the aggregate, under its default Kafka Streams name."""
    b = StreamsBuilder()
    b.stream("in", STRINGS).group_by_key().aggregate(lambda: "", lambda k, v, a: a + v).to_stream().to("out")
    with TopologyTestDriver(b.build(), spark=spark) as d:
        i = d.create_input_topic("in")
        for v, ts in (("x", 1), ("y", 2)):
            i.pipe_input("k", v, ts)
        assert d.get_key_value_store("KSTREAM-AGGREGATE-STATE-STORE-0000000001").all() == [KeyValue("k", "xy")]


@pytest.mark.every_host
def test_window_store(spark: Any) -> None:
    """A tumbling count's store (on both operators): fetch one window, a range of starts, all windows."""
    b = StreamsBuilder()
    (b.stream("in", STRINGS).group_by_key().windowed_by(TimeWindows.of_size_with_no_grace(10))
     .count(materialized=Materialized.as_("w")).to_stream().to("out"))
    with TopologyTestDriver(b.build(), spark=spark) as d:
        i = d.create_input_topic("in")
        for k, ts in (("a", 1), ("a", 5), ("a", 12), ("b", 13)):
            i.pipe_input(k, "v", ts)
        store = d.get_window_store("w")
        assert store.fetch("a", 10) == 1
        assert store.fetch("a", 20) is None
        assert store.fetch("a", 0, 10) == [KeyValue(10, 1)]  # [0, 10) closed at stream time 13 and expired
        assert store.all() == [KeyValue(Windowed("a", TimeWindow(10, 20)), 1), KeyValue(Windowed("b", TimeWindow(10, 20)), 1)]
        assert store.fetch_all(10, 10) == store.all()


@pytest.mark.every_host
def test_session_store(spark: Any) -> None:
    """A session count's store (on both operators): merged sessions with inclusive ends."""
    b = StreamsBuilder()
    (b.stream("in", STRINGS).group_by_key().windowed_by(SessionWindows.of_inactivity_gap_and_grace(5, 100))
     .count(materialized=Materialized.as_("s")).to_stream().to("out"))
    with TopologyTestDriver(b.build(), spark=spark) as d:
        i = d.create_input_topic("in")
        for ts in (0, 3, 20):
            i.pipe_input("k", "v", ts)
        store = d.get_session_store("s")
        assert store.fetch("k") == [KeyValue(Windowed("k", SessionWindow(0, 3)), 2),
                                    KeyValue(Windowed("k", SessionWindow(20, 20)), 1)]
        assert store.find_sessions("k", 4, 100) == [KeyValue(Windowed("k", SessionWindow(20, 20)), 1)]
        assert store.fetch_session("k", 0, 3) == 2


def test_store_errors_name_the_fix(spark: Any) -> None:
    """An unknown store lists the topology's stores; the wrong kind names the right method."""
    with TopologyTestDriver(_counts(Materialized.as_("counts")), spark=spark) as d:
        with pytest.raises(TopologyError, match=r"^Unknown state store 'nope': the topology's stores are \['counts'\]"):
            d.get_key_value_store("nope")
        with pytest.raises(TopologyError, match=r"is a key-value store .*: read it with get_key_value_store\(\)"):
            d.get_session_store("counts")


def test_advance_wall_clock_time(spark: Any) -> None:
    """Advancing the wall clock runs the piped records (a commit) and changes no result;
    negative or non-duration values are rejected with the unit."""
    with TopologyTestDriver(_counts(), spark=spark, initial_wall_clock_time_ms=0) as d:
        d.create_input_topic("in").pipe_input("a", "x", 1)
        d.advance_wall_clock_time(timedelta(seconds=30))
        d.advance_wall_clock_time(1_000)
        assert d.create_output_topic("out").read_key_values_to_list() == [KeyValue("a", 1)]
        with pytest.raises(InvalidArgumentError, match=r"'advance' must be >= 0 ms \(got -1 ms\)"):
            d.advance_wall_clock_time(-1)
        with pytest.raises(InvalidTypeError, match=r"'advance' must be milliseconds \(an int\) or a datetime.timedelta"):
            d.advance_wall_clock_time(1.5)  # type: ignore[arg-type]


@pytest.mark.spark
def test_the_streaming_engine_refuses_to_read_a_store(spark: Any) -> None:
    """The streaming engine runs the plan as a streaming query, whose state it does not read: a
    store read names the engines that can."""
    from streamsdsl.errors import OperationNotDefinedError

    b = StreamsBuilder()
    b.stream("in").group_by_key().count(materialized=Materialized.as_("counts")).to_stream().to("out")
    with TopologyTestDriver(b.build(), engine="streaming", spark=spark) as d:
        with pytest.raises(OperationNotDefinedError, match=r"streaming engine does not read state stores; read them "
                                                           r"with engine='direct' or engine='spark'\.$"):
            d.get_key_value_store("counts").get("a")


@pytest.mark.every_host
def test_table_and_table_join_stores_hold_the_current_values(spark: Any) -> None:
    """A source table's store (``Materialized.as_``) holds each key's latest value, a tombstone
    removes the key; a materialized table–table join's store holds each key's joined value:
    on every engine, as Kafka Streams' TopologyTestDriver reads them."""
    strings = Consumed.with_serdes(Serdes.String(), Serdes.String())
    b = StreamsBuilder()
    table = b.table("t", strings, materialized=Materialized.as_("tstore"))
    b.stream("s", strings).join(table, lambda l, r: f"{l}+{r}").to("out")
    other = b.table("t2", strings)
    table.join(other, lambda l, r: f"{l}|{r}", materialized=Materialized.as_("jstore")).to_stream().to("out2")
    with TopologyTestDriver(b.build(), spark=spark) as d:
        t, t2 = d.create_input_topic("t"), d.create_input_topic("t2")
        t.pipe_input("a", "1", 1)
        t.pipe_input("b", "2", 2)
        t.pipe_input("c", "3", 3)
        t2.pipe_input("a", "x", 5)
        t2.pipe_input("c", "z", 6)
        t.pipe_input("b", None, 7)
        t.pipe_input("a", "4", 8)
        tstore, jstore = d.get_key_value_store("tstore"), d.get_key_value_store("jstore")
        assert sorted(tstore.all()) == [KeyValue("a", "4"), KeyValue("c", "3")]
        assert (tstore.get("a"), tstore.get("b")) == ("4", None)
        assert sorted(jstore.all()) == [KeyValue("a", "4|x"), KeyValue("c", "3|z")]
        t2.pipe_input("c", None, 9)
        assert sorted(jstore.all()) == [KeyValue("a", "4|x")]
