package io.streamsdsl.jvm;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * The stream–stream join on the JVM ({@link StreamJoin}, over all keys by {@link JoinTask}): the
 * Kafka scenarios the Python core's tests pin down (tests/semantics/test_stream_stream.py, from
 * KStreamKStreamJoinTest, KStreamKStreamLeftJoinTest and KStreamKStreamOuterJoinTest), written as
 * Kafka's {@code MockValueJoiner.TOSTRING_JOINER} prints them ("A0+null"), and the per-key close and
 * timer rules the operator uses.
 */
class StreamJoinTest {
    private static final int L = StreamJoin.LEFT;
    private static final int R = StreamJoin.RIGHT;

    /** Pipes records and returns what each pipe forwarded, as "key:left+right@ts". */
    private static final class Driver {
        final JoinTask task;
        final List<String> dropped = new ArrayList<>();

        Driver(String kind, long before, long after, long grace, boolean fix) {
            task = new JoinTask(new StreamJoin(StreamJoin.kind(kind), before, after, grace, fix));
        }

        Driver(String kind, long difference, long grace) {
            this(kind, difference, difference, grace, true);
        }

        List<String> pipe(Object... records) {
            List<String> out = new ArrayList<>();
            for (int i = 0; i < records.length; i += 4) {
                JoinTask.Result r = task.process((Integer) records[i], (String) records[i + 1], (String) records[i + 2],
                    ((Number) records[i + 3]).longValue());
                for (JoinTask.Out o : r.outputs()) out.add(o.toString());
                if (r.dropped() != null) dropped.add(r.dropped());
            }
            return out;
        }
    }

    @Test
    void innerJoinMatchesBothWaysWithTheLaterTimestamp() {
        // KStreamKStreamJoinTest.testJoin (all timestamps 0, window 100 ms)
        Driver d = new Driver("inner", 100, 0);
        assertEquals(List.of(), d.pipe(L, "0", "A0", 0, L, "1", "A1", 0));
        assertEquals(List.of("0:A0+a0@0", "1:A1+a1@0"), d.pipe(R, "0", "a0", 0, R, "1", "a1", 0));
        assertEquals(List.of("0:B0+a0@0", "1:B1+a1@0"), d.pipe(L, "0", "B0", 0, L, "1", "B1", 0, L, "2", "B2", 0));
        assertEquals(List.of("0:A0+b0@0", "0:B0+b0@0", "1:A1+b1@0", "1:B1+b1@0", "2:B2+b2@0"),
            d.pipe(R, "0", "b0", 0, R, "1", "b1", 0, R, "2", "b2", 0, R, "3", "b3", 0));
    }

    @Test
    void windowBoundsAreInclusive() {
        // KStreamKStreamJoinTest.testWindowing: a right record at t' joins left records in [t' - after, t' + before]
        Driver d = new Driver("inner", 100, 1000);
        d.pipe(L, "0", "A0", 1000, L, "1", "A1", 1000);
        assertEquals(List.of("0:A0+b0@1100"), d.pipe(R, "0", "b0", 1100, R, "1", "b1", 1101));
        assertEquals(List.of("0:A0+c0@1000"), d.pipe(R, "0", "c0", 900, R, "1", "c1", 899));
        assertEquals(List.of(), d.pipe(R, "1", "d1", 899));
    }

    @Test
    void nullKeysAndValues() {
        // an inner join drops and counts both; a left join null-joins a left record with a null key (KIP-962)
        Driver inner = new Driver("inner", 10, 0);
        assertEquals(List.of(), inner.pipe(L, null, "A", 0, R, "0", null, 0));
        assertEquals(List.of(StreamJoin.NULL_KEY, StreamJoin.NULL_VALUE), inner.dropped);
        Driver left = new Driver("left", 10, 0);
        assertEquals(List.of("null:A+null@5"), left.pipe(L, null, "A", 5, R, null, "b", 6));
        assertEquals(List.of(StreamJoin.NULL_KEY), left.dropped);
    }

    @Test
    void leftJoinDuplicates() {
        // KStreamKStreamLeftJoinTest.testLeftJoinDuplicates
        Driver d = new Driver("left", 100, 10);
        assertEquals(List.of("0:A0+null@0", "0:A0-0+null@0"),
            d.pipe(L, "0", "A0", 0, L, "0", "A0-0", 0, R, "1", "a0", 111, R, "2", "dummy", 500));
        assertEquals(List.of("2:A2+a2@1001", "2:A2-0+a2@1001"),
            d.pipe(L, "2", "A2", 1000, L, "2", "A2-0", 1000, R, "2", "a2", 1001));
        assertEquals(List.of(), d.pipe(R, "3", "a3", 315));
    }

