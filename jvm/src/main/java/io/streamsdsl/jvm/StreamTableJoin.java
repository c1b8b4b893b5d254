package io.streamsdsl.jvm;

/**
 * The stream–table join's rules, the Java port of {@code streamsdsl.semantics.stream_table}
 * (Kafka's {@code KStreamKTableJoinProcessor}): a table record sets the key's table value (the
 * latest, also when older; a tombstone deletes it; a null key changes nothing) and forwards nothing;
 * a stream record with a null value is dropped; one with a null key is dropped by the inner join and
 * joined with no table value by the left join (KIP-962); otherwise the inner join forwards a pair
 * only when the table has a value, the left join always. The pair keeps the stream record's key and
 * timestamp. Values are opaque here: the user's joiner runs on the pairs afterwards.
 */
final class StreamTableJoin {
    private StreamTableJoin() {
    }

    /** A key's table value and its timestamp. */
    record TableValue(Object value, long ts) {
    }

    /** What a stream record does: dropped (and counted), nothing, or a pair with the table value. */
    enum Outcome { DROPPED, NOTHING, PAIR }

    /** The key's table value after a table record. */
    static TableValue tableUpdate(TableValue state, boolean keyNull, Object value, long ts) {
        if (keyNull) return state;
        return value == null ? null : new TableValue(value, ts);
    }

    /** What a stream record of the key (table value {@code state}) does. */
    static Outcome streamStep(boolean left, boolean keyNull, boolean valueNull, TableValue state) {
        if (valueNull) return Outcome.DROPPED;
        if (keyNull) return left ? Outcome.PAIR : Outcome.DROPPED;
        if (state == null && !left) return Outcome.NOTHING;
        return Outcome.PAIR;
    }

    /** The table value a pair of a stream record carries (null: none). */
    static Object tableValue(boolean keyNull, TableValue state) {
        return keyNull || state == null ? null : state.value();
    }
}
