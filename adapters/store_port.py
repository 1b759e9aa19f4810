"""The store port of the evidence code: what the Merkle tree, batch evidence and bundles need of a
recorder, whose tables they keep beside the log in the store's own database and transactions. Each
SQL recorder declares it once; the evidence code writes each statement once.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol, runtime_checkable

from ..domain.errors import InvalidInput
from .chained_log import ChainedLog


class BatchWriter(Protocol):
    """What a recorder writes beside each batch's chain links, in the batch's own transaction
    (`evidence/batch_evidence.py`'s `BatchEvidence`). A port, so the stores and this port import
    nothing of the evidence code that uses them."""

    def write(
        self,
        cursor: Any,
        ids: Sequence[int],
        rows: Sequence[Any],
        store: EvidenceTables,
        recorded_by: str | None = None,
    ) -> None:
        """Insert the batch's evidence with the cursor of its transaction."""


@runtime_checkable
class EvidenceTables(ChainedLog, Protocol):
    """The log (`ChainedLog`) and the evidence tables kept beside it (`lineage_merkle_*`,
    `lineage_signatures`, `lineage_provenance`), in one SQL database.

    More than the `ChainedLog` readers use: how one of those tables is named in this store, a
    transaction, and statements that run on the store's driver, rows coming back as plain tuples.
    Each SQL recorder declares it by subclassing (`event_store.ChainedSQLiteRecorder`,
    `postgres_store.ChainedPostgresRecorder`); `tests/cli/test_evidence_tables_contract.py` holds
    both to the same cases.

    Statements given to `fetch` and `read` are the evidence code's own, written with `?` for each
    parameter and no `?` or `%` of their own; values are always bound, never pasted."""

    #: What each appended batch carries beside its chain links (`batch_evidence.BatchEvidence`),
    #: when set: the recorder writes it in the batch's own transaction.
    batch_evidence: BatchWriter | None

    def table(self, name: str) -> str:
        """`name` (one of our tables) as a statement in this store names it: schema-qualified on
        PostgreSQL."""

    def transaction(self, *, commit: bool) -> AbstractContextManager[Any]:
        """A transaction on the store's database, giving the cursor `fetch` and `insert` take; an
        exception inside it rolls it back whole."""

    def fetch(self, cursor: Any, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """The rows of a query, as tuples in the order selected, in the transaction of `cursor`."""

    def read(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """The rows of one query in a read of its own (SQLite: the recorder's plain read-only
        connection, whose rows are tuples already: no row objects for a page of a million
        leaves)."""

    def insert(
        self,
        cursor: Any,
        table: str,
        rows: Sequence[tuple[Any, ...]],
        *,
        keep_existing: bool = False,
    ) -> None:
        """Insert `rows` into our `table` (its plain name) in the transaction of `cursor`. With
        `keep_existing` a row whose key is stored already is left as stored (two readers catching up
        write the same rows); without it, such a row fails the transaction."""


def evidence_tables(recorder: object) -> EvidenceTables:
    """The recorder as the evidence code uses it; refused, saying why, when it keeps no evidence
    tables (the in-memory log keeps none)."""
    if not isinstance(recorder, EvidenceTables):
        raise InvalidInput(
            f"expected a SQLite or PostgreSQL store, found "
            f"{type(recorder).__name__}: the in-memory "
            "log keeps no Merkle tree, signatures or provenance",
            hint="open a store by URL (sqlite:///PATH or postgresql://...)",
        )
    return recorder