    @Test
    void leftExpiredNonJoinedRecordsAreEmittedByEitherSide() {
        // KStreamKStreamLeftJoinTest.testLeftExpiredNonJoinedRecordsAreEmittedByThe{Left,Right}Processor
        for (int by : new int[] {L, R}) {
            Driver d = new Driver("left", 100, 0);
            assertEquals(List.of(), d.pipe(L, "0", "A0", 1, L, "1", "A1", 2, L, "0", "A0-0", 3));
            assertEquals(List.of("1:A1+a1@3"), d.pipe(R, "1", "a1", 3));
            assertEquals(List.of("0:A0+null@1", "0:A0-0+null@3"), d.pipe(by, "2", "dummy", 401));
            long ts = by == L ? 401 : 402;
            assertEquals(List.of("2:dummy+dummy@" + ts), d.pipe(1 - by, "2", "dummy", ts));
        }
    }

    @Test
    void rightNonJoinedRecordsOfALeftJoinAreNeverEmitted() {
        Driver d = new Driver("left", 100, 0);
        assertEquals(List.of(), d.pipe(R, "0", "A0", 1, R, "1", "A1", 2, R, "0", "A0-0", 3));
        assertEquals(List.of("1:a1+A1@3"), d.pipe(L, "1", "a1", 3));
        assertEquals(List.of(), d.pipe(L, "2", "dummy", 401));
    }

    @Test
    void leftJoinedRecordsWithZeroAfterAreEmitted() {
        // KStreamKStreamLeftJoinTest.testLeftJoinedRecordsWithZeroAfterAreEmitted
        Driver d = new Driver("left", 100, 0, 0, true);
        assertEquals(List.of("0:A0+null@1000", "1:A1+null@1001", "2:A2+null@1002"),
            d.pipe(L, "0", "A0", 1000, L, "1", "A1", 1001, L, "2", "A2", 1002, L, "3", "A3", 1003));
        assertEquals(List.of("0:A0+a0@1000", "1:A1+a1@1001", "2:A2+a2@1002", "3:A3+a3@1003"),
            d.pipe(R, "0", "a0", 999, R, "1", "a1", 999, R, "2", "a2", 999, R, "3", "a3", 999));
        assertEquals(List.of("1:A1+c1@1001", "2:A2+c2@1002", "3:A3+c3@1003"),
            d.pipe(R, "0", "c0", 1001, R, "1", "c1", 1001, R, "2", "c2", 1001, R, "3", "c3", 1001));
        assertEquals(List.of(), d.pipe(R, "0", "f0", 1100, R, "1", "f1", 1100));
    }

    @Test
    void withoutTheFixNonJoinedResultsAreEager() {
        // KStreamKStreamOuterJoinTest.testOuterJoinDuplicatesWithFixDisabledOldApi (JoinWindows.of(100).grace(10))
        Driver d = new Driver("outer", 100, 100, 10, false);
        assertEquals(List.of("0:A0+null@0", "0:A0-0+null@0", "0:A0+a0@0", "0:A0-0+a0@0", "1:null+b1@0"),
            d.pipe(L, "0", "A0", 0, L, "0", "A0-0", 0, R, "0", "a0", 0, R, "1", "b1", 0));
    }

    @Test
    void outerJoinDuplicatesComeOutByTimestampRightBeforeLeftThenKey() {
        // KStreamKStreamOuterJoinTest.testOuterJoinDuplicates
        Driver d = new Driver("outer", 100, 10);
        assertEquals(List.of("1:null+a1@0", "1:null+a1-0@0", "0:A0+null@0", "0:A0-0+null@0"),
            d.pipe(L, "0", "A0", 0, L, "0", "A0-0", 0, R, "1", "a1", 0, R, "1", "a1-0", 0, R, "1", "a0", 111));
        assertEquals(List.of("2:A2+a2@201", "2:A2-0+a2@201", "2:A2+a2-0@201", "2:A2-0+a2-0@201"),
            d.pipe(L, "2", "A2", 200, L, "2", "A2-0", 200, R, "2", "a2", 201, R, "2", "a2-0", 201));
        assertEquals(List.of("1:null+a0@111"), d.pipe(R, "3", "a3", 315));
    }

    @Test
    void theScansMinTimeDelaysEmission() {
        // KStreamKStreamJoin.emitNonJoinedOuterRecords: min time left at the last record the scan looked at
        Driver d = new Driver("outer", 10, 0);
        assertEquals(List.of(), d.pipe(L, "1", "L1", 39, L, "2", "L2", 40, R, "3", "R3", 45, L, "4", "L4", 48));
        assertEquals(List.of("1:L1+null@39"), d.pipe(R, "9", "x", 50));
        assertEquals(List.of(), d.pipe(R, "9", "y", 51));
        assertEquals(List.of("2:L2+null@40", "3:null+R3@45", "4:L4+null@48"), d.pipe(R, "9", "z", 59));
    }

