package io.streamsdsl.jvm;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;

import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** The record cache's net change per flush (the Python core's ChangeBuffer, case for case). */
class ChangeBufferTest {
    private static Win w(long start, long end, long agg) {
        return new Win(start, end, agg, end);
    }

    @Test
    void lastValuePerWindowInTheOrderLastWritten() {
        ChangeBuffer buffer = new ChangeBuffer(List.of());
        buffer.put(w(0, 0, 1));
        buffer.put(w(5, 5, 1));
        buffer.put(w(0, 0, 2));
        List<Map.Entry<Win.Bounds, Win>> out = buffer.flush();
        assertEquals(List.of(new Win.Bounds(5, 5), new Win.Bounds(0, 0)), out.stream().map(Map.Entry::getKey).toList());
        assertEquals(2L, out.get(1).getValue().agg);
    }

    @Test
    void aTombstoneOnlyForAWindowFlushedBefore() {
        ChangeBuffer buffer = new ChangeBuffer(List.of(w(0, 0, 1)));
        buffer.put(w(3, 3, 1));
        buffer.delete(w(3, 3, 1));   // never reached the store: nothing forwarded
        buffer.delete(w(0, 0, 1));   // was flushed: a tombstone
        buffer.put(w(0, 3, 2));
        List<Map.Entry<Win.Bounds, Win>> out = buffer.flush();
        assertEquals(2, out.size());
        assertEquals(new Win.Bounds(0, 0), out.get(0).getKey());
        assertNull(out.get(0).getValue().agg);
        assertEquals(new Win.Bounds(0, 3), out.get(1).getKey());
    }

    @Test
    void aFlushEmptiesTheBuffer() {
        ChangeBuffer buffer = new ChangeBuffer(List.of());
        buffer.put(w(0, 0, 1));
        assertEquals(1, buffer.flush().size());
        assertEquals(0, buffer.flush().size());
    }
}
