package io.streamsdsl.jvm;

import org.apache.spark.sql.Column;
import org.apache.spark.sql.types.DataTypes;

/**
 * Whether a record's bytes are one JSON text (RFC 8259) in valid UTF-8: the check a
 * {@code Serdes.Json()} source makes of every record before the plan reads it. The in-process
 * engine checks the same with Python's {@code json.loads(data.decode("utf-8"))} restricted to
 * RFC 8259 (no {@code NaN} or {@code Infinity}); duplicate object keys are valid, as there.
 *
 * Arrays and objects nest at most {@code Contract.JSON_MAX_DEPTH} deep.
 *
 * <p>One pass over the bytes without building anything and without recursion, which is what
 * makes it cheap: Spark's {@code try_parse_json} builds a Variant of every record. The plan
 * calls it as Spark calls its own helpers ({@link Expressions#staticCall}): a direct call in the
 * generated code, without a user-defined function's conversions. The containers open at a depth
 * below 64 are bits of a {@code long}; an array holds deeper ones, allocated only for them.
 * Null is valid (a null value is a tombstone, not bytes to read).
 */
public final class JsonCheck {
    private JsonCheck() {
    }

    /** The check as a Column of a boolean that is true for valid bytes (and for null). */
    public static Column valid(Column bytes) {
        return Expressions.staticCall(JsonCheck.class, "validOrNull", DataTypes.BooleanType, false, bytes);
    }

    /** True for null and for one JSON text. */
    public static boolean validOrNull(byte[] data) {
        return data == null || isValid(data);
    }

    /** True when {@code b} is exactly one JSON text, surrounded by JSON white space at most. */
    public static boolean isValid(byte[] b) {
        final int n = b.length;
        long objects = 0L; // bit d: the container at depth d is an object (d < 64)
        byte[] deep = null; // the same for depths from 64: 1 for an object
        int depth = 0;
        int i = space(b, 0);
        while (true) {
            // a value starts at i
            if (i >= n) {
                return false;
            }
            int c = b[i];
            if (c == '{' || c == '[') {
                if (depth == Contract.JSON_MAX_DEPTH) {
                    return false;
                }
                i = space(b, i + 1);
                if (i < n && b[i] == (c == '{' ? '}' : ']')) {
                    i++;
                } else {
                    boolean object = c == '{';
                    if (depth < 64) {
                        objects = object ? objects | (1L << depth) : objects & ~(1L << depth);
                    } else {
                        if (deep == null || depth - 64 == deep.length) {
                            deep = deep == null ? new byte[64] : java.util.Arrays.copyOf(deep, deep.length * 2);
                        }
                        deep[depth - 64] = (byte) (object ? 1 : 0);
                    }
                    depth++;
                    if (c == '{') {
                        i = member(b, i);
                        if (i < 0) {
                            return false;
                        }
                    }
                    continue;
                }
            } else if (c == '"') {
                i = string(b, i);
            } else if (c == 't') {
                i = literal(b, i, "true");
            } else if (c == 'f') {
                i = literal(b, i, "false");
            } else if (c == 'n') {
                i = literal(b, i, "null");
            } else {
                i = number(b, i);
            }
            // after a value, closing as many containers as end here
            while (true) {
                if (i < 0) {
                    return false;
                }
                i = space(b, i);
                if (depth == 0) {
                    return i == n;
                }
                if (i >= n) {
                    return false;
                }
                int d = depth - 1;
                boolean top = d < 64 ? (objects & (1L << d)) != 0 : deep[d - 64] == 1;
                if (b[i] == ',') {
                    i = space(b, i + 1);
                    if (top) {
                        i = member(b, i);
                    }
                    break;
                }
                if (b[i] == (top ? '}' : ']')) {
                    depth--;
                    i++;
                    continue;
                }
                return false;
            }
            if (i < 0) {
                return false;
            }
        }
    }

    /** Past an object member's name and colon (and the white space after it), or -1. */
    private static int member(byte[] b, int i) {
        if (i >= b.length || b[i] != '"') {
            return -1;
        }
        i = string(b, i);
        if (i < 0) {
            return -1;
        }
        i = space(b, i);
        if (i >= b.length || b[i] != ':') {
            return -1;
        }
        return space(b, i + 1);
    }

