package io.streamsdsl.jvm;

import com.fasterxml.jackson.databind.JsonNode;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.Comparator;
import java.util.List;
import org.apache.spark.sql.Encoders;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.streaming.ExpiredTimerInfo;
import org.apache.spark.sql.streaming.OutputMode;
import org.apache.spark.sql.streaming.TTLConfig;
import org.apache.spark.sql.streaming.TimeMode;
import org.apache.spark.sql.streaming.TimerValues;
import org.apache.spark.sql.streaming.ValueState;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.StructType;
import scala.collection.Iterator;
import scala.jdk.javaapi.CollectionConverters;

/**
 * The JVM twin of the Python stream–stream join operator ({@code streamsdsl.compiler.stream_joins}:
 * {@code ReplayStreamJoinProcessor} and {@code StreamingStreamJoinProcessor}) over {@link StreamJoin}:
 * one state row per key in the Python operator's layout
 * ({@code struct<left array<struct<ts, v>>, right array<struct<ts, v>>, held array<struct<ts, side, l, r>>>}),
 * the matched pairs out (the joiner runs afterwards, {@link JoinOperator}).
 *
 * <p>Replay (the driver's run, {@code TimeMode.None}): per record Kafka's stream time, the stream time
 * of the last in-order record (the scan time) and each side's store time come from the plan
 * (columns named in the spec's {@code columns}); before a record with a value the key's held records
 * the scan time has expired leave as null-join pairs with {@code Contract.CLOSE_THRESHOLD} and a
 * {@code _final_key_order} (the plan places them after the first in-order record past their
 * threshold, ordered as Kafka's scan: timestamp, right before left, key bytes); at the end of the
 * run the key is closed at the run's times and its state carried out.
 *
 * <p>Streaming: stream time is the watermark raised by the key's records of the micro-batch (by
 * timestamp, left before right); the key is closed at the watermark first, an in-order record
 * closes it at its own time before it is joined; one event-time timer per key at
 * {@link StreamJoin#timerThreshold} {@code + 1} (a function of the stored state: the timer to move
 * is known without listing the key's timers).
 */
final class StreamStreamJoinProcessor extends JoinProcessor {
    private static final long serialVersionUID = 1L;

    private final StreamJoin join;
    /** Replay: the input columns of the plan's times (stream, scan, left store, right store, the run's). */
    private final int streamTimeIdx, scanTimeIdx, leftTimeIdx, rightTimeIdx, runTimesIdx;
    /** How the key's bytes are ordered ({@code string}, {@code int}, {@code long}, {@code bytes}, {@code json}, ...). */
    private final String keyKind;
    private transient ValueState<Row> state;

    StreamStreamJoinProcessor(JoinSpec spec) throws Exception {
        super(spec);
        join = new StreamJoin(StreamJoin.kind(spec.kind), spec.param("before").asLong(), spec.param("after").asLong(),
            spec.param("grace").asLong(), spec.param("spurious_result_fix").asBoolean());
        JsonNode columns = spec.param("columns");
        streamTimeIdx = index(columns, "stream_time");
        scanTimeIdx = index(columns, "scan_time");
        leftTimeIdx = index(columns, "left_time");
        rightTimeIdx = index(columns, "right_time");
        runTimesIdx = index(columns, "run_times");
        keyKind = spec.param("key_kind").asText();
    }

    private static int index(JsonNode columns, String name) {
        return columns == null || !columns.has(name) ? -1 : columns.get(name).asInt();
    }

    @Override
    boolean timers() {
        return true;
    }

    @Override
    public void init(OutputMode outputMode, TimeMode timeMode) {
        if (!spec.replay) {
            StructType schema = (StructType) DataType.fromJson(spec.stateSchema);
            state = getHandle().getValueState(spec.stateName, Encoders.row(schema), TTLConfig.NONE());
        }
    }

    // -- the key's state as a row (the Python operator's layout) ----------------------------------

    private static StreamJoin.KeyState<Object> decode(Row row) {
        StreamJoin.KeyState<Object> s = new StreamJoin.KeyState<>();
        if (row == null) return s;
        for (int side = 0; side < 2; side++) {
            if (row.isNullAt(side)) continue;
            for (Object cell : row.getList(side)) {
                Row r = (Row) cell;
                s.buffer(side, r.getLong(0), r.get(1));
            }
        }
        if (!row.isNullAt(2)) {
            for (Object cell : row.getList(2)) {
                Row h = (Row) cell;
                int side = "left".equals(h.getString(1)) ? StreamJoin.LEFT : StreamJoin.RIGHT;
                s.hold(h.getLong(0), side, h.get(side == StreamJoin.LEFT ? 2 : 3));
            }
        }
        return s;
    }

