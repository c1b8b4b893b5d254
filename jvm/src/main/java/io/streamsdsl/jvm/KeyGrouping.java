package io.streamsdsl.jvm;

import org.apache.spark.sql.Column;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Encoders;
import org.apache.spark.sql.KeyValueGroupedDataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.types.StructType;

/**
 * An operator input grouped by one of its columns for {@code transformWithState}, the key a row
 * {@code (key)}: {@code df.groupBy(column).as(keyEncoder, rowEncoder)}, the relational form of
 * {@code df.groupByKey(r -> Row(r.get(i)), keyEncoder)}. The two group alike and hold the same key
 * schema in the state store, but a key function makes Spark deserialize every input row into a
 * {@link Row} once more just to call it (an {@code AppendColumns} operator before the shuffle: 8 %
 * of the executor's samples in P9's enrichment); the column is read where it is.
 */
final class KeyGrouping {
    /** The field name of the key row (part of the state store's key schema in a checkpoint). */
    static final String KEY = "key";

    private KeyGrouping() {
    }

    /** {@code df} grouped by its column {@code keyIdx}, named {@link #KEY} in the key row. */
    static KeyValueGroupedDataset<Row, Row> byColumn(Dataset<Row> df, int keyIdx) {
        StructType input = df.schema();
        String name = input.fields()[keyIdx].name();
        Column column = df.col(quoted(name));
        StructType keySchema = new StructType().add(KEY, input.fields()[keyIdx].dataType());
        return df.groupBy(name.equals(KEY) ? column : column.as(KEY))
            .as(Encoders.row(keySchema), Encoders.row(input));
    }

    /** {@code name} as a column reference that reads a dot or a backtick in it literally. */
    private static String quoted(String name) {
        return "`" + name.replace("`", "``") + "`";
    }
}
