"""Checking a run bundle offline: no store, only the file, the reader's keys and the domain rules.
Checked in order from its bytes to the domain's decisions (`_verify`); the first failure is
reported with where.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

from ...domain import merkle
from ...domain.errors import IntegrityFailure, InvalidInput, LineageError
from ...domain.signed_note import (
    FORGED,
    NAMESAKE,
    TRUSTED,
    Checkpoint,
    Note,
    TrustedKeys,
    VerifierKey,
    batch_message,
    passing_for,
)
from .. import strict_json
from . import ed25519
from .bundles import FORMAT, belongs, canonical

#: The fields of the document, of each event and of each batch, exactly (`_need`) ...
TOP = {"format", "runs", "checkpoint", "checkpoint_keys", "origin", "events", "batches", "tars"}
EVENT = {"position", "leaf_index", "originator_id", "originator_version", "topic", "state", "proof"}
BATCH = {"first", "last", "signer", "signature", "leaves"}
#: ... and, from a store that authenticates writers (PostgreSQL), the role the batch's signature
#: covers.
ROLE = "recorded_by"


class BundleBroken(IntegrityFailure):
    """A bundle that does not verify: a changed byte, a proof or signature that fails, a refused
    fact."""


@dataclass
class BundleReport:
    checkpoint: Checkpoint
    checkpoint_note: str
    #: the `--key` keys whose checkpoint signatures verify
    trusted_signers: list[VerifierKey]
    events: list[dict[str, Any]]
    #: position -> the key its batch is signed by (`TrustedKeys.judge` says whose it is)
    signed_by: dict[int, VerifierKey] = field(default_factory=dict)
    #: the signers of `signed_by` that are `--key` keys
    trusted_batches: set[VerifierKey] = field(default_factory=set)
    tars: list[dict[str, Any]] = field(default_factory=list)
    runs: list[str] = field(default_factory=list)


def _fail(where: str, what: str) -> BundleBroken:
    return BundleBroken(
        f"{where}: {what}", hint="the bundle was changed after it was written; ask for it again"
    )


def _need(obj: Any, keys: set[str], where: str) -> dict[str, Any]:
    if not isinstance(obj, dict) or set(obj) != keys:
        found = sorted(obj) if isinstance(obj, dict) else type(obj).__name__
        raise _fail(where, f"expected the fields {sorted(keys)}, found {found}")
    return obj


def _hashes(values: Any, where: str) -> list[bytes]:
    if not isinstance(values, list):
        raise _fail(where, "expected a list of base64 values")
    try:
        decoded = [base64.b64decode(v, validate=True) for v in values]
    except (binascii.Error, TypeError, ValueError):
        raise _fail(where, "expected base64, found something else") from None
    # Base64's last character can carry bits the decoder drops: only the form we write is accepted,
    # so that a changed character cannot decode to the same bytes.
    for value, raw in zip(values, decoded, strict=True):
        if base64.b64encode(raw).decode() != value:
            raise _fail(where, f"{value[:60]!r} is not the canonical base64 of its bytes")
    return decoded


def parse(data: bytes, where: str) -> dict[str, Any]:
    try:
        document = strict_json.loads(data)
    except json.JSONDecodeError as exc:
        raise _fail(f"{where}, byte {exc.pos}", f"not JSON ({exc.msg})") from None
    except (ValueError, RecursionError) as exc:
        raise _fail(where, f"not a bundle ({exc})") from None
    if not isinstance(document, dict):
        raise _fail(where, "expected a JSON object")
    again = canonical(document)
    if again != data:
        offset = next(
            (i for i, (a, b) in enumerate(zip(again, data, strict=False)) if a != b),
            min(len(again), len(data)),
        )
        raise _fail(
            f"{where}, byte {offset}", "the file is not the canonical form it was written in"
        )
    _need(document, TOP, where)
    if document["format"] != FORMAT:
        raise _fail(where, f"expected format {FORMAT!r}, found {document['format']!r}")
    return document


def _checkpoint(document: dict[str, Any], trusted: TrustedKeys, where: str) -> BundleReport:
    note = Note.parse(str(document["checkpoint"]).encode(), f"{where}, checkpoint")
    checkpoint = Checkpoint.parse(note.text, f"{where}, checkpoint")
    embedded = TrustedKeys.of(VerifierKey.parse(k) for k in document["checkpoint_keys"])
    if len(embedded.keys) != len(note.signatures):
        raise _fail(
            where, f"{len(note.signatures)} checkpoint signatures but {len(embedded.keys)} keys"
        )
    if note.signatures:
        ed25519.verify_note(note, embedded, f"{where}, checkpoint")
        if any(not embedded.known(s.name, s.key_id) for s in note.signatures):
            raise _fail(f"{where}, checkpoint", "a signature by a key the bundle does not carry")
    signers: list[VerifierKey] = []
    if trusted:
        signers = ed25519.verify_note(note, trusted, f"{where}, checkpoint")
    return BundleReport(checkpoint, str(note), signers, [])


def _origin(document: dict[str, Any], cp: Checkpoint, where: str) -> None:
    origin = _need(document["origin"], {"leaf_hash", "proof"}, f"{where}, origin")
    (leaf,) = _hashes([origin["leaf_hash"]], f"{where}, origin")
    try:
        merkle.verify_inclusion(0, cp.size, leaf, _hashes(origin["proof"], where), cp.root)
    except merkle.ProofFailed as exc:
        raise _fail(f"{where}, origin", f"leaf 0 is not in the checkpoint: {exc}") from None
    if cp.origin != f"rollout-lineage/{leaf.hex()[:16]}":
        raise _fail(
            f"{where}, checkpoint", f"the origin {cp.origin!r} is not the log's first leaf's"
        )


def _exact(record: dict[str, Any], at: str, kind: type, *names: str) -> None:
    """Each named field is of exactly this JSON type (a bool is not a whole number here)."""
    for name in names:
        if type(record[name]) is not kind:
            raise _fail(
                at,
                f"expected {name} as {'a whole number' if kind is int else 'text'}, found "
                f"{type(record[name]).__name__} {record[name]!r}",
            )


def _events(document: dict[str, Any], report: BundleReport, where: str) -> None:
    cp, previous = report.checkpoint, (0, -1)
    if not isinstance(document["events"], list) or not document["events"]:
        raise _fail(where, "expected a list of events")
    for number, raw in enumerate(document["events"], 1):
        at = f"{where}, event {number}"
        event = _need(raw, EVENT, at)
        # Exactly the JSON types written: `true` or "1" would hash as 1 and pass, then be stored as
        # given.
        _exact(event, at, int, "position", "leaf_index", "originator_version")
        _exact(event, at, str, "originator_id", "topic", "state")
        try:
            # a readable id; the entry keeps the text exactly as given
            UUID(hex=event["originator_id"])
            entry = merkle.event_entry(
                event["position"],
                event["originator_id"],
                event["originator_version"],
                event["topic"],
                event["state"].encode("utf-8"),
            )
        except (TypeError, ValueError) as exc:
            raise _fail(at, f"a field of the wrong shape ({exc})") from None
        at = f"{where}, event {number} (position {event['position']})"
        if (event["position"], event["leaf_index"]) <= previous or event["leaf_index"] <= previous[
            1
        ]:
            raise _fail(at, "events out of log order")
        previous = (event["position"], event["leaf_index"])
        event["leaf"] = merkle.leaf_hash(entry)
        try:
            merkle.verify_inclusion(
                event["leaf_index"], cp.size, event["leaf"], _hashes(event["proof"], at), cp.root
            )
        except merkle.ProofFailed as exc:
            raise _fail(at, f"the event is not the one the checkpoint holds there: {exc}") from None
        report.events.append(event)


def _batches(
    document: dict[str, Any], report: BundleReport, trusted: TrustedKeys, where: str
) -> None:
    """Every batch signature verifies with the key the batch carries; a batch whose key passes for
    one of your keys (its name, or its name and key ID, and other bytes) is refused, as `verify
    --trusted-keys` refuses it in the store."""
    by_position = {e["position"]: e for e in report.events}
    for number, raw in enumerate(document["batches"], 1):
        at = f"{where}, batch {number}"
        batch = _need(raw, BATCH | {ROLE} if isinstance(raw, dict) and ROLE in raw else BATCH, at)
        _exact(batch, at, int, "first", "last")
        if ROLE in batch:
            _exact(batch, at, str, ROLE)
        first, last = batch["first"], batch["last"]
        leaves = _hashes(batch["leaves"], at)
        key = VerifierKey.parse(str(batch["signer"]))
        (signature,) = _hashes([batch["signature"]], at)
        if len(leaves) != last - first + 1:
            raise _fail(at, f"{len(leaves)} leaves for positions {first}-{last}")
        message = batch_message(first, last, leaves, batch.get(ROLE))
        if not ed25519.signature_valid(key, message, signature):
            raise _fail(
                at, f"the signature by {key.label} over positions {first}-{last} does not verify"
            )
        verdict, yours = trusted.judge(key)
        if verdict in (FORGED, NAMESAKE):
            raise BundleBroken(
                f"{at}: positions {first}-{last} are signed by {key.label}, not by your key: "
                f"{passing_for(key, verdict, yours)}",
                hint="a signer is its key, not its name: `lineage verify --trusted-keys` on the "
                "store names the same events",
            )
        for position in range(first, last + 1):
            event = by_position.get(position)
            if event is not None:
                if event["leaf"] != leaves[position - first]:
                    raise _fail(at, f"position {position}: the event is not the one signed")
                report.signed_by[position] = key
        if verdict == TRUSTED:
            report.trusted_batches.add(key)


def _runs_and_tars(document: dict[str, Any], report: BundleReport, where: str) -> None:
    runs, refs, exported = set(document["runs"]), set[str](), []
    for event in report.events:
        event["fact"] = json.loads(event["state"])["fact"]
        if not belongs(event["fact"], runs, refs):
            raise _fail(f"{where}, position {event['position']}", "an event of none of the runs")
        if event["fact"].get("type") == "snapshot.exported":
            exported.append((event["fact"]["ref"], event["fact"]["sha256"]))
    named = {e["fact"].get("run") for e in report.events} - {None}
    if named != runs or sorted(runs) != document["runs"]:
        raise _fail(where, f"the runs listed {document['runs']} are not the runs of the events")
    tars = document["tars"]
    if [(t.get("ref"), t.get("sha256")) for t in tars] != exported:
        raise _fail(f"{where}, tars", "the tar digests are not the ones the events record")
    for tar in tars:
        if set(tar) - {"ref", "sha256", "data"}:
            raise _fail(f"{where}, tars", f"unexpected fields {sorted(set(tar))}")
        if "data" in tar:
            carried = _hashes([tar["data"]], f"{where}, tar of {tar['ref']}")[0]
            found = hashlib.sha256(carried).hexdigest()
            if tar["sha256"].removeprefix("sha256:") != found:
                raise _fail(f"{where}, tar of {tar['ref']}", f"its bytes hash to sha256:{found}")
    report.tars, report.runs = tars, sorted(runs)


def replay(report: BundleReport, where: str) -> None:
    """Decide every event again, in log order, in an empty in-memory store: the domain rules must
    agree."""
    from ...domain.application import LineageApp

    app = LineageApp(env={"PERSISTENCE_MODULE": "eventsourcing.popo"}, actor="bundle-replay")
    for entry in entries(report, app):
        try:
            app.record([entry], verified_here=True)
        except LineageError as exc:
            raise _fail(
                f"{where}, {entry.fact.type} for {entry.fact.subject_key()!r}", str(exc)
            ) from None
    app.close()


def entries(report: BundleReport, app: Any) -> list[Any]:
    """The bundle's events as facts with the time each happened, decoded as the store decodes
    them."""
    from eventsourcing.persistence import StoredEvent

    from ...domain.application import Entry

    decoded = []
    for event in report.events:
        stored = StoredEvent(
            originator_id=UUID(hex=event["originator_id"]),
            originator_version=event["originator_version"],
            topic=event["topic"],
            state=event["state"].encode("utf-8"),
        )
        try:
            domain_event = app.mapper.to_domain_event(stored)
        except (KeyError, ValueError) as exc:
            raise _fail(
                f"position {event['position']}", f"not an event this tool reads ({exc})"
            ) from None
        decoded.append(Entry(domain_event.fact, domain_event.occurred_at))
    return decoded


def verify_bundle(
    data: bytes, trusted: TrustedKeys | list[VerifierKey], where: str
) -> BundleReport:
    try:
        return _verify(data, TrustedKeys.of(trusted), where)
    except IntegrityFailure:
        raise
    except (
        InvalidInput
    ) as exc:  # a key or note garbled inside the bundle: the bundle is what is wrong
        raise _fail(where, exc.message) from None
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise _fail(where, f"a field of the wrong shape ({type(exc).__name__}: {exc})") from None


def _verify(data: bytes, trusted: TrustedKeys, where: str) -> BundleReport:
    """In order: the bytes are the canonical form of the document (a changed space or escape is
    found at its byte) with exactly the fields of the format; every checkpoint signature verifies
    with the key embedded beside it and, with `trusted` keys (`--key`), one of them signed it; the
    origin line is leaf 0's; every event hashes to a leaf proven in the checkpoint; every signed
    batch's signature covers the leaves of its events, and none is by a key that passes for a
    `trusted` one (`TrustedKeys.judge`); the runs and tar digests are what the
    events say; and the events, replayed in log order into an empty in-memory store, pass the same
    decisions a live writer's facts do."""
    document = parse(data, where)
    report = _checkpoint(document, trusted, where)
    _origin(document, report.checkpoint, where)
    _events(document, report, where)
    _batches(document, report, trusted, where)
    _runs_and_tars(document, report, where)
    replay(report, where)
    return report
