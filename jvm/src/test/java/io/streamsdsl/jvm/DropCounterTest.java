package io.streamsdsl.jvm;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import java.util.stream.Collectors;

import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.junit.jupiter.api.Test;

/** A drop point's count and the dropped records it keeps for the log (the smallest positions). */
class DropCounterTest {
    private static Row record(long position) {
        return RowFactory.create(position, 100L + position, "why " + position);
    }

    private static List<Long> positions(DropCounter.Counted c) {
        return c.records().stream().map(r -> r.getLong(0)).collect(Collectors.toList());
    }

    @Test
    void countsFalseOnlyAndPassesTheFlagThrough() {
        DropCounter.Counted driver = new DropCounter.Counted(3);
        DropCounter.Counted task = driver.copy();
        DropCounter udf = new DropCounter(task); // a task's copy, as an executor holds it
        Boolean[] flags = {true, false, null, false};
        for (int i = 0; i < flags.length; i++) {
            assertEquals(flags[i], udf.call(flags[i], record(i)));
        }
        assertTrue(driver.isZero());
        driver.merge(task);
        assertEquals(2, driver.count());
        assertEquals(List.of(1L, 3L), positions(driver));
        assertEquals("why 3", driver.records().get(1).getString(2));
    }

    @Test
    void keepsTheSmallestPositionsAcrossTasks() {
        DropCounter.Counted driver = new DropCounter.Counted(3);
        DropCounter.Counted late = driver.copy();
        DropCounter.Counted early = driver.copy();
        for (long p : new long[] {50, 40, 30, 20}) {
            late.add(record(p));
        }
        for (long p : new long[] {5, 60}) {
            early.add(record(p));
        }
        late.add(null); // a dropped row without its record still counts
        driver.merge(late);
        driver.merge(early);
        assertEquals(7, driver.count());
        assertEquals(List.of(5L, 20L, 30L), positions(driver));
    }

    @Test
    void drainReturnsWhatWasCountedAndLeavesZero() {
        DropCounter.Counted driver = new DropCounter.Counted(100);
        DropCounter.Counted task = driver.copy();
        for (long p = 0; p < 250; p++) {
            task.add(record(p)); // more than twice the maximum: trimmed while adding
        }
        driver.merge(task);
        DropCounter.Counted drained = driver.drain();
        assertEquals(250, drained.count());
        assertEquals(100, drained.records().size());
        assertEquals(0L, drained.records().get(0).getLong(0));
        assertTrue(driver.isZero());
        assertFalse(drained.isZero());
        assertEquals(0, driver.count());
    }

    @Test
    void aNullPositionSortsLast() {
        DropCounter.Counted c = new DropCounter.Counted(2);
        c.add(RowFactory.create(null, 1L, null));
        c.add(record(7));
        assertEquals(7L, c.records().get(0).getLong(0));
        assertNull(c.records().get(1).get(0));
    }
}
