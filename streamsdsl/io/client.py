"""The source's broker client on the driver: partitions, watermarks and end offsets.

`OffsetClient` asks the broker what the planner needs (partitions of the subscribed topics,
earliest and end offsets: the low and high watermarks). `ClientHolder` gives a reader a
lazily created client that is never pickled: Spark ships readers to the executors with
cloudpickle, and a confluent-kafka ``Consumer`` cannot be pickled.

confluent_kafka is imported when a client is first used, not with this module.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from streamsdsl.io.errors import KafkaSourceError, broker_timeout
from streamsdsl.io.offsets import EARLIEST, LATEST, TopicPartitionKey, fill_sentinels
from streamsdsl.io.options import KafkaSourceOptions

if TYPE_CHECKING:
    from confluent_kafka import Consumer

__all__ = ["ClientHolder", "OffsetClient"]

_T = TypeVar("_T")
#: Seconds between a failed driver request and its retry (on new clients).
_RETRY_BACKOFF_S = 0.5


class OffsetClient:
    """The metadata and watermark client of the driver-side planner, created on first use.

    Parameters
    ----------
    options : KafkaSourceOptions
        Broker address, topics, client settings and the poll timeout of every request.
    """

    def __init__(self, options: KafkaSourceOptions) -> None:
        self._options = options
        self._consumer: Consumer | None = None

    def close(self) -> None:
        """Close the client (best effort); the next request opens a new one."""
        if self._consumer is not None:
            try:
                self._consumer.close()
            except Exception:  # noqa: BLE001, S110 - closing is best effort
                pass
        self._consumer = None

    def _meta(self) -> Consumer:
        if self._consumer is None:
            from confluent_kafka import Consumer

            self._consumer = Consumer(self._options.client_conf())
        return self._consumer

    def partitions(self) -> list[TopicPartitionKey]:
        """Partitions of every subscribed topic that exists (missing topics: none yet); with
        ``subscribePattern``, of every topic on the brokers the pattern matches in full, listed
        now (one metadata request: a topic created since the last call is found); one that an
        ``otherPatterns`` pattern matches too raises `KafkaSourceError`."""
        if self._options.pattern is not None:
            meta = self._retrying(
                "list the brokers' topics", lambda remaining: self._meta().list_topics(timeout=remaining))
            found = [(topic, info) for topic, info in sorted(meta.topics.items())
                     if info.error is None and self._options.reads(topic)]
            for topic, _info in found:
                other = self._options.also_matched_by(topic)
                if other is not None:  # Kafka Streams' message (InternalTopologyBuilder)
                    raise KafkaSourceError(
                        f"Topic {topic} is already matched for another regex pattern {other} and hence cannot be "
                        f"matched to this regex pattern {self._options.pattern} any more. A topic is read by one "
                        "source: narrow the patterns.")
            return [(topic, p) for topic, info in found for p in sorted(info.partitions)]
        out: list[TopicPartitionKey] = []
        for topic in self._options.topics:
            meta = self._retrying(
                f"fetch metadata of topic {topic!r}",
                lambda remaining, topic=topic: self._meta().list_topics(topic=topic, timeout=remaining),
            )
            info = meta.topics.get(topic)
            if info is None or info.error is not None:
                continue  # like Spark's subscribe: a topic that does not exist yet has no partitions
            out.extend((topic, p) for p in sorted(info.partitions))
        return out

    def watermarks(self, tps: Sequence[TopicPartitionKey]) -> dict[TopicPartitionKey, tuple[int, int]]:
        """``(low, high)`` watermark of each partition, as reported by the broker."""
        from confluent_kafka import TopicPartition

        out: dict[TopicPartitionKey, tuple[int, int]] = {}
        for topic, part in tps:
            low, high = self._retrying(
                f"fetch the offsets of {topic}-{part}",
                lambda remaining, topic=topic, part=part: self._meta().get_watermark_offsets(
                    TopicPartition(topic, part), timeout=remaining, cached=False
                ),
            )
            out[(topic, part)] = (int(low), int(high))
        return out

    def _retrying(self, what: str, request: Callable[[float], _T]) -> _T:
        """``request(seconds_left)``, retried on a new client after an error until the poll timeout.

        A broker restart makes requests fail at once (``_TRANSPORT``, or ``_DESTROY_BROKER`` on
        a client whose broker handle was dropped), not only time out: a client error is retried
        with fresh clients, so only a broker away for the whole ``kafkaConsumer.pollTimeoutMs``
        fails the query (`KafkaBrokerTimeoutError`, naming the broker and the option).
        """
        timeout_s = self._options.poll_timeout_ms / 1000
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                return request(max(0.001, deadline - time.monotonic()))
            except Exception as exc:
                if time.monotonic() + _RETRY_BACKOFF_S >= deadline:
                    raise broker_timeout(
                        what, self._options.bootstrap_servers, self._options.poll_timeout_ms, exc
                    ) from exc
                self.close()
                time.sleep(_RETRY_BACKOFF_S)

    def earliest(self, tps: Sequence[TopicPartitionKey]) -> dict[TopicPartitionKey, int]:
        """Earliest available offset of each partition."""
        return {tp: low for tp, (low, _high) in self.watermarks(tps).items()}

    def latest(self, tps: Sequence[TopicPartitionKey]) -> dict[TopicPartitionKey, int]:
        """End offset of each partition: its high watermark (the next offset to be written)."""
        return {tp: high for tp, (_low, high) in self.watermarks(tps).items()}

    def resolve(self, wanted: Mapping[TopicPartitionKey, int]) -> dict[TopicPartitionKey, int]:
        """``wanted`` with its `EARLIEST`/`LATEST` sentinels replaced by the broker's offsets."""
        return fill_sentinels(
            wanted,
            earliest=self.earliest([tp for tp, v in wanted.items() if v == EARLIEST]),
            latest=self.latest([tp for tp, v in wanted.items() if v == LATEST]),
        )


class ClientHolder:
    """Mixin for readers: a lazily created `OffsetClient` that is never pickled.

    Parameters
    ----------
    options : KafkaSourceOptions
        The reader's options (kept as ``_options``).
    """

    def __init__(self, options: KafkaSourceOptions) -> None:
        self._options = options
        self._client_obj: OffsetClient | None = None

    @property
    def _client(self) -> OffsetClient:
        if self._client_obj is None:
            self._client_obj = OffsetClient(self._options)
        return self._client_obj

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_client_obj"] = None
        return state

    def _close_client(self) -> None:
        if self._client_obj is not None:
            self._client_obj.close()
            self._client_obj = None