    @Test
    void aMatchReleasesEveryHeldRecordOfThatTimestampAndSide() {
        StreamJoin join = new StreamJoin(StreamJoin.Kind.OUTER, 10, 10, 0, true);
        StreamJoin.KeyState<String> s = new StreamJoin.KeyState<>();
        assertEquals(true, join.step(s, L, false, "A", 5, 5, 5).held());
        assertEquals(true, join.step(s, L, false, "A'", 5, 5, 5).held());
        assertEquals(true, join.step(s, L, false, "B", 7, 7, 7).held());
        StreamJoin.Step<String> step = join.step(s, R, false, "a", 6, 7, 7);
        assertEquals(List.of(new StreamJoin.Pair<>("A", "a", 6), new StreamJoin.Pair<>("A'", "a", 6),
            new StreamJoin.Pair<>("B", "a", 7)), step.outputs());
        assertEquals(List.of(), s.held);
        assertEquals(List.of(new StreamJoin.Rec<>(5, "A"), new StreamJoin.Rec<>(5, "A'"), new StreamJoin.Rec<>(7, "B")),
            s.left);
    }

    @Test
    void closeEmitsExpiredHeldRecordsAndPrunesEachSideAtItsStoreTime() {
        StreamJoin join = new StreamJoin(StreamJoin.Kind.OUTER, 10, 10, 0, true);
        StreamJoin.KeyState<String> s = new StreamJoin.KeyState<>();
        assertEquals(true, join.step(s, L, false, "A", 3, 3, -1).held());
        assertEquals(List.of(new StreamJoin.Pair<>("A", "b", 3)), join.step(s, R, false, "b", 1, 3, 3).outputs());
        join.step(s, L, false, "C", 30, 30, 1);
        join.step(s, R, false, "d", 45, 45, 30);  // [35, 55]: C is out of its window
        assertEquals(List.of(new StreamJoin.Held<>(30, L, "C"), new StreamJoin.Held<>(45, R, "d")), s.held);
        assertEquals(20, join.timerThreshold(s));  // b leaves the right store at 1 + 20 - 1
        assertEquals(List.of(new StreamJoin.Held<>(30, L, "C")), join.close(s, 41, 30, 45));
        assertEquals(List.of(new StreamJoin.Rec<>(30, "C")), s.left);  // cut at 30 - 20 + 1
        assertEquals(List.of(new StreamJoin.Rec<>(45, "d")), s.right);  // cut at 45 - 20 + 1
        assertEquals(49, join.timerThreshold(s));
        assertEquals(List.of(new StreamJoin.Held<>(45, R, "d")), join.close(s, 56));
        assertEquals(List.of(), s.left);
        assertEquals(64, join.timerThreshold(s));
        assertEquals(List.of(), join.close(s, 65));
        assertEquals(true, s.isEmpty());
        assertEquals(StreamJoin.NONE, join.timerThreshold(s));
    }

    @Test
    void closeOrdersByTimestampRightBeforeLeftThenArrival() {
        StreamJoin join = new StreamJoin(StreamJoin.Kind.OUTER, 10, 10, 0, true);
        StreamJoin.KeyState<String> s = new StreamJoin.KeyState<>();
        s.hold(5, L, "x");
        s.hold(5, R, "y");
        s.hold(4, L, "z");
        s.hold(5, L, "x2");
        s.hold(9, R, "open");
        assertEquals(List.of(new StreamJoin.Held<>(4, L, "z"), new StreamJoin.Held<>(5, R, "y"),
            new StreamJoin.Held<>(5, L, "x"), new StreamJoin.Held<>(5, L, "x2")), join.close(s, 16));
        assertEquals(List.of(new StreamJoin.Held<>(9, R, "open")), s.held);
    }

    @Test
    void anOutOfOrderRecordIsBufferedInTimestampOrder() {
        StreamJoin join = new StreamJoin(StreamJoin.Kind.INNER, 100, 100, 0, true);
        StreamJoin.KeyState<String> s = new StreamJoin.KeyState<>();
        join.step(s, R, false, "b", 20, 20, -1);
        join.step(s, R, false, "a", 10, 20, -1);
        join.step(s, R, false, "b2", 20, 20, -1);
        assertEquals(List.of(new StreamJoin.Pair<>("X", "a", 15), new StreamJoin.Pair<>("X", "b", 20),
            new StreamJoin.Pair<>("X", "b2", 20)), join.step(s, L, false, "X", 15, 20, 20).outputs());
    }

    @Test
    void anEmptyWindowIsRefused() {
        assertThrows(IllegalArgumentException.class, () -> new StreamJoin(StreamJoin.Kind.INNER, 10, -20, 0, true));
        assertThrows(IllegalArgumentException.class, () -> new StreamJoin(StreamJoin.Kind.INNER, 10, 10, -1, true));
    }
}
