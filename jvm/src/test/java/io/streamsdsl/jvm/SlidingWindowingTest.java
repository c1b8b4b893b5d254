package io.streamsdsl.jvm;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * Sliding windows on the JVM (Kafka Streams' KStreamSlidingWindowAggregate, KIP-450), the cases
 * the Python core's tests pin down (tests/test_semantics_sliding.py): a record's left and right
 * windows, an out-of-order record, early records, late drops, null values, close and expiry.
 */
class SlidingWindowingTest {
    private static final Agg COUNT = new Agg(false, false, new Agg.Op[] {Agg.Op.COUNT}, Agg.Merge.ADD, "test");

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
}
