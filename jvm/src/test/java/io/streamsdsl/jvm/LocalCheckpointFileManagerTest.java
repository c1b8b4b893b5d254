package io.streamsdsl.jvm;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.util.List;
import java.util.stream.Collectors;
import java.util.stream.Stream;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileAlreadyExistsException;
import org.apache.hadoop.fs.Path;
import org.apache.spark.sql.execution.streaming.checkpointing.CheckpointFileManager;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@link LocalCheckpointFileManager}: what Spark's checkpoint writers rely on (a file appears whole
 * on close, under its name only; an existing file is refused unless overwriting is allowed; a
 * cancelled write leaves nothing), without a {@code .crc} beside the file, read back through
 * Spark's manager as before.
 */
class LocalCheckpointFileManagerTest {
    @TempDir
    java.nio.file.Path dir;

    private CheckpointFileManager manager() {
        return new LocalCheckpointFileManager(new Path(dir.toUri()), new Configuration());
    }

    private Path path(String name) {
        return new Path(dir.resolve(name).toUri());
    }

    private static void write(CheckpointFileManager fm, Path p, String text, boolean overwrite) throws IOException {
        CheckpointFileManager.CancellableFSDataOutputStream out = fm.createAtomic(p, overwrite);
        out.write(text.getBytes(StandardCharsets.UTF_8));
        out.close();
    }

    private static String read(CheckpointFileManager fm, Path p) throws IOException {
        try (InputStream in = fm.open(p)) {
            return new String(in.readAllBytes(), StandardCharsets.UTF_8);
        }
    }

    private List<String> names() throws IOException {
        try (Stream<java.nio.file.Path> files = Files.list(dir)) {
            return files.map(f -> f.getFileName().toString()).sorted().collect(Collectors.toList());
        }
    }

    @Test
    void writesTheFileWholeUnderItsNameWithoutAChecksumFile() throws IOException {
        CheckpointFileManager fm = manager();
        assertTrue(fm.isLocal());
        write(fm, path("0"), "v1\n{}", false);
        assertEquals(List.of("0"), names());
        assertEquals("v1\n{}", read(fm, path("0")));
        assertTrue(fm.exists(path("0")));
    }

    @Test
    void refusesAnExistingFileUnlessOverwritingIsAllowed() throws IOException {
        CheckpointFileManager fm = manager();
        write(fm, path("1"), "first", false);
        assertThrows(FileAlreadyExistsException.class, () -> write(fm, path("1"), "second", false));
        assertEquals("first", read(fm, path("1")));
        write(fm, path("1"), "third", true);
        assertEquals("third", read(fm, path("1")));
    }

    @Test
    void overwritingRemovesTheChecksumHadoopWroteForTheOldFile() throws IOException {
        Configuration conf = new Configuration();
        CheckpointFileManager hadoop = CheckpointFileManager.create(new Path(dir.toUri()), conf);
        write(hadoop, path("2.changelog"), "old", false);
        assertTrue(names().contains(".2.changelog.crc"));
        CheckpointFileManager fm = manager();
        write(fm, path("2.changelog"), "new", true);
        assertEquals(List.of("2.changelog"), names());
        assertEquals("new", read(hadoop, path("2.changelog")));  // Hadoop's checked read: no stale checksum
    }

    @Test
    void aCancelledWriteLeavesNothing() throws IOException {
        CheckpointFileManager fm = manager();
        CheckpointFileManager.CancellableFSDataOutputStream out = fm.createAtomic(path("3"), false);
        out.write(new byte[] {1, 2, 3});
        out.cancel();
        assertEquals(List.of(), names());
        assertFalse(fm.exists(path("3")));
    }

    @Test
    void makesDirectoriesWithTheirParentsAndKeepsAnExistingOne() throws IOException {
        CheckpointFileManager fm = manager();
        fm.mkdirs(path("state/0/_stateSchema/default"));
        assertTrue(Files.isDirectory(dir.resolve("state/0/_stateSchema/default")));
        write(fm, path("state/0/_stateSchema/default/0"), "schema", false);
        fm.mkdirs(path("state/0/_stateSchema/default"));
        assertEquals("schema", read(fm, path("state/0/_stateSchema/default/0")));
        assertEquals(List.of("state"), names());
    }

    @Test
    void createsMissingParentDirectories() throws IOException {
        CheckpointFileManager fm = manager();
        write(fm, path("state/0/0/1.changelog"), "x", true);
        assertArrayEquals("x".getBytes(StandardCharsets.UTF_8), Files.readAllBytes(dir.resolve("state/0/0/1.changelog")));
    }
}
