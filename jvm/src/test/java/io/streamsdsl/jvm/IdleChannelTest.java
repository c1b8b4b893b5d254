package io.streamsdsl.jvm;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;

import java.io.File;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.List;
import java.util.stream.Collectors;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The markers through which a streaming idle-close aggregation's tasks learn when it last had a
 * record (the same cases as tests/test_idle_close.py's of {@code streamsdsl.compiler.idle_channel}).
 */
class IdleChannelTest {
    @TempDir
    Path tmp;

    private List<String> markers(Path dir) {
        return Arrays.stream(dir.toFile().list()).filter(n -> IdleChannel.parse(n) != null).sorted()
            .collect(Collectors.toList());
    }

    @Test
    void lastInputIsTheNewestMarkerOfAnEarlierBatch() {
        Path dir = tmp.resolve("streamsdsl/idle/store");
        IdleChannel p0 = new IdleChannel(dir.toString());
        IdleChannel p1 = new IdleChannel(dir.toString());
        assertEquals(-1, p0.lastInputBefore(0));
        p0.record(0, 0, 1000);
        p1.record(1, 1, 1500);
        IdleChannel reader = new IdleChannel(dir.toString());
        assertEquals(-1, reader.lastInputBefore(0));  // batch 0's own records do not count
        assertEquals(1000, reader.lastInputBefore(1));
        assertEquals(1500, new IdleChannel(dir.toString()).lastInputBefore(2));
        // once per micro-batch: a marker written later in the same batch is not read again
        p0.record(0, 2, 2000);
        assertEquals(1500, new IdleChannel(dir.toString()).lastInputBefore(2));
        assertEquals(1000, reader.lastInputBefore(1));
        assertEquals(2000, reader.lastInputBefore(3));
    }

    @Test
    void aPartitionKeepsItsTwoNewestMarkers() throws Exception {
        Path dir = tmp.resolve("idle");
        IdleChannel p0 = new IdleChannel(dir.toString());
        for (int b = 0; b < 4; b++) new IdleChannel(dir.toString()).record(0, b, 100 * b);
        new IdleChannel(dir.toString()).record(3, 2, 250);
        assertEquals(List.of("0-2-200", "0-3-300", "3-2-250"), markers(dir));
        // a retried micro-batch creates the same marker again; a reader of batch 3 still sees batch 2's
        p0.record(0, 3, 300);
        assertEquals(List.of("0-2-200", "0-3-300", "3-2-250"), markers(dir));
        assertEquals(250, new IdleChannel(dir.toString()).lastInputBefore(3));
        Files.writeString(dir.resolve("notes.txt"), "not a marker");
        assertEquals(300, new IdleChannel(dir.toString()).lastInputBefore(9));
    }

    @Test
    void markerNames() {
        assertArrayEquals(new long[] {3, 17, 1764441600000L}, IdleChannel.parse("3-17-1764441600000"));
        assertNull(IdleChannel.parse(".3-17-1764441600000.crc"));
        assertNull(IdleChannel.parse("3-17"));
        assertNull(IdleChannel.parse("3--17-5"));
        assertNull(IdleChannel.parse(new File("a-b-c").getName()));
    }
}
