package io.streamsdsl.jvm;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The Java port's window rules over all keys of one aggregation, record by record, as the Python
 * kernel ({@code streamsdsl.semantics.kernels.AggregateKernel}) runs them with the record cache
 * flushed after every record: what {@code tests/jvm/test_kernel_differential.py} compares with
 * the Python kernel, without Spark. One process answers many cases on stdin/stdout:
 *
 * <pre>
 * case session|time|sliding|unwindowed a b c onClose   (gap grace _ | size advance grace | d grace _ | _ _ _)
 * rec key ts valueNull
 * end            → one "out key start end value|null ts" line per forwarded record, "dropped n", "done"
 * </pre>
 */
final class KernelReplay {
    private static final Agg COUNT = new Agg(false, false, new Agg.Op[] {Agg.Op.COUNT}, Agg.Merge.ADD, "count");

    private KernelReplay() {
    }

    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        PrintStream out = new PrintStream(System.out, false, StandardCharsets.UTF_8);
        Windowing windowing = null;
        boolean onClose = false;
        List<String[]> records = new ArrayList<>();
        for (String line = in.readLine(); line != null; line = in.readLine()) {
            String[] f = line.trim().split(" ");
            switch (f[0]) {
                case "case" -> {
                    onClose = f[5].equals("1");
                    long a = Long.parseLong(f[2]), b = Long.parseLong(f[3]), c = Long.parseLong(f[4]);
                    windowing = switch (f[1]) {
                        case "session" -> new Windowing.Session(a, b, !onClose);
                        case "time" -> new Windowing.Time(a, b, c);
                        case "sliding" -> new Sliding(a, b);
                        default -> new Windowing.Unwindowed();
                    };
                    records.clear();
                }
                case "rec" -> records.add(f);
                case "end" -> {
                    run(windowing, onClose, records, out);
                    out.println("done");
                    out.flush();
                }
                default -> throw new IllegalArgumentException("unknown line: " + line);
            }
        }
    }

    private static void run(Windowing windowing, boolean onClose, List<String[]> records, PrintStream out) {
        Map<String, Windowing.KeyState> states = new LinkedHashMap<>();
        long streamTime = -1;
        long dropped = 0;
        for (String[] r : records) {
            String key = r[1];
            long ts = Long.parseLong(r[2]);
            boolean valueNull = r[3].equals("1");
            streamTime = windowing.advanceStreamTime(streamTime, ts, valueNull);
            Windowing.KeyState before = states.getOrDefault(key, Windowing.KeyState.empty());
            Windowing.RecordStep step = windowing.recordStep(before, valueNull, null, 0, ts, streamTime, COUNT);
            dropped += step.step.dropped;
            store(states, key, step.state);
            if (onClose) {
                List<Map.Entry<Win, String>> closing = new ArrayList<>();
                for (Win w : step.closed) closing.add(Map.entry(w, key));
                for (String other : new ArrayList<>(states.keySet())) {
                    if (other.equals(key)) continue;
                    Windowing.CloseStep close = windowing.closeStep(states.get(other), streamTime);
                    store(states, other, close.state);
                    for (Win w : close.closed) closing.add(Map.entry(w, other));
                }
                Comparator<Map.Entry<Win, String>> order = Comparator.comparing(Map.Entry::getKey, windowing.finalOrder());
                closing.sort(order.thenComparing(Map.Entry::getValue));
                for (Map.Entry<Win, String> e : closing) print(out, e.getValue(), e.getKey(), false);
            } else {
                ChangeBuffer cache = new ChangeBuffer(before.windows);
                step.writeTo(cache, null);
                for (ChangeBuffer.Flushed f : cache.flush()) {
                    boolean tomb = ChangeBuffer.isTombstone(f.window());
                    Win w = tomb ? new Win(f.bounds().start(), f.bounds().end(), null, f.bounds().end()) : f.window();
                    print(out, key, w, tomb);
                }
            }
        }
        out.println("dropped " + dropped);
    }

    private static void store(Map<String, Windowing.KeyState> states, String key, Windowing.KeyState state) {
        if (state.windows.isEmpty()) states.remove(key);
        else states.put(key, state);
    }

    private static void print(PrintStream out, String key, Win w, boolean tombstone) {
        out.println("out " + key + " " + w.start + " " + w.end + " " + (tombstone || w.agg == null ? "null" : w.agg)
            + " " + w.ts);
    }
}
