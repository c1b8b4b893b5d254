"""The pure-Python sliding-window core on its own (no Spark): Kafka's scenarios and properties.

Expected values come from Kafka's ``KStreamSlidingWindowAggregateTest``
(apache/kafka, ``streams/src/test/.../kstream/internals/``), which uses the aggregator
``"0" + "+v" + ...`` (``MockInitializer.STRING_INIT``, ``MockAggregator.TOSTRING_ADDER``).
Kafka mostly compares outputs as sets per window start, or as lists sorted by (key, start).
Here the exact put order is checked too, where it was derived by hand from
``processReverse``, ``processEarly`` and ``createWindows``.
"""

from __future__ import annotations

import random
from typing import Any, Callable

import attrs
from hypothesis import given, settings
from hypothesis import strategies as st

from streamsdsl.semantics.aggregation import AggFunctions
from streamsdsl.semantics.sliding import SlidingWindowing
from streamsdsl.semantics.windowing import KeyState, WindowAgg, record_step

CONCAT = AggFunctions(lambda: "0", lambda k, v, a: f"{a}+{v}")
REDUCE = AggFunctions(lambda: None, lambda k, v, a: v if a is None else f"{a}+{v}")
COUNT = AggFunctions(lambda: 0, lambda k, v, a: a + 1, lambda k, a, b: a + b)


@attrs.define
class Run:
    """What one driver-like run produced: puts and on-close emissions as (key, window) pairs."""

    puts: list[tuple[Any, WindowAgg]] = attrs.Factory(list)
    per_record: list[list[tuple[int, int, Any, int]]] = attrs.Factory(list)
    emitted: list[tuple[Any, WindowAgg]] = attrs.Factory(list)
    dropped: list[int] = attrs.Factory(list)
    state: dict[Any, tuple[WindowAgg, ...]] = attrs.Factory(dict)


def run(w: SlidingWindowing, records: list[tuple[Any, Any, int]], fns: AggFunctions = CONCAT,
        prune: str = "expiry") -> Run:
    """Play records like Kafka's TopologyTestDriver (one partition, so stream time is shared by
    all keys). After each record, every newly closed window is emitted once, ordered by
    (start, key), and windows are pruned (``prune``: "expiry", "close" or "none")."""
    out = Run()
    stream_time = -1
    emitted: set[tuple[Any, int]] = set()
    for key, value, ts in records:
        stream_time = max(stream_time, ts)
        step = w.step(out.state.get(key, ()), key, value, ts, stream_time, fns)
        out.state[key] = step.windows
        out.puts += [(key, p) for p in step.puts]
        out.per_record.append([(p.start, p.end, p.agg, p.ts) for p in step.puts])
        out.dropped.append(step.dropped)
        closing = sorted(((win.start, k), win) for k, ws in out.state.items() for win in ws
                         if stream_time > w.close_threshold(win) and (k, win.start) not in emitted)
        for (_, k), win in closing:
            emitted.add((k, win.start))
            out.emitted.append((k, win))
        gone: Callable[[WindowAgg, int], bool] = {
            "expiry": lambda x, t: t > w.expiry_threshold(x), "close": lambda x, t: t > w.close_threshold(x),
            "none": lambda _w, _t: False}[prune]
        out.state = {k: tuple(x for x in ws if not gone(x, stream_time)) for k, ws in out.state.items()}
    return out


def single_key(key: str, values_ts: list[tuple[str, int]]) -> list[tuple[str, str, int]]:
    return [(key, v, ts) for v, ts in values_ts]


def gather(pairs: list[tuple[Any, WindowAgg]]) -> dict[int, set[tuple[Any, int]]]:
    """Kafka's ``gatherOutput``: window start -> set of (value, timestamp)."""
    result: dict[int, set[tuple[Any, int]]] = {}
    for _, win in pairs:
        result.setdefault(win.start, set()).add((win.agg, win.ts))
    return result


def by_key_start(pairs: list[tuple[Any, WindowAgg]]) -> list[tuple[Any, int, int, Any, int]]:
    """Kafka's comparator: a stable sort by (key, start)."""
    rows = [(k, win.start, win.end, win.agg, win.ts) for k, win in pairs]
    return sorted(rows, key=lambda r: (r[0], r[1]))


def finals(pairs: list[tuple[Any, WindowAgg]]) -> dict[int, tuple[Any, int]]:
    """Last value per window start (single key)."""
    return {win.start: (win.agg, win.ts) for _, win in pairs}


