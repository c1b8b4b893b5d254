package io.streamsdsl.jvm;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/**
 * The table–table join on the JVM ({@link TableTableJoin}, over all keys here): Kafka's
 * KTableKTableInnerJoinTest, KTableKTableLeftJoinTest and KTableKTableOuterJoinTest {@code testJoin}
 * (tests/test_table_joins.py's {@code KAFKA_EXPECTED}), written as Kafka's
 * {@code MockValueJoiner.TOSTRING_JOINER} prints them ("X0+null"; a delete "null"), and the
 * record cache before a materialized result.
 */
class TableTableJoinTest {
    /** Pipes records of both tables and returns what each batch forwarded, as "key:value@ts". */
    private static final class Driver {
        final TableTableJoin.Spec spec;
        final Map<String, TableTableJoin.State> states = new HashMap<>();
        int dropped;

        Driver(String kind, boolean materialized, boolean cached) {
            spec = new TableTableJoin.Spec(TableTableJoin.Spec.kind(kind), materialized, cached, false, false);
        }

        /** Records: side ("t1" the left table), key (null: a null key), value (null: a tombstone), ts. */
        List<String> pipe(Object... records) {
            List<String> out = new ArrayList<>();
            for (int i = 0; i < records.length; i += 4) {
                String key = (String) records[i + 1];
                TableTableJoin.Step step = TableTableJoin.step(spec, states.get(key), records[i].equals("t1"),
                    key == null, records[i + 2], null, ((Number) records[i + 3]).longValue());
                switch (step.outcome()) {
                    case DROPPED -> dropped++;
                    case PAIR -> out.add(key + ":" + step.left() + "+" + step.right() + "@" + step.ts());
                    case TOMBSTONE -> out.add(key + ":null@" + step.ts());
                    default -> { }
                }
                if (step.outcome() != TableTableJoin.Outcome.DROPPED) states.put(key, step.state());
            }
            return out;
        }
    }

    private static Object[] each(String topic, String prefix, long... ts) {
        Object[] out = new Object[ts.length * 4];
        for (int k = 0; k < ts.length; k++) {
            out[k * 4] = topic;
            out[k * 4 + 1] = String.valueOf(k);
            out[k * 4 + 2] = prefix == null ? null : prefix + k;
            out[k * 4 + 3] = ts[k];
        }
        return out;
    }

    /** Kafka's testJoin batches, each batch's output. */
    private static List<List<String>> kafka(String kind) {
        Driver d = new Driver(kind, false, true);
        List<List<String>> got = new ArrayList<>();
        got.add(d.pipe("t1", "0", "X0", 5, "t1", "1", "X1", 6, "t1", null, "SomeVal", 42));
        got.add(d.pipe("t2", "0", "Y0", 0, "t2", "1", "Y1", 10, "t2", null, "AnotherVal", 73));
        got.add(d.pipe(each("t1", "XX", 7, 7, 7, 7)));
        got.add(d.pipe(each("t2", "YY", 0, 5, 10, 15)));
        got.add(d.pipe(each("t1", "XXX", 6, 6, 6, 6)));
        got.add(d.pipe("t2", "0", null, 5, "t2", "1", null, 7));
        got.add(d.pipe(each("t1", "XXXX", 13, 13, 13, 13)));
        got.add(d.pipe(each("t1", null, 0, 42, 5, 20)));
        assertEquals(2, d.dropped);
        return got;
    }

    @Test
    void innerJoin() {
        assertEquals(List.of(
            List.of(),
            List.of("0:X0+Y0@5", "1:X1+Y1@10"),
            List.of("0:XX0+Y0@7", "1:XX1+Y1@10"),
            List.of("0:XX0+YY0@7", "1:XX1+YY1@7", "2:XX2+YY2@10", "3:XX3+YY3@15"),
            List.of("0:XXX0+YY0@6", "1:XXX1+YY1@6", "2:XXX2+YY2@10", "3:XXX3+YY3@15"),
            List.of("0:null@6", "1:null@7"),
            List.of("2:XXXX2+YY2@13", "3:XXXX3+YY3@15"),
            List.of("2:null@10", "3:null@20")), kafka("inner"));
    }

    @Test
    void leftJoin() {
        assertEquals(List.of(
            List.of("0:X0+null@5", "1:X1+null@6"),
            List.of("0:X0+Y0@5", "1:X1+Y1@10"),
            List.of("0:XX0+Y0@7", "1:XX1+Y1@10", "2:XX2+null@7", "3:XX3+null@7"),
            List.of("0:XX0+YY0@7", "1:XX1+YY1@7", "2:XX2+YY2@10", "3:XX3+YY3@15"),
            List.of("0:XXX0+YY0@6", "1:XXX1+YY1@6", "2:XXX2+YY2@10", "3:XXX3+YY3@15"),
            List.of("0:XXX0+null@6", "1:XXX1+null@7"),
            List.of("0:XXXX0+null@13", "1:XXXX1+null@13", "2:XXXX2+YY2@13", "3:XXXX3+YY3@15"),
            List.of("0:null@0", "1:null@42", "2:null@10", "3:null@20")), kafka("left"));
    }

    @Test
    void outerJoin() {
        assertEquals(List.of(
            List.of("0:X0+null@5", "1:X1+null@6"),
            List.of("0:X0+Y0@5", "1:X1+Y1@10"),
            List.of("0:XX0+Y0@7", "1:XX1+Y1@10", "2:XX2+null@7", "3:XX3+null@7"),
            List.of("0:XX0+YY0@7", "1:XX1+YY1@7", "2:XX2+YY2@10", "3:XX3+YY3@15"),
            List.of("0:XXX0+YY0@6", "1:XXX1+YY1@6", "2:XXX2+YY2@10", "3:XXX3+YY3@15"),
            List.of("0:XXX0+null@6", "1:XXX1+null@7"),
            List.of("0:XXXX0+null@13", "1:XXXX1+null@13", "2:XXXX2+YY2@13", "3:XXXX3+YY3@15"),
            List.of("0:null@0", "1:null@42", "2:null+YY2@10", "3:null+YY3@20")), kafka("outer"));
    }

    @Test
    void aDeleteOfARowNeverHeldIsForwardedOnlyWithoutTheCache() {
        // a tombstone of a key the left table does not hold (the record cache drops it; without it the
        // materialized result forwards the delete of a row it never held)
        Driver cached = new Driver("inner", true, true);
        assertEquals(List.of(), cached.pipe("t2", "0", "Y0", 1, "t1", "0", null, 2));
        Driver uncached = new Driver("inner", true, false);
        assertEquals(List.of("0:null@2"), uncached.pipe("t2", "0", "Y0", 1, "t1", "0", null, 2));
        // a row it held: the delete is forwarded either way
        assertEquals(List.of("0:X0+Y0@3", "0:null@4"), cached.pipe("t1", "0", "X0", 3, "t1", "0", null, 4));
    }
}
