package io.streamsdsl.jvm;

import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.apache.spark.TaskContext;
import org.apache.spark.sql.Encoders;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.streaming.ExpiredTimerInfo;
import org.apache.spark.sql.streaming.OutputMode;
import org.apache.spark.sql.streaming.StatefulProcessorWithInitialState;
import org.apache.spark.sql.streaming.TTLConfig;
import org.apache.spark.sql.streaming.TimeMode;
import org.apache.spark.sql.streaming.TimerValues;
import org.apache.spark.sql.streaming.ValueState;
import scala.collection.Iterator;
import scala.jdk.javaapi.CollectionConverters;

/**
 * The JVM twin of {@code streamsdsl.compiler.processors}: one state value and one event-time timer
 * per key, the same output rows (columns, {@code _output_position}, {@code _final_key_order},
 * metric events) as the Python operator for the built-in aggregations.
 *
 * <p>Streaming: stream time is {@code max(previous watermark, the key's record timestamps so far)},
 * windows close on event-time timers, a micro-batch forwards the net change per key. Replay (the
 * TopologyTestDriver's batch run, {@code TimeMode.None}): each record's stream, store and expiry
 * times derived by {@link Clock} from the plan column {@code _stream_times_before} (every input's
 * stream time before the record), the cache flushed after every source record, state carried in
 * and out as {@code _carried_state} rows, on-close candidates leave with {@code _close_threshold}.
 *
 * <p>State layout (a versioned {@code byte[]}): version byte {@link #STATE_VERSION}, the key's
 * registered timer (long, {@code Long.MIN_VALUE}: none), the window count (int), then per window
 * start, end, ts (longs), flags (byte: 1 final, 2 null aggregate) and the aggregate (long bits,
 * absent when null). With idle close ({@link Spec#idleCloseMs}) the layout is version
 * {@link #IDLE_STATE_VERSION}: the same, then the key's floor and its last record's processing time
 * (longs; after its timer found the aggregation busy, the aggregation's last input time then), and
 * the timer is a processing-time timer at that time plus the idle close. Idle close is per
 * aggregation: the tasks learn when it last had a record through {@link IdleChannel}.
 */
public final class AggregateProcessor extends StatefulProcessorWithInitialState<Row, Row, Row, Row> {
    private static final long serialVersionUID = 1L;

    /** The version of the state layout this class writes and reads. */
    public static final byte STATE_VERSION = 1;
    /** The layout with idle close: {@link #STATE_VERSION}'s, then the floor and the last record's time. */
    public static final byte IDLE_STATE_VERSION = 2;

    static final String DROPPED = Contract.DROPPED;
    static final String EMIT_FINAL = Contract.EMIT_FINAL;
    static final String CARRY = Contract.CARRY;

    private final Spec spec;
    /** The watermark of the batch being processed (streaming), for the rows' output event time. */
    private transient long watermark;
    private final Windowing windowing;
    private final Agg agg;
    private transient ValueState<byte[]> state;
    /** Idle close: when the aggregation last had a record, as this task learns it. */
    private transient IdleChannel channel;

    AggregateProcessor(Spec spec) {
        this.spec = spec;
        this.windowing = spec.windowing;
        this.agg = spec.agg;
    }

    @Override
    public void init(OutputMode outputMode, TimeMode timeMode) {
        if (!spec.replay) state = getHandle().getValueState(spec.stateName, Encoders.BINARY(), TTLConfig.NONE());
        if (!spec.replay && spec.idleCloseMs > 0) channel = new IdleChannel(spec.idleChannel);
        // the Python operator's name for the same store: Spark rejects a switch of operator
    }

    // -- input rows -----------------------------------------------------------------------------
    private static final class Rec {
        long pos;
        long[] outPos;
        long ts;
        boolean valueNull;
        Long x;
        int input;
        /** Replay: every input's stream time before the record (the clock the plan supplies). */
        long[] timesBefore;
        Object headers;
        List<?> carried;
        Long runStreamTime;
    }

