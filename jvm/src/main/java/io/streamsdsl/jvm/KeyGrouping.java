package io.streamsdsl.jvm;

import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Encoders;
import org.apache.spark.sql.KeyValueGroupedDataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.types.StructType;

/**
 * An operator's input (or its initial state) grouped by its {@code key} column for
 * {@code transformWithState}, the key a row {@code (key)}: {@code df.groupBy(key).as(keyEncoder,
 * rowEncoder)}, the relational form of {@code df.groupByKey(r -> Row(r.get(i)), keyEncoder)}. The
 * two group alike and hold the same key schema in the state store, but a key function makes Spark
 * deserialize every input row into a {@link Row} once more just to call it (an
 * {@code AppendColumns} operator before the shuffle: 8 % of the executor's samples in P9's
 * enrichment); the column is read where it is.
 */
final class KeyGrouping {
    /** The key column of the contract's rows (and the key row's field in a checkpoint's state schema). */
    static final String KEY = "key";

    private KeyGrouping() {
    }

    /** {@code df} grouped by its {@link #KEY} column. */
    static KeyValueGroupedDataset<Row, Row> byKey(Dataset<Row> df) {
        StructType input = df.schema();
        StructType keySchema = new StructType().add(KEY, input.apply(KEY).dataType());
        return df.groupBy(df.col(KEY)).as(Encoders.row(keySchema), Encoders.row(input));
    }
}
