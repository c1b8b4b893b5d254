package streamsdsl.oracle;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

import com.fasterxml.jackson.databind.JsonNode;

import org.apache.kafka.common.serialization.Serde;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KeyValue;
import org.apache.kafka.streams.processor.PunctuationType;
import org.apache.kafka.streams.processor.api.FixedKeyProcessor;
import org.apache.kafka.streams.processor.api.FixedKeyProcessorContext;
import org.apache.kafka.streams.processor.api.FixedKeyProcessorSupplier;
import org.apache.kafka.streams.processor.api.FixedKeyRecord;
import org.apache.kafka.streams.processor.api.Processor;
import org.apache.kafka.streams.processor.api.ProcessorContext;
import org.apache.kafka.streams.processor.api.ProcessorSupplier;
import org.apache.kafka.streams.processor.api.Record;
import org.apache.kafka.streams.state.KeyValueBytesStoreSupplier;
import org.apache.kafka.streams.state.KeyValueIterator;
import org.apache.kafka.streams.state.KeyValueStore;
import org.apache.kafka.streams.state.StoreBuilder;
import org.apache.kafka.streams.state.Stores;
import org.apache.kafka.streams.state.WindowBytesStoreSupplier;
import org.apache.kafka.streams.state.WindowStore;

/**
 * The menu of processors, by name: the same processors as oracle/processors.py, written with Kafka
 * Streams' Processor API ({@code api.Processor} for {@code process}, {@code api.FixedKeyProcessor}
 * for {@code process_values}). Each processor's logic is one core class that both kinds share; the
 * parameters come from the spec ({@code params}) and the stores from its {@code stores} list.
 *
 * <ul>
 *   <li>{@code dedup}: a key-value store of the ids seen (the record's value, or its key, as text)
 *   with the timestamp of their first record; each first occurrence is forwarded unchanged, a
 *   record without an id (null) too; a stream-time punctuator every {@code interval} ms deletes the
 *   ids first seen before the punctuation time minus {@code horizon}.</li>
 *   <li>{@code window_count}: a per-key count in a window store of tumbling windows of {@code size}
 *   ms ({@code put(key, count, windowStart)}); each record is forwarded with its key's count in its
 *   window as the value; a record with a null key is not counted and not forwarded.</li>
 *   <li>{@code store_size}: keeps each key's latest value as text (a null value deletes the key) and
 *   forwards every record unchanged; a stream-time punctuator (a wall-clock one with {@code punctuation}
 *   "wall_clock") every {@code interval} ms forwards, with the punctuation time as the timestamp, ("size", approximateNumEntries()) ({@code emit}
 *   "approximate"), ("size", the count of all()) ("count"), or every entry of all() in key order
 *   ("entries").</li>
 * </ul>
 */
final class Processors {
    private Processors() {
    }

    private static IllegalArgumentException unknown(String kind, String name) {
        return new IllegalArgumentException("not on the oracle's menu of processors as a " + kind + ": " + name);
    }

    /** The supplier of processor {@code name} for {@code KStream.process}. */
    static ProcessorSupplier<Object, Object, Object, Object> processor(String name, JsonNode params) {
        switch (name) {
            case "dedup": return () -> new DedupProcessor(new Dedup(params));
            case "window_count": return () -> new WindowCountProcessor(new WindowCount(params));
            case "store_size": return () -> new StoreSizeProcessor(new StoreSize(params));
            default: throw unknown("processor", name);
        }
    }

    /** The supplier of processor {@code name} for {@code KStream.processValues}. */
    static FixedKeyProcessorSupplier<Object, Object, Object> fixedKeyProcessor(String name, JsonNode params) {
        switch (name) {
            case "dedup": return () -> new DedupFixedKeyProcessor(new Dedup(params));
            case "window_count": return () -> new WindowCountFixedKeyProcessor(new WindowCount(params));
            default: throw unknown("fixed-key processor", name);
        }
    }

    private static String text(Object value) {
        return String.valueOf(value);
    }

    // ---- stores ----

    private static Serde<?> serde(JsonNode name) {
        switch (name.asText()) {
            case "String": return Serdes.String();
            case "Long": return Serdes.Long();
            default: throw new IllegalArgumentException("the oracle's stores have String and Long serdes, not " + name);
        }
    }

