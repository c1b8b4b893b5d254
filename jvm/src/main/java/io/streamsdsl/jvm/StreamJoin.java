package io.streamsdsl.jvm;

import java.io.Serializable;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;

/**
 * The windowed stream–stream join ({@code KStream#join / leftJoin / outerJoin} with
 * {@code JoinWindows}, KIP-633's spurious-result fix): the Java port of the per-key steps of
 * {@code streamsdsl.semantics.stream_stream}, which stays the reference.
 * {@link #step} is {@code stream_join_step}, {@link #close} is {@code stream_join_close},
 * {@link #timerThreshold} is {@code stream_join_timer_threshold}.
 *
 * <p>A left record at {@code t} joins the right records of its key in {@code [t - before, t + after]}
 * (a right record the mirrored window), both bounds clamped at 0 and cut at what the other side's
 * store still returns ({@code otherStoreTime - retention + 1}); each match is forwarded as a pair
 * with timestamp {@code max(t, t')}, in the other side's store order (timestamp, then arrival).
 * A record is joined before it is buffered. A record of an outer side without a match is
 * null-joined at once when its window has closed (or without the fix), else held until stream time
 * passes {@link #holdThreshold}; a match of a held record drops every held record of that key, side
 * and timestamp. The values are opaque ({@code V}): the kernel forwards pairs, the joiner runs
 * afterwards.
 */
final class StreamJoin implements Serializable {
    private static final long serialVersionUID = 1L;

    static final int LEFT = 0;
    static final int RIGHT = 1;
    /** A drop reason (the Python {@code DROP_NULL_KEY} / {@code DROP_NULL_VALUE}). */
    static final String NULL_KEY = "null_key";
    static final String NULL_VALUE = "null_value";
    /** {@link #timerThreshold} of an empty state. */
    static final long NONE = Long.MAX_VALUE;

    enum Kind { INNER, LEFT, OUTER }

    final Kind kind;
    final long before;
    final long after;
    final long grace;
    final boolean spuriousResultFix;

    StreamJoin(Kind kind, long before, long after, long grace, boolean spuriousResultFix) {
        if (before + after < 0) {
            throw new IllegalArgumentException("'before' + 'after' must be >= 0 ms (got " + before + " + " + after + ")");
        }
        if (grace < 0) throw new IllegalArgumentException("'grace' must be >= 0 ms (got " + grace + ")");
        this.kind = kind;
        this.before = before;
        this.after = after;
        this.grace = grace;
        this.spuriousResultFix = spuriousResultFix;
    }

    /** {@code kind} as the Python spec names it: inner, left or outer. */
    static Kind kind(String name) {
        return Kind.valueOf(name.toUpperCase(java.util.Locale.ROOT));
    }

    /** Does a record of {@code side} without a match produce a null-join? */
    boolean outerSide(int side) {
        return kind == Kind.OUTER || (kind == Kind.LEFT && side == LEFT);
    }

    /** Are non-joined records held until their window closes? */
    boolean holds() {
        return kind != Kind.INNER && spuriousResultFix;
    }

    /** How long a side's buffer keeps a record: {@code before + after + grace} ms. */
    long retention() {
        return before + after + grace;
    }

    /** A held record of {@code side} at {@code ts} is emitted at the first stream time greater than this. */
    long holdThreshold(long ts, int side) {
        return ts + (side == LEFT ? after : before) + grace;
    }

    /** A buffered record. */
    record Rec<V>(long ts, V value) {
    }

    /** A held (not yet joined) record of {@code side}. */
    record Held<V>(long ts, int side, V value) {
    }

    /** A forwarded record: the joiner's two arguments ({@code null} on a null-join's missing side) and its timestamp. */
    record Pair<V>(V left, V right, long ts) {
    }

    /** One key's state: each side's buffer ordered by (timestamp, arrival), the held records in arrival order. */
    static final class KeyState<V> {
        final ArrayList<Rec<V>> left = new ArrayList<>();
        final ArrayList<Rec<V>> right = new ArrayList<>();
        final ArrayList<Held<V>> held = new ArrayList<>();

        List<Rec<V>> buffer(int side) {
            return side == LEFT ? left : right;
        }

        boolean isEmpty() {
            return left.isEmpty() && right.isEmpty() && held.isEmpty();
        }

        /** Buffer a record after every record of its side with a timestamp not greater than its own. */
        void buffer(int side, long ts, V value) {
            ArrayList<Rec<V>> buf = side == LEFT ? left : right;
            int at = buf.size();
            if (at > 0 && buf.get(at - 1).ts > ts) at = firstAtOrAfter(buf, ts + 1);
            buf.add(at, new Rec<>(ts, value));
        }

        /** Hold a record (a state being restored, or a record without a match). */
        void hold(long ts, int side, V value) {
            held.add(new Held<>(ts, side, value));
        }

        @Override
        public String toString() {
            return "KeyState(left=" + left + ", right=" + right + ", held=" + held + ")";
        }
    }

