package io.streamsdsl.jvm;

import java.util.ArrayList;
import java.util.Collections;
import java.util.Comparator;
import java.util.List;
import org.apache.spark.sql.Encoders;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.streaming.OutputMode;
import org.apache.spark.sql.streaming.TTLConfig;
import org.apache.spark.sql.streaming.TimeMode;
import org.apache.spark.sql.streaming.TimerValues;
import org.apache.spark.sql.streaming.ValueState;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.StructType;
import scala.collection.Iterator;

/**
 * The JVM twin of the Python stream–global-table join operator ({@code streamsdsl.compiler.global_tables}'
 * {@code GlobalJoinOperator}): keyed by the <b>table's</b> key (a stream record by what the key
 * selector made of it), one state row per key in the Python operator's layout
 * ({@code struct<value, ts>}, the global store interactive queries read); the table's records
 * (input 1) set it ({@link StreamTableJoin#tableUpdate}), a stream record (input 0, its value
 * struct {@code (k, v)}: its own key and value) is joined with it under Kafka's
 * {@code KStreamGlobalKTableJoin} rules ({@link #streamStep}): the pair (stream value, table value)
 * keeps the stream record's key and timestamp.
 *
 * <p>Order: the driver's replay in pipe order (Kafka's driver applies a global record when it is
 * piped); streaming applies the micro-batch's table records first (a stream record sees the table
 * as of the batch's end), then the stream records by timestamp and position. A replay's carried
 * row has a null key: the output's keys are the stream's, the table key travels in the carried
 * state ({@code struct<table_key, value, ts>}). The spec's {@code params.stream_key_json}: the
 * stream's key is JSON text, whose {@code null} is a null key (KIP-962's left join).
 */
final class GlobalTableJoinProcessor extends JoinProcessor {
    private static final long serialVersionUID = 1L;

    private final boolean left;
    private final boolean streamKeyJson;
    private transient ValueState<Row> state;

    GlobalTableJoinProcessor(JoinSpec spec) throws Exception {
        super(spec);
        if (!spec.kind.equals("inner") && !spec.kind.equals("left")) {
            throw new IllegalArgumentException(spec.node + ": a global-table join is inner or left, not " + spec.kind);
        }
        left = spec.kind.equals("left");
        streamKeyJson = spec.param("stream_key_json") != null && spec.param("stream_key_json").asBoolean();
    }

    @Override
    public void init(OutputMode outputMode, TimeMode timeMode) {
        if (!spec.replay) {
            StructType schema = (StructType) DataType.fromJson(spec.stateSchema);
            state = getHandle().getValueState(spec.stateName, Encoders.row(schema), TTLConfig.NONE());
        }
    }

    /**
     * What a stream record does ({@code KStreamKTableJoinProcessor.maybeDropRecord} / {@code doJoin}
     * for a global table): a null value is dropped; a null table key is dropped too, except in a left
     * join of a record whose own key is null (KIP-962), joined with no table value; the inner join
     * forwards only when the table has a value.
     */
    static StreamTableJoin.Outcome streamStep(boolean left, boolean keyNull, boolean tableKeyNull, boolean valueNull,
                                              StreamTableJoin.TableValue table) {
        if (valueNull) return StreamTableJoin.Outcome.DROPPED;
        if (tableKeyNull && !(left && keyNull)) return StreamTableJoin.Outcome.DROPPED;
        if ((tableKeyNull || table == null) && !left) return StreamTableJoin.Outcome.NOTHING;
        return StreamTableJoin.Outcome.PAIR;
    }

    /** Replay: pipe order; streaming: the batch's table records first, then timestamp and position. */
    private static final Comparator<Rec> STREAMING_ORDER =
        Comparator.<Rec>comparingInt(r -> r.input == RIGHT ? 0 : 1).thenComparing(TIME_ORDER);

    private boolean keyNull(Object cell) {
        return cell == null || streamKeyJson && cell.toString().trim().equals("null");
    }

    @Override
    public Iterator<Row> handleInputRows(Row key, Iterator<Row> rows, TimerValues timerValues) {
        watermark = timerValues.getCurrentWatermarkInMs();
        List<Rec> data = rows(rows, spec.replay ? PIPE_ORDER : STREAMING_ORDER);
        if (data.isEmpty()) return iterator(Collections.emptyList());
        Object tableKey = key.get(0);
        boolean tableKeyNull = tableKey == null;
        HeldTable held = heldTable(data, state, 1);
        StreamTableJoin.TableValue table = held.table();
        int first = held.first();
        List<Row> out = new ArrayList<>();
        for (int i = first; i < data.size(); i++) {
            Rec r = data.get(i);
            if (r.carried != null) continue;
            if (r.input == RIGHT) {
                table = StreamTableJoin.tableUpdate(table, tableKeyNull, r.value, r.ts);
                continue;
            }
            Row stream = (Row) r.value;
            Object streamKey = stream == null ? null : stream.get(0);
            Object value = stream == null ? null : stream.get(1);
            switch (streamStep(left, keyNull(streamKey), tableKeyNull, value == null, table)) {
                case DROPPED -> out.add(dropped(r, Contract.DROPPED));
                case PAIR -> out.add(pair(streamKey, value, tableKeyNull || table == null ? null : table.value(), r.ts, r));
                default -> { }
            }
        }
        if (spec.replay) {
            if (table != null) out.add(carry(null, RowFactory.create(tableKey, table.value(), table.ts())));
        } else if (table != held.table()) {  // a table record changed it: else the state stays as read, unwritten
            if (table == null) {
                state.clear();
            } else {
                state.update(RowFactory.create(table.value(), table.ts()));
            }
        }
        return iterator(out);
    }
}
