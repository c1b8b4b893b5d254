package io.streamsdsl.jvm;

import java.io.IOException;
import java.io.PrintWriter;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.TreeMap;
import java.util.WeakHashMap;
import java.util.concurrent.ConcurrentHashMap;

import com.codahale.metrics.Counter;
import com.codahale.metrics.Gauge;
import com.codahale.metrics.MetricRegistry;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;

import jakarta.servlet.http.HttpServlet;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletResponse;

import org.apache.spark.SparkContext;
import org.apache.spark.SparkEnv;
import org.apache.spark.metrics.source.Source;
import org.apache.spark.ui.SparkUI;

import scala.Option;

/**
 * One streamsdsl application's metrics in Spark's metrics system: a {@link Source} named
 * {@code streamsdsl.<application.id>} whose Codahale registry holds Kafka Streams' metric names
 * ({@code process-total}, {@code dropped-records-total}, {@code records-lag.<topic>.<partition>},
 * ...), so that every configured sink (Spark's {@code PrometheusServlet}, JMX, Graphite, CSV)
 * reports them.
 *
 * <p>The values are computed in Python from each micro-batch's progress and handed over in one
 * call per batch ({@link #update}); totals are Codahale counters, the rest gauges. Spark registers
 * the source's registry as a child of its own, which (Codahale 4) receives the metrics added later
 * too: a partition's lag seen for the first time.
 *
 * <p>Spark's {@code PrometheusServlet} cannot put labels on a metric: it writes
 * {@code metrics_<namespace>_driver_streamsdsl_<app>_records_lag_<topic>_<partition>_Value}.
 * {@link #attachEndpoint} adds a second endpoint to the driver's UI,
 * {@value #ENDPOINT_PATH}, where every live application's metrics carry labels
 * ({@code streamsdsl_records_lag{application_id="...",topic="...",partition="0"}}).
 */
public final class StreamsMetricsSource implements Source {
    /** The labelled Prometheus endpoint on the driver's UI. */
    public static final String ENDPOINT_PATH = "/metrics/streamsdsl/prometheus";

    private static final ObjectMapper JSON = new ObjectMapper();
    /** The live sources by application id (what the endpoint renders). */
    private static final Map<String, StreamsMetricsSource> LIVE = new ConcurrentHashMap<>();
    /** The UIs the endpoint is attached to (one per SparkContext; a stopped context's UI is dropped). */
    private static final Map<SparkUI, Boolean> ATTACHED = Collections.synchronizedMap(new WeakHashMap<>());

    private final String applicationId;
    private final MetricRegistry registry = new MetricRegistry();
    /** Every metric's current value, by metric name (sorted: the endpoint's order). */
    private final Map<String, Double> values = new ConcurrentHashMap<>();
    /** The records lag by (topic, partition). */
    private final Map<String, Map<Integer, Long>> lags = new ConcurrentHashMap<>();
    private volatile boolean registered;

    StreamsMetricsSource(String applicationId) {
        this.applicationId = applicationId;
    }

    /**
     * A new source for {@code applicationId}, registered in the driver's metrics system (an
     * application registered earlier under the same id is removed first).
     */
    public static synchronized StreamsMetricsSource register(String applicationId) {
        StreamsMetricsSource previous = LIVE.remove(applicationId);
        if (previous != null) {
            previous.remove();
        }
        StreamsMetricsSource source = new StreamsMetricsSource(applicationId);
        source.publish();
        LIVE.put(applicationId, source);
        return source;
    }

    /**
     * Serve {@value #ENDPOINT_PATH} on {@code sc}'s UI (once per UI). Returns false when the
     * context has no UI ({@code spark.ui.enabled=false}).
     */
    public static boolean attachEndpoint(SparkContext sc) {
        Option<SparkUI> ui = sc.ui();
        if (ui.isEmpty()) {
            return false;
        }
        SparkUI found = ui.get();
        if (ATTACHED.putIfAbsent(found, Boolean.TRUE) == null) {
            found.attachHandler(ENDPOINT_PATH, new Endpoint(), "");
        }
        return true;
    }

    @Override
    public String sourceName() {
        return "streamsdsl." + applicationId;
    }

    @Override
    public MetricRegistry metricRegistry() {
        return registry;
    }

    /** The application id the source is named after. */
    public String applicationId() {
        return applicationId;
    }

