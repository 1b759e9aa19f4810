"""Appending a verified bundle to another store, keeping where each fact came from, so a merged
store can still prove each imported fact against the checkpoint it was handed with
(`lineage bundle sources` re-checks them).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Sequence
from typing import Any

from ...domain import merkle
from ...domain.errors import ClaimRefused, IntegrityFailure, InvalidInput
from ...domain.signed_note import Checkpoint, Note
from ..store_port import EvidenceTables, evidence_tables
from .batch_evidence import PROVENANCE, BatchEvidence, Row
from .bundle_check import BundleReport, entries
from .merkle_store import PAGE


def _key(fact: dict[str, Any]) -> str:
    return json.dumps(fact, sort_keys=True)


def import_bundle(app: Any, report: BundleReport) -> Any:
    """Record the bundle's facts as one batch, whole or nothing.

    They go through the same decisions as any writer's (`LineageApp.record`), so a fact the store
    already holds appends nothing, importing the same bundle twice appends nothing the second
    time, and a contradiction is refused with both values. Facts that assert a verification this
    tool performs (`snapshot.imported`, ...) are taken only from a bundle whose checkpoint a key
    the reader trusts signed. Each event appended gets a `lineage_provenance` row in the same
    transaction (`_provenance_row`: the origin and position it had, the checkpoint of that log,
    and its stored form and inclusion proof there)."""
    batch = entries(report, app)
    claims = [entry.fact for entry in batch if entry.fact.verified_here]
    if claims and not report.trusted_signers:
        raise ClaimRefused(
            f"the bundle holds {len(claims)} facts that assert a verification "
            f"(first: {claims[0].type} for {claims[0].subject_key()!r}), but "
            f"its checkpoint is not signed by a key you trust "
            "(nothing was imported)",
            hint="pass --key with the verifier key of whoever signed the bundle's checkpoint",
        )
    sources = {
        _key(json.loads(entry.fact.model_dump_json())): event
        for entry, event in zip(batch, report.events, strict=True)
    }

    def provenance(ids: Sequence[int], rows: Sequence[Row]) -> list[tuple[Any, ...]]:
        found = []
        for position, (_, _, _, state) in zip(ids, rows, strict=True):
            source = sources.get(_key(json.loads(state)["fact"]))
            if source is not None:
                found.append(_provenance_row(position, source, report))
        return found

    recorder = evidence_tables(app.recorder)
    before = recorder.batch_evidence
    signer = before.signer if isinstance(before, BatchEvidence) else None
    recorder.batch_evidence = BatchEvidence(signer=signer, provenance=provenance)
    try:
        return app.record(batch, verified_here=bool(report.trusted_signers))
    finally:
        recorder.batch_evidence = before


def _provenance_row(position: int, source: dict[str, Any], report: BundleReport) -> tuple[Any, ...]:
    entry = merkle.event_entry(
        source["position"],
        source["originator_id"],
        source["originator_version"],
        source["topic"],
        source["state"].encode("utf-8"),
    )
    return (
        position,
        report.checkpoint.origin,
        source["position"],
        source["leaf_index"],
        report.checkpoint_note,
        entry,
        json.dumps(source["proof"]),
    )


def sources(recorder: object, trusted: Sequence[Any] = ()) -> list[dict[str, Any]]:
    """Every imported event with where it came from, each proof checked again against its
    checkpoint.

    The provenance table sits outside the chain: whoever may write to it can put there a checkpoint
    and a proof of a log of their own making. So every field shown is checked against the source
    entry and the checkpoint (origin, source position), and the checkpoint's signature against
    `trusted` keys (`VerifierKey`s), or the row says it was not checked."""
    store = evidence_tables(recorder)
    sql = f"SELECT * FROM {store.table(PROVENANCE)} WHERE position > ? ORDER BY position LIMIT ?"
    found: list[dict[str, Any]] = []
    after = 0
    while True:
        with store.transaction(commit=False) as c:
            rows = store.fetch(c, sql, (after, PAGE))
        found.extend(_checked(row, _fact_here(store, row[0]), trusted) for row in rows)
        if len(rows) < PAGE:
            return found
        after = rows[-1][0]


def _fact_here(store: EvidenceTables, position: int) -> dict[str, Any] | None:
    rows = store.log_rows(position - 1, position, 1)
    if not rows or rows[0][0] != position or rows[0][4] is None:
        return None
    fact: dict[str, Any] = json.loads(rows[0][4])["fact"]
    return fact


def _source_fact(entry: bytes) -> dict[str, Any]:
    """The fact inside a source entry (the header's five lines, then the stored state)."""
    fact: dict[str, Any] = json.loads(entry.split(b"\n", 5)[5])["fact"]
    return fact


def _checked(
    row: tuple[Any, ...], here: dict[str, Any] | None, trusted: Sequence[Any]
) -> dict[str, Any]:
    """The row as `bundle sources` shows it; a value of the wrong kind (the table is anyone's to
    edit) is a row that does not prove, never a traceback."""
    try:
        return _judged(row, here, trusted)
    except (InvalidInput, ValueError, TypeError, IndexError, KeyError, AttributeError) as exc:
        return _row(row, None, f"NO: the provenance row was edited ({exc})", "not checked")


def _judged(
    row: tuple[Any, ...], here: dict[str, Any] | None, trusted: Sequence[Any]
) -> dict[str, Any]:
    position, origin, source_position, index, note_text, entry, proof = row
    note = Note.parse(note_text.encode(), "provenance")
    checkpoint = Checkpoint.parse(note.text, "provenance")
    signature = _signature(note, trusted, position)
    if signature.startswith("NO:"):
        return _row(row, checkpoint, signature, signature)
    if here is None or _key(here) != _key(_source_fact(bytes(entry))):
        return _row(
            row, checkpoint, "NO: the event here is not the fact of the source event", signature
        )
    if origin != checkpoint.origin:
        return _row(
            row,
            checkpoint,
            f"NO: the origin is {origin}, its checkpoint's {checkpoint.origin}",
            signature,
        )
    if source_position != merkle.entry_position(bytes(entry)):
        return _row(
            row,
            checkpoint,
            f"NO: the source position is {source_position}, the source entry's "
            f"{merkle.entry_position(bytes(entry))}",
            signature,
        )
    try:
        merkle.verify_inclusion(
            index,
            checkpoint.size,
            merkle.leaf_hash(bytes(entry)),
            [base64.b64decode(h) for h in json.loads(proof)],
            checkpoint.root,
        )
        proven = "yes"
    except merkle.ProofFailed as exc:
        proven = f"NO: {exc}"
    return _row(row, checkpoint, proven, signature)


def _signature(note: Note, trusted: Sequence[Any], position: int) -> str:
    """Who signed the source checkpoint, among the trusted keys; without keys, said to be
    unchecked."""
    from . import ed25519

    if not trusted:
        return "not checked (no --key): the checkpoint may be anyone's"
    try:
        verified = ed25519.verify_note(note, trusted, "the checkpoint")
        return "signed by " + ", ".join(key.label for key in verified)
    except IntegrityFailure as exc:
        return f"NO: position {position}: {exc}"


def _row(
    row: tuple[Any, ...], checkpoint: Checkpoint | None, proven: str, signature: str
) -> dict[str, Any]:
    position, origin, source_position = row[:3]
    return {
        "position": position,
        "origin": origin,
        "source_position": source_position,
        "checkpoint_size": checkpoint.size if checkpoint else None,
        "checkpoint_root": base64.b64encode(checkpoint.root).decode() if checkpoint else None,
        "checkpoint_signature": signature,
        "proven": proven,
    }


def require_proven(rows: list[dict[str, Any]]) -> None:
    bad = [row for row in rows if row["proven"] != "yes"]
    if bad:
        raise IntegrityFailure(
            f"{len(bad)} imported events no longer prove against their source checkpoint; first at "
            f"position {bad[0]['position']}: {bad[0]['proven']}"
        )
