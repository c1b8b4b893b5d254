"""Serdes: how keys and values travel as bytes and how they are held inside Spark.

Each serde has a *wire* form (the bytes in a Kafka record) and an *internal* form (the Spark
column type the compiled plan holds it in). User functions always see plain Python values.

| serde   | Python value       | wire bytes             | Spark column type     |
|---------|--------------------|------------------------|-----------------------|
| String  | `str`              | UTF-8                  | `string`              |
| Long    | `int` (64-bit)     | 8 bytes, big-endian    | `bigint`              |
| Integer | `int` (32-bit)     | 4 bytes, big-endian    | `int`                 |
| Double  | `float`            | 8 bytes, IEEE 754 BE   | `double`              |
| Bytes   | `bytes`            | as is                  | `binary`              |
| Json    | JSON value         | UTF-8 JSON text        | `string` (JSON text)  |

A ``None`` value serializes to a null record value (a tombstone) with every serde.
"""

from __future__ import annotations

import json
import struct
from typing import Any, ClassVar

import attrs

from streamsdsl.errors import InvalidTypeError, SerializationError

__all__ = ["Serde", "Serdes", "SessionWindowedSerde", "TimeWindowedSerde", "WindowedSerdes"]


@attrs.frozen
class Serde:
    """A named serializer/deserializer pair. Create them through `Serdes`."""

    name: str
    spark_type: str

    def serialize(self, value: Any) -> bytes | None:
        """Turn a Python value into wire bytes (``None`` stays ``None``)."""
        if value is None:
            return None
        try:
            return self._encode(value)
        except (TypeError, ValueError, struct.error, OverflowError) as exc:
            raise SerializationError(
                f"Serdes.{self.name}() cannot serialize {type(value).__name__} {value!r}: {exc}"
            ) from exc

    def deserialize(self, data: bytes | None) -> Any:
        """Turn wire bytes into a Python value (``None`` stays ``None``)."""
        if data is None:
            return None
        try:
            return self._decode(bytes(data))
        except (TypeError, ValueError, struct.error, UnicodeDecodeError) as exc:
            raise SerializationError(
                f"Serdes.{self.name}() cannot deserialize {len(data)} bytes {bytes(data[:32])!r}: {exc}"
            ) from exc

    def to_internal(self, value: Any) -> Any:
        """Python value → the value stored in the Spark column."""
        if value is None:
            return None
        return self._to_internal(value)

    def from_internal(self, cell: Any) -> Any:
        """Value stored in the Spark column → Python value."""
        if cell is None:
            return None
        return self._from_internal(cell)

    # -- per-serde behaviour -------------------------------------------------------------
    def _encode(self, value: Any) -> bytes:
        return _ENCODERS[self.name](value)

    def _decode(self, data: bytes) -> Any:
        return _DECODERS[self.name](data)

    def _to_internal(self, value: Any) -> Any:
        if self.name == "Json":
            return json_dumps(value)
        if self.name in ("Long", "Integer"):
            if isinstance(value, bool) or not isinstance(value, int):
                raise InvalidTypeError(f"Serdes.{self.name}() holds int values (got {type(value).__name__}: {value!r}).")
        if self.name == "Double" and isinstance(value, int) and not isinstance(value, bool):
            return float(value)
        return value

    def _from_internal(self, cell: Any) -> Any:
        if self.name == "Json":
            return json.loads(cell)
        if self.name == "Bytes":
            return bytes(cell)
        return cell

    def __repr__(self) -> str:
        return f"Serdes.{self.name}()"


def json_dumps(value: Any) -> str:
    """The JSON encoding streamsdsl uses everywhere: compact, keys in insertion order."""
    try:
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise SerializationError(
            f"Serdes.Json() cannot encode {type(value).__name__} {value!r}: {exc}. "
            "Return JSON-compatible values (dict, list, str, int, float, bool, None) from your functions."
        ) from exc


def _enc_long(v: Any) -> bytes:
    if isinstance(v, bool) or not isinstance(v, int):
        raise TypeError("expected int")
    return struct.pack(">q", v)


def _enc_int(v: Any) -> bytes:
    if isinstance(v, bool) or not isinstance(v, int):
        raise TypeError("expected int")
    return struct.pack(">i", v)


def _enc_double(v: Any) -> bytes:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise TypeError("expected float")
    return struct.pack(">d", float(v))


def _enc_string(v: Any) -> bytes:
    if not isinstance(v, str):
        raise TypeError("expected str")
    return v.encode("utf-8")


def _enc_bytes(v: Any) -> bytes:
    if not isinstance(v, (bytes, bytearray, memoryview)):
        raise TypeError("expected bytes")
    return bytes(v)


def _dec_fixed(fmt: str, size: int):  # type: ignore[no-untyped-def]
    def dec(data: bytes) -> Any:
        if len(data) != size:
            raise ValueError(f"expected exactly {size} bytes, got {len(data)}")
        return struct.unpack(fmt, data)[0]

    return dec