    /**
     * The store builder of a spec's store: {"name", "kind" ("key-value" | "window"), "persistent",
     * "retention", "window_size", "retain_duplicates", "key_serde", "value_serde", "caching",
     * "logging"}.
     */
    @SuppressWarnings({"unchecked", "rawtypes"})
    static StoreBuilder<?> storeBuilder(JsonNode store) {
        String name = store.get("name").asText();
        boolean persistent = store.get("persistent").asBoolean();
        Serde keySerde = serde(store.get("key_serde"));
        Serde valueSerde = serde(store.get("value_serde"));
        StoreBuilder builder;
        switch (store.get("kind").asText()) {
            case "key-value": {
                KeyValueBytesStoreSupplier supplier = persistent ? Stores.persistentKeyValueStore(name)
                    : Stores.inMemoryKeyValueStore(name);
                builder = Stores.keyValueStoreBuilder(supplier, keySerde, valueSerde);
                break;
            }
            case "window": {
                Duration retention = Duration.ofMillis(store.get("retention").asLong());
                Duration size = Duration.ofMillis(store.get("window_size").asLong());
                boolean duplicates = store.get("retain_duplicates").asBoolean();
                WindowBytesStoreSupplier supplier = persistent
                    ? Stores.persistentWindowStore(name, retention, size, duplicates)
                    : Stores.inMemoryWindowStore(name, retention, size, duplicates);
                builder = Stores.windowStoreBuilder(supplier, keySerde, valueSerde);
                break;
            }
            default:
                throw new IllegalArgumentException("the oracle has no rule for store kind " + store.get("kind"));
        }
        builder = store.get("caching").asBoolean() ? builder.withCachingEnabled() : builder.withCachingDisabled();
        return store.get("logging").asBoolean() ? builder.withLoggingEnabled(Map.of()) : builder.withLoggingDisabled();
    }

    // ---- dedup ----

    /** The deduplication both kinds of processor share. */
    static final class Dedup {
        final String storeName;
        final boolean byKey;
        final long horizon;
        final long interval;
        KeyValueStore<String, Long> seen;

        Dedup(JsonNode params) {
            storeName = params.get("store").asText();
            byKey = params.get("by").asText().equals("key");
            horizon = params.get("horizon").asLong();
            interval = params.get("interval").asLong();
        }

        /** Whether the record is the first of its id (then the id is stored with its timestamp). */
        boolean first(Object key, Object value, long timestamp) {
            Object id = byKey ? key : value;
            if (id == null) {
                return true;
            }
            if (seen.get(text(id)) != null) {
                return false;
            }
            seen.put(text(id), timestamp);
            return true;
        }

        /** Deletes the ids first seen before {@code timestamp - horizon} (collected first, then deleted). */
        void purge(long timestamp) {
            List<String> old = new ArrayList<>();
            try (KeyValueIterator<String, Long> all = seen.all()) {
                while (all.hasNext()) {
                    KeyValue<String, Long> entry = all.next();
                    if (entry.value < timestamp - horizon) {
                        old.add(entry.key);
                    }
                }
            }
            for (String id : old) {
                seen.delete(id);
            }
        }
    }

    static final class DedupProcessor implements Processor<Object, Object, Object, Object> {
        private final Dedup core;
        private ProcessorContext<Object, Object> context;

        DedupProcessor(Dedup core) {
            this.core = core;
        }

        @Override
        public void init(ProcessorContext<Object, Object> context) {
            this.context = context;
            core.seen = context.getStateStore(core.storeName);
            context.schedule(Duration.ofMillis(core.interval), PunctuationType.STREAM_TIME, core::purge);
        }

        @Override
        public void process(Record<Object, Object> record) {
            if (core.first(record.key(), record.value(), record.timestamp())) {
                context.forward(record);
            }
        }
    }

    static final class DedupFixedKeyProcessor implements FixedKeyProcessor<Object, Object, Object> {
        private final Dedup core;
        private FixedKeyProcessorContext<Object, Object> context;

        DedupFixedKeyProcessor(Dedup core) {
            this.core = core;
        }

        @Override
        public void init(FixedKeyProcessorContext<Object, Object> context) {
            this.context = context;
            core.seen = context.getStateStore(core.storeName);
            context.schedule(Duration.ofMillis(core.interval), PunctuationType.STREAM_TIME, core::purge);
        }

