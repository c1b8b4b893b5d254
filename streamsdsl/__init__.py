"""streamsdsl: a Kafka-Streams-style DSL for Python that compiles to Spark Structured Streaming.

Every name is imported on first use (PEP 562: `_LAZY`): the DSL and the IR with
``StreamsBuilder`` and its options, pyspark only with the runtime (`TopologyTestDriver`,
`KafkaStreams`, `explain`), which compiles with `streamsdsl.compiler`. A process that imports one
module of streamsdsl (a Spark Python worker, a Python data source's planner) loads only what
that module imports.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from streamsdsl._lazy import lazy_getattr
from streamsdsl._shipped import use_native_archives

if TYPE_CHECKING:  # the names below, for type checkers; imported on first use (`_LAZY`)
    from streamsdsl.dsl.aggregations import Aggregations
    from streamsdsl.dsl.api import (
        Branched,
        BranchedKStream,
        GlobalKTable,
        KGroupedStream,
        KStream,
        KTable,
        SessionWindowedKStream,
        StreamsBuilder,
        TimeWindowedCogroupedKStream,
        TimeWindowedKStream,
    )
    from streamsdsl.dsl.grouped_table import KGroupedTable
    from streamsdsl.dsl.joiners import Joiners
    from streamsdsl.dsl.options import Consumed, Grouped, Materialized, Named, Produced, Repartitioned, TableJoined
    from streamsdsl.dsl.printed import Printed
    from streamsdsl.dsl.suppress import BufferConfig, Suppressed
    from streamsdsl.errors import (
        InvalidArgumentError,
        InvalidTypeError,
        NotYetImplementedError,
        OperationNotDefinedError,
        PunctuationError,
        RecordDeserializationError,
        RecordError,
        RecordSerializationError,
        SerializationError,
        StreamsDslError,
        TopologyError,
        UserFunctionError,
    )
    from streamsdsl.ir.topology import Topology
    from streamsdsl.processor import FixedKeyProcessor, Processor, PunctuationType, Record
    from streamsdsl.runtime.app import KafkaStreams
    from streamsdsl.runtime.backfill import KafkaRange, backfill
    from streamsdsl.runtime.driver import TestInputTopic, TestOutputTopic, TestRecord, TopologyTestDriver
    from streamsdsl.runtime.explain import explain
    from streamsdsl.runtime.queries import QueryableStoreTypes, StoreQueryParameters
    from streamsdsl.runtime.session import configure_spark
    from streamsdsl.runtime.stores import KeyValue, ValueAndTimestamp
    from streamsdsl.state import StoreBuilder, Stores
    from streamsdsl.values.joins import JoinWindows, Joined, StreamJoined
    from streamsdsl.values.serdes import CustomSerde, Serde, Serdes, WindowedSerdes
    from streamsdsl.values.windows import (
        EmitStrategy,
        EmitStrategyKind,
        SessionWindow,
        SessionWindows,
        SlidingWindows,
        TimeWindow,
        TimeWindows,
        Window,
        Windowed,
    )

__version__ = "0.1.0"

#: Every exported name's module: imported on first use of the name (PEP 562), so that a process
#: importing one module of streamsdsl (a Spark Python worker, a data source's planner) does not
#: load the whole DSL.
_LAZY = {
    "Aggregations": "streamsdsl.dsl.aggregations",
    "Branched": "streamsdsl.dsl.api",
    "BranchedKStream": "streamsdsl.dsl.api",
    "GlobalKTable": "streamsdsl.dsl.api",
    "KGroupedStream": "streamsdsl.dsl.api",
    "KStream": "streamsdsl.dsl.api",
    "KTable": "streamsdsl.dsl.api",
    "SessionWindowedKStream": "streamsdsl.dsl.api",
    "StreamsBuilder": "streamsdsl.dsl.api",
    "TimeWindowedCogroupedKStream": "streamsdsl.dsl.api",
    "TimeWindowedKStream": "streamsdsl.dsl.api",
    "KGroupedTable": "streamsdsl.dsl.grouped_table",
    "Joiners": "streamsdsl.dsl.joiners",
    "Consumed": "streamsdsl.dsl.options",
    "Grouped": "streamsdsl.dsl.options",
    "Materialized": "streamsdsl.dsl.options",
    "Named": "streamsdsl.dsl.options",
    "Produced": "streamsdsl.dsl.options",
    "Repartitioned": "streamsdsl.dsl.options",
    "TableJoined": "streamsdsl.dsl.options",
    "Printed": "streamsdsl.dsl.printed",
    "BufferConfig": "streamsdsl.dsl.suppress",
    "Suppressed": "streamsdsl.dsl.suppress",
    "InvalidArgumentError": "streamsdsl.errors",
    "InvalidTypeError": "streamsdsl.errors",
    "NotYetImplementedError": "streamsdsl.errors",
    "OperationNotDefinedError": "streamsdsl.errors",
    "PunctuationError": "streamsdsl.errors",
    "RecordDeserializationError": "streamsdsl.errors",
    "RecordError": "streamsdsl.errors",
    "RecordSerializationError": "streamsdsl.errors",
    "SerializationError": "streamsdsl.errors",
    "StreamsDslError": "streamsdsl.errors",
    "TopologyError": "streamsdsl.errors",
    "UserFunctionError": "streamsdsl.errors",
    "Topology": "streamsdsl.ir.topology",
    "FixedKeyProcessor": "streamsdsl.processor",
    "Processor": "streamsdsl.processor",
    "PunctuationType": "streamsdsl.processor",
    "Record": "streamsdsl.processor",
    "KafkaStreams": "streamsdsl.runtime.app",
    "KafkaRange": "streamsdsl.runtime.backfill",
    "backfill": "streamsdsl.runtime.backfill",
    "TestInputTopic": "streamsdsl.runtime.driver",
    "TestOutputTopic": "streamsdsl.runtime.driver",
    "TestRecord": "streamsdsl.runtime.driver",
    "TopologyTestDriver": "streamsdsl.runtime.driver",
    "explain": "streamsdsl.runtime.explain",
    "QueryableStoreTypes": "streamsdsl.runtime.queries",
    "StoreQueryParameters": "streamsdsl.runtime.queries",
    "configure_spark": "streamsdsl.runtime.session",
    "KeyValue": "streamsdsl.runtime.stores",
    "ValueAndTimestamp": "streamsdsl.runtime.stores",
    "StoreBuilder": "streamsdsl.state",
    "Stores": "streamsdsl.state",
    "JoinWindows": "streamsdsl.values.joins",
    "Joined": "streamsdsl.values.joins",
    "StreamJoined": "streamsdsl.values.joins",
    "CustomSerde": "streamsdsl.values.serdes",
    "Serde": "streamsdsl.values.serdes",
    "Serdes": "streamsdsl.values.serdes",
    "WindowedSerdes": "streamsdsl.values.serdes",
    "EmitStrategy": "streamsdsl.values.windows",
    "EmitStrategyKind": "streamsdsl.values.windows",
    "SessionWindow": "streamsdsl.values.windows",
    "SessionWindows": "streamsdsl.values.windows",
    "SlidingWindows": "streamsdsl.values.windows",
    "TimeWindow": "streamsdsl.values.windows",
    "TimeWindows": "streamsdsl.values.windows",
    "Window": "streamsdsl.values.windows",
    "Windowed": "streamsdsl.values.windows",
}


__getattr__ = lazy_getattr("streamsdsl", _LAZY)


__all__ = [
    "Aggregations", "Branched", "BranchedKStream", "configure_spark",
    "Consumed", "EmitStrategy", "Grouped", "Joiners", "InvalidArgumentError", "InvalidTypeError", "KGroupedStream",
    "GlobalKTable", "KStream", "KTable", "KeyValue", "Materialized", "Named", "OperationNotDefinedError", "Printed",
    "Produced", "Repartitioned",
    "TableJoined", "SerializationError", "Serde", "Serdes", "SessionWindow", "SessionWindowedKStream", "SessionWindows",
    "StreamsBuilder", "StreamsDslError", "TestInputTopic", "TestOutputTopic", "TestRecord", "TimeWindow",
    "Topology", "TopologyError", "TopologyTestDriver", "Window", "Windowed", "WindowedSerdes", "__version__",
    "KafkaStreams", "SlidingWindows", "TimeWindowedCogroupedKStream", "TimeWindowedKStream", "TimeWindows",
    "CustomSerde", "EmitStrategyKind", "explain", "RecordError", "UserFunctionError", "RecordDeserializationError",
    "RecordSerializationError", "JoinWindows", "Joined", "StreamJoined", "KGroupedTable", "Suppressed", "BufferConfig",
    "NotYetImplementedError", "ValueAndTimestamp", "FixedKeyProcessor", "Processor", "PunctuationType", "Record",
    "StoreBuilder", "Stores", "PunctuationError", "StoreQueryParameters", "QueryableStoreTypes",
    "backfill", "KafkaRange",
]

# streamsdsl imported from the zip it ships: its native archives beside the zip made importable,
# before anything imports confluent-kafka (on YARN they are links into the NodeManager's cache)
use_native_archives(__file__)
