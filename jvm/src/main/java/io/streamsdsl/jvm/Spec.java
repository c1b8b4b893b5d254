package io.streamsdsl.jvm;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.Serializable;
import java.util.Comparator;
import org.apache.spark.sql.types.StructType;

/**
 * What the operator needs on the executors, parsed from the JSON the Python compiler sends
 * ({@code streamsdsl.compiler.jvm_operator}) plus the input column indexes.
 */
final class Spec implements Serializable {
    private static final long serialVersionUID = 1L;

    final String node;
    /** The operator's state variable: the store it holds (the Python operator's name too). */
    final String stateName;
    final boolean replay;
    /** Streaming, with a stateful operator below: the output rows end with {@code Contract.EVENT_TIME_OUT}. */
    final boolean eventTimeOut;
    final boolean emitOnClose;
    /** Idle close (ms; 0: off): streaming on processing-time timers ({@code AggregateConfig.idle_close_ms}). */
    final long idleCloseMs;
    /** Idle close: the directory of the markers through which the tasks learn when the aggregation
     * last had a record ({@link IdleChannel}, under the query's checkpoint; null: none). */
    final String idleChannel;
    /** Streaming continuing a backfill: the stream time below which the operator's stream time
     * does not start in any batch (the backfill's; -1: none, {@code AggregateConfig.stream_time_floor}). */
    final long streamTimeFloor;
    final boolean windowedKey;
    final String keyKind;
    final String outType;
    final Windowing windowing;
    final Agg agg;
    /** Per input: its records crossed a repartition topic (replay: each is its own input record,
     * whose cache flush forwards its writes; the others share one flush per source record). */
    final boolean[] repartitioned;
    final int keyIdx, valueIdx, tsIdx, headersIdx, posIdx, outPosIdx, numberIdx, inputIdx;
    final int timesBeforeIdx, carriedIdx, runStreamTimeIdx;

    Spec(String json, StructType input) throws Exception {
        JsonNode j = new ObjectMapper().readTree(json);
        node = j.get("node").asText();
        stateName = j.get("state_name").asText();
        replay = j.get("replay").asBoolean();
        eventTimeOut = j.has("event_time_out") && j.get("event_time_out").asBoolean();
        emitOnClose = j.get("emit_on_close").asBoolean();
        idleCloseMs = j.has("idle_close_ms") && !j.get("idle_close_ms").isNull() ? j.get("idle_close_ms").asLong() : 0;
        idleChannel = j.has("idle_channel") && !j.get("idle_channel").isNull() ? j.get("idle_channel").asText() : null;
        streamTimeFloor = j.has("stream_time_floor") && !j.get("stream_time_floor").isNull()
            ? j.get("stream_time_floor").asLong() : -1;
        windowedKey = j.get("windowed_key").asBoolean();
        keyKind = j.get("key_kind").asText();
        outType = j.get("out_type").asText();
        JsonNode w = j.get("windowing");
        switch (w.get("kind").asText()) {
            case "session":
                windowing = new Windowing.Session(w.get("gap").asLong(), w.get("grace").asLong(),
                    !w.has("cached") || w.get("cached").asBoolean());
                break;
            case "time":
                windowing = new Windowing.Time(w.get("size").asLong(), w.get("advance").asLong(), w.get("grace").asLong());
                break;
            case "sliding":
                windowing = new Sliding(w.get("time_difference").asLong(), w.get("grace").asLong());
                break;
            case "none":
                windowing = new Windowing.Unwindowed();
                break;
            default:
                throw new IllegalArgumentException(node + ": unknown window kind " + w.get("kind"));
        }
        JsonNode opsNode = j.get("ops");
        Agg.Op[] ops = new Agg.Op[opsNode.size()];
        for (int i = 0; i < ops.length; i++) ops[i] = Agg.Op.valueOf(opsNode.get(i).asText());
        JsonNode merge = j.get("merge");
        agg = new Agg(j.get("double").asBoolean(), j.get("init_null").asBoolean(), ops,
            merge == null || merge.isNull() ? null : Agg.Merge.valueOf(merge.asText()), node);
        JsonNode rep = j.get("repartitioned");
        repartitioned = new boolean[rep == null ? 0 : rep.size()];
        for (int i = 0; i < repartitioned.length; i++) repartitioned[i] = rep.get(i).asBoolean();
        keyIdx = input.fieldIndex("key");
        valueIdx = input.fieldIndex("value");
        tsIdx = input.fieldIndex("timestamp");
        headersIdx = input.fieldIndex("headers");
        posIdx = input.fieldIndex(Contract.SOURCE_POSITION);
        outPosIdx = input.fieldIndex(Contract.OUTPUT_POSITION);
        numberIdx = index(input, Contract.NUMBER);
        inputIdx = index(input, Contract.INPUT_INDEX);
        timesBeforeIdx = index(input, Contract.STREAM_TIMES_BEFORE);
        carriedIdx = index(input, Contract.CARRIED_STATE);
        runStreamTimeIdx = index(input, Contract.RUN_STREAM_TIME);
    }

    /** Whether input {@code input}'s records crossed a repartition topic. */
    boolean repartitioned(int input) {
        return input < repartitioned.length && repartitioned[input];
    }

    private static int index(StructType schema, String name) {
        return java.util.Arrays.asList(schema.fieldNames()).indexOf(name);
    }

    /** How a key's windows are kept: sessions in Kafka's (end, start) order, others by start. */
    Comparator<Win> storageOrder() {
        return windowing instanceof Windowing.Session ? Windowing.BY_END_START : Windowing.BY_START;
    }
}
