"""The semantics core: Kafka Streams' per-record rules in plain Python (no Spark).

One `Windowing` protocol for every window kind — `SessionWindowing`, `TimeWindowing`,
`SlidingWindowing` and `Unwindowed` — and one record step (`record_step`) that the Spark
processors and the reference runs (`streamsdsl.semantics.reference`) both call.

Tables and joins (issue 15), one module per family, each with per-key steps for a stateful
operator keyed by the join (or group) key and a reference run in Kafka's order: `tables`
(KTable source, ``Change``, filter, map_values), `stream_table`, `stream_stream`,
`table_table`, `grouped_table` and `suppress`.
"""

from streamsdsl.semantics.aggregation import AggFunctions
from streamsdsl.semantics.changes import ChangeBuffer
from streamsdsl.semantics.session import SessionWindowing
from streamsdsl.semantics.sliding import SlidingWindowing
from streamsdsl.semantics.timewindow import TimeWindowing
from streamsdsl.semantics.unwindowed import Unwindowed
from streamsdsl.semantics.windowing import KeyState, RecordStep, WindowAgg, Windowing, record_step
from streamsdsl.semantics.grouped_table import GroupedTableFunctions, grouped_aggregate_step, regroup
from streamsdsl.semantics.stream_stream import JoinWindowsSpec, StreamJoinSpec, StreamJoinState, stream_join_close
from streamsdsl.semantics.stream_stream import stream_join_operator_step, stream_join_reference_run, stream_join_step
from streamsdsl.semantics.stream_table import StreamTableJoin, stream_join_step as stream_table_join_step
from streamsdsl.semantics.stream_table import stream_table_reference_run, table_update
from streamsdsl.semantics.suppress import Suppression, SuppressState, suppress_close, suppress_reference_run
from streamsdsl.semantics.suppress import suppress_step
from streamsdsl.semantics.table_table import TableJoinSpec, TableJoinState, table_join_reference_run, table_join_step
from streamsdsl.semantics.tables import Change, TableValue, filter_change, map_values_change, table_source_step

__all__ = [
    "AggFunctions", "ChangeBuffer", "KeyState", "RecordStep", "SessionWindowing", "SlidingWindowing", "TimeWindowing",
    "Unwindowed", "WindowAgg", "Windowing", "record_step",
    # tables, joins, grouped tables, suppress
    "Change", "GroupedTableFunctions", "JoinWindowsSpec", "StreamJoinSpec", "StreamJoinState", "StreamTableJoin",
    "SuppressState", "Suppression", "TableJoinSpec", "TableJoinState", "TableValue", "filter_change",
    "grouped_aggregate_step", "map_values_change", "regroup", "stream_join_close", "stream_join_operator_step",
    "stream_join_reference_run", "stream_join_step", "stream_table_join_step", "stream_table_reference_run",
    "suppress_close", "suppress_reference_run", "suppress_step", "table_join_reference_run", "table_join_step",
    "table_source_step", "table_update",
]
