package io.streamsdsl.jvm;

import java.util.Iterator;
import org.apache.spark.TaskContext;
import org.apache.spark.api.java.function.FlatMapGroupsFunction;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.streaming.OutputMode;
import org.apache.spark.sql.streaming.StatefulProcessor;
import org.apache.spark.sql.streaming.TimeMode;
import org.apache.spark.sql.streaming.TimerValues;
import org.apache.spark.util.TaskCompletionListener;
import scala.jdk.javaapi.CollectionConverters;

/**
 * A replay's JVM operator as {@code flatMapGroups}: in the driver's batch run a processor's state
 * arrives and leaves as rows and its clock is the plan's columns, so it never touches its handle
 * (no state, no timers). A batch {@code transformWithState} would still open a RocksDB store per
 * task (and delete it with a spawned {@code rm -rf}); this calls the same processor per key instead:
 * {@code init} once per task (update mode, no time mode, as that batch run), {@code handleInputRows}
 * with no processing time and no watermark (-1, as there), {@code close} when the task completes.
 */
final class ReplayHost implements FlatMapGroupsFunction<Row, Row, Row> {
    private static final long serialVersionUID = 1L;

    /** No clock: what a batch {@code transformWithState} without a time mode passes. */
    static final TimerValues NO_TIME = new TimerValues() {
        @Override
        public long getCurrentProcessingTimeInMs() {
            return -1L;
        }

        @Override
        public long getCurrentWatermarkInMs() {
            return -1L;
        }
    };

    private final StatefulProcessor<Row, Row, Row> processor;
    private transient boolean ready;

    ReplayHost(StatefulProcessor<Row, Row, Row> processor) {
        this.processor = processor;
    }

    @Override
    public Iterator<Row> call(Row key, Iterator<Row> rows) {
        if (!ready) {
            processor.init(OutputMode.Update(), TimeMode.None());
            TaskContext task = TaskContext.get();
            if (task != null) task.addTaskCompletionListener((TaskCompletionListener) context -> processor.close());
            ready = true;
        }
        return CollectionConverters.asJava(processor.handleInputRows(key, CollectionConverters.asScala(rows), NO_TIME));
    }
}
