"""Serdes: Python round trips, and the native Spark encodings agree with them byte for byte."""

from __future__ import annotations

import re
import struct
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamsdsl import SerializationError, Serdes, SessionWindow, TimeWindow, Windowed, WindowedSerdes


class TestPythonSerdes:
    @pytest.mark.parametrize(
        ("serde", "value", "wire"),
        [
            (Serdes.String(), "héllo", "héllo".encode()),
            (Serdes.Long(), -2, struct.pack(">q", -2)),
            (Serdes.Integer(), 7, struct.pack(">i", 7)),
            (Serdes.Double(), 1.5, struct.pack(">d", 1.5)),
            (Serdes.Bytes(), b"\x00\x01", b"\x00\x01"),
            (Serdes.Json(), {"a": [1, "x"]}, b'{"a":[1,"x"]}'),
        ],
    )
    def test_round_trip(self, serde: Any, value: Any, wire: bytes) -> None:
        """Each serde writes the documented wire format and reads it back."""
        assert serde.serialize(value) == wire
        assert serde.deserialize(wire) == value
        assert serde.serialize(None) is None and serde.deserialize(None) is None

    def test_errors_are_clear(self) -> None:
        """Wrong types and wrong lengths raise SerializationError naming the serde."""
        with pytest.raises(SerializationError, match=r"Serdes.Long\(\) cannot serialize str 'x'"):
            Serdes.Long().serialize("x")
        with pytest.raises(SerializationError, match=r"Serdes.Integer\(\) cannot deserialize 3 bytes"):
            Serdes.Integer().deserialize(b"abc")
        with pytest.raises(SerializationError, match="Return JSON-compatible values"):
            Serdes.Json().serialize({1, 2})

    def test_string_reads_any_bytes_with_replacement_characters(self) -> None:
        """Like Kafka's StringDeserializer, bytes that are not UTF-8 are read, not refused: each
        maximal invalid part becomes U+FFFD."""
        assert Serdes.String().deserialize(b"caf\xc3\xa9") == "café"
        assert Serdes.String().deserialize(b"a\xffb\xc3") == "a\ufffdb\ufffd"
        assert Serdes.String().deserialize(b"\xe2\x82") == "\ufffd"  # a cut sequence: one

    def test_windowed_key_layouts(self) -> None:
        """Session keys: key + end + start (8 bytes BE each); time keys: key + start."""
        session = WindowedSerdes.session_windowed_serde_from(Serdes.String())
        raw = session.serialize(Windowed("k", SessionWindow(5, 9)))
        assert raw == b"k" + struct.pack(">qq", 9, 5)
        assert session.deserialize(raw) == Windowed("k", SessionWindow(5, 9))
        timed = WindowedSerdes.time_windowed_serde_from(Serdes.String(), 10)
        assert timed.serialize(Windowed("k", TimeWindow(20, 30))) == b"k" + struct.pack(">q", 20)
        assert timed.deserialize(b"k" + struct.pack(">q", 20)) == Windowed("k", TimeWindow(20, 30))


