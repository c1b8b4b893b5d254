package io.streamsdsl.jvm;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The Java port's rules over all keys of one aggregation, record by record, as the Python kernel
 * ({@code streamsdsl.semantics.kernels.AggregateKernel}) runs them with the record cache flushed
 * after every record: each record's {@link Clock} (one stream time per input for a cogroup that
 * does not emit on close, as the replay plan supplies them), the window kind's record and close
 * rules ({@link Windowing}, {@link Sliding}), the built-in functions ({@link Agg}), the record
 * cache ({@link ChangeBuffer}) or emit on close. What {@code tests/jvm/test_kernel_differential.py}
 * compares with the Python kernel, without Spark. One process answers many cases on stdin/stdout:
 *
 * <pre>
 * case KIND a b c ON_CLOSE INIT MERGE NUMBER OP...
 *     KIND session (gap grace _) | time (size advance grace) | sliding (d grace _) | unwindowed (_ _ _);
 *     ON_CLOSE 0|1; INIT zero|null (the initializer); MERGE ADD|MIN|MAX|RSUM|RMIN|RMAX|none (sessions'
 *     merger); NUMBER long|double; OP, one per input: COUNT|SUM|MIN|MAX|RSUM|RMIN|RMAX ({@link Agg.Op})
 * rec key ts input value|null
 * idle → every key idle: its open windows close ({@link Windowing#idleFloor}, the Python kernel's
 *       {@code close_idle}); its records are then judged by its floor
 * end → per record "step dropped metric|-" and one "out key start end value|null ts" per forwarded
 *       record; then "done"
 * </pre>
 */
final class KernelReplay {
    private KernelReplay() {
    }

    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        PrintStream out = new PrintStream(System.out, false, StandardCharsets.UTF_8);
        Windowing windowing = null;
        Agg agg = null;
        boolean onClose = false;
        List<String[]> records = new ArrayList<>();
        for (String line = in.readLine(); line != null; line = in.readLine()) {
            String[] f = line.trim().split(" ");
            switch (f[0]) {
                case "case" -> {
                    onClose = f[5].equals("1");
                    long a = Long.parseLong(f[2]), b = Long.parseLong(f[3]), c = Long.parseLong(f[4]);
                    windowing = switch (f[1]) {
                        case "session" -> new Windowing.Session(a, b, !onClose);  // as the compiler's windowing_of
                        case "time" -> new Windowing.Time(a, b, c);
                        case "sliding" -> new Sliding(a, b);
                        case "unwindowed" -> new Windowing.Unwindowed();
                        default -> throw new IllegalArgumentException("unknown window kind: " + line);
                    };
                    Agg.Op[] ops = Arrays.stream(f, 9, f.length).map(Agg.Op::valueOf).toArray(Agg.Op[]::new);
                    agg = new Agg(f[8].equals("double"), f[6].equals("null"), ops,
                        f[7].equals("none") ? null : Agg.Merge.valueOf(f[7]), "replay");
                    records.clear();
                }
                case "rec", "idle" -> records.add(f);
                case "end" -> {
                    run(windowing, agg, onClose, records, out);
                    out.println("done");
                    out.flush();
                }
                default -> throw new IllegalArgumentException("unknown line: " + line);
            }
        }
    }

    private static void run(Windowing windowing, Agg agg, boolean onClose, List<String[]> records, PrintStream out) {
        Map<String, Windowing.KeyState> states = new LinkedHashMap<>();
        // the replay plan's clock: one stream time per input for a cogroup that does not emit on
        // close (Kafka's aggregate processor per input), else one for all inputs
        long[] times = new long[agg.ops.length > 1 && !onClose ? agg.ops.length : 1];
        Arrays.fill(times, -1);
        Map<String, Long> floors = new LinkedHashMap<>();
        for (String[] r : records) {
            if (r[0].equals("idle")) {
                idle(windowing, agg, states, floors, Arrays.stream(times).max().getAsLong(), out);
                continue;
            }
            String key = r[1];
            long ts = Long.parseLong(r[2]);
            int input = Integer.parseInt(r[3]);
            boolean valueNull = r[4].equals("null");
            Long x = valueNull ? null
                : agg.dbl ? Double.doubleToRawLongBits(Double.parseDouble(r[4])) : Long.valueOf(r[4]);
            Clock clock = Clock.of(windowing, times.clone(), input, ts, valueNull);
            times[times.length > 1 ? input : 0] = clock.streamTime;
            Windowing.KeyState before = states.getOrDefault(key, Windowing.KeyState.empty());
            long floor = floors.getOrDefault(key, -1L);
            Windowing.RecordStep step = windowing.recordStep(before, valueNull, x, input, ts,
                Math.max(clock.streamTime, floor), clock.storeTime, Math.max(clock.expiryTime, floor), agg);
            if (floor >= 0 && floor <= Arrays.stream(times).max().getAsLong()) floors.remove(key);
            int dropped = step.step.dropped;
            out.println("step " + dropped + " " + (dropped > 0 ? windowing.dropMetric(valueNull) : "-"));
            store(states, key, step.state);
            if (onClose) {
                List<Map.Entry<Win, String>> closing = new ArrayList<>();
                for (Win w : step.closed) closing.add(Map.entry(w, key));
                for (String other : new ArrayList<>(states.keySet())) {
                    if (other.equals(key)) continue;
                    Windowing.CloseStep close = windowing.closeStep(states.get(other), clock.streamTime);
                    store(states, other, close.state);
                    for (Win w : close.closed) closing.add(Map.entry(w, other));
                }
                Comparator<Map.Entry<Win, String>> order = Comparator.comparing(Map.Entry::getKey, windowing.finalOrder());
                closing.sort(order.thenComparing(Map.Entry::getValue));
                for (Map.Entry<Win, String> e : closing) print(out, agg, e.getValue(), e.getKey(), false);
            } else {
                ChangeBuffer cache = new ChangeBuffer(before.windows);
                step.writeTo(cache, null);
                for (ChangeBuffer.Flushed f : cache.flush()) {
                    boolean tomb = ChangeBuffer.isTombstone(f.window());
                    Win w = tomb ? new Win(f.bounds().start(), f.bounds().end(), null, f.bounds().end()) : f.window();
                    print(out, agg, key, w, tomb);
                }
            }
        }
    }

    /** Every key idle: each key's open windows close at its new floor; all of them in final order, then by key. */
    private static void idle(Windowing windowing, Agg agg, Map<String, Windowing.KeyState> states, Map<String, Long> floors,
                             long streamTime, PrintStream out) {
        out.println("step 0 -");
        List<Map.Entry<Win, String>> closing = new ArrayList<>();
        for (String key : new ArrayList<>(states.keySet())) {
            long floor = floors.getOrDefault(key, -1L);
            long f = windowing.idleFloor(states.get(key), streamTime, floor);
            if (f == floor) continue;
            Windowing.CloseStep close = windowing.closeStep(states.get(key), f);
            store(states, key, close.state);
            floors.put(key, f);
            for (Win w : close.closed) closing.add(Map.entry(w, key));
        }
        Comparator<Map.Entry<Win, String>> order = Comparator.comparing(Map.Entry::getKey, windowing.finalOrder());
        closing.sort(order.thenComparing(Map.Entry::getValue));
        for (Map.Entry<Win, String> e : closing) print(out, agg, e.getValue(), e.getKey(), false);
    }

    private static void store(Map<String, Windowing.KeyState> states, String key, Windowing.KeyState state) {
        if (state.windows.isEmpty()) states.remove(key);
        else states.put(key, state);
    }

    private static void print(PrintStream out, Agg agg, String key, Win w, boolean tombstone) {
        String value = tombstone || w.agg == null ? "null"
            : agg.dbl ? Double.toString(Double.longBitsToDouble(w.agg)) : Long.toString(w.agg);
        out.println("out " + key + " " + w.start + " " + w.end + " " + value + " " + w.ts);
    }
}
