"""Serdes: how keys and values travel as bytes and how they are held inside Spark.

`Serde` is the protocol a user implements: ``serialize(value) -> bytes | None`` and
``deserialize(data) -> value``. Any object with those two methods can be passed wherever a
serde is accepted (``Consumed``, ``Produced``, ``Grouped``, ``Materialized``).

Inside the compiled plan every serde is a `PlanSerde`: it also knows its *internal* form, the
Spark column type the plan holds its values in (``spark_type``), and how Python values map to
and from that column (``to_internal`` / ``from_internal``). The built-in serdes are one class
each; a user's serde is wrapped once, where the DSL receives it, in a `CustomSerde`, whose
column holds the wire bytes.

| serde   | Python value       | wire bytes             | Spark column type     |
|---------|--------------------|------------------------|-----------------------|
| String  | `str`              | UTF-8                  | `string`              |
| Long    | `int` (64-bit)     | 8 bytes, big-endian    | `bigint`              |
| Integer | `int` (32-bit)     | 4 bytes, big-endian    | `int`                 |
| Double  | `float`            | 8 bytes, IEEE 754 BE   | `double`              |
| Bytes   | `bytes`            | as is                  | `binary`              |
| Json    | JSON value         | UTF-8 JSON text        | `string` (JSON text)  |
| custom  | what it reads      | what it writes         | `binary` (wire bytes) |

A ``None`` value serializes to a null record value (a tombstone) with every serde, and null
bytes deserialize to ``None``; a user's serde is never called with ``None``.
"""

from __future__ import annotations

import json
import struct
from typing import Any, ClassVar, Protocol, runtime_checkable

import attrs

from streamsdsl._validation import duration_field, instance_of
from streamsdsl.values.windows import SessionWindow, TimeWindow, Window, Windowed
from streamsdsl.errors import InvalidTypeError, SerializationError

__all__ = [
    "BytesSerde", "CustomSerde", "DoubleSerde", "FixedWidthSerde", "IntegerSerde", "JsonSerde", "LongSerde",
    "PlanSerde", "Serde", "Serdes", "SessionWindowedSerde", "StringSerde", "TimeWindowedSerde", "WindowedSerdes",
]


@runtime_checkable
class Serde(Protocol):
    """What a serde is: a serializer/deserializer pair. Implement it to use your own format.

    Examples
    --------
    >>> class Upper:
    ...     def serialize(self, value): return value.upper().encode()
    ...     def deserialize(self, data): return data.decode()
    >>> isinstance(Upper(), Serde)
    True
    """

    def serialize(self, value: Any) -> bytes | None:
        """Python value → wire bytes."""
        ...

    def deserialize(self, data: bytes | None) -> Any:
        """Wire bytes → Python value."""
        ...


class PlanSerde:
    """A `Serde` the compiler can plan with: the wire side, plus the column it is held in.

    Subclasses define ``name`` (used in messages), ``spark_type`` (the Spark DDL type of the
    in-plan column), ``_encode`` / ``_decode`` (wire side, never called with ``None``) and,
    when the column does not hold the Python value itself, ``_to_internal`` /
    ``_from_internal``. This base holds the ``None`` handling and the error wrapping, once.
    """

    name: str
    spark_type: str
    #: The exceptions of ``_encode`` / ``_decode`` reported as a `SerializationError`.
    _errors: ClassVar[tuple[type[Exception], ...]] = (
        TypeError, ValueError, struct.error, OverflowError, UnicodeDecodeError,
    )

    def serialize(self, value: Any) -> bytes | None:
        """Turn a Python value into wire bytes (``None`` stays ``None``)."""
        if value is None:
            return None
        try:
            return self._encode(value)
        except self._errors as exc:
            raise SerializationError(f"{self!r} cannot serialize {type(value).__name__} {value!r}: {exc}") from exc

    def deserialize(self, data: bytes | None) -> Any:
        """Turn wire bytes into a Python value (``None`` stays ``None``)."""
        if data is None:
            return None
        data = bytes(data)
        try:
            return self._decode(data)
        except self._errors as exc:
            raise SerializationError(f"{self!r} cannot deserialize {len(data)} bytes {data[:32]!r}: {exc}") from exc

    def to_internal(self, value: Any) -> Any:
        """Python value → the value stored in the Spark column."""
        return None if value is None else self._to_internal(value)

    def from_internal(self, cell: Any) -> Any:
        """Value stored in the Spark column → Python value."""
        return None if cell is None else self._from_internal(cell)

    # -- per-serde behaviour ---------------------------------------------------------------------
    def _encode(self, value: Any) -> bytes | None:
        raise NotImplementedError

    def _decode(self, data: bytes) -> Any:
        raise NotImplementedError

    def _to_internal(self, value: Any) -> Any:
        return value

    def _from_internal(self, cell: Any) -> Any:
        return cell

    def __repr__(self) -> str:
        return f"Serdes.{self.name}()"


