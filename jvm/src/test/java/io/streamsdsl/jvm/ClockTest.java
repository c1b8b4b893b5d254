package io.streamsdsl.jvm;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * {@link Clock}: the Python kernel's clock ({@code advance_stream_time}, then {@code store_clock};
 * its docstring's examples first), per window kind, for one stream time and for one per input.
 */
class ClockTest {
    private static final Windowing SESSION = new Windowing.Session(10, 0);
    private static final Windowing TIME = new Windowing.Time(10, 10, 0);
    private static final Windowing SLIDING = new Sliding(10, 0);
    private static final Windowing UNWINDOWED = new Windowing.Unwindowed();

    /** {expiryTime, storeTime}. */
    private static long[] storeClock(Windowing w, long[] timesBefore, int slot, long streamTime) {
        return Clock.storeClock(w, timesBefore, slot, streamTime);
    }

    /** {streamTime, storeTime, expiryTime}. */
    private static List<Long> clock(Windowing w, long[] timesBefore, int input, long ts, boolean valueNull) {
        Clock c = Clock.of(w, timesBefore, input, ts, valueNull);
        return List.of(c.streamTime, c.storeTime, c.expiryTime);
    }

    @Test
    void storeClocksDocstringExamples() {
        // store_clock(SessionWindowing(10, 0), PER_RECORD, False, [50, 20], 1, 30) == (50, 50)
        assertArrayEquals(new long[] {50, 50}, storeClock(SESSION, new long[] {50, 20}, 1, 30));
        // store_clock(SessionWindowing(10, 0), PER_RECORD, False, [50], 0, 60) == (None, 50)
        assertArrayEquals(new long[] {60, 50}, storeClock(SESSION, new long[] {50}, 0, 60));
    }

    @Test
    void aSessionCogroupExpiresByTheFastestInputAndReadsTheStoreAtItsTime() {
        // input 0 at 50, input 1 goes from 20 to 30: the store's time is 50 before and after
        assertArrayEquals(new long[] {50, 50}, storeClock(SESSION, new long[] {20, 50}, 0, 30));
        // the record makes its input the fastest: the store's time after it is its own
        assertArrayEquals(new long[] {70, 50}, storeClock(SESSION, new long[] {20, 50}, 0, 70));
    }

    @Test
    void timeAndSlidingWindowsStayInTheCacheUntilEveryInputExpiredThem() {
        for (Windowing w : List.of(TIME, SLIDING)) {
            // the least of the inputs' stream times after the record, 30; the slot's own before it
            assertArrayEquals(new long[] {30, 20}, storeClock(w, new long[] {50, 20}, 1, 30));
            // three inputs: input 1, at 20, holds the windows for everyone
            assertArrayEquals(new long[] {20, 50}, storeClock(w, new long[] {50, 20, 60}, 0, 55));
        }
    }

    @Test
    void unwindowedCogroupInputsExpireNothing() {
        assertArrayEquals(new long[] {30, 20}, storeClock(UNWINDOWED, new long[] {50, 20}, 1, 30));
    }

    @Test
    void oneStreamTimeForAllInputsIsEveryInputsClock() {
        // a cogroup that emits on close: the plan gives one time, whichever input the record has
        assertEquals(List.of(15L, 12L, 15L), clock(TIME, new long[] {12}, 2, 15, false));
        assertEquals(List.of(12L, 12L, 12L), clock(SESSION, new long[] {12}, 1, 7, false));
    }

    @Test
    void theRecordsInputAdvancesOnlyItsOwnStreamTime() {
        // input 1 at 20 sees 25: its stream time 25, the least after it 25 (input 0 is at 40)
        assertEquals(List.of(25L, 20L, 25L), clock(TIME, new long[] {40, 20}, 1, 25, false));
        // a late record of input 0 does not move it back
        assertEquals(List.of(40L, 40L, 20L), clock(TIME, new long[] {40, 20}, 0, 5, false));
    }

    @Test
    void aNullValueTheWindowKindSkipsDoesNotAdvanceStreamTime() {
        assertEquals(List.of(5L, 5L, 5L), clock(SLIDING, new long[] {5, 9}, 0, 20, true));
        assertEquals(List.of(20L, 5L, 9L), clock(SLIDING, new long[] {5, 9}, 0, 20, false));
        assertEquals(List.of(20L, 5L, 9L), clock(TIME, new long[] {5, 9}, 0, 20, true));
    }
}
