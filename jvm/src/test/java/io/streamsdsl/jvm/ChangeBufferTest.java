package io.streamsdsl.jvm;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;

import java.util.List;
import org.junit.jupiter.api.Test;

/** The record cache's net change per flush (the Python core's ChangeBuffer, case for case). */
class ChangeBufferTest {
    private static Win w(long start, long end, long agg) {
        return new Win(start, end, agg, end);
    }

    @Test
    void lastValuePerWindowInTheOrderLastWritten() {
        ChangeBuffer buffer = new ChangeBuffer(List.of());
        buffer.put(w(0, 0, 1), "r1");
        buffer.put(w(5, 5, 1), "r2");
        buffer.put(w(0, 0, 2), "r3");
        List<ChangeBuffer.Flushed> out = buffer.flush();
        assertEquals(List.of(new Win.Bounds(5, 5), new Win.Bounds(0, 0)),
            out.stream().map(ChangeBuffer.Flushed::bounds).toList());
        assertEquals(2L, out.get(1).window().agg);
    }

    @Test
    void eachWindowCarriesTheContextOfItsLastWrite() {
        // Kafka's cache entry keeps the record context of its last write (InputRecordCache's contexts)
        ChangeBuffer buffer = new ChangeBuffer(List.of(w(7, 7, 1)));
        buffer.put(w(0, 0, 1), "r1");
        buffer.put(w(5, 5, 1), "r2");
        buffer.delete(w(7, 7, 1), "r3");
        buffer.put(w(0, 0, 2), "r4");
        assertEquals(List.of("r2", "r3", "r4"), buffer.flush().stream().map(ChangeBuffer.Flushed::context).toList());
    }

    @Test
    void aTombstoneOnlyForAWindowFlushedBefore() {
        ChangeBuffer buffer = new ChangeBuffer(List.of(w(0, 0, 1)));
        buffer.put(w(3, 3, 1), "r");
        buffer.delete(w(3, 3, 1), "r");   // never reached the store: nothing forwarded
        buffer.delete(w(0, 0, 1), "r");   // was flushed: a tombstone
        buffer.put(w(0, 3, 2), "r");
        List<ChangeBuffer.Flushed> out = buffer.flush();
        assertEquals(2, out.size());
        assertEquals(new Win.Bounds(0, 0), out.get(0).bounds());
        assertNull(out.get(0).window().agg);
        assertEquals(new Win.Bounds(0, 3), out.get(1).bounds());
    }

    @Test
    void aFlushEmptiesTheBuffer() {
        ChangeBuffer buffer = new ChangeBuffer(List.of());
        buffer.put(w(0, 0, 1), "r");
        assertEquals(1, buffer.flush().size());
        assertEquals(0, buffer.flush().size());
    }
}
