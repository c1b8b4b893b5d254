package io.streamsdsl.jvm;

import java.io.Serializable;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashSet;
import java.util.List;
import java.util.Set;

/**
 * A window kind's per-record rule and its close and expiry rules: the Java port of the Python
 * semantics core ({@code streamsdsl.semantics.windowing} and the window kinds), which stays the
 * reference. {@link #recordStep} is {@code record_step}, {@link #closeStep} is {@code close_step}.
 */
abstract class Windowing implements Serializable {
    private static final long serialVersionUID = 1L;

    /** A threshold no stream time reaches (unwindowed aggregation). */
    static final long NEVER = 1L << 62;

    static final Comparator<Win> BY_START = Comparator.comparingLong(w -> w.start);
    static final Comparator<Win> BY_END_START = Comparator.<Win>comparingLong(w -> w.end).thenComparingLong(w -> w.start);

    /** A record with a null value is dropped before it advances stream time (sliding windows, unwindowed). */
    boolean dropsNullValues() {
        return false;
    }

    /** The metric of a record's drops: a null value where the window kind skips one, else too late
     * (the Python kernel's {@code KernelStep.reason}). */
    String dropMetric(boolean valueNull) {
        return valueNull && dropsNullValues() ? Contract.DROPPED_NULL_VALUE : Contract.DROPPED;
    }

    abstract Step step(List<Win> windows, boolean valueNull, Long x, int input, long ts, long streamTime, Agg fns);

    /** In a cogroup whose inputs keep their own stream times, a window leaves the state once the
     * store's time, the greatest of the inputs', has expired it (the Python
     * {@code WindowingRules.store_time_expires_windows}: sessions; {@link Clock#storeClock}). */
    boolean storeTimeExpiresWindows() {
        return false;
    }

    /** In a cogroup whose inputs keep their own stream times, the record cache keeps a window
     * until every input's stream time has expired it (the Python
     * {@code WindowingRules.cache_keeps_expired_windows}: time and sliding windows; {@link Clock#storeClock}). */
    boolean cacheKeepsExpiredWindows() {
        return false;
    }

    /** {@link #step} given also the stream time before the record ({@code storeTime}), which only
     * uncached sessions read (what Kafka's store still returns). */
    Step step(List<Win> windows, boolean valueNull, Long x, int input, long ts, long streamTime, long storeTime, Agg fns) {
        return step(windows, valueNull, x, input, ts, streamTime, fns);
    }

    abstract long closeThreshold(Win w);

    long expiryThreshold(Win w) {
        return closeThreshold(w);
    }

    /** Order of on-close records within one stream-time step (before the record key). */
    abstract Comparator<Win> finalOrder();

    /** The final-order values of a window, appended to its on-close record's output position. */
    abstract long[] finalOrderOf(Win w);

    long advanceStreamTime(long streamTime, long ts, boolean valueNull) {
        if (valueNull && dropsNullValues()) return streamTime;
        return Math.max(streamTime, ts);
    }

    /** The store operations one record causes for one key. */
    static final class Step {
        final List<Win> windows;
        final List<Win> puts;
        final List<Win> deletes;
        final int dropped;

        Step(List<Win> windows, List<Win> puts, List<Win> deletes, int dropped) {
            this.windows = windows;
            this.puts = puts;
            this.deletes = deletes;
            this.dropped = dropped;
        }

        static Step dropped(List<Win> windows, int n) {
            return new Step(windows, List.of(), List.of(), n);
        }
    }

    /** One key's state: its stored windows and the starts of those already final. */
    static final class KeyState {
        final List<Win> windows;
        final Set<Long> finals;

        KeyState(List<Win> windows, Set<Long> finals) {
            this.windows = windows;
            this.finals = finals;
        }

        static KeyState empty() {
            return new KeyState(List.of(), Set.of());
        }

        List<Win> openWindows() {
            List<Win> out = new ArrayList<>();
            for (Win w : windows) if (!finals.contains(w.start)) out.add(w);
            return out;
        }
    }