    private Rec read(Row r) {
        Spec s = spec;
        Rec rec = new Rec();
        rec.pos = r.getLong(s.posIdx);
        List<Object> op = r.isNullAt(s.outPosIdx) ? List.of() : r.getList(s.outPosIdx);
        rec.outPos = new long[op.size()];
        for (int i = 0; i < rec.outPos.length; i++) rec.outPos[i] = (Long) op.get(i);
        rec.headers = r.get(s.headersIdx);
        if (s.carriedIdx >= 0 && !r.isNullAt(s.carriedIdx)) {
            rec.carried = r.getList(s.carriedIdx);
            if (s.runStreamTimeIdx >= 0 && !r.isNullAt(s.runStreamTimeIdx)) rec.runStreamTime = r.getLong(s.runStreamTimeIdx);
            return rec;
        }
        rec.ts = r.getLong(s.tsIdx);
        rec.valueNull = r.isNullAt(s.valueIdx);
        if (s.numberIdx >= 0 && !r.isNullAt(s.numberIdx)) {
            rec.x = agg.dbl ? Double.doubleToRawLongBits(r.getDouble(s.numberIdx)) : r.getLong(s.numberIdx);
        }
        rec.input = s.inputIdx >= 0 ? r.getInt(s.inputIdx) : 0;
        if (s.timesBeforeIdx >= 0) {
            List<Object> times = r.getList(s.timesBeforeIdx);
            rec.timesBefore = new long[times.size()];
            for (int i = 0; i < rec.timesBefore.length; i++) rec.timesBefore[i] = (Long) times.get(i);
        }
        if (s.runStreamTimeIdx >= 0 && !r.isNullAt(s.runStreamTimeIdx)) rec.runStreamTime = r.getLong(s.runStreamTimeIdx);
        return rec;
    }

    private static int compare(Rec a, Rec b) {
        int c = Long.compare(a.pos, b.pos);
        return c != 0 ? c : Arrays.compare(a.outPos, b.outPos);
    }

    // -- output rows ----------------------------------------------------------------------------
    private Object keyCell(Object kcell, Win w) {
        return spec.windowedKey ? RowFactory.create(kcell, w.start, w.end) : kcell;
    }

    private Object outValue(Long bits) {
        if (bits == null) return null;
        switch (spec.outType) {
            case "bigint":
                return bits;
            case "int":
                return (int) (long) bits;
            default:
                return agg.dbl ? Double.longBitsToDouble(bits) : (double) (long) bits;
        }
    }

    private Long fromCell(Object cell) {
        if (cell == null) return null;
        if (cell instanceof Double) {
            double d = (Double) cell;
            return agg.dbl ? Double.doubleToRawLongBits(d) : (long) d;
        }
        long v = ((Number) cell).longValue();
        return agg.dbl ? Double.doubleToRawLongBits((double) v) : v;
    }

    /** An empty array cell. */
    private static final scala.collection.Seq<Object> EMPTY = seq(List.of());

    /** A Java list as the Scala sequence Spark's Row encoder takes for an array column. */
    private static scala.collection.Seq<Object> seq(List<?> list) {
        @SuppressWarnings("unchecked")
        List<Object> l = (List<Object>) list;
        return CollectionConverters.asScala(l).toSeq();
    }

    private static scala.collection.Seq<Object> position(long[] prefix, long... rest) {
        Long[] out = new Long[prefix.length + rest.length];
        for (int i = 0; i < prefix.length; i++) out[i] = prefix[i];
        for (int i = 0; i < rest.length; i++) out[prefix.length + i] = rest[i];
        return seq(Arrays.asList(out));
    }

    private Row record(Object key, Object value, long ts, Object headers, long pos, Object outPos, String finalKey,
                       Long threshold) {
        if (spec.replay) return RowFactory.create(key, value, ts, headers, pos, outPos, finalKey, null, null, threshold, null);
        if (spec.eventTimeOut) {
            return RowFactory.create(key, value, ts, headers, pos, outPos, finalKey, null, null, eventTime(ts));
        }
        return RowFactory.create(key, value, ts, headers, pos, outPos, finalKey, null, null);
    }

    private Row event(String metric, double value, long ts, long pos, String finalKey) {
        return event(metric, value, ts, pos, finalKey, EMPTY);
    }

