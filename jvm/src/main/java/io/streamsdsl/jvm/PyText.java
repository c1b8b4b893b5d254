package io.streamsdsl.jvm;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.math.BigDecimal;
import java.util.Iterator;
import java.util.Map;

/**
 * Python's {@code str()} of a key as the Python operator sees it (the serde's Python value), for
 * the {@code _final_key_order} column: on-close records of one stream-time step are ordered by it.
 */
final class PyText {
    private static final ObjectMapper JSON = new ObjectMapper();

    private PyText() {
    }

    /** {@code str(serde.from_internal(cell))} for the key serdes the JVM operator takes. */
    static String str(String keyKind, Object cell) {
        switch (keyKind) {
            case "string":
                return (String) cell;
            case "long":
            case "int":
                return cell.toString();
            case "double":
                return floatRepr((Double) cell);
            case "bytes":
                return bytesRepr((byte[]) cell);
            default:
                try {
                    JsonNode node = JSON.readTree((String) cell);
                    return node.isTextual() ? node.textValue() : repr(node);
                } catch (Exception e) {
                    return String.valueOf(cell);
                }
        }
    }

    static String repr(JsonNode n) {
        if (n == null || n.isNull()) return "None";
        if (n.isBoolean()) return n.booleanValue() ? "True" : "False";
        if (n.isIntegralNumber()) return n.bigIntegerValue().toString();
        if (n.isNumber()) return floatRepr(n.doubleValue());
        if (n.isTextual()) return strRepr(n.textValue());
        StringBuilder sb = new StringBuilder();
        if (n.isArray()) {
            sb.append('[');
            for (int i = 0; i < n.size(); i++) {
                if (i > 0) sb.append(", ");
                sb.append(repr(n.get(i)));
            }
            return sb.append(']').toString();
        }
        sb.append('{');
        boolean first = true;
        for (Iterator<Map.Entry<String, JsonNode>> it = n.fields(); it.hasNext(); ) {
            Map.Entry<String, JsonNode> e = it.next();
            if (!first) sb.append(", ");
            first = false;
            sb.append(strRepr(e.getKey())).append(": ").append(repr(e.getValue()));
        }
        return sb.append('}').toString();
    }

    /** Python's {@code repr(float)}: shortest round-trip digits, exponent outside [1e-4, 1e16). */
    static String floatRepr(double d) {
        if (Double.isNaN(d)) return "nan";
        if (Double.isInfinite(d)) return d > 0 ? "inf" : "-inf";
        if (d == 0) return (1 / d < 0) ? "-0.0" : "0.0";
        String sign = d < 0 ? "-" : "";
        BigDecimal bd = new BigDecimal(Double.toString(Math.abs(d))).stripTrailingZeros();
        String digits = bd.unscaledValue().toString();
        int exp = digits.length() - 1 - bd.scale();
        if (exp >= -4 && exp < 16) {
            String plain = bd.toPlainString();
            return sign + (plain.contains(".") ? plain : plain + ".0");
        }
        String mantissa = digits.length() > 1 ? digits.charAt(0) + "." + digits.substring(1) : digits;
        String e = String.valueOf(Math.abs(exp));
        return sign + mantissa + "e" + (exp < 0 ? "-" : "+") + (e.length() < 2 ? "0" + e : e);
    }

    static String strRepr(String s) {
        char q = (s.indexOf('\'') >= 0 && s.indexOf('"') < 0) ? '"' : '\'';
        StringBuilder sb = new StringBuilder().append(q);
        s.codePoints().forEach(c -> {
            if (c == q || c == '\\') sb.append('\\').appendCodePoint(c);
            else if (c == '\n') sb.append("\\n");
            else if (c == '\r') sb.append("\\r");
            else if (c == '\t') sb.append("\\t");
            else if (c < 0x20 || c == 0x7f) sb.append(String.format("\\x%02x", c));
            else sb.appendCodePoint(c);
        });
        return sb.append(q).toString();
    }

    static String bytesRepr(byte[] b) {
        boolean single = false, dbl = false;
        for (byte x : b) {
            if (x == '\'') single = true;
            if (x == '"') dbl = true;
        }
        char q = single && !dbl ? '"' : '\'';
        StringBuilder sb = new StringBuilder("b").append(q);
        for (byte x : b) {
            int c = x & 0xff;
            if (c == q || c == '\\') sb.append('\\').append((char) c);
            else if (c == '\n') sb.append("\\n");
            else if (c == '\r') sb.append("\\r");
            else if (c == '\t') sb.append("\\t");
            else if (c < 0x20 || c >= 0x7f) sb.append(String.format("\\x%02x", c));
            else sb.append((char) c);
        }
        return sb.append(q).toString();
    }
}
