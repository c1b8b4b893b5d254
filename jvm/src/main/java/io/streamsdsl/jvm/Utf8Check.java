package io.streamsdsl.jvm;

import org.apache.spark.sql.Column;
import org.apache.spark.sql.types.DataTypes;

/**
 * Whether a record's bytes are valid UTF-8, as Python's strict decoder says (overlong forms,
 * surrogates and code points above U+10FFFF are invalid): the check a {@code Serdes.String()}
 * source makes of every key or value before the plan reads it. A direct call in Spark's
 * generated code over the bytes as they are (Spark's {@code try_validate_utf8} needs the bytes
 * cast to a string first); ASCII bytes take one comparison each. Null is valid.
 */
public final class Utf8Check {
    private Utf8Check() {
    }

    /** The check as a Column of a boolean that is true for valid bytes (and for null). */
    public static Column valid(Column bytes) {
        return Expressions.staticCall(Utf8Check.class, "validOrNull", DataTypes.BooleanType, false, bytes);
    }

    /** True for null and for valid UTF-8. */
    public static boolean validOrNull(byte[] b) {
        if (b == null) {
            return true;
        }
        int i = 0;
        final int n = b.length;
        while (i < n) {
            int c = b[i] & 0xFF;
            if (c < 0x80) {
                i++;
            } else {
                i = JsonCheck.utf8(b, i, c);
                if (i < 0) {
                    return false;
                }
            }
        }
        return true;
    }
}
