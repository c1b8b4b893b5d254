package io.streamsdsl.jvm;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.Serializable;
import org.apache.spark.sql.types.StructType;

/**
 * What a JVM join operator needs on the executors, parsed from the JSON the Python compiler sends
 * ({@code streamsdsl.compiler.jvm_joins}) plus the input column indexes.
 *
 * <p>The input (one row per record of either side, the union the Python operator reads too):
 * {@code key}, {@code value} (a struct of two fields: the left input's value, the right input's;
 * the other side's field null), {@code timestamp}, {@code headers}, the positions,
 * {@code Contract.INPUT_INDEX} (0: left, 1: right) and, in the driver's replay,
 * {@code Contract.CARRIED_STATE}. The {@code params} object holds what one join kind needs besides
 * (windows, grace, ...): {@link #param} reads it.
 */
final class JoinSpec implements Serializable {
    private static final long serialVersionUID = 1L;

    final String node;
    /** The operator's state variable (the Python operator's name for the same state). */
    final String stateName;
    final boolean replay;
    /** Streaming, with a stateful operator below: the output rows end with {@code Contract.EVENT_TIME_OUT}. */
    final boolean eventTimeOut;
    /** Which join ({@code stream_table}, ...): {@link JoinOperator} picks its processor by it. */
    final String join;
    /** {@code inner}, {@code left} or {@code outer}. */
    final String kind;
    /** The Spark schema (JSON) of a key's state row, where a processor keeps one (null: none). */
    final String stateSchema;
    /** The join kind's own parameters (JSON text; {@code {}} when it has none). */
    final String params;
    final int keyIdx, valueIdx, tsIdx, headersIdx, posIdx, outPosIdx, inputIdx, carriedIdx;

    JoinSpec(String json, StructType input) throws Exception {
        JsonNode j = new ObjectMapper().readTree(json);
        node = j.get("node").asText();
        stateName = j.get("state_name").asText();
        replay = j.get("replay").asBoolean();
        eventTimeOut = j.has("event_time_out") && j.get("event_time_out").asBoolean();
        join = j.get("join").asText();
        kind = j.get("kind").asText();
        stateSchema = j.has("state_schema") ? j.get("state_schema").asText() : null;
        params = j.has("params") ? j.get("params").toString() : "{}";
        keyIdx = input.fieldIndex("key");
        valueIdx = input.fieldIndex("value");
        tsIdx = input.fieldIndex("timestamp");
        headersIdx = input.fieldIndex("headers");
        posIdx = input.fieldIndex(Contract.SOURCE_POSITION);
        outPosIdx = input.fieldIndex(Contract.OUTPUT_POSITION);
        inputIdx = input.fieldIndex(Contract.INPUT_INDEX);
        carriedIdx = java.util.Arrays.asList(input.fieldNames()).indexOf(Contract.CARRIED_STATE);
    }

    /** The join kind's parameter {@code name} (null when absent). */
    JsonNode param(String name) throws Exception {
        return new ObjectMapper().readTree(params).get(name);
    }
}
