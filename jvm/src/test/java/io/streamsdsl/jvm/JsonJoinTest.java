package io.streamsdsl.jvm;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;

import org.apache.spark.unsafe.types.UTF8String;
import org.junit.jupiter.api.Test;

/** {@code Joiners.merge()} as the Spark column computes it: the Python joiner's text. */
class JsonJoinTest {
    private static String merge(String left, String right) {
        UTF8String out = JsonJoin.mergeOrNull(left == null ? null : UTF8String.fromString(left),
            right == null ? null : UTF8String.fromString(right));
        return out == null ? null : out.toString();
    }

    @Test
    void theOtherSidesMembersOverThisSides() {
        assertEquals("{\"id\":1,\"name\":\"Ann\"}", merge("{\"id\": 1, \"name\": \"?\"}", "{\"name\": \"Ann\"}"));
    }

    @Test
    void aNullSideGivesTheOtherWrittenCompactAsPythonWritesIt() {
        assertEquals("{\"c\":\"c1\",\"o\":{\"a\":[1,2]}}", merge("{\"c\": \"c1\", \"o\": {\"a\": [1, 2]}}", null));
        assertEquals("{\"b\":2}", merge(null, "{ \"b\" : 2 }"));
        assertNull(merge(null, null));
        assertNull(merge(null, "[2]"));  // not an object: the joiner's error (notObject names it)
    }
}
