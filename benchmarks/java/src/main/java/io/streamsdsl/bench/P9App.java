package io.streamsdsl.bench;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.lang.management.ManagementFactory;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.HashMap;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;

import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.utils.Bytes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.KeyValue;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.EmitStrategy;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.KTable;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.kstream.SessionWindowedKStream;
import org.apache.kafka.streams.kstream.SessionWindows;
import org.apache.kafka.streams.kstream.TimeWindowedKStream;
import org.apache.kafka.streams.kstream.TimeWindows;
import org.apache.kafka.streams.kstream.WindowedSerdes;
import org.apache.kafka.streams.state.SessionStore;
import org.apache.kafka.streams.state.WindowStore;

/**
 * P9's peer: benchmark P9's two applications on Kafka Streams, one instance, default
 * configuration plus {@code commit.interval.ms} (streamsdsl's trigger interval).
 *
 * <ul>
 *   <li>{@code session}: P5's session-window count: {@code groupByKey()
 *       .windowedBy(SessionWindows.ofInactivityGapWithNoGrace(30 s)).count()} to the sink with
 *       the session-windowed key and a long count;</li>
 *   <li>{@code enrich}: orders joined with a customers table (the value is the region), regrouped
 *       by region, counted in 1-minute tumbling windows without grace, written as
 *       {@code region@start} → count (P10's application).</li>
 * </ul>
 *
 * {@code --emit close} emits each window once when it closes, {@code --emit update} on every
 * update (Kafka Streams' default). The input records are counted by a {@code peek} before the
 * first stateful step. {@code --retention-ms} sets the windowed store's retention (default: Kafka
 * Streams' own, gap or size + grace), {@code --caching false} turns its record cache off and
 * {@code --config k=v,k=v} adds configuration (both for experiments; the benchmark uses neither).
 *
 * <p>Protocol (one JSON object per stdout line): an optional warm-up run over
 * {@code --warmup-source} (and {@code --warmup-customers}) until {@code --warmup-records} input
 * records are counted; then the timed run starts ({@code "started"}), reports
 * {@code "processed"} when {@code --records} input records are counted (0: never), and runs
 * until a line {@code close} on stdin, then closes ({@code "closed"}). CPU seconds are the JVM
 * process's ({@code OperatingSystemMXBean.getProcessCpuTime}) from just before
 * {@code KafkaStreams.start()}.
 */
public final class P9App {
    private P9App() {}

    static Map<String, String> parse(String[] args) {
        Map<String, String> out = new HashMap<>();
        for (int i = 0; i + 1 < args.length; i += 2) {
            if (!args[i].startsWith("--")) {
                throw new IllegalArgumentException("expected --name value pairs, got " + args[i]);
            }
            out.put(args[i].substring(2), args[i + 1]);
        }
        return out;
    }

    static Topology topology(String app, boolean onClose, boolean caching, long retentionMs, String source, String customers, String sink,
                             AtomicLong seen) {
        StreamsBuilder b = new StreamsBuilder();
        if (app.equals("session")) {
            SessionWindowedKStream<String, byte[]> windowed = b
                .stream(source, Consumed.with(Serdes.String(), Serdes.ByteArray()))
                .peek((k, v) -> seen.incrementAndGet())
                .groupByKey()
                .windowedBy(SessionWindows.ofInactivityGapWithNoGrace(Duration.ofMillis(30_000)));
            if (onClose) {
                windowed = windowed.emitStrategy(EmitStrategy.onWindowClose());
            }
            Materialized<String, Long, SessionStore<Bytes, byte[]>> store =
                Materialized.with(Serdes.String(), Serdes.Long());
            if (retentionMs > 0) {
                store = store.withRetention(Duration.ofMillis(retentionMs));
            }
            windowed.count(caching ? store : store.withCachingDisabled()).toStream()
                .to(sink, Produced.with(WindowedSerdes.sessionWindowedSerdeFrom(String.class), Serdes.Long()));
        } else if (app.equals("enrich")) {
            KTable<String, String> table = b.table(customers, Consumed.with(Serdes.String(), Serdes.String()));
            TimeWindowedKStream<String, String> windowed = b
                .stream(source, Consumed.with(Serdes.String(), Serdes.String()))
                .peek((k, v) -> seen.incrementAndGet())
                .join(table, (order, region) -> region)
                .groupBy((customer, region) -> region, Grouped.with(Serdes.String(), Serdes.String()))
                .windowedBy(TimeWindows.ofSizeWithNoGrace(Duration.ofMinutes(1)));
            if (onClose) {
                windowed = windowed.emitStrategy(EmitStrategy.onWindowClose());
            }
            Materialized<String, Long, WindowStore<Bytes, byte[]>> store =
                Materialized.with(Serdes.String(), Serdes.Long());
            if (retentionMs > 0) {
                store = store.withRetention(Duration.ofMillis(retentionMs));
            }
            windowed.count(caching ? store : store.withCachingDisabled()).toStream()
                .map((w, n) -> KeyValue.pair(w.key() + "@" + w.window().start(), n))
                .to(sink, Produced.with(Serdes.String(), Serdes.Long()));
        } else {
            throw new IllegalArgumentException("--app must be session or enrich, got " + app);
        }
        return b.build();
    }

