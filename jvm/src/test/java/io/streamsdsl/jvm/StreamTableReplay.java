package io.streamsdsl.jvm;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.HashMap;
import java.util.Map;

/**
 * {@link StreamTableJoin}'s rules over all keys of one stream–table join, record by record, as
 * {@code streamsdsl.semantics.stream_table.stream_table_reference_run} runs them: what
 * {@code tests/jvm/test_kernel_differential.py} compares with the Python kernel, without Spark.
 * One process answers many cases on stdin/stdout:
 *
 * <pre>
 * case inner|left
 * rec stream|table KEY|null VALUE|null TS
 * end → per record "drop REASON" (null_key, null_value) or "out KEY|null LEFT RIGHT|null TS"; then "done"
 * </pre>
 */
final class StreamTableReplay {
    private StreamTableReplay() {
    }

    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        PrintStream out = new PrintStream(System.out, false, StandardCharsets.UTF_8);
        boolean left = false;
        Map<String, StreamTableJoin.TableValue> table = new HashMap<>();
        for (String line = in.readLine(); line != null; line = in.readLine()) {
            String[] f = line.trim().split(" ");
            switch (f[0]) {
                case "case" -> {
                    left = f[1].equals("left");
                    table.clear();
                }
                case "rec" -> {
                    String key = f[2].equals("null") ? null : f[2];
                    String value = f[3].equals("null") ? null : f[3];
                    long ts = Long.parseLong(f[4]);
                    StreamTableJoin.TableValue state = key == null ? null : table.get(key);
                    if (f[1].equals("table")) {
                        if (key == null) {
                            out.println("drop null_key");  // the table source drops it before the join
                            continue;
                        }
                        StreamTableJoin.TableValue next = StreamTableJoin.tableUpdate(state, false, value, ts);
                        if (next == null) table.remove(key);
                        else table.put(key, next);
                        continue;
                    }
                    switch (StreamTableJoin.streamStep(left, key == null, value == null, state)) {
                        case DROPPED -> out.println("drop " + (value == null ? "null_value" : "null_key"));
                        case PAIR -> out.println("out " + key + " " + value + " "
                            + StreamTableJoin.tableValue(key == null, state) + " " + ts);
                        default -> { }
                    }
                }
                case "end" -> {
                    out.println("done");
                    out.flush();
                }
                default -> throw new IllegalArgumentException("unknown line: " + line);
            }
        }
    }
}