    private Row event(String metric, double value, long ts, long pos, String finalKey, scala.collection.Seq<Object> outPos) {
        if (spec.replay) {
            return RowFactory.create(null, null, ts, EMPTY, pos, outPos, finalKey, metric, value, null, null);
        }
        if (spec.eventTimeOut) {
            return RowFactory.create(null, null, ts, EMPTY, pos, outPos, finalKey, metric, value, eventTime(ts));
        }
        return RowFactory.create(null, null, ts, EMPTY, pos, outPos, finalKey, metric, value);
    }

    /** A drop event (the Python processor's {@code _dropped}): its reason as the metric (a null value
     * where the window kind skips one, else too late), a cogroup's input as its output position. */
    private Row dropped(Rec r, long count) {
        return event(windowing.dropMetric(r.valueNull), count, r.ts, r.pos, null,
            spec.inputIdx >= 0 ? position(new long[0], r.input) : EMPTY);
    }

    /** A row's output event time: its timestamp, raised to the watermark when older, plus
     * {@code Contract.EVENT_TIME_SHIFT_MS} (Spark refuses an operator that emits a row at or
     * below the watermark; the plan's watermark delay takes the shift back). */
    private java.sql.Timestamp eventTime(long ts) {
        return new java.sql.Timestamp(Math.max(ts, Math.max(watermark, 0L)) + Contract.EVENT_TIME_SHIFT_MS);
    }

    /** What the cache forwards: each window with its last writing record's position, headers and output position. */
    private void flush(List<Row> out, Object kcell, ChangeBuffer buffer) {
        int i = 0;
        for (ChangeBuffer.Flushed f : buffer.flush()) {
            Win w = f.window();
            Rec r = (Rec) f.context();
            boolean tomb = ChangeBuffer.isTombstone(w);
            Win window = tomb ? new Win(f.bounds().start(), f.bounds().end(), null, f.bounds().end()) : w;
            Object value = tomb ? null : outValue(w.agg);
            out.add(record(keyCell(kcell, window), value, window.ts, r.headers, r.pos, position(r.outPos, 0, i), null, null));
            i++;
        }
    }

    private Row fin(Object kcell, String key, Win w, long pos, long[] ord, Long threshold) {
        long[] order = windowing.finalOrderOf(w);
        long[] rest = new long[order.length + 1];
        rest[0] = 1;
        System.arraycopy(order, 0, rest, 1, order.length);
        return record(keyCell(kcell, w), outValue(w.agg), w.ts, EMPTY, pos, position(ord, rest), key, threshold);
    }

    private void finals(List<Row> out, Object kcell, List<Win> closed, long streamTime, long pos, long[] ord) {
        String key = KeyBytes.hex(spec.keyKind, kcell);
        for (Win w : closed) {
            out.add(fin(kcell, key, w, pos, ord, null));
            // an idle close comes before stream time passes the window: latency 0, as the kernel's
            long latency = Math.max(0L, streamTime - windowing.closeThreshold(w) - 1);
            out.add(event(EMIT_FINAL, (double) latency, w.ts, pos, key));
        }
    }

    private void pending(List<Row> out, Object kcell, List<Win> windows) {
        if (windows.isEmpty()) return;
        String key = KeyBytes.hex(spec.keyKind, kcell);
        for (Win w : windows) out.add(fin(kcell, key, w, -1, new long[0], windowing.closeThreshold(w)));
    }

    // -- state ------------------------------------------------------------------------------------
    private static final class Loaded {
        Windowing.KeyState state;
        long timer = Long.MIN_VALUE;
        /** Idle close: the key's floor (-1: none) and its last record's processing time. */
        long floor = -1;
        long lastRecordAt = -1;
    }

    private List<Win> stored(List<Win> windows) {
        windows.sort(spec.storageOrder());
        return windows;
    }