    /**
     * One micro-batch's values: {@code {"values": {name: number|null, ...}, "lag": [[topic,
     * partition, lag], ...]}}. A name ending in {@code -total} is a counter (its value only grows),
     * the others gauges; null is NaN. The lag list replaces the previous one.
     */
    public synchronized void update(String json) throws IOException {
        JsonNode root = JSON.readTree(json);
        if (!registered) {
            return;  // removed: a late batch must not add metrics to Spark's registry again
        }
        for (Map.Entry<String, JsonNode> field : root.path("values").properties()) {
            String name = field.getKey();
            double value = field.getValue().isNumber() ? field.getValue().asDouble() : Double.NaN;
            Double old = values.put(name, value);
            if (old == null) {
                if (isCounter(name)) {
                    registry.counter(name);
                } else {
                    registry.register(name, (Gauge<Double>) () -> values.getOrDefault(name, Double.NaN));
                }
            }
            if (isCounter(name)) {
                Counter counter = registry.counter(name);
                long delta = (long) value - counter.getCount();
                if (delta > 0) {
                    counter.inc(delta);
                }
            }
        }
        Map<String, Map<Integer, Long>> next = new TreeMap<>();
        for (JsonNode entry : root.path("lag")) {
            next.computeIfAbsent(entry.get(0).asText(), t -> new TreeMap<>()).put(entry.get(1).asInt(), entry.get(2).asLong());
        }
        for (Map.Entry<String, Map<Integer, Long>> topic : next.entrySet()) {
            for (Integer partition : topic.getValue().keySet()) {
                Map<Integer, Long> known = lags.get(topic.getKey());
                if (known == null || !known.containsKey(partition)) {
                    String t = topic.getKey();
                    registry.register(lagName(t, partition),
                            (Gauge<Long>) () -> lags.getOrDefault(t, Map.of()).getOrDefault(partition, 0L));
                }
            }
        }
        for (Map.Entry<String, Map<Integer, Long>> topic : next.entrySet()) {
            lags.put(topic.getKey(), new ConcurrentHashMap<>(topic.getValue()));
        }
        lags.keySet().retainAll(next.keySet());  // a topic the batch did not report: no lag shown (its gauges read 0)
    }

    /** The current value of metric {@code name} (NaN when unknown); for tests. */
    public double value(String name) {
        return values.getOrDefault(name, Double.NaN);
    }

    /** Remove the source from the metrics system and the endpoint (the application closed). */
    public synchronized void remove() {
        LIVE.remove(applicationId, this);
        if (registered) {
            SparkEnv env = SparkEnv.get();
            if (env != null) {
                env.metricsSystem().removeSource(this);
            }
            registered = false;
        }
    }

    private void publish() {
        SparkEnv env = SparkEnv.get();
        if (env == null) {
            throw new IllegalStateException("no SparkEnv: the SparkContext is not running");
        }
        env.metricsSystem().registerSource(this);
        registered = true;
    }

    private static boolean isCounter(String name) {
        return name.endsWith("-total");
    }

    static String lagName(String topic, int partition) {
        return "records-lag." + topic + "." + partition;
    }

    /** Prometheus' metric name of one of ours: {@code streamsdsl_} and the name in snake case. */
    static String prometheusName(String name) {
        return "streamsdsl_" + name.replaceAll("[^A-Za-z0-9_]", "_");
    }

    /** Prometheus' escaping of a label value. */
    static String label(String value) {
        return value.replace("\\", "\\\\").replace("\"", "\\\"").replace("\n", "\\n");
    }

    static String number(double value) {
        if (Double.isNaN(value)) {
            return "NaN";
        }
        if (Double.isInfinite(value)) {
            return value > 0 ? "+Inf" : "-Inf";
        }
        if (value == Math.rint(value) && Math.abs(value) < 1e15) {
            return Long.toString((long) value);
        }
        return Double.toString(value);
    }

    /**
     * Every live application's metrics in Prometheus' text format (version 0.0.4): one family per
     * metric name, {@code # TYPE} counter or gauge, labels {@code application_id} (and {@code
     * topic}, {@code partition} for {@code streamsdsl_records_lag}).
     */
    public static String prometheusText() {
        List<StreamsMetricsSource> sources = new ArrayList<>(new TreeMap<>(LIVE).values());
        Map<String, StringBuilder> families = new TreeMap<>();
        for (StreamsMetricsSource source : sources) {
            String app = "application_id=\"" + label(source.applicationId) + "\"";
            for (Map.Entry<String, Double> e : new TreeMap<>(source.values).entrySet()) {
                String name = prometheusName(e.getKey());
                families.computeIfAbsent(name, n -> header(n, isCounter(e.getKey())))
                        .append(name).append('{').append(app).append("} ").append(number(e.getValue())).append('\n');
            }
            String lag = prometheusName("records-lag");
            for (Map.Entry<String, Map<Integer, Long>> topic : new TreeMap<>(source.lags).entrySet()) {
                for (Map.Entry<Integer, Long> p : new TreeMap<>(topic.getValue()).entrySet()) {
                    families.computeIfAbsent(lag, n -> header(n, false))
                            .append(lag).append('{').append(app).append(",topic=\"").append(label(topic.getKey()))
                            .append("\",partition=\"").append(p.getKey()).append("\"} ").append(p.getValue()).append('\n');
                }
            }
        }
        StringBuilder out = new StringBuilder();
        families.values().forEach(out::append);
        return out.toString();
    }

    private static StringBuilder header(String name, boolean counter) {
        return new StringBuilder("# TYPE ").append(name).append(counter ? " counter\n" : " gauge\n");
    }

    /** The servlet of {@value #ENDPOINT_PATH}. */
    static final class Endpoint extends HttpServlet {
        private static final long serialVersionUID = 1L;

        @Override
        protected void doGet(HttpServletRequest request, HttpServletResponse response) throws IOException {
            response.setContentType("text/plain; version=0.0.4; charset=utf-8");
            response.setStatus(HttpServletResponse.SC_OK);
            try (PrintWriter writer = response.getWriter()) {
                writer.write(prometheusText());
            }
        }
    }

    @Override
    public String toString() {
        return String.format(Locale.ROOT, "StreamsMetricsSource(%s, %d metrics)", applicationId, values.size());
    }
}
