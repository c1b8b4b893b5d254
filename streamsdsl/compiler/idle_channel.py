"""The channel that tells every task of a streaming idle-close aggregation when the last record
reached the aggregation (its ``L``, `streamsdsl.semantics.kernels.AggregateKernel.close_idle`'s
``last_input_at``): a Spark state partition sees only its own keys, and idle close is per
aggregation (docs/session-windows.md, *Idle windows*).

Every task of a micro-batch that hands the aggregation at least one record leaves a marker in the
aggregation's directory under the query's checkpoint (`channel_directory`): an empty file named
``<partition>-<batch id>-<batch timestamp>``, created at once (no content to read half-written;
a retried micro-batch creates the same name again: Spark keeps a batch's timestamp in its offset
log). Having created it, the task deletes its partition's markers older than its previous one,
so each partition keeps at most two. A task of micro-batch ``B`` reads ``L`` as the largest
timestamp of the markers of micro-batches before ``B``: at that point each partition's newest
marker before ``B`` is still there, whatever the other tasks of ``B`` do meanwhile. The markers
live in the checkpoint, so a query restarted from it knows its ``L``.

The files go through ``pyarrow.fs`` (a local path, ``file://``, ``hdfs://`` with libhdfs, ``s3://``,
``gs://``); the JVM operator's twin, ``IdleChannel.java``, writes the same names through Hadoop's
``FileSystem`` (any checkpoint Spark can use).
"""

from __future__ import annotations

import posixpath
from typing import Any

__all__ = ["IdleChannel", "channel_directory"]


def channel_directory(checkpoint_location: str, store: str) -> str:
    """Where the markers of the aggregation holding ``store`` live under a query's checkpoint."""
    return posixpath.join(checkpoint_location.rstrip("/"), "streamsdsl", "idle", store)


def _parse(name: str) -> tuple[int, int, int] | None:
    """``(partition, batch id, batch timestamp)`` of a marker's file name (``None``: not a marker,
    e.g. a file system's checksum file)."""
    parts = name.split("-")
    if len(parts) != 3 or not all(p.isdigit() for p in parts):
        return None
    return int(parts[0]), int(parts[1]), int(parts[2])


class IdleChannel:
    """One aggregation's markers (see the module docs), as one task uses them: `record` once per
    micro-batch with input, `last_input_before` read at most once per micro-batch."""

    def __init__(self, directory: str) -> None:
        self.directory = directory
        self._fs: Any = None
        self._path = ""
        self._recorded: tuple[int, int] | None = None  # (partition, batch id) already recorded
        self._read: tuple[int, int] | None = None  # (batch id, L) already read

    def _filesystem(self) -> tuple[Any, str]:
        if self._fs is None:
            from pyarrow import fs

            self._fs, self._path = fs.FileSystem.from_uri(self.directory) if "://" in self.directory \
                else (fs.LocalFileSystem(), self.directory)
            self._fs.create_dir(self._path, recursive=True)
        return self._fs, self._path

    def _markers(self) -> list[tuple[int, int, int]]:
        from pyarrow import fs

        filesystem, path = self._filesystem()
        infos = filesystem.get_file_info(fs.FileSelector(path, allow_not_found=True))
        return [m for m in (_parse(i.base_name) for i in infos) if m is not None]

    def record(self, partition: int, batch_id: int, batch_time: int) -> None:
        """Partition ``partition``'s task of micro-batch ``batch_id`` (processing time
        ``batch_time``) handed the aggregation a record (once per task and micro-batch)."""
        if self._recorded == (partition, batch_id):
            return
        filesystem, path = self._filesystem()
        filesystem.open_output_stream(posixpath.join(path, f"{partition}-{batch_id}-{batch_time}")).close()
        own = sorted((b, t) for p, b, t in self._markers() if p == partition and b < batch_id)
        for b, t in own[:-1]:  # the newest before this batch stays for this batch's readers
            try:
                filesystem.delete_file(posixpath.join(path, f"{partition}-{b}-{t}"))
            except FileNotFoundError:
                pass
        self._recorded = (partition, batch_id)

    def last_input_before(self, batch_id: int) -> int:
        """``L`` as of micro-batch ``batch_id``: the processing time of the last micro-batch
        before it that handed the aggregation a record (-1: none). Read once per micro-batch."""
        if self._read is None or self._read[0] != batch_id:
            last = max((t for _, b, t in self._markers() if b < batch_id), default=-1)
            self._read = (batch_id, last)
        return self._read[1]
