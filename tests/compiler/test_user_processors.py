"""The Spark host's state of a processor task (`streamsdsl.compiler.user_processors`): a store's
backend over Spark's map state, read through and written back once per run, and the schedule
saved between runs. Pure Python: a dict stands in for the ``MapState``."""

from __future__ import annotations

from typing import Any, Iterator

from hypothesis import given, settings
from hypothesis import strategies as st

from streamsdsl.compiler.user_processors import TaskStoreBackend, schedule_from_json, schedule_to_json
from streamsdsl.processor import PunctuationType, ScheduledPunctuation
from streamsdsl.state import MemoryBackend, StoreBackend


class FakeMapState:
    """PySpark's ``MapState`` API over a dict (keys and values as 1-tuples), counting calls."""

    def __init__(self) -> None:
        self.data: dict[bytes, bytes] = {}
        self.reads = 0
        self.scans = 0

    def getValue(self, key: tuple[bytes]) -> tuple[bytes] | None:  # noqa: N802 - PySpark's name
        self.reads += 1
        found = self.data.get(key[0])
        return None if found is None else (bytearray(found),)  # type: ignore[return-value]

    def updateValue(self, key: tuple[bytes], value: tuple[bytes]) -> None:  # noqa: N802
        self.data[key[0]] = value[0]

    def removeKey(self, key: tuple[bytes]) -> None:  # noqa: N802
        self.data.pop(key[0], None)

    def iterator(self) -> Iterator[tuple[tuple[bytes], tuple[bytes]]]:
        self.scans += 1
        return iter([((bytearray(k),), (bytearray(v),)) for k, v in self.data.items()])  # type: ignore[misc]


class TestTaskStoreBackend:
    def test_is_a_store_backend(self) -> None:
        assert isinstance(TaskStoreBackend(FakeMapState()), StoreBackend)

    def test_reads_through_once_and_writes_back_at_the_end_of_the_run(self) -> None:
        """A point read asks the map once per key and run; writes reach the map only at flush."""
        state = FakeMapState()
        state.data = {b"a": b"1", b"b": b"2"}
        backend = TaskStoreBackend(state)
        assert (backend.get(b"a"), backend.get(b"a"), backend.get(b"zz"), backend.get(b"zz")) == (b"1", b"1", None, None)
        assert state.reads == 2
        backend.put(b"c", b"3")
        backend.delete(b"a")
        assert state.data == {b"a": b"1", b"b": b"2"}
        backend.flush()
        assert state.data == {b"b": b"2", b"c": b"3"}

    def test_a_scan_reads_the_map_once_and_sees_the_run_s_writes(self) -> None:
        """A scan (and a count) reads the whole map once per run, merged with the run's writes, in
        unsigned byte order; a key deleted in the run stays deleted."""
        state = FakeMapState()
        state.data = {b"\x80": b"x", b"a": b"1", b"b": b"2"}
        backend = TaskStoreBackend(state)
        backend.delete(b"a")
        backend.put(b"ab", b"3")
        assert list(backend.scan()) == [(b"ab", b"3"), (b"b", b"2"), (b"\x80", b"x")]
        assert (backend.count(), list(backend.scan(b"b", reverse=True)), state.scans) == (
            3, [(b"\x80", b"x"), (b"b", b"2")], 1)

    @settings(max_examples=60)
    @given(st.lists(st.lists(st.tuples(st.sampled_from(["put", "delete", "get", "scan", "count"]),
                                       st.binary(max_size=2), st.binary(min_size=1, max_size=2)),
                             max_size=12), max_size=4))
    def test_runs_over_one_map_behave_as_one_memory_backend(self, runs: list[list[tuple[str, bytes, bytes]]]) -> None:
        """Several runs, each a new backend over the same map state (flushed at its end, as a
        micro-batch's), answer every operation as one `MemoryBackend` does."""
        state, model = FakeMapState(), MemoryBackend()
        for ops in runs:
            backend = TaskStoreBackend(state)
            for op, key, value in ops:
                if op == "put":
                    backend.put(key, value)
                    model.put(key, value)
                elif op == "delete":
                    backend.delete(key)
                    model.delete(key)
                elif op == "get":
                    assert backend.get(key) == model.get(key)
                elif op == "scan":
                    assert list(backend.scan(key or None)) == list(model.scan(key or None))
                else:
                    assert backend.count() == model.count()
            backend.flush()
            assert sorted(state.data.items()) == list(model.scan())

    def test_replay_entries(self) -> None:
        """In replay the backend starts from the carried entries and hands its entries on."""
        backend = TaskStoreBackend(entries=[(bytearray(b"b"), bytearray(b"2")), (b"a", b"1")])
        backend.put(b"c", b"3")
        assert backend.entries() == [(b"a", b"1"), (b"b", b"2"), (b"c", b"3")]


def test_schedule_round_trip() -> None:
    """A task's saved schedule survives its JSON form (interval, type, due time, cancellation)."""
    schedule: Any = (ScheduledPunctuation(10, PunctuationType.STREAM_TIME, 40),
                     ScheduledPunctuation(1_000, PunctuationType.WALL_CLOCK_TIME, 5_000, True))
    assert schedule_from_json(schedule_to_json(schedule)) == schedule
    assert schedule_from_json(None) == ()
