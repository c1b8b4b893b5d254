"""The processor kernel on its own (no engine, no stores): Kafka Streams' punctuation rules
(``PunctuationQueue``, ``PunctuationSchedule.next``), the context, a saved schedule, errors."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streamsdsl.errors import InvalidArgumentError, ProcessorStateError, PunctuationError, UserFunctionError
from streamsdsl.processor import (
    FixedKeyProcessor,
    Processor,
    ProcessorKernel,
    PunctuationType,
    Record,
    RecordMetadata,
    TaskId,
)

STREAM, WALL = PunctuationType.STREAM_TIME, PunctuationType.WALL_CLOCK_TIME
META = RecordMetadata("in", 0, 7)


def kernel(processor: type, out: list[Any], **kw: Any) -> ProcessorKernel:
    return ProcessorKernel("p", processor, kw.pop("stores", {}), task=TaskId(0, 3), application_id="app",
                           forward=lambda r, child: out.append((r, child)), **kw)


def scheduling(interval: int, type: PunctuationType, fired: list[int]) -> type:
    class P(Processor):
        def init(self, context: Any) -> None:
            self.cancellable = context.schedule(interval, type, fired.append)

        def process(self, record: Record) -> None:
            pass

    return P


def feed(k: ProcessorKernel, times: list[int]) -> None:
    stream_time = -1
    for t in times:
        stream_time = max(stream_time, t)
        k.process(Record("k", "v", t), META, stream_time, 0)
        k.punctuate(STREAM, stream_time)


class TestStreamTimePunctuation:
    def test_fires_as_soon_as_the_task_has_stream_time_then_on_each_multiple(self) -> None:
        """Aligned to 0: the first record fires it (with the stream time, not the due time), then
        stream time reaching each next multiple of the interval; missed intervals are skipped."""
        fired: list[int] = []
        k = kernel(scheduling(10, STREAM, fired), [])
        feed(k, [3, 5, 9, 10, 12, 45, 44, 50])
        assert fired == [3, 10, 45, 50]

    def test_no_stream_time_no_punctuation(self) -> None:
        """Before the first record (stream time -1) nothing fires."""
        fired: list[int] = []
        k = kernel(scheduling(10, STREAM, fired), [])
        assert k.punctuate(STREAM, -1) is False
        assert fired == []

    @settings(max_examples=200, deadline=None)
    @given(st.integers(1, 50), st.lists(st.integers(0, 400), min_size=1, max_size=40))
    def test_matches_the_model(self, interval: int, times: list[int]) -> None:
        """Property: it fires at stream time ``t`` exactly when ``t`` reached the due time, which
        starts at 0 and is then the first multiple of the interval after the last firing."""
        fired: list[int] = []
        feed(kernel(scheduling(interval, STREAM, fired), []), times)
        expected, due, now = [], 0, -1
        for t in times:
            now = max(now, t)
            if now >= due:
                expected.append(now)
                due = (now // interval + 1) * interval
        assert fired == expected


class TestWallClockPunctuation:
    @settings(max_examples=200, deadline=None)
    @given(st.integers(0, 10_000), st.integers(1, 50), st.lists(st.integers(0, 120), max_size=30))
    def test_matches_the_model(self, start: int, interval: int, steps: list[int]) -> None:
        """Property: first due one interval after scheduling, then on that grid; it fires with
        the system time, once however many intervals passed."""
        fired: list[int] = []
        k = kernel(scheduling(interval, WALL, fired), [], system_time=start)
        expected, due, now = [], start + interval, start
        for step in steps:
            now += step
            k.punctuate(WALL, now)
            if now >= due:
                expected.append(now)
                due += ((now - due) // interval + 1) * interval
        assert fired == expected

    def test_stream_time_does_not_fire_wall_clock_punctuators(self) -> None:
        """Each type fires only its own punctuators."""
        fired: list[int] = []
        k = kernel(scheduling(10, WALL, fired), [], system_time=100)
        feed(k, [1000, 2000])
        assert fired == []
        k.punctuate(WALL, 110)
        assert fired == [110]


class TestScheduleAndCancel:
    def test_cancel_stops_the_punctuator_and_is_saved(self) -> None:
        """A cancelled punctuator does not fire again; the saved schedule says so, and a
        processor scheduling it again in a later run's init gets it back cancelled."""
        fired: list[int] = []

        class P(Processor):
            def init(self, context: Any) -> None:
                self.c = context.schedule(10, STREAM, self.tick)

            def tick(self, t: int) -> None:
                fired.append(t)
                if t >= 20:
                    self.c.cancel()

            def process(self, record: Record) -> None:
                pass

        k = kernel(P, [])
        feed(k, [5, 20, 30, 40])
        assert fired == [5, 20]
        saved = k.saved_schedule()
        assert [(s.interval_ms, s.type, s.cancelled) for s in saved] == [(10, STREAM, True)]
        again = kernel(P, [], schedule=saved, stream_time=40)
        feed(again, [50])
        assert fired == [5, 20]

    def test_a_later_run_continues_the_schedule(self) -> None:
        """The next run's kernel takes the due time from the saved schedule: no punctuation at
        its first record unless due (Kafka's restarted task would fire at once)."""
        fired: list[int] = []
        P = scheduling(10, STREAM, fired)
        first = kernel(P, [])
        feed(first, [3, 12])
        assert fired == [3, 12]
        second = kernel(P, [], schedule=first.saved_schedule(), stream_time=12)
        feed(second, [15, 20])
        assert fired == [3, 12, 20]

    def test_same_due_time_fires_in_scheduling_order(self) -> None:
        """Two punctuators due at once fire in the order they were scheduled."""
        fired: list[str] = []

        class P(Processor):
            def init(self, context: Any) -> None:
                context.schedule(5, STREAM, lambda t: fired.append(f"a{t}"))
                context.schedule(5, STREAM, lambda t: fired.append(f"b{t}"))

            def process(self, record: Record) -> None:
                pass

        feed(kernel(P, []), [1, 5])
        assert fired == ["a1", "b1", "a5", "b5"]

    @pytest.mark.parametrize("interval, message", [
        (0, "'interval' must be >= 1 ms (got 0 ms): a punctuator fires at most once per millisecond of its time."),
    ])
    def test_bad_interval(self, interval: int, message: str) -> None:
        """An interval under 1 ms is refused when scheduled (inside init: a UserFunctionError naming it)."""
        with pytest.raises(UserFunctionError) as info:
            kernel(scheduling(interval, STREAM, []), [])
        assert info.value.cause == message
        assert info.value.function == "init"
        assert isinstance(info.value.__cause__, InvalidArgumentError)


