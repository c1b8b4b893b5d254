"""KGroupedTable count / reduce / aggregate: Kafka's KGroupedTableImplTest scenarios and the
re-keying rules of KTableRepartitionMap."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from streamsdsl.semantics.grouped_table import GroupedTableFunctions, grouped_table_reference_run, regroup
from streamsdsl.semantics.tables import Change

PROCESS_DATA = [("A", "1", 10), ("B", "1", 50), ("C", "1", 30), ("D", "2", 40), ("E", "2", 60)]
REDUCE_DATA = [("A", 1.1, 10), ("B", 2.2, 11), ("A", 2.6, 30), ("B", 1.3, 30), ("A", 5.7, 50), ("B", 6.2, 20)]


def select_value(k: Any, v: Any) -> tuple[Any, Any]:
    """MockMapper.selectValueKeyValueMapper."""
    return (v, v)


def last_per_key(out: list[Any]) -> dict[Any, tuple[Any, int]]:
    return {o.key: (o.change.new, o.timestamp) for o in out}


class TestKGroupedTable:
    def test_count_and_materialize_results(self) -> None:
        """KGroupedTableImplTest.shouldCountAndMaterializeResults: "1" -> (3, 50), "2" -> (2, 60)."""
        out = grouped_table_reference_run(PROCESS_DATA, select_value, GroupedTableFunctions.count())
        assert last_per_key(out) == {"1": (3, 50), "2": (2, 60)}

    def test_aggregate_and_materialize_results(self) -> None:
        """KGroupedTableImplTest.shouldAggregateAndMaterializeResults (STRING_INIT, TOSTRING_ADDER,
        TOSTRING_REMOVER): "1" -> ("0+1+1+1", 50), "2" -> ("0+2+2", 60)."""
        fns = GroupedTableFunctions(lambda: "0", lambda k, v, a: f"{a}+{v}", lambda k, v, a: f"{a}-{v}")
        out = grouped_table_reference_run(PROCESS_DATA, select_value, fns)
        assert last_per_key(out) == {"1": ("0+1+1+1", 50), "2": ("0+2+2", 60)}

    def test_reduce(self) -> None:
        """KGroupedTableImplTest.shouldReduce / assertReduced (intProjection, INTEGER_ADDER,
        INTEGER_SUBTRACTOR): A -> (1, 10) then (5, 50); B -> (2, 11) then (6, 30)."""
        fns = GroupedTableFunctions.reduce(lambda a, v: a + v, lambda a, v: a - v)
        project = lambda k, v: (k, int(v))  # noqa: E731
        first = grouped_table_reference_run(REDUCE_DATA[:2], project, fns)
        assert last_per_key(first) == {"A": (1, 10), "B": (2, 11)}
        assert last_per_key(grouped_table_reference_run(REDUCE_DATA, project, fns)) == {"A": (5, 50), "B": (6, 30)}

    def test_subtractor_before_adder_when_the_group_changes(self) -> None:
        """§5.5: a re-keyed update sends Change(None, old) to the old group first, then
        Change(new, None) to the new one; a same-group update sends one record."""
        assert regroup("A", Change("2", "1"), 5, select_value) == [("1", Change(None, "1"), 5), ("2", Change("2", None), 5)]
        assert regroup("A", Change(3, 4), 5, lambda k, v: ("g", v)) == [("g", Change(3, 4), 5)]
        assert regroup("A", Change(None, 4), 5, lambda k, v: (None, v)) == []
        out = grouped_table_reference_run([("A", "1", 10), ("A", "2", 20)], select_value, GroupedTableFunctions.count(),
                                          send_old_values=True)
        assert [(o.key, o.change, o.timestamp) for o in out] == [
            ("1", Change(1, None), 10), ("1", Change(0, 1), 20), ("2", Change(1, None), 20)]

    def test_count_stays_at_zero_and_tombstone_subtracts(self) -> None:
        """KTableAggregate: a group counted down to 0 stays, at 0; a source tombstone subtracts."""
        out = grouped_table_reference_run([("A", "1", 1), ("A", None, 2), ("B", None, 3)], select_value,
                                          GroupedTableFunctions.count())
        assert [(o.key, o.change.new, o.timestamp) for o in out] == [("1", 1, 1), ("1", 0, 2)]


class TestProperties:
    @settings(max_examples=300, deadline=None)
    @given(st.lists(st.tuples(st.sampled_from("ABCD"), st.one_of(st.none(), st.sampled_from("xyz")),
                              st.integers(0, 100)), max_size=40))
    def test_count_equals_group_sizes_of_the_current_table(self, records: list[tuple[str, Any, int]]) -> None:
        """The latest count per group equals the number of table keys whose current value
        selects that group (count never goes negative; emptied groups read 0)."""
        out = grouped_table_reference_run(records, select_value, GroupedTableFunctions.count())
        table: dict[str, Any] = {}
        for key, value, _ in records:
            if value is None:
                table.pop(key, None)
            else:
                table[key] = value
        latest = {o.key: o.change.new for o in out}
        for group, count in latest.items():
            assert count == sum(1 for v in table.values() if v == group)
        assert all(o.change.new >= 0 for o in out)
