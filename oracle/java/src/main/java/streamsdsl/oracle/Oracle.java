package streamsdsl.oracle;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.atomic.AtomicLong;
import java.util.regex.Pattern;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;

import org.apache.kafka.common.Metric;
import org.apache.kafka.common.MetricName;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.Serde;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.serialization.StringSerializer;
import org.apache.kafka.common.utils.Bytes;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.TestInputTopic;
import org.apache.kafka.streams.TestOutputTopic;
import org.apache.kafka.streams.TopologyTestDriver;
import org.apache.kafka.streams.kstream.Branched;
import org.apache.kafka.streams.kstream.BranchedKStream;
import org.apache.kafka.streams.kstream.CogroupedKStream;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.EmitStrategy;
import org.apache.kafka.streams.kstream.GlobalKTable;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.JoinWindows;
import org.apache.kafka.streams.kstream.KGroupedStream;
import org.apache.kafka.streams.kstream.KGroupedTable;
import org.apache.kafka.streams.kstream.KStream;
import org.apache.kafka.streams.kstream.ValueJoiner;
import org.apache.kafka.streams.kstream.KTable;
import org.apache.kafka.streams.kstream.Joined;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.state.Stores;
import org.apache.kafka.streams.kstream.Named;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.kstream.SessionWindows;
import org.apache.kafka.streams.kstream.SlidingWindows;
import org.apache.kafka.streams.kstream.Suppressed;
import org.apache.kafka.streams.kstream.TimeWindows;
import org.apache.kafka.streams.kstream.ValueJoiner;
import org.apache.kafka.streams.kstream.ValueJoinerWithKey;
import org.apache.kafka.streams.state.WindowStore;
import org.apache.kafka.streams.test.TestRecord;

/**
 * The Kafka Streams oracle of streamsdsl's conformance harness (docs/testing.md, "Kafka Streams as
 * the oracle").
 *
 * <p>Reads one case per line on stdin, as JSON: {"spec": {"nodes": [...], "stores": [...]}, "records":
 * [[topic, key, value, timestamp], ...] (an entry of topic "@wall-clock" advances the driver's wall
 * clock, which starts at 0, by its timestamp field instead), "cache": true|false, "close_retention_ms": n|null,
 * "describe": true|false}. Builds the spec's topology with Kafka Streams' DSL (its state stores with
 * {@code addStateStore}, its processors from Processors.java),
 * runs Kafka Streams' TopologyTestDriver over the records in order, and writes one line per case on
 * stdout: {"outputs": {topic: [[key, value, timestamp], ...]}, "dropped": n,
 * "repartition_null_keys": n} (and "describe": the text of {@code Topology.describe()} when the case
 * asks for it) or {"error": "..."}.
 */
public final class Oracle {
    private static final ObjectMapper JSON = new ObjectMapper();
    /** The "topic" of an input entry that advances the driver's wall clock by its timestamp field (ms). */
    static final String WALL_CLOCK = "@wall-clock";
    private static final java.nio.file.Path STATE_ROOT = stateRoot();
    /**
     * Grouping serdes, so that a windowed table's key serde (and suppress's) is known: string keys
     * as the sources read them, JSON keys where a user function made them (JsonKeySerde).
     */
    @SuppressWarnings({"unchecked", "rawtypes"})
    /** A table's store: versioned (KIP-889) when the spec gives a history retention. */
    private static Materialized tableStore(JsonNode node, String name) {
        JsonNode history = node.get("history");
        if (history != null && !history.isNull()) {
            return Materialized.as(Stores.persistentVersionedKeyValueStore("store-" + name,
                Duration.ofMillis(history.asLong())));
        }
        return Materialized.as("store-" + name);
    }

    private static Grouped grouped(boolean jsonKey) {
        Serde keySerde = jsonKey ? new JsonKeySerde() : Serdes.String();
        return Grouped.with(keySerde, new ValueSerde());
    }