def _require(value: Any, types: type | tuple[type, ...], expected: str) -> None:
    if isinstance(value, bool) or not isinstance(value, types):
        raise TypeError(f"expected {expected}")


@attrs.frozen(repr=False)
class StringSerde(PlanSerde):
    r"""UTF-8 text; the column holds the ``str``. Like Kafka's ``StringDeserializer`` (Java's
    ``new String(bytes, UTF_8)``), it reads any bytes: a sequence that is not UTF-8 becomes
    U+FFFD, the replacement character (Python's and Spark's rule; see Differences for the one
    case where Java's count of replacement characters differs).

    Examples
    --------
    >>> StringSerde().deserialize(b"caf\xc3\xa9 \xff!")
    'café \ufffd!'
    """

    name = "String"
    spark_type = "string"

    def _encode(self, value: Any) -> bytes:
        _require(value, str, "str")
        return value.encode("utf-8")

    def _decode(self, data: bytes) -> Any:
        return data.decode("utf-8", "replace")

    def _to_internal(self, value: Any) -> Any:
        if not isinstance(value, str):
            raise InvalidTypeError(f"{self!r} holds str values (got {type(value).__name__}: {value!r}).")
        return value


@attrs.frozen(repr=False)
class BytesSerde(PlanSerde):
    """Raw bytes, unchanged; the column holds them as ``binary``."""

    name = "Bytes"
    spark_type = "binary"

    def _encode(self, value: Any) -> bytes:
        _require(value, (bytes, bytearray, memoryview), "bytes")
        return bytes(value)

    def _decode(self, data: bytes) -> Any:
        return data

    def _from_internal(self, cell: Any) -> Any:
        return bytes(cell)


#: The encoder of `json_dumps`, made once: ``json.dumps`` with these options builds a new
#: ``JSONEncoder`` on every call (a third of its time for a small object).
_JSON_ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def json_dumps(value: Any) -> str:
    """The JSON encoding streamsdsl uses everywhere: compact, keys in insertion order."""
    try:
        return _JSON_ENCODER.encode(value)
    except (TypeError, ValueError) as exc:
        raise SerializationError(
            f"Serdes.Json() cannot encode {type(value).__name__} {value!r}: {exc}. "
            "Return JSON-compatible values (dict, list, str, int, float, bool, None) from your functions."
        ) from exc


#: How deeply a JSON text may nest arrays and objects: a deeper one is not valid JSON to a
#: ``Serdes.Json()`` source on either engine (Jackson's own default limit is 1,000).
JSON_MAX_DEPTH = 500


@attrs.frozen(repr=False)
class JsonSerde(PlanSerde):
    """JSON values as UTF-8 text; the column holds the JSON text. A source reads one RFC 8259
    text in valid UTF-8 (no ``NaN``, nesting at most `JSON_MAX_DEPTH`); duplicate object keys
    are valid, the last one wins."""

    name = "Json"
    spark_type = "string"

    def _encode(self, value: Any) -> bytes:
        return json_dumps(value).encode("utf-8")

    def _decode(self, data: bytes) -> Any:
        return json.loads(data.decode("utf-8"))

    def _to_internal(self, value: Any) -> Any:
        return json_dumps(value)

    def _from_internal(self, cell: Any) -> Any:
        return json.loads(cell)


class FixedWidthSerde(PlanSerde):
    """A number of ``width`` bytes, packed big-endian with the `struct` format ``fmt``."""

    fmt: ClassVar[str]
    width: ClassVar[int]

    def _encode(self, value: Any) -> bytes:
        return struct.pack(self.fmt, self._to_internal(value))

    def _decode(self, data: bytes) -> Any:
        if len(data) != self.width:
            raise ValueError(f"expected exactly {self.width} bytes, got {len(data)}")
        return struct.unpack(self.fmt, data)[0]


class _IntegralSerde(FixedWidthSerde):
    def _encode(self, value: Any) -> bytes:
        _require(value, int, "int")
        return super()._encode(value)

    def _to_internal(self, value: Any) -> Any:
        if isinstance(value, bool) or not isinstance(value, int):
            raise InvalidTypeError(f"{self!r} holds int values (got {type(value).__name__}: {value!r}).")
        return value