    private static int space(byte[] b, int i) {
        while (i < b.length) {
            byte c = b[i];
            if (c != ' ' && c != '\t' && c != '\n' && c != '\r') {
                break;
            }
            i++;
        }
        return i;
    }

    private static int literal(byte[] b, int i, String word) {
        if (i + word.length() > b.length) {
            return -1;
        }
        for (int k = 0; k < word.length(); k++) {
            if (b[i + k] != word.charAt(k)) {
                return -1;
            }
        }
        return i + word.length();
    }

    private static int digits(byte[] b, int i) {
        int start = i;
        while (i < b.length && b[i] >= '0' && b[i] <= '9') {
            i++;
        }
        return i == start ? -1 : i;
    }

    /** {@code -? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?} */
    private static int number(byte[] b, int i) {
        if (i < b.length && b[i] == '-') {
            i++;
        }
        if (i >= b.length) {
            return -1;
        }
        if (b[i] == '0') {
            i++;
        } else {
            i = digits(b, i);
            if (i < 0) {
                return -1;
            }
        }
        if (i < b.length && b[i] == '.') {
            i = digits(b, i + 1);
            if (i < 0) {
                return -1;
            }
        }
        if (i < b.length && (b[i] == 'e' || b[i] == 'E')) {
            i++;
            if (i < b.length && (b[i] == '+' || b[i] == '-')) {
                i++;
            }
            i = digits(b, i);
        }
        return i;
    }

    private static boolean hex(byte c) {
        return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
    }

    private static boolean continuation(byte[] b, int i) {
        return i < b.length && (b[i] & 0xC0) == 0x80;
    }

    /** Past a string that starts at the quote at {@code i}, or -1; its bytes valid UTF-8. */
    private static int string(byte[] b, int i) {
        final int n = b.length;
        i++;
        while (i < n) {
            int c = b[i] & 0xFF;
            if (c == '"') {
                return i + 1;
            }
            if (c < 0x20) {
                return -1;
            }
            if (c == '\\') {
                if (i + 1 >= n) {
                    return -1;
                }
                byte e = b[i + 1];
                if (e == 'u') {
                    if (i + 5 >= n || !hex(b[i + 2]) || !hex(b[i + 3]) || !hex(b[i + 4]) || !hex(b[i + 5])) {
                        return -1;
                    }
                    i += 6;
                } else if (e == '"' || e == '\\' || e == '/' || e == 'b' || e == 'f' || e == 'n' || e == 'r'
                        || e == 't') {
                    i += 2;
                } else {
                    return -1;
                }
            } else if (c < 0x80) {
                i++;
            } else {
                i = utf8(b, i, c);
                if (i < 0) {
                    return -1;
                }
            }
        }
        return -1;
    }

    /** Past one multi-byte UTF-8 sequence led by {@code c} at {@code i}, or -1 (overlong forms,
     * surrogates and code points above U+10FFFF are invalid, as Python's strict decoder says). */
    private static int utf8(byte[] b, int i, int c) {
        if (c >= 0xC2 && c <= 0xDF) {
            return continuation(b, i + 1) ? i + 2 : -1;
        }
        if (c >= 0xE0 && c <= 0xEF) {
            if (i + 2 >= b.length) {
                return -1;
            }
            int c1 = b[i + 1] & 0xFF;
            int low = c == 0xE0 ? 0xA0 : 0x80;
            int high = c == 0xED ? 0x9F : 0xBF;
            return c1 >= low && c1 <= high && continuation(b, i + 2) ? i + 3 : -1;
        }
        if (c >= 0xF0 && c <= 0xF4) {
            if (i + 3 >= b.length) {
                return -1;
            }
            int c1 = b[i + 1] & 0xFF;
            int low = c == 0xF0 ? 0x90 : 0x80;
            int high = c == 0xF4 ? 0x8F : 0xBF;
            return c1 >= low && c1 <= high && continuation(b, i + 2) && continuation(b, i + 3) ? i + 4 : -1;
        }
        return -1;
    }
}
