"""The progress listener tells when its query's termination was delivered (`KafkaStreams`
waits for that before removing it from a Spark Connect session, whose listener bus deadlocks
when the last listener is removed while an event is on its way)."""

from __future__ import annotations

import threading
import types

from streamsdsl.runtime.lifecycle import progress_listener


def test_termination_sets_the_listeners_own_event_and_hands_a_failure_on() -> None:
    failures: list[tuple[str, str]] = []
    handed = threading.Event()

    def on_terminated(run_id: str, error: str) -> None:
        failures.append((run_id, error))
        handed.set()

    first = progress_listener("app", lambda: None, on_terminated)
    second = progress_listener("app", lambda: None, on_terminated)
    assert not first.terminated.is_set()
    first.onQueryTerminated(types.SimpleNamespace(runId="r1", exception="boom"))
    assert first.terminated.is_set() and not second.terminated.is_set()
    assert handed.wait(10) and failures == [("r1", "boom")]
    second.onQueryTerminated(types.SimpleNamespace(runId="r2", exception=None))
    assert second.terminated.is_set() and failures == [("r1", "boom")]