    /** What stream time does to a key's state: {@code closed} (in final order) and what stays. */
    static final class CloseStep {
        final List<Win> closed;
        final KeyState state;

        CloseStep(List<Win> closed, KeyState state) {
            this.closed = closed;
            this.state = state;
        }
    }

    /** One record applied to one key: new state, store operations, drops, windows closed. */
    static final class RecordStep {
        final KeyState state;
        final Step step;
        final List<Win> closed;

        RecordStep(KeyState state, Step step, List<Win> closed) {
            this.state = state;
            this.step = step;
            this.closed = closed;
        }

        /** Deletes first, then puts; a put of a null aggregate is a delete, as Kafka's {@code put(key, null)}. */
        void writeTo(ChangeBuffer buffer, Object context) {
            for (Win w : step.deletes) buffer.delete(w, context);
            for (Win w : step.puts) {
                if (w.agg == null) buffer.delete(w, context);
                else buffer.put(w, context);
            }
        }
    }

    CloseStep closeStep(KeyState state, long streamTime) {
        return closeStep(state, streamTime, streamTime);
    }

    /** {@link #closeStep} where windows expire by {@code expiryTime} ({@code close_step}'s {@code expiry_time}). */
    CloseStep closeStep(KeyState state, long streamTime, long expiryTime) {
        Set<Long> finals = state.finals;
        List<Win> closed = new ArrayList<>();
        List<Win> kept = new ArrayList<>();
        for (Win w : state.windows) {
            if (streamTime > closeThreshold(w) && !finals.contains(w.start)) closed.add(w);
            if (expiryTime <= expiryThreshold(w)) kept.add(w);
        }
        if (closed.isEmpty() && kept.size() == state.windows.size()) return new CloseStep(List.of(), state);
        Set<Long> newFinals;
        if (!closed.isEmpty()) {
            closed.sort(finalOrder());
            Set<Long> done = new HashSet<>(finals);
            for (Win w : closed) done.add(w.start);
            newFinals = new HashSet<>();
            for (Win w : kept) if (done.contains(w.start)) newFinals.add(w.start);
        } else if (!finals.isEmpty()) {
            newFinals = new HashSet<>();
            for (Win w : kept) if (finals.contains(w.start)) newFinals.add(w.start);
        } else {
            newFinals = finals;
        }
        return new CloseStep(closed, new KeyState(kept, newFinals));
    }

    /**
     * {@code record_step}: the step does not see windows that {@code streamTime} has expired (a
     * key's state advances only with its records and timers, while Kafka's store stops returning
     * a window once stream time passes its retention); one not final yet still closes below.
     */
    RecordStep recordStep(KeyState state, boolean valueNull, Long x, int input, long ts, long streamTime, Agg fns) {
        return recordStep(state, valueNull, x, input, ts, streamTime, streamTime, fns);
    }

    /** {@link #recordStep} with the stream time before the record ({@code storeTime}). */
    RecordStep recordStep(KeyState state, boolean valueNull, Long x, int input, long ts, long streamTime, long storeTime,
                          Agg fns) {
        return recordStep(state, valueNull, x, input, ts, streamTime, storeTime, streamTime, fns);
    }

    /**
     * {@link #recordStep} where windows expire by {@code expiryTime} ({@code record_step}'s
     * {@code expiry_time}): a cogroup whose inputs keep their own stream times passes the least of
     * them, so that a window leaves the state only once every input's stream time expired it.
     */
    RecordStep recordStep(KeyState state, boolean valueNull, Long x, int input, long ts, long streamTime, long storeTime,
                          long expiryTime, Agg fns) {
        List<Win> expired = null;
        List<Win> live = state.windows;
        for (Win w : state.windows) {
            if (expiryTime > expiryThreshold(w)) {
                if (expired == null) expired = new ArrayList<>();
                expired.add(w);
            }
        }
        if (expired != null) {
            live = new ArrayList<>();
            for (Win w : state.windows) if (expiryTime <= expiryThreshold(w)) live.add(w);
        }
        Step step = step(live, valueNull, x, input, ts, streamTime, storeTime, fns);
        List<Win> after = step.windows;
        if (expired != null) {
            after = new ArrayList<>(expired);
            after.addAll(step.windows);
        }
        CloseStep close = closeStep(new KeyState(after, state.finals), streamTime, expiryTime);
        return new RecordStep(close.state, step, close.closed);
    }