    private static Row encode(StreamJoin.KeyState<Object> s) {
        List<Object> left = new ArrayList<>(s.left.size());
        for (StreamJoin.Rec<Object> r : s.left) left.add(RowFactory.create(r.ts(), r.value()));
        List<Object> right = new ArrayList<>(s.right.size());
        for (StreamJoin.Rec<Object> r : s.right) right.add(RowFactory.create(r.ts(), r.value()));
        List<Object> held = new ArrayList<>(s.held.size());
        for (StreamJoin.Held<Object> h : s.held) {
            boolean l = h.side() == StreamJoin.LEFT;
            held.add(RowFactory.create(h.ts(), l ? "left" : "right", l ? h.value() : null, l ? null : h.value()));
        }
        return RowFactory.create(seq(left), seq(right), seq(held));
    }

    private static scala.collection.Seq<Object> seq(List<Object> list) {
        return CollectionConverters.asScala(list).toSeq();
    }

    private static scala.collection.Seq<Object> position(Object prefix, long... rest) {
        List<Object> out = new ArrayList<>();
        if (prefix != null) out.addAll(CollectionConverters.asJava((scala.collection.Seq<?>) prefix));
        for (long r : rest) out.add(r);
        return seq(out);
    }

    // -- output rows (the replay's: Contract.REPLAY_OUTPUT_FIELDS) ---------------------------------

    private Row row(Object key, Object left, Object right, long ts, Object headers, long pos, Object outPos,
                    String finalKey, Long threshold) {
        Row pair = RowFactory.create(left, right);
        if (spec.replay) return RowFactory.create(key, pair, ts, headers, pos, outPos, finalKey, null, null, threshold, null);
        if (spec.eventTimeOut) return RowFactory.create(key, pair, ts, headers, pos, outPos, null, null, null, eventTime(ts));
        return RowFactory.create(key, pair, ts, headers, pos, outPos, null, null, null);
    }

    private Row drop(Rec r) {
        if (spec.replay) return RowFactory.create(null, null, r.ts, EMPTY, r.pos, EMPTY, null, Contract.DROPPED, 1.0, null, null);
        if (spec.eventTimeOut) {
            return RowFactory.create(null, null, r.ts, EMPTY, r.pos, EMPTY, null, Contract.DROPPED, 1.0, eventTime(r.ts));
        }
        return RowFactory.create(null, null, r.ts, EMPTY, r.pos, EMPTY, null, Contract.DROPPED, 1.0);
    }

    private Row carried(Object key, Row s) {
        return RowFactory.create(key, null, -1L, EMPTY, -1L, EMPTY, null, Contract.CARRY, null, null, s);
    }

    /** A record's step: its drop event, or its pairs (output position: the record's, then 1, i). */
    private void stepRows(List<Row> out, StreamJoin.Step<Object> step, Object kcell, Rec r) {
        if (step.dropped() != null) {
            out.add(drop(r));
            return;
        }
        List<StreamJoin.Pair<Object>> pairs = step.outputs();
        for (int i = 0; i < pairs.size(); i++) {
            StreamJoin.Pair<Object> p = pairs.get(i);
            out.add(row(kcell, p.left(), p.right(), p.ts(), r.headers, r.pos, position(r.outPos, 1, i), null, null));
        }
    }

    private static Object left(StreamJoin.Held<Object> h) {
        return h.side() == StreamJoin.LEFT ? h.value() : null;
    }

    private static Object right(StreamJoin.Held<Object> h) {
        return h.side() == StreamJoin.RIGHT ? h.value() : null;
    }

    /** Records with a null key (Spark groups them under one key): no state; each joined with null
     * at once on an outer side when it has a value, else dropped. */
    private List<Row> nullKey(List<Rec> data) {
        List<Row> out = new ArrayList<>();
        for (Rec r : data) {
            if (r.carried != null) continue;
            stepRows(out, join.step(null, r.input, true, r.value, r.ts, r.ts, r.ts), null, r);
        }
        return out;
    }

