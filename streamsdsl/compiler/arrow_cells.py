"""A column of a serde's cells read as Python values, a batch at a time, in the Python workers.

The Python steps' Arrow UDFs turn a batch's key and value cells into Python values
(`python_values`). For a ``Serdes.Json()`` column, cell by cell, that is a ``json.loads`` per
record. Most JSON cells of a stream are a plain string or an integer, whose Python value Arrow's
compute kernels take out of the text exactly: a JSON string without an escape (``"`` … ``"``, no
``\\``, no control character) is the text between its quotes, an integer of at most 18 digits
is its number. A batch whose every cell is one of those is read by those kernels; any other
batch cell by cell, with the serde's own code, so the values are the same either way.

>>> import pyarrow as pa
>>> from streamsdsl.values.serdes import JsonSerde
>>> python_values(JsonSerde(), pa.array(['"EU"', None, '"café"']))
['EU', None, 'café']
>>> python_values(JsonSerde(), pa.array(['"a\\\\"b"', '[1]']))
['a"b', [1]]
>>> python_values(JsonSerde(), pa.array(['-12', None, '7']))
[-12, None, 7]
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from streamsdsl.values.serdes import JsonSerde, PlanSerde

#: A JSON string whose value is the text between its quotes (RE2, as Arrow's kernels match).
_PLAIN_STRING = r'^"[^"\\\x00-\x1f]*"$'
#: A JSON integer that fits a bigint: at most 18 digits (the same text for Arrow's RE2 and for
#: Spark's Java regular expressions: `serde_exprs.convert_column` casts the cells it matches).
PLAIN_JSON_INTEGER = r"^-?(0|[1-9][0-9]{0,17})$"


def _is_text(cells: pa.Array) -> bool:
    return pa.types.is_string(cells.type) or pa.types.is_large_string(cells.type)


def _every(cells: pa.Array, pattern: str) -> bool:
    """Whether every non-null cell of a string column matches ``pattern``."""
    matched = pc.match_substring_regex(cells, pattern)
    return bool(pc.all(matched, skip_nulls=True).as_py() is not False)


def _json_strings(cells: pa.Array) -> pa.Array | None:
    """The string values of a column of JSON texts, or None unless each is a plain JSON string."""
    if not _is_text(cells) or not _every(cells, _PLAIN_STRING):
        return None
    return pc.utf8_slice_codeunits(cells, 1, -1)


def _json_integers(cells: pa.Array) -> pa.Array | None:
    """The bigint values of a column of JSON texts, or None unless each is a plain JSON integer."""
    if not _is_text(cells) or not _every(cells, PLAIN_JSON_INTEGER):
        return None
    return pc.cast(cells, pa.int64())


def _cell_is_value(serde: PlanSerde) -> bool:
    """Whether ``serde``'s cell is its Python value (it keeps `PlanSerde`'s reading of a cell)."""
    kind = type(serde)
    return kind.from_internal is PlanSerde.from_internal and kind._from_internal is PlanSerde._from_internal


def python_values(serde: PlanSerde, cells: pa.Array) -> list[Any]:
    """The Python values of a column of ``serde``'s cells (``None`` for a null cell)."""
    if len(cells) == 0:
        return []
    if isinstance(serde, JsonSerde):
        for fast in (_json_strings, _json_integers):
            values = fast(cells)
            if values is not None:
                return values.to_pylist()
        return [None if c is None else serde.from_internal(c) for c in cells.to_pylist()]
    if _cell_is_value(serde):
        return cells.to_pylist()
    return [serde.from_internal(c) for c in cells.to_pylist()]
