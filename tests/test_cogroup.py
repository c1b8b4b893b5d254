"""Cogroup (KIP-150): several grouped streams into one aggregation, one store, one operator."""

from __future__ import annotations

from typing import Any

import pytest

from streamsdsl import (
    Consumed,
    EmitStrategy,
    InvalidTypeError,
    Materialized,
    Serdes,
    SessionWindow,
    SessionWindows,
    SlidingWindows,
    StreamsBuilder,
    TestRecord,
    TimeWindow,
    TimeWindows,
    TopologyError,
    explain,
    Windowed,
)
from streamsdsl.runtime.driver import TopologyTestDriver

R = TestRecord
LONG_JSON = Consumed.with_serdes(Serdes.Long(), Serdes.Json())


def _add(field: str) -> Any:
    def aggregator(key: Any, item: Any, customer: dict[str, list[int]]) -> dict[str, list[int]]:
        return {**customer, field: [*customer[field], item["no"]]}

    return aggregator


def customer_topology() -> Any:
    b = StreamsBuilder()
    cart = b.stream("cart", LONG_JSON).group_by_key()
    purchases = b.stream("purchases", LONG_JSON).group_by_key()
    wish_list = b.stream("wish-list", LONG_JSON).group_by_key()
    (
        cart.cogroup(_add("cart"))
        .cogroup(purchases, _add("purchases"))
        .cogroup(wish_list, _add("wish_list"))
        .aggregate(lambda: {"cart": [], "purchases": [], "wish_list": []}, materialized=Materialized.as_("customerStore"))
        .to_stream()
        .to("customers")
    )
    return b.build()


class TestCogroupApi:
    def test_stages_are_immutable(self) -> None:
        """cg.cogroup(a, f) returns a new stage and leaves cg unchanged."""
        b = StreamsBuilder()
        a, c = b.stream("a").group_by_key(), b.stream("c").group_by_key()
        cg = a.cogroup(lambda k, v, agg: agg)
        cg2 = cg.cogroup(c, lambda k, v, agg: agg)
        assert len(cg.groups) == 1 and len(cg2.groups) == 2

    def test_same_grouped_stream_twice(self) -> None:
        """Cogrouping the same grouped stream twice is an error at write time."""
        b = StreamsBuilder()
        a = b.stream("a").group_by_key()
        with pytest.raises(TopologyError, match="is already part of this cogroup"):
            a.cogroup(lambda k, v, agg: agg).cogroup(a, lambda k, v, agg: agg)

    def test_non_callable_aggregator(self) -> None:
        """A non-callable aggregator is rejected with its expected shape."""
        b = StreamsBuilder()
        with pytest.raises(InvalidTypeError, match=r"'aggregator' must be a callable of shape \(key, value, aggregate\)"):
            b.stream("a").group_by_key().cogroup("not a function")  # type: ignore[arg-type]

    def test_session_windows_need_a_merger(self) -> None:
        """Session-windowed cogroup requires a merger."""
        b = StreamsBuilder()
        w = b.stream("a").group_by_key().cogroup(lambda k, v, agg: agg).windowed_by(SessionWindows.with_gap(5))
        with pytest.raises(InvalidTypeError, match="'merger' must be a callable"):
            w.aggregate(lambda: 0, None)  # type: ignore[arg-type]

    def test_describe_named(self) -> None:
        """Kafka's CogroupedKStreamImplTest.shouldNameProcessorsAndStoreBasedOnNamedParameter."""
        b = StreamsBuilder()
        one, two = b.stream("one").group_by_key(), b.stream("two").group_by_key()
        one.cogroup(lambda k, v, a: a).cogroup(two, lambda k, v, a: a).aggregate(
            lambda: "", name="test", materialized=Materialized.as_("store")
        ).to_stream().to("output")
        assert b.build().describe() == (
            "Topologies:\n"
            "   Sub-topology: 0\n"
            "    Source: KSTREAM-SOURCE-0000000000 (topics: [one])\n"
            "      --> test-cogroup-agg-0\n"
            "    Source: KSTREAM-SOURCE-0000000001 (topics: [two])\n"
            "      --> test-cogroup-agg-1\n"
            "    Processor: test-cogroup-agg-0 (stores: [store])\n"
            "      --> test-cogroup-merge\n"
            "      <-- KSTREAM-SOURCE-0000000000\n"
            "    Processor: test-cogroup-agg-1 (stores: [store])\n"
            "      --> test-cogroup-merge\n"
            "      <-- KSTREAM-SOURCE-0000000001\n"
            "    Processor: test-cogroup-merge (stores: [])\n"
            "      --> KTABLE-TOSTREAM-0000000005\n"
            "      <-- test-cogroup-agg-0, test-cogroup-agg-1\n"
            "    Processor: KTABLE-TOSTREAM-0000000005 (stores: [])\n"
            "      --> KSTREAM-SINK-0000000006\n"
            "      <-- test-cogroup-merge\n"
            "    Sink: KSTREAM-SINK-0000000006 (topic: output)\n"
            "      <-- KTABLE-TOSTREAM-0000000005\n\n"
        )

    def test_describe_unnamed_three_inputs_one_store(self) -> None:
        """Unnamed: COGROUPKSTREAM-AGGREGATE-<n> per input and COGROUPKSTREAM-MERGE-<n>, one store."""
        text = customer_topology().describe()
        for line in (
            "    Processor: COGROUPKSTREAM-AGGREGATE-0000000003 (stores: [customerStore])\n",
            "    Processor: COGROUPKSTREAM-AGGREGATE-0000000004 (stores: [customerStore])\n",
            "    Processor: COGROUPKSTREAM-AGGREGATE-0000000005 (stores: [customerStore])\n",
            "    Processor: COGROUPKSTREAM-MERGE-0000000006 (stores: [])\n",
            "      <-- COGROUPKSTREAM-AGGREGATE-0000000003, COGROUPKSTREAM-AGGREGATE-0000000004, "
            "COGROUPKSTREAM-AGGREGATE-0000000005\n",
        ):
            assert line in text
        assert "Sub-topology: 1" not in text

    def test_explain_shows_one_stateful_operator(self, spark: Any) -> None:
        """The compiled plan has exactly one transformWithState operator for three inputs."""
        plan = explain(customer_topology(), spark, mode="simple")
        assert plan.count("TransformWithStateInPySpark") == 1