SMALL_INPUT = single_key("A", [("1", 10), ("2", 10), ("3", 14), ("4", 15), ("5", 20), ("6", 22), ("7", 30)])


class TestInOrderRecords:
    def test_aggregate_small_input_exact_puts(self) -> None:
        """testAggregateSmallInput (d=10, grace=5). Each record writes the previous record's right
        window, then existing windows containing it (highest start first), then its own left window."""
        r = run(SlidingWindowing(10, 5), SMALL_INPUT)
        assert r.per_record == [
            [(0, 10, "0+1", 10)],
            [(0, 10, "0+1+2", 10)],
            [(11, 21, "0+3", 14), (4, 14, "0+1+2+3", 14)],
            [(11, 21, "0+3+4", 15), (15, 25, "0+4", 15), (5, 15, "0+1+2+3+4", 15)],
            [(15, 25, "0+4+5", 20), (11, 21, "0+3+4+5", 20), (16, 26, "0+5", 20), (10, 20, "0+1+2+3+4+5", 20)],
            [(16, 26, "0+5+6", 22), (15, 25, "0+4+5+6", 22), (21, 31, "0+6", 22), (12, 22, "0+3+4+5+6", 22)],
            [(21, 31, "0+6+7", 30), (23, 33, "0+7", 30), (20, 30, "0+5+6+7", 30)],
        ]
        assert r.dropped == [0] * 7

    def test_aggregate_small_input_matches_kafka_map(self) -> None:
        """testAggregateSmallInput, emit on update: Kafka's start -> {(value, ts)} map."""
        assert gather(run(SlidingWindowing(10, 5), SMALL_INPUT).puts) == {
            0: {("0+1", 10), ("0+1+2", 10)},
            4: {("0+1+2+3", 14)},
            5: {("0+1+2+3+4", 15)},
            10: {("0+1+2+3+4+5", 20)},
            11: {("0+3", 14), ("0+3+4", 15), ("0+3+4+5", 20)},
            12: {("0+3+4+5+6", 22)},
            15: {("0+4", 15), ("0+4+5", 20), ("0+4+5+6", 22)},
            16: {("0+5", 20), ("0+5+6", 22)},
            20: {("0+5+6+7", 30)},
            21: {("0+6", 22), ("0+6+7", 30)},
            23: {("0+7", 30)},
        }

    def test_reduce_small_input(self) -> None:
        """testReduceSmallInput: reduce (initializer null) gives "1+2" with no "0"."""
        records = single_key("A", [("1", 10), ("2", 14), ("3", 15), ("4", 22), ("5", 26), ("6", 30)])
        assert gather(run(SlidingWindowing(10, 5), records, REDUCE).puts) == {
            0: {("1", 10)},
            4: {("1+2", 14)},
            5: {("1+2+3", 15)},
            11: {("2", 14), ("2+3", 15)},
            12: {("2+3+4", 22)},
            15: {("3", 15), ("3+4", 22)},
            16: {("4", 22), ("4+5", 26)},
            20: {("4+5+6", 30)},
            23: {("5", 26), ("5+6", 30)},
            27: {("6", 30)},
        }



class TestLeftAndRightWindows:
    def test_record_creates_previous_right_window_then_own_left_window(self) -> None:
        """A@10 then A@14 (d=10): [11,21] (A@10's right window) holds only A@14. The new left
        window [4,14] is seeded with the aggregate of [0,10]."""
        w = SlidingWindowing(10, 100)
        s1 = w.step((), "A", "a", 10, 10, CONCAT)
        s2 = w.step(s1.windows, "A", "b", 14, 14, CONCAT)
        assert s2.puts == (WindowAgg(11, 21, "0+b", 14), WindowAgg(4, 14, "0+a+b", 14))
        assert [(x.start, x.end) for x in s2.windows] == [(0, 10), (4, 14), (11, 21)]

    def test_out_of_order_record_creates_left_and_own_right_window(self) -> None:
        """a@100, b@106, then c@103. c updates [101,111] and [96,106] (highest start first) and
        creates its left window [93,103] from [90,100]. It also creates its right window
        [104,114], a copy of [101,111] as it was *before* c was added."""
        records = [("k", "a", 100), ("k", "b", 106), ("k", "c", 103)]
        r = run(SlidingWindowing(10, 100), records)
        assert r.per_record[1] == [(101, 111, "0+b", 106), (96, 106, "0+a+b", 106)]
        assert r.per_record[2] == [(101, 111, "0+b+c", 106), (96, 106, "0+a+b+c", 106),
                                   (93, 103, "0+a+c", 103), (104, 114, "0+b", 106)]

    def test_join_input_update_order(self) -> None:
        """testJoin, table 1 (d=10, grace=100). The second round, checked in order, writes the
        previous record's right window before the new left window."""
        records = [("A", "1", 10), ("B", "2", 11), ("C", "3", 12), ("A", "1", 15), ("B", "2", 16), ("C", "3", 19)]
        r = run(SlidingWindowing(10, 100), records)
        assert by_key_start(r.puts[:3]) == [("A", 0, 10, "0+1", 10), ("B", 1, 11, "0+2", 11), ("C", 2, 12, "0+3", 12)]
        assert [(k, x.start, x.agg, x.ts) for k, x in r.puts[3:]] == [
            ("A", 11, "0+1", 15), ("A", 5, "0+1+1", 15),
            ("B", 12, "0+2", 16), ("B", 6, "0+2+2", 16),
            ("C", 13, "0+3", 19), ("C", 9, "0+3+3", 19),
        ]