    private Loaded load() {
        Loaded l = new Loaded();
        l.state = Windowing.KeyState.empty();
        if (!state.exists()) return l;
        ByteBuffer b = ByteBuffer.wrap(state.get());
        byte version = b.get();
        if (version != (spec.idleCloseMs > 0 ? IDLE_STATE_VERSION : STATE_VERSION)) {
            throw new IllegalStateException(spec.node + ": the checkpoint holds state layout version " + version
                + " of the streamsdsl JVM operator; this jar reads version "
                + (spec.idleCloseMs > 0 ? IDLE_STATE_VERSION : STATE_VERSION)
                + ". Restart from the checkpoint with the streamsdsl version that wrote it, or start a new application.id.");
        }
        l.timer = b.getLong();
        int n = b.getInt();
        List<Win> windows = new ArrayList<>(n);
        Set<Long> finals = new HashSet<>();
        for (int i = 0; i < n; i++) {
            long start = b.getLong(), end = b.getLong(), ts = b.getLong();
            byte flags = b.get();
            Long a = (flags & 2) != 0 ? null : b.getLong();
            windows.add(new Win(start, end, a, ts));
            if ((flags & 1) != 0) finals.add(start);
        }
        l.state = new Windowing.KeyState(windows, finals);
        if (version == IDLE_STATE_VERSION) {
            l.floor = b.getLong();
            l.lastRecordAt = b.getLong();
        }
        return l;
    }

    private void save(Windowing.KeyState s, long oldTimer) {
        save(s, oldTimer, -1, -1);
    }

    /** Save the key's state and move its one timer: event time past its next threshold, or with
     * idle close, processing time {@code lastRecordAt} plus the idle close while anything stays. */
    private void save(Windowing.KeyState s, long oldTimer, long floor, long lastRecordAt) {
        boolean idle = spec.idleCloseMs > 0;
        boolean keep = !s.windows.isEmpty() || (idle && floor >= 0);
        long timer;
        if (idle) {
            timer = keep ? lastRecordAt + spec.idleCloseMs : Long.MIN_VALUE;
        } else {
            long threshold = windowing.nextThreshold(s);
            timer = threshold < Windowing.NEVER ? threshold + 1 : Long.MIN_VALUE;
        }
        if (timer != oldTimer) {
            if (oldTimer != Long.MIN_VALUE) getHandle().deleteTimer(oldTimer);
            if (timer != Long.MIN_VALUE) getHandle().registerTimer(timer);
        }
        if (!keep) {
            state.clear();
            return;
        }
        ByteBuffer b = ByteBuffer.allocate(1 + 8 + 4 + s.windows.size() * 33 + (idle ? 16 : 0));
        b.put(idle ? IDLE_STATE_VERSION : STATE_VERSION).putLong(timer).putInt(s.windows.size());
        for (Win w : s.windows) {
            b.putLong(w.start).putLong(w.end).putLong(w.ts);
            b.put((byte) ((s.finals.contains(w.start) ? 1 : 0) | (w.agg == null ? 2 : 0)));
            if (w.agg != null) b.putLong(w.agg);
        }
        if (idle) b.putLong(floor).putLong(lastRecordAt);
        state.update(Arrays.copyOf(b.array(), b.position()));
    }

    private Windowing.KeyState decodeCarried(List<?> cells) {
        List<Win> windows = new ArrayList<>(cells.size());
        Set<Long> finals = new HashSet<>();
        for (Object o : cells) {
            Row c = (Row) o;
            long start = c.getLong(0);
            windows.add(new Win(start, c.getLong(1), fromCell(c.get(2)), c.getLong(3)));
            if (c.getBoolean(4)) finals.add(start);
        }
        return new Windowing.KeyState(stored(windows), finals);
    }

    private List<Row> encodeCarried(Windowing.KeyState s) {
        List<Row> out = new ArrayList<>(s.windows.size());
        for (Win w : s.windows) out.add(RowFactory.create(w.start, w.end, outValue(w.agg), w.ts, s.finals.contains(w.start)));
        return out;
    }

    /**
     * A continued backfill's state of the key (a row {@code (key, windows)} in the replay's carried
     * layout): stored as this operator stores what it aggregated itself, with the key's timer, so
     * that its open windows go on and close when stream time passes them.
     */
    @Override
    public void handleInitialState(Row key, Row initial, TimerValues timerValues) {
        save(decodeCarried(initial.getList(1)), Long.MIN_VALUE);
    }

    /** The watermark, raised to the backfill's stream time when continuing one. */
    private long streamTimeAt(TimerValues timerValues) {
        return Math.max(timerValues.getCurrentWatermarkInMs(), spec.streamTimeFloor);
    }

