"""Checkpoints of the stored tree, and proving the log against them: that it extends one
(consistency) and that an event is in one (inclusion).

The origin line names the log by its first event (`rollout-lineage/` and 16 hex digits of that
event's leaf hash): a store has it from its first write on, another store cannot share it without
sharing that event, and it needs no configuration. A checkpoint of an empty log names no origin
worth checking (every log extends it).
"""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

from ...domain import merkle
from ...domain.errors import IntegrityFailure, InvalidInput
from ...domain.signed_note import Checkpoint, Note
from ..user_files import read_capped
from .merkle_store import MerkleStore, check_against_log, event_entry_of

EMPTY_ORIGIN = "rollout-lineage/empty"


def origin_of(tree: MerkleStore) -> str:
    if tree.size() == 0:
        return EMPTY_ORIGIN
    leaf, _ = tree.inclusion(0, 1)
    return f"rollout-lineage/{leaf.hex()[:16]}"


def make_checkpoint(tree: MerkleStore, *, to_sign: bool = False) -> Checkpoint:
    """The checkpoint of the stored tree. One `to_sign` is first checked against the log (every leaf
    and node recomputed from the events, as `verify` does): a signature vouches for the root to
    people who never see the store, so it must never be over a tree someone edited beside the
    events."""
    if to_sign:
        found = check_against_log(tree)
        if found is not None:
            raise IntegrityFailure(
                f"refusing to sign a checkpoint: the stored Merkle tree "
                f"is not the log's at position {found[0]}: {found[1]}",
                hint="run `lineage verify`; if the log is intact, delete the "
                "lineage_merkle_* rows and the tree is rebuilt from the events",
            )
    size = tree.size()
    return Checkpoint(origin_of(tree), size, tree.root(size))


def read_note(path: str) -> Note:
    return Note.parse(read_capped(path, 70_000, "a checkpoint"), path)


def read_checkpoint(path: str) -> tuple[Note, Checkpoint]:
    note = read_note(path)
    return note, Checkpoint.parse(note.text, path)


def check_extends(tree: MerkleStore, checkpoint: Checkpoint) -> tuple[int | None, str] | None:
    """None when the log extends the checkpoint; else (the first differing position when it can be
    known, what is wrong)."""
    size = tree.size()
    if checkpoint.size > size:
        last = tree.position_of(size - 1) if size else 0
        return (last or 0) + 1, (
            f"the checkpoint covers {checkpoint.size} events, but the log holds {size} "
            f"(through position {last}): events after position {last} were removed"
        )
    if checkpoint.size and checkpoint.origin != origin_of(tree):
        return tree.position_of(0), (
            f"the checkpoint is of the log {checkpoint.origin}, this log is "
            f"{origin_of(tree)}: its first event (position {tree.position_of(0)}) "
            f"is not the one the checkpoint was taken over, or "
            "this is another store"
        )
    proof = tree.consistency(checkpoint.size, size)
    try:
        merkle.verify_consistency(checkpoint.size, size, checkpoint.root, tree.root(size), proof)
    except merkle.ProofFailed as exc:
        last = tree.position_of(checkpoint.size - 1)
        return None, (
            f"the log's first {checkpoint.size} events (through position {last}) do not hash to "
            f"the checkpoint's root: an event at or before position {last} was rewritten, "
            f"removed, inserted or reordered, with the chain and the tree rebuilt over it ({exc})"
        )
    return None


def require_extends(tree: MerkleStore, checkpoint: Checkpoint, where: str) -> None:
    found = check_extends(tree, checkpoint)
    if found is not None:
        raise IntegrityFailure(
            f"{where}: the log does not extend this checkpoint: {found[1]}",
            hint="restore the store from a backup taken when the checkpoint was made",
        )