LARGE_INPUT = [
    ("A", "1", 10), ("A", "2", 20), ("A", "3", 22), ("A", "4", 15),
    ("B", "1", 12), ("B", "2", 13), ("B", "3", 18), ("B", "4", 19), ("B", "5", 25), ("B", "6", 14),
    ("C", "1", 11), ("C", "2", 15), ("C", "3", 16), ("C", "4", 21), ("C", "5", 23),
    ("D", "4", 11), ("D", "2", 12), ("D", "3", 29), ("D", "5", 16),
]


class TestOutOfOrderRecords:
    def test_aggregate_large_input_update(self) -> None:
        """testAggregateLargeInput (d=10, grace=50): four keys, out-of-order records inside the
        window. Every put, sorted by (key, start) and stable within a start."""
        r = run(SlidingWindowing(10, 50), LARGE_INPUT)
        assert [(k, s, v, t) for k, s, _, v, t in by_key_start(r.puts)] == [
            ("A", 0, "0+1", 10), ("A", 5, "0+1+4", 15), ("A", 10, "0+1+2", 20), ("A", 10, "0+1+2+4", 20),
            ("A", 11, "0+2", 20), ("A", 11, "0+2+4", 20), ("A", 12, "0+2+3", 22), ("A", 12, "0+2+3+4", 22),
            ("A", 16, "0+2+3", 22), ("A", 21, "0+3", 22),
            ("B", 2, "0+1", 12), ("B", 3, "0+1+2", 13), ("B", 4, "0+1+2+6", 14), ("B", 8, "0+1+2+3", 18),
            ("B", 8, "0+1+2+3+6", 18), ("B", 9, "0+1+2+3+4", 19), ("B", 9, "0+1+2+3+4+6", 19),
            ("B", 13, "0+2", 13), ("B", 13, "0+2+3", 18), ("B", 13, "0+2+3+4", 19), ("B", 13, "0+2+3+4+6", 19),
            ("B", 14, "0+3", 18), ("B", 14, "0+3+4", 19), ("B", 14, "0+3+4+6", 19), ("B", 15, "0+3+4+5", 25),
            ("B", 19, "0+4", 19), ("B", 19, "0+4+5", 25), ("B", 20, "0+5", 25),
            ("C", 1, "0+1", 11), ("C", 5, "0+1+2", 15), ("C", 6, "0+1+2+3", 16), ("C", 11, "0+1+2+3+4", 21),
            ("C", 12, "0+2", 15), ("C", 12, "0+2+3", 16), ("C", 12, "0+2+3+4", 21), ("C", 13, "0+2+3+4+5", 23),
            ("C", 16, "0+3", 16), ("C", 16, "0+3+4", 21), ("C", 16, "0+3+4+5", 23), ("C", 17, "0+4", 21),
            ("C", 17, "0+4+5", 23), ("C", 22, "0+5", 23),
            ("D", 1, "0+4", 11), ("D", 2, "0+4+2", 12), ("D", 6, "0+4+2+5", 16), ("D", 12, "0+2", 12),
            ("D", 12, "0+2+5", 16), ("D", 13, "0+5", 16), ("D", 19, "0+3", 29),
        ]

    def test_aggregate_large_input_on_close(self) -> None:
        """testAggregateLargeInput, emit on close (grace=10). Records that are late for their
        windows (B@14's left window [4,14], C@11, D@11, D@12, D@16) do not reach them."""
        r = run(SlidingWindowing(10, 10), LARGE_INPUT)
        assert [(k, s, v, t) for k, s, _, v, t in by_key_start(r.emitted)] == [
            ("A", 0, "0+1", 10), ("A", 5, "0+1+4", 15),
            ("B", 2, "0+1", 12), ("B", 3, "0+1+2", 13), ("B", 8, "0+1+2+3+6", 18),
            ("C", 5, "0+2", 15), ("C", 6, "0+2+3", 16),
        ]

    def test_no_grace_small_input(self) -> None:
        """testNoGracePeriodSmallInput (d=50, grace=0): A@103 after A@106 fills the open windows."""
        records = single_key("A", [("1", 100), ("2", 105), ("3", 106), ("4", 103), ("5", 113), ("6", 110)])
        r = run(SlidingWindowing(50, 0), records)
        assert gather(r.puts) == {
            50: {("0+1", 100)},
            55: {("0+1+2", 105)},
            56: {("0+1+2+3", 106), ("0+1+2+3+4", 106)},
            63: {("0+1+2+3+4+5", 113), ("0+1+2+3+4+5+6", 113)},
            101: {("0+2", 105), ("0+2+3", 106), ("0+2+3+4", 106), ("0+2+3+4+5", 113), ("0+2+3+4+5+6", 113)},
            104: {("0+2+3", 106), ("0+2+3+5", 113), ("0+2+3+5+6", 113)},
            106: {("0+3", 106), ("0+3+5", 113), ("0+3+5+6", 113)},
            107: {("0+5", 113), ("0+5+6", 113)},
            111: {("0+5", 113)},
        }
        assert gather(r.emitted) == {50: {("0+1", 100)}, 55: {("0+1+2", 105)}, 56: {("0+1+2+3+4", 106)}}

    def test_no_grace_large_input(self) -> None:
        """testNoGracePeriodLargeInput (d=10, grace=0): E@110, E@104 and E@102 are partly or
        wholly late."""
        records = single_key("E", [("1", 100), ("3", 105), ("4", 106), ("2", 103), ("6", 113), ("5", 110),
                                   ("7", 104), ("8", 102), ("9", 115)])
        r = run(SlidingWindowing(10, 0), records)
        assert [(s, v, t) for _, s, _, v, t in by_key_start(r.puts)] == [
            (90, "0+1", 100), (95, "0+1+3", 105), (96, "0+1+3+4", 106), (96, "0+1+3+4+2", 106),
            (101, "0+3", 105), (101, "0+3+4", 106), (101, "0+3+4+2", 106),
            (103, "0+3+4+2+6", 113), (103, "0+3+4+2+6+5", 113), (103, "0+3+4+2+6+5+7", 113),
            (104, "0+3+4", 106), (104, "0+3+4+6", 113), (104, "0+3+4+6+5", 113), (104, "0+3+4+6+5+7", 113),
            (105, "0+3+4+6+5", 113), (105, "0+3+4+6+5+9", 115),
            (106, "0+4", 106), (106, "0+4+6", 113), (106, "0+4+6+5", 113), (106, "0+4+6+5+9", 115),
            (107, "0+6", 113), (107, "0+6+5", 113), (107, "0+6+5+9", 115),
            (111, "0+6", 113), (111, "0+6+9", 115), (114, "0+9", 115),
        ]
        assert [(s, v, t) for _, s, _, v, t in by_key_start(r.emitted)] == [
            (90, "0+1", 100), (95, "0+1+3", 105), (96, "0+1+3+4+2", 106), (101, "0+3+4+2", 106),
            (103, "0+3+4+2+6+5+7", 113), (104, "0+3+4+6+5+7", 113),
        ]

    def test_random_input_any_order(self) -> None:
        """testAggregateRandomInput (d=10, grace=100, sorting aggregator). Whatever the order,
        the last value of each window is the same."""
        inputs = [("A", 10), ("B", 15), ("C", 16), ("D", 18), ("E", 30), ("F", 40), ("G", 55), ("H", 56),
                  ("I", 58), ("J", 58), ("K", 62), ("L", 63), ("M", 63), ("N", 63), ("O", 76), ("P", 77),
                  ("Q", 80), ("R", 2), ("S", 3), ("T", 5), ("U", 8)]
        sort_agg = AggFunctions(lambda: "", lambda k, v, a: "".join(sorted(a + v)))
        expected = {0: ("ARSTU", 10), 3: ("ASTU", 10), 4: ("ATU", 10), 5: ("ABTU", 15), 6: ("ABCU", 16),
                    8: ("ABCDU", 18), 9: ("ABCD", 18), 11: ("BCD", 18), 16: ("CD", 18), 17: ("D", 18),
                    20: ("E", 30), 30: ("EF", 40), 31: ("F", 40), 45: ("G", 55), 46: ("GH", 56),
                    48: ("GHIJ", 58), 52: ("GHIJK", 62), 53: ("GHIJKLMN", 63), 56: ("HIJKLMN", 63),
                    57: ("IJKLMN", 63), 59: ("KLMN", 63), 63: ("LMN", 63), 66: ("O", 76), 67: ("OP", 77),
                    70: ("OPQ", 80), 77: ("PQ", 80), 78: ("Q", 80), 171: ("V", 181)}
        rng = random.Random(450)
        for _ in range(50):
            rng.shuffle(inputs)
            records = single_key("A", inputs) + [("A", "V", 181)]
            r = run(SlidingWindowing(10, 100), records, sort_agg)
            assert finals(r.puts) == expected
            # On close, streamsdsl emits every closed window (start <= 70 at stream time
            # 181). Kafka's emit-final expects only starts >= 52: its retention of 120 ms,
            # counted from the store's max window start 171, expires the rest first.
            assert finals(r.emitted) == {s: v for s, v in expected.items() if s <= 70}


