"""A store on a read-only mount or copy (issue #27): reads work while the read models are current,
and say what would do when they are not. `lineage runs` and `lineage tree` were exit 4 ("Read-only
file system") though `lineage sql` worked.

Root ignores file modes, so as root the store is mounted read-only (a bind mount in a mount
namespace of its own: `unshare -m`); anyone else gets `chmod -R a-w`. The test skips only when
neither can be had."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.conftest import EXAMPLES, REPO, Cli

RUN = "nightly/csv-dedupe__d4e5f6a7"
LINE = json.dumps({"type": "run.registered", "run": "jobs/late__1", "task": "late"}) + "\n"
#: Mounts $1 read-only over itself, checks that it took, then runs the rest of the command line.
READ_ONLY_MOUNT = (
    'mount --bind -o ro "$1" "$1" && ! touch "$1/.probe" 2>/dev/null && shift && exec "$@"'
)

Reader = Callable[..., subprocess.CompletedProcess[str]]


def _lineage(*args: str) -> list[str]:
    return [sys.executable, "-m", "rollout_lineage.cli", *args]


def _run(command: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=120, cwd=REPO)


@pytest.fixture
def read_only(tmp_path: Path) -> Iterator[Callable[[Path], Reader]]:
    """`read_only(folder)` gives a function running `lineage ARGS` with `folder` read-only to it."""
    restore: list[Path] = []

    def make(folder: Path) -> Reader:
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        if os.geteuid() != 0:
            for path in [folder, *folder.rglob("*")]:
                path.chmod(path.stat().st_mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))
            restore.append(folder)
            return lambda *args: _run(_lineage(*args), env)
        unshare = shutil.which("unshare")
        if unshare is None:
            pytest.skip(
                "running as root without unshare(1): no way to make a folder read-only here"
            )
        wrap = [unshare, "-m", "sh", "-c", READ_ONLY_MOUNT, "sh", str(folder)]
        probe = _run([*wrap, "true"], env)
        if probe.returncode != 0:
            pytest.skip(
                f"running as root and a read-only bind mount failed: {probe.stderr.strip()}"
            )
        return lambda *args: _run([*wrap, *_lineage(*args)], env)

    yield make
    for folder in restore:
        for path in [folder, *folder.rglob("*")]:
            path.chmod(path.stat().st_mode | stat.S_IWUSR)


@pytest.fixture
def store(tmp_path: Path) -> Cli:
    cli = Cli(tmp_path / "shelf" / ".lineage")
    cli("import", str(EXAMPLES / "pr-layout"))
    return cli


def test_reads_of_current_read_models_work_on_a_read_only_store(
    store: Cli, read_only: Callable[[Path], Reader]
) -> None:
    expected = {
        name: store(*args).stdout
        for name, args in (
            ("runs", ("runs",)),
            ("tree", ("tree", RUN)),
            ("arms", ("arms", RUN)),
            ("sql", ("sql", "SELECT count(*) AS n FROM events")),
        )
    }
    before = {p: p.read_bytes() for p in store.home.iterdir()}
    reader = read_only(store.home.parent)
    home = ("--home", str(store.home))
    for name, args in (
        ("runs", ("runs",)),
        ("tree", ("tree", "csv-dedupe__d4")),
        ("arms", ("arms", RUN)),
        ("sql", ("sql", "SELECT count(*) AS n FROM events")),
    ):
        result = reader(*home, *args)
        assert result.returncode == 0, (name, result.stderr)
        assert result.stdout == expected[name], name
    # What must write them says so in our words (it was DuckDB's "attached in read-only mode", a
    # traceback).
    rebuilt = reader(*home, "rebuild")
    assert rebuilt.returncode == 4 and "Traceback" not in rebuilt.stderr
    assert (
        "expected to rebuild the read models" in rebuilt.stderr
        and "cannot be written" in rebuilt.stderr
    )
    assert {p: p.read_bytes() for p in store.home.iterdir()} == before


def test_read_models_behind_a_read_only_store_are_refused_saying_what_would_do(
    store: Cli, read_only: Callable[[Path], Reader], tmp_path: Path
) -> None:
    store("runs")
    said = store("ingest", "-", input=LINE).stderr  # the log moves on; the read models are behind
    position = int(said.rsplit("log position ", 1)[1].split()[0])
    reader = read_only(store.home.parent)
    home = ("--home", str(store.home))
    for args in (("runs",), ("tree", RUN), ("sql", "SELECT 1")):
        refused = reader(*home, *args)
        assert refused.returncode == 4, (args, refused.stdout, refused.stderr)
        assert "cannot be written" in refused.stderr and "Traceback" not in refused.stderr
        assert f"up to position {position - 1} of {position}" in refused.stderr
        assert "`lineage project`" in refused.stderr and "--home DIR" in refused.stderr
    # The hint works: the same store, its read models built in a folder that can be written.
    elsewhere = tmp_path / "scratch"
    elsewhere.mkdir()
    url = f"sqlite:///{store.home / 'events.sqlite'}"
    done = reader("--home", str(elsewhere), "--store", url, "runs", "--format", "csv")
    assert done.returncode == 0, done.stderr
    assert "jobs/late__1" in done.stdout
    # A command that must write the store (here: extend the log's Merkle tree) says so, not "could
    # not be read".
    verify = reader(*home, "verify")
    assert verify.returncode == 4
    assert "read-only" in verify.stderr and "Traceback" not in verify.stderr
