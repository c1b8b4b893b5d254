"""A stopped query's state stores, finished and closed before ``close()`` returns
(`streamsdsl.runtime.state_stores`): without it Spark's maintenance thread writes each store's
snapshot into the checkpoint up to a minute later, into a test driver's deleted directory or an
application's reset checkpoint."""

from __future__ import annotations

import glob
import os
from typing import Any

import pytest

from streamsdsl import Consumed, Produced, Serdes, StreamsBuilder, TopologyTestDriver
from streamsdsl.runtime.state_stores import loaded_state_stores, release_state_stores

pytestmark = pytest.mark.spark

S, L = Serdes.String(), Serdes.Long()


def _count_driver(spark: Any) -> TopologyTestDriver:
    """A streaming-engine driver of a count that has run 12 micro-batches (a RocksDB snapshot is
    due after 10 versions of a store)."""
    b = StreamsBuilder()
    b.stream("in", Consumed.with_serdes(S, S)).group_by_key().count().to_stream().to("out", Produced.with_serdes(S, L))
    driver = TopologyTestDriver(b.build(), engine="streaming", spark=spark)
    pipe = driver.create_input_topic("in", S, S)
    for t in range(12):
        pipe.pipe_input("a", "x", t)
    assert driver.create_output_topic("out", S, L).read_key_values_to_list()[-1].value == 12
    return driver


@pytest.mark.usefixtures("jvm_operator")
def test_release_writes_each_snapshot_and_closes_the_stores(spark: Any) -> None:
    """After the query stopped its store is still loaded; `release_state_stores` writes its
    snapshot (RocksDB's ``<version>.zip``) if Spark's maintenance thread has not, and closes the
    store; a second call finds nothing."""
    driver = _count_driver(spark)
    engine = driver._engine
    query, checkpoint = engine._query, os.path.join(engine._directory, "checkpoint")
    try:
        query.stop()
        loaded = loaded_state_stores(spark, query.runId, checkpoint)
        assert len(loaded) == 1  # one operator, one shuffle partition
        assert release_state_stores(spark, query.runId, checkpoint) == 1
        # the snapshot RocksDB took at version 10 (ten changelog versions after none), written by
        # the release at the latest (the session's maintenance thread, a minute apart, may have been first)
        assert [os.path.basename(z) for z in glob.glob(os.path.join(checkpoint, "state", "0", "0", "*.zip"))] \
            == ["10.zip"]
        assert loaded_state_stores(spark, query.runId, checkpoint) == []
        assert release_state_stores(spark, query.runId, checkpoint) == 0
    finally:
        driver.close()


@pytest.mark.usefixtures("jvm_operator")
def test_a_streaming_driver_closes_its_stores_before_deleting_its_directory(spark: Any) -> None:
    """``close()`` of a streaming-engine driver leaves no store of its query loaded, so nothing
    writes into its directory after it was deleted."""
    from streamsdsl.runtime.state_stores import _state_store

    driver = _count_driver(spark)
    engine = driver._engine
    directory, run_id = engine._directory, engine._query.runId
    loaded = loaded_state_stores(spark, run_id, os.path.join(directory, "checkpoint"))
    assert len(loaded) == 1
    driver.close()
    assert not os.path.exists(directory)
    assert [_state_store(spark).isLoaded(store) for store in loaded] == [False]


def test_no_stores_of_a_session_on_another_jvm() -> None:
    """Over Spark Connect or on a cluster the stores are not in this process's JVM: nothing to
    find, nothing released."""

    class Connect:  # a Spark Connect session has no JVM of its own (told by its class's module)
        __module__ = "pyspark.sql.connect.session"

    assert loaded_state_stores(Connect(), "00000000-0000-0000-0000-000000000000", "/nonexistent") == []
    assert release_state_stores(Connect(), "00000000-0000-0000-0000-000000000000", "/nonexistent") == 0