@pytest.mark.spark
class TestCogroupDriver:
    @pytest.mark.streaming_host
    def test_kip150_customer_example(self, spark: Any) -> None:
        """KIP-150's data (cart 1-5, purchases 6-10, wish list 11-15 for customers 1 and 2):
        the final Customer aggregates exactly as the KIP lists them."""
        cart = [(1, 1), (2, 2), (1, 3), (1, 4), (2, 5)]
        purchases = [(2, 6), (1, 7), (1, 8), (2, 9), (2, 10)]
        wish_list = [(1, 11), (2, 12), (2, 13), (2, 14), (2, 15)]
        with TopologyTestDriver(customer_topology(), spark=spark) as d:
            ts = 0
            for topic, items in (("cart", cart), ("purchases", purchases), ("wish-list", wish_list)):
                t = d.create_input_topic(topic)
                for customer, no in items:
                    ts += 1
                    t.pipe_input(customer, {"no": no}, ts)
            out = d.create_output_topic("customers")
            records = out.read_records_to_list()
        assert len(records) == 15
        final = {r.key: r.value for r in records}
        assert final == {
            1: {"cart": [1, 3, 4], "purchases": [7, 8], "wish_list": [11]},
            2: {"cart": [2, 5], "purchases": [6, 9, 10], "wish_list": [12, 13, 14, 15]},
        }
        assert records[-1] == R(2, final[2], 15)

    def test_two_streams_different_types_and_null_value(self, run_driver: Any) -> None:
        """Different input types (Long and String), an output type different from both, shared
        and distinct keys; the initializer runs only for a new key; null values are skipped."""
        b = StreamsBuilder()
        amounts = b.stream("amounts", Consumed.with_serdes(Serdes.String(), Serdes.Long())).group_by_key()
        notes = b.stream("notes", Consumed.with_serdes(Serdes.String(), Serdes.String())).group_by_key()
        amounts.cogroup(lambda k, v, a: {**a, "total": a["total"] + v}).cogroup(
            notes, lambda k, v, a: {**a, "notes": a["notes"] + [v]}
        ).aggregate(lambda: {"total": 0, "notes": []}).to_stream().to("out")
        records = [
            ("amounts", "a", 5, 10), ("notes", "a", "hi", 20), ("notes", "b", "yo", 5),
            ("notes", "a", None, 30), ("amounts", "a", 7, 15),
        ]
        out, metrics = run_driver(b.build(), records, with_metrics=True)
        assert out == [
            R("a", {"total": 5, "notes": []}, 10),
            R("a", {"total": 5, "notes": ["hi"]}, 20),
            R("b", {"total": 0, "notes": ["yo"]}, 5),
            R("a", {"total": 12, "notes": ["hi"]}, 20),
        ]
        assert metrics["dropped-records-total"] == 1.0

    def test_session_cogroup_merges_across_streams(self, run_driver: Any) -> None:
        """Session cogroup: a record of stream B bridges sessions built by stream A; merges are
        seeded from the initializer (KIP-150 + KIP-94): "0+0+0+A+A-B"."""
        b = StreamsBuilder()
        s = Consumed.with_serdes(Serdes.String(), Serdes.String())
        one, two = b.stream("one", s).group_by_key(), b.stream("two", s).group_by_key()
        one.cogroup(lambda k, v, a: a + "+" + v).cogroup(two, lambda k, v, a: a + "-" + v).windowed_by(
            SessionWindows.of_inactivity_gap_and_grace(10, 100)
        ).aggregate(lambda: "0", lambda k, a1, a2: a1 + a2).to_stream().to("out")
        out = run_driver(b.build(), [("one", "k", "A", 0), ("one", "k", "A", 20), ("two", "k", "B", 10)])
        assert out == [
            R(Windowed("k", SessionWindow(0, 0)), "0+A", 0),
            R(Windowed("k", SessionWindow(20, 20)), "0+A", 20),
            R(Windowed("k", SessionWindow(0, 0)), None, 0),
            R(Windowed("k", SessionWindow(20, 20)), None, 20),
            R(Windowed("k", SessionWindow(0, 20)), "00+A0+A-B", 20),
        ]

    def test_session_cogroup_emit_on_close(self, run_driver: Any) -> None:
        """Beyond Kafka Streams: emit_strategy on a windowed cogroup forwards each session once."""
        b = StreamsBuilder()
        s = Consumed.with_serdes(Serdes.String(), Serdes.String())
        one, two = b.stream("one", s).group_by_key(), b.stream("two", s).group_by_key()
        one.cogroup(lambda k, v, a: a + 1).cogroup(two, lambda k, v, a: a + 10).windowed_by(
            SessionWindows.with_gap(5)
        ).emit_strategy(EmitStrategy.on_window_close()).aggregate(lambda: 0, lambda k, a, b: a + b).to_stream().to("out")
        records = [("one", "k", "x", 0), ("two", "k", "y", 3), ("one", "k", "x", 100)]
        assert run_driver(b.build(), records) == [R(Windowed("k", SessionWindow(0, 3)), 11, 3)]


