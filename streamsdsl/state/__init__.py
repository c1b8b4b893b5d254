"""State stores of the Processor API (Kafka Streams' ``org.apache.kafka.streams.state``):
what a store is (`Stores`, `StoreBuilder` and the suppliers), where it keeps its bytes
(`StoreBackend`, `MemoryBackend`) and the typed stores a processor reads and writes
(`KeyValueStore`, `TimestampedKeyValueStore`, `WindowStore`, `SessionStore`, made by
`open_store`). Pure Python: it imports only the value objects, the errors and the validation
helpers below it.
"""

from streamsdsl.state.backends import MemoryBackend, StoreBackend
from streamsdsl.state.builders import (
    KeyValueBytesStoreSupplier,
    SessionBytesStoreSupplier,
    StoreBuilder,
    Stores,
    StoreSupplier,
    WindowBytesStoreSupplier,
)
from streamsdsl.state.stores import (
    InvalidStateStoreError,
    KeyValueIterator,
    KeyValueStore,
    NoSuchElementError,
    SessionStore,
    StateStore,
    TimestampedKeyValueStore,
    WindowStore,
    WindowStoreIterator,
    open_store,
)
from streamsdsl.values.keyvalue import KeyValue, ValueAndTimestamp

__all__ = [
    "InvalidStateStoreError",
    "KeyValue",
    "KeyValueBytesStoreSupplier",
    "KeyValueIterator",
    "KeyValueStore",
    "MemoryBackend",
    "NoSuchElementError",
    "SessionBytesStoreSupplier",
    "SessionStore",
    "StateStore",
    "StoreBackend",
    "StoreBuilder",
    "StoreSupplier",
    "Stores",
    "TimestampedKeyValueStore",
    "ValueAndTimestamp",
    "WindowBytesStoreSupplier",
    "WindowStore",
    "WindowStoreIterator",
    "open_store",
]
