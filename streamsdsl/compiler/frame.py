"""What the compiler holds for each IR node: a DataFrame (`FRAME_COLUMNS`) plus how its key and
value are encoded."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import attrs

from streamsdsl.operators.codecs import KeyCodec, SessionKeyCodec, TimeKeyCodec
from streamsdsl.values.serdes import PlanSerde

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

__all__ = ["Frame", "KeyCodec", "SessionKeyCodec", "TimeKeyCodec"]


@attrs.frozen
class Frame:
    """A lowered node: ``df`` has `FRAME_COLUMNS`; ``is_table`` for KTable changelogs.

    ``table_records``: a table source's records before its store (what a join reads; the
    changelog ``df`` of a materialized source leaves out tombstones of absent keys)."""

    df: DataFrame
    key: KeyCodec
    value: PlanSerde
    is_table: bool = False
    table_records: DataFrame | None = None

    def with_df(self, df: DataFrame, **changes: Any) -> Frame:
        return attrs.evolve(self, df=df, **{"table_records": None, **changes})
