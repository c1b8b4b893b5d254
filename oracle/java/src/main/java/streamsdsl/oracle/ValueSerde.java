package streamsdsl.oracle;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;

import org.apache.kafka.common.serialization.Deserializer;
import org.apache.kafka.common.serialization.Serde;
import org.apache.kafka.common.serialization.Serializer;

/**
 * The oracle topology's default value serde: a String or a Long (or null, a tombstone), tagged
 * with one byte ('s' + UTF-8, 'l' + 8 bytes big-endian), so that one topology can hold both.
 */
public final class ValueSerde implements Serde<Object> {
    @Override
    public Serializer<Object> serializer() {
        return (topic, value) -> {
            if (value == null) {
                return null;
            }
            if (value instanceof Long) {
                return ByteBuffer.allocate(9).put((byte) 'l').putLong((Long) value).array();
            }
            if (value instanceof String) {
                byte[] text = ((String) value).getBytes(StandardCharsets.UTF_8);
                return ByteBuffer.allocate(text.length + 1).put((byte) 's').put(text).array();
            }
            throw new IllegalArgumentException("the oracle's values are Strings or Longs, not " + value.getClass());
        };
    }

    @Override
    public Deserializer<Object> deserializer() {
        return (topic, bytes) -> {
            if (bytes == null) {
                return null;
            }
            if (bytes[0] == 'l') {
                return ByteBuffer.wrap(bytes, 1, 8).getLong();
            }
            return new String(bytes, 1, bytes.length - 1, StandardCharsets.UTF_8);
        };
    }
}