@attrs.frozen(repr=False)
class LongSerde(_IntegralSerde):
    """64-bit signed integers, 8 bytes big-endian; the column is ``bigint``."""

    name, spark_type, fmt, width = "Long", "bigint", ">q", 8


@attrs.frozen(repr=False)
class IntegerSerde(_IntegralSerde):
    """32-bit signed integers, 4 bytes big-endian; the column is ``int``."""

    name, spark_type, fmt, width = "Integer", "int", ">i", 4


@attrs.frozen(repr=False)
class DoubleSerde(FixedWidthSerde):
    """IEEE 754 doubles, 8 bytes big-endian; the column is ``double`` (ints are widened)."""

    name, spark_type, fmt, width = "Double", "double", ">d", 8

    def _encode(self, value: Any) -> bytes:
        _require(value, (int, float), "float")
        return super()._encode(value)

    def _to_internal(self, value: Any) -> Any:
        return float(value) if isinstance(value, int) and not isinstance(value, bool) else value


@attrs.frozen(repr=False, eq=False)
class CustomSerde(PlanSerde):
    """A user's `Serde`, made plannable: its column holds the wire bytes (``binary``).

    The compiler checks at the source that ``inner.deserialize`` accepts each record's bytes;
    user functions see ``inner.deserialize(bytes)``; values are written with
    ``inner.serialize``. Errors name the user's class. Two wrappers are equal when they wrap
    the same object.

    Examples
    --------
    >>> class Upper:
    ...     def serialize(self, value): return value.upper().encode()
    ...     def deserialize(self, data): return data.decode()
    >>> serde = CustomSerde(Upper())
    >>> serde, serde.spark_type, serde.serialize("hi"), serde.from_internal(b"HI")
    (CustomSerde(Upper), 'binary', b'HI', 'HI')
    """

    inner: Serde = attrs.field(validator=instance_of(Serde))  # type: ignore[type-abstract]

    spark_type = "binary"
    #: User code may raise anything; every exception becomes a `SerializationError`.
    _errors = (Exception,)

    @property
    def name(self) -> str:  # type: ignore[override]
        """The user's serde class name."""
        return type(self.inner).__name__

    def _encode(self, value: Any) -> bytes | None:
        return self.inner.serialize(value)

    def _decode(self, data: bytes) -> Any:
        return self.inner.deserialize(data)

    def to_internal(self, value: Any) -> Any:
        return self.serialize(value)

    def from_internal(self, cell: Any) -> Any:
        return self.deserialize(cell)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, CustomSerde) and other.inner is self.inner

    def __hash__(self) -> int:
        return id(self.inner)

    def __repr__(self) -> str:
        return f"CustomSerde({self.name})"


class Serdes:
    """Factory of the built-in serdes, named as in Kafka Streams (each call returns one shared instance).

    Examples
    --------
    >>> Serdes.Long().serialize(5)
    b'\\x00\\x00\\x00\\x00\\x00\\x00\\x00\\x05'
    >>> Serdes.Json().deserialize(b'{"a": [1, 2]}')
    {'a': [1, 2]}
    >>> Serdes.Long() is Serdes.Long(), Serdes.Long()
    (True, Serdes.Long())
    """

    _STRING: ClassVar[StringSerde] = StringSerde()
    _LONG: ClassVar[LongSerde] = LongSerde()
    _INTEGER: ClassVar[IntegerSerde] = IntegerSerde()
    _DOUBLE: ClassVar[DoubleSerde] = DoubleSerde()
    _BYTES: ClassVar[BytesSerde] = BytesSerde()
    _JSON: ClassVar[JsonSerde] = JsonSerde()

    @staticmethod
    def String() -> StringSerde:  # noqa: N802 - mirrors Kafka Streams
        """UTF-8 strings."""
        return Serdes._STRING

    @staticmethod
    def Long() -> LongSerde:  # noqa: N802
        """64-bit signed integers, 8 bytes big-endian."""
        return Serdes._LONG

    @staticmethod
    def Integer() -> IntegerSerde:  # noqa: N802
        """32-bit signed integers, 4 bytes big-endian."""
        return Serdes._INTEGER

    @staticmethod
    def Double() -> DoubleSerde:  # noqa: N802
        """IEEE 754 doubles, 8 bytes big-endian."""
        return Serdes._DOUBLE

    @staticmethod
    def Bytes() -> BytesSerde:  # noqa: N802
        """Raw bytes, unchanged."""
        return Serdes._BYTES

    @staticmethod
    def Json() -> JsonSerde:  # noqa: N802
        """JSON values as UTF-8 text (the default serde for keys and values)."""
        return Serdes._JSON


