package io.streamsdsl.jvm;

import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import org.junit.jupiter.api.Test;

/** The JSON validity check of a {@code Serdes.Json()} source: RFC 8259 in strict UTF-8. */
class JsonCheckTest {
    private static boolean valid(String text) {
        return JsonCheck.isValid(text.getBytes(StandardCharsets.UTF_8));
    }

    private static boolean valid(int... bytes) {
        byte[] b = new byte[bytes.length];
        for (int i = 0; i < bytes.length; i++) {
            b[i] = (byte) bytes[i];
        }
        return JsonCheck.isValid(b);
    }

    @Test
    void oneValueOfEveryKind() {
        for (String text : new String[] {"0", "-0", "12", "-1.5e+3", "1E9", "0.25", "true", "false", "null", "\"\"",
                "\"a\\\"b\\\\c\\/\\b\\f\\n\\r\\t\\u00e9\\uD800\"", "{}", "[]", " {\"a\": [1, {\"b\": null}], \"a\": 2} ",
                "\t[\n1\r,2]\n", "\"\u00e9\u20ac\uD83D\uDE00\"", "[".repeat(20) + "1" + "]".repeat(20)}) {
            assertTrue(valid(text), text);
        }
    }

    @Test
    void notJson() {
        for (String text : new String[] {"", " ", "01", "-", "1.", ".5", "1e", "+1", "NaN", "Infinity", "-Infinity",
                "tru", "nul", "True", "'a'", "\"a", "\"\\x\"", "\"\\u12G4\"", "\"a\tb\"", "{", "[", "[1,]", "{\"a\"}",
                "{\"a\":}", "{\"a\":1,}", "{a:1}", "[1 2]", "1 2", "{} {}", "[}", "{]", "]", "\ufeff{}", "{\"a\":1]"}) {
            assertFalse(valid(text), text);
        }
    }

    @Test
    void strictUtf8InsideStrings() {
        assertTrue(valid('"', 0xC3, 0xA9, '"'));
        assertFalse(valid('"', 0xC3, '"'));                 // truncated
        assertFalse(valid('"', 0xC0, 0xAF, '"'));           // overlong '/'
        assertFalse(valid('"', 0xE0, 0x80, 0xAF, '"'));     // overlong
        assertFalse(valid('"', 0xED, 0xA0, 0x80, '"'));     // an encoded surrogate
        assertTrue(valid('"', 0xF4, 0x8F, 0xBF, 0xBF, '"')); // U+10FFFF
        assertFalse(valid('"', 0xF4, 0x90, 0x80, 0x80, '"')); // above U+10FFFF
        assertFalse(valid('"', 0xFF, '"'));
        assertFalse(valid(0xC3, 0xA9));                      // outside a string
    }

    @Test
    void nestingIsLimited() {
        int max = Contract.JSON_MAX_DEPTH;
        assertTrue(valid("[".repeat(max) + "]".repeat(max)));
        assertTrue(valid("{\"a\":".repeat(max - 1) + "[]" + "}".repeat(max - 1)));
        assertFalse(valid("[".repeat(max + 1) + "]".repeat(max + 1)));
        assertFalse(valid("[".repeat(100_000) + "]".repeat(100_000)));
        assertFalse(valid("[".repeat(max) + "]".repeat(max - 1)));
    }

    @Test
    void nullIsATombstoneAndValid() {
        assertTrue(JsonCheck.validOrNull(null));
    }

    @Test
    void containersDeeperThan64AlternateKinds() {
        // depths from 64 are held in an array, the others in a long's bits: mixed kinds across both
        StringBuilder open = new StringBuilder();
        StringBuilder close = new StringBuilder();
        for (int d = 0; d < 200; d++) {
            open.append(d % 3 == 0 ? "{\"k\":" : "[");
            close.insert(0, d % 3 == 0 ? "}" : "]");
        }
        assertTrue(valid(open + "1" + close));
        assertTrue(valid(open + "[1,{\"a\":[]}]" + close));
        // a closer of the other kind at depth 150, and at depth 10
        String wrong = close.toString();
        int at = wrong.length() - 151;
        wrong = wrong.substring(0, at) + (wrong.charAt(at) == '}' ? ']' : '}') + wrong.substring(at + 1);
        assertFalse(valid(open + "1" + wrong));
        String wrong10 = close.toString();
        int at10 = wrong10.length() - 11;
        wrong10 = wrong10.substring(0, at10) + (wrong10.charAt(at10) == '}' ? ']' : '}') + wrong10.substring(at10 + 1);
        assertFalse(valid(open + "1" + wrong10));
        // an object's member after a comma at depth 100 needs its name
        assertFalse(valid("[".repeat(100) + "{\"a\":1,2}" + "]".repeat(100)));
        assertTrue(valid("[".repeat(100) + "{\"a\":1,\"b\":2}" + "]".repeat(100)));
    }
}
