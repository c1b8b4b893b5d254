package io.streamsdsl.jvm;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/**
 * Sliding windows on the JVM (Kafka Streams' KStreamSlidingWindowAggregate, KIP-450), the cases
 * the Python core's tests pin down (tests/test_semantics_sliding.py, from Kafka's
 * KStreamSlidingWindowAggregateTest): a record's left and right windows, an out-of-order record,
 * early records, late drops, null values, close and expiry. Where Kafka's test concatenates the
 * values ("0+1+3"), {@link #MEMBERS} sums a bit per value (record value v adds 2^(v-1)), so each
 * aggregate names exactly the records its window holds.
 */
class SlidingWindowingTest {
    private static final Agg COUNT = new Agg(false, false, new Agg.Op[] {Agg.Op.COUNT}, Agg.Merge.ADD, "test");
    private static final Agg MEMBERS = new Agg(false, false, new Agg.Op[] {Agg.Op.SUM}, Agg.Merge.ADD, "test");

    /** The bit of record value {@code v} in a {@link #MEMBERS} aggregate. */
    private static long bit(long v) {
        return 1L << (v - 1);
    }

    /** (start, end, members, ts) of each put of each record of one key, {@code records} as (value, ts)
     * pairs, stream time the greatest timestamp so far; windows leave the state at expiry. */
    private static List<List<List<Long>>> puts(Sliding w, long[][] records) {
        Windowing.KeyState state = Windowing.KeyState.empty();
        long streamTime = -1;
        List<List<List<Long>>> out = new ArrayList<>();
        for (long[] r : records) {
            streamTime = Math.max(streamTime, r[1]);
            Windowing.RecordStep step = w.recordStep(state, false, bit(r[0]), 0, r[1], streamTime, MEMBERS);
            out.add(rows(step.step.puts));
            state = step.state;
        }
        return out;
    }

    /** The windows emitted on close, by key then start (Kafka's comparator), as (key, start, members, ts):
     * {@code records} as (key, value, ts), one stream time for all keys. */
    private static List<List<Object>> onClose(Sliding w, Object[][] records) {
        Map<String, Windowing.KeyState> states = new LinkedHashMap<>();
        long streamTime = -1;
        List<List<Object>> out = new ArrayList<>();
        for (Object[] r : records) {
            String key = (String) r[0];
            long ts = ((Number) r[2]).longValue();
            streamTime = Math.max(streamTime, ts);
            Windowing.RecordStep step = w.recordStep(states.getOrDefault(key, Windowing.KeyState.empty()), false,
                bit(((Number) r[1]).longValue()), 0, ts, streamTime, MEMBERS);
            states.put(key, step.state);
            for (Win x : step.closed) out.add(List.of(key, x.start, x.agg, x.ts));
            for (Map.Entry<String, Windowing.KeyState> e : states.entrySet()) {
                if (e.getKey().equals(key)) continue;
                Windowing.CloseStep close = w.closeStep(e.getValue(), streamTime);
                e.setValue(close.state);
                for (Win x : close.closed) out.add(List.of(e.getKey(), x.start, x.agg, x.ts));
            }
        }
        out.sort((a, b) -> {
            int c = ((String) a.get(0)).compareTo((String) b.get(0));
            return c != 0 ? c : Long.compare((Long) a.get(1), (Long) b.get(1));
        });
        return out;
    }

    /** (start, end, count, ts) of each window, in the order given. */
    private static List<List<Long>> rows(List<Win> windows) {
        return windows.stream().map(w -> List.of(w.start, w.end, w.agg, w.ts)).toList();
    }

    private static Windowing.RecordStep record(Sliding w, Windowing.KeyState state, long ts, long streamTime) {
        return w.recordStep(state, false, null, 0, ts, streamTime, COUNT);
    }

    @Test
    void aRecordCreatesThePreviousRecordsRightWindowThenItsOwnLeftWindow() {
        // A@10 then A@14 (d = 10): [11, 21] (A@10's right window) holds only A@14; A@14's left
        // window [4, 14] holds both
        Sliding w = new Sliding(10, 100);
        Windowing.RecordStep first = record(w, Windowing.KeyState.empty(), 10, 10);
        assertEquals(List.of(List.of(0L, 10L, 1L, 10L)), rows(first.step.puts));
        Windowing.RecordStep second = record(w, first.state, 14, 14);
        assertEquals(List.of(List.of(11L, 21L, 1L, 14L), List.of(4L, 14L, 2L, 14L)), rows(second.step.puts));
        assertEquals(List.of(List.of(0L, 10L), List.of(4L, 14L), List.of(11L, 21L)),
            second.state.windows.stream().map(x -> List.of(x.start, x.end)).toList());
    }