DEFAULT_SERDE: PlanSerde = Serdes.Json()


def check_serde(value: Any, arg: str) -> PlanSerde | None:
    """Validate an optional serde argument; a user's own `Serde` is wrapped in a `CustomSerde`.

    Examples
    --------
    >>> check_serde(Serdes.String(), "key_serde")
    Serdes.String()
    >>> class Upper:
    ...     def serialize(self, value): return value.upper().encode()
    ...     def deserialize(self, data): return data.decode()
    >>> check_serde(Upper(), "value_serde")
    CustomSerde(Upper)
    >>> check_serde(Upper, "value_serde")
    Traceback (most recent call last):
    ...
    streamsdsl.errors.InvalidTypeError: 'value_serde' must be a serde instance, not the class Upper: pass Upper().
    """
    if value is None or isinstance(value, PlanSerde):
        return value
    if isinstance(value, type):
        raise InvalidTypeError(
            f"'{arg}' must be a serde instance, not the class {value.__name__}: pass {value.__name__}()."
        )
    if isinstance(value, _WindowedSerde):
        raise InvalidTypeError(
            f"'{arg}' takes the serde of the key itself (e.g. Serdes.String()), not {value!r}: "
            "windowed keys are written in Kafka Streams' windowed layout automatically."
        )
    if isinstance(value, Serde):
        return CustomSerde(value)
    raise InvalidTypeError(
        f"'{arg}' must be a Serde such as Serdes.String(), or an object with serialize(value) and "
        f"deserialize(data) methods (got {type(value).__name__}: {value!r})."
    )


@attrs.frozen
class _WindowedSerde:
    """A windowed key on the wire: the inner key's bytes followed by a fixed-size window suffix."""

    inner: Serde = attrs.field(validator=instance_of(Serde))  # type: ignore[type-abstract]

    #: The window suffix's layout, and what the key is called in messages.
    _suffix: ClassVar[struct.Struct]
    _what: ClassVar[str]

    def _pack_window(self, window: Window) -> bytes:
        raise NotImplementedError

    def _window(self, fields: tuple[int, ...]) -> Window:
        raise NotImplementedError

    def serialize(self, windowed: Any) -> bytes:
        if not isinstance(windowed, Windowed):
            raise InvalidTypeError(f"expected a Windowed key (got {type(windowed).__name__}).")
        return (self.inner.serialize(windowed.key) or b"") + self._pack_window(windowed.window)

    def deserialize(self, data: bytes | None) -> Any:
        if data is None:
            return None
        data, size = bytes(data), self._suffix.size
        if len(data) < size:
            raise SerializationError(f"{self._what} needs at least {size} bytes (got {len(data)}).")
        return Windowed(self.inner.deserialize(data[:-size]), self._window(self._suffix.unpack(data[-size:])))


@attrs.frozen
class SessionWindowedSerde(_WindowedSerde):
    """Kafka Streams' session-windowed key layout: key bytes + end (8 bytes BE) + start (8 bytes BE)."""

    _suffix = struct.Struct(">qq")
    _what = "a session-windowed key"

    def _pack_window(self, window: Window) -> bytes:
        return self._suffix.pack(window.end, window.start)

    def _window(self, fields: tuple[int, ...]) -> Window:
        end, start = fields
        return SessionWindow(start, end)


@attrs.frozen
class TimeWindowedSerde(_WindowedSerde):
    """Kafka Streams' time-windowed key layout: key bytes + start (8 bytes BE); end = start + size."""

    window_size_ms: int = duration_field(
        "window_size_ms", positive=False, fix="Pass the size of the time windows (TimeWindows.size_ms)."
    )

    _suffix = struct.Struct(">q")
    _what = "a time-windowed key"

    def _pack_window(self, window: Window) -> bytes:
        return self._suffix.pack(window.start)

    def _window(self, fields: tuple[int, ...]) -> Window:
        (start,) = fields
        return TimeWindow(start, start + self.window_size_ms)


class WindowedSerdes:
    """Serdes of windowed keys, as Kafka Streams' ``WindowedSerdes``."""

    @staticmethod
    def session_windowed_serde_from(inner: Serde) -> SessionWindowedSerde:
        return SessionWindowedSerde(inner)

    @staticmethod
    def time_windowed_serde_from(inner: Serde, window_size_ms: int) -> TimeWindowedSerde:
        return TimeWindowedSerde(inner, window_size_ms)