_ENCODERS = {
    "String": _enc_string,
    "Long": _enc_long,
    "Integer": _enc_int,
    "Double": _enc_double,
    "Bytes": _enc_bytes,
    "Json": lambda v: json_dumps(v).encode("utf-8"),
}
_DECODERS = {
    "String": lambda d: d.decode("utf-8"),
    "Long": _dec_fixed(">q", 8),
    "Integer": _dec_fixed(">i", 4),
    "Double": _dec_fixed(">d", 8),
    "Bytes": bytes,
    "Json": lambda d: json.loads(d.decode("utf-8")),
}


class Serdes:
    """Factory of the built-in serdes, named as in Kafka Streams.

    Examples
    --------
    >>> Serdes.Long().serialize(5)
    b'\\x00\\x00\\x00\\x00\\x00\\x00\\x00\\x05'
    >>> Serdes.Json().deserialize(b'{"a": [1, 2]}')
    {'a': [1, 2]}
    """

    _STRING: ClassVar[Serde] = Serde("String", "string")
    _LONG: ClassVar[Serde] = Serde("Long", "bigint")
    _INTEGER: ClassVar[Serde] = Serde("Integer", "int")
    _DOUBLE: ClassVar[Serde] = Serde("Double", "double")
    _BYTES: ClassVar[Serde] = Serde("Bytes", "binary")
    _JSON: ClassVar[Serde] = Serde("Json", "string")

    @staticmethod
    def String() -> Serde:  # noqa: N802 - mirrors Kafka Streams
        """UTF-8 strings."""
        return Serdes._STRING

    @staticmethod
    def Long() -> Serde:  # noqa: N802
        """64-bit signed integers, 8 bytes big-endian."""
        return Serdes._LONG

    @staticmethod
    def Integer() -> Serde:  # noqa: N802
        """32-bit signed integers, 4 bytes big-endian."""
        return Serdes._INTEGER

    @staticmethod
    def Double() -> Serde:  # noqa: N802
        """IEEE 754 doubles, 8 bytes big-endian."""
        return Serdes._DOUBLE

    @staticmethod
    def Bytes() -> Serde:  # noqa: N802
        """Raw bytes, unchanged."""
        return Serdes._BYTES

    @staticmethod
    def Json() -> Serde:  # noqa: N802
        """JSON values as UTF-8 text (the default serde for keys and values)."""
        return Serdes._JSON


DEFAULT_SERDE = Serdes.Json()


def check_serde(value: Any, arg: str) -> Serde | None:
    """Validate an optional serde argument."""
    if value is None or isinstance(value, Serde):
        return value
    raise InvalidTypeError(
        f"'{arg}' must be a Serde such as Serdes.String() (got {type(value).__name__}: {value!r})."
    )


@attrs.frozen
class SessionWindowedSerde:
    """Kafka Streams' session-windowed key layout: key bytes + end (8 bytes BE) + start (8 bytes BE)."""

    inner: Serde

    def serialize(self, windowed: Any) -> bytes:
        from streamsdsl.dsl.windows import Windowed

        if not isinstance(windowed, Windowed):
            raise InvalidTypeError(f"expected a Windowed key (got {type(windowed).__name__}).")
        raw = self.inner.serialize(windowed.key) or b""
        return raw + struct.pack(">qq", windowed.window.end, windowed.window.start)

    def deserialize(self, data: bytes | None) -> Any:
        from streamsdsl.dsl.windows import SessionWindow, Windowed

        if data is None:
            return None
        if len(data) < 16:
            raise SerializationError(f"a session-windowed key needs at least 16 bytes (got {len(data)}).")
        end, start = struct.unpack(">qq", bytes(data[-16:]))
        return Windowed(self.inner.deserialize(bytes(data[:-16])), SessionWindow(start, end))


@attrs.frozen
class TimeWindowedSerde:
    """Kafka Streams' time-windowed key layout: key bytes + start (8 bytes BE); end = start + size."""

    inner: Serde
    window_size_ms: int

    def serialize(self, windowed: Any) -> bytes:
        raw = self.inner.serialize(windowed.key) or b""
        return raw + struct.pack(">q", windowed.window.start)

    def deserialize(self, data: bytes | None) -> Any:
        from streamsdsl.dsl.windows import TimeWindow, Windowed

        if data is None:
            return None
        if len(data) < 8:
            raise SerializationError(f"a time-windowed key needs at least 8 bytes (got {len(data)}).")
        (start,) = struct.unpack(">q", bytes(data[-8:]))
        return Windowed(self.inner.deserialize(bytes(data[:-8])), TimeWindow(start, start + self.window_size_ms))


class WindowedSerdes:
    """Serdes of windowed keys, as Kafka Streams' ``WindowedSerdes``."""

    @staticmethod
    def session_windowed_serde_from(inner: Serde) -> SessionWindowedSerde:
        return SessionWindowedSerde(inner)

    @staticmethod
    def time_windowed_serde_from(inner: Serde, window_size_ms: int) -> TimeWindowedSerde:
        return TimeWindowedSerde(inner, window_size_ms)
