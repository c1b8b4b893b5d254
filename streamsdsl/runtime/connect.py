"""Running on a Spark Connect session (``SparkSession.builder.remote("sc://host:port")``).

Over Spark Connect the application's process holds no JVM: the plan travels to the server as
protobuf, and the functions of the plan (user functions, the Python data source, the
``foreachBatch`` function) are pickled and run in Python processes the *server* starts. So:

- `is_connect` tells a Connect session from a classic one (by its class: no py4j call);
- `ConnectBatchWriter` is the micro-batch function of `KafkaStreams` over Connect: a plain,
  picklable object (the sinks' indexes and topics, the writer options) that writes each sink's
  rows with the ``streamsdsl-kafka`` batch writer, as `streamsdsl.runtime.kafka_sink.KafkaTopicSink`
  does in a classic session. It runs in the server's Python process, so what it writes is
  counted in the plan (`ConnectBatchWriter.observe_writes`) and read back, with the operators'
  observations, from the query's progress, which Connect carries;
- `check_connect` refuses, before anything starts, what cannot run over Connect, with the
  reason and the way out (docs/connect.md).

Imports pyspark lazily.

Examples
--------
>>> class ConnectSession:  # pyspark.sql.connect.session.SparkSession's module is what counts
...     pass
>>> ConnectSession.__module__ = "pyspark.sql.connect.session"
>>> is_connect(ConnectSession()), is_connect(object())
(True, False)
"""

from __future__ import annotations

import functools
import logging
import time
import warnings
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from streamsdsl.compiler.local_rows import is_connect
from streamsdsl.errors import StreamsDslError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from streamsdsl.compiler import CompiledSink
    from streamsdsl.runtime.config import StreamsConfig

__all__ = ["WRITES_OBSERVATION", "ConnectBatchWriter", "ConnectUnsupportedError", "check_connect",
           "configure_remote", "connect_observations", "is_connect", "quiet_global_windows",
           "start_on_server"]

log = logging.getLogger("streamsdsl")
T = TypeVar("T")


class ConnectUnsupportedError(StreamsDslError, ValueError):
    """What the application asks for cannot run on a Spark Connect session (the message says why
    and what to do instead)."""


def check_connect(config: StreamsConfig) -> None:
    """Raise `ConnectUnsupportedError` when ``config`` asks for what a `KafkaStreams` application
    cannot do on a Spark Connect session.

    ``processing.guarantee = exactly_once_v2`` is refused: its instance fence (a registration
    the application's process commits before its first write and checks before each micro-batch
    writes, `streamsdsl.runtime.kafka_sink.InstanceFence`) and the query's identity read from the
    checkpoint's files belong to the process that runs the micro-batch function, which over
    Connect is a Python process of the server, not the application's.

    Examples
    --------
    >>> from streamsdsl.runtime.config import StreamsConfig
    >>> check_connect(StreamsConfig.from_mapping({"application.id": "a", "bootstrap.servers": "k:9092"}))
    >>> check_connect(StreamsConfig.from_mapping({"application.id": "a", "bootstrap.servers": "k:9092",
    ...                                          "processing.guarantee": "exactly_once_v2"}))
    Traceback (most recent call last):
    ...
    streamsdsl.runtime.connect.ConnectUnsupportedError: 'processing.guarantee' = 'exactly_once_v2' cannot run on a Spark Connect session: ...
    """
    if config.exactly_once:
        raise ConnectUnsupportedError(
            "'processing.guarantee' = 'exactly_once_v2' cannot run on a Spark Connect session: its instance fence "
            "and transactional writes are kept by the process that writes each micro-batch, which over Spark "
            "Connect is a Python process of the server, not this application. Run it on a classic SparkSession "
            "(SparkSession.builder.master(...), or spark-submit), or use 'at_least_once' (docs/connect.md)."
        )


#: What a Spark Connect server answers when the Python process it started for a query's
#: ``foreachBatch`` function did not connect back within Spark's fixed 10 seconds
#: (``PythonWorkerFactory.createSimpleWorker``; no setting changes it in Spark 4.2): a server
#: whose cores are busy. The query was not started, so starting it again is safe.
WORKER_DID_NOT_CONNECT = "Python worker failed to connect back"

#: How many times `start_on_server` starts a query whose micro-batch process did not connect back.
START_ATTEMPTS = 5