class TestContext:
    def test_what_the_context_says(self) -> None:
        """Metadata, stream time, system time, application and task ids, as given by the host;
        no metadata in a punctuator."""
        seen: list[Any] = []

        class P(Processor):
            def init(self, context: Any) -> None:
                self.c = context
                context.schedule(100, STREAM, lambda t: seen.append(("punct", context.record_metadata(), t)))

            def process(self, record: Record) -> None:
                c = self.c
                seen.append((c.record_metadata(), c.current_stream_time_ms(), c.current_system_time_ms(),
                             c.application_id(), str(c.task_id())))

        k = kernel(P, [])
        k.process(Record("k", 1, 50), META, 50, 999)
        k.punctuate(STREAM, 50)
        assert seen == [(META, 50, 999, "app", "0_3"), ("punct", None, 50)]

    def test_forward_to_a_child_and_headers(self) -> None:
        """forward(record, child) names one child; the record keeps the headers it was given."""
        out: list[Any] = []

        class P(Processor):
            def init(self, context: Any) -> None:
                self.c = context

            def process(self, record: Record) -> None:
                self.c.forward(record.with_headers({"h": b"1"}), "b")

        k = kernel(P, out, children=("a", "b"))
        k.process(Record("k", 1, 5), META, 5, 0)
        assert out == [(Record("k", 1, 5, (("h", b"1"),)), "b")]

    def test_forward_to_an_unknown_child(self) -> None:
        """A child name the processor does not have fails the record, naming the children."""
        class P(Processor):
            def init(self, context: Any) -> None:
                self.c = context

            def process(self, record: Record) -> None:
                self.c.forward(record, "nope")

        k = kernel(P, [], children=("a",))
        with pytest.raises(UserFunctionError) as info:
            k.process(Record("k", 1, 5), META, 5, 0, position=4)
        assert str(info.value) == ("p: the process raised p: context.forward(record, 'nope') names no child of this "
                                   "processor; its children are ['a']. (record at position 4, key 'k')")
        assert isinstance(info.value.__cause__, ProcessorStateError)

    def test_unconnected_store(self) -> None:
        """A store the processor was not connected to is refused with the fix."""
        class P(Processor):
            def init(self, context: Any) -> None:
                context.get_state_store("other")

        with pytest.raises(UserFunctionError) as info:
            kernel(P, [], stores={"mine": object()})
        assert info.value.cause == (
            "Processor p has no access to state store 'other': the store is not connected to it. Name it when adding "
            "the processor: process(supplier, 'other') (connected: ['mine']).")

    def test_fixed_key_processor_cannot_change_the_key(self) -> None:
        """A FixedKeyProcessor's record has no with_key, and forwarding another key fails."""
        class P(FixedKeyProcessor):
            def init(self, context: Any) -> None:
                self.c = context

            def process(self, record: Record) -> None:
                self.c.forward(Record("other", record.value, record.timestamp))

        k = kernel(P, [], fixed_key=True)
        with pytest.raises(UserFunctionError) as info:
            k.process(Record("k", 1, 5), META, 5, 0)
        assert info.value.cause == ("p: a FixedKeyProcessor (process_values) cannot change the key (got 'other', "
                                    "received 'k'); use KStream.process() to change keys.")