@pytest.mark.spark
class TestNativeSparkEncodings:
    @settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(
        longs=st.lists(st.one_of(st.none(), st.integers(-(2**63), 2**63 - 1)), min_size=1, max_size=20),
        ints=st.lists(st.one_of(st.none(), st.integers(-(2**31), 2**31 - 1)), min_size=1, max_size=20),
    )
    def test_numeric_serdes_native_equal_python(self, spark: Any, longs: list[Any], ints: list[Any]) -> None:
        """The native Long/Integer (de)serialization expressions equal struct.pack/unpack."""
        from pyspark.sql import functions as F

        from streamsdsl.compiler.serde_exprs import deserialize, serialize_value

        for serde, values in ((Serdes.Long(), longs), (Serdes.Integer(), ints)):
            df = _raw(spark, [serde.serialize(v) for v in values])
            rows = df.select(deserialize(F.col("b"), serde, "value", _context()).alias("v")).select(
                "v", serialize_value(F.col("v"), serde, serde).alias("e")
            ).collect()
            assert [r.v for r in rows] == values
            assert [None if r.e is None else bytes(r.e) for r in rows] == [serde.serialize(v) for v in values]

    def test_double_native_equal_python(self, spark: Any) -> None:
        """Double bytes decode through the vectorized path and encode back to the same bytes."""
        from pyspark.sql import functions as F

        from streamsdsl.compiler.serde_exprs import deserialize, serialize_value

        serde = Serdes.Double()
        values = [1.5, None, -0.0, 1e300]
        df = _raw(spark, [serde.serialize(v) for v in values])
        rows = df.select(deserialize(F.col("b"), serde, "value", _context()).alias("v")).select(
            "v", serialize_value(F.col("v"), serde, serde).alias("e")
        ).collect()
        assert [r.v for r in rows] == values
        assert [None if r.e is None else bytes(r.e) for r in rows] == [serde.serialize(v) for v in values]

    def test_string_reads_any_bytes_as_the_python_serde_does(self, spark: Any) -> None:
        """A ``Serdes.String()`` column reads every byte string as the Python serde (the direct
        engine) reads it: bytes that are not UTF-8 become U+FFFD (Kafka's StringDeserializer reads
        them too), never an error. Byte strings built around UTF-8's edges: overlong forms,
        surrogates, beyond U+10FFFF, cut sequences."""
        import random

        from pyspark.sql import functions as F

        from streamsdsl.compiler.serde_exprs import deserialize, invalid_bytes

        rng = random.Random(7)
        pieces = [b"a", b"\x00", b"\x7f", b"\xc2\x80", b"\xc1\xbf", b"\xdf\xbf", b"\xe0\x9f\xbf", b"\xe0\xa0\x80",
                  b"\xed\x9f\xbf", b"\xed\xa0\x80", b"\xef\xbf\xbf", b"\xf0\x8f\xbf\xbf", b"\xf0\x90\x80\x80",
                  b"\xf4\x8f\xbf\xbf", b"\xf4\x90\x80\x80", b"\xf5\x80\x80\x80", b"\x80", b"\xbf", b"\xff",
                  b"\xc2", b"\xe2\x82", b"\xf0\x9f\x98", "é€😀".encode()]
        samples = [None, b""] + [b"".join(rng.choice(pieces) for _ in range(rng.randrange(1, 6)))
                                 for _ in range(2000)]
        serde = Serdes.String()
        bad, _ = invalid_bytes(F.col("b"), serde)
        rows = _raw(spark, samples).select(bad.alias("bad"), deserialize(F.col("b"), serde, "key", _context()).alias("s"))
        got = rows.collect()
        assert [r.bad for r in got] == [False] * len(samples)
        assert [r.s for r in got] == [serde.deserialize(s) for s in samples]
        assert sum("\ufffd" in (r.s or "") for r in got) > 1000  # most samples hold invalid parts

    def test_the_jars_error_message_equals_the_one_built_without_it(self, spark: Any, monkeypatch: Any) -> None:
        """A source record's deserialization error reads the same whether the jar builds its
        message (``RecordErrors``, one call) or Spark expressions do (a session without the
        jar): a JSON value with a key (non-ASCII) and with the topic as a constant, a Long key."""
        from pyspark.sql import functions as F

        from streamsdsl.compiler import serde_exprs
        from streamsdsl.compiler.serde_exprs import RecordContext, decode, deserialization_check, key_as_json
        from streamsdsl.errors import RecordError

        df = spark.createDataFrame([(b"k\xc3\xa9", b'{"a" 1}', "in", 0, 7)],
                                   "key binary, value binary, topic string, partition int, offset long")
        position = F.shiftleft(F.col("partition").cast("bigint"), 40) + F.col("offset")
        key_json = key_as_json(decode(F.col("key"), Serdes.String()), Serdes.String())
        cases = [(Serdes.Json(), "value", RecordContext("SRC", position, key_json)),
                 (Serdes.Json(), "value", RecordContext("SRC", position, None, "in")),
                 (Serdes.Long(), "key", RecordContext("SRC", position))]

        def messages() -> list[str]:
            out = []
            for serde, what, context in cases:
                with pytest.raises(Exception) as caught:
                    df.filter(deserialization_check(F.col(what), serde, what, context)).collect()
                out.append(str(RecordError.find(caught.value)))
            return out

        assert serde_exprs.deserialization_message(*[F.lit(None)] * 8) is not None, "the test session loads the jar"
        jar = messages()
        monkeypatch.setattr(serde_exprs, "deserialization_message", lambda *columns: None)
        assert messages() == jar
        assert jar[0].endswith("(record at topic in partition 0 offset 7, key 'ké')")
        assert jar[2].startswith("SRC: Serdes.Long() cannot deserialize the record key: expected 8 bytes, got 3.")

    def test_a_source_reads_the_key_its_value_error_names_only_for_a_failing_record(self, spark: Any) -> None:
        """A JSON value's check names the record's key in its error, yet a plan that does not use
        the source's key reads it only for a record that fails: the check is a projection of its
        own (the jar's message is declared not deterministic, so Spark does not push the filter
        into it), and in Spark's generated code the only column read before the check is the
        value. The error still names the key."""
        from pyspark.sql import functions as F

        from streamsdsl import Consumed, Produced, StreamsBuilder
        from streamsdsl.compiler import PlanMode, compile_topology
        from streamsdsl.compiler.plan import CompileOptions
        from streamsdsl.errors import RecordError

        b = StreamsBuilder()
        orders = b.stream("orders", Consumed.with_serdes(Serdes.String(), Serdes.Json()))
        orders.group_by(F.get_json_object(F.col("value"), "$.customer")).count().to_stream().to(
            "out", Produced.with_serdes(Serdes.String(), Serdes.Long()))
        topology = b.build()
        schema = "key binary, value binary, topic string, partition int, offset long, timestamp long"

        def compiled(values: list[bytes]) -> Any:
            rows = [(f"o{i}".encode(), v, "orders", 0, i, 1000 + i) for i, v in enumerate(values)]
            raw = spark.createDataFrame(rows, schema).withColumn("headers", F.lit(None).cast(
                "array<struct<key:string,value:binary>>"))
            return compile_topology(topology, lambda node: raw, CompileOptions(PlanMode.STREAMING)).output

        good = compiled([b'{"customer": "c1"}', b'{"customer": "c2"}', b'{"customer": "c1"}'])
        assert sorted((bytes(r.key), bytes(r.value)) for r in good.collect()) == [
            (b"c1", (2).to_bytes(8, "big")), (b"c2", (1).to_bytes(8, "big"))]
        plan = good._jdf.queryExecution().executedPlan()
        codegen = spark._jvm.org.apache.spark.sql.execution.debug.package.codegenStringSeq(plan)
        stages = [codegen.apply(i)._2() for i in range(codegen.size())]
        source_stage = next(code for code in stages if "JsonCheck.validOrNull(" in code)
        at = source_stage.index("JsonCheck.validOrNull(")
        # the scan's rows hold the key at 0 and the value at 1: the value is read before the
        # check, the key only after it (in the branch that builds the message)
        assert re.search(r"rdd_row_\d+\.getBinary\(1\)", source_stage[:at])
        assert not re.search(r"rdd_row_\d+\.getBinary\(0\)", source_stage[:at])
        assert re.search(r"rdd_row_\d+\.getBinary\(0\)", source_stage[at:])

        with pytest.raises(Exception) as caught:
            compiled([b'{"customer": "c1"}', b'{"customer" "c2"}']).collect()
        error = RecordError.find(caught.value)
        assert str(error).startswith("KSTREAM-SOURCE-0000000000: Serdes.Json() cannot deserialize the record value")
        assert str(error).endswith("(record at topic orders partition 0 offset 1, key 'o1')")

    def test_custom_serde_column_is_the_wire_bytes(self, spark: Any) -> None:
        """A user's serde: the column holds its bytes; its deserialize() decides which are invalid."""
        from pyspark.sql import functions as F

        from streamsdsl.compiler.serde_exprs import deserialize, invalid_bytes, serialize_value
        from streamsdsl.values.serdes import CustomSerde

        serde = CustomSerde(_Digits())
        df = _raw(spark, [b"12", None, b"x"])
        bad, reason = invalid_bytes(F.col("b"), serde)
        rows = df.select(bad.alias("bad"), reason.alias("reason"), serialize_value(F.col("b"), serde, serde).alias("e"))
        assert [tuple(r) for r in rows.collect()] == [
            (False, None, bytearray(b"12")), (False, None, None), (True, "ValueError: not digits: b'x'", bytearray(b"x")),
        ]
        readable = df.filter(F.col("b").isNull() | (F.col("b") != b"x"))
        ok = readable.select(deserialize(F.col("b"), serde, "value", _context()).alias("v")).collect()
        assert [r.v for r in ok] == [bytearray(b"12"), None]
        with pytest.raises(Exception, match=r"KSTREAM-SOURCE-0000000000: CustomSerde\(_Digits\) cannot deserialize the "
                                            r"record value: ValueError: not digits: b'x'\. Fix the producer .* \(record at "
                                            r"topic t partition 0 offset 0\)"):
            df.filter(F.col("b") == b"x").select(deserialize(F.col("b"), serde, "value", _context())).collect()


class _Digits:
    """A user serde: non-negative ints as decimal ASCII digits."""

    def serialize(self, value: int) -> bytes:
        return str(value).encode()

    def deserialize(self, data: bytes) -> int:
        if not data.isdigit():
            raise ValueError(f"not digits: {data!r}")
        return int(data)


def _context() -> Any:
    from pyspark.sql import functions as F

    from streamsdsl.compiler.serde_exprs import RecordContext

    return RecordContext("KSTREAM-SOURCE-0000000000", F.lit(0))


def _raw(spark: Any, payloads: list[bytes | None]) -> Any:
    """A raw-record frame: the bytes as ``b`` plus the coordinates error messages name."""
    from pyspark.sql import functions as F

    return spark.createDataFrame([(p,) for p in payloads], "b binary").select(
        "b", F.lit("t").alias("topic"), F.lit(0).alias("partition"), F.lit(0).alias("offset")
    )
