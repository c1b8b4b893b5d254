"""The Serde protocol, the built-in serde classes and the wrapping of a user's serde (pure Python)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from streamsdsl.dsl.options import Consumed, Grouped, Materialized, Produced
from streamsdsl.values.serdes import (
    DEFAULT_SERDE,
    BytesSerde,
    CustomSerde,
    DoubleSerde,
    IntegerSerde,
    JsonSerde,
    LongSerde,
    PlanSerde,
    Serde,
    Serdes,
    SessionWindowedSerde,
    StringSerde,
    TimeWindowedSerde,
    WindowedSerdes,
    check_serde,
)
from streamsdsl.values.windows import TimeWindow, Windowed
from streamsdsl.errors import InvalidArgumentError, InvalidTypeError, SerializationError


class Csv:
    """A user serde: lists of str as comma-separated UTF-8 text."""

    def __init__(self) -> None:
        self.calls: list[Any] = []

    def serialize(self, value: Any) -> bytes:
        self.calls.append(value)
        return ",".join(value).encode()

    def deserialize(self, data: bytes) -> list[str]:
        self.calls.append(data)
        if not data:
            raise ValueError("empty record")
        return data.decode().split(",")


BUILT_INS = [
    (Serdes.String(), StringSerde, "String", "string"),
    (Serdes.Long(), LongSerde, "Long", "bigint"),
    (Serdes.Integer(), IntegerSerde, "Integer", "int"),
    (Serdes.Double(), DoubleSerde, "Double", "double"),
    (Serdes.Bytes(), BytesSerde, "Bytes", "binary"),
    (Serdes.Json(), JsonSerde, "Json", "string"),
]


class TestBuiltIns:
    @pytest.mark.parametrize(("serde", "cls", "name", "spark_type"), BUILT_INS)
    def test_one_class_each(self, serde: Any, cls: type, name: str, spark_type: str) -> None:
        """Each built-in is its own class, a PlanSerde and a Serde, named as in Kafka Streams."""
        assert type(serde) is cls and isinstance(serde, PlanSerde) and isinstance(serde, Serde)
        assert (serde.name, serde.spark_type, repr(serde)) == (name, spark_type, f"Serdes.{name}()")

    @pytest.mark.parametrize(("serde", "cls", "name", "spark_type"), BUILT_INS)
    def test_singletons_and_equality(self, serde: Any, cls: type, name: str, spark_type: str) -> None:
        """Serdes.X() returns one shared instance; a fresh instance of the class equals it."""
        assert getattr(Serdes, name)() is serde
        assert cls() == serde and hash(cls()) == hash(serde)
        assert all(serde != other for other, *_ in BUILT_INS if other is not serde)

    def test_default_is_json(self) -> None:
        """JSON is the default serde."""
        assert DEFAULT_SERDE is Serdes.Json()

    def test_internal_forms(self) -> None:
        """to_internal / from_internal map Python values to the in-plan column and back."""
        assert Serdes.Json().to_internal({"a": 1}) == '{"a":1}'
        assert Serdes.Json().from_internal('{"a":1}') == {"a": 1}
        assert Serdes.Double().to_internal(2) == 2.0 and isinstance(Serdes.Double().to_internal(2), float)
        assert Serdes.Bytes().from_internal(bytearray(b"x")) == b"x"
        assert Serdes.String().to_internal(None) is None and Serdes.Long().from_internal(None) is None

    def test_integral_internal_type_error(self) -> None:
        """Long and Integer columns hold ints only."""
        with pytest.raises(InvalidTypeError) as exc:
            Serdes.Integer().to_internal("7")
        assert str(exc.value) == "Serdes.Integer() holds int values (got str: '7')."

    def test_bool_is_not_a_number(self) -> None:
        """A bool is refused by the numeric serdes (it is an int subclass in Python)."""
        with pytest.raises(SerializationError, match=r"^Serdes.Double\(\) cannot serialize bool True: expected float$"):
            Serdes.Double().serialize(True)


class TestCheckSerde:
    def test_built_ins_pass_through(self) -> None:
        """Built-in serdes and None are returned as they are."""
        assert check_serde(Serdes.Long(), "value_serde") is Serdes.Long()
        assert check_serde(None, "value_serde") is None

    def test_user_serde_is_wrapped_once(self) -> None:
        """A user's serde becomes a CustomSerde; an already wrapped one is kept."""
        user = Csv()
        wrapped = check_serde(user, "value_serde")
        assert isinstance(wrapped, CustomSerde) and wrapped.inner is user
        assert check_serde(wrapped, "value_serde") is wrapped

    def test_class_instead_of_instance(self) -> None:
        """Passing the serde class instead of an instance says how to fix it."""
        with pytest.raises(InvalidTypeError) as exc:
            check_serde(Csv, "key_serde")
        assert str(exc.value) == "'key_serde' must be a serde instance, not the class Csv: pass Csv()."

    def test_windowed_serde_refused(self) -> None:
        """A windowed-key serde is for reading windowed keys, not for the DSL's options."""
        with pytest.raises(InvalidTypeError) as exc:
            check_serde(WindowedSerdes.session_windowed_serde_from(Serdes.String()), "key_serde")
        assert str(exc.value) == (
            "'key_serde' takes the serde of the key itself (e.g. Serdes.String()), not "
            "SessionWindowedSerde(inner=Serdes.String()): windowed keys are written in Kafka Streams' "
            "windowed layout automatically."
        )

    def test_not_a_serde(self) -> None:
        """Anything without serialize/deserialize is refused with the protocol spelled out."""
        with pytest.raises(InvalidTypeError) as exc:
            check_serde("String", "value_serde")
        assert str(exc.value) == (
            "'value_serde' must be a Serde such as Serdes.String(), or an object with serialize(value) and "
            "deserialize(data) methods (got str: 'String')."
        )

    @pytest.mark.parametrize("option", [Consumed, Produced, Grouped])
    def test_options_wrap_user_serdes(self, option: Any) -> None:
        """Consumed, Produced and Grouped wrap a user's serde; the same object gives equal wrappers."""
        user = Csv()
        opts = option.with_serdes(user, user)
        assert isinstance(opts.key_serde, CustomSerde) and opts.key_serde == opts.value_serde
        assert opts.value_serde != CustomSerde(Csv())
        assert repr(opts.value_serde) == "CustomSerde(Csv)"

    def test_materialized_wraps_user_serdes(self) -> None:
        """Materialized wraps a user's serde, also through with_value_serde."""
        m = Materialized.as_("store").with_value_serde(Csv())
        assert isinstance(m.value_serde, CustomSerde) and m.value_serde.name == "Csv"


