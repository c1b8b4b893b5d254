"""A serde written by the user runs end to end: read at the source, written at the sink, through a
repartitioning count, and a record it cannot read fails naming its class (log_and_fail)."""

from __future__ import annotations

from typing import Any

import pytest

from streamsdsl import Consumed, Produced, RecordDeserializationError, Serdes, StreamsBuilder, Topology, TopologyTestDriver
from streamsdsl.runtime.driver import TestRecord

pytestmark = pytest.mark.spark


class KeyValueText:
    """Dicts of str as ``key=value;key=value`` UTF-8 text."""

    def serialize(self, value: dict[str, str]) -> bytes:
        return ";".join(f"{k}={v}" for k, v in value.items()).encode("utf-8")

    def deserialize(self, data: bytes) -> dict[str, str]:
        text = data.decode("utf-8")
        pairs = [item.split("=", 1) for item in text.split(";")]
        if any(len(pair) != 2 for pair in pairs):
            raise ValueError(f"expected key=value pairs, got {text!r}")
        return dict(pairs)


class Shouting:
    """Strings written upper-cased as UTF-8, read back as they are."""

    def serialize(self, value: str) -> bytes:
        return value.upper().encode("utf-8")

    def deserialize(self, data: bytes) -> str:
        return data.decode("utf-8")


def visits_per_city() -> Topology:
    b = StreamsBuilder()
    (
        b.stream("visits", Consumed.with_serdes(Serdes.String(), KeyValueText()))
        .map_values(lambda visit: visit["city"])
        .group_by(lambda user, city: city)
        .count()
        .to_stream()
        .to("city-counts", Produced.with_serdes(Shouting(), Serdes.Long()))
    )
    return b.build()


class TestUserSerde:
    def test_count_through_user_serdes(self, spark: Any) -> None:
        """Values are read with the user's serde and keys written with another, exactly."""
        with TopologyTestDriver(visits_per_city(), spark=spark) as driver:
            visits = driver.create_input_topic("visits")
            visits.pipe_input("u1", {"city": "paris", "page": "home"}, 0)
            visits.pipe_input("u2", {"city": "oslo"}, 1)
            visits.pipe_input("u3", {"page": "cart", "city": "paris"}, 2)
            counts = driver.create_output_topic("city-counts")
            assert counts.read_records_to_list() == [
                TestRecord("PARIS", 1, 0),
                TestRecord("OSLO", 1, 1),
                TestRecord("PARIS", 2, 2),
            ]

    def test_wire_bytes_are_the_users(self, spark: Any) -> None:
        """What reaches the sink topic is exactly the user's serialize() output."""
        with TopologyTestDriver(visits_per_city(), spark=spark) as driver:
            driver.create_input_topic("visits").pipe_input("u1", {"city": "Rome"}, 5)
            out = driver.create_output_topic("city-counts", Serdes.Bytes(), Serdes.Bytes())
            assert out.read_records_to_list() == [TestRecord(b"ROME", (1).to_bytes(8, "big"), 5)]

    def test_user_serde_values_round_trip(self, spark: Any) -> None:
        """A value read and written with the user's serde keeps its bytes (no re-encoding)."""
        b = StreamsBuilder()
        serde = KeyValueText()
        b.stream("in", Consumed.with_serdes(Serdes.String(), serde)).filter(lambda k, v: "a" in v).to(
            "out", Produced.with_serdes(Serdes.String(), serde)
        )
        with TopologyTestDriver(b.build(), spark=spark) as driver:
            driver.create_input_topic("in", value_serde=Serdes.String()).pipe_input("k", "a=1;b=2", 3)
            driver.create_input_topic("in", value_serde=Serdes.String()).pipe_input("k", "b=1", 4)
            out = driver.create_output_topic("out", value_serde=Serdes.String())
            assert out.read_records_to_list() == [TestRecord("k", "a=1;b=2", 3)]

    def test_unreadable_record_names_the_serde(self, spark: Any) -> None:
        """log_and_fail: bytes the user's serde rejects fail the run, naming its class and the record."""
        with TopologyTestDriver(visits_per_city(), spark=spark) as driver:
            driver.create_input_topic("visits", value_serde=Serdes.String()).pipe_input("u1", "no pairs here", 0)
            with pytest.raises(RecordDeserializationError, match=(
                r"^KSTREAM-SOURCE-0000000000: CustomSerde\(KeyValueText\) cannot deserialize the record value: "
                r"ValueError: expected key=value pairs, got 'no pairs here'\. Fix the producer .* "
                r"\(record at topic visits partition 0 offset 0, key 'u1'\)$"
            )):
                driver.create_output_topic("city-counts").read_records_to_list()