    /** The node types whose keys a user function makes. */
    private static final java.util.Set<String> KEY_MAKERS = java.util.Set.of("map", "flat_map", "select_key",
        "table_group_by", "process");

    private Oracle() {
    }

    private static java.nio.file.Path stateRoot() {
        try {
            java.nio.file.Path root = Files.createTempDirectory("streamsdsl-oracle");
            Runtime.getRuntime().addShutdownHook(new Thread(() -> delete(root)));
            return root;
        } catch (java.io.IOException e) {
            throw new java.io.UncheckedIOException(e);
        }
    }

    private static void delete(java.nio.file.Path root) {
        try (var paths = Files.walk(root)) {
            paths.sorted(java.util.Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
        } catch (java.io.IOException e) {
            throw new java.io.UncheckedIOException(e);
        }
    }

    public static void main(String[] args) throws Exception {
        PrintStream out = new PrintStream(new java.io.FileOutputStream(java.io.FileDescriptor.out), true, "UTF-8");
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            if (line.isBlank()) {
                continue;
            }
            JsonNode result;
            try {
                result = run(JSON.readTree(line));
            } catch (Exception e) {
                ObjectNode error = JSON.createObjectNode();
                StringBuilder message = new StringBuilder();
                for (Throwable t = e; t != null; t = t.getCause() == t ? null : t.getCause()) {
                    message.append(message.length() == 0 ? "" : "; caused by ").append(t.getClass().getSimpleName())
                        .append(": ").append(t.getMessage());
                }
                error.put("error", message.toString());
                result = error;
            }
            out.println(JSON.writeValueAsString(result));
        }
    }

    /** What one built topology holds beside the DSL objects: the null keys its repartitions saw. */
    private static final class Built {
        final StreamsBuilder builder = new StreamsBuilder();
        final Map<String, Object> handles = new HashMap<>();
        final List<String> sinkTopics = new ArrayList<>();
        final AtomicLong repartitionNullKeys = new AtomicLong();
        /** Per node: whether its keys were made by a user function (then held as JSON). */
        final Map<String, Boolean> jsonKey = new HashMap<>();
    }