class TestErrors:
    def test_process_raising_names_processor_record_and_cause(self) -> None:
        """The model of every other user function: processor, function, record, cause."""
        class P(Processor):
            def process(self, record: Record) -> None:
                raise ValueError("bad value")

        with pytest.raises(UserFunctionError) as info:
            kernel(P, []).process(Record("k", 1, 5), META, 5, 0, position=2)
        assert str(info.value) == "p: the process raised ValueError: bad value (record at position 2, key 'k')"

    def test_punctuator_raising_names_the_punctuation(self) -> None:
        """A punctuator's failure names the processor, the punctuation type and time, the cause."""
        class P(Processor):
            def init(self, context: Any) -> None:
                context.schedule(10, STREAM, self.tick)

            def tick(self, t: int) -> None:
                raise KeyError("gone")

            def process(self, record: Record) -> None:
                pass

        k = kernel(P, [])
        k.process(Record("k", 1, 5), META, 5, 0)
        with pytest.raises(PunctuationError) as info:
            k.punctuate(STREAM, 5)
        assert str(info.value) == "p: the punctuator raised KeyError: 'gone' (stream-time punctuation at 5 ms)"
        assert info.value.located("in", 0, 3) is info.value

    def test_supplier_returning_an_instance_is_refused(self) -> None:
        """A supplier must make a processor; passing something else says what to pass."""
        with pytest.raises(Exception) as info:
            kernel(lambda: 42, [])
        assert str(info.value) == (
            "p: the supplier must return a new Processor (an object with process(record)); it returned int: 42. Pass "
            "the class (or a function returning a new instance), not an instance.")


class TestRecord:
    def test_with_methods_return_new_records(self) -> None:
        """Record is immutable; with_* make new ones; a FixedKeyRecord has no with_key."""
        r = Record("k", "v", 1)
        assert (r.with_key("x").key, r.with_value("y").value, r.with_timestamp(9).timestamp) == ("x", "y", 9)
        assert r == Record("k", "v", 1)
        from streamsdsl.processor import FixedKeyRecord
        with pytest.raises(InvalidArgumentError):
            FixedKeyRecord("k", "v", 1).with_key("x")

    @pytest.mark.parametrize("ts, message", [
        (-1, "'timestamp' must be >= 0 ms (got -1): Kafka records cannot have a negative timestamp."),
        ("1", "'timestamp' must be epoch milliseconds as an int (got str: '1')."),
    ])
    def test_bad_timestamp(self, ts: Any, message: str) -> None:
        """A record's timestamp is validated when it is made."""
        with pytest.raises((InvalidArgumentError, TypeError)) as info:
            Record("k", "v", ts)
        assert str(info.value) == message
