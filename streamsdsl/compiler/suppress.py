"""Lowering of ``KTable.suppress``.

``suppress(until_window_closes)`` folds into the windowed aggregation it follows: the same
aggregation, lowered again under the suppress node's name, whose operator forwards what Kafka's
suppress node would release instead of its changelog (so no chained operator is needed, and in
streaming the release runs on the aggregation's own event-time timers).

- **Time windows**: Kafka's suppress and on-close emission agree record for record (release
  when stream time reaches ``end + grace``, the latest aggregate with its timestamp, windows in
  (end, key) order): the aggregation is lowered with emit on window close.
- **Session and sliding windows**: suppress releases a window at stream time ``end + delay``
  (gap + grace for sessions, grace for sliding windows), 1 ms before the aggregation closes it,
  so a record can still write a released window (Kafka's suppress releases it again) or merge
  a released session into a larger one. The operator's windowing is
  `streamsdsl.semantics.suppress.FinalResultsWindowing` (its windows "close" on release; a
  window written again is released again). The operator's kernel (`AggregateKernel`, as in the
  direct engine) applies `final_results_release` per input record in the test driver, exactly
  Kafka's suppress node for that key; in streaming (``suppress_release=False``) it releases
  each window on its event-time timer (or the record that passes its threshold) with its value
  at that stream time. These run on the Python operator.
"""

from __future__ import annotations

from typing import Any

import attrs

from streamsdsl import ir
from streamsdsl.compiler.aggregations import _aggregate, _run_processor
from streamsdsl.compiler.columns import OUTPUT_POSITION, SOURCE_POSITION
from streamsdsl.compiler.jvm_operator import Backend
from streamsdsl.compiler.frame import Frame, KeyCodec
from streamsdsl.compiler.lowering import Lowering
from streamsdsl.compiler.processors import AggregateConfig, AggregateInput
from streamsdsl.values.windows import EmitStrategy
from streamsdsl.errors import OperationNotDefinedError
from streamsdsl.semantics.aggregation import AggFunctions
from streamsdsl.semantics.suppress import TimeLimitBuffer
from streamsdsl.operators.functions import final_results_delay

__all__: list[str] = []


def _suppress(self: Lowering, node: ir.SuppressNode) -> Frame:
    if node.mode == "until_time_limit":
        return _time_limit(self, node)
    aggregation = self.topology.node(node.parents[0]) if self.topology is not None else None
    if not isinstance(aggregation, (ir.TimeWindowAggregateNode, ir.SessionAggregateNode)) or aggregation.emit.emits_on_close:
        raise OperationNotDefinedError(
            f"{node.name}: suppress(until_window_closes) is implemented right after a windowed aggregation "
            "that emits on update.")
    delay = final_results_delay(aggregation.windows)
    if delay is None:
        frame = self.lower(attrs.evolve(aggregation, name=node.name, emit=EmitStrategy.on_window_close()))
    else:
        frame = _aggregate(self, attrs.evolve(aggregation, name=node.name), final_results=delay)
    topology = self.topology
    if all(isinstance(topology.node(c), ir.SuppressNode) for c in topology.children(aggregation.name)):
        # Nothing reads the aggregation's own changelog: its operator is not part of the plan.
        # Its store holds what the folded operator holds (closed windows leave both).
        self.choices.forget(aggregation.name)
        carried = getattr(self, "carried_states", None)
        if carried is not None:
            carried[aggregation.name] = carried[node.name]
    return frame



def _keep_latest(key: Any, value: Any, aggregate: Any) -> Any:
    return value


def _time_limit(self: Lowering, node: ir.SuppressNode) -> Frame:
    """``suppress(until_time_limit)``: a keyed operator over the table's changelog, the kernel
    with `TimeLimitBuffer` as its windowing (one buffered update per key)."""
    table = self.parent(node)
    if table.key.windowed:
        raise OperationNotDefinedError(
            f"{node.name}: suppress(until_time_limit) of a windowed table is not implemented yet; for one result "
            "per window use suppress(Suppressed.until_window_closes(Suppressed.BufferConfig.unbounded())).")
    key = KeyCodec(table.key.serde)
    config = AggregateConfig(node.name, key, table.value, TimeLimitBuffer(node.time_limit),
                             (AggregateInput(table.value, AggFunctions(lambda: None, _keep_latest)),),
                             emit_on_close=True, state_name=node.store)
    self.choices.record(node.name, Backend.PYTHON, "suppress runs on the Python operator")
    df = table.df.select("key", "value", "timestamp", "headers", SOURCE_POSITION, OUTPUT_POSITION)
    return Frame(_run_processor(self, node.name, df, config), key, table.value, is_table=True)
