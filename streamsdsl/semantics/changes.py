"""Kafka Streams' record cache, reduced to what is observable: the net change per flush."""

from __future__ import annotations

from typing import Any, Hashable, Iterable

_DELETED = object()


class ChangeBuffer:
    """Collects store writes between two flushes and yields what a cache flush forwards.

    - only the **last** value per store key since the previous flush is forwarded;
    - a delete is forwarded (as a tombstone) only if the key had reached the store before,
      i.e. was present at the previous flush;
    - keys come out in the order they were last written.

    Examples
    --------
    >>> buf = ChangeBuffer(flushed=["a"])
    >>> buf.put("b", 1); buf.delete("a"); buf.put("b", 2); buf.put("c", 3); buf.delete("c")
    >>> buf.flush()
    [('a', None), ('b', 2)]
    """

    def __init__(self, flushed: Iterable[Hashable] = ()) -> None:
        self._flushed = set(flushed)
        self._dirty: dict[Hashable, Any] = {}

    def mark_flushed(self, keys: Iterable[Hashable]) -> None:
        """Keys that reached the store before (a delete of one is forwarded as a tombstone)."""
        self._flushed.update(keys)

    def put(self, key: Hashable, value: Any) -> None:
        self._dirty.pop(key, None)
        self._dirty[key] = value

    def delete(self, key: Hashable) -> None:
        self._dirty.pop(key, None)
        self._dirty[key] = _DELETED

    def flush(self) -> list[tuple[Hashable, Any]]:
        """Forwarded (key, value) pairs; ``value is None`` means a tombstone."""
        out: list[tuple[Hashable, Any]] = []
        for key, value in self._dirty.items():
            if value is _DELETED:
                if key in self._flushed:
                    out.append((key, None))
                    self._flushed.discard(key)
            else:
                out.append((key, value))
                self._flushed.add(key)
        self._dirty = {}
        return out
