package io.streamsdsl.jvm;

import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Encoders;
import org.apache.spark.sql.KeyValueGroupedDataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.streaming.OutputMode;
import org.apache.spark.sql.streaming.TimeMode;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.StructType;

/**
 * The entry point Python calls through py4j: {@code AggregateOperator.apply(df._jdf, spec, schema)}
 * groups the operator input by its {@code key} column and runs {@link AggregateProcessor} on it with
 * {@code transformWithState} (streaming: event time and timers); the driver's batch replay runs the
 * same processor per key in {@code flatMapGroups} ({@link ReplayHost}: stream time from the plan).
 */
public final class AggregateOperator {
    /** The version of the Python-JVM contract (the spec JSON and the columns; generated `Contract`). */
    public static final int PROTOCOL = Contract.PROTOCOL;

    private AggregateOperator() {
    }

    public static int protocol() {
        return PROTOCOL;
    }

    public static Dataset<Row> apply(Dataset<Row> df, String specJson, String outputSchemaJson) throws Exception {
        return apply(df, specJson, outputSchemaJson, null);
    }

    /**
     * {@link #apply(Dataset, String, String)} of a streaming query that starts from {@code initial}
     * (a continued backfill's state: rows {@code (key, state)}, the state in the replay's carried
     * layout), which {@link AggregateProcessor#handleInitialState} stores in the query's first batch.
     */
    public static Dataset<Row> apply(Dataset<Row> df, String specJson, String outputSchemaJson, Dataset<Row> initial)
            throws Exception {
        StructType input = df.schema();
        Spec spec = new Spec(specJson, input);
        StructType output = (StructType) DataType.fromJson(outputSchemaJson);
        String[] expected = spec.replay ? Contract.REPLAY_OUTPUT_FIELDS : Contract.OUTPUT_FIELDS;
        if (spec.eventTimeOut) {
            expected = java.util.Arrays.copyOf(expected, expected.length + 1);
            expected[expected.length - 1] = Contract.EVENT_TIME_OUT;
        }
        if (!java.util.Arrays.equals(output.fieldNames(), expected)) {
            throw new IllegalArgumentException(spec.node + ": the output row " + java.util.Arrays.toString(output.fieldNames())
                + " is not the contract's " + java.util.Arrays.toString(expected) + " (a jar of another streamsdsl version?)");
        }
        if (spec.idleCloseMs > 0 && (spec.replay || spec.eventTimeOut)) {
            throw new IllegalArgumentException(spec.node + ": idle close runs here only in a streaming query without a "
                + "stateful operator below (the Python operator runs the others)");
        }
        if (spec.idleCloseMs > 0 && spec.idleChannel == null) {
            throw new IllegalArgumentException(spec.node + ": idle close needs the directory of its markers under the "
                + "query's checkpoint (idle_channel in the spec)");
        }
        if (initial != null && (spec.replay || spec.idleCloseMs > 0)) {
            throw new IllegalArgumentException(spec.node + ": an initial state is taken by a streaming query without "
                + "idle close only");
        }
        KeyValueGroupedDataset<Row, Row> grouped = KeyGrouping.byKey(df);
        if (spec.replay) return grouped.flatMapGroups(new ReplayHost(new AggregateProcessor(spec)), Encoders.row(output));
        KeyValueGroupedDataset<Row, Row> initialGrouped = initial == null ? null : KeyGrouping.byKey(initial);
        if (spec.eventTimeOut) {
            // the operators below see a watermark again (the rows' output event time)
            if (initialGrouped != null) {
                return grouped.transformWithState(new AggregateProcessor(spec), OutputMode.Update(), initialGrouped,
                    Contract.EVENT_TIME_OUT, Encoders.row(output), Encoders.row(initial.schema()),
                    Encoders.row(output), Encoders.row(initial.schema()));
            }
            return grouped.transformWithState(
                new AggregateProcessor(spec), Contract.EVENT_TIME_OUT, OutputMode.Update(), Encoders.row(output));
        }
        TimeMode mode = spec.replay ? TimeMode.None() : spec.idleCloseMs > 0 ? TimeMode.ProcessingTime() : TimeMode.EventTime();
        if (initialGrouped != null) {
            return grouped.transformWithState(new AggregateProcessor(spec), mode, OutputMode.Update(), initialGrouped,
                Encoders.row(output), Encoders.row(initial.schema()));
        }
        return grouped.transformWithState(new AggregateProcessor(spec), mode, OutputMode.Update(), Encoders.row(output));
    }
}
