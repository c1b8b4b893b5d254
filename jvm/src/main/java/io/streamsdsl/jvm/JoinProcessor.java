package io.streamsdsl.jvm;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.List;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.streaming.StatefulProcessor;
import org.apache.spark.sql.streaming.ValueState;
import scala.collection.Iterator;
import scala.jdk.javaapi.CollectionConverters;

/**
 * What the JVM join processors share: reading the join's input rows ({@link JoinSpec}), their
 * order, and the output rows of the matched-pairs contract ({@link JoinOperator}): a pair, a
 * tombstone, a drop event, a replay's carried state; the output event time when a stateful
 * operator is below. A join kind's processor implements {@link #join} (and, with timers,
 * {@link #timers} and {@code handleExpiredTimer}).
 */
abstract class JoinProcessor extends StatefulProcessor<Row, Row, Row> {
    private static final long serialVersionUID = 1L;

    /** Input side of the left and the right input ({@code Contract.INPUT_INDEX}). */
    static final int LEFT = 0, RIGHT = 1;

    protected final JoinSpec spec;
    /** The watermark of the batch being processed (streaming), for the rows' output event time. */
    protected transient long watermark;

    JoinProcessor(JoinSpec spec) {
        this.spec = spec;
    }

    /** Whether the processor registers event-time timers (streaming runs it in event-time mode). */
    boolean timers() {
        return false;
    }

    /** One input row: a record of side {@link #input} (its value {@link #value}), or a carried state. */
    static final class Rec {
        long pos;
        /** The output position as it came (a Scala sequence or null), and as numbers to order by. */
        Object outPos;
        long[] order;
        /** Null on a carried state's row. */
        Long ts;
        Object headers;
        int input;
        Object value;
        /** The input's {@code value} struct (both sides' fields, and any a join kind adds). */
        Row valueRow;
        Row carried;
    }

    Rec read(Row r) {
        JoinSpec s = spec;
        Rec rec = new Rec();
        rec.pos = r.getLong(s.posIdx);
        rec.outPos = r.get(s.outPosIdx);
        List<Object> op = r.isNullAt(s.outPosIdx) ? List.of() : r.getList(s.outPosIdx);
        rec.order = new long[op.size()];
        for (int i = 0; i < rec.order.length; i++) rec.order[i] = (Long) op.get(i);
        if (s.carriedIdx >= 0 && !r.isNullAt(s.carriedIdx)) {
            rec.carried = r.getStruct(s.carriedIdx);
            return rec;
        }
        rec.ts = r.getLong(s.tsIdx);
        rec.headers = r.get(s.headersIdx);
        rec.input = r.getInt(s.inputIdx);
        Row pair = r.getStruct(s.valueIdx);
        rec.valueRow = pair;
        rec.value = pair == null ? null : pair.get(rec.input);
        return rec;
    }

    /** Replay: pipe order (position, then output position); carried states (position -1) first. */
    static final Comparator<Rec> PIPE_ORDER = (a, b) -> {
        int c = Long.compare(a.pos, b.pos);
        return c != 0 ? c : Arrays.compare(a.order, b.order);
    };
    /** Streaming: a micro-batch's records of a key by timestamp, then source position. */
    static final Comparator<Rec> TIME_ORDER = Comparator.<Rec>comparingLong(r -> r.ts == null ? Long.MIN_VALUE : r.ts)
        .thenComparing(PIPE_ORDER);

    /** A key's table value before a batch's rows, and the index of its first row that is not carried. */
    record HeldTable(StreamTableJoin.TableValue table, int first) { }

    /**
     * The table value a stream-table join's key holds before {@code data}: in a replay, the carried
     * rows (sorted first; value and timestamp at {@code column} and {@code column + 1} of the
     * carried struct), else the state's row (value, timestamp); none for a new key.
     */
    HeldTable heldTable(List<Rec> data, ValueState<Row> state, int column) {
        StreamTableJoin.TableValue table = null;
        int first = 0;
        if (spec.replay) {
            while (first < data.size() && data.get(first).carried != null) {
                Row c = data.get(first++).carried;
                table = new StreamTableJoin.TableValue(c.get(column), c.getLong(column + 1));
            }
        } else if (state.exists()) {
            Row c = state.get();
            table = new StreamTableJoin.TableValue(c.get(0), c.getLong(1));
        }
        return new HeldTable(table, first);
    }

    /** The key's rows, read and in the order the join processes them. */
    List<Rec> rows(Iterator<Row> rows) {
        return rows(rows, spec.replay ? PIPE_ORDER : TIME_ORDER);
    }

    /** The key's rows, read and in {@code order}. */
    List<Rec> rows(Iterator<Row> rows, Comparator<Rec> order) {
        List<Rec> data = new ArrayList<>();
        while (rows.hasNext()) data.add(read(rows.next()));
        data.sort(order);
        return data;
    }

    /** A matched pair of {@code r}'s record: the left and the right value (a side without a match null). */
    Row pair(Object key, Object left, Object right, long ts, Rec r) {
        return record(key, RowFactory.create(left, right), ts, r.headers, r.pos, r.outPos);
    }

    /** A tombstone of the join's result (a table–table join's), with {@code r}'s coordinates. */
    Row tombstone(Object key, long ts, Rec r) {
        return record(key, null, ts, r.headers, r.pos, r.outPos);
    }

    private Row record(Object key, Object value, long ts, Object headers, long pos, Object outPos) {
        if (spec.replay) return RowFactory.create(key, value, ts, headers, pos, outPos, null, null, null, null);
        if (spec.eventTimeOut) return RowFactory.create(key, value, ts, headers, pos, outPos, null, null, null, eventTime(ts));
        return RowFactory.create(key, value, ts, headers, pos, outPos, null, null, null);
    }

    /** A drop event of {@code r}'s record ({@code metric}: {@code Contract.DROPPED}, ...). */
    Row dropped(Rec r, String metric) {
        if (spec.replay) return RowFactory.create(null, null, r.ts, EMPTY, r.pos, EMPTY, null, metric, 1.0, null);
        if (spec.eventTimeOut) {
            return RowFactory.create(null, null, r.ts, EMPTY, r.pos, EMPTY, null, metric, 1.0, eventTime(r.ts));
        }
        return RowFactory.create(null, null, r.ts, EMPTY, r.pos, EMPTY, null, metric, 1.0);
    }

    /** Replay: the key's state after the run, for the next run ({@code Contract.CARRY}). */
    Row carry(Object key, Row state) {
        return RowFactory.create(key, null, -1L, EMPTY, -1L, EMPTY, null, Contract.CARRY, null, state);
    }

    /** A row's output event time: its timestamp, raised to the watermark when older, plus
     * {@code Contract.EVENT_TIME_SHIFT_MS} ({@code streamsdsl.compiler.event_time}). */
    java.sql.Timestamp eventTime(long ts) {
        return new java.sql.Timestamp(Math.max(ts, Math.max(watermark, 0L)) + Contract.EVENT_TIME_SHIFT_MS);
    }

    /** An empty array cell. */
    static final scala.collection.Seq<Object> EMPTY = CollectionConverters.asScala(List.<Object>of()).toSeq();

    static Iterator<Row> iterator(List<Row> out) {
        return CollectionConverters.asScala(out.iterator());
    }

    @Override
    public void close() {
    }
}
