package io.streamsdsl.jvm;

/**
 * One record's clock on the replay (the test driver's batch run), where the plan supplies only
 * every input's stream time before the record ({@code Contract.STREAM_TIMES_BEFORE}): the mirror of
 * the clock in the Python kernel's {@code AggregateKernel.process}
 * ({@code streamsdsl/semantics/kernels.py}): {@code advance_stream_time}, then {@code store_clock}
 * when the inputs keep their own stream times (a cogroup that does not emit on close: the plan
 * then gives one time per input, otherwise one time for all).
 *
 * <p>{@link #storeClock} is {@code store_clock} with the record cache on: this operator always
 * has it (the compiler runs an aggregation with {@code statestore.cache.max.bytes = 0} on the
 * Python operator), so {@code store_clock}'s uncached branch
 * ({@code WindowingRules.uncached_store_time_unit}) has no port.
 */
final class Clock {
    /** Stream time after the record (the record's input's). */
    final long streamTime;
    /** The stream time before the record that decides what the store still shows ({@code store_time}). */
    final long storeTime;
    /** The stream time windows expire by ({@code expiry_time}; the record's own stream time when
     * {@code store_clock} gives {@code None}). */
    final long expiryTime;

    private Clock(long streamTime, long storeTime, long expiryTime) {
        this.streamTime = streamTime;
        this.storeTime = storeTime;
        this.expiryTime = expiryTime;
    }

    /**
     * The clock of a record of input {@code input} ({@code valueNull}: its value is null) at
     * {@code ts}, given every input's stream time before it ({@code timesBefore}: one per input
     * when the inputs keep their own stream times, else one for all).
     */
    static Clock of(Windowing windowing, long[] timesBefore, int input, long ts, boolean valueNull) {
        int slot = timesBefore.length > 1 ? input : 0;
        long streamTime = windowing.advanceStreamTime(timesBefore[slot], ts, valueNull);
        long[] clock = storeClock(windowing, timesBefore, slot, streamTime);
        return new Clock(streamTime, clock[1], clock[0]);
    }

    /**
     * {@code store_clock}: when one store serves several inputs that keep their own stream times
     * (Kafka's cogroup), the {@code {expiryTime, storeTime}} a record of input {@code slot} works
     * with; {@code timesBefore}: every input's stream time before the record, {@code streamTime}:
     * the slot's after it.
     */
    static long[] storeClock(Windowing windowing, long[] timesBefore, int slot, long streamTime) {
        long beforeTime = timesBefore[slot];
        if (timesBefore.length < 2) return new long[] {streamTime, beforeTime};
        long maxBefore = Long.MIN_VALUE, max = Long.MIN_VALUE, min = Long.MAX_VALUE;
        for (int i = 0; i < timesBefore.length; i++) {
            long t = i == slot ? streamTime : timesBefore[i];
            maxBefore = Math.max(maxBefore, timesBefore[i]);
            max = Math.max(max, t);
            min = Math.min(min, t);
        }
        // one store for all inputs, its time the fastest input's: a session it has closed is
        // final, whichever input and key the record has
        if (windowing.storeTimeExpiresWindows()) return new long[] {max, maxBefore};
        // one record cache for all inputs: a window stays in it until every input's stream time
        // has expired it
        if (windowing.cacheKeepsExpiredWindows()) return new long[] {min, beforeTime};
        return new long[] {streamTime, beforeTime};
    }
}
