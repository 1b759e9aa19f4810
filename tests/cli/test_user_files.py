"""Files a person names on the command line, given as an attacker (or a slip of the shell) would: a
FIFO that would block forever, a directory, a file far past its cap. Each is refused at once with
what was expected."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from rollout_lineage.adapters.user_files import read_capped
from rollout_lineage.domain.errors import InvalidInput
from tests.conftest import EXAMPLES, Cli


def test_read_capped_refuses_fifos_directories_and_oversized_files(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(InvalidInput, match="found a special file"):
        read_capped(fifo, 100, "a checkpoint")  # would block forever if opened
    with pytest.raises(InvalidInput, match="found a directory"):
        read_capped(tmp_path, 100, "a checkpoint")
    big = tmp_path / "big"
    big.write_bytes(b"x" * 101)
    with pytest.raises(InvalidInput, match="expected a checkpoint of at most 100 bytes"):
        read_capped(big, 100, "a checkpoint")
    big.write_bytes(b"x" * 100)
    assert read_capped(big, 100, "a checkpoint") == b"x" * 100
    with pytest.raises(InvalidInput, match="cannot read a checkpoint"):
        read_capped(tmp_path / "missing", 100, "a checkpoint")


@pytest.mark.parametrize(
    "args",
    [
        ("verify", "--checkpoint", "{fifo}"),
        ("verify", "--trusted-keys", "{fifo}"),
        ("checkpoint", "--sign", "{fifo}"),
        ("bundle", "verify", "{fifo}"),
        ("audit", "--matrix", "{fifo}"),
        ("prove", "--check", "{fifo}", "--checkpoint", "{fifo}"),
        ("snapshots", "verify", "{fifo}"),
    ],
    ids=["checkpoint", "trusted-keys", "signer-key", "bundle", "matrix", "proofs", "snapshot-tar"],
)
def test_every_named_file_option_refuses_a_fifo_instead_of_hanging(
    run_cli: Cli, tmp_path: Path, args: tuple[str, ...]
) -> None:
    run_cli("import", str(EXAMPLES))
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    command = [a.format(fifo=fifo) for a in args]
    # In a subprocess with a timeout: a reader that opened the FIFO would block, and the test must
    # fail, not hang.
    result = subprocess.run(
        [sys.executable, "-m", "rollout_lineage.cli", "--home", str(run_cli.home), *command],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 1, result.stderr
    assert "found a special file (FIFO, device or socket)" in result.stderr


@pytest.mark.parametrize("kind", ["symlink", "fifo", "empty", "dot"])
def test_an_output_that_a_file_cannot_replace_is_refused(
    run_cli: Cli, tmp_path: Path, kind: str
) -> None:
    """`--to` / `-o` replace a regular file whole; a link, a device (`/dev/null`) or a FIFO would
    have been replaced by a file, and an empty name died with a traceback (an attack review's
    find)."""
    run_cli("import", str(EXAMPLES))
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    target = tmp_path / "out.json"
    if kind == "symlink":
        target.symlink_to(victim)
    elif kind == "fifo":
        os.mkfifo(target)
    name = {"empty": "", "dot": "."}.get(kind, str(target))
    result = run_cli("export", "tree", "nightly/csv-dedupe__7c1f2a90", "-o", name, ok=False)
    assert result.exit_code == 1 and "expected a" in result.stderr
    assert victim.read_text() == "keep me"
    if kind == "symlink":
        assert target.is_symlink()


def test_a_link_planted_where_the_temp_file_used_to_go_is_never_written_through(
    run_cli: Cli, tmp_path: Path
) -> None:
    run_cli("import", str(EXAMPLES))
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    (tmp_path / ".out.json.tmp").symlink_to(victim)
    run_cli("export", "tree", "nightly/csv-dedupe__7c1f2a90", "-o", str(tmp_path / "out.json"))
    assert victim.read_text() == "keep me"
    assert (tmp_path / "out.json").is_file() and not (tmp_path / "out.json").is_symlink()
    umask = os.umask(0)
    os.umask(umask)
    # An ordinary file, not the private one the temp file starts as.
    assert (tmp_path / "out.json").stat().st_mode & 0o777 == 0o666 & ~umask


def test_a_chunk_size_past_any_file_is_a_usage_error(run_cli: Cli, tmp_path: Path) -> None:
    facts = tmp_path / "f.jsonl"
    facts.write_text('{"type": "run.registered", "run": "a/b", "task": "t"}\n')
    result = run_cli("ingest", "--chunk-size", "99999999999999999999999", str(facts), ok=False)
    assert result.exit_code == 2 and "--chunk-size" in result.stderr
