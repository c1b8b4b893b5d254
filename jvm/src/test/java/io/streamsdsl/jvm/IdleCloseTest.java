package io.streamsdsl.jvm;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * Idle close on the JVM ({@code idle_close_step} in the Python core, the same cases as
 * tests/test_idle_close.py): an idle key's open windows close as at the first time past all their
 * close thresholds, which becomes the key's floor; a later record is judged by it.
 */
class IdleCloseTest {
    private static final Agg COUNT = new Agg(false, false, new Agg.Op[] {Agg.Op.COUNT}, Agg.Merge.ADD, "test");

    @Test
    void everyOpenWindowClosesAtTheFloorPastTheirCloses() {
        Windowing.Time time = new Windowing.Time(10, 10, 5);  // [0, 10) closes at 14, [10, 20) at 24
        Windowing.RecordStep a = time.recordStep(Windowing.KeyState.empty(), false, null, 0, 1, 1, COUNT);
        Windowing.RecordStep b = time.recordStep(a.state, false, null, 0, 12, 12, COUNT);
        long floor = time.idleFloor(b.state, 12, -1);
        assertEquals(25, floor);
        Windowing.CloseStep close = time.closeStep(b.state, floor);
        assertEquals(List.of(0L, 10L), List.of(close.closed.get(0).start, close.closed.get(1).start));
        assertEquals(List.of(), close.state.windows);
        // a record for [10, 20) is late at the key's floor; one for [20, 30) is not
        Windowing.RecordStep late = time.recordStep(close.state, false, null, 0, 14, floor, COUNT);
        assertEquals(1, late.step.dropped);
        Windowing.RecordStep fresh = time.recordStep(close.state, false, null, 0, 26, floor, COUNT);
        assertEquals(0, fresh.step.dropped);
        assertEquals(20L, fresh.state.windows.get(0).start);
    }

    @Test
    void nothingOpenKeepsTheFloor() {
        Windowing.Session sessions = new Windowing.Session(10, 0);
        assertEquals(-1, sessions.idleFloor(Windowing.KeyState.empty(), 50, -1));
        Windowing.RecordStep a = sessions.recordStep(Windowing.KeyState.empty(), false, null, 0, 5, 5, COUNT);
        Windowing.RecordStep b = sessions.recordStep(a.state, false, null, 0, 8, 8, COUNT);
        assertEquals(19, sessions.idleFloor(b.state, 8, -1));  // [5, 8] is final past 8 + 10 + 0
    }
}
