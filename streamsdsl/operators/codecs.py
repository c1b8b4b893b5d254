"""How a stream's key is held between steps: by its serde, or as a window around it (no pyspark
here: the compiler and the direct engine share these)."""

from __future__ import annotations

from typing import Any, ClassVar

import attrs

from streamsdsl.values.serdes import PlanSerde, SessionWindowedSerde, TimeWindowedSerde
from streamsdsl.values.windows import SessionWindow, TimeWindow, Windowed

__all__ = ["KeyCodec", "SessionKeyCodec", "TimeKeyCodec"]


@attrs.frozen
class KeyCodec:
    """How the ``key`` column of an unwindowed stream is held: by its serde."""

    serde: PlanSerde

    #: Whether the key column is a window struct ``{key, start, end}``.
    windowed: ClassVar[bool] = False

    @property
    def spark_type(self) -> str:
        return self.serde.spark_type

    def from_cell(self, cell: Any) -> Any:
        return self.serde.from_internal(cell)

    def to_cell(self, value: Any) -> Any:
        return self.serde.to_internal(value)

    def with_serde(self, serde: PlanSerde) -> KeyCodec:
        """The same key layout with another inner serde."""
        return attrs.evolve(self, serde=serde)

    def reader(self) -> Any:
        """What a consumer of a sink topic needs to read these keys."""
        return self.serde


@attrs.frozen
class _WindowedKeyCodec(KeyCodec):
    """A windowed key: the column is a struct ``{key, start, end}``; read back as `Windowed`."""

    windowed: ClassVar[bool] = True
    _window_type: ClassVar[type[SessionWindow] | type[TimeWindow]]

    @property
    def spark_type(self) -> str:
        return f"struct<key:{self.serde.spark_type},start:bigint,end:bigint>"

    def from_cell(self, cell: Any) -> Any:
        if cell is None:
            return None
        k, start, end = (cell["key"], cell["start"], cell["end"]) if isinstance(cell, dict) else tuple(cell)
        return Windowed(self.serde.from_internal(k), self._window_type(start, end))

    def to_cell(self, value: Any) -> Any:
        if value is None:
            return None
        return {"key": self.serde.to_internal(value.key), "start": value.window.start, "end": value.window.end}


@attrs.frozen
class SessionKeyCodec(_WindowedKeyCodec):
    """A session-windowed key; on the wire: key bytes + end + start (8 bytes each, big-endian)."""

    _window_type = SessionWindow

    def reader(self) -> SessionWindowedSerde:
        return SessionWindowedSerde(self.serde)


@attrs.frozen
class TimeKeyCodec(_WindowedKeyCodec):
    """A time-windowed key; on the wire: key bytes + start (8 bytes, big-endian)."""

    window_size_ms: int = attrs.field(kw_only=True)

    _window_type = TimeWindow

    def reader(self) -> TimeWindowedSerde:
        return TimeWindowedSerde(self.serde, self.window_size_ms)
