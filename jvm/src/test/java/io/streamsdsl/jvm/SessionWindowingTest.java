package io.streamsdsl.jvm;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.List;
import org.junit.jupiter.api.Test;

/**
 * Session windows on the JVM (Kafka Streams' KStreamSessionWindowAggregate), the cases the Python
 * core's tests pin down: merging, the initializer in every merge, late drops, on-close order.
 */
class SessionWindowingTest {
    private static final Agg COUNT = new Agg(false, false, new Agg.Op[] {Agg.Op.COUNT}, Agg.Merge.ADD, "test");
    private final Windowing.Session sessions = new Windowing.Session(5, 0);

    private Windowing.RecordStep record(Windowing.KeyState state, long ts, long streamTime) {
        return sessions.recordStep(state, false, null, 0, ts, streamTime, COUNT);
    }

    @Test
    void aRecordWithinTheGapMergesAndDeletesTheOldSession() {
        Windowing.RecordStep first = record(Windowing.KeyState.empty(), 0, 0);
        Windowing.RecordStep second = record(first.state, 4, 4);
        assertEquals(1, second.step.deletes.size());
        assertEquals(List.of(0L, 4L, 2L), List.of(second.step.puts.get(0).start, second.step.puts.get(0).end, second.step.puts.get(0).agg));
    }

    @Test
    void aRecordBetweenTwoSessionsMergesAllThree() {
        Windowing.Session graceful = new Windowing.Session(5, 10);   // [0, 0] still open at stream time 10
        Windowing.RecordStep a = graceful.recordStep(Windowing.KeyState.empty(), false, null, 0, 0, 0, COUNT);
        Windowing.RecordStep b = graceful.recordStep(a.state, false, null, 0, 10, 10, COUNT);
        Windowing.RecordStep c = graceful.recordStep(b.state, false, null, 0, 5, 10, COUNT);
        assertEquals(2, c.step.deletes.size());
        Win merged = c.step.puts.get(0);
        assertEquals(List.of(0L, 10L, 3L), List.of(merged.start, merged.end, merged.agg));
        assertEquals(1, c.state.windows.size());
    }

    @Test
    void aClosedSessionIsNotMergedIntoAnyMore() {
        // gap 5, grace 0: at stream time 10, [0, 0] is closed (10 > 0 + 5 + 0); a record at 5 joins
        // only [10, 10] (Kafka's store no longer returns [0, 0])
        Windowing.RecordStep a = record(Windowing.KeyState.empty(), 0, 0);
        Windowing.RecordStep b = record(a.state, 10, 10);
        Windowing.RecordStep c = record(b.state, 5, 10);
        assertEquals(1, c.step.deletes.size());
        assertEquals(List.of(5L, 10L), List.of(c.step.puts.get(0).start, c.step.puts.get(0).end));
    }

    @Test
    void aLateRecordIsDroppedAndTheStoreUnchanged() {
        Windowing.RecordStep a = record(Windowing.KeyState.empty(), 100, 100);
        Windowing.RecordStep late = record(a.state, 0, 100);
        assertEquals(1, late.step.dropped);
        assertEquals(0, late.step.puts.size());
        assertEquals(a.state.windows, late.state.windows);
    }

    @Test
    void aSessionClosesWhenStreamTimePassesEndPlusGapPlusGrace() {
        Windowing.RecordStep a = record(Windowing.KeyState.empty(), 3, 3);
        Win session = a.state.windows.get(0);
        assertEquals(8L, sessions.closeThreshold(session));
        assertEquals(0, sessions.closeStep(a.state, 8).closed.size());
        assertEquals(List.of(session), sessions.closeStep(a.state, 9).closed);
    }

    /** min of a record without a number: the initializer's null stays null. */
    private static final Agg MIN = new Agg(false, true, new Agg.Op[] {Agg.Op.MIN}, Agg.Merge.MIN, "test");

    /** A record without a number into an empty key: nothing stored, nothing for the cache to forward. */
    private static Windowing.RecordStep assertNullAggregateNotStored(Windowing windowing) {
        Windowing.RecordStep step = windowing.recordStep(Windowing.KeyState.empty(), true, null, 0, 3, 3, MIN);
        assertEquals(0, step.state.windows.size());
        ChangeBuffer buffer = new ChangeBuffer(List.of());
        step.writeTo(buffer, "r");
        assertEquals(0, buffer.flush().size());
        return step;
    }

    @Test
    void aNullAggregateDeletesTheSessionAsKafkasPutOfNull() {
        // Kafka's put(session, null) is a delete: the session is not stored
        Windowing.RecordStep a = assertNullAggregateNotStored(sessions);
        Windowing.RecordStep b = sessions.recordStep(a.state, false, 7L, 0, 4, 4, MIN);
        Win stored = b.state.windows.get(0);
        assertEquals(List.of(1, 4L, 4L, 7L), List.of(b.state.windows.size(), stored.start, stored.end, stored.agg));
    }

    @Test
    void aNullAggregateDeletesATimeWindow() {
        assertNullAggregateNotStored(new Windowing.Time(10, 10, 0));
    }
}
