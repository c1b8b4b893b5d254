package io.streamsdsl.jvm;

/**
 * The table–table join's rules, the Java port of {@code streamsdsl.semantics.table_table}'s
 * {@code table_join_step} as the operator runs it (no old values: a joined table's old value is
 * re-derived downstream): Kafka's {@code KTableKTableInnerJoin}, {@code LeftJoin},
 * {@code RightJoin}, {@code OuterJoin} and {@code KTableKTableJoinMerger}.
 *
 * <p>A record of either side first updates that side (a null key is dropped; a tombstone of a
 * key the side does not hold is not forwarded when the side's store has a record cache or the side
 * reads through a filter; a null value that is not a tombstone, a {@code map_values} result, is
 * forwarded and the side keeps holding the key with no value), then its change is joined with the
 * other side's current value: the result is a <b>pair</b> (the left and the right value, one of them
 * null in a left or outer join) or a <b>tombstone</b>, under the record's key, at the record's
 * timestamp or the other side's when that is later (and the other side has a value).
 *
 * <p>A materialized result behind a record cache does not forward a delete of a key it holds no row
 * for. Values are opaque here: the joiner runs on the pairs afterwards, so this port assumes a
 * joiner never returns null for a pair (a materialized join whose joiner might stays on the Python
 * operator, where the result decides the store's row).
 */
final class TableTableJoin {
    private TableTableJoin() {
    }

    enum Kind { INNER, LEFT, OUTER }

    /** The join: its kind, whether its result is materialized, whether the stores have a record
     * cache, and whether each side reads through a {@code KTable.filter}. */
    record Spec(Kind kind, boolean materialized, boolean cached, boolean leftFiltered, boolean rightFiltered)
        implements java.io.Serializable {
        static Kind kind(String name) {
            return switch (name) {
                case "inner" -> Kind.INNER;
                case "left" -> Kind.LEFT;
                case "outer" -> Kind.OUTER;
                default -> throw new IllegalArgumentException("a table-table join is inner, left or outer, not " + name);
            };
        }
    }

    /** A side's current value and its timestamp; a null value: the side holds the key without a
     * value (a {@code map_values} result), which the other side reads as absent. */
    record Side(Object value, long ts) {
    }

    /** One key's state: each side (null: absent) and whether the materialized result has a row. */
    record State(Side left, Side right, boolean hasResult) {
        static final State EMPTY = new State(null, null, false);

        boolean empty() {
            return left == null && right == null && !hasResult;
        }
    }

    /** What a record does: dropped, nothing, a pair, or a tombstone of the result. */
    enum Outcome { DROPPED, NOTHING, PAIR, TOMBSTONE }

    /** A record's step: the key's new state, the outcome, and for a pair or a tombstone the pair's
     * values and the output timestamp. */
    record Step(State state, Outcome outcome, Object left, Object right, long ts) {
    }

    /**
     * One record of side {@code leftSide ? left : right} applied to its key's state.
     *
     * @param tombstone whether the side's source value was a tombstone, where a {@code map_values}
     *                  stands between (null: the value says it)
     */
    static Step step(Spec spec, State state, boolean leftSide, boolean keyNull, Object value, Boolean tombstone,
                     long ts) {
        if (state == null) state = State.EMPTY;
        Side self = leftSide ? state.left() : state.right();
        boolean filtered = leftSide ? spec.leftFiltered() : spec.rightFiltered();
        Side next;
        Object old = self == null ? null : self.value();
        if (!keyNull && value == null && Boolean.FALSE.equals(tombstone) && !filtered) {
            next = new Side(null, ts);  // the source holds the key; map_values made it null
        } else {
            if (keyNull) return new Step(state, Outcome.DROPPED, null, null, ts);
            next = value == null ? null : new Side(value, ts);
            if ((spec.cached() || filtered) && value == null && self == null) {
                return new Step(state, Outcome.NOTHING, null, null, ts);
            }
        }
        state = leftSide ? new State(next, state.right(), state.hasResult())
            : new State(state.left(), next, state.hasResult());
        Side other = leftSide ? state.right() : state.left();
        Object otherValue = other == null ? null : other.value();
        Outcome outcome;
        switch (spec.kind()) {
            case INNER -> {
                if (otherValue == null) return new Step(state, Outcome.NOTHING, null, null, ts);
                outcome = value == null ? Outcome.TOMBSTONE : Outcome.PAIR;
            }
            case LEFT -> {
                if (leftSide) {
                    if (otherValue == null && value == null && old == null) {
                        return new Step(state, Outcome.NOTHING, null, null, ts);
                    }
                    outcome = value == null ? Outcome.TOMBSTONE : Outcome.PAIR;
                } else {  // KTableKTableRightJoin: the left value with the right's new one (null too)
                    if (otherValue == null) return new Step(state, Outcome.NOTHING, null, null, ts);
                    outcome = Outcome.PAIR;
                }
            }
            default -> {
                if (otherValue == null && value == null && old == null) {
                    return new Step(state, Outcome.NOTHING, null, null, ts);
                }
                outcome = otherValue != null || value != null ? Outcome.PAIR : Outcome.TOMBSTONE;
            }
        }
        long outTs = otherValue == null ? ts : Math.max(ts, other.ts());
        if (spec.materialized()) {
            if (outcome == Outcome.TOMBSTONE && !state.hasResult() && spec.cached()) {
                return new Step(state, Outcome.NOTHING, null, null, ts);
            }
            state = new State(state.left(), state.right(), outcome == Outcome.PAIR);
        }
        if (outcome == Outcome.TOMBSTONE) return new Step(state, outcome, null, null, outTs);
        return new Step(state, outcome, leftSide ? value : otherValue, leftSide ? otherValue : value, outTs);
    }
}
