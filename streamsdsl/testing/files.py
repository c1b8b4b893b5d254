"""A file-backed stand-in for a topic, for streaming tests without a broker: `FileTopic` (its
home is `streamsdsl.io.files`, where the test driver's streaming engine reads it too)."""

from __future__ import annotations

from streamsdsl.io.files import FileTopic

__all__ = ["FileTopic"]