    static Properties config(Map<String, String> a, String applicationId, String stateDir) {
        Properties p = new Properties();
        p.put(StreamsConfig.APPLICATION_ID_CONFIG, applicationId);
        p.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, a.get("bootstrap"));
        p.put(StreamsConfig.STATE_DIR_CONFIG, stateDir);
        p.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, a.getOrDefault("commit-interval-ms", "100"));
        p.put(StreamsConfig.consumerPrefix("auto.offset.reset"), "earliest");
        for (String kv : a.getOrDefault("config", "").split(",")) {
            if (!kv.isEmpty()) {
                p.put(kv.substring(0, kv.indexOf('=')), kv.substring(kv.indexOf('=') + 1));
            }
        }
        return p;
    }

    static void emit(String json) {
        System.out.println(json);
        System.out.flush();
    }

    static double cpuSeconds() {
        com.sun.management.OperatingSystemMXBean os =
            (com.sun.management.OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean();
        return os.getProcessCpuTime() / 1e9;
    }

    static KafkaStreams start(Topology t, Properties p, AtomicReference<Throwable> failure) {
        KafkaStreams streams = new KafkaStreams(t, p);
        streams.setUncaughtExceptionHandler(e -> {
            failure.set(e);
            return StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
        });
        streams.start();
        return streams;
    }

    static void awaitCount(AtomicLong seen, long n, AtomicReference<Throwable> failure, long timeoutMs)
            throws InterruptedException {
        long deadline = System.currentTimeMillis() + timeoutMs;
        while (seen.get() < n) {
            if (failure.get() != null) {
                throw new IllegalStateException("Kafka Streams failed", failure.get());
            }
            if (System.currentTimeMillis() > deadline) {
                throw new IllegalStateException("counted " + seen.get() + " of " + n + " input records in "
                    + timeoutMs + " ms");
            }
            Thread.sleep(2);
        }
    }

    public static void main(String[] args) throws Exception {
        Map<String, String> a = parse(args);
        String app = a.get("app");
        boolean onClose = a.getOrDefault("emit", "close").equals("close");
        boolean caching = Boolean.parseBoolean(a.getOrDefault("caching", "true"));
        long retentionMs = Long.parseLong(a.getOrDefault("retention-ms", "0"));
        String stateDir = a.get("state-dir");
        AtomicReference<Throwable> failure = new AtomicReference<>();

        if (a.containsKey("warmup-source")) {
            AtomicLong seen = new AtomicLong();
            Topology t = topology(app, onClose, caching, retentionMs, a.get("warmup-source"), a.get("warmup-customers"),
                                  a.get("warmup-sink"), seen);
            KafkaStreams warm = start(t, config(a, a.get("application-id") + "-warmup", stateDir + "/warmup"),
                                      failure);
            awaitCount(seen, Long.parseLong(a.get("warmup-records")), failure, 300_000);
            warm.close(Duration.ofSeconds(60));
            emit("{\"event\":\"warmed\"}");
        }

        AtomicLong seen = new AtomicLong();
        Topology t = topology(app, onClose, caching, retentionMs, a.get("source"), a.get("customers"), a.get("sink"), seen);
        Properties p = config(a, a.get("application-id"), stateDir + "/run");
        double cpu0 = cpuSeconds();
        long t0 = System.nanoTime();
        KafkaStreams streams = start(t, p, failure);
        emit("{\"event\":\"started\"}");
        long records = Long.parseLong(a.getOrDefault("records", "0"));
        if (records > 0) {
            awaitCount(seen, records, failure, 1_800_000);
            double seconds = (System.nanoTime() - t0) / 1e9;
            emit("{\"event\":\"processed\",\"seconds\":" + seconds + ",\"cpu_seconds\":" + (cpuSeconds() - cpu0)
                 + ",\"records\":" + seen.get() + "}");
        }
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null && !line.trim().equals("close")) {
            if (line.trim().equals("count")) {
                emit("{\"event\":\"count\",\"records\":" + seen.get() + "}");
            }
        }
        StringBuilder metrics = new StringBuilder();
        streams.metrics().forEach((name, metric) -> {
            String n = name.name();
            if ((n.equals("dropped-records-total") || n.equals("emitted-records-total")
                 || n.equals("process-total")) && metric.metricValue() instanceof Double
                && (Double) metric.metricValue() > 0) {
                metrics.append(metrics.length() == 0 ? "" : ",").append('"').append(n).append('|')
                    .append(name.tags().getOrDefault("processor-node-id", name.tags().getOrDefault("task-id", "")))
                    .append("\":").append(metric.metricValue());
            }
        });
        boolean closed = streams.close(Duration.ofSeconds(60));
        emit("{\"event\":\"closed\",\"clean\":" + closed + ",\"seconds\":" + (System.nanoTime() - t0) / 1e9
             + ",\"cpu_seconds\":" + (cpuSeconds() - cpu0) + ",\"records\":" + seen.get()
             + ",\"failed\":" + (failure.get() != null) + ",\"metrics\":{" + metrics + "}}");
        if (failure.get() != null) {
            failure.get().printStackTrace();
            System.exit(1);
        }
    }
}
