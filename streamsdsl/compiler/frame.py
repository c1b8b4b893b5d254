"""What the compiler holds for each IR node: a DataFrame plus how its key/value are encoded."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

import attrs

from streamsdsl.dsl.serdes import Serde, SessionWindowedSerde, TimeWindowedSerde
from streamsdsl.dsl.windows import SessionWindow, TimeWindow, Windowed

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

#: Columns every frame carries besides key/value:
#: ``timestamp`` (ms), ``headers``, ``_seq`` (source order), ``_ord`` (output order within a
#: record, array<bigint>), ``_okey`` (key order of on-close emissions) and ``_ctl`` (null for
#: data rows; a metric event for control rows, which every operator forwards untouched).
CTL_TYPE = (
    "struct<node:string,metric:string,value:double,error:string,topic:string,partition:int,"
    "offset:bigint,raw_key:binary,raw_value:binary>"
)
#: The fields of a control row beyond (node, metric, value): set for deserialization errors
#: (the raw record, for the dead-letter topic); null otherwise.
CTL_RAW_FIELDS = ("error", "topic", "partition", "offset", "raw_key", "raw_value")
#: Metric of a record skipped by the ``log_and_continue`` deserialization handler.
DESERIALIZATION_ERROR = "deserialization-error"
ORD_TYPE = "array<bigint>"
HEADERS_TYPE = "array<struct<key:string,value:binary>>"
FRAME_COLUMNS = ("key", "value", "timestamp", "headers", "_seq", "_ord", "_okey", "_ctl")


@attrs.frozen
class KeyCodec:
    """How the ``key`` column of an unwindowed stream is held: by its serde."""

    serde: Serde

    #: Whether the key column is a window struct ``{key, start, end}``.
    windowed: ClassVar[bool] = False

    @property
    def spark_type(self) -> str:
        return self.serde.spark_type

    def from_cell(self, cell: Any) -> Any:
        return self.serde.from_internal(cell)

    def to_cell(self, value: Any) -> Any:
        return self.serde.to_internal(value)

    def with_serde(self, serde: Serde) -> KeyCodec:
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


@attrs.frozen
class Frame:
    """A lowered node: ``df`` has `FRAME_COLUMNS`; ``is_table`` for KTable changelogs."""

    df: DataFrame
    key: KeyCodec
    value: Serde
    is_table: bool = False
    #: Whether ``df`` can hold control rows (metric events, skipped records): false only where
    #: the compiler knows none can reach this point, so operators may skip forwarding them.
    control_rows: bool = True

    def with_df(self, df: DataFrame, **changes: Any) -> Frame:
        return attrs.evolve(self, df=df, **changes)
