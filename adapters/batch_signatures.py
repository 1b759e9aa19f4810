"""Signed writes: a writer holding a key signs each batch it appends, in the batch's own transaction.

The row (`lineage_signatures`: first and last position, key name, key ID, signature) sits beside the chain
links. Anyone can append a correctly linked event (the chain is a checksum, not an authentication), but only a
holder of a trusted key can make it covered: `lineage verify --trusted-keys` recomputes each signed batch's
leaves from the events and reports every event no trusted signature covers.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..domain.signed_note import SignerKey, VerifierKey, batch_message
from . import ed25519
from .merkle_store import PAGE, leaf_of

SIGNATURES = "lineage_signatures"


def sqlite_ddl() -> list[str]:
    return [
        f"CREATE TABLE IF NOT EXISTS {SIGNATURES} (first_position INTEGER PRIMARY KEY, "
        "last_position INTEGER NOT NULL, key_name TEXT NOT NULL, key_id BLOB NOT NULL, "
        "signature BLOB NOT NULL)"
    ]


def postgres_ddl(schema: str) -> list[str]:
    return [
        f'CREATE TABLE IF NOT EXISTS "{schema}".{SIGNATURES} (first_position bigint PRIMARY KEY, '
        "last_position bigint NOT NULL, key_name text NOT NULL, key_id bytea NOT NULL, "
        "signature bytea NOT NULL)"
    ]


def signature_row(
    key: SignerKey, ids: Sequence[int], rows: Sequence[tuple[str, int, str, bytes]]
) -> tuple[int, int, str, bytes, bytes]:
    """The row to insert for a batch at `ids` whose (originator id hex, version, topic, state) are `rows`."""
    leaves = [leaf_of((position, *row)) for position, row in zip(ids, rows, strict=True)]
    message = batch_message(ids[0], ids[-1], leaves)
    return ids[0], ids[-1], key.name, key.verifier.key_id, ed25519.sign(key, message)


@dataclass
class SignatureReport:
    signed: int = 0
    #: (first position, last position, why) of every run of events no trusted signature covers.
    uncovered: list[tuple[int, int, str]] = field(default_factory=list)
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


def _signatures(recorder: Any) -> Iterator[tuple[int, int, str, bytes, bytes]]:
    postgres = hasattr(recorder, "chain_table")
    table = f'"{recorder.datastore.schema}".{SIGNATURES}' if postgres else SIGNATURES
    sql = (
        f"SELECT first_position, last_position, key_name, key_id, signature FROM {table} "
        "WHERE first_position > ? ORDER BY first_position LIMIT ?"
    )
    after = 0
    while True:
        with recorder.datastore.transaction(commit=False) as c:
            c.execute(sql.replace("?", "%s") if postgres else sql, (after, PAGE))
            rows = [tuple(r.values()) if isinstance(r, dict) else tuple(r) for r in c.fetchall()]
        yield from ((a, b, n, bytes(i), bytes(s)) for a, b, n, i, s in rows)
        if len(rows) < PAGE:
            return
        after = rows[-1][0]


def check_coverage(recorder: Any, trusted: Sequence[VerifierKey]) -> SignatureReport:
    """Every event of the log against the signed batches: which a trusted key covers, and why not the rest."""
    keys = {(k.name, k.key_id): k for k in trusted}
    report = SignatureReport()
    batches = _signatures(recorder)
    batch = next(batches, None)
    pending: list[tuple[int, bytes]] = []
    after = 0
    while rows := recorder.log_rows(after, None, PAGE):
        for row in rows:
            position = row[0]
            while (
                batch is not None and position > batch[1]
            ):  # the batch ended before its last event
                if pending:
                    _judge(batch, pending, keys, report)
                    pending = []
                batch = next(batches, None)
            if batch is None or position < batch[0]:
                report.add(position, position, "no signature")
                continue
            pending.append((position, leaf_of(row) if row[4] is not None else b""))
            if position == batch[1]:
                _judge(batch, pending, keys, report)
                pending, batch = [], next(batches, None)
        after = rows[-1][0]
    if pending and batch is not None:
        _judge(batch, pending, keys, report)
    return report


def _judge(
    batch: tuple[int, int, str, bytes, bytes],
    events: list[tuple[int, bytes]],
    keys: dict[tuple[str, bytes], VerifierKey],
    report: SignatureReport,
) -> None:
    first, last, name, key_id, signature = batch
    key = keys.get((name, key_id))
    if key is None:
        for position, _ in events:
            report.add(position, position, f"signed by {name} ({key_id.hex()}), not a trusted key")
        return
    message = batch_message(first, last, [leaf for _, leaf in events])
    if (
        events[0][0] != first
        or events[-1][0] != last
        or not ed25519.signature_valid(key, message, signature)
    ):
        for position, _ in events:
            report.add(
                position,
                position,
                f"the signature by {name} over positions {first}-{last} does not verify: an event of "
                "that batch was changed, removed or inserted",
            )
        return
    report.signed += len(events)
    report.signers.add(name)
