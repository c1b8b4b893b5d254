package streamsdsl.oracle;

import java.io.IOException;

import com.fasterxml.jackson.databind.ObjectMapper;

import org.apache.kafka.common.serialization.Deserializer;
import org.apache.kafka.common.serialization.Serde;
import org.apache.kafka.common.serialization.Serializer;

/**
 * The serde of a key made by a user function (map, flat_map, select_key, a grouping selector):
 * the key as JSON text, as streamsdsl holds a key a Python function returned (docs/differences.md,
 * Serdes and values). Kafka Streams orders on-close windows, suppressed records and a join's
 * non-joined results by these bytes, so the oracle must write the same ones.
 */
public final class JsonKeySerde implements Serde<Object> {
    private static final ObjectMapper JSON = new ObjectMapper();

    @Override
    public Serializer<Object> serializer() {
        return (topic, key) -> {
            try {
                return key == null ? null : JSON.writeValueAsBytes(key);
            } catch (IOException e) {
                throw new IllegalStateException(e);
            }
        };
    }

    @Override
    public Deserializer<Object> deserializer() {
        return (topic, bytes) -> {
            try {
                return bytes == null ? null : JSON.readValue(bytes, Object.class);
            } catch (IOException e) {
                throw new IllegalStateException(e);
            }
        };
    }
}