        @Override
        public void process(FixedKeyRecord<Object, Object> record) {
            if (core.first(record.key(), record.value(), record.timestamp())) {
                context.forward(record);
            }
        }
    }

    // ---- window_count ----

    /** The windowed count both kinds of processor share. */
    static final class WindowCount {
        final String storeName;
        final long size;
        WindowStore<String, Long> counts;

        WindowCount(JsonNode params) {
            storeName = params.get("store").asText();
            size = params.get("size").asLong();
        }

        /** The key's count in the record's window, this record included (null: a null key, not counted). */
        Long count(Object key, long timestamp) {
            if (key == null) {
                return null;
            }
            long start = timestamp - timestamp % size;
            Long before = counts.fetch((String) key, start);
            long count = (before == null ? 0L : before) + 1;
            counts.put((String) key, count, start);
            return count;
        }
    }

    static final class WindowCountProcessor implements Processor<Object, Object, Object, Object> {
        private final WindowCount core;
        private ProcessorContext<Object, Object> context;

        WindowCountProcessor(WindowCount core) {
            this.core = core;
        }

        @Override
        public void init(ProcessorContext<Object, Object> context) {
            this.context = context;
            core.counts = context.getStateStore(core.storeName);
        }

        @Override
        public void process(Record<Object, Object> record) {
            Long count = core.count(record.key(), record.timestamp());
            if (count != null) {
                context.forward(record.withValue(count));
            }
        }
    }

    static final class WindowCountFixedKeyProcessor implements FixedKeyProcessor<Object, Object, Object> {
        private final WindowCount core;
        private FixedKeyProcessorContext<Object, Object> context;

        WindowCountFixedKeyProcessor(WindowCount core) {
            this.core = core;
        }

        @Override
        public void init(FixedKeyProcessorContext<Object, Object> context) {
            this.context = context;
            core.counts = context.getStateStore(core.storeName);
        }

        @Override
        public void process(FixedKeyRecord<Object, Object> record) {
            Long count = core.count(record.key(), record.timestamp());
            if (count != null) {
                context.forward(record.withValue(count));
            }
        }
    }

    // ---- store_size ----

    /** The latest value per key, and a punctuator that reports the store (process only: it forwards new records). */
    static final class StoreSizeProcessor implements Processor<Object, Object, Object, Object> {
        private final StoreSize core;
        private ProcessorContext<Object, Object> context;

        StoreSizeProcessor(StoreSize core) {
            this.core = core;
        }

        @Override
        public void init(ProcessorContext<Object, Object> context) {
            this.context = context;
            core.latest = context.getStateStore(core.storeName);
            context.schedule(Duration.ofMillis(core.interval), core.wallClock ? PunctuationType.WALL_CLOCK_TIME
                : PunctuationType.STREAM_TIME, this::punctuate);
        }

        @Override
        public void process(Record<Object, Object> record) {
            if (record.key() != null) {
                core.latest.put((String) record.key(), record.value() == null ? null : text(record.value()));
            }
            context.forward(record);
        }

        private void punctuate(long timestamp) {
            switch (core.emit) {
                case "approximate":
                    context.forward(new Record<>("size", core.latest.approximateNumEntries(), timestamp));
                    break;
                case "count": {
                    long count = 0;
                    try (KeyValueIterator<String, String> all = core.latest.all()) {
                        while (all.hasNext()) {
                            all.next();
                            count++;
                        }
                    }
                    context.forward(new Record<>("size", count, timestamp));
                    break;
                }
                default: {
                    try (KeyValueIterator<String, String> all = core.latest.all()) {
                        while (all.hasNext()) {
                            KeyValue<String, String> entry = all.next();
                            context.forward(new Record<>(entry.key, entry.value, timestamp));
                        }
                    }
                }
            }
        }
    }

    static final class StoreSize {
        final String storeName;
        final long interval;
        final String emit;
        final boolean wallClock;
        KeyValueStore<String, String> latest;

        StoreSize(JsonNode params) {
            storeName = params.get("store").asText();
            interval = params.get("interval").asLong();
            emit = params.get("emit").asText();
            wallClock = params.has("punctuation") && params.get("punctuation").asText().equals("wall_clock");
        }
    }
}
