"""Interactive queries without Spark: the query parameters and store types, the refusals, and
the decoding of the JVM operator's stored windows (the running-application tests are in
integration/test_interactive_queries.py)."""

from __future__ import annotations

import struct
from typing import Any

import attrs
import pytest

from streamsdsl import Materialized, QueryableStoreTypes, Serdes, StoreQueryParameters, StreamsBuilder, Stores
from streamsdsl import TimeWindows
from streamsdsl.errors import InvalidArgumentError, InvalidTypeError
from streamsdsl.runtime.queries import InvalidStateStoreError, StoreReader, _jvm_windows


@attrs.frozen
class _Choice:
    backend: Any


@attrs.frozen
class _Compiled:
    topology: Any
    operators: dict[str, Any] = attrs.Factory(dict)


def _reader(**operators: str) -> StoreReader:
    b = StreamsBuilder()
    grouped = b.stream("in").group_by_key()
    grouped.count(materialized=Materialized.as_("counts")).to_stream().to("out")
    grouped.windowed_by(TimeWindows.of_size_with_no_grace(10)).count(materialized=Materialized.as_("w")).to_stream()
    grouped.reduce(lambda a, v: a + v)
    b.add_state_store(Stores.key_value_store_builder(Stores.in_memory_key_value_store("seen"), Serdes.String(),
                                                     Serdes.Long()))
    topology = b.build()
    kinds = {n: _Choice(attrs.make_class("B", {"value": attrs.field(default=v)})()) for n, v in operators.items()}
    return StoreReader(None, "/nowhere", _Compiled(topology, kinds))  # type: ignore[arg-type]


class TestParameters:
    def test_from_name_and_type(self) -> None:
        """Kafka's factory; with_partition and enable_stale_stores give new parameters."""
        p = StoreQueryParameters.from_name_and_type("counts", QueryableStoreTypes.timestamped_key_value_store())
        assert (p.store_name, p.queryable_store_type.kind, p.queryable_store_type.timestamped) == ("counts", "key-value",
                                                                                                   True)
        assert p.with_partition(2).partition == 2 and p.partition is None
        assert p.enable_stale_stores().stale_stores

    def test_bad_arguments(self) -> None:
        """A bad name or type fails when the parameters are made, naming the fix."""
        with pytest.raises(InvalidArgumentError):
            StoreQueryParameters.from_name_and_type("bad name!", QueryableStoreTypes.key_value_store())
        with pytest.raises(InvalidTypeError) as info:
            StoreQueryParameters.from_name_and_type("counts", "key-value")  # type: ignore[arg-type]
        assert str(info.value) == ("'queryable_store_type' must come from QueryableStoreTypes (e.g. "
                                   "QueryableStoreTypes.key_value_store()); got str: 'key-value'.")


class TestRefusals:
    @pytest.mark.parametrize("name, store_type, message", [
        ("nope", QueryableStoreTypes.key_value_store(),
         "Cannot get state store 'nope': the topology has no such store; its stores are ['counts', 'w', "
         "'KSTREAM-REDUCE-STATE-STORE-0000000006', 'seen']."),
        ("w", QueryableStoreTypes.key_value_store(),
         "Cannot get state store 'w': it is a window store, not a key-value store; ask for "
         "QueryableStoreTypes.window_store()."),
        ("seen", QueryableStoreTypes.session_store(),
         "Cannot get state store 'seen': it is a key-value store, not a session store; ask for "
         "QueryableStoreTypes.key_value_store()."),
        ("KSTREAM-REDUCE-STATE-STORE-0000000006", QueryableStoreTypes.key_value_store(),
         "Cannot get state store 'KSTREAM-REDUCE-STATE-STORE-0000000006': its name was generated (the store of "
         "KSTREAM-REDUCE-0000000007), and only named stores are queryable. Name it: "
         "materialized=Materialized.as_('my-store')."),
        ("counts", QueryableStoreTypes.key_value_store(),
         "Cannot get state store 'counts': KSTREAM-AGGREGATE-0000000001 runs on Spark's native aggregation, whose "
         "state is not a store; run it on streamsdsl's operator to query it (streamsdsl.operator = python or jvm)."),
    ])
    def test_refused_with_the_reason(self, name: str, store_type: Any, message: str) -> None:
        """What cannot be queried says why and what to write instead."""
        with pytest.raises(InvalidStateStoreError) as info:
            _reader(**{"KSTREAM-AGGREGATE-0000000001": "native"}).view(
                StoreQueryParameters.from_name_and_type(name, store_type))
        assert str(info.value) == message