class TestEarlyRecords:
    def test_early_small_input(self) -> None:
        """testEarlyRecordsSmallInput (d=50, grace=0): records before d share [0, 50]."""
        records = single_key("A", [("1", 0), ("2", 5), ("3", 6), ("4", 3), ("5", 13), ("6", 10), ("7", 70)])
        r = run(SlidingWindowing(50, 0), records)
        assert gather(r.puts) == {
            0: {("0+1", 0), ("0+1+2", 5), ("0+1+2+3", 6), ("0+1+2+3+4", 6), ("0+1+2+3+4+5", 13),
                ("0+1+2+3+4+5+6", 13)},
            1: {("0+2", 5), ("0+2+3", 6), ("0+2+3+4", 6), ("0+2+3+4+5", 13), ("0+2+3+4+5+6", 13)},
            4: {("0+2+3", 6), ("0+2+3+5", 13), ("0+2+3+5+6", 13)},
            6: {("0+3", 6), ("0+3+5", 13), ("0+3+5+6", 13)},
            7: {("0+5", 13), ("0+5+6", 13)},
            11: {("0+5", 13)},
            20: {("0+7", 70)},
        }
        assert gather(r.emitted) == {
            0: {("0+1+2+3+4+5+6", 13)}, 1: {("0+2+3+4+5+6", 13)}, 4: {("0+2+3+5+6", 13)},
            6: {("0+3+5+6", 13)}, 7: {("0+5+6", 13)}, 11: {("0+5", 13)},
        }

    def test_early_record_exact_puts(self) -> None:
        """processEarly order: existing windows in (0, t], then t's right window, then the
        previous record's right window, then [0, d]. Here A@5 and A@6 come first, then A@3."""
        r = run(SlidingWindowing(50, 0), single_key("A", [("1", 0), ("2", 5), ("3", 6), ("4", 3)]))
        assert r.per_record == [
            [(0, 50, "0+1", 0)],
            [(1, 51, "0+2", 5), (0, 50, "0+1+2", 5)],
            [(1, 51, "0+2+3", 6), (6, 56, "0+3", 6), (0, 50, "0+1+2+3", 6)],
            [(1, 51, "0+2+3+4", 6), (4, 54, "0+2+3", 6), (0, 50, "0+1+2+3+4", 6)],
        ]

    def test_early_large_input(self) -> None:
        """testEarlyRecordsLargeInput (d=10): emit on update with grace 50 and on close with
        grace 1."""
        records = single_key("E", [("1", 0), ("3", 5), ("4", 6), ("2", 3), ("6", 13), ("5", 10), ("7", 4),
                                   ("8", 2), ("9", 15)])
        r = run(SlidingWindowing(10, 50), records)
        assert [(s, v, t) for _, s, _, v, t in by_key_start(r.puts)] == [
            (0, "0+1", 0), (0, "0+1+3", 5), (0, "0+1+3+4", 6), (0, "0+1+3+4+2", 6), (0, "0+1+3+4+2+5", 10),
            (0, "0+1+3+4+2+5+7", 10), (0, "0+1+3+4+2+5+7+8", 10),
            (1, "0+3", 5), (1, "0+3+4", 6), (1, "0+3+4+2", 6), (1, "0+3+4+2+5", 10), (1, "0+3+4+2+5+7", 10),
            (1, "0+3+4+2+5+7+8", 10),
            (3, "0+3+4+2+6", 13), (3, "0+3+4+2+6+5", 13), (3, "0+3+4+2+6+5+7", 13),
            (4, "0+3+4", 6), (4, "0+3+4+6", 13), (4, "0+3+4+6+5", 13), (4, "0+3+4+6+5+7", 13),
            (5, "0+3+4+6+5", 13), (5, "0+3+4+6+5+9", 15),
            (6, "0+4", 6), (6, "0+4+6", 13), (6, "0+4+6+5", 13), (6, "0+4+6+5+9", 15),
            (7, "0+6", 13), (7, "0+6+5", 13), (7, "0+6+5+9", 15),
            (11, "0+6", 13), (11, "0+6+9", 15), (14, "0+9", 15),
        ]
        closed = run(SlidingWindowing(10, 1), records)
        assert [(s, v, t) for _, s, _, v, t in by_key_start(closed.emitted)] == [
            (0, "0+1+3+4+2", 6), (1, "0+3+4+2", 6), (3, "0+3+4+2+6+5+7", 13),
        ]


