package io.streamsdsl.jvm;

import java.nio.charset.StandardCharsets;
import java.util.LinkedHashMap;
import java.util.Map;
import org.apache.spark.sql.Column;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * {@code Joiners.merge()} as a Spark column ({@code streamsdsl.dsl.joiners}): two JSON objects
 * merged, the right one's members over the left one's, as Python's {@code {**left, **right}} of
 * the decoded objects: the left's members in their order (a duplicate key once, at its first
 * place, with its last value), a right member replacing the value of the same key in place, the
 * right's other members after them. A null side gives the other one (re-written as below). Each member's JSON text is
 * copied without its insignificant white space (the Python joiner re-encodes the decoded values:
 * the same text for the compact JSON streamsdsl writes). A side that is not an object is the
 * joiner's error ({@link #mergeError}). The input is valid JSON (a source checks it,
 * {@link JsonCheck}; a Python step writes it).
 */
public final class JsonJoin {
    private JsonJoin() {
    }

    /** The merge as a Column of JSON text (null when a side is not an object: see {@link #notObject}). */
    public static Column merge(Column left, Column right) {
        return Expressions.staticCall(JsonJoin.class, "mergeOrNull", DataTypes.StringType, true, left, right);
    }

    /** A Column of the Python type name of the first side that is not a JSON object ("this: list"), null when both are. */
    public static Column notObject(Column left, Column right) {
        return Expressions.staticCall(JsonJoin.class, "notObjectOrNull", DataTypes.StringType, true, left, right);
    }

    /** The joiner's error for a pair {@link #notObject} names, as a Column of the record error's message. */
    public static Column mergeError(Column processor, Column which, Column keyJson, Column position) {
        return Expressions.staticCall(JsonJoin.class, "mergeErrorMessage", DataTypes.StringType, false, false,
            processor, which, keyJson, position);
    }

    public static UTF8String mergeOrNull(UTF8String left, UTF8String right) {
        if (left == null && right == null) return null;
        // a null side gives the other, its members' text compact as the Python joiner writes it
        String l = left == null ? "{}" : left.toString(), r = right == null ? "{}" : right.toString();
        if (typeOf(l) != null || typeOf(r) != null) return null;
        Map<String, String[]> members = new LinkedHashMap<>();
        members(l, members);
        members(r, members);
        StringBuilder out = new StringBuilder(l.length() + r.length());
        out.append('{');
        boolean first = true;
        for (String[] m : members.values()) {
            if (!first) out.append(',');
            first = false;
            out.append(m[0]).append(':').append(m[1]);
        }
        return UTF8String.fromString(out.append('}').toString());
    }

    public static UTF8String notObjectOrNull(UTF8String left, UTF8String right) {
        String l = left == null ? null : typeOf(left.toString());
        if (l != null) return UTF8String.fromString("this:" + l);
        String r = right == null ? null : typeOf(right.toString());
        return r == null ? null : UTF8String.fromString("the other:" + r);
    }

    /** The message of {@code streamsdsl.errors.UserFunctionError} for the joiner (the payload
     * {@code RecordError.find} reads), {@code which} as {@link #notObjectOrNull} gives it. */
    public static UTF8String mergeErrorMessage(UTF8String processor, UTF8String which, UTF8String keyJson,
                                               UTF8String position) {
        String[] w = which.toString().split(":", 2);
        String cause = "Joiners.merge() joins two JSON objects (dicts); " + w[0] + " value is a " + w[1]
            + ". Use Joiners.pair() to keep both values, or a joiner of your own.";
        StringBuilder out = new StringBuilder(256);
        out.append(processor).append(": the joiner raised ").append(cause).append(" (record at position ")
            .append(position).append(") [streamsdsl-error]{");
        string(out, "kind", "UserFunctionError");
        string(out.append(','), "processor", processor.toString());
        string(out.append(','), "cause", cause);
        string(out.append(','), "function", "joiner");
        if (keyJson != null) string(out.append(','), "key_json", keyJson.toString());
        if (position != null) out.append(",\"position\":").append(position);
        out.append("}[/streamsdsl-error]");
        return UTF8String.fromBytes(out.toString().getBytes(StandardCharsets.UTF_8));
    }

