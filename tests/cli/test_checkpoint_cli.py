"""Checkpoints through the CLI: keys, signing, `verify --checkpoint` across appends and against
every way of changing the log before the checkpoint, and `prove` with proofs checked without a
store."""

from __future__ import annotations

import json
import sqlite3
import stat
from pathlib import Path

import pytest

from tests.cli_helpers import key_label, relink
from tests.conftest import Cli

FACTS = [
    {"type": "run.registered", "run": "jobs/t__1", "task": "t"},
    {"type": "stage.marked", "run": "jobs/t__1", "stage": "env-ready", "sandbox_ref": "snap-1"},
    {"type": "run.scored", "run": "jobs/t__1", "reward": 1.0, "tests": {"test_a": "passed"}},
    {"type": "run.registered", "run": "jobs/t__2", "task": "t"},
]
MORE = [{"type": "run.registered", "run": f"jobs/u__{i}", "task": "u"} for i in range(5)]


def ingest(cli: Cli, facts: list[dict], tmp_path: Path) -> None:
    source = tmp_path / f"facts-{len(facts)}-{facts[0]['run'].replace('/', '_')}.jsonl"
    source.write_text("".join(json.dumps(fact) + "\n" for fact in facts))
    cli("ingest", str(source))


@pytest.fixture
def keys(tmp_path: Path) -> tuple[Path, Path]:
    Cli(tmp_path / "unused")("keys", "generate", "lab-writer", "--dir", str(tmp_path))
    return tmp_path / "lab-writer.key", tmp_path / "lab-writer.pub"


def take_checkpoint(cli: Cli, path: Path, key: Path | None = None) -> Path:
    path.write_text(cli("checkpoint", *(["--sign", str(key)] if key else [])).stdout)
    return path


def verify(cli: Cli, checkpoint: Path, *keys: Path) -> tuple[int, dict]:
    key_args = [arg for key in keys for arg in ("--key", str(key))]
    result = cli("verify", "--checkpoint", str(checkpoint), *key_args, "--format", "json", ok=False)
    return result.exit_code, (
        json.loads(result.stdout) if result.stdout else {"error": result.stderr}
    )


def test_keys_generate_writes_a_private_key_only_its_owner_reads_and_never_overwrites(
    keys: tuple[Path, Path], tmp_path: Path
) -> None:
    private, public = keys
    assert stat.S_IMODE(private.stat().st_mode) == 0o600
    assert private.read_text().startswith("PRIVATE+KEY+lab-writer+")
    assert public.read_text().startswith("lab-writer+") and "PRIVATE" not in public.read_text()
    again = Cli(tmp_path / "unused")(
        "keys", "generate", "lab-writer", "--dir", str(tmp_path), ok=False
    )
    assert again.exit_code == 1 and "refusing to overwrite" in again.stderr
    assert private.read_text().startswith("PRIVATE+KEY+lab-writer+")
    bad = Cli(tmp_path / "unused")("keys", "generate", "a b", "--dir", str(tmp_path), ok=False)
    assert bad.exit_code == 1 and "expected a key name" in bad.stderr


def test_a_signed_checkpoint_verifies_and_stays_extended_across_appends(
    store_url: str, tmp_path: Path, keys: tuple[Path, Path]
) -> None:
    cli = Cli(tmp_path / "home", store_url)
    cli("init")
    ingest(cli, FACTS, tmp_path)
    first = take_checkpoint(cli, tmp_path / "first.cp", keys[0])
    lines = first.read_text().splitlines()
    assert lines[0].startswith("rollout-lineage/") and lines[1] == "5" and lines[3] == ""
    assert lines[4].startswith("\u2014 lab-writer ")
    code, report = verify(cli, first, keys[1])
    assert code == 0
    assert report["checkpoint"] == f"5 events, signed by {key_label(keys[1])}: extended by this log"
    ingest(cli, MORE, tmp_path)
    second = take_checkpoint(cli, tmp_path / "second.cp", keys[0])
    ingest(cli, [*MORE[:1], {"type": "run.registered", "run": "jobs/v", "task": "v"}], tmp_path)
    for checkpoint in (first, second):
        code, report = verify(cli, checkpoint, keys[1])
        assert code == 0 and "extended by this log" in report["checkpoint"]
    unsigned = take_checkpoint(cli, tmp_path / "unsigned.cp")
    code, report = verify(cli, unsigned)
    assert code == 0 and "signature not checked" in report["checkpoint"]


