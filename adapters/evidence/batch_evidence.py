"""What a writer attaches to each batch it appends, in the batch's own transaction: a signature, and
where imported events came from. Anyone can append a correctly linked event (the chain is a
checksum, not an authentication); only a holder of a trusted key can make it covered.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from ...domain.errors import IntegrityFailure, InvalidInput
from ...domain.signed_note import (
    FORGED,
    NAMESAKE,
    STRANGER,
    SignerKey,
    TrustedKeys,
    VerifierKey,
    batch_message,
    passing_for,
)
from ..store_port import EvidenceTables, evidence_tables
from . import ed25519
from .merkle_store import PAGE, PAGE_BYTES, leaf_of

#: One row per signed batch (first and last position, the signer's verifier key, signature),
#: beside the chain links. The key is kept so a bundle can carry it, never trusted for what it is:
#: `lineage verify --trusted-keys` recomputes each signed batch's leaves from the events and
#: reports every event no trusted signature covers.
SIGNATURES = "lineage_signatures"
#: One row per event appended by `lineage import --bundle`: the origin of the log it came from, its
#: position there, that log's checkpoint, and its stored form and inclusion proof there, so a
#: merged store can still prove each imported fact against the checkpoint it was handed with.
PROVENANCE = "lineage_provenance"
# (originator id hex, version, topic, state) as the recorders insert them
Row = tuple[str, int, str, bytes]


def sqlite_ddl() -> list[str]:
    return [
        f"CREATE TABLE IF NOT EXISTS {SIGNATURES} (first_position INTEGER PRIMARY KEY, "
        "last_position INTEGER NOT NULL, signer TEXT NOT NULL, signature BLOB NOT NULL)",
        f"CREATE TABLE IF NOT EXISTS {PROVENANCE} (position "
        f"INTEGER PRIMARY KEY, origin TEXT NOT NULL, "
        "source_position INTEGER NOT NULL, source_leaf_index INTEGER NOT NULL, "
        "checkpoint TEXT NOT NULL, source_entry BLOB NOT NULL, proof TEXT NOT NULL)",
    ]


def postgres_ddl(schema: str) -> list[str]:
    return [
        f'CREATE TABLE IF NOT EXISTS "{schema}".{SIGNATURES} (first_position bigint PRIMARY KEY, '
        "last_position bigint NOT NULL, signer text NOT NULL, signature bytea NOT NULL)",
        f'CREATE TABLE IF NOT EXISTS "{schema}".{PROVENANCE} (position bigint PRIMARY KEY, '
        "origin text NOT NULL, source_position bigint NOT NULL, source_leaf_index bigint NOT NULL, "
        "checkpoint text NOT NULL, source_entry bytea NOT NULL, proof text NOT NULL)",
    ]


@dataclass
class BatchEvidence:
    """Set on a recorder by the composition root (a signing key) or by a bundle import
    (provenance)."""

    signer: SignerKey | None = None
    #: (new positions, rows) -> provenance rows (position, origin, source position, source leaf
    #: index, checkpoint, source entry, proof JSON) for the events of the batch that came from a
    #: bundle.
    provenance: Callable[[Sequence[int], Sequence[Row]], list[tuple[Any, ...]]] | None = None

    def write(
        self,
        cursor: Any,
        ids: Sequence[int],
        rows: Sequence[Row],
        store: EvidenceTables,
        recorded_by: str | None = None,
    ) -> None:
        """Insert this batch's evidence into `store` with the cursor of its transaction
        (recorded_by: the role the store authenticated, hashed into the batch's links, or None)."""
        if self.signer is not None:
            _refuse_signed_past(store, cursor, ids[0])
            store.insert(cursor, SIGNATURES, [signature_row(self.signer, ids, rows, recorded_by)])
        if self.provenance is not None:
            store.insert(cursor, PROVENANCE, self.provenance(ids, rows))


def _refuse_signed_past(store: EvidenceTables, cursor: Any, first: int) -> None:
    """A signed batch at or past the new batch's first position names events that were removed
    (signatures are written with their events): appending there would reuse their positions. Said
    plainly, where the insert's duplicate key would read as a lost race and be retried."""
    last = store.fetch(
        cursor,
        f"SELECT first_position, last_position FROM {store.table(SIGNATURES)} "
        "ORDER BY first_position DESC LIMIT 1",
    )
    found = last[0] if last else None
    if found is not None and found[1] >= first:
        raise IntegrityFailure(
            f"refusing to append at position {first}: a signed batch covers positions "
            f"{found[0]}-{found[1]}, which the log no longer holds (its tail was removed)",
            hint="run `lineage verify --trusted-keys FILE`, which names the removed "
            "events; restore the store from a backup; nothing of this batch was appended",
        )


def signature_row(
    key: SignerKey, ids: Sequence[int], rows: Sequence[Row], recorded_by: str | None = None
) -> tuple[int, int, str, bytes]:
    """The row to insert for a batch at `ids` whose (originator id hex, version, topic, state) are
    `rows`."""
    leaves = [leaf_of((position, *row)) for position, row in zip(ids, rows, strict=True)]
    message = batch_message(ids[0], ids[-1], leaves, recorded_by)
    return ids[0], ids[-1], str(key.verifier), ed25519.sign(key, message)


@dataclass
class SignatureReport:
    signed: int = 0
    #: (first position, last position, why) of every run of events no trusted signature covers.
    uncovered: list[tuple[int, int, str]] = field(default_factory=list)
    #: the trusted keys that covered events, by label (`NAME+KEYID`)
    signers: set[str] = field(default_factory=set)

    def add(self, first: int, last: int, why: str) -> None:
        previous = self.uncovered[-1] if self.uncovered else None
        if previous and previous[2] == why and previous[1] + 1 >= first:
            self.uncovered[-1] = (previous[0], last, why)
        else:
            self.uncovered.append((first, last, why))

    def describe(self) -> str:
        return "; ".join(
            f"position{'s' if a != b else ''} {a}{f'-{b}' if a != b else ''}: {why}"
            for a, b, why in self.uncovered[:20]
        ) + (f"; and {len(self.uncovered) - 20} more runs" if len(self.uncovered) > 20 else "")


def signatures(recorder: object, after: int = 0) -> Iterator[tuple[int, int, str, bytes]]:
    """(first position, last position, signer's verifier key, signature) of each signed batch, in
    order."""
    store = evidence_tables(recorder)
    sql = (
        f"SELECT first_position, last_position, signer, signature FROM {store.table(SIGNATURES)} "
        "WHERE first_position > ? ORDER BY first_position LIMIT ?"
    )
    while True:
        with store.transaction(commit=False) as c:
            rows = store.fetch(c, sql, (after, PAGE))
        yield from ((a, b, signer, bytes(sig)) for a, b, signer, sig in rows)
        if len(rows) < PAGE:
            return
        after = rows[-1][0]


def check_coverage(
    recorder: object, trusted: TrustedKeys | Sequence[VerifierKey]
) -> SignatureReport:
    """Every event of the log against the signed batches: which a trusted key covers, and why not
    the rest."""
    store = evidence_tables(recorder)
    keys = TrustedKeys.of(trusted)
    report = SignatureReport()
    batches = signatures(store)
    batch = next(batches, None)
    pending: list[tuple[int, bytes, str | None]] = []
    after = 0
    while rows := store.log_rows(after, None, PAGE, PAGE_BYTES):
        for row in rows:
            position = row[0]
            # the batch ended before its last event
            while batch is not None and position > batch[1]:
                if pending:
                    _judge(batch, pending, keys, report)
                    pending = []
                batch = next(batches, None)
            if batch is None or position < batch[0]:
                report.add(position, position, "no signature")
                continue
            pending.append((position, leaf_of(row) if row[4] is not None else b"", row[5]))
            if position == batch[1]:
                _judge(batch, pending, keys, report)
                pending, batch = [], next(batches, None)
        after = rows[-1][0]
    if pending and batch is not None:
        _judge(batch, pending, keys, report)
        batch = next(batches, None)
    # A signed batch is written in its events' transaction, so one that starts past the log's last
    # event (read now, after every batch: a batch appended meanwhile has its events) names events
    # that were there and are gone: a truncated tail whose chain and tree were made consistent
    # again.
    leftover = [] if batch is None else [batch, *batches]
    end = store.max_notification_id() or 0
    for first, last, signer, _ in (b for b in leftover if b[0] > end):
        report.add(
            first,
            last,
            f"a signature by {_label(signer)} covers positions {first}-{last}, but the log "
            "holds no event there: events were removed",
        )
    return report


def _label(signer: str) -> str:
    """A stored signer's `NAME+KEYID` (as stored: the row is anyone's to edit)."""
    return "+".join(signer.split("+")[:2])


def _judge(
    batch: tuple[int, int, str, bytes],
    events: list[tuple[int, bytes, str | None]],
    keys: TrustedKeys,
    report: SignatureReport,
) -> None:
    first, last, signer, signature = batch
    try:
        stored_key: VerifierKey | None = VerifierKey.parse(signer)
    except InvalidInput:
        stored_key = None
    verdict, key = keys.judge(stored_key) if stored_key else (STRANGER, None)
    if key is None or verdict == NAMESAKE:  # not a trusted key, nor one passing for one
        why = f"signed by {_label(signer)}, not a trusted key"
        if stored_key is not None and verdict == NAMESAKE:
            why += f" ({passing_for(stored_key, verdict, key)})"
        for position, _, _ in events:
            report.add(position, position, why)
        return
    roles = {role for _, _, role in events}  # one batch, one transaction, one role
    message = batch_message(first, last, [leaf for _, leaf, _ in events], roles.pop())
    if (
        events[0][0] != first
        or events[-1][0] != last
        or roles  # a second role within one batch
        or not ed25519.signature_valid(key, message, signature)  # the trusted key's own bytes
    ):
        for position, _, _ in events:
            report.add(
                position,
                position,
                f"the signature by {key.label} over positions "
                f"{first}-{last} does not verify: an event "
                "of that batch, or the role that recorded it, was changed, removed or inserted"
                + (
                    f", or {passing_for(stored_key, verdict, key)}"
                    if stored_key is not None and verdict == FORGED
                    else ""
                ),
            )
        return
    report.signed += len(events)
    report.signers.add(key.label)