def start_on_server(start: Callable[[], T], *, attempts: int = START_ATTEMPTS,
                    pause_s: float = 1.0, sleep: Callable[[float], None] | None = None) -> T:
    """``start()`` (a Connect ``DataStreamWriter.start``), started again, up to ``attempts`` times in
    all, while the server answers that the Python process of the ``foreachBatch`` function did not
    connect back in time (`WORKER_DID_NOT_CONNECT`): the server refused the query before starting it.
    Any other error, and the last attempt's, is raised as it is.

    Examples
    --------
    >>> answers = iter([RuntimeError("SparkException: Python worker failed to connect back."), "query"])
    >>> def start():
    ...     answer = next(answers)
    ...     if isinstance(answer, Exception):
    ...         raise answer
    ...     return answer
    >>> start_on_server(start, sleep=lambda s: None)
    'query'
    """
    if not isinstance(attempts, int) or attempts < 1:
        raise ValueError(f"'attempts' must be an int >= 1 (the number of starts in all), got {attempts!r}.")
    sleep = sleep or time.sleep
    for attempt in range(1, attempts + 1):
        try:
            return start()
        except Exception as e:
            if attempt == attempts or WORKER_DID_NOT_CONNECT not in str(e):
                raise
            log.warning("The Spark Connect server's Python process for the micro-batch function did not connect "
                        "back in Spark's 10 s (a busy server); starting the query again (attempt %d of %d).",
                        attempt + 1, attempts)
            sleep(pause_s * attempt)
    raise AssertionError("unreachable")  # pragma: no cover - the loop returns or raises


def configure_remote(builder: Any, options: Mapping[str, Any] | None = None) -> Any:
    """Configure a Spark Connect ``SparkSession.Builder`` (``SparkSession.builder.remote(url)``)
    for streamsdsl; returns the builder. ``options``: the builder's settings so far (default: its
    ``_options``).

    Only what a client can set on its server session is set: `streamsdsl.runtime.session.REQUIRED_CONF`
    (the RocksDB state store, Arrow, UTC) and, where ``options`` leaves them out,
    `streamsdsl.runtime.session.STATE_DEFAULTS`. The jars, the SQL extension and the Python of the
    server's workers are the server's own settings, fixed when it starts (a client's value is
    refused with ``CANNOT_MODIFY_CONFIG``): docs/connect.md, `streamsdsl.testing.connect_server`.

    Examples
    --------
    >>> class Builder:  # a stand-in for SparkSession.builder.remote(...)
    ...     def __init__(self): self._options = {"spark.remote": "sc://127.0.0.1:15002"}
    ...     def config(self, key, value): self._options[key] = value; return self
    >>> b = configure_remote(Builder())
    >>> sorted(b._options)  # doctest: +NORMALIZE_WHITESPACE
    ['spark.remote', 'spark.sql.execution.arrow.pyspark.enabled', 'spark.sql.session.timeZone',
     'spark.sql.streaming.stateStore.providerClass',
     'spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled']
    """
    from streamsdsl.runtime.session import REQUIRED_CONF, STATE_DEFAULTS

    options = dict(getattr(builder, "_options", {}) or {}) if options is None else dict(options)
    for key, value in REQUIRED_CONF.items():
        builder = builder.config(key, value)
    for key, value in STATE_DEFAULTS.items():
        if key not in options:
            builder = builder.config(key, value)
    return builder


def connect_observations(df: DataFrame) -> dict[str, dict[str, Any]]:
    """The observations (``DataFrame.observe``) of the last action run on the Spark Connect
    DataFrame ``df``, by name, each a dict of plain values (rows as dicts), as a classic
    session's ``observedMetrics`` read as JSON gives them: Spark Connect returns them with the
    action's result (``DataFrame.executionInfo``)."""
    info = df.executionInfo
    if info is None:
        return {}
    return {name: {k: _plain(v) for k, v in pairs.items()} for name, pairs in info.flows}


def _plain(value: Any) -> Any:
    """``value`` with every ``Row`` a dict, recursively.

    >>> from pyspark.sql import Row
    >>> _plain([Row(a=1, b=Row(c=None)), 2])
    [{'a': 1, 'b': {'c': None}}, 2]
    """
    if hasattr(value, "asDict"):
        return {k: _plain(v) for k, v in value.asDict().items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


#: The observation of what a `ConnectBatchWriter` writes per micro-batch (not an operator's:
#: no `streamsdsl.compiler.columns.OBSERVATION_PREFIX`).
WRITES_OBSERVATION = "streamsdsl-connect:writes"

#: The Spark Connect client's warning on every plan with a window over the whole input, which
#: the driver's replay plans hold on purpose (stream time runs across the whole replay).
_GLOBAL_WINDOW_WARNING = r"WARN WindowExpression: No Partition Defined for Window operation"


def quiet_global_windows(method: Callable[..., T]) -> Callable[..., T]:
    """``method`` of a Spark-backed driver engine, without the Spark Connect client's warning
    about a window with no partition (`_GLOBAL_WINDOW_WARNING`): the client raises it each time
    it sends such a plan, and the `streamsdsl.runtime.driver.TopologyTestDriver`'s replay
    plans order the whole run on purpose. A classic session logs nothing of the kind (only the
    server's log has it)."""

    @functools.wraps(method)
    def quiet(*args: Any, **kwargs: Any) -> T:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=_GLOBAL_WINDOW_WARNING, category=UserWarning)
            return method(*args, **kwargs)

    return quiet


