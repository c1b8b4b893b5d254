package io.streamsdsl.jvm;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

/**
 * {@link StreamJoin} record by record, as the three hosts of the Python kernel
 * ({@code streamsdsl.semantics.stream_stream.StreamJoinKernel}) drive it: what
 * {@code tests/jvm/test_kernel_differential.py} compares with the Python kernel, without Spark.
 * One process answers many cases on stdin/stdout:
 *
 * <pre>
 * case KIND BEFORE AFTER GRACE FIX MODE
 *     KIND inner|left|outer; FIX 0|1 (KIP-633's spurious-result fix); MODE
 *     kafka     the whole task ({@link JoinTask}: Kafka's scan of held records over all keys);
 *     replay    the driver's operator: per record Kafka's stream, scan and store times (the plan's
 *               columns), the key's held records expired at the scan time before a record with a
 *               value, then the record; at the end every key closed at the run's times;
 *     streaming the streaming operator, one record per micro-batch: the key closed at the
 *               watermark (the stream time before the record), again at the record's time when it
 *               is in order, then the record; at the end every key's timer at 10^9
 * rec SIDE KEY|null TS VALUE|null      SIDE 0 (left) | 1 (right)
 * end → per record its expired held records ("out"), "step -|REASON", its own "out" lines;
 *       then the end's "out" lines and "done"; "out KEY LEFT|null RIGHT|null TS"
 * </pre>
 */
final class JoinReplay {
    static final long FLUSH = 1_000_000_000L;

    private JoinReplay() {
    }

    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        PrintStream out = new PrintStream(System.out, false, StandardCharsets.UTF_8);
        StreamJoin join = null;
        String mode = null;
        List<String[]> records = new ArrayList<>();
        for (String line = in.readLine(); line != null; line = in.readLine()) {
            String[] f = line.trim().split(" ");
            switch (f[0]) {
                case "case" -> {
                    join = new StreamJoin(StreamJoin.kind(f[1]), Long.parseLong(f[2]), Long.parseLong(f[3]),
                        Long.parseLong(f[4]), f[5].equals("1"));
                    mode = f[6];
                    records.clear();
                }
                case "rec" -> records.add(f);
                case "end" -> {
                    run(join, mode, records, out);
                    out.println("done");
                    out.flush();
                }
                default -> throw new IllegalArgumentException("unknown line: " + line);
            }
        }
    }

    private static String cell(String token) {
        return token.equals("null") ? null : token;
    }

    private static void run(StreamJoin join, String mode, List<String[]> records, PrintStream out) {
        if (mode.equals("kafka")) {
            JoinTask task = new JoinTask(join);
            for (String[] r : records) {
                JoinTask.Result res = task.process(Integer.parseInt(r[1]), cell(r[2]), cell(r[4]), Long.parseLong(r[3]));
                out.println("step " + (res.dropped() == null ? "-" : res.dropped()));
                for (JoinTask.Out o : res.outputs()) print(out, o.key(), o.left(), o.right(), o.ts());
            }
            return;
        }
        boolean replay = mode.equals("replay");
        Map<String, StreamJoin.KeyState<String>> states = new LinkedHashMap<>();
        long streamTime = -1;
        long scanTime = -1;
        long[] storeTime = {-1, -1};
        for (String[] r : records) {
            int side = Integer.parseInt(r[1]);
            String key = cell(r[2]);
            long ts = Long.parseLong(r[3]);
            String value = cell(r[4]);
            long watermark = streamTime;
            streamTime = Math.max(streamTime, ts);
            boolean valid = key != null && value != null;
            if (valid && ts == streamTime) scanTime = Math.max(scanTime, ts);
            if (valid) storeTime[side] = Math.max(storeTime[side], ts);
            if (key == null) {
                step(out, join, null, side, null, value, ts, ts, ts);
                continue;
            }
            StreamJoin.KeyState<String> state = states.computeIfAbsent(key, k -> new StreamJoin.KeyState<>());
            if (replay) {
                if (value != null && join.holds()) expire(out, key, join.close(state, scanTime, storeTime[0], storeTime[1]));
                step(out, join, state, side, key, value, ts, streamTime, storeTime[1 - side]);
            } else {
                expire(out, key, join.close(state, watermark));
                long now = Math.max(watermark, ts);
                if (value != null && join.holds() && ts == now) expire(out, key, join.close(state, now));
                step(out, join, state, side, key, value, ts, now, now);
            }
        }
        // the end of the run: every key's held records, keys in their order (as the Python harness;
        // the hosts expire keys in an order of their own: a state exists here for a dropped record's key)
        for (Map.Entry<String, StreamJoin.KeyState<String>> e : new TreeMap<>(states).entrySet()) {
            List<StreamJoin.Held<String>> held = replay ? join.close(e.getValue(), scanTime, storeTime[0], storeTime[1])
                : join.close(e.getValue(), FLUSH);
            expire(out, e.getKey(), held);
        }
    }

    private static void step(PrintStream out, StreamJoin join, StreamJoin.KeyState<String> state, int side, String key,
                             String value, long ts, long streamTime, long otherStoreTime) {
        StreamJoin.Step<String> step = join.step(state, side, key == null, value, ts, streamTime, otherStoreTime);
        out.println("step " + (step.dropped() == null ? "-" : step.dropped()));
        for (StreamJoin.Pair<String> p : step.outputs()) print(out, key, p.left(), p.right(), p.ts());
    }

    private static void expire(PrintStream out, String key, List<StreamJoin.Held<String>> held) {
        for (StreamJoin.Held<String> h : held) {
            if (h.side() == StreamJoin.LEFT) print(out, key, h.value(), null, h.ts());
            else print(out, key, null, h.value(), h.ts());
        }
    }

    private static void print(PrintStream out, String key, String left, String right, long ts) {
        out.println("out " + key + " " + left + " " + right + " " + ts);
    }
}
