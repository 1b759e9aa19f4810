"""Proof files: `prove --check` checks every field a reader sees against the entry and the
checkpoint given, and `prove ADDRESS` proves every event `lineage history ADDRESS` lists under that
node.

The attacks (issue #23): a proof relabelled `"position": 77` (it proves position 5), with another
`leaf_hash`, `root` and checkpoint text, printed "1 inclusion proofs verify"; `prove RUN:NODE`
proved one of a fork child's events and left out its reward and custody hand-off; `RUN:FORK/ARM`,
which `diff` takes, was refused.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from rollout_lineage.bootstrap import open_store
from tests.audit_scenarios import HEALTHY, healthy_ablation
from tests.conftest import Cli

Proofs = dict[str, Any]


@pytest.fixture
def proved(store_url: str, tmp_path: Path) -> tuple[Cli, Path]:
    """A store holding the healthy ablation (a fork with custody) and a checkpoint of it."""
    home = tmp_path / "home"
    with open_store(store_url, home=str(home)) as lineage:
        lineage.record(healthy_ablation())
    cli = Cli(home, store_url)
    checkpoint = tmp_path / "cp"
    checkpoint.write_text(cli("checkpoint").stdout)
    return cli, checkpoint


def prove(cli: Cli, checkpoint: Path, address: str) -> Proofs:
    document: Proofs = json.loads(cli("prove", address, "--checkpoint", str(checkpoint)).stdout)
    return document


def check(tmp_path: Path, checkpoint: Path, document: Proofs) -> Any:
    proofs = tmp_path / "proofs.json"
    proofs.write_text(json.dumps(document))
    nowhere = Cli(tmp_path / "no-store-here")
    return nowhere("prove", "--check", str(proofs), "--checkpoint", str(checkpoint), ok=False)


def _other_hash(text: str) -> str:
    raw = bytearray(base64.b64decode(text))
    raw[0] ^= 1
    return base64.b64encode(bytes(raw)).decode()


def _position(p: Proofs) -> None:
    p["proofs"][0]["position"] = 77


def _leaf_hash(p: Proofs) -> None:
    p["proofs"][0]["leaf_hash"] = _other_hash(p["proofs"][0]["leaf_hash"])


def _root(p: Proofs) -> None:
    p["proofs"][0]["root"] = _other_hash(p["proofs"][0]["root"])


def _checkpoint_text(p: Proofs) -> None:
    p["checkpoint"] = p["checkpoint"].replace("\n", "\n0\n", 1)


def _extra_field(p: Proofs) -> None:
    p["proofs"][0]["verified_by"] = "the auditor"


def _extra_document_field(p: Proofs) -> None:
    p["note"] = "all checked"


def _position_as_text(p: Proofs) -> None:
    p["proofs"][0]["position"] = str(p["proofs"][0]["position"])


def _proof_as_text(p: Proofs) -> None:  # a one-event tree's proof is [], which "" would pass for
    p["proofs"][0]["proof"] = ""


def _all_relabelled(p: Proofs) -> None:  # the review's whole relabelling at once
    for relabel in (_position, _leaf_hash, _root, _checkpoint_text):
        relabel(p)


@pytest.mark.parametrize(
    ("relabel", "code", "said"),
    [
        (_position, 3, "position 77 (expected"),
        (_leaf_hash, 3, "leaf_hash"),
        (_root, 3, "root"),
        (_checkpoint_text, 3, "the checkpoint the file names is not the one given"),
        (_extra_field, 1, "verified_by"),
        (_extra_document_field, 1, "expected the fields checkpoint and proofs"),
        (_position_as_text, 1, "expected a whole number"),
        (_all_relabelled, 3, "not the one given"),
        (_proof_as_text, 1, "expected a list of hashes"),
    ],
)
def test_a_relabelled_proof_is_refused(
    proved: tuple[Cli, Path],
    tmp_path: Path,
    relabel: Callable[[Proofs], None],
    code: int,
    said: str,
) -> None:
    cli, checkpoint = proved
    document = prove(cli, checkpoint, "5")
    assert check(tmp_path, checkpoint, document).exit_code == 0
    relabel(document)
    result = check(tmp_path, checkpoint, document)
    assert result.exit_code == code and said in result.stderr, result.stderr


def test_proofs_for_another_checkpoint_are_refused(
    proved: tuple[Cli, Path], tmp_path: Path
) -> None:
    cli, checkpoint = proved
    document = prove(cli, checkpoint, "5")
    with open_store(cli.store, home=str(cli.home)) as lineage:
        lineage.record(healthy_ablation("audit/later__9", "9"))
    later = tmp_path / "later-cp"
    later.write_text(cli("checkpoint").stdout)
    result = check(tmp_path, later, document)
    assert result.exit_code == 3 and "not the one given" in result.stderr


def history_positions(cli: Cli, address: str) -> list[int]:
    document = json.loads(cli("history", address, "--format", "json").stdout)
    [step] = [
        s for s in document["steps"] if (s["run"], s["node"]) == (document["run"], document["node"])
    ]
    return [event["position"] for event in step["events"]]


@pytest.mark.parametrize(
    "address",
    [
        f"{HEALTHY}:n1",
        f"{HEALTHY}:root/with-skill",
        f"{HEALTHY}:root/#1",
        f"{HEALTHY}:root",
        HEALTHY,
    ],
)
def test_prove_proves_every_event_history_lists_under_the_node(
    proved: tuple[Cli, Path], tmp_path: Path, address: str
) -> None:
    cli, checkpoint = proved
    listed = history_positions(cli, address)
    document = prove(cli, checkpoint, address)
    assert [p["position"] for p in document["proofs"]] == listed
    types = {
        event["type"]
        for step in json.loads(cli("history", address, "--format", "json").stdout)["steps"]
        for event in step["events"]
        if event["position"] in listed
    }
    if address.endswith(("n1", "with-skill", "#1")):  # a child: its reward and custody hand-off too
        assert {"fork.child_scored", "custody.handed_off"} <= types
    else:  # the fork's node: custody held and released, the run's reward
        assert {"custody.held", "custody.released", "run.scored"} <= types
    assert check(tmp_path, checkpoint, document).exit_code == 0
