package io.streamsdsl.jvm;

import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;

/**
 * Sliding windows (KIP-450, {@code KStreamSlidingWindowAggregate}): the Java port of
 * {@code streamsdsl.semantics.sliding} (processReverse and processEarly, Kafka's built-in store
 * path), quirks included. Windows are [start, end], both inclusive, end = start + d.
 */
final class Sliding extends Windowing {
    private static final long serialVersionUID = 1L;
    final long d;
    final long grace;

    Sliding(long d, long grace) {
        this.d = d;
        this.grace = grace;
    }

    @Override
    boolean dropsNullValues() {
        return true;
    }

    @Override
    boolean cacheKeepsExpiredWindows() {
        return true;
    }

    /** Kafka's ValueAndTimestamp; {@code null} where Kafka has null (a null aggregate). */
    private record VaT(Long agg, long ts) {
    }

    private static VaT vat(Long agg, long ts) {
        return agg == null ? null : new VaT(agg, ts);
    }

    /** One key's window store while one record is applied. */
    private final class Store {
        final long closeTime;
        final Long x;
        final int input;
        final long ts;
        final Agg fns;
        final TreeMap<Long, Win> byStart = new TreeMap<>();
        final List<Win> puts = new ArrayList<>();
        int dropped;

        Store(long closeTime, Long x, int input, long ts, Agg fns, List<Win> windows) {
            this.closeTime = closeTime;
            this.x = x;
            this.input = input;
            this.ts = ts;
            this.fns = fns;
            for (Win w : windows) byStart.put(w.start, w);
        }

        List<Win> fetch(long lo, long hi) {
            return lo > hi ? List.of() : new ArrayList<>(byStart.subMap(lo, true, hi, true).values());
        }

        void put(long start, Long agg, long wts) {
            Win w = new Win(start, start + d, agg, wts);
            puts.add(w);
            if (agg == null) byStart.remove(start);
            else byStart.put(start, w);
        }

        void update(long start, VaT v) {
            if (start + d < closeTime) {
                dropped++;
                return;
            }
            Long old = v == null ? null : v.agg;
            Long agg = fns.aggregate(input, old, x);
            put(start, agg, v == null ? ts : Math.max(ts, v.ts));
        }

        void updateStored(Win w) {
            update(w.start, new VaT(w.agg, w.ts));
        }

        void createPreviousRight(long start) {
            update(start, vat(fns.initializer(), ts));
        }

        void createCurrentRight(Win right) {
            put(ts + 1, right.agg, right.ts);
        }
    }

    private static boolean rightNotEmpty(Win right, long ts) {
        return right != null && right.ts > ts;
    }

    private final class Scan {
        final Set<Long> startTimes = new HashSet<>();
        Win left;
        Win right;
        boolean leftCreated;
        boolean rightCreated;
        Long previousTs;

        void createWindows(Store store) {
            long ts = store.ts;
            if (previousTs != null) {
                long start = previousTs + 1;
                if (!startTimes.contains(start) && start + d >= ts) store.createPreviousRight(start);
            }
            if (!leftCreated) {
                VaT seed;
                if (previousTs != null && ts - d <= previousTs) seed = vat(left.agg, ts);
                else seed = vat(store.fns.initializer(), ts);
                store.update(ts - d, seed);
            }
            if (!rightCreated && rightNotEmpty(right, ts)) store.createCurrentRight(right);
        }
    }

    private void processReverse(Store store) {
        long ts = store.ts;
        Scan scan = new Scan();
        List<Win> fetched = store.fetch(Math.max(0, ts - 2 * d), ts + 1);
        for (int i = fetched.size() - 1; i >= 0; i--) {
            Win w = fetched.get(i);
            scan.startTimes.add(w.start);
            long end = w.start + d;
            if (w.start == ts + 1) {
                scan.rightCreated = true;
            } else if (end > ts) {
                if (scan.right == null) scan.right = w;
                store.updateStored(w);
            } else if (end == ts) {
                scan.leftCreated = true;
                store.updateStored(w);
                if (w.ts < ts) scan.previousTs = w.ts;
                else return;
            } else {
                scan.left = w;
                scan.previousTs = w.ts;
                break;
            }
        }
        scan.createWindows(store);
    }

    private void processEarly(Store store) {
        long ts = store.ts;
        Set<Long> startTimes = new HashSet<>();
        Win combined = null;
        Win right = null;
        boolean rightCreated = false;
        Long previousTs = null;
        for (Win w : store.fetch(0, ts + 1)) {
            startTimes.add(w.start);
            if (w.start == 0) {
                combined = w;
                if (w.ts < ts) previousTs = w.ts;
            } else if (w.start <= ts) {
                right = w;
                store.updateStored(w);
            } else {
                rightCreated = true;
            }
        }
        if (right == null && combined != null && combined.ts > ts) right = combined;
        if (!rightCreated && rightNotEmpty(right, ts)) store.createCurrentRight(right);
        if (previousTs != null && !startTimes.contains(previousTs + 1)) store.createPreviousRight(previousTs + 1);
        if (combined == null) store.update(0, vat(store.fns.initializer(), ts));
        else store.updateStored(combined);
    }

    @Override
    Step step(List<Win> windows, boolean valueNull, Long x, int input, long ts, long streamTime, Agg fns) {
        long closeTime = streamTime - grace;
        if (valueNull || ts + d < closeTime) return Step.dropped(windows, 1);
        Store store = new Store(closeTime, x, input, ts, fns, windows);
        if (ts < d) processEarly(store);
        else processReverse(store);
        List<Win> out = new ArrayList<>(store.byStart.size());
        for (Map.Entry<Long, Win> e : store.byStart.entrySet()) out.add(e.getValue());
        return new Step(out, store.puts, List.of(), store.dropped);
    }

    @Override
    long closeThreshold(Win w) {
        return w.end + grace;
    }

    @Override
    long expiryThreshold(Win w) {
        return w.end + grace + 2 * d;
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