    /**
     * streamsdsl's idle close ({@code idle_close_step}): every open window of an idle key closes as
     * at the first time past all their close thresholds, which becomes the key's floor (its own
     * stream time: its records are judged, its windows closed and expired by the later of it and
     * stream time). Returns that floor, or {@code floor} unchanged when no window is open; close
     * the state with {@link #closeStep} at it.
     */
    long idleFloor(KeyState state, long streamTime, long floor) {
        long f = Math.max(floor, streamTime);
        boolean open = false;
        for (Win w : state.windows) {
            if (!state.finals.contains(w.start)) {
                open = true;
                f = Math.max(f, closeThreshold(w) + 1);
            }
        }
        return open ? f : floor;
    }

    /** Timer: when each stored window next needs attention (close, or expiry once final). */
    long nextThreshold(KeyState state) {
        long min = NEVER;
        for (Win w : state.windows) {
            long t = state.finals.contains(w.start) ? expiryThreshold(w) : closeThreshold(w);
            if (t < min) min = t;
        }
        return min;
    }

    // -- the window kinds ------------------------------------------------------------------------

    /** Session windows ({@code KStreamSessionWindowAggregate}): [start, end], both inclusive. */
    static final class Session extends Windowing {
        private static final long serialVersionUID = 1L;

        @Override
        boolean storeTimeExpiresWindows() {
            return true;
        }

        final long gap;
        final long grace;
        /** The store has Kafka's record cache (the Python core's {@code SessionWindowing.cached}):
         * a session whose end equals the close time is still found; without it the store's
         * retention (gap + grace) already hides that session. */
        final boolean cached;

        Session(long gap, long grace) {
            this(gap, grace, true);
        }

        Session(long gap, long grace, boolean cached) {
            this.gap = gap;
            this.grace = grace;
            this.cached = cached;
        }

        @Override
        Step step(List<Win> windows, boolean valueNull, Long x, int input, long ts, long streamTime, Agg fns) {
            return step(windows, valueNull, x, input, ts, streamTime, streamTime, fns);
        }

        @Override
        Step step(List<Win> windows, boolean valueNull, Long x, int input, long ts, long streamTime, long storeTime,
                  Agg fns) {
            // the state's windows are kept in (end, start) order
            long closing = streamTime - grace - gap;
            // without the cache the store hides a session once end < storeTime - retention + 1
            long visible = cached ? closing : Math.max(closing, storeTime - grace - gap + 1);
            List<Win> found = new ArrayList<>(2);
            Long agg = fns.initializer();
            long start = ts, end = ts;
            for (Win s : windows) {
                if (s.end >= ts - gap && s.start <= ts + gap && s.end >= visible) {
                    found.add(s);
                    if (fns.hasMerger()) agg = fns.merge(agg, s.agg);
                    start = Math.min(start, s.start);
                    end = Math.max(end, s.end);
                }
            }
            if (end < closing) return Step.dropped(windows, 1);
            Win put = new Win(start, end, fns.aggregate(input, agg, valueNull ? null : x), end);
            List<Win> out = new ArrayList<>(windows.size() + 1);
            // a null aggregate is Kafka's put(session, null): the merged session is deleted, not stored
            boolean placed = put.agg == null;
            for (Win s : windows) {
                if (found.contains(s)) continue;
                // the put overwrites a hidden session of the same bounds (the store's key is the
                // key, end and start): one session stays, the new one
                if (visible > closing && s.start == start && s.end == end) continue;
                if (!placed && BY_END_START.compare(put, s) < 0) {
                    out.add(put);
                    placed = true;
                }
                out.add(s);
            }
            if (!placed) out.add(put);
            List<Win> deletes = (start != ts || end != ts) ? found : List.of();
            return new Step(out, List.of(put), deletes, 0);
        }