    /** Replay and null keys: pipe order, then input (left first); streaming: timestamp, input, pipe
     * order (the Python operator's). */
    private static final Comparator<Rec> REPLAY_ORDER = PIPE_ORDER.thenComparingInt(r -> r.input);
    private static final Comparator<Rec> STREAMING_ORDER = Comparator.<Rec>comparingLong(r -> r.ts == null ? Long.MIN_VALUE : r.ts)
        .thenComparingInt(r -> r.input).thenComparing(PIPE_ORDER);

    @Override
    public Iterator<Row> handleInputRows(Row key, Iterator<Row> rows, TimerValues timerValues) {
        watermark = timerValues.getCurrentWatermarkInMs();
        List<Row> raw = new ArrayList<>();
        while (rows.hasNext()) raw.add(rows.next());
        List<Rec> data = new ArrayList<>(raw.size());
        for (Row r : raw) data.add(read(r));
        if (data.isEmpty()) return iterator(Collections.emptyList());
        Object kcell = key.get(0);
        if (spec.replay) {
            Integer[] order = new Integer[data.size()];
            for (int i = 0; i < order.length; i++) order[i] = i;
            Arrays.sort(order, (a, b) -> REPLAY_ORDER.compare(data.get(a), data.get(b)));
            List<Rec> recs = new ArrayList<>(order.length);
            List<Row> sorted = new ArrayList<>(order.length);
            for (Integer i : order) {
                recs.add(data.get(i));
                sorted.add(raw.get(i));
            }
            return iterator(kcell == null ? nullKey(recs) : replay(kcell, recs, sorted));
        }
        if (kcell == null) {
            data.sort(REPLAY_ORDER);
            return iterator(nullKey(data));
        }
        data.sort(STREAMING_ORDER);
        return iterator(streaming(kcell, data));
    }

    // -- replay -----------------------------------------------------------------------------------

    private List<Row> replay(Object kcell, List<Rec> data, List<Row> raw) {
        StreamJoin.KeyState<Object> s = new StreamJoin.KeyState<>();
        int first = 0;
        while (first < data.size() && data.get(first).carried != null) s = decode(data.get(first++).carried);
        Row run = raw.get(0).isNullAt(runTimesIdx) ? null : raw.get(0).getStruct(runTimesIdx);
        String korder = keyOrder(kcell);
        List<Row> out = new ArrayList<>();
        int[] seq = {0};
        for (int i = first; i < data.size(); i++) {
            Rec r = data.get(i);
            Row row = raw.get(i);
            long scan = row.getLong(scanTimeIdx);
            long lt = row.getLong(leftTimeIdx);
            long rt = row.getLong(rightTimeIdx);
            if (r.value != null && join.holds()) pending(out, kcell, korder, join.close(s, scan, lt, rt), seq);
            long other = r.input == StreamJoin.LEFT ? rt : lt;
            stepRows(out, join.step(s, r.input, false, r.value, r.ts, row.getLong(streamTimeIdx), other), kcell, r);
        }
        if (run != null) {
            // RUN_TIMES: (stream time, scan time, left store time, right store time) at the end of the run
            List<StreamJoin.Held<Object>> held = join.close(s, run.getLong(1), run.getLong(2), run.getLong(3));
            if (join.holds()) pending(out, kcell, korder, held, seq);
        }
        if (!s.isEmpty()) out.add(carried(kcell, encode(s)));
        return out;
    }

    /** Held records the scan time expired: null-join pairs the plan places (Kafka's scan over all keys). */
    private void pending(List<Row> out, Object kcell, String korder, List<StreamJoin.Held<Object>> held, int[] seq) {
        for (StreamJoin.Held<Object> h : held) {
            long threshold = join.holdThreshold(h.ts(), h.side());
            String finalKey = korder + " " + String.format("%010d", seq[0]++);
            out.add(row(kcell, left(h), right(h), h.ts(), EMPTY, -1L,
                position(null, 0, h.ts(), h.side() == StreamJoin.RIGHT ? 0 : 1), finalKey, threshold));
        }
    }

    /** The key's bytes as hex, as the Python operator orders keys ({@code semantics.tables.key_bytes}
     * of the key: a string's UTF-8, an integer's 4 bytes when it fits else 8, bytes as they are,
     * anything else as its JSON text). */
    String keyOrder(Object kcell) {
        return hex(keyBytes(keyKind, kcell));
    }

