"""`streamsdsl.compiler.arrow_cells`: a batch of cells read or re-encoded by Arrow's kernels gives
exactly what the serdes give cell by cell, and a batch the kernels cannot take exactly is left to
the serdes."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamsdsl.compiler.arrow_cells import converted, python_values
from streamsdsl.values.serdes import IntegerSerde, JsonSerde, LongSerde, StringSerde, json_dumps

JSON = JsonSerde()
#: JSON values as streamsdsl writes them: strings with quotes, escapes, control characters and
#: non-ASCII text, integers around the bigint's and the int's bounds, and the other kinds.
VALUES = st.one_of(
    st.text(),
    st.text(alphabet='ab"\\\n\x00\x1féü€😀'),
    st.integers(min_value=-(1 << 63), max_value=(1 << 63) - 1),
    st.integers(min_value=-(1 << 31) - 2, max_value=1 << 31 + 1),
    st.booleans(),
    st.floats(allow_nan=False, allow_infinity=False),
    st.lists(st.integers(), max_size=2),
    st.none(),
)
#: Batches of one kind each (the kernels take a batch whole or not at all), and mixed ones.
BATCHES = st.one_of(st.lists(st.one_of(st.text(), st.none())), st.lists(st.one_of(st.integers(), st.none())),
                    st.lists(VALUES))


def _cells(values: list[Any]) -> pa.Array:
    return pa.array([None if v is None else json_dumps(v) for v in values], type=pa.string())


def _cell_by_cell(cells: pa.Array, target: Any) -> list[Any] | Exception:
    try:
        return [None if c is None else target.to_internal(JSON.from_internal(c)) for c in cells.to_pylist()]
    except Exception as exc:  # noqa: BLE001 - the serde's own refusal
        return exc


@settings(deadline=None)
@given(BATCHES)
def test_json_values_are_those_json_loads_reads(values: list[Any]) -> None:
    cells = _cells(values)
    assert python_values(JSON, cells) == [None if c is None else JSON.from_internal(c) for c in cells.to_pylist()]


@settings(deadline=None)
@given(BATCHES, st.sampled_from([StringSerde(), LongSerde(), IntegerSerde()]))
def test_a_conversion_by_the_kernels_is_the_serdes_conversion(values: list[Any], target: Any) -> None:
    cells = _cells(values)
    fast = converted(cells, JSON, target)
    if fast is None:
        return  # the serdes convert this batch (and refuse what they refuse)
    expected = _cell_by_cell(cells, target)
    assert not isinstance(expected, Exception), f"the kernels converted a batch the serdes refuse: {expected!r}"
    assert fast.to_pylist() == expected
    assert fast.type == pa.int32() if isinstance(target, IntegerSerde) else True


@pytest.mark.parametrize(("cells", "target", "expected"), [
    (['"EU"', None, '"café €"'], StringSerde(), ["EU", None, "café €"]),
    (['"EU"', '"a\\"b"'], StringSerde(), None),  # an escape: cell by cell
    (['"EU"', "7"], StringSerde(), None),  # a number is no str: the serde's own error
    (["-12", "0", None, "999999999999999999"], LongSerde(), [-12, 0, None, 999999999999999999]),
    (["9999999999999999999"], LongSerde(), None),  # 19 digits: cell by cell
    (["2147483647", "-2147483648"], IntegerSerde(), [2147483647, -2147483648]),
    (["2147483648"], IntegerSerde(), None),  # past an int: the serde's own error
    (["true"], LongSerde(), None),
    ([None, None], StringSerde(), [None, None]),
])
def test_which_batches_the_kernels_convert(cells: list[str | None], target: Any, expected: list[Any] | None) -> None:
    fast = converted(pa.array(cells, type=pa.string()), JSON, target)
    assert (None if fast is None else fast.to_pylist()) == expected


def test_only_a_json_column_is_converted_by_the_kernels() -> None:
    assert converted(pa.array(["7"]), StringSerde(), LongSerde()) is None
    assert python_values(StringSerde(), pa.array(["7", None])) == ["7", None]
    assert python_values(LongSerde(), pa.array([7, None])) == [7, None]
