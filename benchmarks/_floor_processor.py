"""PySpark's floor for the Python operator (P2): a ``transformWithState`` Row-API processor that
iterates its input and does nothing else — no state, no timers, no output. Fed the Python
operator's own input (`streamsdsl.compiler.processors.records_by_key`: one row per key and group
of records, lists of value, record numbers and headers) it reads every record as the operator does
(`ReadRecordsOnly`) and costs what the packing, the shuffle and PySpark's worker protocol cost
before any Kafka Streams rule runs; fed one row per record with the key column alone
(`ReadRowsOnly`), what an unpacked processor of any shape costs at least."""

from __future__ import annotations

from typing import Any, Iterator

from pyspark.sql.streaming.stateful_processor import StatefulProcessor


class ReadRowsOnly(StatefulProcessor):
    def init(self, handle: Any) -> None:
        pass

    def handleInputRows(self, key: Any, rows: Iterator[Any], timerValues: Any) -> Iterator[Any]:  # noqa: N802,N803
        for _ in rows:
            pass
        return iter(())

    def close(self) -> None:
        pass


class ReadRecordsOnly(ReadRowsOnly):
    def handleInputRows(self, key: Any, rows: Iterator[Any], timerValues: Any) -> Iterator[Any]:  # noqa: N802,N803
        for r in rows:
            for _ in zip(*r[1:]):
                pass
        return iter(())