class TestCustomSerde:
    def test_internal_side_is_the_wire_bytes(self) -> None:
        """The in-plan column of a user's serde holds its wire bytes."""
        user = Csv()
        serde = CustomSerde(user)
        assert serde.spark_type == "binary"
        assert serde.to_internal(["a", "b"]) == serde.serialize(["a", "b"]) == b"a,b"
        assert serde.from_internal(bytearray(b"a,b")) == serde.deserialize(b"a,b") == ["a", "b"]

    def test_user_code_never_sees_none(self) -> None:
        """None is a tombstone both ways; the user's methods are not called for it."""
        user = Csv()
        serde = CustomSerde(user)
        assert serde.serialize(None) is None and serde.deserialize(None) is None
        assert serde.to_internal(None) is None and serde.from_internal(None) is None
        assert user.calls == []

    def test_errors_name_the_user_class(self) -> None:
        """Any exception of the user's serde becomes a SerializationError naming its class."""
        serde = CustomSerde(Csv())
        with pytest.raises(SerializationError) as exc:
            serde.deserialize(b"")
        assert str(exc.value) == "CustomSerde(Csv) cannot deserialize 0 bytes b'': empty record"
        with pytest.raises(SerializationError) as exc:
            serde.serialize(5)
        assert str(exc.value) == "CustomSerde(Csv) cannot serialize int 5: can only join an iterable"

    def test_inner_must_be_a_serde(self) -> None:
        """CustomSerde wraps an object with serialize and deserialize."""
        with pytest.raises(InvalidTypeError) as exc:
            CustomSerde(json)
        assert str(exc.value) == f"'inner' must be Serde (got module: {json!r})."


class TestWindowedSerdes:
    def test_validated(self) -> None:
        """Windowed serdes check their inner serde and window size."""
        with pytest.raises(InvalidTypeError) as exc:
            SessionWindowedSerde("String")  # type: ignore[arg-type]
        assert str(exc.value) == "'inner' must be Serde (got str: 'String')."
        with pytest.raises(InvalidArgumentError) as exc2:
            TimeWindowedSerde(Serdes.String(), -1)
        assert str(exc2.value) == (
            "'window_size_ms' must be >= 0 ms (got -1). Pass the size of the time windows (TimeWindows.size_ms)."
        )

    def test_user_inner_serde(self) -> None:
        """A windowed serde works over a user's serde too."""
        serde = WindowedSerdes.time_windowed_serde_from(Csv(), 10)
        raw = serde.serialize(Windowed(["a", "b"], TimeWindow(20, 30)))
        assert raw == b"a,b" + (20).to_bytes(8, "big")
        assert serde.deserialize(raw) == Windowed(["a", "b"], TimeWindow(20, 30))

    def test_short_key(self) -> None:
        """Bytes shorter than the window suffix are refused."""
        with pytest.raises(SerializationError, match=r"^a session-windowed key needs at least 16 bytes \(got 3\)\.$"):
            WindowedSerdes.session_windowed_serde_from(Serdes.String()).deserialize(b"abc")
