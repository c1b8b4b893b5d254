"""The Processor API (Kafka Streams' ``org.apache.kafka.streams.processor.api``, snake_case):
custom processors with state stores and punctuators, added with ``KStream.process`` and
``KStream.process_values``; `ProcessorKernel` runs one task of one in every host."""

from streamsdsl.processor.api import (
    Cancellable,
    FixedKeyProcessor,
    FixedKeyRecord,
    Processor,
    ProcessorContext,
    PunctuationType,
    Punctuator,
    Record,
    RecordMetadata,
    TaskId,
)
from streamsdsl.processor.kernel import ProcessorKernel, PunctuationQueue, Schedule, ScheduledPunctuation

__all__ = [
    "Cancellable",
    "FixedKeyProcessor",
    "FixedKeyRecord",
    "Processor",
    "ProcessorContext",
    "ProcessorKernel",
    "PunctuationQueue",
    "PunctuationType",
    "Punctuator",
    "Record",
    "RecordMetadata",
    "Schedule",
    "ScheduledPunctuation",
    "TaskId",
]
