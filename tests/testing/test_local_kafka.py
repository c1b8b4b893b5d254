"""Unit tests of `LocalKafka`: the broker controls' errors, validation and repr.

No broker needed. Which broker `local_kafka` picks is tested in ``test_brokers.py``.
"""

from __future__ import annotations

import importlib

import pytest

from streamsdsl.errors import InvalidArgumentError, StreamsDslError

lk = importlib.import_module("streamsdsl.testing.local_kafka")  # the package re-exports a function of that name


class TestBrokerControlErrors:
    """Controls of a broker that is not ours (external) or no longer running."""

    @pytest.mark.parametrize("action", ["pause", "unpause", "restart", "stop_broker"])
    def test_external_broker_cannot_be_controlled(self, action: str) -> None:
        """An external broker raises BrokerControlError, both a BrokerStartError and an InvalidArgumentError."""
        kafka = lk.LocalKafka("broker:9092")
        assert kafka.kind == "external"
        with pytest.raises(lk.BrokerControlError) as info:
            getattr(kafka, action)()
        assert str(info.value) == (
            f"{action}() needs a broker started by local_kafka(), but broker:9092 is external (BOOTSTRAP_SERVERS); "
            "unset BOOTSTRAP_SERVERS (or use STREAMSDSL_BROKER=container|process) to run a broker the test can "
            "control."
        )
        assert isinstance(info.value, lk.BrokerStartError)
        assert isinstance(info.value, InvalidArgumentError)
        assert isinstance(info.value, StreamsDslError)

    def test_ended_broker_says_so(self) -> None:
        """A started broker whose block has ended (no control left) says it is gone."""
        kafka = lk.LocalKafka("127.0.0.1:1", kind="process")
        with pytest.raises(lk.BrokerControlError) as info:
            kafka.restart()
        assert str(info.value) == (
            "restart(): the broker at 127.0.0.1:1 is gone (its local_kafka() block has ended)."
        )

    def test_unknown_kind(self) -> None:
        """LocalKafka validates its kind."""
        with pytest.raises(InvalidArgumentError) as info:
            lk.LocalKafka("b:1", kind="cloud")
        assert str(info.value) == "broker kind must be one of ('external', 'container', 'process') (got 'cloud')."

    def test_repr_names_kind_and_image(self) -> None:
        """The repr shows where the broker runs."""
        kafka = lk.LocalKafka("127.0.0.1:9", kind="container", image="streamsdsl/kafka-broker:4.4.0-abc")
        assert repr(kafka) == (
            "LocalKafka(bootstrap_servers='127.0.0.1:9', kind='container', image='streamsdsl/kafka-broker:4.4.0-abc')"
        )
