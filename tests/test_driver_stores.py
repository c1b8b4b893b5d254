"""TopologyTestDriver.get_key_value_store / get_window_store / get_session_store: read-only,
live views of an aggregation's state, as Kafka's driver returns them; advance_wall_clock_time."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from streamsdsl import Consumed, Materialized, Serdes, SessionWindow, SessionWindows, StreamsBuilder, TimeWindow
from streamsdsl import TimeWindows, TopologyError, TopologyTestDriver, Windowed
from streamsdsl.errors import InvalidArgumentError, InvalidTypeError
from streamsdsl.runtime.driver import KeyValue, ValueAndTimestamp

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


@pytest.mark.every_host
def test_a_table_store_only_joins_read(spark: Any) -> None:
    """A table whose records only a join reads (no other path to a sink) still has its store: a
    source table's (``Materialized.as_``), a ``to_table()``'s and the store a stream–table join
    creates for an unnamed table hold each key's latest value and timestamp; a tombstone removes
    the key, also when the store is read between two pipes."""
    b = StreamsBuilder()
    named = b.table("t", STRINGS, materialized=Materialized.as_("named"))
    b.stream("s", STRINGS).left_join(named, lambda l, r: f"{l}+{r}").to("out")
    unnamed = b.table("u", STRINGS)
    b.stream("s2", STRINGS).join(unnamed, lambda l, r: f"{l}*{r}").to("out2")
    to_table = b.stream("v", STRINGS).to_table(materialized=Materialized.as_("from-stream"))
    b.stream("s3", STRINGS).join(to_table, lambda l, r: f"{l}/{r}").to("out3")
    assert b.build().store_names == ("named", "u-STATE-STORE-0000000005", "from-stream")
    with TopologyTestDriver(b.build(), spark=spark) as d:
        t, u, v = d.create_input_topic("t"), d.create_input_topic("u"), d.create_input_topic("v")
        store = d.get_timestamped_key_value_store("named")
        t.pipe_input("a", "1", 1)
        t.pipe_input("b", "2", 2)
        assert store.all() == [KeyValue("a", ValueAndTimestamp("1", 1)), KeyValue("b", ValueAndTimestamp("2", 2))]
        t.pipe_input("a", None, 3)
        t.pipe_input("b", "3", 4)
        d.create_input_topic("s").pipe_input("a", "x", 5)
        assert store.all() == [KeyValue("b", ValueAndTimestamp("3", 4))]
        assert (store.get("a"), store.get("b")) == (None, ValueAndTimestamp("3", 4))
        assert d.get_key_value_store("named").all() == [KeyValue("b", "3")]
        u.pipe_input("k", "9", 6)
        u.pipe_input("m", "8", 7)
        u.pipe_input("k", None, 8)
        v.pipe_input("p", "q", 9)
        v.pipe_input("p", "r", 10)
        assert d.get_key_value_store("u-STATE-STORE-0000000005").all() == [KeyValue("m", "8")]
        assert d.get_timestamped_key_value_store("from-stream").all() == [KeyValue("p", ValueAndTimestamp("r", 10))]
        assert d.create_output_topic("out").read_key_values_to_list() == [KeyValue("a", "x+None")]


@pytest.mark.every_host
def test_stream_stream_join_window_stores(spark: Any) -> None:
    """A stream–stream join's two window stores hold each side's buffered records (duplicates
    kept), each in a window from its timestamp as long as the join window (before + after), as
    Kafka Streams' join stores; the shared outer-join store is not read, and says which are."""
    from streamsdsl import JoinWindows
    from streamsdsl.errors import OperationNotDefinedError

    b = StreamsBuilder()
    (b.stream("l", STRINGS).outer_join(b.stream("r", STRINGS), lambda x, y: f"{x}{y}",
                                       JoinWindows.of_time_difference_and_grace(10, 5)).to("out"))
    this, other, shared = b.build().store_names
    assert (this, other, shared) == ("KSTREAM-OUTERTHIS-0000000004-store", "KSTREAM-OUTEROTHER-0000000005-store",
                                     "KSTREAM-OUTERSHARED-0000000004-store")
    with TopologyTestDriver(b.build(), spark=spark) as d:
        left, right = d.create_input_topic("l"), d.create_input_topic("r")
        left.pipe_input("a", "1", 1)
        left.pipe_input("a", "2", 1)
        left.pipe_input("b", "3", 4)
        right.pipe_input("a", "x", 2)
        assert d.get_window_store(this).all() == [KeyValue(Windowed("a", TimeWindow(1, 21)), "1"),
                                                  KeyValue(Windowed("a", TimeWindow(1, 21)), "2"),
                                                  KeyValue(Windowed("b", TimeWindow(4, 24)), "3")]
        assert d.get_window_store(this).fetch("a", 0, 5) == [KeyValue(1, "1"), KeyValue(1, "2")]
        assert d.get_timestamped_window_store(other).all() == [
            KeyValue(Windowed("a", TimeWindow(2, 22)), ValueAndTimestamp("x", 2))]
        with pytest.raises(OperationNotDefinedError) as caught:
            d.get_window_store(shared)
        assert str(caught.value) == (
            f"State store '{shared}' is the shared outer-join store of the stream-stream join "
            "KSTREAM-MERGE-0000000006 (the records that wait for their window to close, in Kafka's internal layout): "
            f"the test driver does not read it; read the join's window stores '{this}' and '{other}' with "
            "get_window_store().")
