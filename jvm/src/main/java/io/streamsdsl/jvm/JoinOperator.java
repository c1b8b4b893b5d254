package io.streamsdsl.jvm;

import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Encoders;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.streaming.OutputMode;
import org.apache.spark.sql.streaming.TimeMode;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.StructType;

/**
 * The joins' entry point Python calls through py4j: {@code JoinOperator.apply(df._jdf, spec, schema)}
 * groups the join's input (both sides' records, {@link JoinSpec}) by its {@code key} column and
 * runs the processor of the spec's {@code join} on it with {@code transformWithState} (the driver's
 * batch replay: per key in {@code flatMapGroups}, {@link ReplayHost}).
 *
 * <p>Every join processor emits the <b>matched pairs</b>, not the joined values: the user's joiner
 * runs afterwards, a batch at a time (or as Spark columns for a built-in joiner). An output row is
 * {@code Contract.OUTPUT_FIELDS} (plus {@code Contract.CARRIED_STATE} in replay, the stream–stream
 * join's replay {@code Contract.CLOSE_THRESHOLD} before it for the held records the plan places; plus
 * {@code Contract.EVENT_TIME_OUT} when a stateful operator is below) where {@code value} is the pair:
 * a struct of the left value and the right value ({@code Contract.PAIR_FIELDS}; a side without a
 * match null); a row that is a tombstone of the join's result has a null {@code value}. Metric rows
 * (drops) and, in replay, the key's carried state ({@code Contract.CARRY}) are rows of the same
 * shape, as for the aggregation operator.
 */
public final class JoinOperator {
    private JoinOperator() {
    }

    public static int protocol() {
        return Contract.PROTOCOL;
    }

    /** The processor of {@code spec.join}; the time mode it needs is {@link JoinProcessor#timers}. */
    static JoinProcessor processor(JoinSpec spec) throws Exception {
        switch (spec.join) {
            case "stream_table":
                return new StreamTableJoinProcessor(spec);
            case "stream_stream":
                return new StreamStreamJoinProcessor(spec);
            case "table_table":
                return new TableTableJoinProcessor(spec);
            case "global_table":
                return new GlobalTableJoinProcessor(spec);
            default:
                throw new IllegalArgumentException(spec.node + ": this jar has no JVM operator for a " + spec.join
                    + " join (a jar of another streamsdsl version?)");
        }
    }

    public static Dataset<Row> apply(Dataset<Row> df, String specJson, String outputSchemaJson) throws Exception {
        StructType input = df.schema();
        JoinSpec spec = new JoinSpec(specJson, input);
        StructType output = (StructType) DataType.fromJson(outputSchemaJson);
        String[] expected = spec.replay ? java.util.Arrays.copyOf(Contract.OUTPUT_FIELDS, Contract.OUTPUT_FIELDS.length + 1)
            : Contract.OUTPUT_FIELDS;
        if (spec.replay) expected[expected.length - 1] = Contract.CARRIED_STATE;
        // the stream-stream join's replay hands held records to the plan with their close threshold
        if (spec.replay && spec.join.equals("stream_stream")) expected = Contract.REPLAY_OUTPUT_FIELDS;
        if (spec.eventTimeOut) {
            expected = java.util.Arrays.copyOf(expected, expected.length + 1);
            expected[expected.length - 1] = Contract.EVENT_TIME_OUT;
        }
        if (!java.util.Arrays.equals(output.fieldNames(), expected)) {
            throw new IllegalArgumentException(spec.node + ": the output row " + java.util.Arrays.toString(output.fieldNames())
                + " is not the contract's " + java.util.Arrays.toString(expected) + " (a jar of another streamsdsl version?)");
        }
        JoinProcessor processor = processor(spec);
        if (spec.replay) return KeyGrouping.byKey(df).flatMapGroups(new ReplayHost(processor), Encoders.row(output));
        if (spec.eventTimeOut) {  // the operators below see a watermark again (the rows' output event time)
            return KeyGrouping.byKey(df).transformWithState(
                processor, Contract.EVENT_TIME_OUT, OutputMode.Update(), Encoders.row(output));
        }
        TimeMode mode = processor.timers() ? TimeMode.EventTime() : TimeMode.None();
        return KeyGrouping.byKey(df).transformWithState(processor, mode, OutputMode.Update(),
            Encoders.row(output));
    }
}
