"""Table-table joins: Kafka's KTableKTableLeftJoinTest and KTableKTableOuterJoinTest scenarios
(old/new values, tombstones, timestamps), the inner join over the same input, and properties."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from streamsdsl.semantics.table_table import TableJoinSpec, TableJoinState, table_join_reference_run, table_join_step
from streamsdsl.semantics.tables import Change
from tests.semantics._kafka import tostring_joiner

KEYS = [0, 1, 2, 3]
L, R = "left", "right"


class Driver:
    """Pipes batches of ``(side, key, value, ts)`` records; returns each batch's forwarded
    ``(key, new, old, ts)``."""

    def __init__(self, spec: TableJoinSpec) -> None:
        self.spec, self.records, self.seen = spec, [], 0

    def pipe(self, *records: tuple[str, Any, Any, int]) -> list[tuple[Any, Any, Any, int]]:
        self.records += records
        out, _ = table_join_reference_run(self.records, self.spec, tostring_joiner)
        new, self.seen = out[self.seen:], len(out)
        return [(o.key, o.change.new, o.change.old, o.timestamp) for o in new]


def left_join_test_input() -> list[list[tuple[str, Any, Any, int]]]:
    """The batches KTableKTableLeftJoinTest.testJoin / testNotSendingOldValue pipe."""
    return [
        [(L, 0, "X0", 5), (L, 1, "X1", 6), (L, None, "SomeVal", 42)],
        [(R, 0, "Y0", 0), (R, 1, "Y1", 10), (R, None, "AnotherVal", 73)],
        [(L, k, f"XX{k}", 7) for k in KEYS],
        [(R, k, f"YY{k}", k * 5) for k in KEYS],
        [(L, k, f"XXX{k}", 6) for k in KEYS],
        [(R, 0, None, 5), (R, 1, None, 7)],
        [(L, k, f"XXXX{k}", 13) for k in KEYS],
        [(L, 0, None, 0), (L, 1, None, 42), (L, 2, None, 5), (L, 3, None, 20)],
    ]


class TestLeftJoin:
    def test_join(self) -> None:
        """KTableKTableLeftJoinTest.testJoin / testNotSendingOldValue (values and timestamps)."""
        d = Driver(TableJoinSpec("left"))
        got = [d.pipe(*batch) for batch in left_join_test_input()]
        assert got == [
            [(0, "X0+null", None, 5), (1, "X1+null", None, 6)],
            [(0, "X0+Y0", None, 5), (1, "X1+Y1", None, 10)],
            [(0, "XX0+Y0", None, 7), (1, "XX1+Y1", None, 10), (2, "XX2+null", None, 7), (3, "XX3+null", None, 7)],
            [(0, "XX0+YY0", None, 7), (1, "XX1+YY1", None, 7), (2, "XX2+YY2", None, 10), (3, "XX3+YY3", None, 15)],
            [(0, "XXX0+YY0", None, 6), (1, "XXX1+YY1", None, 6), (2, "XXX2+YY2", None, 10), (3, "XXX3+YY3", None, 15)],
            [(0, "XXX0+null", None, 6), (1, "XXX1+null", None, 7)],
            [(0, "XXXX0+null", None, 13), (1, "XXXX1+null", None, 13), (2, "XXXX2+YY2", None, 13),
             (3, "XXXX3+YY3", None, 15)],
            [(0, None, None, 0), (1, None, None, 42), (2, None, None, 10), (3, None, None, 20)],
        ]

    def test_null_keys_are_dropped_by_the_sources(self) -> None:
        """KTableKTableLeftJoinTest.testJoin: "pass tuple with null key, it will be discarded"."""
        _, drops = table_join_reference_run([b for batch in left_join_test_input() for b in batch],
                                            TableJoinSpec("left"), tostring_joiner)
        assert drops == ["null_key", "null_key"]

    def test_sending_old_value_right_side_always_computes_old(self) -> None:
        """KTableKTableRightJoin (§5.3): the right side of a left join always computes
        ``old = joiner(left, old_right)``; a right tombstone gives ``<left>+null``."""
        d = Driver(TableJoinSpec("left", send_old_values=True))
        d.pipe((L, 0, "X0", 0))
        assert d.pipe((R, 0, "Y0", 1)) == [(0, "X0+Y0", "X0+null", 1)]
        assert d.pipe((R, 0, None, 2)) == [(0, "X0+null", "X0+Y0", 2)]
        assert d.pipe((R, 9, "Y9", 3)) == []  # no left value: nothing


def outer_batches() -> list[list[tuple[str, Any, Any, int]]]:
    """The batches KTableKTableOuterJoinTest.testJoin / testSendingOldValue pipe (all at ts 0)."""
    return [
        [(L, 0, "X0", 0), (L, 1, "X1", 0), (L, None, "SomeVal", 0)],
        [(R, 0, "Y0", 0), (R, 1, "Y1", 0), (R, None, "AnotherVal", 0)],
        [(L, k, f"X{k}", 0) for k in KEYS],
        [(R, k, f"YY{k}", 0) for k in KEYS],
        [(L, k, f"X{k}", 0) for k in KEYS],
        [(R, 0, None, 0), (R, 1, None, 0)],
        [(L, k, f"XX{k}", 0) for k in KEYS],
        [(L, 1, None, 0), (L, 2, None, 0)],
    ]


class TestOuterJoin:
    def test_join_and_not_sending_old_value(self) -> None:
        """KTableKTableOuterJoinTest.testJoin and testNotSendingOldValue."""
        d = Driver(TableJoinSpec("outer"))
        got = [[(k, new) for k, new, old, _ in d.pipe(*batch)] for batch in outer_batches()]
        assert got == [
            [(0, "X0+null"), (1, "X1+null")],
            [(0, "X0+Y0"), (1, "X1+Y1")],
            [(0, "X0+Y0"), (1, "X1+Y1"), (2, "X2+null"), (3, "X3+null")],
            [(k, f"X{k}+YY{k}") for k in KEYS],
            [(k, f"X{k}+YY{k}") for k in KEYS],
            [(0, "X0+null"), (1, "X1+null")],
            [(0, "XX0+null"), (1, "XX1+null"), (2, "XX2+YY2"), (3, "XX3+YY3")],
            [(1, None), (2, "null+YY2")],
        ]

    def test_sending_old_value(self) -> None:
        """KTableKTableOuterJoinTest.testSendingOldValue."""
        d = Driver(TableJoinSpec("outer", send_old_values=True))
        got = [[(k, new, old) for k, new, old, _ in d.pipe(*batch)] for batch in outer_batches()]
        assert got == [
            [(0, "X0+null", None), (1, "X1+null", None)],
            [(0, "X0+Y0", "X0+null"), (1, "X1+Y1", "X1+null")],
            [(0, "X0+Y0", "X0+Y0"), (1, "X1+Y1", "X1+Y1"), (2, "X2+null", None), (3, "X3+null", None)],
            [(0, "X0+YY0", "X0+Y0"), (1, "X1+YY1", "X1+Y1"), (2, "X2+YY2", "X2+null"), (3, "X3+YY3", "X3+null")],
            [(k, f"X{k}+YY{k}", f"X{k}+YY{k}") for k in KEYS],
            [(0, "X0+null", "X0+YY0"), (1, "X1+null", "X1+YY1")],
            [(0, "XX0+null", "X0+null"), (1, "XX1+null", "X1+null"), (2, "XX2+YY2", "X2+YY2"),
             (3, "XX3+YY3", "X3+YY3")],
            [(1, None, "XX1+null"), (2, "null+YY2", "XX2+YY2")],
        ]


class TestInnerJoin:
    def test_join_over_the_left_join_input(self) -> None:
        """Inner join rules (KTableKTableInnerJoin, §5.3) over KTableKTableLeftJoinTest.testJoin's
        input: no output without the other side; a delete with the other side present is a
        null result; ts = max of both sides."""
        d = Driver(TableJoinSpec("inner"))
        got = [d.pipe(*batch) for batch in left_join_test_input()]
        assert got == [
            [],
            [(0, "X0+Y0", None, 5), (1, "X1+Y1", None, 10)],
            [(0, "XX0+Y0", None, 7), (1, "XX1+Y1", None, 10)],
            [(0, "XX0+YY0", None, 7), (1, "XX1+YY1", None, 7), (2, "XX2+YY2", None, 10), (3, "XX3+YY3", None, 15)],
            [(0, "XXX0+YY0", None, 6), (1, "XXX1+YY1", None, 6), (2, "XXX2+YY2", None, 10), (3, "XXX3+YY3", None, 15)],
            [(0, None, None, 6), (1, None, None, 7)],
            [(2, "XXXX2+YY2", None, 13), (3, "XXXX3+YY3", None, 15)],
            [(2, None, None, 10), (3, None, None, 20)],
        ]

    def test_materialized_result_forwards_no_delete_of_an_absent_row(self) -> None:
        """KTableKTableJoinMerger with a materialized (cached) result: a null result for a key
        with no stored result is not forwarded; the old value is the previous stored result."""
        d = Driver(TableJoinSpec("inner", send_old_values=True, materialized=True))
        assert d.pipe((L, 0, "X0", 0), (R, 0, "Y0", 1)) == [(0, "X0+Y0", None, 1)]
        assert d.pipe((L, 0, "X1", 2)) == [(0, "X1+Y0", "X0+Y0", 2)]
        assert d.pipe((R, 0, None, 3)) == [(0, None, "X1+Y0", 3)]
        assert d.pipe((R, 0, None, 4), (L, 0, None, 5)) == []


class TestFilteredSide:
    def test_filtered_side_forwards_no_change_of_nothing_without_a_cache(self) -> None:
        """A left side read through a KTable.filter whose value fails: Kafka's KTableFilter (its
        parent has a store, so it sends old values) forwards nothing when the new and old values
        both fail, so the inner join writes no delete, cache or not; a side that held a value
        still forwards its removal. An unfiltered side without a cache forwards the change."""
        records = [(R, 0, "ab", 14), (L, 0, None, 23), (L, 0, "x", 24), (L, 0, None, 25)]
        for cached in (True, False):
            spec = TableJoinSpec("inner", cached=cached, filtered_sides={L})
            assert Driver(spec).pipe(*records) == [(0, "x+ab", None, 24), (0, None, None, 25)]
        assert Driver(TableJoinSpec("inner", cached=False)).pipe(*records) == [
            (0, None, None, 23), (0, "x+ab", None, 24), (0, None, None, 25)]


class TestMappedSide:
    """A side read through a KTable map_values whose mapper returns None for a value: the source
    holds the key (its value is not a tombstone), so Kafka's KTableMapValues forwards
    Change(None, old) into the join, record cache or not (oracle case af0946f5be2c)."""

    @staticmethod
    def _run(spec: TableJoinSpec, records: list[tuple[str, Any, Any, int, bool | None]]) -> list[tuple[Any, ...]]:
        state, out = TableJoinState(), []
        for side, key, value, ts, tombstone in records:
            step = table_join_step(spec, state, side, key, value, ts, tostring_joiner, tombstone=tombstone)
            state = step.state
            if step.output is not None:
                out.append((step.output.change.new, step.output.timestamp))
        return out

    def test_a_mapped_none_is_joined_and_the_source_tombstone_after_it_too(self) -> None:
        """Right "x" at 53; the left source's "x" at 56 mapped to None: outer gives "null+x" at
        56 (the other side's ts is not taken: the mapped side is absent for it, and the right
        side's update at 60 joins None); the left source's tombstone at 61 is forwarded (the
        source held the key), giving "null+x" again. An unmapped None of an absent key gives
        nothing (the cache's rule)."""
        records = [(R, "a", "x", 53, None), (L, "a", None, 56, False), (R, "a", "y", 60, None),
                   (L, "a", None, 61, True), (L, "a", None, 62, True)]
        assert self._run(TableJoinSpec("outer"), records) == [
            ("null+x", 53), ("null+x", 56), ("null+y", 60), ("null+y", 61)]
        assert self._run(TableJoinSpec("inner"), records) == [(None, 56), (None, 61)]
        assert self._run(TableJoinSpec("outer"), [(R, "a", "x", 53, None), (L, "a", None, 56, None)]) == [
            ("null+x", 53)]

    def test_without_a_cache_the_same(self) -> None:
        """Without the record cache every source record is forwarded: a tombstone of an absent
        key joins too."""
        records = [(R, "a", "x", 53, None), (L, "a", None, 56, False), (L, "a", None, 61, True),
                   (L, "a", None, 62, True)]
        assert self._run(TableJoinSpec("outer", cached=False), records) == [
            ("null+x", 53), ("null+x", 56), ("null+x", 61), ("null+x", 62)]


class TestProperties:
    @settings(max_examples=300, deadline=None)
    @given(st.lists(st.tuples(st.sampled_from([L, R]), st.sampled_from([0, 1]),
                              st.one_of(st.none(), st.integers(0, 9)), st.integers(0, 50)), max_size=30))
    def test_outer_result_is_the_join_of_current_values(self, records: list[tuple[str, int, Any, int]]) -> None:
        """After every record, the outer join's latest result per key is joiner(left, right) of
        the current table values (None when both are absent), and the inner join's result
        equals it whenever both sides exist."""
        states: dict[int, TableJoinState] = {}
        latest_outer: dict[int, Any] = {}
        tables = {L: {}, R: {}}  # type: dict[str, dict[int, Any]]
        for side, key, value, ts in records:
            step = table_join_step(TableJoinSpec("outer"), states.get(key), side, key, value, ts, tostring_joiner)
            states[key] = step.state
            if value is None:
                tables[side].pop(key, None)
            else:
                tables[side][key] = value
            if step.output is not None:
                latest_outer[key] = step.output.change.new
            lv, rv = tables[L].get(key), tables[R].get(key)
            expected = None if lv is None and rv is None else tostring_joiner(lv, rv)
            assert latest_outer.get(key) == expected
        for spec in (TableJoinSpec("inner"), TableJoinSpec("left")):
            out, _ = table_join_reference_run(records, spec, tostring_joiner)
            assert all(isinstance(o.change, Change) for o in out)

    def test_state_round_trips_as_plain_values(self) -> None:
        """A key's table-join state is plain lists."""
        state = table_join_step(TableJoinSpec("left"), None, L, "k", {"a": 1}, 3, tostring_joiner).state
        assert TableJoinState.from_plain(state.to_plain()) == state
