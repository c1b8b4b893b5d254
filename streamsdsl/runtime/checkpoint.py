"""An application's checkpoint on disk: the topology fingerprint stored with it, and its reset.

`check_topology` runs when `KafkaStreams` starts, after the plan is compiled and before Spark's
query starts: on a checkpoint that already holds progress it compares the stored fingerprint of
the topology's stateful part (`streamsdsl.runtime.fingerprint`) with the topology being started
and raises `TopologyChangedError` on an incompatible change; otherwise it (re)writes the
fingerprint, ``state.dir/application.id/checkpoint/streamsdsl-topology.json``. A checkpoint
written before fingerprints existed is accepted and gets one.

`reset_application` is ``streamsdsl reset`` and `KafkaStreams.clean_up`: it removes what
`KafkaStreams` writes under ``state.dir/application.id`` (the checkpoint: offsets, commits,
operator state and the fingerprint). Pure Python: nothing here imports pyspark.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
from typing import Any

import attrs

from streamsdsl.runtime.config import StreamsConfig, StreamsConfigError, _application_id
from streamsdsl.runtime.errors import TopologyChangedError
from streamsdsl.runtime.fingerprint import Change, Fingerprint, diff

__all__ = ["CHECKPOINT_DIR", "DEFAULT_STATE_DIR", "FINGERPRINT_FILE", "Removal", "check_topology", "has_progress",
           "reset_application", "reset_command", "reset_main"]

log = logging.getLogger("streamsdsl")

#: The fingerprint's file name inside the checkpoint directory.
FINGERPRINT_FILE = "streamsdsl-topology.json"
#: The checkpoint's directory name under ``state.dir/application.id``.
CHECKPOINT_DIR = "checkpoint"
#: ``state.dir`` when the configuration leaves it out.
DEFAULT_STATE_DIR: str = attrs.fields(StreamsConfig).state_dir.default


def _local(checkpoint: str) -> str | None:
    """The local path of ``checkpoint`` (None for a remote file system: not checked)."""
    if "://" in checkpoint and not checkpoint.startswith("file:"):
        return None
    return checkpoint.removeprefix("file://").removeprefix("file:")


def last_commit(checkpoint: str) -> int | None:
    """The id of the last micro-batch committed into ``checkpoint`` (its commit log's newest entry;
    None: none yet, or a remote file system, which is not listed)."""
    local = _local(checkpoint)
    try:
        names = os.listdir(os.path.join(local, "commits")) if local is not None else []
    except OSError:
        return None
    return max((int(n) for n in names if n.isdigit()), default=None)


def has_progress(checkpoint: str) -> bool:
    """Whether Spark has written progress (a planned batch, a commit or state) into ``checkpoint``."""
    return any(os.path.isdir(d) and os.listdir(d)
               for d in (os.path.join(checkpoint, sub) for sub in ("offsets", "commits", "state")))


def reset_command(application_id: str, state_dir: str) -> str:
    """The ``streamsdsl reset`` command line for an application."""
    tail = "" if state_dir == DEFAULT_STATE_DIR else f" --state-dir {state_dir}"
    return f"streamsdsl reset --application-id {application_id}{tail}"


def _message(changes: list[Change], checkpoint: str, application_id: str, state_dir: str) -> str:
    more = f" (and {len(changes) - 1} more change(s), listed below)" if len(changes) > 1 else ""
    lines = [
        f"the topology of application.id {application_id!r} changed its stateful part since its checkpoint was "
        f"written: {changes[0]}{more}.",
        f"Changes since the checkpoint {checkpoint} was written:",
        *(f"  - {c}" for c in changes),
        "Spark continues a checkpoint only with as many sources and the same stateful operators, in the same order, "
        "keyed the same way. Stateless changes (filters, value mappers, steps after the last aggregation) are "
        "accepted.",
        "To keep the state, revert the change. To start afresh (input read again from 'auto.offset.reset', empty "
        f"state), stop every instance and run: {reset_command(application_id, state_dir)} (or call clean_up() "
        "before start()); or give the changed topology a new 'application.id'.",
    ]
    return "\n".join(lines)


def check_topology(checkpoint: str, fingerprint: Fingerprint, *, application_id: str, state_dir: str) -> None:
    """Check that ``fingerprint`` can continue ``checkpoint``; store it with the checkpoint.

    Parameters
    ----------
    checkpoint : str
        The Spark checkpoint location.
    fingerprint : Fingerprint
        Of the topology about to start (with its operators' backends).
    application_id, state_dir : str
        For the message: the application's ``application.id`` and ``state.dir``.

    Raises
    ------
    TopologyChangedError
        If the checkpoint holds progress and its stored fingerprint differs from ``fingerprint``
        in a stateful operator (the message names each change and the fix).
    StreamsConfigError
        If the stored fingerprint cannot be read.
    """
    path = _local(checkpoint)
    if path is None:
        log.info("streamsdsl: the checkpoint %s is not on a local disk: the topology is not compared with it.",
                 checkpoint)
        return
    file = os.path.join(path, FINGERPRINT_FILE)
    if has_progress(path):
        if os.path.exists(file):
            try:
                with open(file, encoding="utf-8") as f:
                    stored = Fingerprint.from_json(json.load(f))
            except (OSError, ValueError) as exc:
                raise StreamsConfigError(
                    f"cannot read the topology fingerprint {file} ({exc}). If the topology's stateful part did not "
                    f"change, delete that file (the next start writes a new one); otherwise reset the application: "
                    f"{reset_command(application_id, state_dir)}."
                ) from None
            changes = diff(stored, fingerprint)
            if changes:
                raise TopologyChangedError(_message(changes, checkpoint, application_id, state_dir), changes)
        else:
            log.info("streamsdsl: the checkpoint %s has no topology fingerprint (written before streamsdsl stored "
                     "one): accepted as it is; its fingerprint is written now.", checkpoint)
    os.makedirs(path, exist_ok=True)
    tmp = f"{file}.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(fingerprint.to_json(), f, indent=1, sort_keys=True)
        f.write("\n")
    os.replace(tmp, file)


@attrs.frozen
class Removal:
    """What `reset_application` removed (or, in a dry run, would remove).

    ``app_dir`` is ``state.dir/application.id``; ``removed`` the paths removed, with a note each;
    ``kept`` the entries of ``app_dir`` that `KafkaStreams` did not write and that were left in
    place. ``removed`` is empty when there was nothing to reset.
    """

    app_dir: str
    removed: tuple[tuple[str, str], ...] = ()
    kept: tuple[str, ...] = ()


def _size(path: str) -> tuple[int, int]:
    files = size = 0
    for root, _, names in os.walk(path):
        for name in names:
            files += 1
            try:
                size += os.path.getsize(os.path.join(root, name))
            except OSError:
                pass
    return files, size


def reset_application(application_id: str, state_dir: str | None = None, *, dry_run: bool = False) -> Removal:
    """Remove an application's checkpoint and state (``kafka-streams-application-reset``).

    Removes ``state.dir/application.id/checkpoint`` (source offsets, commits, operator state and
    the topology fingerprint), then ``state.dir/application.id`` itself when nothing else is in
    it; anything else in that directory was not written by `KafkaStreams` and is kept. The next
    start of the application reads its input from ``auto.offset.reset`` with empty state. Output
    topics are not touched. Stop every instance of the application first.

    Parameters
    ----------
    application_id : str
        The application's ``application.id``.
    state_dir : str, optional
        Its ``state.dir`` (default ``/tmp/streamsdsl``, as in `StreamsConfig`).
    dry_run : bool
        Only report what would be removed.

    Returns
    -------
    Removal
        What was removed (``removed`` is empty when there was nothing to reset).

    Raises
    ------
    StreamsConfigError
        If ``application_id`` is not a valid ``application.id``.

    Examples
    --------
    >>> import tempfile
    >>> reset_application("orders-per-customer", tempfile.mkdtemp()).removed
    ()
    """
    application_id = _application_id({"application.id": application_id})
    app_dir = os.path.join(state_dir or DEFAULT_STATE_DIR, application_id)
    checkpoint = os.path.join(app_dir, CHECKPOINT_DIR)
    if not os.path.isdir(checkpoint):
        return Removal(app_dir)
    files, size = _size(checkpoint)
    removed = [(checkpoint, f"checkpoint: source offsets, commits, operator state; {files} file(s), {size:,} bytes")]
    if not dry_run:
        shutil.rmtree(checkpoint)
    kept = tuple(sorted(e for e in os.listdir(app_dir) if e != CHECKPOINT_DIR))
    if not kept:
        removed.append((app_dir, "the application's directory, empty without its checkpoint"))
        if not dry_run:
            os.rmdir(app_dir)
    return Removal(app_dir, tuple(removed), tuple(os.path.join(app_dir, e) for e in kept))


def _report(removal: Removal, dry_run: bool) -> str:
    verb = "would remove" if dry_run else "removed"
    lines = [f"{verb} {path} ({note})" for path, note in removal.removed]
    lines += [f"kept {path} (not written by KafkaStreams)" for path in removal.kept]
    return "\n".join(lines)


def reset_main(argv: Any = None) -> int:
    """Run ``streamsdsl reset``; return the exit code (0: reset, 1: nothing to reset, 2: usage)."""
    import argparse
    import sys

    parser = argparse.ArgumentParser(
        prog="streamsdsl reset",
        description="Remove a KafkaStreams application's checkpoint and state (state.dir/application.id), so that "
        "its next start reads the input from 'auto.offset.reset' with empty state. Stop every instance first. "
        "Output topics are not touched.",
    )
    parser.add_argument("--application-id", required=True, metavar="ID", help="the application's application.id")
    parser.add_argument("--state-dir", default=DEFAULT_STATE_DIR, metavar="DIR",
                        help=f"the application's state.dir (default {DEFAULT_STATE_DIR})")
    parser.add_argument("--dry-run", action="store_true", help="only print what would be removed")
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
    try:
        removal = reset_application(args.application_id, args.state_dir, dry_run=args.dry_run)
    except StreamsConfigError as exc:
        print(f"streamsdsl reset: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"streamsdsl reset: cannot remove {exc.filename}: {exc.strerror}", file=sys.stderr)
        return 1
    if not removal.removed:
        print(f"streamsdsl reset: nothing to reset: no checkpoint at {os.path.join(removal.app_dir, CHECKPOINT_DIR)}. "
              f"Pass the application's 'application.id' and its 'state.dir' as --state-dir (given: {args.state_dir}).",
              file=sys.stderr)
        return 1
    print(_report(removal, args.dry_run))
    if not args.dry_run:
        print(f"application {args.application_id!r} reset: its next start reads the input from 'auto.offset.reset' "
              "with empty state.")
    return 0