class TestSameTimestamp:
    def test_same_timestamp_only_updates_left_window(self) -> None:
        """A second record at the same timestamp finds its left window (its max ts is not
        below t) and updates only that window. The reverse path then returns at once."""
        r = run(SlidingWindowing(10, 5), SMALL_INPUT[:2])
        assert r.per_record == [[(0, 10, "0+1", 10)], [(0, 10, "0+1+2", 10)]]

    def test_early_records_repeated_input(self) -> None:
        """testEarlyRecordsRepeatedInput (d=5, grace=0): timestamps 0 and 2 repeat."""
        records = single_key("A", [("1", 0), ("2", 2), ("3", 4), ("4", 0), ("5", 2), ("6", 2), ("7", 0), ("8", 7)])
        r = run(SlidingWindowing(5, 0), records)
        assert gather(r.puts) == {
            0: {("0+1", 0), ("0+1+2", 2), ("0+1+2+3", 4), ("0+1+2+3+4", 4), ("0+1+2+3+4+5", 4),
                ("0+1+2+3+4+5+6", 4), ("0+1+2+3+4+5+6+7", 4)},
            1: {("0+2", 2), ("0+2+3", 4), ("0+2+3+5", 4), ("0+2+3+5+6", 4)},
            2: {("0+2+3+5+6+8", 7)},
            3: {("0+3", 4), ("0+3+8", 7)},
            5: {("0+8", 7)},
        }
        assert gather(r.emitted) == {0: {("0+1+2+3+4+5+6+7", 4)}, 1: {("0+2+3+5+6", 4)}}


