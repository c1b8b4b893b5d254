"""Reading and re-encoding ``Serdes.Json()`` cells without a ``json.loads`` per record: a batch
read by Arrow's kernels (`arrow_cells.python_values`) and a column converted by Spark's JSON
reader (`serde_exprs.convert_column`) give exactly what the serdes give cell by cell, and what
the serdes refuse fails with the serde and the value; a built-in joiner writes a string as
``json_dumps`` does."""

from __future__ import annotations

import json
import re
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamsdsl.compiler.arrow_cells import python_values
from streamsdsl.values.serdes import CustomSerde, IntegerSerde, JsonSerde, LongSerde, StringSerde, json_dumps

JSON = JsonSerde()
#: JSON values as streamsdsl writes them: strings with quotes, escapes, control characters and
#: non-ASCII text, integers around the bigint's and the int's bounds, and the other kinds.
VALUES = st.one_of(
    st.text(),
    st.text(alphabet='ab"\\\n\x00\x1féü€😀'),
    st.integers(min_value=-(1 << 63), max_value=(1 << 63) - 1),
    st.integers(min_value=-(1 << 31) - 2, max_value=(1 << 31) + 1),
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


@settings(deadline=None)
@given(BATCHES)
def test_json_values_are_those_json_loads_reads(values: list[Any]) -> None:
    cells = _cells(values)
    assert python_values(JSON, cells) == [None if c is None else JSON.from_internal(c) for c in cells.to_pylist()]


def test_the_other_serdes_cells_are_their_values() -> None:
    assert python_values(StringSerde(), pa.array(["7", None])) == ["7", None]
    assert python_values(LongSerde(), pa.array([7, None])) == [7, None]
    assert python_values(JSON, pa.array([], type=pa.string())) == []

    class Upper:
        def serialize(self, value: str) -> bytes:
            return value.upper().encode()

        def deserialize(self, data: bytes) -> str:
            return data.decode().lower()

    assert python_values(CustomSerde(Upper()), pa.array([b"EU", None])) == ["eu", None]  # read by the user's serde


#: JSON texts a Json column holds: what streamsdsl writes, and what a ``Serdes.Json()`` source
#: keeps as it read it (whitespace around the value, escapes, a surrogate pair).
TEXTS = ['"EU"', '"café €"', '""', '"a\\"b\\\\c\\n"', '"\\u00e9\\ud83d\\ude00"', ' "x"\n', "null", " null ",
         "0", "-12", "2147483647", "-2147483648", "2147483648", "9223372036854775807", "-9223372036854775808",
         "9223372036854775808", "99999999999999999999", "1.5", "1e3", "-0", "true", "[1]", '{"a":1}', None]


def _by_the_serdes(text: str | None, target: Any) -> Any:
    """What the Python conversion gives, or ``"refused"`` (its error, or a value the column cannot hold)."""
    if text is None:
        return None
    value = json.loads(text)
    if value is None:
        return None
    if isinstance(target, StringSerde):
        return value if isinstance(value, str) else "refused"
    bits = 64 if isinstance(target, LongSerde) else 32
    ok = isinstance(value, int) and not isinstance(value, bool) and -(1 << bits - 1) <= value < 1 << bits - 1
    return value if ok else "refused"


@pytest.mark.parametrize("target", [StringSerde(), LongSerde(), IntegerSerde()], ids=repr)
def test_spark_converts_json_cells_as_the_serdes_do(spark: Any, target: Any) -> None:
    from pyspark.errors import PySparkException
    from pyspark.sql import functions as F

    from streamsdsl.compiler.serde_exprs import convert_column

    df = spark.createDataFrame([(i, t) for i, t in enumerate(TEXTS)], "i int, t string")
    expected = {i: _by_the_serdes(t, target) for i, t in enumerate(TEXTS)}
    kept = [i for i, v in expected.items() if v != "refused"]
    rows = df.filter(F.col("i").isin(kept)).select("i", convert_column(F.col("t"), JSON, target).alias("v")).collect()
    assert {r.i: r.v for r in rows} == {i: expected[i] for i in kept}
    # one of each refusal (a job each): a value of another kind, and an integer out of range
    for text in ('"EU"', "true", "9223372036854775808", "2147483648"):
        if _by_the_serdes(text, target) != "refused":
            continue
        one = spark.createDataFrame([(text,)], "t string").select(convert_column(F.col("t"), JSON, target))
        with pytest.raises(PySparkException, match=rf"{re.escape(repr(target))} (holds|cannot hold)"):
            one.collect()


def test_spark_writes_a_string_as_json_as_json_dumps_does(spark: Any) -> None:
    """A built-in joiner's JSON text of a ``String`` value (`jvm_joins._json_text`): within quotes
    when no character needs an escape, else Spark's JSON writer; the text ``json_dumps`` writes."""
    from pyspark.sql import functions as F

    from streamsdsl.compiler.jvm_joins import _json_text

    texts = ["EU", "", "café €😀", 'a"b', "back\\slash", "tab\tnew\nline", "\x00\x1f\x7f", "\u2028", None,
             "\b\f\x0b\x0e\x1a", "\\u001A", "\\\x1b", "\\\\u001F\x1f"]
    df = spark.createDataFrame([(i, t) for i, t in enumerate(texts)], "i int, s string")
    rows = df.select("i", _json_text(F.col("s"), StringSerde()).alias("j")).collect()
    assert {r.i: r.j for r in rows} == {i: "null" if t is None else json_dumps(t) for i, t in enumerate(texts)}
