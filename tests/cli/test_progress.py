"""Progress on stderr for the long operations (rebuild and catch-up, verify, chunked ingest, tar
verify): shown when asked (LINEAGE_PROGRESS=1, as on a terminal), never on stdout, never when nobody
watches."""

from __future__ import annotations

from pathlib import Path

import pytest

from rollout_lineage.adapters import progress
from tests.cli_helpers import many_runs, write_lines
from tests.conftest import EXAMPLES, Cli
from tests.snapshot_tars import legacy_entries, tar_bytes


@pytest.fixture
def watched(run_cli: Cli, monkeypatch: pytest.MonkeyPatch) -> Cli:
    run_cli("import", str(EXAMPLES))
    monkeypatch.setenv("LINEAGE_PROGRESS", "1")
    return run_cli


def last_draw(stderr: str, task: str) -> str:
    """What the line for `task` showed last (it redraws with carriage returns)."""
    draws = [part for line in stderr.splitlines() for part in line.split("\r") if part]
    return [draw for draw in draws if draw.startswith(task)][-1]


def test_rebuild_and_verify_show_how_far_they_got(watched: Cli) -> None:
    events = int(watched("head").stdout.split(":")[0])
    rebuilt = watched("rebuild")
    assert last_draw(rebuilt.stderr, "projecting the log") == (
        f"projecting the log: {events:,} of {events:,} (100%)"
    )
    # a line of its own
    assert rebuilt.stderr.splitlines()[-1].startswith("rebuilt the read models")
    verified = watched("verify", "--format", "tsv")
    assert last_draw(verified.stderr, "verifying the hash chain") == (
        f"verifying the hash chain: {events:,} of {events:,} (100%)"
    )
    assert "verifying" not in verified.stdout and verified.stdout.startswith("intact\t")


def test_chunked_ingest_and_tar_verify_show_progress(watched: Cli, tmp_path: Path) -> None:
    source = write_lines(tmp_path / "facts.jsonl", many_runs(10))
    ingested = watched("ingest", "--chunk-size", "7", str(source))
    assert last_draw(ingested.stderr, "ingesting facts") == "ingesting facts: 30 of 30 (100%)"
    entries, _ = legacy_entries()
    tar = tmp_path / "snap.tar"
    tar.write_bytes(tar_bytes(entries))
    checked = watched("snapshots", "verify", str(tar), "--format", "jsonl")
    size = tar.stat().st_size
    assert last_draw(checked.stderr, "verifying the tar") == (
        f"verifying the tar: {size:,} of {size:,} (100%)"
    )


def test_nothing_is_drawn_when_nobody_watches(
    run_cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_cli("import", str(EXAMPLES))
    monkeypatch.setenv("LINEAGE_PROGRESS", "0")
    assert "projecting" not in run_cli("rebuild").stderr
    monkeypatch.delenv("LINEAGE_PROGRESS")  # auto: CliRunner's stderr is not a terminal
    assert "verifying" not in run_cli("verify").stderr


def test_counted_reports_every_nth_and_the_last_only_while_listened() -> None:
    seen: list[tuple[str, int, int | None]] = []
    assert list(progress.counted(range(25), "t", 25, every=10)) == list(range(25))
    assert seen == []
    with progress.listening(lambda *call: seen.append(call)):
        assert list(progress.counted(range(25), "t", 25, every=10)) == list(range(25))
    assert seen == [("t", 10, 25), ("t", 20, 25), ("t", 25, 25)]
    assert not progress.listened()
