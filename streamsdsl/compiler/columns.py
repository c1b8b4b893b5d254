"""The private columns of a compiled plan, and the observed-metrics contract (one definition each).

Every lowered frame carries the record columns ``key``, ``value``, ``timestamp``, ``headers``
plus the private columns below. Metric events never travel with the records: each operator
counts its drops (and emit-final records) with Spark's ``DataFrame.observe`` right where they
happen, and the runtime reads the observations (per micro-batch from the query progress, or
from the batch job the test driver runs).
"""

from __future__ import annotations

from streamsdsl.values.serdes import JSON_MAX_DEPTH

#: Position of the source record in its input: pipe order in the test driver,
#: ``partition << 40 | offset`` when streaming (records of one key keep their source order).
SOURCE_POSITION = "_source_position"
#: Position of an output record among the records one source record caused (array<bigint>).
OUTPUT_POSITION = "_output_position"
#: Key order of on-close records that one stream-time step emits (Kafka emits them by key).
FINAL_KEY_ORDER = "_final_key_order"
#: Kafka Streams' stream time after the record (test driver only: a running max in pipe order).
STREAM_TIME = "_stream_time"
#: Test driver: every input's stream time before the record (array<bigint>, one per input of the
#: operator, in input order): the clock the plan hands a kernel, which derives the rest itself
#: (`streamsdsl.semantics.kernels.store_clock`).
STREAM_TIMES_BEFORE = "_stream_times_before"
#: Test driver, emit on close: stream time at the end of the run (the last record's).
RUN_STREAM_TIME = "_run_stream_time"
#: Test driver, emit on close: the stream time a window must pass to be emitted.
CLOSE_THRESHOLD = "_close_threshold"
#: Test driver: a key's stored windows carried over from the previous run (a processor's input
#: and, as a `CARRY` event, its output).
CARRIED_STATE = "_carried_state"
#: A table's records (`streamsdsl.compiler.frame.Frame.table_records`) after a stateless table
#: step: whether the table source's value was a tombstone (a ``map_values`` can make ``None`` of
#: a value); a table-table join reads it.
SOURCE_TOMBSTONE = "_source_tombstone"
#: A user processor's forwarded record: the child it goes to (``forward(record, child_name)``;
#: null: every child). Only the output of a processor with several children has it.
CHILD = "_child"
#: Cogroup: the index of the input stream a record came from.
INPUT_INDEX = "_input_index"
#: The sink a row of the compiled output goes to (`DEAD_LETTER_SINK` for dead letters).
SINK_INDEX = "_sink_index"
#: Event time as a timestamp, for the source watermark only: the record's timestamp plus
#: `EVENT_TIME_SHIFT_MS`, watermarked with that delay.
EVENT_TIME = "_event_time"
#: A streaming stateful operator's output event time (a timestamp: its record's, or the
#: watermark when older, plus `EVENT_TIME_SHIFT_MS`), Spark's ``eventTimeColumnName``: the
#: watermark passes the operator with it.
EVENT_TIME_OUT = "_event_time_out"
#: How far every event-time column is ahead of the record's timestamp, and the watermark delay
#: that takes it back: Spark counts a row whose event time *equals* the watermark as late, and
#: fails a query whose operator emits one, while Kafka forwards a record whose timestamp equals
#: stream time (`streamsdsl.compiler.event_time`). The watermark stays the largest timestamp.
EVENT_TIME_SHIFT_MS = 1
#: A stateful processor's metric event rows (split off right after the operator): the metric
#: name, null for records, and its value.
EVENT_METRIC = "_event_metric"
EVENT_VALUE = "_event_value"

#: Spark type of `OUTPUT_POSITION`.
POSITION_TYPE = "array<bigint>"
#: Spark type of ``headers``.
HEADERS_TYPE = "array<struct<key:string,value:binary>>"

#: The columns of every lowered frame, in order.
FRAME_COLUMNS = ("key", "value", "timestamp", "headers", SOURCE_POSITION, OUTPUT_POSITION, FINAL_KEY_ORDER)
#: The columns of the compiled output: serialized key and value per sink.
OUTPUT_COLUMNS = (SINK_INDEX, "key", "value", "timestamp", "headers", SOURCE_POSITION, OUTPUT_POSITION,
                  FINAL_KEY_ORDER)
#: `SINK_INDEX` of a dead-letter record (a record the ``log_and_continue`` handler skipped).
DEAD_LETTER_SINK = -1

#: Metric event names a processor emits: a record dropped as too late (`DROPPED`) or for its null
#: value (`DROPPED_NULL_VALUE`); an aggregation's drop event of a cogroup carries its input's index
#: as its `OUTPUT_POSITION` (the drop is counted and logged under that input's processor).
DROPPED = "dropped"
DROPPED_NULL_VALUE = "dropped-null-value"
EMIT_FINAL = "emit-final"
#: Test driver: a key's state at the end of a run (`CARRIED_STATE`), to carry to the next run.
CARRY = "carry"