def _two_stream_cogroup(windows: Any, on_close: bool = False) -> Any:
    """Stream "one" adds 1, stream "two" adds 10, per time window."""
    b = StreamsBuilder()
    s = Consumed.with_serdes(Serdes.String(), Serdes.String())
    one, two = b.stream("one", s).group_by_key(), b.stream("two", s).group_by_key()
    w = one.cogroup(lambda k, v, a: a + 1).cogroup(two, lambda k, v, a: a + 10).windowed_by(windows)
    if on_close:
        w = w.emit_strategy(EmitStrategy.on_window_close())
    w.aggregate(lambda: 0).to_stream().to("out")
    return b.build()


def TW(key: Any, start: int, end: int, value: Any, ts: int) -> TestRecord:  # noqa: N802
    return R(Windowed(key, TimeWindow(start, end)), value, ts)


@pytest.mark.spark
class TestTimeWindowedCogroup:
    def test_tumbling_boundary(self, run_driver: Any) -> None:
        """Both streams aggregate into one window per key; a record at the window end opens the next."""
        records = [("one", "k", "x", 0), ("two", "k", "y", 9), ("one", "k", "x", 10)]
        assert run_driver(_two_stream_cogroup(TimeWindows.of_size_with_no_grace(10)), records) == [
            TW("k", 0, 10, 1, 0), TW("k", 0, 10, 11, 9), TW("k", 10, 20, 1, 10),
        ]

    def test_hopping_overlap(self, run_driver: Any) -> None:
        """Hopping windows: each record updates every window it falls in; the initializer runs
        only for a window without an aggregate."""
        records = [("one", "k", "x", 7), ("two", "k", "y", 12)]
        assert run_driver(_two_stream_cogroup(TimeWindows.of_size_with_no_grace(10).advance_by(5)), records) == [
            TW("k", 0, 10, 1, 7), TW("k", 5, 15, 1, 7), TW("k", 5, 15, 11, 12), TW("k", 10, 20, 10, 12),
        ]

    def test_emit_on_close(self, run_driver: Any) -> None:
        """Beyond Kafka Streams: emit_strategy on a time-windowed cogroup forwards each window once."""
        records = [("one", "k", "x", 1), ("two", "k", "y", 5), ("one", "k", "x", 20)]
        assert run_driver(_two_stream_cogroup(TimeWindows.of_size_with_no_grace(10), on_close=True), records) == [
            TW("k", 0, 10, 11, 5),
        ]

    def test_sliding(self, run_driver: Any) -> None:
        """Sliding-window cogroup: the record of stream two creates stream one's right window."""
        records = [("one", "k", "x", 10), ("two", "k", "y", 14)]
        assert run_driver(_two_stream_cogroup(SlidingWindows.of_time_difference_and_grace(10, 100)), records) == [
            TW("k", 0, 10, 1, 10), TW("k", 11, 21, 10, 14), TW("k", 4, 14, 11, 14),
        ]

    def test_a_window_another_input_closed_keeps_its_aggregate(self, run_driver: Any) -> None:
        """Each input keeps its own stream time (Kafka's one aggregate processor per input), over
        one store: stream two's record at 25 closes [0, 10) for stream two only; stream one's
        record at 7 is on time for stream one and adds to the window's 10 (Kafka's store still
        holds it), not to a new window from the initializer. Oracle case 197bb19b1746."""
        records = [("two", "k", "y", 5), ("two", "k", "y", 25), ("one", "k", "x", 7), ("one", "k", "x", 12),
                   ("two", "k", "y", 9)]
        out, metrics = run_driver(_two_stream_cogroup(TimeWindows.of_size_with_no_grace(10)), records,
                                  with_metrics=True)
        assert out == [TW("k", 0, 10, 10, 5), TW("k", 20, 30, 10, 25), TW("k", 0, 10, 11, 7), TW("k", 10, 20, 1, 12)]
        assert metrics["dropped-records-total"] == 1.0  # two's record at 9: late for stream two

    def test_emit_on_close_is_final_for_every_input(self, run_driver: Any) -> None:
        """With emit on close one stream time spans the inputs: after [0, 10) was emitted
        (stream time 12 from stream one), a record of stream two for it is dropped and counted,
        not silently folded into a window that will never be emitted again."""
        records = [("one", "k", "x", 0), ("one", "k", "x", 12), ("two", "k", "y", 9), ("one", "k", "x", 30)]
        out, metrics = run_driver(_two_stream_cogroup(TimeWindows.of_size_with_no_grace(10), on_close=True), records,
                                  with_metrics=True)
        assert out == [TW("k", 0, 10, 1, 0), TW("k", 10, 20, 1, 12)]
        assert metrics["dropped-records-total"] == 1.0