    /** The index of the first record with a timestamp {@code >= ts} (the buffer's size if none). */
    static <V> int firstAtOrAfter(List<Rec<V>> buf, long ts) {
        int lo = 0;
        int hi = buf.size();
        while (lo < hi) {
            int mid = (lo + hi) >>> 1;
            if (buf.get(mid).ts < ts) lo = mid + 1;
            else hi = mid;
        }
        return lo;
    }

    /** One record's results: the forwarded pairs in order, whether it was held, its drop reason ({@code null}: kept). */
    record Step<V>(List<Pair<V>> outputs, boolean held, String dropped) {
    }

    private static <V> Pair<V> nullJoin(int side, V value, long ts) {
        return side == LEFT ? new Pair<>(value, null, ts) : new Pair<>(null, value, ts);
    }

    /**
     * Join one record of {@code side} with its key's {@code state} (updated in place; ignored for a
     * null key or value). {@code streamTime} already includes {@code ts}; {@code otherStoreTime} is
     * the greatest timestamp the other side's store holds (Kafka's cut-off; the stream time when
     * the host knows no other). Emitting expired held records is not part of this step ({@link #close}).
     */
    <V> Step<V> step(KeyState<V> state, int side, boolean keyNull, V value, long ts, long streamTime,
                     long otherStoreTime) {
        if (keyNull || value == null) {
            if (keyNull && value != null && outerSide(side)) return new Step<>(List.of(nullJoin(side, value, ts)), false, null);
            return new Step<>(List.of(), false, keyNull ? NULL_KEY : NULL_VALUE);
        }
        long b = side == LEFT ? before : after;
        long a = side == LEFT ? after : before;
        long timeFrom = Math.max(0, ts - b);
        long timeTo = Math.max(0, ts + a);
        long lo = Math.max(timeFrom, otherStoreTime - retention() + 1);
        int other = 1 - side;
        List<Rec<V>> buf = state.buffer(other);
        List<Pair<V>> outputs = new ArrayList<>();
        boolean matched = false;
        for (int i = firstAtOrAfter(buf, lo); i < buf.size(); i++) {
            Rec<V> r = buf.get(i);
            if (r.ts > timeTo) break;
            matched = true;
            if (!state.held.isEmpty()) state.held.removeIf(h -> h.ts == r.ts && h.side == other);
            long outTs = Math.max(ts, r.ts);
            outputs.add(side == LEFT ? new Pair<>(value, r.value, outTs) : new Pair<>(r.value, value, outTs));
        }
        boolean holding = false;
        if (!matched && outerSide(side)) {
            if (!holds() || timeTo < streamTime) {
                outputs.add(nullJoin(side, value, ts));
            } else {
                state.hold(ts, side, value);
                holding = true;
            }
        }
        state.buffer(side, ts, value);
        return new Step<>(outputs, holding, null);
    }

    /** Kafka's order of held records emitted together: timestamp, right before left (then arrival: a stable sort). */
    static final Comparator<Held<?>> HELD_ORDER =
        Comparator.<Held<?>>comparingLong(h -> h.ts).thenComparingInt(h -> h.side == RIGHT ? 0 : 1);

    /**
     * Stream time {@code streamTime} reached for one key: its expired held records leave the state
     * and are returned in Kafka's order (to be forwarded as null-joins with their own timestamps),
     * and the buffered records no read returns any more (older than {@code storeTime - retention + 1})
     * are dropped, each side cut at its store time.
     */
    <V> List<Held<V>> close(KeyState<V> state, long streamTime, long leftStoreTime, long rightStoreTime) {
        List<Held<V>> expired = List.of();
        if (!state.held.isEmpty()) {
            List<Held<V>> keep = new ArrayList<>(state.held.size());
            for (Held<V> h : state.held) {
                if (holdThreshold(h.ts, h.side) < streamTime) {
                    if (expired.isEmpty()) expired = new ArrayList<>();
                    expired.add(h);
                } else {
                    keep.add(h);
                }
            }
            if (!expired.isEmpty()) {
                expired.sort(HELD_ORDER);
                state.held.clear();
                state.held.addAll(keep);
            }
        }
        prune(state.left, leftStoreTime - retention() + 1);
        prune(state.right, rightStoreTime - retention() + 1);
        return expired;
    }

    /** {@link #close} with both store times at {@code streamTime}. */
    <V> List<Held<V>> close(KeyState<V> state, long streamTime) {
        return close(state, streamTime, streamTime, streamTime);
    }

    private static <V> void prune(ArrayList<Rec<V>> buf, long cut) {
        int n = firstAtOrAfter(buf, cut);
        if (n > 0) buf.subList(0, n).clear();
    }

    /** When the key next needs {@link #close}: at the first stream time greater than this (the
     * earliest held-record threshold or buffer expiry); {@link #NONE} when the state is empty. */
    <V> long timerThreshold(KeyState<V> state) {
        long t = NONE;
        for (Held<V> h : state.held) t = Math.min(t, holdThreshold(h.ts, h.side));
        if (!state.left.isEmpty()) t = Math.min(t, state.left.get(0).ts + retention() - 1);
        if (!state.right.isEmpty()) t = Math.min(t, state.right.get(0).ts + retention() - 1);
        return t;
    }
}
