package io.streamsdsl.jvm;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.HashMap;
import java.util.Map;

/**
 * {@link TableTableJoin}'s rules and the global-table join's ({@link GlobalTableJoinProcessor#streamStep})
 * over all keys of one join, record by record, as the Python kernels' steps run them: what
 * {@code tests/jvm/test_kernel_differential.py} compares with them, without Spark. One process
 * answers many cases on stdin/stdout:
 *
 * <pre>
 * case table inner|left|outer MATERIALIZED(0|1) CACHED(0|1) LEFT_FILTERED(0|1) RIGHT_FILTERED(0|1)
 * rec left|right KEY|null VALUE|null TOMBSTONE(null|0|1) TS
 * case global inner|left
 * rec table KEY|null VALUE|null TS            (the table's key)
 * rec stream KEY|null TABLE_KEY|null VALUE|null TS
 * end → per record "drop", "out KEY|null LEFT|null RIGHT|null TS" or "delete KEY TS"; then "done"
 * </pre>
 */
final class TableTableReplay {
    private TableTableReplay() {
    }

    private static String cell(String s) {
        return s.equals("null") ? null : s;
    }

    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        PrintStream out = new PrintStream(System.out, false, StandardCharsets.UTF_8);
        TableTableJoin.Spec spec = null;
        boolean global = false, left = false;
        Map<String, TableTableJoin.State> states = new HashMap<>();
        Map<String, StreamTableJoin.TableValue> table = new HashMap<>();
        for (String line = in.readLine(); line != null; line = in.readLine()) {
            String[] f = line.trim().split(" ");
            switch (f[0]) {
                case "case" -> {
                    states.clear();
                    table.clear();
                    global = f[1].equals("global");
                    left = f[2].equals("left");
                    if (!global) {
                        spec = new TableTableJoin.Spec(TableTableJoin.Spec.kind(f[2]), f[3].equals("1"), f[4].equals("1"),
                            f[5].equals("1"), f[6].equals("1"));
                    }
                }
                case "rec" -> {
                    if (global) {
                        global(out, table, left, f);
                        continue;
                    }
                    String key = cell(f[2]);
                    Boolean tombstone = f[4].equals("null") ? null : f[4].equals("1");
                    TableTableJoin.Step step = TableTableJoin.step(spec, states.get(key), f[1].equals("left"), key == null,
                        cell(f[3]), tombstone, Long.parseLong(f[5]));
                    if (step.outcome() != TableTableJoin.Outcome.DROPPED) {
                        if (step.state().empty()) states.remove(key);
                        else states.put(key, step.state());
                    }
                    switch (step.outcome()) {
                        case DROPPED -> out.println("drop");
                        case PAIR -> out.println("out " + key + " " + step.left() + " " + step.right() + " " + step.ts());
                        case TOMBSTONE -> out.println("delete " + key + " " + step.ts());
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

    private static void global(PrintStream out, Map<String, StreamTableJoin.TableValue> table, boolean left, String[] f) {
        if (f[1].equals("table")) {
            String key = cell(f[2]);
            if (key == null) return;
            StreamTableJoin.TableValue next = StreamTableJoin.tableUpdate(table.get(key), false, cell(f[3]),
                Long.parseLong(f[4]));
            if (next == null) table.remove(key);
            else table.put(key, next);
            return;
        }
        String key = cell(f[2]), tableKey = cell(f[3]), value = cell(f[4]);
        StreamTableJoin.TableValue found = tableKey == null ? null : table.get(tableKey);
        switch (GlobalTableJoinProcessor.streamStep(left, key == null, tableKey == null, value == null, found)) {
            case DROPPED -> out.println("drop");
            case PAIR -> out.println("out " + key + " " + value + " " + (found == null ? null : found.value()) + " " + f[5]);
            default -> { }
        }
    }
}
