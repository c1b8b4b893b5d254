package streamsdsl.oracle;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;

import org.apache.kafka.common.serialization.Serde;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.serialization.Serializer;
import org.apache.kafka.streams.kstream.Windowed;

/**
 * What the oracle's sinks write: each key and value as JSON (a String, a Long, or a windowed key
 * as {"key", "start", "end"}), read back as JSON for the output file; null stays null.
 */
final class OutputSerializer implements Serializer<Object> {
    private static final ObjectMapper JSON = new ObjectMapper();

    /** A sink's serde: this serializer; the output is read back as bytes, never through it. */
    static Serde<Object> serde() {
        return Serdes.serdeFrom(new OutputSerializer(), (topic, bytes) -> bytes);
    }

    @Override
    public byte[] serialize(String topic, Object value) {
        if (value == null) {
            return null;
        }
        try {
            if (value instanceof Windowed) {
                Windowed<?> w = (Windowed<?>) value;
                ObjectNode node = JSON.createObjectNode();
                node.set("key", JSON.valueToTree(w.key()));
                node.put("start", w.window().start());
                node.put("end", w.window().end());
                return JSON.writeValueAsBytes(node);
            }
            return JSON.writeValueAsBytes(value);
        } catch (com.fasterxml.jackson.core.JsonProcessingException e) {
            throw new IllegalStateException(e);
        }
    }
}