    /** The Python type of the JSON text's value (list, str, bool, int, float), null for an object or null. */
    static String typeOf(String json) {
        int i = space(json, 0);
        if (i >= json.length()) return null;
        char c = json.charAt(i);
        switch (c) {
            case '{':
                return null;
            case '[':
                return "list";
            case '"':
                return "str";
            case 't':
            case 'f':
                return "bool";
            case 'n':
                return null;
            default:
                int end = scalarEnd(json, i);
                for (int k = i; k < end; k++) {
                    char d = json.charAt(k);
                    if (d == '.' || d == 'e' || d == 'E') return "float";
                }
                return "int";
        }
    }

    /** Adds the object's members to {@code into} (decoded key → its JSON text and the value's compact text). */
    static void members(String json, Map<String, String[]> into) {
        int i = space(json, 0) + 1;  // past '{'
        while (true) {
            i = space(json, i);
            if (json.charAt(i) == '}') return;
            if (json.charAt(i) == ',') {
                i = space(json, i + 1);
            }
            int keyEnd = stringEnd(json, i);
            String keyText = json.substring(i, keyEnd);
            i = space(json, keyEnd);
            i = space(json, i + 1);  // past ':'
            StringBuilder value = new StringBuilder();
            i = value(json, i, value);
            String key = decode(keyText);
            String[] old = into.get(key);
            if (old == null) into.put(key, new String[] {keyText, value.toString()});
            else old[1] = value.toString();
        }
    }

    /** Copies the value at {@code i} without white space outside strings; returns the index after it. */
    private static int value(String s, int i, StringBuilder out) {
        int depth = 0;
        while (true) {
            char c = s.charAt(i);
            if (c == '"') {
                int end = stringEnd(s, i);
                out.append(s, i, end);
                i = end;
            } else if (c == '{' || c == '[') {
                depth++;
                out.append(c);
                i++;
            } else if (c == '}' || c == ']') {
                if (depth == 0) return i;
                depth--;
                out.append(c);
                i++;
            } else if (c == ',') {
                if (depth == 0) return i;
                out.append(c);
                i++;
            } else if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
                i++;
            } else if (c == ':') {
                out.append(c);
                i++;
            } else {
                int end = scalarEnd(s, i);
                out.append(s, i, end);
                i = end;
            }
            if (depth == 0 && i < s.length()) {
                int j = space(s, i);
                char n = s.charAt(j);
                if (n == ',' || n == '}' || n == ']') return j;
            }
        }
    }

    private static int scalarEnd(String s, int i) {
        while (i < s.length()) {
            char c = s.charAt(i);
            if (c == ',' || c == '}' || c == ']' || c == ' ' || c == '\t' || c == '\n' || c == '\r') break;
            i++;
        }
        return i;
    }

    /** The index after the string starting at {@code i} (a quote). */
    private static int stringEnd(String s, int i) {
        i++;
        while (true) {
            char c = s.charAt(i);
            if (c == '\\') i += 2;
            else if (c == '"') return i + 1;
            else i++;
        }
    }

    private static int space(String s, int i) {
        while (i < s.length()) {
            char c = s.charAt(i);
            if (c != ' ' && c != '\t' && c != '\n' && c != '\r') break;
            i++;
        }
        return i;
    }

    /** A JSON string's text (quotes included) decoded. */
    static String decode(String text) {
        if (text.indexOf('\\') < 0) return text.substring(1, text.length() - 1);
        StringBuilder out = new StringBuilder(text.length());
        for (int i = 1; i < text.length() - 1; i++) {
            char c = text.charAt(i);
            if (c != '\\') {
                out.append(c);
                continue;
            }
            char e = text.charAt(++i);
            switch (e) {
                case 'b' -> out.append('\b');
                case 'f' -> out.append('\f');
                case 'n' -> out.append('\n');
                case 'r' -> out.append('\r');
                case 't' -> out.append('\t');
                case 'u' -> {
                    out.append((char) Integer.parseInt(text.substring(i + 1, i + 5), 16));
                    i += 4;
                }
                default -> out.append(e);
            }
        }
        return out.toString();
    }

    /** {@code "name":"value"}, the value escaped as JSON text. */
    private static void string(StringBuilder out, String name, String value) {
        out.append('"').append(name).append("\":\"");
        for (int i = 0; i < value.length(); i++) {
            char c = value.charAt(i);
            if (c == '"' || c == '\\') out.append('\\').append(c);
            else if (c < 0x20) out.append(String.format("\\u%04x", (int) c));
            else out.append(c);
        }
        out.append('"');
    }
}
