package io.streamsdsl.jvm;

import java.util.ArrayList;
import java.util.Collections;
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
 * The JVM twin of the Python stream–table join operator ({@code streamsdsl.compiler.joins}'
 * {@code TableOperator} in join mode): one state row per key, the table's value and timestamp
 * ({@code struct<value, ts>}, the Python operator's layout); the stream side (input 0) and the
 * table side (input 1) of the key's rows processed in order by {@link StreamTableJoin}'s rules; a
 * stream record's pair (stream value, table value) or its drop event out, a table record nothing.
 */
final class StreamTableJoinProcessor extends JoinProcessor {
    private static final long serialVersionUID = 1L;

    private final boolean left;
    private transient ValueState<Row> state;

    StreamTableJoinProcessor(JoinSpec spec) {
        super(spec);
        if (!spec.kind.equals("inner") && !spec.kind.equals("left")) {
            throw new IllegalArgumentException(spec.node + ": a stream-table join is inner or left, not " + spec.kind);
        }
        this.left = spec.kind.equals("left");
    }

    @Override
    public void init(OutputMode outputMode, TimeMode timeMode) {
        if (!spec.replay) {
            StructType schema = (StructType) DataType.fromJson(spec.stateSchema);
            state = getHandle().getValueState(spec.stateName, Encoders.row(schema), TTLConfig.NONE());
        }
    }

    @Override
    public Iterator<Row> handleInputRows(Row key, Iterator<Row> rows, TimerValues timerValues) {
        watermark = timerValues.getCurrentWatermarkInMs();
        List<Rec> data = rows(rows);
        if (data.isEmpty()) return iterator(Collections.emptyList());
        Object kcell = key.get(0);
        boolean keyNull = kcell == null;
        HeldTable held = heldTable(data, state, 0);
        StreamTableJoin.TableValue table = held.table();
        int first = held.first();
        List<Row> out = new ArrayList<>();
        for (int i = first; i < data.size(); i++) {
            Rec r = data.get(i);
            if (r.carried != null) continue;
            if (r.input == RIGHT) {
                table = StreamTableJoin.tableUpdate(table, keyNull, r.value, r.ts);
                continue;
            }
            switch (StreamTableJoin.streamStep(left, keyNull, r.value == null, table)) {
                case DROPPED -> out.add(dropped(r, Contract.DROPPED));
                case PAIR -> out.add(pair(kcell, r.value, StreamTableJoin.tableValue(keyNull, table), r.ts, r));
                default -> { }
            }
        }
        if (spec.replay) {
            if (table != null) out.add(carry(kcell, RowFactory.create(table.value(), table.ts())));
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
