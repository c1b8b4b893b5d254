"""The state stores a stopped query leaves open in this JVM, finished and closed at once.

When a streaming query stops, Spark keeps its state stores loaded until the next run of its
maintenance thread (``spark.sql.streaming.stateStore.maintenanceInterval``, a minute by
default). That run writes each store's snapshot (RocksDB's ``<version>.zip`` and its SST files)
into the query's checkpoint and only then closes the store. So up to a minute after the query
stopped, and after `KafkaStreams.close` or a `TopologyTestDriver`'s ``close()`` returned, files
appear in the checkpoint again: in a test driver's temporary directory that ``close()`` deleted
(measured: 54 s later), or in an application's checkpoint that `KafkaStreams.clean_up` reset,
where an old run's snapshot does not belong. Kafka Streams' ``close()`` returns with its stores
flushed and closed; `release_state_stores` does the same here: Spark's own
``StateStore.doMaintenanceAndUnload`` for each store of the query, before ``close()`` returns.

Only a local master's stores live in the driver's JVM; on a cluster they are in the executors,
whose maintenance threads write and close them there, in the checkpoint on the shared file
system, which a reset then follows.
"""

from __future__ import annotations

import logging
import os
from typing import Any

from streamsdsl.runtime.connect import is_connect

__all__ = ["loaded_state_stores", "release_state_stores"]

log = logging.getLogger("streamsdsl")

#: The store name of a ``transformWithState`` operator (its state variables are column families in it).
_STORE_NAME = "default"


def _in_this_jvm(spark: Any) -> bool:
    """Whether the session's state stores are in its driver's JVM: a classic session on a
    ``local`` master (``local``, ``local[N]``; a ``local-cluster`` has executor JVMs)."""
    master = "" if is_connect(spark) else spark.sparkContext.master
    return master == "local" or master.startswith("local[")


def _state_store(spark: Any) -> Any:
    """Spark's ``StateStore`` object, which holds the state stores loaded in this JVM."""
    return getattr(getattr(spark._jvm.org.apache.spark.sql.execution.streaming.state, "StateStore$"), "MODULE$")


def loaded_state_stores(spark: Any, run_id: str, checkpoint: str) -> list[Any]:
    """The state stores of the query run ``run_id`` on ``checkpoint`` that are loaded in this
    JVM (Spark's ``StateStoreProviderId``\\ s): one per stateful operator and partition found
    under ``checkpoint/state``. Empty on a cluster or over Spark Connect."""
    state = os.path.join(checkpoint, "state")
    if not _in_this_jvm(spark) or not os.path.isdir(state):
        return []
    jvm = spark._jvm
    package = jvm.org.apache.spark.sql.execution.streaming.state
    path = jvm.org.apache.hadoop.fs.Path(checkpoint)
    qualified = path.getFileSystem(spark._jsc.hadoopConfiguration()).makeQualified(path).toUri().toString()
    root = jvm.org.apache.hadoop.fs.Path(qualified, "state").toString()  # as Spark names it in a store's id
    run, stores = jvm.java.util.UUID.fromString(run_id), _state_store(spark)
    ids = [package.StateStoreProviderId(package.StateStoreId(root, int(op), int(part), _STORE_NAME), run)
           for op in sorted(os.listdir(state)) if op.isdigit()
           for part in sorted(os.listdir(os.path.join(state, op))) if part.isdigit()]
    return [i for i in ids if stores.isLoaded(i)]


def release_state_stores(spark: Any, run_id: str, checkpoint: str) -> int:
    """Write the snapshot of each state store the stopped query run ``run_id`` left loaded, and
    close it (`loaded_state_stores`); how many. A failure is logged, not raised: the stores
    are then left to Spark's maintenance thread, as without this."""
    try:
        loaded = loaded_state_stores(spark, run_id, checkpoint)
        if loaded:
            stores = _state_store(spark)
            for provider in loaded:
                stores.doMaintenanceAndUnload(provider)
    except Exception as exc:  # noqa: BLE001 - best effort, see the docstring
        log.warning("the state stores of query run %s (checkpoint %s) were left to Spark's maintenance thread: %s",
                    run_id, checkpoint, exc)
        return 0
    return len(loaded)
