"""The stored Merkle tree: caught up from the log on both backends, equal to the tree of the events'
own entries, usable for proofs between any two sizes, and checked against the events by `lineage
verify`."""

from __future__ import annotations

import base64
import json
import shutil
import sqlite3
from pathlib import Path

import pytest

from rollout_lineage.adapters.evidence import merkle_store
from rollout_lineage.adapters.evidence.merkle_store import MerkleStore, leaf_of
from rollout_lineage.domain import merkle
from rollout_lineage.domain.errors import IntegrityFailure
from rollout_lineage.domain.facts import RunRegistered, StageMarked
from rollout_lineage.domain.integrity import link
from tests.conftest import Cli, open_lineage

STORES = Path(__file__).resolve().parents[1] / "stores"


def record_runs(lineage, start: int, count: int) -> None:
    for i in range(start, start + count):
        run = f"jobs/t__{i}"
        lineage.record([RunRegistered(run=run, task="t"), StageMarked(run=run, stage="env-ready")])


def leaves_from_the_log(lineage) -> list[bytes]:
    return [leaf_of(row) for row in lineage.app.recorder.log_rows(0, None, 10**6)]


def test_the_stored_tree_is_the_tree_of_the_events_and_proves_across_appends(
    store_url: str, tmp_path: Path
) -> None:
    with open_lineage(store_url, tmp_path / "home") as lineage:
        record_runs(lineage, 0, 3)
        tree = lineage.tree()
        old_size, old_root = tree.size(), tree.root(tree.size())
        record_runs(lineage, 3, 20)
        tree = lineage.tree()
        size = tree.size()
        expected = merkle.MemoryTree()
        expected.append(leaves_from_the_log(lineage))
        assert size == expected.size == 46 and tree.root(size) == expected.root()
        merkle.verify_consistency(
            old_size, size, old_root, tree.root(size), tree.consistency(old_size, size)
        )
        for index in (0, 5, size - 1):
            leaf, proof = tree.inclusion(index, size)
            merkle.verify_inclusion(index, size, leaf, proof, expected.root())
        assert lineage.verify().intact


@pytest.mark.parametrize("page_bytes", [merkle_store.PAGE_BYTES, 1])
def test_a_store_written_before_the_tree_gains_one_and_keeps_verifying(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, page_bytes: int
) -> None:
    """The whole tree is built by catching up, a page at a time; pages are cut by their states'
    bytes too, so with a budget of one byte every event is a page of its own, and the tree is the
    same."""
    monkeypatch.setattr(merkle_store, "PAGE_BYTES", page_bytes)
    home = tmp_path / "home"
    home.mkdir()
    shutil.copy(STORES / "landing-1-examples.sqlite", home / "events.sqlite")
    cli = Cli(home)
    shown = json.loads(cli("head", "--json").stdout)
    with open_lineage(f"sqlite:///{home / 'events.sqlite'}", home) as lineage:
        leaves = leaves_from_the_log(lineage)
    expected = merkle.MemoryTree()
    expected.append(leaves)
    assert shown["tree_size"] == len(leaves) > 0
    assert base64.b64decode(shown["root"]) == expected.root()
    cli("verify")


def test_verify_names_an_event_edited_with_its_chain_relinked(tmp_path: Path) -> None:
    """A careful forger re-links the chain after editing an event; the tree built earlier still
    differs."""
    cli = Cli(tmp_path / "home")
    cli("init")
    with open_lineage(f"sqlite:///{tmp_path / 'home' / 'events.sqlite'}", tmp_path) as lineage:
        record_runs(lineage, 0, 3)
        lineage.tree()
        rows = lineage.app.recorder.log_rows(0, None, 100)
    with sqlite3.connect(tmp_path / "home" / "events.sqlite") as db:
        edited = rows[2][4].replace(b"env-ready", b"env-ready", 1).replace(b'"t"', b'"x"')
        db.execute("UPDATE stored_events SET state = ? WHERE rowid = 3", (edited,))
        previous = "sha256:" + "0" * 64
        for position, originator, version, topic, state, _ in rows:
            state = edited if position == 3 else state
            previous = link(previous, position, originator, version, topic, state)
            db.execute(
                "UPDATE lineage_chain SET chain_hash = ? WHERE position = ?", (previous, position)
            )
    report = json.loads(cli("verify", "--format", "json", ok=False).stdout)
    assert report["first_bad_position"] == 3
    assert "does not match its leaf in the Merkle tree" in report["problem"]


def test_the_tree_stops_at_a_break_in_the_chain(tmp_path: Path) -> None:
    cli = Cli(tmp_path / "home")
    cli("init")
    with open_lineage(f"sqlite:///{tmp_path / 'home' / 'events.sqlite'}", tmp_path) as lineage:
        record_runs(lineage, 0, 2)
    with sqlite3.connect(tmp_path / "home" / "events.sqlite") as db:
        db.execute("UPDATE stored_events SET topic = 'lineage:x' WHERE rowid = 2")
    result = cli("head", ok=False)
    assert result.exit_code == 3 and "position 2" in result.stderr
    with open_lineage(f"sqlite:///{tmp_path / 'home' / 'events.sqlite'}", tmp_path) as lineage:
        tree = MerkleStore(lineage.app.recorder)
        with pytest.raises(IntegrityFailure, match="broken at position 2"):
            tree.catch_up()
        assert tree.size() == 0