    // -- the record loop --------------------------------------------------------------------------
    @Override
    public Iterator<Row> handleInputRows(Row key, Iterator<Row> rows, TimerValues timerValues) {
        watermark = timerValues.getCurrentWatermarkInMs();
        List<Rec> data = new ArrayList<>();
        while (rows.hasNext()) data.add(read(rows.next()));
        if (data.isEmpty()) return CollectionConverters.asScala(Collections.<Row>emptyIterator());
        data.sort(AggregateProcessor::compare);
        Object kcell = key.get(0);
        List<Row> out = new ArrayList<>();
        Windowing.KeyState st;
        Loaded loaded = null;
        Long runStreamTime = data.get(0).runStreamTime;
        int first = 0;
        if (spec.replay) {
            st = Windowing.KeyState.empty();
            while (first < data.size() && data.get(first).carried != null) st = decodeCarried(data.get(first++).carried);
        } else {
            loaded = load();
            st = new Windowing.KeyState(stored(new ArrayList<>(loaded.state.windows)), loaded.state.finals);
        }
        long streamTime = spec.replay ? timerValues.getCurrentWatermarkInMs() : streamTimeAt(timerValues);
        long floor = loaded == null ? -1 : loaded.floor;
        if (!spec.replay && spec.idleCloseMs > 0) {
            // the aggregation idle as of this micro-batch (L from the batches before it): its open
            // windows close before the key's records, which are then judged by the new floor
            long now = timerValues.getCurrentProcessingTimeInMs();
            long batchId = getHandle().getQueryInfo().getBatchId();
            channel.record(TaskContext.getPartitionId(), batchId, now);
            if (!st.openWindows().isEmpty() && now - loaded.lastRecordAt >= spec.idleCloseMs
                    && now - lastInputAt(loaded, batchId) >= spec.idleCloseMs) {
                Idle closed = close(out, kcell, st, floor, true);
                st = closed.state;
                floor = closed.floor;
            }
        }
        ChangeBuffer batch = !spec.replay && !spec.emitOnClose ? new ChangeBuffer(st.windows) : null;
        // replay: the record cache of the key's current source position, flushed at its last row
        // (Kafka's TopologyTestDriver commits once per source record); a repartitioned row alone
        ChangeBuffer pending = null;
        Rec pendingRec = null;
        for (int i = first; i < data.size(); i++) {
            Rec r = data.get(i);
            long storeTime, expiryTime;
            if (spec.replay) {  // the plan's clock: every input's stream time before the record
                Clock clock = Clock.of(windowing, r.timesBefore, r.input, r.ts, r.valueNull);
                streamTime = clock.streamTime;
                storeTime = clock.storeTime;
                expiryTime = clock.expiryTime;
            } else {
                storeTime = streamTime;
                streamTime = windowing.advanceStreamTime(streamTime, r.ts, r.valueNull);
                expiryTime = streamTime;
            }
            // after an idle close the key's records are judged by its floor when that is later
            long keyTime = floor >= 0 ? Math.max(streamTime, floor) : streamTime;
            Windowing.RecordStep step = windowing.recordStep(st, r.valueNull, r.x, r.input, r.ts, keyTime, storeTime,
                floor >= 0 ? Math.max(expiryTime, floor) : expiryTime, agg);
            if (step.step.dropped > 0) out.add(dropped(r, step.step.dropped));
            if (!spec.emitOnClose) {
                if (spec.replay) {
                    boolean alone = spec.repartitioned(r.input);
                    if (pending != null && (alone || pendingRec.pos != r.pos)) {
                        flush(out, kcell, pending);
                        pending = null;
                    }
                    if (alone) {
                        ChangeBuffer buffer = new ChangeBuffer(st.windows);
                        step.writeTo(buffer, r);
                        flush(out, kcell, buffer);
                    } else {
                        if (pending == null) pending = new ChangeBuffer(st.windows);
                        step.writeTo(pending, r);
                        pendingRec = r;
                    }
                } else {
                    step.writeTo(batch, r);
                }
            }
            st = step.state;
            if (spec.emitOnClose && !step.closed.isEmpty()) {
                if (spec.replay) pending(out, kcell, step.closed);
                else finals(out, kcell, step.closed, streamTime, r.pos, r.outPos);
            }
        }
        if (pending != null) flush(out, kcell, pending);
        if (spec.replay) {
            if (spec.emitOnClose) {
                pending(out, kcell, st.openWindows());
                st = windowing.closeStep(st, runStreamTime == null ? -1 : runStreamTime).state;
            }
            if (!st.windows.isEmpty()) {
                out.add(RowFactory.create(keyCell(kcell, new Win(0, 0, null, 0)), null, -1L, EMPTY, -1L, EMPTY, null,
                    CARRY, null, null, seq(encodeCarried(st))));
            }
        } else {
            if (!spec.emitOnClose) flush(out, kcell, batch);
            if (spec.idleCloseMs > 0) {
                save(st, loaded.timer, floor >= 0 && floor <= streamTime ? -1 : floor,
                    timerValues.getCurrentProcessingTimeInMs());
            } else {
                save(st, loaded.timer);
            }
        }
        return CollectionConverters.asScala(out.iterator());
    }

