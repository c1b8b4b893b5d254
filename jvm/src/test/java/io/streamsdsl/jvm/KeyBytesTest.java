package io.streamsdsl.jvm;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

/** The key order of on-close ties: a key's serialized bytes, as the key serde writes them. */
class KeyBytesTest {
    @Test
    void stringsAreTheirUtf8Bytes() {
        assertEquals("6162", KeyBytes.hex("string", "ab"));
        assertEquals("c3a9", KeyBytes.hex("string", "\u00e9"));
        assertEquals("7b2261223a317d", KeyBytes.hex("json", "{\"a\":1}"));
    }

    @Test
    void numbersAreBigEndianFixedWidth() {
        assertEquals("000000000000000a", KeyBytes.hex("long", 10L));
        assertEquals("0000000a", KeyBytes.hex("int", 10));
        assertEquals("ffffffff", KeyBytes.hex("int", -1));
        assertEquals("3ff0000000000000", KeyBytes.hex("double", 1.0));
    }

    @Test
    void bytesAreThemselves() {
        assertArrayEquals(new byte[] {1, 2}, KeyBytes.of("bytes", new byte[] {1, 2}));
        assertEquals("0102", KeyBytes.hex("bytes", new byte[] {1, 2}));
    }

    @Test
    void hexOrderIsByteOrder() {
        // Kafka's store orders keys byte-wise: 9 before 10 (not "10" before "9" as text), a
        // negative number (high bit set) after every positive one
        assertTrue(KeyBytes.hex("long", 9L).compareTo(KeyBytes.hex("long", 10L)) < 0);
        assertTrue(KeyBytes.hex("long", 1L << 40).compareTo(KeyBytes.hex("long", -1L)) < 0);
        assertTrue(KeyBytes.hex("string", "a").compareTo(KeyBytes.hex("string", "ab")) < 0);
    }

    @Test
    void anUnknownKindIsRefused() {
        assertThrows(IllegalArgumentException.class, () -> KeyBytes.of("struct", "x"));
    }
}