        @Override
        long closeThreshold(Win w) {
            return w.end + gap + grace;
        }

        @Override
        Comparator<Win> finalOrder() {
            return BY_END_START;
        }

        @Override
        long[] finalOrderOf(Win w) {
            return new long[] {w.end, w.start};
        }
    }

    /** Tumbling / hopping windows ({@code KStreamWindowAggregate}): [start, end). */
    static final class Time extends Windowing {
        private static final long serialVersionUID = 1L;

        @Override
        boolean cacheKeepsExpiredWindows() {
            return true;
        }

        final long size;
        final long advance;
        final long grace;

        Time(long size, long advance, long grace) {
            this.size = size;
            this.advance = advance;
            this.grace = grace;
        }

        @Override
        Step step(List<Win> windows, boolean valueNull, Long x, int input, long ts, long streamTime, Agg fns) {
            long closeTime = streamTime - grace;
            long first = (Math.max(0, ts - size + advance) / advance) * advance;
            List<Win> out = new ArrayList<>(windows);
            List<Win> puts = new ArrayList<>(2);
            int dropped = 0;
            for (long start = first; start <= ts; start += advance) {
                long end = start + size;
                if (end <= closeTime) {
                    dropped++;
                    continue;
                }
                int at = indexOfStart(out, start);
                Win old = at >= 0 ? out.get(at) : null;
                Long agg = fns.aggregate(input, old == null ? fns.initializer() : old.agg, valueNull ? null : x);
                Win put = new Win(start, end, agg, old == null ? ts : Math.max(ts, old.ts));
                if (agg == null) { // Kafka's put(window, null): the window is deleted, not stored
                    if (at >= 0) out.remove(at);
                } else if (at >= 0) {
                    out.set(at, put);
                } else {
                    out.add(-at - 1, put);
                }
                puts.add(put);
            }
            return new Step(out, puts, List.of(), dropped);
        }

        @Override
        long closeThreshold(Win w) {
            return w.end + grace - 1;
        }

        @Override
        Comparator<Win> finalOrder() {
            return BY_START;
        }

        @Override
        long[] finalOrderOf(Win w) {
            return new long[] {w.start};
        }
    }

    /** Binary search by start in a start-ordered list: the index, or {@code -(insertion point) - 1}. */
    static int indexOfStart(List<Win> windows, long start) {
        int lo = 0, hi = windows.size() - 1;
        while (lo <= hi) {
            int mid = (lo + hi) >>> 1;
            long s = windows.get(mid).start;
            if (s < start) lo = mid + 1;
            else if (s > start) hi = mid - 1;
            else return mid;
        }
        return -(lo + 1);
    }

    /** Unwindowed aggregation ({@code KStreamAggregate}): one "window" [0, 0] that never closes. */
    static final class Unwindowed extends Windowing {
        private static final long serialVersionUID = 1L;

        /** Kafka's {@code KStreamAggregate} skips a null value first (the Python {@code Unwindowed}). */
        @Override
        boolean dropsNullValues() {
            return true;
        }

        @Override
        Step step(List<Win> windows, boolean valueNull, Long x, int input, long ts, long streamTime, Agg fns) {
            if (valueNull) return Step.dropped(windows, 1);
            Win old = windows.isEmpty() ? null : windows.get(0);
            Long agg = fns.aggregate(input, old == null ? fns.initializer() : old.agg, x);
            Win put = new Win(0, 0, agg, old == null ? ts : Math.max(ts, old.ts));
            return new Step(List.of(put), List.of(put), List.of(), 0);
        }

        @Override
        long closeThreshold(Win w) {
            return NEVER;
        }

        @Override
        Comparator<Win> finalOrder() {
            return (a, b) -> 0;
        }

        @Override
        long[] finalOrderOf(Win w) {
            return new long[0];
        }
    }
}
