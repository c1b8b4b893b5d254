package io.streamsdsl.jvm;

import java.io.File;
import java.io.FileOutputStream;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.StandardCopyOption;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FSDataOutputStream;
import org.apache.hadoop.fs.FileAlreadyExistsException;
import org.apache.hadoop.fs.Path;
import org.apache.spark.sql.execution.streaming.checkpointing.FileContextBasedCheckpointFileManager;

/**
 * Spark's checkpoint file manager ({@code spark.sql.streaming.checkpointFileManagerClass}) that
 * writes a checkpoint file on the local file system with Java's file API: the same temporary file,
 * then the same rename into place (atomic; refused when the file exists and overwriting is not
 * allowed, as Hadoop's), without Hadoop's checksum file beside it and without setting the file's
 * permission afterwards. Without Hadoop's native library (PySpark ships none) Hadoop's local file
 * system sets a new file's permission by running {@code chmod} in a child process, for the file and
 * again for its {@code .crc}: about 30 ms a checkpoint file on the shared 2-core machine, where a
 * micro-batch of P9's enrichment writes six (the offset and commit logs, a changelog per state
 * store). The new file's permission is the process umask's, as any file Java creates. Other file
 * systems (HDFS, object stores), reading, listing and deleting: Spark's {@link
 * FileContextBasedCheckpointFileManager}, unchanged. A file this manager overwrites loses a
 * checksum file Hadoop wrote for it earlier (a stale one would fail Hadoop's checked read).
 */
public final class LocalCheckpointFileManager extends FileContextBasedCheckpointFileManager {
    private final boolean local;

    public LocalCheckpointFileManager(Path path, Configuration hadoopConf) {
        super(path, hadoopConf);
        this.local = isLocal();
    }

    @Override
    public FSDataOutputStream createTempFile(Path path) {
        if (!local) return super.createTempFile(path);
        try {
            File file = file(path);
            File parent = file.getParentFile();
            if (parent != null) Files.createDirectories(parent.toPath());
            return new FSDataOutputStream(new FileOutputStream(file), null);
        } catch (IOException e) {
            throw LocalCheckpointFileManager.<RuntimeException>sneaky(e);
        }
    }

    @Override
    public void renameTempFile(Path srcPath, Path dstPath, boolean overwriteIfPossible) {
        if (!local) {
            super.renameTempFile(srcPath, dstPath, overwriteIfPossible);
            return;
        }
        try {
            java.nio.file.Path src = file(srcPath).toPath();
            java.nio.file.Path dst = file(dstPath).toPath();
            if (!overwriteIfPossible && Files.exists(dst)) {
                throw new FileAlreadyExistsException("Failed to rename " + srcPath + " to " + dstPath
                        + " as the destination exists");
            }
            if (!Files.exists(src)) {
                throw new java.io.FileNotFoundException("Failed to rename as " + srcPath + " was not found");
            }
            Files.deleteIfExists(dst.resolveSibling("." + dst.getFileName() + ".crc"));
            Files.move(src, dst, StandardCopyOption.ATOMIC_MOVE);
        } catch (IOException e) {
            throw LocalCheckpointFileManager.<RuntimeException>sneaky(e);
        }
    }

    /** A checkpoint directory (the offset log's, a source's, a state store's schema and metadata),
     * with its parents: on the local file system with Java's file API (Hadoop's would run {@code
     * chmod} in a child process for it), elsewhere as Spark's manager makes it; an existing
     * directory is kept, as Hadoop's. */
    @Override
    public void mkdirs(Path path) {
        if (!local) {
            super.mkdirs(path);
            return;
        }
        try {
            Files.createDirectories(file(path).toPath());
        } catch (IOException e) {
            throw LocalCheckpointFileManager.<RuntimeException>sneaky(e);
        }
    }

    private static File file(Path path) {
        return new File(path.toUri().getPath());
    }

    /** Rethrow a checked exception unchanged (Spark's callers catch Hadoop's and Java's IO exceptions). */
    @SuppressWarnings("unchecked")
    private static <E extends Throwable> E sneaky(Throwable e) throws E {
        throw (E) e;
    }
}