    @Test
    void anOutOfOrderRecordUpdatesTheWindowsItFallsInAndCreatesItsOwn() {
        // a@100, b@106, then c@103: c updates [101, 111] and [96, 106] (highest start first),
        // creates its left window [93, 103] from [90, 100] and its right window [104, 114], a
        // copy of [101, 111] as it was before c
        Sliding w = new Sliding(10, 100);
        Windowing.RecordStep a = record(w, Windowing.KeyState.empty(), 100, 100);
        Windowing.RecordStep b = record(w, a.state, 106, 106);
        assertEquals(List.of(List.of(101L, 111L, 1L, 106L), List.of(96L, 106L, 2L, 106L)), rows(b.step.puts));
        Windowing.RecordStep c = record(w, b.state, 103, 106);
        assertEquals(List.of(List.of(101L, 111L, 2L, 106L), List.of(96L, 106L, 3L, 106L),
            List.of(93L, 103L, 2L, 103L), List.of(104L, 114L, 1L, 106L)), rows(c.step.puts));
    }

    @Test
    void earlyRecordsShareTheFirstWindow() {
        // testEarlyRecordsSmallInput's start (d = 50, grace 0): records before d fall in [0, 50]
        Sliding w = new Sliding(50, 0);
        Windowing.KeyState state = Windowing.KeyState.empty();
        long streamTime = -1;
        for (long ts : new long[] {0, 5, 6, 3}) {
            streamTime = Math.max(streamTime, ts);
            state = record(w, state, ts, streamTime).state;
        }
        Win first = state.windows.stream().filter(x -> x.start == 0).findFirst().orElseThrow();
        assertEquals(List.of(0L, 50L, 4L, 6L), List.of(first.start, first.end, first.agg, first.ts));
    }

    @Test
    void aRecordTooLateForEveryWindowIsDroppedWhole() {
        // d = 10, grace 5: at stream time 16 a record at 0 (0 + 10 < 16 - 5) writes nothing
        Sliding w = new Sliding(10, 5);
        Windowing.RecordStep a = record(w, Windowing.KeyState.empty(), 10, 10);
        Windowing.RecordStep b = record(w, a.state, 14, 14);
        Windowing.RecordStep late = record(w, b.state, 0, 16);
        assertEquals(1, late.step.dropped);
        assertEquals(List.of(), late.step.puts);
    }

    @Test
    void aNullValueIsDroppedBeforeItAdvancesStreamTime() {
        Sliding w = new Sliding(10, 5);
        assertEquals(7, w.advanceStreamTime(7, 20, true));
        assertEquals(20, w.advanceStreamTime(7, 20, false));
        Windowing.RecordStep dropped = w.recordStep(Windowing.KeyState.empty(), true, null, 0, 20, 7, COUNT);
        assertEquals(1, dropped.step.dropped);
        assertEquals(0, dropped.state.windows.size());
    }

    @Test
    void aWindowClosesAfterEndPlusGraceAndExpiresTwoTimeDifferencesLater() {
        Sliding w = new Sliding(10, 5);
        Win window = new Win(4, 14, 2L, 14);
        assertEquals(19, w.closeThreshold(window));
        assertEquals(39, w.expiryThreshold(window));
    }

    @Test
    void smallInputWritesThePreviousRightWindowThenTheWindowsItFallsInThenItsLeftWindow() {
        // testAggregateSmallInput (d = 10, grace 5): every put of every record, in Kafka's order
        long[][] records = {{1, 10}, {2, 10}, {3, 14}, {4, 15}, {5, 20}, {6, 22}, {7, 30}};
        assertEquals(List.of(
            List.of(List.of(0L, 10L, 1L, 10L)),
            List.of(List.of(0L, 10L, 3L, 10L)),
            List.of(List.of(11L, 21L, 4L, 14L), List.of(4L, 14L, 7L, 14L)),
            List.of(List.of(11L, 21L, 12L, 15L), List.of(15L, 25L, 8L, 15L), List.of(5L, 15L, 15L, 15L)),
            List.of(List.of(15L, 25L, 24L, 20L), List.of(11L, 21L, 28L, 20L), List.of(16L, 26L, 16L, 20L),
                List.of(10L, 20L, 31L, 20L)),
            List.of(List.of(16L, 26L, 48L, 22L), List.of(15L, 25L, 56L, 22L), List.of(21L, 31L, 32L, 22L),
                List.of(12L, 22L, 60L, 22L)),
            List.of(List.of(21L, 31L, 96L, 30L), List.of(23L, 33L, 64L, 30L), List.of(20L, 30L, 112L, 30L))),
            puts(new Sliding(10, 5), records));
    }

