package io.streamsdsl.jvm;

/**
 * One stored window of one key (the Python core's {@code WindowAgg}): start, end (ms), the
 * aggregate (raw long bits, a double's bits when the aggregation computes in doubles; {@code null}
 * is Python's {@code None}) and the timestamp its records are forwarded with. Immutable.
 */
final class Win {
    final long start;
    final long end;
    final Long agg;
    final long ts;

    Win(long start, long end, Long agg, long ts) {
        this.start = start;
        this.end = end;
        this.agg = agg;
        this.ts = ts;
    }

    /** The window's store key: (start, end). */
    Bounds bounds() {
        return new Bounds(start, end);
    }

    /** A window's store key. */
    record Bounds(long start, long end) {
    }
}