    @Override
    public Iterator<Row> handleExpiredTimer(Row key, TimerValues timerValues, ExpiredTimerInfo expiredTimerInfo) {
        watermark = timerValues.getCurrentWatermarkInMs();
        Loaded loaded = load();
        if (spec.idleCloseMs > 0) return idleTimer(key.get(0), loaded, timerValues, expiredTimerInfo);
        long streamTime = streamTimeAt(timerValues);
        Windowing.CloseStep close = windowing.closeStep(loaded.state, streamTime);
        List<Row> out = new ArrayList<>();
        if (spec.emitOnClose && !close.closed.isEmpty()) finals(out, key.get(0), close.closed, streamTime, -1, new long[0]);
        long fired = loaded.timer == expiredTimerInfo.getExpiryTimeInMs() ? Long.MIN_VALUE : loaded.timer;
        save(close.state, fired);
        return CollectionConverters.asScala(out.iterator());
    }

    /** {@code L} as of micro-batch {@code batchId}: the channel's, and at least the key's own last
     * record (or the {@code L} its timer last read). */
    private long lastInputAt(Loaded loaded, long batchId) {
        return Math.max(loaded.lastRecordAt, channel.lastInputBefore(batchId));
    }

    /** A key's windows and floor after an idle close. */
    private static final class Idle {
        final Windowing.KeyState state;
        final long floor;

        Idle(Windowing.KeyState state, long floor) {
            this.state = state;
            this.floor = floor;
        }
    }

    /** The key's windows the watermark has closed, then, the aggregation being {@code idle}, every
     * window still open at its new floor ({@link Windowing#idleFloor}). */
    private Idle close(List<Row> out, Object kcell, Windowing.KeyState st, long floor, boolean idle) {
        Windowing.CloseStep close = windowing.closeStep(st, watermark);
        finals(out, kcell, close.closed, watermark, -1, new long[0]);
        st = close.state;
        long f = idle ? windowing.idleFloor(st, watermark, floor) : floor;
        if (f != floor) {
            Windowing.CloseStep atFloor = windowing.closeStep(st, f);
            finals(out, kcell, atFloor.closed, watermark, -1, new long[0]);
            st = atFloor.state;
            floor = f;
        }
        return new Idle(st, floor);
    }

    /**
     * Idle close's processing-time timer ({@code IdleCloseAggregateProcessor.handleExpiredTimer}),
     * at the key's last record plus the idle close, a lower bound of the aggregation's deadline:
     * the windows the watermark has closed, then, the aggregation being idle ({@code L} from the
     * channel), every window still open at its new floor; else the timer moves to {@code L} plus
     * the idle close. A key whose state stays after a close is looked at again an idle close later.
     */
    private Iterator<Row> idleTimer(Object kcell, Loaded loaded, TimerValues timerValues, ExpiredTimerInfo expired) {
        long now = timerValues.getCurrentProcessingTimeInMs();
        long last = lastInputAt(loaded, getHandle().getQueryInfo().getBatchId());
        List<Row> out = new ArrayList<>();
        boolean idle = now - last >= spec.idleCloseMs;
        Idle closed = close(out, kcell, loaded.state, loaded.floor, idle);
        Windowing.KeyState st = closed.state;
        long floor = closed.floor;
        if (floor >= 0 && floor <= watermark) floor = -1;
        long fired = loaded.timer == expired.getExpiryTimeInMs() ? Long.MIN_VALUE : loaded.timer;
        save(st, fired, floor, idle ? now : last);
        return CollectionConverters.asScala(out.iterator());
    }

    @Override
    public void close() {
    }
}