    @Test
    void aLeftWindowStartsFromThePreviousLeftWindowWhenItHoldsThePreviousRecord() {
        // d = 10: the record at 20's left window [10, 20] holds the record at 10 (its left window
        // [0, 10] seeds it); the record at 31's does not hold the record at 20: it starts from the
        // initializer, and puts [21, 31] twice (once as the record at 20's right window), as Kafka does
        long[][] records = {{1, 10}, {2, 20}, {3, 31}};
        assertEquals(List.of(
            List.of(List.of(0L, 10L, 1L, 10L)),
            List.of(List.of(11L, 21L, 2L, 20L), List.of(10L, 20L, 3L, 20L)),
            List.of(List.of(21L, 31L, 4L, 31L), List.of(21L, 31L, 4L, 31L))),
            puts(new Sliding(10, 5), records));
    }

    @Test
    void anEarlyRecordWritesTheWindowsItFallsInItsRightWindowThePreviousRightWindowThenTheFirst() {
        // processEarly (d = 50, grace 0): values 1..4 at 0, 5, 6, then 3
        long[][] records = {{1, 0}, {2, 5}, {3, 6}, {4, 3}};
        assertEquals(List.of(
            List.of(List.of(0L, 50L, 1L, 0L)),
            List.of(List.of(1L, 51L, 2L, 5L), List.of(0L, 50L, 3L, 5L)),
            List.of(List.of(1L, 51L, 6L, 6L), List.of(6L, 56L, 4L, 6L), List.of(0L, 50L, 7L, 6L)),
            List.of(List.of(1L, 51L, 14L, 6L), List.of(4L, 54L, 6L, 6L), List.of(0L, 50L, 15L, 6L))),
            puts(new Sliding(50, 0), records));
    }

    @Test
    void aRecordPartlyLateCountsADropForEachClosedWindowItWouldWrite() {
        // shouldLogAndMeterWhenSkippingExpiredWindowByGrace (d = 10, grace 90): at stream time 200
        // the records at 100..105 still write their right windows, their left windows are closed
        // (one drop each), the record at 15 is dropped whole
        Sliding w = new Sliding(10, 90);
        long[][] records = {{100, 200}, {0, 100}, {1, 101}, {2, 102}, {3, 103}, {4, 104}, {5, 105}, {6, 15},
            {101, 300}, {102, 400}};
        Windowing.KeyState state = Windowing.KeyState.empty();
        long streamTime = -1;
        List<Integer> dropped = new ArrayList<>();
        List<List<Long>> written = new ArrayList<>();
        for (long[] r : records) {
            streamTime = Math.max(streamTime, r[1]);
            Windowing.RecordStep step = record(w, state, r[1], streamTime);
            dropped.add(step.step.dropped);
            written.addAll(rows(step.step.puts));
            state = step.state;
        }
        assertEquals(List.of(0, 1, 1, 1, 1, 1, 1, 1, 0, 0), dropped);
        assertEquals(List.of(List.of(190L, 200L, 1L, 200L), List.of(290L, 300L, 1L, 300L),
            List.of(390L, 400L, 1L, 400L)), written);
    }

    @Test
    void aClosedWindowIsStillReadForTheDropCount() {
        // oracle case ba17b223b48a (d = 3, grace 2): 12, 19, then 14 at stream time 19 reads [9, 12]
        // (closed at 15): [13, 16] and [11, 14] are both closed, two drops, nothing written
        Sliding w = new Sliding(3, 2);
        Windowing.KeyState state = Windowing.KeyState.empty();
        List<Integer> dropped = new ArrayList<>();
        Windowing.RecordStep step = null;
        long streamTime = -1;
        for (long ts : new long[] {12, 19, 14}) {
            streamTime = Math.max(streamTime, ts);
            step = record(w, state, ts, streamTime);
            dropped.add(step.step.dropped);
            state = step.state;
        }
        assertEquals(List.of(0, 0, 2), dropped);
        assertEquals(List.of(), step.step.puts);
        assertEquals(List.of(List.of(9L, 12L), List.of(16L, 19L)),
            state.windows.stream().map(x -> List.of(x.start, x.end)).toList());
    }

