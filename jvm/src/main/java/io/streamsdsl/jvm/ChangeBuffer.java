package io.streamsdsl.jvm;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * Kafka Streams' record cache reduced to its net change per flush (the Python core's
 * {@code ChangeBuffer} with {@code InputRecordCache}'s contexts): the last value per window since
 * the previous flush, a tombstone only for a window that had been flushed before, windows in the
 * order they were last written, each with the context (the record) of its last write, as Kafka's
 * cache entry keeps its record context.
 */
final class ChangeBuffer {
    private static final Win DELETED = new Win(0, 0, null, 0);
    private final Set<Win.Bounds> flushed = new HashSet<>();
    private LinkedHashMap<Win.Bounds, Win> dirty = new LinkedHashMap<>();
    private final Map<Win.Bounds, Object> contexts = new HashMap<>();

    /** One forwarded window: its bounds, the window ({@link #isTombstone} for a tombstone), the context of its last write. */
    record Flushed(Win.Bounds bounds, Win window, Object context) {}

    ChangeBuffer(Iterable<Win> windows) {
        for (Win w : windows) flushed.add(w.bounds());
    }

    void put(Win w, Object context) {
        Win.Bounds b = w.bounds();
        dirty.remove(b);
        dirty.put(b, w);
        contexts.put(b, context);
    }

    void delete(Win w, Object context) {
        Win.Bounds b = w.bounds();
        dirty.remove(b);
        dirty.put(b, DELETED);
        contexts.put(b, context);
    }

    /** The forwarded windows, in the order last written; a tombstone's window is {@code DELETED}. */
    List<Flushed> flush() {
        List<Flushed> out = new ArrayList<>();
        for (Iterator<Map.Entry<Win.Bounds, Win>> it = dirty.entrySet().iterator(); it.hasNext(); ) {
            Map.Entry<Win.Bounds, Win> e = it.next();
            Object context = contexts.get(e.getKey());
            if (e.getValue() == DELETED) {
                if (flushed.remove(e.getKey())) out.add(new Flushed(e.getKey(), DELETED, context));
            } else {
                out.add(new Flushed(e.getKey(), e.getValue(), context));
                flushed.add(e.getKey());
            }
        }
        dirty = new LinkedHashMap<>();
        contexts.clear();
        return out;
    }

    static boolean isTombstone(Win w) {
        return w == DELETED;
    }
}
