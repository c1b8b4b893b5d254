"""What the compiler holds for each IR node: a DataFrame plus how its key/value are encoded."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import attrs

from streamsdsl.dsl.serdes import Serde
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
    """How the ``key`` column is held: a serde, optionally wrapped in a window struct."""

    serde: Serde
    windowed: str | None = None  # None | "session" | "time"
    window_size_ms: int | None = None

    @property
    def spark_type(self) -> str:
        if self.windowed:
            return f"struct<key:{self.serde.spark_type},start:bigint,end:bigint>"
        return self.serde.spark_type

    def from_cell(self, cell: Any) -> Any:
        if not self.windowed:
            return self.serde.from_internal(cell)
        if cell is None:
            return None
        k, start, end = (cell["key"], cell["start"], cell["end"]) if isinstance(cell, dict) else tuple(cell)
        window = SessionWindow(start, end) if self.windowed == "session" else TimeWindow(start, end)
        return Windowed(self.serde.from_internal(k), window)

    def to_cell(self, value: Any) -> Any:
        if not self.windowed:
            return self.serde.to_internal(value)
        if value is None:
            return None
        return {"key": self.serde.to_internal(value.key), "start": value.window.start, "end": value.window.end}


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
