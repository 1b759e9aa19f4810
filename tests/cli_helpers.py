"""Helpers several CLI test modules share: fact files for `ingest`, audit reports and matrices, a
signed source store for bundles, and the re-link a forger does after editing a SQLite log."""

from __future__ import annotations

import hashlib
import json
import sqlite3
from pathlib import Path

from rollout_lineage.bootstrap import open_store
from rollout_lineage.domain import facts as f
from rollout_lineage.domain.integrity import GENESIS, link
from rollout_lineage.domain.signed_note import VerifierKey
from tests import audit_scenarios as s
from tests.conftest import Cli


def write_lines(path: Path, lines: list[object]) -> Path:
    path.write_text(
        "".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines)
    )
    return path


def many_runs(n: int) -> list[dict]:
    return [
        line
        for i in range(n)
        for line in (
            {"type": "run.registered", "run": f"jobs/t__{i}", "task": "t"},
            {
                "type": "stage.marked",
                "run": f"jobs/t__{i}",
                "stage": "env-ready",
                "sandbox_ref": f"bf-snap-{i}",
            },
            {"type": "run.scored", "run": f"jobs/t__{i}", "reward": float(i % 2)},
        )
    ]


def matrix_file(tmp_path: Path, document: object = s.MATRIX) -> Path:
    path = tmp_path / "matrix.json"
    path.write_text(json.dumps(document))
    return path


def audit_json(run_cli: Cli, *args: str, code: int) -> dict:
    result = run_cli("audit", "--format", "json", *args, ok=False)
    assert result.exit_code == code, result.output + result.stderr
    return json.loads(result.stdout)


def source_store(store: str, home: Path, tmp_path: Path, key: Path) -> Path:
    """Two runs, one with an exported (and verified-here imported) snapshot, written with a signing
    key."""
    tar = tmp_path / "snap-1.tar"
    tar.write_bytes(b"not really a docker save, but bytes with a digest" * 100)
    digest = "sha256:" + hashlib.sha256(tar.read_bytes()).hexdigest()
    with open_store(store, home=str(home), signing_key=str(key)) as lineage:
        lineage.record(
            [f.RunRegistered(run="jobs/a", task="t"), f.RunRegistered(run="jobs/b", task="t")]
        )
        lineage.record([f.StageMarked(run="jobs/a", stage="env-ready", sandbox_ref="snap-1")])
        lineage.record([f.SnapshotExported(ref="snap-1", path=str(tar), sha256=digest)])
        lineage.app.record(
            [f.SnapshotImported(ref="snap-1", engine="docker", image_id=digest, tar_sha256=digest)],
            verified_here=True,
        )
        lineage.record([f.RunScored(run="jobs/a", reward=1.0, tests={"t1": "passed"})])
        lineage.record([f.RunScored(run="jobs/b", reward=0.0, tests={})])
    return tar


def relink(db: sqlite3.Connection, forget_tree: bool = True) -> None:
    """What a careful forger does after editing events: re-link the whole chain and drop the tree,
    so both are rebuilt over the edit and every check inside the store passes."""
    previous = GENESIS
    rows = db.execute(
        "SELECT rowid, originator_id, originator_version, "
        "topic, state FROM stored_events ORDER BY rowid"
    ).fetchall()
    db.execute("DELETE FROM lineage_chain")
    last = 0
    for position, originator, version, topic, state in rows:
        previous = link(previous, position, originator, version, topic, state)
        db.execute("INSERT INTO lineage_chain VALUES (?, ?, ?)", (position, last, previous))
        last = position
    if forget_tree:
        db.execute("DELETE FROM lineage_merkle_leaves")
        db.execute("DELETE FROM lineage_merkle_nodes")


def key_label(public: Path) -> str:
    """How every command names the key in a .pub file: `NAME+KEYID`, never the name alone."""
    return VerifierKey.parse(public.read_text()).label
