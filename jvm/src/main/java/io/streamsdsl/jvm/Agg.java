package io.streamsdsl.jvm;

import java.io.Serializable;

/**
 * The built-in aggregation functions (Kafka Streams' initializer / aggregator / merger) on
 * numbers held as raw long bits: {@code count()}, {@code reduce(operator.add | max | min)} and the
 * {@code Aggregations} helpers (sum / min / max of a number, skipping records without one). They
 * mirror the Python functions of {@code streamsdsl.compiler.aggregations.agg_functions} and
 * {@code streamsdsl.dsl.aggregations} exactly, including Python's {@code max(a, b)} tie rule.
 */
final class Agg implements Serializable {
    private static final long serialVersionUID = 1L;

    /** An input's aggregator; the {@code R*} ones are reduce's ({@code v if agg is None else f(agg, v)}). */
    enum Op { COUNT, SUM, MIN, MAX, RSUM, RMIN, RMAX }

    /** The session merger: {@code ADD} (count, sum), {@code MIN}/{@code MAX} (helpers, null-safe), reduce's. */
    enum Merge { ADD, MIN, MAX, RSUM, RMIN, RMAX }

    final boolean dbl;
    final boolean initNull;
    final Op[] ops;
    final Merge merge;
    final String node;

    Agg(boolean dbl, boolean initNull, Op[] ops, Merge merge, String node) {
        this.dbl = dbl;
        this.initNull = initNull;
        this.ops = ops;
        this.merge = merge;
        this.node = node;
    }

    Long initializer() {
        return initNull ? null : 0L;  // 0 and 0.0 have the same bits
    }

    private long add(long a, long b) {
        return dbl ? Double.doubleToRawLongBits(Double.longBitsToDouble(a) + Double.longBitsToDouble(b)) : a + b;
    }

    private boolean less(long a, long b) {
        return dbl ? Double.longBitsToDouble(a) < Double.longBitsToDouble(b) : a < b;
    }

    private RuntimeException nullError(String what) {
        return new IllegalArgumentException(node + ": " + what
            + " (a built-in reduction cannot combine a null; Kafka Streams' reducer would fail the same way)");
    }

    /** The aggregator of input {@code input}: {@code x} is the record's number (null: none). */
    Long aggregate(int input, Long agg, Long x) {
        switch (ops[input]) {
            case COUNT:
                if (agg == null) throw nullError("count of a null aggregate");
                return add(agg, dbl ? Double.doubleToRawLongBits(1.0) : 1L);
            case SUM:
                if (x == null) return agg;
                if (agg == null) throw nullError("sum into a null aggregate");
                return add(agg, x);
            case MIN:
                if (x == null) return agg;
                if (agg == null) return x;
                return less(x, agg) ? x : agg;
            case MAX:
                if (x == null) return agg;
                if (agg == null) return x;
                return less(agg, x) ? x : agg;
            default:
                if (agg == null) return x;
                if (x == null) throw nullError("reduce of a null value into aggregate");
                return reduce(ops[input] == Op.RSUM ? Merge.RSUM : ops[input] == Op.RMIN ? Merge.RMIN : Merge.RMAX, agg, x);
        }
    }

    private Long reduce(Merge m, long a, long b) {
        switch (m) {
            case RSUM:
            case ADD:
                return add(a, b);
            case RMIN:
            case MIN:
                return less(b, a) ? b : a;
            default:
                return less(a, b) ? b : a;
        }
    }

    /** The session merger {@code merger(key, a1, a2)}. */
    Long merge(Long a1, Long a2) {
        switch (merge) {
            case ADD:
                if (a1 == null || a2 == null) throw nullError("merge of a null aggregate");
                return add(a1, a2);
            case MIN:
            case MAX:
                if (a1 == null) return a2;
                if (a2 == null) return a1;
                return reduce(merge, a1, a2);
            default:
                if (a1 == null) return a2;
                if (a2 == null) throw nullError("reduce of a null aggregate");
                return reduce(merge, a1, a2);
        }
    }

    boolean hasMerger() {
        return merge != null;
    }
}