def inclusion(
    tree: MerkleStore, checkpoint: Checkpoint, position: int, row: tuple[Any, ...]
) -> dict[str, Any]:
    """A self-contained inclusion proof of the event at `position` (its log row `row`) in the
    checkpoint."""
    index = tree.index_of(position)
    if index is None:
        raise InvalidInput(
            f"expected the position of an event, found {position}: the log has none there"
        )
    if index >= checkpoint.size:
        raise InvalidInput(
            f"position {position} is leaf {index}, appended "
            f"after the checkpoint ({checkpoint.size} "
            "events)",
            hint="take a new checkpoint with `lineage checkpoint` and prove against that",
        )
    leaf, proof = tree.inclusion(index, checkpoint.size)
    entry = event_entry_of(row)
    if merkle.leaf_hash(entry) != leaf:
        raise IntegrityFailure(f"position {position}: the stored event does not match its leaf")
    try:
        merkle.verify_inclusion(index, checkpoint.size, leaf, proof, checkpoint.root)
    except merkle.ProofFailed as exc:  # the stored tree's inner nodes are not the log's
        raise IntegrityFailure(
            f"position {position}: the proof drawn from the stored Merkle tree "
            f"does not verify against the checkpoint ({exc}); the tree was edited",
            hint="run `lineage verify` for the whole report",
        ) from None
    return {
        "position": position,
        "leaf_index": index,
        "tree_size": checkpoint.size,
        "root": base64.b64encode(checkpoint.root).decode(),
        "entry": base64.b64encode(entry).decode(),
        "leaf_hash": base64.b64encode(leaf).decode(),
        "proof": [base64.b64encode(h).decode() for h in proof],
    }


#: The fields of one proof `inclusion` makes, each checked by `check_inclusion`: a field a reader
#: sees and no one checks could say anything.
PROOF_FIELDS = frozenset(
    ("position", "leaf_index", "tree_size", "root", "entry", "leaf_hash", "proof")
)


def check_inclusion(document: dict[str, Any], checkpoint: Checkpoint, where: str) -> None:
    """Verify a proof `lineage prove` printed against a checkpoint, with no store at all: the proof
    itself, and every other field against the entry and the checkpoint (position, leaf hash, root,
    tree size)."""
    try:
        if not isinstance(document, dict) or set(document) != PROOF_FIELDS:
            found = sorted(document) if isinstance(document, dict) else type(document).__name__
            raise ValueError(f"expected the fields {sorted(PROOF_FIELDS)}, found {found}")
        entry, leaf, root = (_base64(document[name]) for name in ("entry", "leaf_hash", "root"))
        if not isinstance(document["proof"], list):  # "" would read as no hashes at all
            raise TypeError(f"expected a list of hashes, found {type(document['proof']).__name__}")
        proof = [_base64(h) for h in document["proof"]]
        position, index, size = (
            _integer(document[name]) for name in ("position", "leaf_index", "tree_size")
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise InvalidInput(
            f"{where}: expected a proof as `lineage prove` prints it ({exc})"
        ) from None
    disagreeing = [
        f"{name} {found} (expected {expected})"
        for name, found, expected in (
            ("tree_size", size, checkpoint.size),
            ("root", document["root"], base64.b64encode(checkpoint.root).decode()),
            ("position", position, merkle.entry_position(entry)),
            (
                "leaf_hash",
                document["leaf_hash"],
                base64.b64encode(merkle.leaf_hash(entry)).decode(),
            ),
        )
        if found != expected
    ]
    if disagreeing:
        raise IntegrityFailure(
            f"{where}: the proof's fields disagree with its entry and the checkpoint: "
            + "; ".join(disagreeing),
            hint="the file was changed after `lineage prove` printed it; ask for the original",
        )
    try:
        merkle.verify_inclusion(index, size, leaf, proof, root)
    except merkle.ProofFailed as exc:
        raise IntegrityFailure(f"{where}: the inclusion proof does not verify: {exc}") from None


def _base64(value: Any) -> bytes:
    """Canonical base64 only: another spelling of the same bytes is a changed file."""
    if not isinstance(value, str):
        raise TypeError(f"expected base64 text, found {type(value).__name__}")
    decoded = base64.b64decode(value, validate=True)
    if base64.b64encode(decoded).decode() != value:
        raise ValueError(f"expected canonical base64, found {value[:40]!r}")
    return decoded


def _integer(value: Any) -> int:
    if type(value) is not int or value < 0:
        raise TypeError(f"expected a whole number of at least 0, found {value!r}")
    return value


def write_new(path: Path, text: str, mode: int) -> None:
    """Create `path` with `mode` from the start (never a moment with wider permissions); refuse to
    replace."""
    import os

    try:
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    except FileExistsError:
        raise InvalidInput(
            f"{path} already exists; refusing to overwrite a key",
            hint="choose another name, or move the old key away first",
        ) from None
    except OSError as exc:
        raise InvalidInput(f"cannot create {path}: {exc.strerror}") from None
    with os.fdopen(descriptor, "w", encoding="ascii") as handle:
        handle.write(text)
