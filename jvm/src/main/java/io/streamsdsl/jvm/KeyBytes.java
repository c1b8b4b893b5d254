package io.streamsdsl.jvm;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;

/**
 * A key's serialized bytes as lowercase hex, for the {@code _final_key_order} column: on-close
 * records of one stream-time step and one window are ordered by the key's bytes, as Kafka
 * Streams' store orders them (the Python operator computes the same with the key serde's
 * {@code serialize}). A JSON key's bytes are its column text, as the plan holds it.
 */
final class KeyBytes {
    private static final char[] HEX = "0123456789abcdef".toCharArray();

    private KeyBytes() {
    }

    static byte[] of(String keyKind, Object cell) {
        switch (keyKind) {
            case "string":
            case "json":
                return ((String) cell).getBytes(StandardCharsets.UTF_8);
            case "long":
                return ByteBuffer.allocate(8).putLong(((Number) cell).longValue()).array();
            case "int":
                return ByteBuffer.allocate(4).putInt(((Number) cell).intValue()).array();
            case "double":
                return ByteBuffer.allocate(8).putDouble(((Number) cell).doubleValue()).array();
            case "bytes":
                return (byte[]) cell;
            default:
                throw new IllegalArgumentException("unknown key kind: " + keyKind);
        }
    }

    static String hex(String keyKind, Object cell) {
        byte[] bytes = of(keyKind, cell);
        char[] out = new char[bytes.length * 2];
        for (int i = 0; i < bytes.length; i++) {
            out[2 * i] = HEX[(bytes[i] >> 4) & 0xf];
            out[2 * i + 1] = HEX[bytes[i] & 0xf];
        }
        return new String(out);
    }
}