def test_a_changed_checkpoint_or_the_wrong_key_fails_the_signature(
    run_cli: Cli, tmp_path: Path, keys: tuple[Path, Path]
) -> None:
    ingest(run_cli, FACTS, tmp_path)
    checkpoint = take_checkpoint(run_cli, tmp_path / "cp", keys[0])
    text = checkpoint.read_text()
    (tmp_path / "smaller").write_text(text.replace("\n5\n", "\n4\n", 1))
    code, report = verify(run_cli, tmp_path / "smaller", keys[1])
    assert code == 3 and f"signature by {key_label(keys[1])} does not verify" in report["error"]
    Cli(tmp_path / "x")("keys", "generate", "someone-else", "--dir", str(tmp_path))
    code, report = verify(run_cli, checkpoint, tmp_path / "someone-else.pub")
    assert code == 3 and "expected a signature by someone-else" in report["error"]
    code, report = verify(run_cli, take_checkpoint(run_cli, tmp_path / "unsigned"), keys[1])
    assert code == 3 and "found signatures by nobody" in report["error"]


def edit_state(db: sqlite3.Connection, position: int) -> None:
    state = db.execute("SELECT state FROM stored_events WHERE rowid = ?", (position,)).fetchone()[0]
    db.execute(
        "UPDATE stored_events SET state = ? WHERE rowid = ?",
        (state.replace(b"tester@lab", b"forger@lab"), position),
    )


def swap(db: sqlite3.Connection, a: int, b: int) -> None:
    rows = {
        r[0]: r[1:]
        for r in db.execute(
            "SELECT rowid, originator_id, originator_version, topic, state FROM stored_events "
            "WHERE rowid IN (?, ?)",
            (a, b),
        )
    }
    db.execute("DELETE FROM stored_events WHERE rowid IN (?, ?)", (a, b))
    for position, source in ((a, b), (b, a)):
        db.execute(
            "INSERT INTO stored_events (rowid, originator_id, originator_version, topic, state) "
            "VALUES (?, ?, ?, ?, ?)",
            (position, *rows[source]),
        )


@pytest.mark.parametrize(
    ("tamper", "expected_position", "expected"),
    [
        (lambda db: edit_state(db, 2), 2, "does not match its chain hash"),
        (
            lambda db: (edit_state(db, 2), relink(db, forget_tree=False)),
            2,
            "does not match its leaf",
        ),
        (lambda db: (edit_state(db, 3), relink(db)), None, "at or before position 5 was rewritten"),
        (lambda db: swap(db, 2, 3), 2, "does not match its chain hash"),
        (lambda db: (swap(db, 2, 3), relink(db)), None, "do not hash to the checkpoint's root"),
        (lambda db: (edit_state(db, 1), relink(db)), 1, "its first event (position 1)"),
    ],
    ids=["edit", "edit-relinked", "edit-rebuilt", "reorder", "reorder-rebuilt", "first-rebuilt"],
)
def test_every_change_before_a_checkpoint_is_caught(
    run_cli: Cli, tmp_path: Path, tamper, expected_position: int | None, expected: str
) -> None:
    ingest(run_cli, FACTS, tmp_path)
    checkpoint = take_checkpoint(run_cli, tmp_path / "cp")
    ingest(run_cli, MORE, tmp_path)
    with sqlite3.connect(run_cli.home / "events.sqlite") as db:
        tamper(db)
    code, report = verify(run_cli, checkpoint)
    assert code == 3 and report["intact"] is False
    assert report["first_bad_position"] == expected_position and expected in report["problem"]


