package io.streamsdsl.jvm;

import com.fasterxml.jackson.databind.JsonNode;
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
 * The JVM twin of the Python table–table join operator ({@code streamsdsl.compiler.table_joins}'
 * {@code TableJoinOperator}) over {@link TableTableJoin}: one state row per key in the Python
 * operator's layout ({@code struct<left_value, left_ts, right_value, right_ts, has_result>}; a null
 * timestamp: the side is absent), which interactive queries read as they read the Python
 * operator's; the left table's records (input 0) and the right table's (input 1) of the key in the
 * Python operator's order; per record its drop event, a pair (left value, right value) or a
 * tombstone of the result out, under the key, at Kafka's timestamp.
 *
 * <p>The input's {@code value} struct is {@code (l, r, t)}: the record's value on its side and
 * whether the table source's value was a tombstone ({@code t}, null: the value says it; a
 * {@code map_values} between the source and the join makes a null value that is not one). The
 * spec's {@code params}: {@code materialized}, {@code cached}, {@code filtered_sides}.
 */
final class TableTableJoinProcessor extends JoinProcessor {
    private static final long serialVersionUID = 1L;

    private final TableTableJoin.Spec join;
    private transient ValueState<Row> state;

    TableTableJoinProcessor(JoinSpec spec) throws Exception {
        super(spec);
        JsonNode filtered = spec.param("filtered_sides");
        boolean leftFiltered = false, rightFiltered = false;
        if (filtered != null) {
            for (JsonNode side : filtered) {
                leftFiltered |= side.asText().equals("left");
                rightFiltered |= side.asText().equals("right");
            }
        }
        join = new TableTableJoin.Spec(TableTableJoin.Spec.kind(spec.kind), spec.param("materialized").asBoolean(),
            spec.param("cached").asBoolean(), leftFiltered, rightFiltered);
    }

    @Override
    public void init(OutputMode outputMode, TimeMode timeMode) {
        if (!spec.replay) {
            StructType schema = (StructType) DataType.fromJson(spec.stateSchema);
            state = getHandle().getValueState(spec.stateName, Encoders.row(schema), TTLConfig.NONE());
        }
    }

    /** The state row of the Python operator's layout. */
    static TableTableJoin.State decode(Row c) {
        TableTableJoin.Side left = c.isNullAt(1) ? null : new TableTableJoin.Side(c.get(0), c.getLong(1));
        TableTableJoin.Side right = c.isNullAt(3) ? null : new TableTableJoin.Side(c.get(2), c.getLong(3));
        return new TableTableJoin.State(left, right, !c.isNullAt(4) && c.getBoolean(4));
    }

    static Row encode(TableTableJoin.State s) {
        TableTableJoin.Side l = s.left(), r = s.right();
        return RowFactory.create(l == null ? null : l.value(), l == null ? null : l.ts(),
            r == null ? null : r.value(), r == null ? null : r.ts(), s.hasResult());
    }

    /** The Python operator's order: replay pipe order, then input; streaming timestamp first. */
    private static final Comparator<Rec> REPLAY_ORDER = PIPE_ORDER.thenComparingInt(r -> r.input);
    private static final Comparator<Rec> STREAMING_ORDER = TIME_ORDER.thenComparingInt(r -> r.input);

    @Override
    public Iterator<Row> handleInputRows(Row key, Iterator<Row> rows, TimerValues timerValues) {
        watermark = timerValues.getCurrentWatermarkInMs();
        List<Rec> data = rows(rows, spec.replay ? REPLAY_ORDER : STREAMING_ORDER);
        if (data.isEmpty()) return iterator(Collections.emptyList());
        Object kcell = key.get(0);
        TableTableJoin.State s = TableTableJoin.State.EMPTY;
        int first = 0;
        if (spec.replay) {
            while (first < data.size() && data.get(first).carried != null) s = decode(data.get(first++).carried);
        } else if (state.exists()) {
            s = decode(state.get());
        }
        List<Row> out = new ArrayList<>();
        for (int i = first; i < data.size(); i++) {
            Rec r = data.get(i);
            if (r.carried != null) continue;
            Row value = r.valueRow;
            Boolean tombstone = value == null || value.isNullAt(2) ? null : value.getBoolean(2);
            TableTableJoin.Step step = TableTableJoin.step(join, s, r.input == LEFT, kcell == null, r.value,
                tombstone, r.ts);
            s = step.state();
            switch (step.outcome()) {
                case DROPPED -> out.add(dropped(r, Contract.DROPPED));
                case PAIR -> out.add(pair(kcell, step.left(), step.right(), step.ts(), r));
                case TOMBSTONE -> out.add(tombstone(kcell, step.ts(), r));
                default -> { }
            }
        }
        if (spec.replay) {
            if (!s.empty()) out.add(carry(kcell, encode(s)));
        } else if (s.empty()) {
            state.clear();
        } else {
            state.update(encode(s));
        }
        return iterator(out);
    }
}
