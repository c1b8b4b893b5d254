"""PySpark's floor for the Python operator (P2): a ``transformWithState`` Row-API processor that
iterates its input rows and does nothing else — no state, no timers, no output. Fed the Python
operator's own input rows (`streamsdsl.compiler.processors.operator_rows`: key, value, record
numbers, headers) it costs what PySpark's worker protocol costs per record before any Kafka
Streams rule runs; fed the key column alone, what a processor of any shape costs at least."""

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