def test_a_truncated_log_is_caught_even_when_its_chain_and_tree_are_consistent(
    run_cli: Cli, tmp_path: Path
) -> None:
    ingest(run_cli, FACTS, tmp_path)
    ingest(run_cli, MORE, tmp_path)
    checkpoint = take_checkpoint(run_cli, tmp_path / "cp")
    with sqlite3.connect(run_cli.home / "events.sqlite") as db:
        db.execute("DELETE FROM stored_events WHERE rowid > 6")
        relink(db)
    run_cli("verify")  # consistent inside the store...
    code, report = verify(run_cli, checkpoint)  # ...but not with what was handed over
    assert code == 3 and report["first_bad_position"] == 7
    assert "covers 10 events, but the log holds 6" in report["problem"]


def test_prove_prints_proofs_that_check_without_a_store(
    store_url: str, tmp_path: Path, keys: tuple[Path, Path]
) -> None:
    cli = Cli(tmp_path / "home", store_url)
    cli("init")
    ingest(cli, FACTS, tmp_path)
    checkpoint = take_checkpoint(cli, tmp_path / "cp", keys[0])
    ingest(cli, MORE, tmp_path)
    by_node = json.loads(
        cli(
            "prove", "jobs/t__1:root", "--checkpoint", str(checkpoint), "--key", str(keys[1])
        ).stdout
    )
    assert [p["position"] for p in by_node["proofs"]] == [1, 2, 3, 4]
    assert all(p["tree_size"] == 5 for p in by_node["proofs"])
    proofs = tmp_path / "proofs.json"
    proofs.write_text(json.dumps(by_node))
    nowhere = Cli(tmp_path / "no-store-here")
    checked = nowhere(
        "prove", "--check", str(proofs), "--checkpoint", str(checkpoint), "--key", str(keys[1])
    )
    assert checked.stdout.startswith("4 inclusion proofs verify")
    entry = by_node["proofs"][1]["entry"]
    by_node["proofs"][1]["entry"] = entry[:-4] + ("AAAA" if entry[-4:] != "AAAA" else "BBBB")
    proofs.write_text(json.dumps(by_node))
    bad = nowhere("prove", "--check", str(proofs), "--checkpoint", str(checkpoint), ok=False)
    assert bad.exit_code == 3 and "proof 2" in bad.stderr
    assert "fields disagree with its entry and the checkpoint: leaf_hash" in bad.stderr
    late = cli("prove", "7", "--checkpoint", str(checkpoint), ok=False)
    assert late.exit_code == 1 and "appended after the checkpoint" in late.stderr
    one = json.loads(cli("prove", "5", "--checkpoint", str(checkpoint)).stdout)
    assert [p["leaf_index"] for p in one["proofs"]] == [4]


def test_an_edited_inner_node_is_named_by_verify_and_prove_refuses_plainly(
    tmp_path: Path, keys: tuple[Path, Path]
) -> None:
    """A node off the right edge was never compared (only the root), so `verify` said intact and
    `prove`, whose own check refused the proof, died with a traceback (an attack review's find)."""
    cli = Cli(tmp_path / "home")
    cli("init")
    ingest(cli, FACTS, tmp_path)
    ingest(cli, MORE, tmp_path)
    checkpoint = take_checkpoint(cli, tmp_path / "cp", keys[0])
    with sqlite3.connect(cli.home / "events.sqlite") as db:
        db.execute(
            "UPDATE lineage_merkle_nodes SET hash = zeroblob(32) WHERE level = 1 AND idx = 0"
        )
    code, report = verify(cli, checkpoint, keys[1])
    assert code == 3 and "level 1, index 0" in json.dumps(report)
    proved = cli("prove", "3", "--checkpoint", str(checkpoint), "--key", str(keys[1]), ok=False)
    assert proved.exit_code == 3 and "does not verify" in proved.stderr
    assert "Traceback" not in proved.stderr + proved.stdout
