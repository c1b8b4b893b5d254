"""KTable source, filter, map_values and the stream-table join (KStreamKTableJoinTest,
KStreamKTableLeftJoinTest)."""

from __future__ import annotations

import pytest

from streamsdsl.errors import InvalidArgumentError
from streamsdsl.semantics.stream_table import StreamTableJoin, stream_join_step, stream_table_reference_run
from streamsdsl.semantics.tables import Change, KeyedChange, Output, TableValue, filter_change, map_values_change
from streamsdsl.semantics.tables import table_reference_run, table_source_step
from tests.semantics._kafka import tostring_joiner

KEYS = [0, 1, 2, 3]


def push_stream(n: int, prefix: str) -> list[tuple[str, int, str, int]]:
    """``pushToStream``: keys 0..n-1, value prefix+key, ts = i."""
    return [("stream", KEYS[i], f"{prefix}{KEYS[i]}", i) for i in range(n)]


def push_table(n: int, prefix: str, ts: int = 1_000_000) -> list[tuple[str, int, str, int]]:
    """``pushToTable``: Kafka uses random timestamps; a non-versioned table ignores them."""
    return [("table", KEYS[i], f"{prefix}{KEYS[i]}", ts - i) for i in range(n)]


def push_null_to_table(n: int = 2) -> list[tuple[str, int, None, int]]:
    return [("table", KEYS[i], None, 0) for i in range(n)]


def run(spec: str, *batches: list[tuple]) -> list[list[Output]]:
    """Each batch's outputs, as TopologyTestDriver's ``checkAndClearProcessResult`` sees them."""
    out: list[list[Output]] = []
    records: list[tuple] = []
    seen = 0
    for batch in batches:
        records += batch
        result, _ = stream_table_reference_run(records, StreamTableJoin(spec), tostring_joiner)  # type: ignore[arg-type]
        out.append(result[seen:])
        seen = len(result)
    return out


class TestTableSource:
    def test_latest_value_tombstone_and_out_of_order_update(self) -> None:
        """KTableSource: latest value per key; an older record still replaces it; a null value
        deletes; the old value is sent when old values are enabled (KTableSourceTest)."""
        out, table, dropped = table_reference_run(
            [("A", "1", 10), ("A", "2", 5), (None, "x", 6), ("B", None, 7), ("A", None, 8)], send_old_values=True)
        assert out == [KeyedChange("A", Change("1", None), 10), KeyedChange("A", Change("2", "1"), 5),
                       KeyedChange("A", Change(None, "2"), 8)]
        assert table == {} and dropped == 1

    def test_unmaterialized_source_forwards_every_tombstone(self) -> None:
        """Without a store (and its record cache) a tombstone of an absent key is forwarded too."""
        out, _, _ = table_reference_run([("B", None, 7)], materialized=False)
        assert out == [KeyedChange("B", Change(None, None), 7)]

    def test_plain_state(self) -> None:
        """A key's table state round-trips through a plain [value, ts] pair."""
        step = table_source_step(None, "k", {"a": [1]}, 3)
        assert TableValue.from_plain(step.state.to_plain()) == step.state  # type: ignore[union-attr]


class TestFilterAndMapValues:
    def test_filter_sends_tombstone_for_failing_update(self) -> None:
        """KTableFilterTest.shouldSendOldValuesWhenEnabledOnUpStreamMaterialization-style rules:
        without old values a failing update is a tombstone; with them, nothing when both fail."""
        even = lambda k, v: v % 2 == 0  # noqa: E731
        assert filter_change(Change(1, None), even, "A") == Change(None, None)
        assert filter_change(Change(2, 1), even, "A", send_old_values=True) == Change(2, None)
        assert filter_change(Change(1, 2), even, "A", send_old_values=True) == Change(None, 2)
        assert filter_change(Change(3, 1), even, "A", send_old_values=True) is None
        assert filter_change(Change(1, None), even, "A", filter_not=True) == Change(1, None)

    def test_map_values_maps_new_and_old(self) -> None:
        """KTableMapValues maps new and (old values on) old; None stays None."""
        assert map_values_change(Change(None, 2), lambda k, v: v + 1, "A", send_old_values=True) == Change(None, 3)
        assert map_values_change(Change(1, 2), lambda k, v: v + 1, "A") == Change(2, None)