class ConnectBatchWriter:
    """The ``foreachBatch`` function of a `KafkaStreams` query on a Spark Connect session.

    Spark Connect pickles it and calls it, once per micro-batch, in a Python process the server
    starts, with the batch as a Connect DataFrame. It holds plain data only: per sink its index
    in the plan's `streamsdsl.compiler.columns.SINK_INDEX` column and its topic, the writer
    options of `streamsdsl.runtime.config.StreamsConfig.sink_options` (with the client lease),
    and the dead-letter topic.

    Parameters
    ----------
    sinks : sequence of CompiledSink
        The compiled topology's sinks (`streamsdsl.compiler.CompiledTopology.sinks`).
    options : mapping of str to str
        The ``streamsdsl-kafka`` writer options, with the client lease (the path of a
        `streamsdsl.io.leases.ClientLease`: a server on another machine cannot see it and keeps
        its producers until they idle out).
    dead_letters : bool
        Whether the plan carries the records the ``log_and_continue`` handler skipped.
    dead_letter_topic : str, optional
        Where those records go (None: they are logged only).

    Examples
    --------
    >>> import pickle
    >>> writer = ConnectBatchWriter([], {"kafka.bootstrap.servers": "k:9092"}, dead_letters=False)
    >>> pickle.loads(pickle.dumps(writer)).options
    {'kafka.bootstrap.servers': 'k:9092'}
    """

    def __init__(self, sinks: Any, options: Mapping[str, str], *, dead_letters: bool,
                 dead_letter_topic: str | None = None) -> None:
        self.sinks: tuple[tuple[int, str], ...] = tuple((int(s.index), str(s.topic)) for s in sinks)
        self.options = dict(options)
        self.dead_letters = dead_letters
        self.dead_letter_topic = dead_letter_topic

    def observe_writes(self, output: DataFrame) -> DataFrame:
        """``output`` (the query's rows) counting, per micro-batch, the rows this writer writes to
        the sink topics and to the dead-letter topic (the observation `WRITES_OBSERVATION`, which
        the query's progress carries back to the application: `written`)."""
        from pyspark.sql import functions as F

        from streamsdsl.compiler.columns import DEAD_LETTER_SINK, SINK_INDEX

        index = F.col(SINK_INDEX)
        sinks = index.isin([i for i, _ in self.sinks]) if self.sinks else F.lit(False)
        dead = (index == DEAD_LETTER_SINK) if self.dead_letters and self.dead_letter_topic else F.lit(False)
        return output.observe(WRITES_OBSERVATION, F.count(F.when(sinks, True)).alias("records"),
                              F.count(F.when(dead, True)).alias("dead_letters"))

    @staticmethod
    def written(observed: Mapping[str, Mapping[str, Any]]) -> tuple[int, int]:
        """The records a micro-batch wrote to sink topics and to the dead-letter topic, from its
        observations (`observe_writes`).

        >>> ConnectBatchWriter.written({WRITES_OBSERVATION: {"records": 3, "dead_letters": 1}})
        (3, 1)
        >>> ConnectBatchWriter.written({})
        (0, 0)
        """
        row = observed.get(WRITES_OBSERVATION) or {}
        return int(row.get("records") or 0), int(row.get("dead_letters") or 0)

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        """Write micro-batch ``batch_id``: its dead letters, then each sink's rows to its topic."""
        from pyspark import StorageLevel

        from streamsdsl.compiler.columns import DEAD_LETTER_SINK, SINK_INDEX
        from streamsdsl.runtime.streaming import SINK_COLUMNS, _dead_letter_view

        batch = batch.persist(StorageLevel.MEMORY_AND_DISK)
        try:
            if not self.sinks:  # what runs unread (a processor, a named store): the whole batch must run
                batch.count()
            if self.dead_letters:
                dead = batch.filter(batch[SINK_INDEX] == DEAD_LETTER_SINK)
                if not dead.isEmpty():
                    self._dead_letters(_dead_letter_view(dead), batch_id)
            for index, topic in self.sinks:
                self._write(batch.filter(batch[SINK_INDEX] == index).select(*SINK_COLUMNS), topic)
        finally:
            batch.unpersist()

    def _write(self, rows: DataFrame, topic: str) -> None:
        from streamsdsl.io import SOURCE_NAME

        if rows.isEmpty():
            return
        rows.write.format(SOURCE_NAME).mode("append").options(**self.options).option("topic", topic).save()

    def _dead_letters(self, rows: DataFrame, batch_id: int) -> None:
        from streamsdsl.runtime.kafka_sink import log_skipped

        log_skipped(rows, batch_id)
        if self.dead_letter_topic:
            from streamsdsl.runtime.streaming import SINK_COLUMNS

            self._write(rows.select(*SINK_COLUMNS), self.dead_letter_topic)