    static JsonNode run(JsonNode testCase) throws Exception {
        JsonNode retention = testCase.get("close_retention_ms");
        Built built = build(testCase.get("spec"),
            retention == null || retention.isNull() ? null : Duration.ofMillis(retention.asLong()));
        Properties props = new Properties();
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, "streamsdsl-oracle");
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, "oracle:9092");
        props.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, JsonKeySerde.class);
        props.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, ValueSerde.class);
        // a state directory per case: RocksDB stores of one case never meet another case's files
        java.nio.file.Path stateDir = Files.createTempDirectory(STATE_ROOT, "case");
        props.put(StreamsConfig.STATE_DIR_CONFIG, stateDir.toString());
        if (!testCase.get("cache").asBoolean()) {
            props.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, 0);
        }
        org.apache.kafka.streams.Topology topology = built.builder.build();
        ObjectNode result = JSON.createObjectNode();
        JsonNode describe = testCase.get("describe");
        if (describe != null && describe.asBoolean()) {
            result.put("describe", topology.describe().toString());
        }
        // the wall clock starts at 0, as streamsdsl's driver is told to (wall-clock punctuators)
        try (TopologyTestDriver driver = new TopologyTestDriver(topology, props, java.time.Instant.EPOCH)) {
            Map<String, TestInputTopic<String, String>> inputs = new HashMap<>();
            for (JsonNode r : testCase.get("records")) {
                String topic = r.get(0).asText();
                if (topic.equals(WALL_CLOCK)) {
                    driver.advanceWallClockTime(Duration.ofMillis(r.get(3).asLong()));
                    continue;
                }
                TestInputTopic<String, String> input = inputs.computeIfAbsent(topic,
                    t -> driver.createInputTopic(t, new StringSerializer(), new StringSerializer()));
                input.pipeInput(new TestRecord<>(text(r.get(1)), text(r.get(2)), null, r.get(3).asLong()));
            }
            ObjectNode outputs = result.putObject("outputs");
            for (String topic : built.sinkTopics) {
                TestOutputTopic<byte[], byte[]> output =
                    driver.createOutputTopic(topic, new ByteArrayDeserializer(), new ByteArrayDeserializer());
                ArrayNode records = outputs.putArray(topic);
                for (TestRecord<byte[], byte[]> r : output.readRecordsToList()) {
                    ArrayNode record = records.addArray();
                    record.add(r.key() == null ? JSON.nullNode() : JSON.readTree(r.key()));
                    record.add(r.value() == null ? JSON.nullNode() : JSON.readTree(r.value()));
                    record.add(r.timestamp());
                }
            }
            double dropped = 0;
            for (Map.Entry<MetricName, ? extends Metric> m : driver.metrics().entrySet()) {
                if (m.getKey().name().equals("dropped-records-total")) {
                    dropped += ((Number) m.getValue().metricValue()).doubleValue();
                }
            }
            result.put("dropped", (long) dropped);
            result.put("repartition_null_keys", built.repartitionNullKeys.get());
        } finally {
            delete(stateDir);
        }
        return result;
    }

    private static String text(JsonNode node) {
        return node == null || node.isNull() ? null : node.asText();
    }

    private static String fn(JsonNode node, String field) {
        JsonNode value = node.get(field);
        if (value == null || value.isNull()) {
            throw new IllegalArgumentException(node.get("type").asText() + " needs '" + field + "'");
        }
        return value.asText();
    }

    @SuppressWarnings({"unchecked", "rawtypes"})
    static Built build(JsonNode spec, Duration closeRetention) {
        JsonNode nodes = spec.get("nodes");
        Built b = new Built();
        JsonNode stores = spec.get("stores");
        if (stores != null) {
            for (JsonNode store : stores) {
                b.builder.addStateStore(Processors.storeBuilder(store));
            }
        }
        Map<String, List<JsonNode>> branches = new LinkedHashMap<>();
        for (JsonNode node : nodes) {
            if (node.get("type").asText().equals("branch")) {
                branches.computeIfAbsent(node.get("parents").get(0).asText(), k -> new ArrayList<>()).add(node);
            }
        }
        for (JsonNode node : nodes) {
            String name = node.get("name").asText();
            String type = node.get("type").asText();
            List<Object> parents = new ArrayList<>();
            for (JsonNode p : node.get("parents")) {
                parents.add(b.handles.get(p.asText()));
            }
            Object parent = parents.isEmpty() ? null : parents.get(0);
            boolean json = KEY_MAKERS.contains(type)
                || (!parents.isEmpty() && b.jsonKey.get(node.get("parents").get(0).asText()));
            b.jsonKey.put(name, json);
            KStream s = parent instanceof KStream ? (KStream) parent : null;
            KTable t = parent instanceof KTable ? (KTable) parent : null;
            Object result;
            switch (type) {
                case "source": {
                    if (node.has("pattern")) {
                        result = b.builder.stream(Pattern.compile(node.get("pattern").asText()),
                            Consumed.with(Serdes.String(), Serdes.String()));
                        break;
                    }
                    List<String> topics = new ArrayList<>();
                    node.get("topics").forEach(x -> topics.add(x.asText()));
                    result = b.builder.stream(topics, Consumed.with(Serdes.String(), Serdes.String()));
                    break;
                }
                case "table_source":
                    result = node.get("materialized").asBoolean()
                        ? b.builder.table(node.get("topic").asText(), Consumed.with(Serdes.String(), Serdes.String()),
                            tableStore(node, name))
                        : b.builder.table(node.get("topic").asText(), Consumed.with(Serdes.String(), Serdes.String()));
                    break;
                case "filter":
                    result = node.get("negate").asBoolean() ? s.filterNot(Menu.predicate(fn(node, "predicate")))
                        : s.filter(Menu.predicate(fn(node, "predicate")));
                    break;
                case "map_values":
                    result = Menu.withKey(fn(node, "mapper")) ? s.mapValues(Menu.valueMapperWithKey(fn(node, "mapper")))
                        : s.mapValues(Menu.valueMapper(fn(node, "mapper")));
                    break;
                case "map": result = s.map(Menu.mapper(fn(node, "mapper"))); break;
                case "flat_map": result = s.flatMap(Menu.flatMapper(fn(node, "mapper"))); break;
                case "flat_map_values": result = s.flatMapValues(Menu.flatValueMapper(fn(node, "mapper"))); break;
                case "select_key": result = s.selectKey(Menu.keySelector(fn(node, "selector"))); break;
                case "merge": result = s.merge((KStream) parents.get(1)); break;
                case "repartition":
                    // Kafka Streams repartitions by itself where the key changed; count the null keys
                    // its repartition filter drops without a metric (docs/differences.md, Running),
                    // which it does unless a join that keeps them (KIP-962) reads the repartition.
                    result = keepsNullKeys(nodes, name) ? s : s.peek((k, v) -> {
                        if (k == null) {
                            b.repartitionNullKeys.incrementAndGet();
                        }
                    });
                    break;
                case "sink": {
                    String topic = node.get("topic").asText();
                    s.to(topic, Produced.with(OutputSerializer.serde(), OutputSerializer.serde()));
                    if (!b.sinkTopics.contains(topic)) {
                        b.sinkTopics.add(topic);
                    }
                    result = null;
                    break;
                }
                case "aggregate": result = aggregate(s.groupByKey(grouped(json)), node, closeRetention); break;
                case "cogroup": {
                    List<Boolean> jsonKeys = new ArrayList<>();
                    node.get("parents").forEach(p -> jsonKeys.add(b.jsonKey.get(p.asText())));
                    result = cogroup(parents, jsonKeys, node);
                    break;
                }
                case "to_stream": result = t.toStream(); break;
                case "table_filter":
                    result = node.get("negate").asBoolean() ? t.filterNot(Menu.predicate(fn(node, "predicate")))
                        : t.filter(Menu.predicate(fn(node, "predicate")));
                    break;
                case "table_map_values":
                    result = Menu.withKey(fn(node, "mapper")) ? t.mapValues(Menu.valueMapperWithKey(fn(node, "mapper")))
                        : t.mapValues(Menu.valueMapper(fn(node, "mapper")));
                    break;
                case "to_table":
                    result = node.get("materialized").asBoolean() ? s.toTable(tableStore(node, name)) : s.toTable();
                    break;
                case "stream_table_join": {
                    KTable table = (KTable) parents.get(1);
                    String joiner = fn(node, "joiner");
                    boolean inner = node.get("kind").asText().equals("inner");
                    JsonNode grace = node.get("grace");
                    Joined joined = null;
                    if (grace != null && !grace.isNull()) {  // KIP-923: a grace period against a versioned table
                        Serde keySerde = json ? new JsonKeySerde() : Serdes.String();
                        Serde valueSerde = new ValueSerde();
                        joined = Joined.with(keySerde, valueSerde, valueSerde)
                            .withGracePeriod(Duration.ofMillis(grace.asLong()));
                    }
                    if (Menu.withKey(joiner)) {
                        ValueJoinerWithKey j = Menu.joinerWithKey(joiner);
                        result = joined == null ? (inner ? s.join(table, j) : s.leftJoin(table, j))
                            : (inner ? s.join(table, j, joined) : s.leftJoin(table, j, joined));
                    } else {
                        ValueJoiner j = Menu.joiner(joiner);
                        result = joined == null ? (inner ? s.join(table, j) : s.leftJoin(table, j))
                            : (inner ? s.join(table, j, joined) : s.leftJoin(table, j, joined));
                    }
                    break;
                }
                case "global_table_source":
                    result = b.builder.globalTable(node.get("topic").asText(), Consumed.with(Serdes.String(), Serdes.String()));
                    break;
                case "global_table_join": {
                    GlobalKTable table = (GlobalKTable) parents.get(1);
                    result = node.get("kind").asText().equals("inner")
                        ? s.join(table, Menu.keySelector(fn(node, "key_selector")), Menu.joiner(fn(node, "joiner")))
                        : s.leftJoin(table, Menu.keySelector(fn(node, "key_selector")), Menu.joiner(fn(node, "joiner")));
                    break;
                }
                case "stream_stream_join": {
                    JsonNode w = node.get("windows");
                    JoinWindows windows = JoinWindows.ofTimeDifferenceAndGrace(
                            Duration.ofMillis(w.get("after").asLong()), Duration.ofMillis(w.get("grace").asLong()))
                        .before(Duration.ofMillis(w.get("before").asLong()));
                    KStream other = (KStream) parents.get(1);
                    String joiner = fn(node, "joiner");
                    if (Menu.withKey(joiner)) {
                        ValueJoinerWithKey j = Menu.joinerWithKey(joiner);
                        switch (node.get("kind").asText()) {
                            case "inner": result = s.join(other, j, windows); break;
                            case "left": result = s.leftJoin(other, j, windows); break;
                            default: result = s.outerJoin(other, j, windows);
                        }
                    } else {
                        switch (node.get("kind").asText()) {
                            case "inner": result = s.join(other, Menu.joiner(joiner), windows); break;
                            case "left": result = s.leftJoin(other, Menu.joiner(joiner), windows); break;
                            default: result = s.outerJoin(other, Menu.joiner(joiner), windows);
                        }
                    }
                    break;
                }
                case "table_table_join": {
                    KTable other = (KTable) parents.get(1);
                    boolean materialized = node.get("materialized").asBoolean();
                    Materialized m = Materialized.as("store-" + name);
                    switch (node.get("kind").asText()) {
                        case "inner":
                            result = materialized ? t.join(other, Menu.joiner(fn(node, "joiner")), m)
                                : t.join(other, Menu.joiner(fn(node, "joiner")));
                            break;
                        case "left":
                            result = materialized ? t.leftJoin(other, Menu.joiner(fn(node, "joiner")), m)
                                : t.leftJoin(other, Menu.joiner(fn(node, "joiner")));
                            break;
                        default:
                            result = materialized ? t.outerJoin(other, Menu.joiner(fn(node, "joiner")), m)
                                : t.outerJoin(other, Menu.joiner(fn(node, "joiner")));
                    }
                    break;
                }
                case "fk_join": {
                    KTable other = (KTable) parents.get(1);
                    java.util.function.Function<Object, Object> extractor = Menu.fkExtractor(fn(node, "extractor"));
                    ValueJoiner joiner = Menu.joiner(fn(node, "joiner"));
                    boolean inner = node.get("kind").asText().equals("inner");
                    if (node.get("materialized").asBoolean()) {
                        Materialized m = Materialized.as("fk-store");
                        result = inner ? t.join(other, extractor, joiner, m) : t.leftJoin(other, extractor, joiner, m);
                    } else {
                        result = inner ? t.join(other, extractor, joiner) : t.leftJoin(other, extractor, joiner);
                    }
                    break;
                }
                case "split": {
                    BranchedKStream split = s.split(Named.as("split-"));
                    List<JsonNode> children = branches.getOrDefault(name, List.of());
                    Map<String, KStream> made = null;
                    boolean hasDefault = false;
                    for (int i = 0; i < children.size(); i++) {
                        JsonNode child = children.get(i);
                        if (child.get("default").asBoolean()) {
                            made = split.defaultBranch(Branched.as(String.valueOf(i)));
                            hasDefault = true;
                        } else {
                            split = split.branch(Menu.predicate(fn(child, "predicate")), Branched.as(String.valueOf(i)));
                        }
                    }
                    if (!hasDefault) {
                        made = split.noDefaultBranch();
                    }
                    for (int i = 0; i < children.size(); i++) {
                        b.handles.put(children.get(i).get("name").asText(), made.get("split-" + i));
                    }
                    result = s;
                    break;
                }
                case "branch": result = b.handles.get(name); break;
                case "process": {
                    List<String> names = new ArrayList<>();
                    node.get("stores").forEach(x -> names.add(x.asText()));
                    String[] storeNames = names.toArray(new String[0]);
                    String processor = node.get("processor").asText();
                    JsonNode params = node.get("params");
                    // a processor the user did not name gets Kafka's own name (KSTREAM-PROCESSOR-..., -PROCESSVALUES-)
                    boolean named = !node.has("named") || node.get("named").asBoolean();
                    if (node.get("values").asBoolean()) {
                        var supplier = Processors.fixedKeyProcessor(processor, params);
                        result = named ? s.processValues(supplier, Named.as(name), storeNames)
                            : s.processValues(supplier, storeNames);
                    } else {
                        var supplier = Processors.processor(processor, params);
                        result = named ? s.process(supplier, Named.as(name), storeNames) : s.process(supplier, storeNames);
                    }
                    break;
                }
                case "table_group_by": result = t.groupBy(Menu.tableSelector(fn(node, "selector")), grouped(true)); break;
                case "table_aggregate": {
                    KGroupedTable g = (KGroupedTable) parent;
                    switch (node.get("kind").asText()) {
                        case "count": result = g.count(); break;
                        case "reduce":
                            result = g.reduce(Menu.reducer(fn(node, "adder")), Menu.reducer(fn(node, "subtractor")));
                            break;
                        default:
                            result = g.aggregate(Menu.initializer(fn(node, "initializer")),
                                Menu.aggregator(fn(node, "adder")), Menu.aggregator(fn(node, "subtractor")));
                    }
                    break;
                }
                case "suppress":
                    result = node.get("mode").asText().equals("until_window_closes")
                        ? t.suppress(Suppressed.untilWindowCloses(Suppressed.BufferConfig.unbounded()))
                        : t.suppress(Suppressed.untilTimeLimit(Duration.ofMillis(node.get("time_limit").asLong()),
                            Suppressed.BufferConfig.unbounded()));
                    break;
                default:
                    throw new IllegalArgumentException("the oracle has no rule for node type " + type);
            }
            b.handles.put(name, result);
        }
        return b;
    }

    /**
     * Whether a join that keeps null keys (KIP-962) reads node {@code name}: a left stream-table join
     * on its stream side, a left stream-stream join on its left side, an outer one on either side.
     */
    private static boolean keepsNullKeys(JsonNode nodes, String name) {
        for (JsonNode node : nodes) {
            JsonNode parents = node.get("parents");
            String type = node.get("type").asText();
            String kind = node.has("kind") ? node.get("kind").asText() : "";
            boolean left = parents.size() > 0 && parents.get(0).asText().equals(name);
            boolean right = parents.size() > 1 && parents.get(1).asText().equals(name);
            if ((type.equals("stream_table_join") && kind.equals("left") && left)
                || (type.equals("stream_stream_join") && ((kind.equals("left") && left)
                    || (kind.equals("outer") && (left || right))))) {
                return true;
            }
        }
        return false;
    }

    @SuppressWarnings({"unchecked", "rawtypes"})
    private static KTable aggregate(KGroupedStream grouped, JsonNode node, Duration closeRetention) {
        JsonNode agg = node.get("agg");
        String kind = agg.get("kind").asText();
        JsonNode w = node.get("windows");
        if (w == null || w.isNull()) {
            switch (kind) {
                case "count": return grouped.count();
                case "reduce": return grouped.reduce(Menu.reducer(fn(agg, "reducer")));
                default: return grouped.aggregate(Menu.initializer(fn(agg, "initializer")),
                    Menu.aggregator(fn(agg, "aggregator")));
            }
        }
        EmitStrategy emit = node.get("emit_on_close").asBoolean() ? EmitStrategy.onWindowClose()
            : EmitStrategy.onWindowUpdate();
        if (w.get("kind").asText().equals("session")) {
            var windowed = grouped.windowedBy(SessionWindows.ofInactivityGapAndGrace(
                Duration.ofMillis(w.get("gap").asLong()), Duration.ofMillis(w.get("grace").asLong()))).emitStrategy(emit);
            switch (kind) {
                case "count": return windowed.count();
                case "reduce": return windowed.reduce(Menu.reducer(fn(agg, "reducer")));
                default: return windowed.aggregate(Menu.initializer(fn(agg, "initializer")),
                    Menu.aggregator(fn(agg, "aggregator")), Menu.merger(fn(agg, "merger")));
            }
        }
        var windowed = w.get("kind").asText().equals("time")
            ? grouped.windowedBy(timeWindows(w)).emitStrategy(emit)
            : grouped.windowedBy(SlidingWindows.ofTimeDifferenceAndGrace(
                Duration.ofMillis(w.get("difference").asLong()), Duration.ofMillis(w.get("grace").asLong())))
                .emitStrategy(emit);
        // With a close retention, an on-close window store keeps every window that long, so that no
        // closed window expires before it is emitted (docs/differences.md, Deliberate improvements).
        Materialized<Object, Object, WindowStore<Bytes, byte[]>> store = Materialized.with(null, null);
        if (closeRetention != null && node.get("emit_on_close").asBoolean()) {
            store = store.withRetention(closeRetention);
        }
        switch (kind) {
            case "count": return windowed.count(store);
            case "reduce": return windowed.reduce(Menu.reducer(fn(agg, "reducer")), store);
            default: return windowed.aggregate(Menu.initializer(fn(agg, "initializer")),
                Menu.aggregator(fn(agg, "aggregator")), store);
        }
    }

    private static TimeWindows timeWindows(JsonNode w) {
        return TimeWindows.ofSizeAndGrace(Duration.ofMillis(w.get("size").asLong()),
            Duration.ofMillis(w.get("grace").asLong())).advanceBy(Duration.ofMillis(w.get("advance").asLong()));
    }

    @SuppressWarnings({"unchecked", "rawtypes"})
    private static KTable cogroup(List<Object> parents, List<Boolean> jsonKeys, JsonNode node) {
        if (node.get("emit_on_close").asBoolean()) {
            throw new UnsupportedOperationException("Kafka Streams' windowed cogroup has no emit strategy");
        }
        JsonNode aggregators = node.get("aggregators");
        CogroupedKStream co = ((KStream) parents.get(0)).groupByKey(grouped(jsonKeys.get(0))).cogroup(Menu.aggregator(aggregators.get(0).asText()));
        for (int i = 1; i < parents.size(); i++) {
            co = co.cogroup(((KStream) parents.get(i)).groupByKey(grouped(jsonKeys.get(i))), Menu.aggregator(aggregators.get(i).asText()));
        }
        JsonNode w = node.get("windows");
        if (w == null || w.isNull()) {
            return co.aggregate(Menu.initializer(fn(node, "initializer")));
        }
        switch (w.get("kind").asText()) {
            case "session":
                return co.windowedBy(SessionWindows.ofInactivityGapAndGrace(Duration.ofMillis(w.get("gap").asLong()),
                        Duration.ofMillis(w.get("grace").asLong())))
                    .aggregate(Menu.initializer(fn(node, "initializer")), Menu.merger(fn(node, "merger")));
            case "time":
                return co.windowedBy(timeWindows(w)).aggregate(Menu.initializer(fn(node, "initializer")));
            default:
                return co.windowedBy(SlidingWindows.ofTimeDifferenceAndGrace(
                        Duration.ofMillis(w.get("difference").asLong()), Duration.ofMillis(w.get("grace").asLong())))
                    .aggregate(Menu.initializer(fn(node, "initializer")));
        }
    }
}