    @Test
    void aPartlyLateRecordsRightWindowCanHoldARecordOutsideItsRange() {
        // Kafka's quirk, ported as is (d = 2, grace 10, no pruning): c at 1 is too late for [0, 2]
        // but gets a at 0's right window [1, 3]; d at 2 does not create c's right window, as
        // [0, 2] (ts 0) does not show c; so e at 1 copies [1, 3], which holds c, into [2, 4]
        Sliding w = new Sliding(2, 10);
        List<Win> windows = List.of();
        long streamTime = -1;
        Windowing.Step step = null;
        List<Integer> dropped = new ArrayList<>();
        long[][] records = {{1, 0}, {2, 13}, {3, 1}, {4, 2}, {5, 1}};
        for (long[] r : records) {
            streamTime = Math.max(streamTime, r[1]);
            step = w.step(windows, false, bit(r[0]), 0, r[1], streamTime, MEMBERS);
            dropped.add(step.dropped);
            windows = step.windows;
        }
        assertEquals(List.of(0, 0, 1, 1, 1), dropped);
        long cde = bit(3) + bit(4) + bit(5), cd = bit(3) + bit(4);
        assertEquals(List.of(List.of(1L, 3L, cde, 2L), List.of(2L, 4L, cd, 2L)), rows(step.puts));
    }

    @Test
    void noGraceOnCloseEmitsEachWindowOnceWithTheRecordsItHeldThen() {
        // testNoGracePeriodLargeInput (d = 10, grace 0), emitted on close
        Object[][] records = {{"E", 1, 100}, {"E", 3, 105}, {"E", 4, 106}, {"E", 2, 103}, {"E", 6, 113},
            {"E", 5, 110}, {"E", 7, 104}, {"E", 8, 102}, {"E", 9, 115}};
        assertEquals(List.of(List.of("E", 90L, 1L, 100L), List.of("E", 95L, 5L, 105L), List.of("E", 96L, 15L, 106L),
            List.of("E", 101L, 14L, 106L), List.of("E", 103L, 126L, 113L), List.of("E", 104L, 124L, 113L)),
            onClose(new Sliding(10, 0), records));
    }

    @Test
    void largeInputOnCloseLeavesLateRecordsOutOfTheirWindows() {
        // testAggregateLargeInput, emit on close (d = 10, grace 10): B at 14's left window [4, 14],
        // C at 11, D at 11, 12 and 16 are late for their windows
        Object[][] records = {{"A", 1, 10}, {"A", 2, 20}, {"A", 3, 22}, {"A", 4, 15},
            {"B", 1, 12}, {"B", 2, 13}, {"B", 3, 18}, {"B", 4, 19}, {"B", 5, 25}, {"B", 6, 14},
            {"C", 1, 11}, {"C", 2, 15}, {"C", 3, 16}, {"C", 4, 21}, {"C", 5, 23},
            {"D", 4, 11}, {"D", 2, 12}, {"D", 3, 29}, {"D", 5, 16}};
        assertEquals(List.of(List.of("A", 0L, 1L, 10L), List.of("A", 5L, 9L, 15L), List.of("B", 2L, 1L, 12L),
            List.of("B", 3L, 3L, 13L), List.of("B", 8L, 39L, 18L), List.of("C", 5L, 2L, 15L), List.of("C", 6L, 6L, 16L)),
            onClose(new Sliding(10, 10), records));
    }

    @Test
    void aWindowStaysReadableUntilItExpiresAfterItCloses() {
        // testJoin, emit on close (d = 10, grace 0): A at 15's left window [5, 15] starts from [0, 10]
        // (closed at stream time 12): A's two records of value 1 (1 + 1), not one
        Object[][] records = {{"A", 1, 10}, {"B", 2, 11}, {"C", 3, 12}, {"A", 1, 15}, {"B", 2, 16}, {"C", 3, 19}};
        assertEquals(List.of(List.of("A", 0L, 1L, 10L), List.of("A", 5L, 2L, 15L), List.of("B", 1L, 2L, 11L),
            List.of("B", 6L, 4L, 16L), List.of("C", 2L, 4L, 12L)),
            onClose(new Sliding(10, 0), records));
    }
}