class TestLateRecords:
    def test_dropped_with_grace(self) -> None:
        """shouldLogAndMeterWhenSkippingExpiredWindowByGrace (d=10, grace=90). At stream time
        200, k@100..k@105 pass the record-level rule, but their left windows are closed (one
        drop each). k@15 is dropped whole. That makes 7 drops in total."""
        values = [("100", 200), ("0", 100), ("1", 101), ("2", 102), ("3", 103), ("4", 104), ("5", 105),
                  ("6", 15), ("101", 300), ("102", 400)]
        r = run(SlidingWindowing(10, 90), single_key("k", values))
        assert r.dropped == [0, 1, 1, 1, 1, 1, 1, 1, 0, 0]
        assert [(x.start, x.end, x.agg, x.ts) for _, x in r.puts] == [
            (190, 200, "0+100", 200), (290, 300, "0+101", 300), (390, 400, "0+102", 400)]
        assert [(x.start, x.agg, x.ts) for _, x in r.emitted] == [(190, "0+100", 200), (290, "0+101", 300)]

    def test_dropped_without_grace(self) -> None:
        """grace=0, d=10, stream time 100. b@89 is dropped whole (89 + 10 < 100). b@90 still
        joins [90,100] and creates its right window [91,101], but its left window [80,90] is
        closed, so one drop is counted."""
        w = SlidingWindowing(10, 0)
        s1 = w.step((), "k", "a", 100, 100, CONCAT)
        late = w.step(s1.windows, "k", "b", 89, 100, CONCAT)
        assert (late.puts, late.dropped, late.windows) == ((), 1, s1.windows)
        s2 = w.step(s1.windows, "k", "b", 90, 100, CONCAT)
        assert s2.puts == (WindowAgg(90, 100, "0+a+b", 100), WindowAgg(91, 101, "0+a", 100))
        assert s2.dropped == 1

    def test_partly_late_with_grace(self) -> None:
        """grace=5: after a@100 and c@103, b@90 (stream time 103, closeTime 98) joins [90,100]
        and gets a right window, but not its own left window [80,90]."""
        r = run(SlidingWindowing(10, 5), single_key("k", [("a", 100), ("c", 103), ("b", 90)]))
        assert r.per_record[2] == [(90, 100, "0+a+b", 100), (91, 101, "0+a", 100)]
        assert r.dropped == [0, 0, 1]

    def test_partly_late_early_record_quirk(self) -> None:
        """A Kafka quirk, ported as is: a partly late record can make a later window hold a
        record outside its range. With d=2 and grace=10 at stream time 13, c@1 is too late for
        [0,2] but gets the right window [1,3] of a@0. d@2 then does not create c's right window,
        because [0,2] (ts 0) does not show c. So e@1 copies [1,3], which contains c@1, into its
        right window [2,4]."""
        records = single_key("k", [("a", 0), ("b", 13), ("c", 1), ("d", 2), ("e", 1)])
        r = run(SlidingWindowing(2, 10), records, prune="none")
        assert r.per_record[4] == [(1, 3, "0+c+d+e", 2), (2, 4, "0+c+d", 2)]
        assert r.dropped == [0, 0, 1, 1, 1]

    def test_null_value_dropped(self) -> None:
        """Kafka drops a null value (and counts it) before touching the store."""
        s = SlidingWindowing(10, 0).step((), "k", None, 5, 5, CONCAT)
        assert (s.windows, s.puts, s.dropped) == ((), (), 1)