class TestJvmState:
    def test_decodes_the_jvm_operators_windows(self) -> None:
        """AggregateProcessor's layout: version, timer, count, then start, end, ts, flags and the
        aggregate's long bits (flag 2: no aggregate); double aggregates from their bits."""
        data = struct.pack(">bqi", 1, 99, 2) + struct.pack(">qqqbq", 0, 10, 7, 0, 3) + struct.pack(">qqqb", 10, 20, 12, 2)
        assert _jvm_windows(data, "bigint") == [(0, 10, 3, 7), (10, 20, None, 12)]
        bits = struct.unpack(">q", struct.pack(">d", 2.5))[0]
        data = struct.pack(">bqi", 1, 0, 1) + struct.pack(">qqqbq", 0, 0, 5, 1, bits)
        assert _jvm_windows(data, "double") == [(0, 0, 2.5, 5)]

    def test_another_layout_version_is_refused(self) -> None:
        with pytest.raises(InvalidStateStoreError):
            _jvm_windows(struct.pack(">bqi", 2, 0, 0), "bigint")


class _FakeRead:
    """Spark's ``spark.read`` chain over canned rows, counting the loads of each format."""

    def __init__(self, loads: list[str]) -> None:
        self.loads, self._format = loads, ""

    def format(self, name: str) -> _FakeRead:
        self._format = name
        return self

    def option(self, *_: Any) -> _FakeRead:
        return self

    def load(self, *_: Any) -> _FakeRead:
        self.loads.append(self._format)
        return self

    def collect(self) -> list[Any]:
        if self._format == "state-metadata":
            props = '{"stateVariables": [{"stateName": "seen"}]}'
            return [attrs.make_class("M", ["operatorId", "operatorProperties"])(3, props)]
        return [f"row-{len(self.loads)}"]


class TestReadOncePerBatch:
    def test_a_store_is_read_again_only_after_a_newer_batch_committed(self) -> None:
        """The reader answers from the rows it read while the checkpoint's last commit is the same,
        reads the store again once a newer batch committed, and reads every time while no batch id
        is known (the operator's id is looked up once)."""
        loads: list[str] = []
        batch: list[int | None] = [4]
        spark = attrs.make_class("S", ["read"])(_FakeRead(loads))
        reader = StoreReader(spark, "/nowhere", None, lambda checkpoint: batch[0])  # type: ignore[arg-type]
        first = reader._rows("seen")
        assert reader._rows("seen") is first and loads == ["state-metadata", "statestore"]
        batch[0] = 5
        assert reader._rows("seen") == ["row-3"] and loads == ["state-metadata", "statestore", "statestore"]
        batch[0] = None
        reader._rows("seen"), reader._rows("seen")
        assert loads.count("statestore") == 4 and loads.count("state-metadata") == 1

    def test_the_last_commit_is_the_commit_logs_newest_entry(self, tmp_path: Any) -> None:
        """Numbered files of ``commits/`` (not their ``.crc`` twins); none on a remote checkpoint."""
        from streamsdsl.runtime.checkpoint import last_commit

        assert last_commit(str(tmp_path)) is None
        (tmp_path / "commits").mkdir()
        for name in ("0", "1", "10", ".10.crc", "9"):
            (tmp_path / "commits" / name).write_text("v1")
        assert last_commit(str(tmp_path)) == last_commit(f"file://{tmp_path}") == 10
        assert last_commit("s3a://bucket/app") is None


class TestVersionedTableStore:
    def test_a_versioned_table_reads_its_latest_version(self) -> None:
        """A versioned table's state row holds its versions (`streamsdsl.compiler.versioned`): the
        store view shows each key's latest version, and no entry for a key whose latest version
        is a tombstone."""
        from types import SimpleNamespace

        b = StreamsBuilder()
        b.table("t", materialized=Materialized.as_(Stores.persistent_versioned_key_value_store("v", 10)))
        node = b.build().node("KTABLE-SOURCE-0000000001")
        serde = Serdes.String()
        frames = {node.name: SimpleNamespace(key=SimpleNamespace(serde=serde), value=serde)}
        reader = StoreReader(None, "/nowhere", SimpleNamespace(frames=frames, operators={}))  # type: ignore[arg-type]
        rows = [SimpleNamespace(key=("k1",), value=([(1, "a"), (5, "b")], 5, [], -1)),
                SimpleNamespace(key=("k2",), value=([(2, "c"), (3, None)], 3, [], -1))]
        reader._rows = lambda name: rows  # type: ignore[method-assign]
        assert [(e.key, e.value, e.timestamp) for e in reader._dsl_entries("v", node)] == [("k1", "b", 5)]
