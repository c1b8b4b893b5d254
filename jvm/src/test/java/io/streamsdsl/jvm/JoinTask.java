package io.streamsdsl.jvm;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * A stream–stream join over all its keys as Kafka Streams runs it in one task, on top of
 * {@link StreamJoin}'s per-key steps: the Java twin of the Python {@code StreamJoinKernel} without
 * a clock (the direct engine; {@code stream_join_reference_run}): one shared stream time, per-side
 * store times, and the shared outer store's scan on every in-order record, skipped while
 * {@code minTime + after(processing side) + grace >= streamTime}, ordered (timestamp, right before
 * left, key bytes), stopping once both sides met an open record, {@code minTime} left at the last
 * record looked at ({@code KStreamKStreamJoin.emitNonJoinedOuterRecords}). Keys are strings
 * ({@code null}: a null key); what the unit tests and {@link JoinReplay} run.
 */
final class JoinTask {
    /** A forwarded record: its key, the joiner's two arguments and its timestamp. */
    record Out(String key, String left, String right, long ts) {
        @Override
        public String toString() {
            return key + ":" + left + "+" + right + "@" + ts;
        }
    }

    /** One record's results: the scan's null-joins first, then the record's own; its drop reason. */
    record Result(List<Out> outputs, String dropped) {
    }

    final StreamJoin join;
    final Map<String, StreamJoin.KeyState<String>> states = new LinkedHashMap<>();
    final long[] storeTime = {-1, -1};
    long streamTime = -1;
    long minTime = Long.MAX_VALUE;

    JoinTask(StreamJoin join) {
        this.join = join;
    }

    Result process(int side, String key, String value, long ts) {
        streamTime = Math.max(streamTime, ts);
        List<Out> out = new ArrayList<>();
        if (key == null || value == null) {
            StreamJoin.Step<String> step = join.step(null, side, key == null, value, ts, streamTime, streamTime);
            for (StreamJoin.Pair<String> p : step.outputs()) out.add(new Out(key, p.left(), p.right(), p.ts()));
            return new Result(out, step.dropped());
        }
        if (join.holds() && ts == streamTime) {
            long joinAfter = side == StreamJoin.LEFT ? join.after : join.before;
            if (minTime != Long.MAX_VALUE && minTime < streamTime - joinAfter - join.grace) minTime = scan(out);
        }
        StreamJoin.KeyState<String> state = states.computeIfAbsent(key, k -> new StreamJoin.KeyState<>());
        StreamJoin.Step<String> step = join.step(state, side, false, value, ts, streamTime, storeTime[1 - side]);
        for (StreamJoin.Pair<String> p : step.outputs()) out.add(new Out(key, p.left(), p.right(), p.ts()));
        if (step.held()) minTime = Math.min(minTime, ts);
        storeTime[side] = Math.max(storeTime[side], ts);
        return new Result(out, null);
    }

    private record Entry(long ts, int rank, byte[] key, int index, String k, StreamJoin.Held<String> held) {
    }

    private static final Comparator<Entry> SCAN_ORDER = Comparator.comparingLong(Entry::ts)
        .thenComparingInt(Entry::rank).thenComparing(Entry::key, Arrays::compareUnsigned).thenComparingInt(Entry::index);

    /** One scan of the shared outer store; returns the new {@code minTime}. */
    private long scan(List<Out> out) {
        List<Entry> entries = new ArrayList<>();
        for (Map.Entry<String, StreamJoin.KeyState<String>> e : states.entrySet()) {
            List<StreamJoin.Held<String>> held = e.getValue().held;
            for (int i = 0; i < held.size(); i++) {
                StreamJoin.Held<String> h = held.get(i);
                entries.add(new Entry(h.ts(), h.side() == StreamJoin.RIGHT ? 0 : 1,
                    e.getKey().getBytes(StandardCharsets.UTF_8), i, e.getKey(), h));
            }
        }
        entries.sort(SCAN_ORDER);
        long min = Long.MAX_VALUE;
        boolean[] open = new boolean[2];
        List<Entry> emitted = new ArrayList<>();
        for (Entry e : entries) {
            min = e.ts;
            if (open[0] && open[1]) break;
            if (join.holdThreshold(e.ts, e.held.side()) >= streamTime) {
                open[e.held.side()] = true;
                continue;
            }
            StreamJoin.Held<String> h = e.held;
            out.add(h.side() == StreamJoin.LEFT ? new Out(e.k, h.value(), null, h.ts()) : new Out(e.k, null, h.value(), h.ts()));
            emitted.add(e);
        }
        for (Entry e : emitted) states.get(e.k).held.remove(e.held);
        return min;
    }
}
