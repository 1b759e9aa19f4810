"""`lineage serve` over a store that changes under it or cannot be written (issue #33, items 6 and
7): a store folder replaced under a running server (a restored backup), and a read-only store."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import stat
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from rollout_lineage.bootstrap import Lineage
from rollout_lineage.domain import facts as f
from rollout_lineage.domain.integrity import link
from rollout_lineage.settings import Settings
from tests.conftest import EXAMPLES, Cli, open_lineage
from tests.serve_attack import (
    RUN,
    fetch,
    pr_layout_store,
)
from tests.serve_process import serving

pytestmark = pytest.mark.slow


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return pr_layout_store(tmp_path)


# --- 6. a store folder replaced under the server --------------------------------------------------


def _replace(home: Path, by: Path, aside: Path) -> None:
    home.rename(aside)
    by.rename(home)


def test_a_store_folder_restored_under_the_server_is_noticed(home: Path, tmp_path: Path) -> None:
    """A backup restored over the store: the server kept reading the file it had opened, so events
    written to the restored store never appeared and the audit called the old head intact."""
    backup = tmp_path / "backup"
    shutil.copytree(home, backup)
    url = f"sqlite:///{home / 'events.sqlite'}"
    with open_lineage(url, home) as writer:
        writer.record([f.RunRegistered(run="after/backup", task="t")])
    with serving(home, env={"TMPDIR": str(tmp_path / "scratch")}) as (_process, base):
        walked = json.loads(fetch(f"{base}/api/audit")[1])["integrity"]
        assert walked["intact"] is True
        assert fetch(f"{base}/runs/after/backup")[0] == 200  # remembered
        _replace(home, backup, tmp_path / "replaced")
        with open_lineage(url, home) as writer:  # as many events as the server walked
            writer.record([f.RunRegistered(run="restored/new", task="t")])
        assert fetch(f"{base}/api/runs/restored/new")[0] == 200
        assert fetch(f"{base}/api/runs/after/backup")[0] == 404
        assert fetch(f"{base}/runs/after/backup")[0] == 404
        runs = json.loads(fetch(f"{base}/api/runs?task=t")[1])["runs"]
        assert [r["run"] for r in runs] == ["restored/new"]
        audit = json.loads(fetch(f"{base}/api/audit")[1])
        assert audit["integrity"]["intact"] is False, audit["integrity"]
        assert walked["head"] in audit["integrity"]["problem"]
        assert "restart" in audit["integrity"]["problem"]
        assert audit["verdict"] != "publishable"


def test_a_store_folder_replaced_by_its_own_copy_stays_intact(home: Path, tmp_path: Path) -> None:
    """The same replacement, by a copy that holds every event the server walked: nothing is wrong
    with the log, and new events written to it appear."""
    url = f"sqlite:///{home / 'events.sqlite'}"
    with serving(home, env={"TMPDIR": str(tmp_path / "scratch")}) as (_process, base):
        assert json.loads(fetch(f"{base}/api/audit")[1])["integrity"]["intact"] is True
        copy = tmp_path / "copy"
        shutil.copytree(home, copy)
        _replace(home, copy, tmp_path / "replaced")
        with open_lineage(url, home) as writer:
            writer.record([f.RunRegistered(run="copied/new", task="t")])
        assert fetch(f"{base}/api/runs/copied/new")[0] == 200
        audit = json.loads(fetch(f"{base}/api/audit")[1])
        assert audit["integrity"]["intact"] is True, audit["integrity"]


# --- 7. a read-only store -------------------------------------------------------------------------

#: Mounts $1 read-only over itself, checks that it took, then runs the rest of the command line.
READ_ONLY_MOUNT = (
    'mount --bind -o ro "$1" "$1" && ! touch "$1/.probe" 2>/dev/null && shift && exec "$@"'
)


@pytest.fixture
def read_only() -> Iterator[Callable[[Path], list[str]]]:
    """`read_only(folder)`: the command prefix that runs a process with `folder` read-only to it (a
    bind mount in a namespace of its own as root, whom file modes do not stop; else `chmod`)."""
    restore: list[Path] = []

    def make(folder: Path) -> list[str]:
        if os.geteuid() != 0:
            for path in [folder, *folder.rglob("*")]:
                path.chmod(path.stat().st_mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))
            restore.append(folder)
            return []
        unshare = shutil.which("unshare")
        if unshare is None:
            pytest.skip("running as root without unshare(1): no way to make a folder read-only")
        wrap = [unshare, "-m", "sh", "-c", READ_ONLY_MOUNT, "sh", str(folder)]
        import subprocess

        probe = subprocess.run([*wrap, "true"], capture_output=True, text=True)
        if probe.returncode != 0:
            pytest.skip(f"a read-only bind mount failed: {probe.stderr.strip()}")
        return wrap

    yield make
    for folder in restore:
        for path in [folder, *folder.rglob("*")]:
            path.chmod(path.stat().st_mode | stat.S_IWUSR)


def test_run_pages_and_the_audit_answer_on_a_read_only_store(
    tmp_path: Path, read_only: Callable[[Path], list[str]]
) -> None:
    """The chain walk wanted to extend the Merkle tree, so every page that shows the chain was a
    500 with a traceback where the README says reads work."""
    cli = Cli(tmp_path / "shelf" / ".lineage")
    cli("import", str(EXAMPLES / "pr-layout"))
    cli("runs")  # the read models hold the whole log; the Merkle tree was never extended
    twin = Cli(tmp_path / "twin" / ".lineage")  # what the audit says where it may write
    shutil.copytree(cli.home, twin.home)
    expected = json.loads(twin("audit", "--format", "json", ok=False).stdout)
    before = {p: p.read_bytes() for p in cli.home.iterdir()}
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    wrap = read_only(cli.home.parent)
    with serving(cli.home, env={"TMPDIR": str(scratch)}, wrap=wrap) as (process, base):
        for path in ("/audit", f"/runs/{RUN}", f"/api/runs/{RUN}", f"/arms/{RUN}", "/runs"):
            status, body, _ = fetch(base + path)
            assert status == 200, (path, body[-800:])
        audit = json.loads(fetch(f"{base}/api/audit")[1])
        assert audit["integrity"] == expected["integrity"] and audit["integrity"]["intact"]
        assert audit["verdict"] == expected["verdict"]
    assert process.stderr is not None
    assert {p: p.read_bytes() for p in cli.home.iterdir()} == before


def _leaves(home: Path) -> int:
    with sqlite3.connect(home / "events.sqlite") as db:
        return int(db.execute("SELECT count(*) FROM lineage_merkle_leaves").fetchone()[0])


def test_the_served_chain_check_writes_nothing_and_still_finds_an_edit(tmp_path: Path) -> None:
    """What the server walks (`verify(extend_tree=False)`) opens no write side and leaves a tree
    that lags the log as it is, yet an event edited with its chain re-linked still differs from
    the leaf the tree holds for it."""
    home = tmp_path / "home"
    Cli(home)("init")
    with open_lineage(f"sqlite:///{home / 'events.sqlite'}", home) as writer:
        for i in range(3):
            writer.record([f.RunRegistered(run=f"jobs/t__{i}", task="t")])
        writer.tree()
        for i in range(3, 6):
            writer.record([f.RunRegistered(run=f"jobs/t__{i}", task="t")])
        rows = writer.app.recorder.log_rows(0, None, 100)
    settings = Settings.from_env({}, home=home, actor="tester@lab")
    with Lineage(settings, may_create=False) as reader:
        report = reader.verify(extend_tree=False)
        assert report.intact and report.events == 6, report.summary()
        assert "app" not in vars(reader)  # the write side was never opened
    assert _leaves(home) == 3
    with sqlite3.connect(home / "events.sqlite") as db:
        edited = rows[1][4].replace(b'"t"', b'"x"')
        db.execute("UPDATE stored_events SET state = ? WHERE rowid = 2", (edited,))
        previous = "sha256:" + "0" * 64
        for position, originator, version, topic, state, _ in rows:
            state = edited if position == 2 else state
            previous = link(previous, position, originator, version, topic, state)
            db.execute(
                "UPDATE lineage_chain SET chain_hash = ? WHERE position = ?", (previous, position)
            )
    with Lineage(settings, may_create=False) as reader:
        report = reader.verify(extend_tree=False)
    assert report.first_bad_position == 2
    assert "does not match its leaf in the Merkle tree" in (report.problem or "")
