"""`FileTopic` writes a micro-batch's file where a running query cannot take it half-written."""

from __future__ import annotations

import os
from typing import Any

import pytest

from streamsdsl import Serdes
from streamsdsl.io.files import FileTopic


def test_a_batch_is_written_under_a_hidden_name_then_renamed(tmp_path: Any, monkeypatch: pytest.MonkeyPatch,
                                                           spark: Any) -> None:
    """The file is written as ``.batch-N.parquet.tmp`` (a name Spark's file listing skips: a
    query listing the directory meanwhile found the file gone when it read it, FAILED_READ_FILE)
    and renamed to ``batch-N.parquet``; Spark reads the directory with such a file in it."""
    import pyarrow.parquet as pq

    written: list[str] = []
    write_table = pq.write_table

    def recording(table: Any, where: str, *args: Any, **kwargs: Any) -> None:
        written.append(os.path.basename(where))
        write_table(table, where, *args, **kwargs)

    monkeypatch.setattr(pq, "write_table", recording)
    topic = FileTopic(str(tmp_path))
    topic.append("in", [("k", "v", 5)], Serdes.String(), Serdes.String())
    assert written == [".batch-00000000.parquet.tmp"]
    assert sorted(os.listdir(tmp_path)) == ["batch-00000000.parquet"]
    (tmp_path / ".batch-00000001.parquet.tmp").write_bytes(b"half a parquet file")
    rows = spark.read.schema("key binary, timestamp bigint").parquet(str(tmp_path)).collect()
    assert [(bytes(r.key), r.timestamp) for r in rows] == [(b"k", 5)]
