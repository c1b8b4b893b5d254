package io.streamsdsl.jvm;

import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.Base64;

import org.apache.spark.sql.Column;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * The message of a source record's deserialization error ({@code log_and_fail}), built in one
 * call when a record fails: a readable line, then the structured payload between
 * {@code [streamsdsl-error]} markers that {@code streamsdsl.errors.RecordError.find} reads. The
 * plan's filter evaluates it only for a record that fails; as one call it keeps the filter's
 * generated code small (built from Spark expressions, the same message made P1's generated loop
 * twice as large and the job 5% slower).
 */
public final class RecordErrors {
    /** The most bytes of a malformed record the payload carries (to say where its JSON breaks). */
    public static final int DATA_PREFIX = 65_536;

    private RecordErrors() {
    }

    /**
     * The message as a Column (see {@link #deserialization}); {@code data} may be a null literal.
     * Declared to Spark as not deterministic, so that a source's check (this message raised for a
     * record that fails) stays in a projection of its own ({@link Expressions}): there Spark reads
     * a column only the message reads (the key, for a value's error) for a failing record only,
     * where a filter reads every column of its condition for every record.
     */
    public static Column deserializationMessage(Column processor, Column cause, Column position, Column topic,
                                                Column partition, Column offset, Column keyJson, Column data) {
        return Expressions.staticCall(RecordErrors.class, "deserialization", DataTypes.StringType, false, false,
                processor, cause, position, topic, partition, offset, keyJson, data);
    }

    /**
     * {@code "<processor>: <cause> (record at topic <t> partition <p> offset <o>) [streamsdsl-error]{...}[/streamsdsl-error]"},
     * a missing topic, partition or offset shown as {@code ?}; the payload holds the kind, the
     * processor, the cause, the position, topic, partition and offset, the key as JSON text and
     * (for {@code data}) the record's first {@link #DATA_PREFIX} bytes in base64 and its length,
     * each only when known. {@code position}, {@code partition} and {@code offset} are decimal
     * text.
     */
    public static UTF8String deserialization(UTF8String processor, UTF8String cause, UTF8String position,
                                             UTF8String topic, UTF8String partition, UTF8String offset,
                                             UTF8String keyJson, byte[] data) {
        StringBuilder out = new StringBuilder(256);
        out.append(processor).append(": ").append(cause).append(" (record at topic ").append(orUnknown(topic))
                .append(" partition ").append(orUnknown(partition)).append(" offset ").append(orUnknown(offset))
                .append(") [streamsdsl-error]{");
        string(out, "kind", "RecordDeserializationError");
        string(out.append(','), "processor", processor.toString());
        string(out.append(','), "cause", cause.toString());
        number(out, "position", position);
        if (topic != null) {
            string(out.append(','), "topic", topic.toString());
        }
        number(out, "partition", partition);
        number(out, "offset", offset);
        if (keyJson != null) {
            string(out.append(','), "key_json", keyJson.toString());
        }
        if (data != null) {
            byte[] prefix = data.length > DATA_PREFIX ? Arrays.copyOf(data, DATA_PREFIX) : data;
            string(out.append(','), "data_b64", Base64.getEncoder().encodeToString(prefix));
            out.append(",\"data_length\":").append(data.length);
        }
        out.append("}[/streamsdsl-error]");
        return UTF8String.fromBytes(out.toString().getBytes(StandardCharsets.UTF_8));
    }

    private static String orUnknown(UTF8String text) {
        return text == null ? "?" : text.toString();
    }

    private static void number(StringBuilder out, String name, UTF8String digits) {
        if (digits != null) {
            out.append(",\"").append(name).append("\":").append(digits);
        }
    }

    /** {@code "name":"value"}, the value escaped as JSON text. */
    private static void string(StringBuilder out, String name, String value) {
        out.append('"').append(name).append("\":\"");
        for (int i = 0; i < value.length(); i++) {
            char c = value.charAt(i);
            if (c == '"' || c == '\\') {
                out.append('\\').append(c);
            } else if (c < 0x20) {
                out.append(String.format("\\u%04x", (int) c));
            } else {
                out.append(c);
            }
        }
        out.append('"');
    }
}