class TestCloseAndRetention:
    def test_thresholds(self) -> None:
        """[s, e] closes when stream time first exceeds e + grace. It expires when stream time
        first exceeds e + grace + 2d."""
        w = SlidingWindowing(10, 5)
        win = WindowAgg(3, 13, "x", 9)
        assert (w.close_threshold(win), w.expiry_threshold(win)) == (18, 38)

    def test_closed_window_read_for_the_drop_count(self) -> None:
        """Oracle case ba17b223b48a (d=3, grace=2): records at 12 and 19, then 14 (stream time
        19, close time 17). The record at 14 reads the record at 12's window [9, 12], closed at
        stream time 15: the record at 12's right window [13, 16] and 14's left window [11, 14]
        are both closed, so the record counts twice, as in Kafka Streams. Nothing is written."""
        w = SlidingWindowing(3, 2)
        state, stream_time, steps = KeyState(), -1, []
        for ts in (12, 19, 14):
            stream_time = max(stream_time, ts)
            steps.append(step := record_step(w, state, "yy", "yy", ts, stream_time, CONCAT))
            state = step.state
        assert [s.dropped for s in steps] == [0, 0, 2]
        assert steps[2].puts == ()
        assert [x.bounds for x in state.windows] == [(9, 12), (16, 19)]

    def test_closed_windows_must_be_kept_until_expiry(self) -> None:
        """testJoin, emit on close (d=10, grace=0). A@15's left window [5,15] is "0+1+1": it is
        seeded from [0,10], which closed at stream time 12. Pruning windows as soon as they
        close would lose A@10 and give "0+1" instead."""
        records = [("A", "1", 10), ("B", "2", 11), ("C", "3", 12), ("A", "1", 15), ("B", "2", 16), ("C", "3", 19)]
        w = SlidingWindowing(10, 0)
        r = run(w, records)
        assert [(k, x.start, x.agg, x.ts) for k, x in r.emitted] == [
            ("A", 0, "0+1", 10), ("B", 1, "0+2", 11),
            ("C", 2, "0+3", 12), ("A", 5, "0+1+1", 15), ("B", 6, "0+2+2", 16),
        ]
        wrong = run(w, records, prune="close")
        assert ("A", 5, "0+1", 15) in [(k, x.start, x.agg, x.ts) for k, x in wrong.emitted]


# ---------------------------------------------------------------------------------------------
# Properties

SET_AGG = AggFunctions(lambda: frozenset(), lambda k, v, a: a | {v})
records_st = st.lists(st.integers(0, 60), min_size=1, max_size=25)


def expected_starts(timestamps: list[int], d: int) -> set[int]:
    """KIP-450: a left window per record ([0, d] when t < d), plus a right window [t+1, t+1+d]
    for each record that has a later record no more than d + 1 after it."""
    lefts = {max(0, t - d) for t in timestamps}
    rights = {t + 1 for t in timestamps if any(t < u <= t + 1 + d for u in timestamps)}
    return lefts | rights


