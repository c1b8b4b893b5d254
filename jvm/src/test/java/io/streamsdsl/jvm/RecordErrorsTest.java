package io.streamsdsl.jvm;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.nio.charset.StandardCharsets;

import org.apache.spark.unsafe.types.UTF8String;
import org.junit.jupiter.api.Test;

class RecordErrorsTest {
    private static UTF8String u(String s) {
        return s == null ? null : UTF8String.fromString(s);
    }

    @Test
    void theLineAndThePayload() {
        UTF8String message = RecordErrors.deserialization(u("SRC"), u("bad \"key\"\\\n"), u("1099511627781"),
                u("orders"), u("1"), u("5"), u("[\"k\"]"), null);
        assertEquals("SRC: bad \"key\"\\\n (record at topic orders partition 1 offset 5) [streamsdsl-error]"
                + "{\"kind\":\"RecordDeserializationError\",\"processor\":\"SRC\",\"cause\":\"bad \\\"key\\\"\\\\\\u000a\","
                + "\"position\":1099511627781,\"topic\":\"orders\",\"partition\":1,\"offset\":5,"
                + "\"key_json\":\"[\\\"k\\\"]\"}[/streamsdsl-error]", message.toString());
    }

    @Test
    void unknownPartsAreLeftOutOfThePayloadAndShownAsQuestionMarks() {
        UTF8String message = RecordErrors.deserialization(u("SRC"), u("c"), null, null, null, null, null,
                "{\"a\" 1}".getBytes(StandardCharsets.UTF_8));
        assertEquals("SRC: c (record at topic ? partition ? offset ?) [streamsdsl-error]"
                + "{\"kind\":\"RecordDeserializationError\",\"processor\":\"SRC\",\"cause\":\"c\","
                + "\"data_b64\":\"eyJhIiAxfQ==\",\"data_length\":7}[/streamsdsl-error]", message.toString());
    }

    @Test
    void theDataIsCutToItsPrefix() {
        byte[] data = new byte[RecordErrors.DATA_PREFIX + 10];
        String message = RecordErrors.deserialization(u("S"), u("c"), u("0"), u("t"), u("0"), u("0"), null, data)
                .toString();
        String b64 = message.substring(message.indexOf("\"data_b64\":\"") + 12, message.indexOf("\",\"data_length\""));
        assertEquals(RecordErrors.DATA_PREFIX, java.util.Base64.getDecoder().decode(b64).length);
        assertEquals(true, message.endsWith("\"data_length\":" + (RecordErrors.DATA_PREFIX + 10) + "}[/streamsdsl-error]"));
    }
}