#: The fields of every observation (`observation_name`): records dropped, records emitted on
#: close, and the sum and max of their emit latency (stream time past the close threshold).
OBSERVED_DROPPED = "dropped"
OBSERVED_EMITTED_FINAL = "emitted_final"
OBSERVED_LATENCY_SUM = "latency_sum"
OBSERVED_LATENCY_MAX = "latency_max"
#: The first `MAX_LOGGED_DROPS` dropped records of a point (``position``, ``timestamp``,
#: ``detail``), which the runners log one warning each for, as Kafka Streams does.
OBSERVED_DROPPED_RECORDS = "dropped_records"
OBSERVED_FIELDS = (OBSERVED_DROPPED, OBSERVED_EMITTED_FINAL, OBSERVED_LATENCY_SUM, OBSERVED_LATENCY_MAX,
                   OBSERVED_DROPPED_RECORDS)
MAX_LOGGED_DROPS = 100
OBSERVATION_PREFIX = "streamsdsl:"



def observation_name(node: str, part: str) -> str:
    """The name of one observation: the processor and which of its points (``input`` ...)."""
    return f"{OBSERVATION_PREFIX}{node}:{part}"


#: Prefix of an observation of several points: one field per point, named by the point's own
#: observation name, holding its `OBSERVED_FIELDS` (the runtime reads it as the separate points).
MERGED_OBSERVATION_PREFIX = "streamsdsl+:"


def merged_observation_name(names: list[str]) -> str:
    """The name of one observation of the points ``names`` (the first names it: unique in a plan)."""
    return f"{MERGED_OBSERVATION_PREFIX}{names[0]}"


#: Prefix of the observations that carry a processor's stream time to the next run.
STREAM_TIME_OBSERVATION = "streamsdsl-carry:stream-time:"

#: Prefix of the observations that count an idle-close aggregation's records with a key in a
#: run: the driver keeps the run's wall clock as the aggregation's last input time
#: (`ReplayCarry.idle_last_input_at`).
IDLE_INPUT_OBSERVATION = "streamsdsl-carry:idle-input:"


# --- the JVM operator's contract ------------------------------------------------------------------

#: The version of the Python–JVM contract below; the jar reports it (``AggregateOperator.protocol()``).
JVM_PROTOCOL = 11
#: The column of each record's number on the JVM operator's input (a value or a JSON field).
NUMBER = "_number"
#: A stateful operator's output row, in order (the streaming plan's); the replay adds `REPLAY_FIELDS`.
OPERATOR_OUTPUT_FIELDS = ("key", "value", "timestamp", "headers", SOURCE_POSITION, OUTPUT_POSITION, FINAL_KEY_ORDER,
                          EVENT_METRIC, EVENT_VALUE)
REPLAY_FIELDS = (CLOSE_THRESHOLD, CARRIED_STATE)
#: A JVM join operator's output ``value``: the matched pair, a struct of the left input's value and
#: the right input's (a side without a match null), on which the joiner runs afterwards
#: (`streamsdsl.compiler.jvm_joins`); the replay adds `CARRIED_STATE` alone to its rows.
PAIR_FIELDS = ("left", "right")

#: What the JVM operator and the Python compiler must agree on, declared once: ``jvm/build.py``
#: generates ``Contract.java`` from it (constants of the same names), so no name or row layout is
#: copied by hand into Java.
JVM_CONTRACT: dict[str, object] = {
    "PROTOCOL": JVM_PROTOCOL,
    "SOURCE_POSITION": SOURCE_POSITION,
    "OUTPUT_POSITION": OUTPUT_POSITION,
    "NUMBER": NUMBER,
    "INPUT_INDEX": INPUT_INDEX,
    "STREAM_TIME": STREAM_TIME,
    "STREAM_TIMES_BEFORE": STREAM_TIMES_BEFORE,
    "CARRIED_STATE": CARRIED_STATE,
    "RUN_STREAM_TIME": RUN_STREAM_TIME,
    "DROPPED": DROPPED,
    "DROPPED_NULL_VALUE": DROPPED_NULL_VALUE,
    "EMIT_FINAL": EMIT_FINAL,
    "CARRY": CARRY,
    "OUTPUT_FIELDS": OPERATOR_OUTPUT_FIELDS,
    "REPLAY_OUTPUT_FIELDS": (*OPERATOR_OUTPUT_FIELDS, *REPLAY_FIELDS),
    "JSON_MAX_DEPTH": JSON_MAX_DEPTH,
    "EVENT_TIME_OUT": EVENT_TIME_OUT,
    "EVENT_TIME_SHIFT_MS": EVENT_TIME_SHIFT_MS,
    "PAIR_FIELDS": PAIR_FIELDS,
}
