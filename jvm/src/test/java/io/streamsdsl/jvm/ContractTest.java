package io.streamsdsl.jvm;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.Arrays;
import org.junit.jupiter.api.Test;

/** The generated contract (from streamsdsl/compiler/columns.py) is what the operator uses. */
class ContractTest {
    @Test
    void theReplayRowIsTheStreamingRowPlusTheCarriedColumns() {
        assertArrayEquals(Contract.OUTPUT_FIELDS,
            Arrays.copyOf(Contract.REPLAY_OUTPUT_FIELDS, Contract.OUTPUT_FIELDS.length));
        assertEquals(Contract.CARRIED_STATE, Contract.REPLAY_OUTPUT_FIELDS[Contract.REPLAY_OUTPUT_FIELDS.length - 1]);
    }

    @Test
    void theOperatorReportsTheContractsProtocolAndEvents() {
        assertEquals(Contract.PROTOCOL, AggregateOperator.protocol());
        assertEquals(Contract.DROPPED, AggregateProcessor.DROPPED);
        assertEquals(Contract.EMIT_FINAL, AggregateProcessor.EMIT_FINAL);
    }
}
