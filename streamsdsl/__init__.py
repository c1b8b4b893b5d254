"""streamsdsl: a Kafka-Streams-style DSL for Python that compiles to Spark Structured Streaming.

Only the DSL and the IR are imported here; pyspark is loaded lazily by the runtime
(`TopologyTestDriver`, `KafkaStreams`, `explain`), which compiles with `streamsdsl.compiler`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from streamsdsl._lazy import lazy_getattr
from streamsdsl._shipped import use_native_archives

from streamsdsl.dsl.aggregations import Aggregations
from streamsdsl.dsl.joiners import Joiners
from streamsdsl.dsl.api import Branched, BranchedKStream, GlobalKTable, KGroupedStream, KStream, KTable, SessionWindowedKStream
from streamsdsl.dsl.api import StreamsBuilder
from streamsdsl.dsl.api import TimeWindowedCogroupedKStream, TimeWindowedKStream
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
from streamsdsl.dsl.options import Consumed, Grouped, Materialized, Named, Produced, Repartitioned, TableJoined
from streamsdsl.dsl.printed import Printed
from streamsdsl.values.joins import JoinWindows, Joined, StreamJoined
from streamsdsl.dsl.grouped_table import KGroupedTable
from streamsdsl.dsl.suppress import BufferConfig, Suppressed
from streamsdsl.values.serdes import CustomSerde, Serde, Serdes, WindowedSerdes
from streamsdsl.ir.topology import Topology
from streamsdsl.processor import FixedKeyProcessor, Processor, PunctuationType, Record
from streamsdsl.runtime.session import configure_spark
from streamsdsl.state import StoreBuilder, Stores
from streamsdsl.values.windows import EmitStrategy, EmitStrategyKind, SessionWindow, SessionWindows, TimeWindow, Window, Windowed
from streamsdsl.values.windows import SlidingWindows, TimeWindows

if TYPE_CHECKING:
    from streamsdsl.runtime.app import KafkaStreams
    from streamsdsl.runtime.backfill import KafkaRange, backfill
    from streamsdsl.runtime.explain import explain
    from streamsdsl.runtime.driver import KeyValue, TestInputTopic, TestOutputTopic, TestRecord, TopologyTestDriver
    from streamsdsl.runtime.queries import QueryableStoreTypes, StoreQueryParameters
    from streamsdsl.runtime.stores import ValueAndTimestamp

__version__ = "0.1.0"

_LAZY = {
    "TopologyTestDriver": "streamsdsl.runtime.driver",
    "TestRecord": "streamsdsl.runtime.driver",
    "TestInputTopic": "streamsdsl.runtime.driver",
    "TestOutputTopic": "streamsdsl.runtime.driver",
    "KeyValue": "streamsdsl.runtime.stores",
    "ValueAndTimestamp": "streamsdsl.runtime.stores",
    "KafkaStreams": "streamsdsl.runtime.app",
    "backfill": "streamsdsl.runtime.backfill",
    "KafkaRange": "streamsdsl.runtime.backfill",
    "explain": "streamsdsl.runtime.explain",
    "StoreQueryParameters": "streamsdsl.runtime.queries",
    "QueryableStoreTypes": "streamsdsl.runtime.queries",
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
