package io.streamsdsl.jvm;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.util.ArrayList;
import java.util.List;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.spark.SparkEnv;
import org.apache.spark.deploy.SparkHadoopUtil;

/**
 * The channel that tells every task of a streaming idle-close aggregation when the last record
 * reached the aggregation (its {@code L}): the twin of {@code streamsdsl.compiler.idle_channel},
 * writing the same markers through Hadoop's {@link FileSystem}, so a checkpoint on HDFS or S3
 * works as a local one.
 *
 * <p>Every task of a micro-batch that hands the aggregation a record creates an empty file named
 * {@code <partition>-<batch id>-<batch timestamp>} in the aggregation's directory under the
 * query's checkpoint (a retried micro-batch creates the same name: Spark keeps a batch's timestamp
 * in its offset log), then deletes its partition's markers older than its previous one. A task of
 * micro-batch {@code B} reads {@code L} as the largest timestamp of the markers of micro-batches
 * before {@code B}: each partition's newest one before {@code B} is still there whatever the other
 * tasks of {@code B} do meanwhile. One instance serves one task (the processor makes it in
 * {@code init}); each call reaches the file system at most once per micro-batch.
 */
final class IdleChannel {
    private final String directory;
    private FileSystem fs;
    private Path dir;
    private long recordedBatch = -1;
    private int recordedPartition = -1;
    private long readBatch = -1;
    private long readLast = -1;

    IdleChannel(String directory) {
        this.directory = directory;
    }

    /** A marker's {@code (partition, batch id, batch timestamp)}; {@code null}: not a marker (a checksum file). */
    static long[] parse(String name) {
        String[] parts = name.split("-", -1);
        if (parts.length != 3) return null;
        long[] out = new long[3];
        for (int i = 0; i < 3; i++) {
            if (parts[i].isEmpty() || !parts[i].chars().allMatch(Character::isDigit)) return null;
            out[i] = Long.parseLong(parts[i]);
        }
        return out;
    }

    /** The marker of {@code (partition, batch id, batch timestamp)}. */
    private Path marker(long partition, long batchId, long batchTime) {
        return new Path(dir, partition + "-" + batchId + "-" + batchTime);
    }

    private FileSystem fs() throws IOException {
        if (fs == null) {
            SparkEnv env = SparkEnv.get();
            Configuration conf = env == null ? new Configuration() : SparkHadoopUtil.get().newConfiguration(env.conf());
            dir = new Path(directory);
            fs = dir.getFileSystem(conf);
            fs.mkdirs(dir);
        }
        return fs;
    }

    private List<long[]> markers() throws IOException {
        List<long[]> out = new ArrayList<>();
        for (FileStatus s : fs().listStatus(dir)) {
            long[] m = parse(s.getPath().getName());
            if (m != null) out.add(m);
        }
        return out;
    }

    /** Partition {@code partition}'s task of micro-batch {@code batchId} (processing time
     * {@code batchTime}) handed the aggregation a record. */
    void record(int partition, long batchId, long batchTime) {
        if (recordedPartition == partition && recordedBatch == batchId) return;
        try {
            FileSystem f = fs();
            f.create(marker(partition, batchId, batchTime), true).close();
            long[] newest = null;
            List<long[]> older = new ArrayList<>();
            for (long[] m : markers()) {
                if (m[0] != partition || m[1] >= batchId) continue;
                if (newest == null || m[1] > newest[1]) {
                    if (newest != null) older.add(newest);
                    newest = m;
                } else {
                    older.add(m);
                }
            }
            for (long[] m : older) f.delete(marker(m[0], m[1], m[2]), false);
        } catch (IOException e) {
            throw new UncheckedIOException("idle close: cannot write its marker under " + directory, e);
        }
        recordedPartition = partition;
        recordedBatch = batchId;
    }

    /** {@code L} as of micro-batch {@code batchId}: the processing time of the last micro-batch
     * before it that handed the aggregation a record (-1: none). */
    long lastInputBefore(long batchId) {
        if (readBatch != batchId) {
            long last = -1;
            try {
                for (long[] m : markers()) if (m[1] < batchId) last = Math.max(last, m[2]);
            } catch (IOException e) {
                throw new UncheckedIOException("idle close: cannot read its markers under " + directory, e);
            }
            readBatch = batchId;
            readLast = last;
        }
        return readLast;
    }
}