@settings(max_examples=300, deadline=None)
@given(records_st, st.integers(1, 12))
def test_every_window_is_the_fold_of_its_records_when_nothing_closes(ts_list: list[int], d: int) -> None:
    """With a grace longer than the input spans, records can come in any order. Each stored
    window then holds exactly the records with ts in [start, end], and its ts is their max.
    Ends are start + d, starts are unique, and the set of starts is KIP-450's."""
    records = [("k", i, t) for i, t in enumerate(ts_list)]
    r = run(SlidingWindowing(d, 1000), records, SET_AGG, prune="none")
    windows = r.state["k"]
    assert all(x.end == x.start + d for x in windows)
    assert len({x.start for x in windows}) == len(windows)
    assert {x.start for x in windows} == expected_starts(ts_list, d)
    for x in windows:
        inside = {i for i, t in enumerate(ts_list) if x.start <= t <= x.end}
        assert x.agg == inside
        assert x.ts == max(ts_list[i] for i in inside)
    assert sum(r.dropped) == 0


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(0, 8), min_size=1, max_size=25), st.integers(1, 12), st.integers(0, 12))
def test_in_order_records_are_counted_exactly_with_pruning(gaps: list[int], d: int, grace: int) -> None:
    """With non-decreasing timestamps nothing is late. Pruning at expiry therefore keeps every
    window an exact count, and each window emitted on close has its final count."""
    ts_list = [sum(gaps[: i + 1]) for i in range(len(gaps))]
    r = run(SlidingWindowing(d, grace), [("k", "v", t) for t in ts_list], COUNT)
    assert sum(r.dropped) == 0
    for x in [*r.state["k"], *(win for _, win in r.emitted)]:
        assert x.agg == sum(1 for t in ts_list if x.start <= t <= x.end)
    assert len({x.start for _, x in r.emitted}) == len(r.emitted)


@settings(max_examples=400, deadline=None)
@given(st.lists(st.tuples(st.sampled_from("ab"), st.integers(0, 60)), min_size=1, max_size=30),
       st.integers(1, 10), st.integers(0, 10))
def test_pruning_at_expiry_changes_no_output(records: list[tuple[str, int]], d: int, grace: int) -> None:
    """Two keys share stream time and records may be late. Pruning windows once they expire (`expiry_threshold`)
    gives the same puts, emissions and drop counts as keeping every window forever. Pruning one ms earlier
    does not; that is checked outside the suite."""
    inputs = [(k, (k, i), t) for i, (k, t) in enumerate(records)]
    w = SlidingWindowing(d, grace)
    kept = run(w, inputs, SET_AGG, prune="none")
    pruned = run(w, inputs, SET_AGG, prune="expiry")
    assert pruned.puts == kept.puts
    assert pruned.emitted == kept.emitted
    assert pruned.dropped == kept.dropped
    for key, windows in pruned.state.items():
        assert set(windows) == {x for x in kept.state[key] if not max(t for _, t in records) > w.expiry_threshold(x)}


@settings(max_examples=400, deadline=None)
@given(st.lists(st.tuples(st.sampled_from("ab"), st.integers(0, 60)), min_size=1, max_size=30),
       st.integers(1, 10), st.integers(0, 10))
def test_accepted_records_fold_exactly(records: list[tuple[str, int]], d: int, grace: int) -> None:
    """Keep only records that are on time when they arrive (``ts >= streamTime - grace``), in
    any order within the grace period, and prune at expiry. Then no write is dropped. Every
    stored window, and every window emitted on close, holds exactly its key's records with ts in
    [start, end], and its ts is their max."""
    accepted: list[tuple[str, tuple[str, int], int]] = []
    stream_time = -1
    for i, (k, t) in enumerate(records):
        if t >= max(stream_time, t) - grace:
            stream_time = max(stream_time, t)
            accepted.append((k, (k, i), t))
    w = SlidingWindowing(d, grace)
    r = run(w, accepted, SET_AGG)
    assert sum(r.dropped) == 0
    by_id = {v: t for _, v, t in accepted}
    for key, x in [*((k, x) for k, ws in r.state.items() for x in ws), *r.emitted]:
        inside = {v for v, t in by_id.items() if v[0] == key and x.start <= t <= x.end}
        assert x.agg == inside
        assert x.ts == max(by_id[v] for v in inside)
