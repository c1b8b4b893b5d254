"""``streamsdsl reset`` and `reset_application`: an application's checkpoint and state removed."""

from __future__ import annotations

from pathlib import Path

import pytest

from streamsdsl.cli import main
from streamsdsl.runtime.checkpoint import reset_application


def make_app_dir(state_dir: Path, app_id: str = "wc") -> Path:
    """What KafkaStreams leaves under state.dir/application.id: a checkpoint with one batch."""
    cp = state_dir / app_id / "checkpoint"
    for sub in ("offsets", "commits"):
        (cp / sub).mkdir(parents=True)
        (cp / sub / "0").write_text("v1\n")
    (cp / "metadata").write_text('{"id":"x"}\n')
    return state_dir / app_id


class TestResetCommand:
    def test_removes_checkpoint_and_app_dir(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """The checkpoint and the then empty application directory are removed and printed; exit 0."""
        app = make_app_dir(tmp_path)
        assert main(["reset", "--application-id", "wc", "--state-dir", str(tmp_path)]) == 0
        out = capsys.readouterr()
        assert out.out == (
            f"removed {app}/checkpoint (checkpoint: source offsets, commits, operator state; 3 file(s), 17 bytes)\n"
            f"removed {app} (the application's directory, empty without its checkpoint)\n"
            "application 'wc' reset: its next start reads the input from 'auto.offset.reset' with empty state.\n"
        )
        assert out.err == "" and not app.exists() and tmp_path.exists()

    def test_dry_run_removes_nothing(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """--dry-run lists what would be removed and leaves it; exit 0."""
        app = make_app_dir(tmp_path)
        assert main(["reset", "--application-id", "wc", "--state-dir", str(tmp_path), "--dry-run"]) == 0
        assert capsys.readouterr().out == (
            f"would remove {app}/checkpoint (checkpoint: source offsets, commits, operator state; 3 file(s), "
            "17 bytes)\n"
            f"would remove {app} (the application's directory, empty without its checkpoint)\n"
        )
        assert (app / "checkpoint" / "commits" / "0").exists()

    def test_nothing_to_reset(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """No checkpoint there: a message naming the path and what to pass; exit 1."""
        assert main(["reset", "--application-id", "wc", "--state-dir", str(tmp_path)]) == 1
        out = capsys.readouterr()
        assert out.out == ""
        assert out.err == (
            f"streamsdsl reset: nothing to reset: no checkpoint at {tmp_path}/wc/checkpoint. Pass the application's "
            f"'application.id' and its 'state.dir' as --state-dir (given: {tmp_path}).\n"
        )

    def test_other_entries_are_kept(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """Only what KafkaStreams writes is removed: another file in the application's directory stays."""
        app = make_app_dir(tmp_path)
        (app / "notes.txt").write_text("mine")
        assert main(["reset", "--application-id", "wc", "--state-dir", str(tmp_path)]) == 0
        assert capsys.readouterr().out.splitlines()[1:] == [
            f"kept {app}/notes.txt (not written by KafkaStreams)",
            "application 'wc' reset: its next start reads the input from 'auto.offset.reset' with empty state.",
        ]
        assert sorted(p.name for p in app.iterdir()) == ["notes.txt"]

    def test_invalid_application_id(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """An application.id that is not one (a path) is a usage error; nothing is touched."""
        (tmp_path / "x" / "checkpoint").mkdir(parents=True)
        assert main(["reset", "--application-id", "../x", "--state-dir", str(tmp_path / "s")]) == 2
        assert capsys.readouterr().err == (
            "streamsdsl reset: 'application.id' must be 1-249 characters of A-Z a-z 0-9 . _ - (got '../x'); it "
            "becomes a directory name, e.g. 'orders-per-customer'.\n"
        )
        assert (tmp_path / "x" / "checkpoint").exists()

    def test_application_id_is_required(self, capsys: pytest.CaptureFixture[str]) -> None:
        """Without --application-id: argparse's usage error, exit 2."""
        assert main(["reset"]) == 2
        assert capsys.readouterr().err.endswith(
            "streamsdsl reset: error: the following arguments are required: --application-id\n")

    def test_default_state_dir(self, capsys: pytest.CaptureFixture[str]) -> None:
        """--state-dir defaults to StreamsConfig's state.dir, /tmp/streamsdsl."""
        assert main(["reset", "--application-id", "streamsdsl-test-no-such-app"]) == 1
        assert "no checkpoint at /tmp/streamsdsl/streamsdsl-test-no-such-app/checkpoint." in capsys.readouterr().err

    def test_listed_in_usage(self, capsys: pytest.CaptureFixture[str]) -> None:
        """`streamsdsl --help` lists the command."""
        assert main(["--help"]) == 0
        assert "  reset        remove an application's checkpoint and state (streamsdsl reset --help)\n" in (
            capsys.readouterr().out)


class TestResetApplication:
    def test_python_api(self, tmp_path: Path) -> None:
        """The function behind the command (and KafkaStreams.clean_up) returns what it removed."""
        app = make_app_dir(tmp_path)
        removal = reset_application("wc", str(tmp_path))
        assert [p for p, _ in removal.removed] == [str(app / "checkpoint"), str(app)] and removal.kept == ()
        assert reset_application("wc", str(tmp_path)).removed == ()

    def test_clean_up_before_start(self, tmp_path: Path) -> None:
        """KafkaStreams.clean_up() on a created application removes its checkpoint (no Spark needed)."""
        from streamsdsl import KafkaStreams, StreamsBuilder

        app = make_app_dir(tmp_path)
        b = StreamsBuilder()
        b.stream("in").to("out")
        streams = KafkaStreams(b.build(), {"application.id": "wc", "bootstrap.servers": "localhost:9",
                                           "state.dir": str(tmp_path)})
        streams.clean_up()
        assert not app.exists() and streams.state().value == "CREATED"
