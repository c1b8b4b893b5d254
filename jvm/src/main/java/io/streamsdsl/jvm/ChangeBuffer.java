package io.streamsdsl.jvm;

import java.util.ArrayList;
import java.util.HashSet;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * Kafka Streams' record cache reduced to its net change per flush (the Python core's
 * {@code ChangeBuffer}): the last value per window since the previous flush, a tombstone only for
 * a window that had been flushed before, windows in the order they were last written.
 */
final class ChangeBuffer {
    private static final Win DELETED = new Win(0, 0, null, 0);
    private final Set<Win.Bounds> flushed = new HashSet<>();
    private LinkedHashMap<Win.Bounds, Win> dirty = new LinkedHashMap<>();

    ChangeBuffer(Iterable<Win> windows) {
        for (Win w : windows) flushed.add(w.bounds());
    }

    void put(Win w) {
        Win.Bounds b = w.bounds();
        dirty.remove(b);
        dirty.put(b, w);
    }

    void delete(Win w) {
        Win.Bounds b = w.bounds();
        dirty.remove(b);
        dirty.put(b, DELETED);
    }

    /** The forwarded windows, in the order last written; a tombstone is its bounds paired with {@code DELETED}. */
    List<Map.Entry<Win.Bounds, Win>> flush() {
        List<Map.Entry<Win.Bounds, Win>> out = new ArrayList<>();
        for (Iterator<Map.Entry<Win.Bounds, Win>> it = dirty.entrySet().iterator(); it.hasNext(); ) {
            Map.Entry<Win.Bounds, Win> e = it.next();
            if (e.getValue() == DELETED) {
                if (flushed.remove(e.getKey())) out.add(Map.entry(e.getKey(), DELETED));
            } else {
                out.add(e);
                flushed.add(e.getKey());
            }
        }
        dirty = new LinkedHashMap<>();
        return out;
    }

    static boolean isTombstone(Win w) {
        return w == DELETED;
    }
}