    static byte[] keyBytes(String kind, Object kcell) {
        switch (kind) {
            case "string":
                return ((String) kcell).getBytes(StandardCharsets.UTF_8);
            case "int":
            case "long":
                return integer(((Number) kcell).longValue());
            case "bytes":
                return (byte[]) kcell;
            case "json":
                try {
                    JsonNode node = new com.fasterxml.jackson.databind.ObjectMapper().readTree((String) kcell);
                    if (node.isTextual()) return node.asText().getBytes(StandardCharsets.UTF_8);
                    if (node.isIntegralNumber() && node.canConvertToLong()) return integer(node.asLong());
                } catch (Exception e) {
                    // not JSON text: ordered by the text as it is
                }
                return ((String) kcell).getBytes(StandardCharsets.UTF_8);
            default:
                return String.valueOf(kcell).getBytes(StandardCharsets.UTF_8);
        }
    }

    private static byte[] integer(long v) {
        return v == (int) v ? ByteBuffer.allocate(4).putInt((int) v).array() : ByteBuffer.allocate(8).putLong(v).array();
    }

    private static String hex(byte[] bytes) {
        StringBuilder hex = new StringBuilder(bytes.length * 2);
        for (byte b : bytes) hex.append(Character.forDigit((b >> 4) & 0xf, 16)).append(Character.forDigit(b & 0xf, 16));
        return hex.toString();
    }

    // -- streaming --------------------------------------------------------------------------------

    private StreamJoin.KeyState<Object> load() {
        Row stored = state.get();
        return stored == null ? new StreamJoin.KeyState<>() : decode(stored);
    }

    /** The timer {@link #save} registered for a key's state ({@code Long.MIN_VALUE}: none): its next
     * threshold + 1, so no timer needs listing. */
    private long timerOf(StreamJoin.KeyState<Object> s) {
        long threshold = join.timerThreshold(s);
        return threshold == StreamJoin.NONE ? Long.MIN_VALUE : threshold + 1;
    }

    /** Store the key's state and move its timer from {@code oldTimer} (already gone: {@code fired})
     * to the state's next threshold + 1. */
    private void save(StreamJoin.KeyState<Object> s, long oldTimer, long fired) {
        long timer = timerOf(s);
        if (timer != oldTimer) {
            if (oldTimer != Long.MIN_VALUE && oldTimer != fired) getHandle().deleteTimer(oldTimer);
            if (timer != Long.MIN_VALUE) getHandle().registerTimer(timer);
        }
        if (s.isEmpty()) state.clear();
        else state.update(encode(s));
    }

    /** The key's held records the watermark has expired (position -1, output position 0, i). */
    private void closed(List<Row> out, Object kcell, StreamJoin.KeyState<Object> s, long watermark) {
        List<StreamJoin.Held<Object>> held = join.close(s, watermark);
        for (int i = 0; i < held.size(); i++) {
            StreamJoin.Held<Object> h = held.get(i);
            out.add(row(kcell, left(h), right(h), h.ts(), EMPTY, -1L, position(null, 0, i), null, null));
        }
    }

    private List<Row> streaming(Object kcell, List<Rec> data) {
        StreamJoin.KeyState<Object> s = load();
        long oldTimer = timerOf(s);
        List<Row> out = new ArrayList<>();
        long streamTime = watermark;
        closed(out, kcell, s, streamTime);
        for (Rec r : data) {
            streamTime = Math.max(streamTime, r.ts);
            if (r.value != null && join.holds() && r.ts == streamTime) {
                List<StreamJoin.Held<Object>> held = join.close(s, streamTime);
                for (int i = 0; i < held.size(); i++) {
                    StreamJoin.Held<Object> h = held.get(i);
                    out.add(row(kcell, left(h), right(h), h.ts(), r.headers, r.pos, position(r.outPos, 0, i), null, null));
                }
            }
            stepRows(out, join.step(s, r.input, false, r.value, r.ts, streamTime, streamTime), kcell, r);
        }
        save(s, oldTimer, Long.MIN_VALUE);
        return out;
    }

    @Override
    public Iterator<Row> handleExpiredTimer(Row key, TimerValues timerValues, ExpiredTimerInfo expiredTimerInfo) {
        watermark = timerValues.getCurrentWatermarkInMs();
        StreamJoin.KeyState<Object> s = load();
        long oldTimer = timerOf(s);
        List<Row> out = new ArrayList<>();
        closed(out, key.get(0), s, watermark);
        save(s, oldTimer, expiredTimerInfo.getExpiryTimeInMs());
        return iterator(out);
    }
}