class TestStreamTableInnerJoin:
    def test_should_join_only_if_match_found_on_stream_updates(self) -> None:
        """KStreamKTableJoinTest.shouldJoinOnlyIfMatchFoundOnStreamUpdates."""
        [t, s] = run("inner", push_table(2, "Y"), push_stream(4, "X"))
        assert t == []
        assert s == [Output(0, "X0+Y0", 0), Output(1, "X1+Y1", 1)]

    def test_should_clear_table_entry_on_null_value_updates(self) -> None:
        """KStreamKTableJoinTest.shouldClearTableEntryOnNullValueUpdates."""
        [t, s1, d, s2] = run("inner", push_table(4, "Y"), push_stream(4, "X"), push_null_to_table(), push_stream(4, "XX"))
        assert t == [] and d == []
        assert s1 == [Output(k, f"X{k}+Y{k}", k) for k in KEYS]
        assert s2 == [Output(2, "XX2+Y2", 2), Output(3, "XX3+Y3", 3)]

    def test_should_not_join_on_table_updates(self) -> None:
        """KStreamKTableJoinTest.shouldNotJoinOnTableUpdates: a table update emits nothing; the
        stream joins the latest table value."""
        batches = run("inner", push_stream(4, "X"), push_table(2, "Y"), push_stream(4, "X"), push_table(4, "YY"),
                      push_stream(4, "X"), push_table(4, "YYY"))
        assert batches[0] == [] and batches[1] == [] and batches[3] == [] and batches[5] == []
        assert batches[2] == [Output(0, "X0+Y0", 0), Output(1, "X1+Y1", 1)]
        assert batches[4] == [Output(k, f"X{k}+YY{k}", k) for k in KEYS]

    def test_should_log_and_meter_when_skipping_null_left_key_and_value(self) -> None:
        """KStreamKTableJoinTest.shouldLogAndMeterWhenSkippingNullLeftKey / ...NullLeftValue."""
        out, drops = stream_table_reference_run([("stream", None, "A", 0), ("stream", 1, None, 0)],
                                                StreamTableJoin("inner"), tostring_joiner)
        assert out == [] and drops == ["null_key", "null_value"]


class TestStreamTableLeftJoin:
    def test_should_join_regardless_if_match_found_on_stream_updates(self) -> None:
        """KStreamKTableLeftJoinTest.shouldJoinRegardlessIfMatchFoundOnStreamUpdates."""
        [_, s] = run("left", push_table(2, "Y"), push_stream(4, "X"))
        assert s == [Output(0, "X0+Y0", 0), Output(1, "X1+Y1", 1), Output(2, "X2+null", 2), Output(3, "X3+null", 3)]

    def test_should_clear_table_entry_on_null_value_updates(self) -> None:
        """KStreamKTableLeftJoinTest.shouldClearTableEntryOnNullValueUpdates."""
        [_, _, _, s2] = run("left", push_table(4, "Y"), push_stream(4, "X"), push_null_to_table(), push_stream(4, "XX"))
        assert s2 == [Output(0, "XX0+null", 0), Output(1, "XX1+null", 1), Output(2, "XX2+Y2", 2),
                      Output(3, "XX3+Y3", 3)]

    def test_should_not_drop_left_null_key(self) -> None:
        """KStreamKTableLeftJoinTest.shouldNotDropLeftNullKey (KIP-962): joined with null, not counted."""
        out, drops = stream_table_reference_run([*push_table(1, "Y"), ("stream", None, "A", 0)],
                                                StreamTableJoin("left"), tostring_joiner)
        assert out == [Output(None, "A+null", 0)] and drops == []

    def test_should_log_and_meter_when_skipping_null_left_value(self) -> None:
        """KStreamKTableLeftJoinTest.shouldLogAndMeterWhenSkippingNullLeftValue."""
        step = stream_join_step(StreamTableJoin("left"), None, 1, None, 0, tostring_joiner)
        assert step.output is None and step.dropped == "null_value"

    def test_kind_is_validated(self) -> None:
        """A stream-table join has no outer variant."""
        with pytest.raises(InvalidArgumentError, match="'inner' or 'left'"):
            StreamTableJoin("outer")  # type: ignore[arg-type]
