"""Run bundles: some runs' events exactly as stored, with everything needed to check them elsewhere.

Every byte of a bundle is either checked against a proof or a signature, or re-derived from what is
and compared (`canonical`, `build`). It does not prove that it holds *every* event of those runs (a
tree proves membership, not absence); the reader sees which positions are bundled.
"""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path
from typing import Any

from ...domain.errors import IntegrityFailure, InvalidInput
from ...domain.signed_note import Note, SignerKey
from . import ed25519
from .batch_evidence import signatures
from .checkpoints import make_checkpoint
from .merkle_store import PAGE, PAGE_BYTES, MerkleStore

FORMAT = "rollout-lineage/bundle/v1"
MAX_TAR_BYTES = 2 * 2**30


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def canonical(document: dict[str, Any]) -> bytes:
    """A bundle's one canonical JSON form (sorted keys, no spaces, ASCII, one trailing newline), so
    the reader can re-derive the file's bytes from what it checked."""
    return (
        json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode()
        + b"\n"
    )


def belongs(fact: dict[str, Any], runs: set[str], refs: set[str]) -> bool:
    """Whether an event is about one of `runs`: it names the run, or it is about a snapshot the runs
    captured (`refs`, which grows as captures are met in log order)."""
    if fact.get("run") in runs:
        if fact.get("type") == "snapshot.captured":
            refs.add(fact["ref"])
        return True
    return str(fact.get("type", "")).startswith("snapshot.") and fact.get("ref") in refs


def select_rows(recorder: Any, runs: set[str]) -> list[tuple[Any, ...]]:
    chosen: list[tuple[Any, ...]] = []
    refs: set[str] = set()
    after = 0
    while rows := recorder.log_rows(after, None, PAGE, PAGE_BYTES):
        for row in rows:
            if row[4] is not None and belongs(json.loads(row[4])["fact"], runs, refs):
                chosen.append(row)
        after = rows[-1][0]
    found = {json.loads(row[4])["fact"].get("run") for row in chosen}
    missing = sorted(runs - found)
    if missing:
        raise InvalidInput(
            f"expected events of every run named, found none for {', '.join(missing)}",
            hint="`lineage runs` lists the run keys",
        )
    return chosen


def _event(tree: MerkleStore, size: int, row: tuple[Any, ...]) -> dict[str, Any]:
    position, originator_id, version, topic, state = row[:5]
    index = tree.index_of(position)
    if index is None or index >= size:  # the rows were read after the tree caught up, and cut to it
        raise IntegrityFailure(
            f"position {position} has no leaf in the tree of {size} events; the tree was edited",
            hint="run `lineage verify`",
        )
    _, proof = tree.inclusion(index, size)
    return {
        "position": position,
        "leaf_index": index,
        "originator_id": originator_id,
        "originator_version": version,
        "topic": topic,
        "state": bytes(state).decode("utf-8"),
        "proof": [b64(h) for h in proof],
    }


def _batches(tree: MerkleStore, positions: list[int]) -> list[dict[str, Any]]:
    wanted, found = set(positions), []
    for first, last, signer, signature in signatures(tree.recorder):
        if not any(first <= p <= last for p in wanted):
            continue
        first_index, last_index = tree.index_of(first), tree.index_of(last)
        if first_index is None or last_index is None:
            raise IntegrityFailure(
                f"the signed batch at positions {first}-{last} "
                f"has no leaves in the tree; its events "
                "were removed",
                hint="run `lineage verify --trusted-keys FILE`",
            )
        leaves = tree.leaf_rows(first_index - 1, last_index - first_index + 1)
        batch = {
            "first": first,
            "last": last,
            "signer": signer,
            "signature": b64(signature),
            "leaves": [b64(h) for _, _, h in leaves],
        }
        # The role the store authenticated is signed with the leaves (`batch_message`): only where
        # one is.
        roles = {row[5] for row in tree.recorder.log_rows(first - 1, last, last - first + 1)}
        if len(roles) > 1:
            raise IntegrityFailure(
                f"the signed batch at positions {first}-{last} "
                f"shows {len(roles)} roles as recorded_by, "
                "where one transaction has one: the chain was edited",
                hint="run `lineage verify --trusted-keys FILE`",
            )
        role = roles.pop() if roles else None
        if role is not None:
            batch["recorded_by"] = role
        found.append(batch)
    return found


def _tars(events: list[dict[str, Any]], with_tars: bool) -> list[dict[str, Any]]:
    tars = []
    for event in events:
        fact = json.loads(event["state"])["fact"]
        if fact.get("type") != "snapshot.exported":
            continue
        entry: dict[str, Any] = {"ref": fact["ref"], "sha256": fact["sha256"]}
        if with_tars:
            entry["data"] = b64(_read_tar(Path(fact["path"]), fact["sha256"], fact["ref"]))
        tars.append(entry)
    return tars


def _read_tar(path: Path, digest: str, ref: str) -> bytes:
    try:
        if path.stat().st_size > MAX_TAR_BYTES:
            raise InvalidInput(f"the tar of {ref} at {path} is over {MAX_TAR_BYTES} bytes")
        data = path.read_bytes()
    except OSError as exc:
        raise InvalidInput(
            f"--with-tars: cannot read the tar of snapshot {ref} at {path}: {exc.strerror}",
            hint="bundle without --with-tars (the digests are always included)",
        ) from None
    found = "sha256:" + hashlib.sha256(data).hexdigest()
    if found != digest and found.removeprefix("sha256:") != digest:
        raise InvalidInput(
            f"the tar of {ref} at {path} hashes to {found}, not the recorded {digest}"
        )
    return data


def build(
    tree: MerkleStore, runs: list[str], signer: SignerKey | None, with_tars: bool
) -> dict[str, Any]:
    """The bundle of `runs`:
    - `checkpoint`: the signed note of the tree they are proven against; `checkpoint_keys` the
      verifier keys that signed it (trust comes from the reader's `--key`, the embedded key only
      lets a flipped byte be found);
    - `origin`: leaf 0 with its inclusion proof, so the checkpoint's origin line is checked too;
    - `events`: each event's stored fields (its `state` is the stored JSON text) and its inclusion
      proof;
    - `batches`: the signed batches those events came from, with every leaf of the batch (other
      runs' events appear only as leaf hashes), the signer's verifier key and the signature;
    - `tars`: the snapshot tars the events record as exported (ref, sha256) and, with `with_tars`,
      their bytes;
    - `runs`: the run keys bundled, which must be exactly the runs the events are about."""
    tree.catch_up()
    checkpoint = make_checkpoint(tree, to_sign=signer is not None)
    note = Note(checkpoint.text())
    if signer is not None:
        note = ed25519.sign_note(note, signer)
    # Events appended after the checkpoint are left for the next bundle (they have no proof against
    # it).
    last = tree.position_of(checkpoint.size - 1) if checkpoint.size else 0
    rows = [row for row in select_rows(tree.recorder, set(runs)) if row[0] <= (last or 0)]
    events = [_event(tree, checkpoint.size, row) for row in rows]
    origin_leaf, origin_proof = tree.inclusion(0, checkpoint.size)
    return {
        "format": FORMAT,
        "runs": sorted(set(runs)),
        "checkpoint": str(note),
        "checkpoint_keys": [str(signer.verifier)] if signer else [],
        "origin": {"leaf_hash": b64(origin_leaf), "proof": [b64(h) for h in origin_proof]},
        "events": events,
        "batches": _batches(tree, [e["position"] for e in events]),
        "tars": _tars(events, with_tars),
    }
