"""One error model: a failure while a record is processed reaches the test driver's user as a
StreamsDslError whose message names the processor, the record and the cause; records piped
before it keep their output, and the error is raised once."""

from __future__ import annotations

from typing import Any

import pytest

from streamsdsl import Consumed, Serdes, SessionWindows, StreamsBuilder, StreamsDslError
from streamsdsl.errors import UserFunctionError
from streamsdsl.runtime.driver import TopologyTestDriver

pytestmark = pytest.mark.spark

STRINGS = Consumed.with_serdes(Serdes.String(), Serdes.String())


def _fail(value: Any) -> Any:
    if value == "bad":
        raise ZeroDivisionError("division by zero")
    return value


def _pipe_and_read(spark: Any, topology: Any, records: list[tuple[str, str, int]]) -> tuple[Any, list[Any]]:
    """Pipe ``records``, read "out"; return the error raised and the records read before/after."""
    with TopologyTestDriver(topology, spark=spark) as d:
        i, o = d.create_input_topic("in"), d.create_output_topic("out")
        for k, v, ts in records:
            i.pipe_input(k, v, ts)
        with pytest.raises(StreamsDslError) as caught:
            o.read_records_to_list()
        after = [(r.key, r.value) for r in o.read_records_to_list()]  # no second raise
    return caught.value, after


class TestRecordErrors:
    def test_stateless_function(self, spark: Any) -> None:
        """A mapper that raises: processor, record coordinates, key and cause in the message; the
        record before it keeps its output and the error is raised once."""
        b = StreamsBuilder()
        b.stream("in", STRINGS).map_values(_fail).to("out")
        error, after = _pipe_and_read(spark, b.build(), [("k1", "good", 1), ("k2", "bad", 2)])
        assert isinstance(error, UserFunctionError)
        assert str(error) == ("KSTREAM-MAPVALUES-0000000001: the mapper raised ZeroDivisionError: division by zero "
                              "(record at topic in partition 0 offset 1, key 'k2')")
        assert isinstance(error.__cause__, Exception)
        assert after == [("k1", "good")]

    def test_aggregator(self, spark: Any) -> None:
        """An aggregator that raises is named as the aggregator of its processor."""
        b = StreamsBuilder()
        b.stream("in", STRINGS).group_by_key().aggregate(lambda: "", lambda k, v, a: a + _fail(v)).to_stream().to("out")
        error, after = _pipe_and_read(spark, b.build(), [("k", "good", 1), ("k", "bad", 2)])
        assert str(error) == ("KSTREAM-AGGREGATE-0000000002: the aggregator raised ZeroDivisionError: division by zero "
                              "(record at topic in partition 0 offset 1, key 'k')")
        assert after == [("k", "good")]

    def test_reducer(self, spark: Any) -> None:
        """A reducer that raises is named as the reducer."""
        b = StreamsBuilder()
        b.stream("in", STRINGS).group_by_key().reduce(lambda a, v: a + _fail(v)).to_stream().to("out")
        error, _ = _pipe_and_read(spark, b.build(), [("k", "good", 1), ("k", "bad", 2)])
        assert str(error).startswith("KSTREAM-REDUCE-0000000002: the reducer raised ZeroDivisionError")

    def test_initializer(self, spark: Any) -> None:
        """An initializer that raises is named as the initializer."""
        b = StreamsBuilder()
        b.stream("in", STRINGS).group_by_key().aggregate(lambda: _fail("bad"), lambda k, v, a: a).to_stream().to("out")
        error, _ = _pipe_and_read(spark, b.build(), [("k", "v", 1)])
        assert str(error) == ("KSTREAM-AGGREGATE-0000000002: the initializer raised ZeroDivisionError: division by "
                              "zero (record at topic in partition 0 offset 0, key 'k')")

    def test_merger(self, spark: Any) -> None:
        """A session merger that raises (a record joins an existing session) is named as the merger."""
        b = StreamsBuilder()
        (b.stream("in", STRINGS).group_by_key().windowed_by(SessionWindows.with_gap(5))
         .aggregate(lambda: "", lambda k, v, a: a + v, lambda k, a1, a2: _fail("bad")).to_stream().to("out"))
        error, after = _pipe_and_read(spark, b.build(), [("k", "x", 0), ("k", "y", 3)])
        assert str(error) == ("KSTREAM-AGGREGATE-0000000002: the merger raised ZeroDivisionError: division by zero "
                              "(record at topic in partition 0 offset 1, key 'k')")
        assert [v for _, v in after] == ["x"]


class TestStrictDriver:
    def test_misspelled_config_key_says_did_you_mean(self, spark: Any) -> None:
        """The driver validates its config as KafkaStreams does: an unknown key fails with a hint."""
        from streamsdsl.runtime.config import StreamsConfigError

        b = StreamsBuilder()
        b.stream("in").to("out")
        with pytest.raises(StreamsConfigError, match=r"^unknown configuration key 'errors.dead.letter.topik' "
                                                     r"\(did you mean 'errors.dead.letter.topic'\?\)"):
            TopologyTestDriver(b.build(), {"errors.dead.letter.topik": "dlq"}, spark=spark)

    def test_topology_without_sink_is_rejected(self, spark: Any) -> None:
        """A topology without a sink would run nothing: the driver says so when it is created."""
        from streamsdsl import TopologyError

        b = StreamsBuilder()
        b.stream("in").filter(lambda k, v: True)
        with pytest.raises(TopologyError, match=r"^the topology has no sink"):
            TopologyTestDriver(b.build(), spark=spark)
