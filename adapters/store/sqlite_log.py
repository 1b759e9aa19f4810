"""The SQLite store as readers see it (`ChainedLog`), over a plain read-only connection.

Read commands (`lineage sql`, `tables`, `tree`, ...) only need the log's rows and chain to catch the
read models up, never the write side: opening this instead of the application spares a fresh process
the import of eventsourcing, the PostgreSQL driver and the fact models (most of its start-up), and
can never write to the file. The tables are eventsourcing's `stored_events` and our `lineage_chain`,
as `event_store` creates them.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from uuid import UUID

from ...domain.errors import StoreUnavailable
from ...domain.integrity import ChainRow
from ..chained_log import chain_stop, merge_chain, until, up_to, up_to_bytes
from .store_url import may_write

EVENTS_TABLE = "stored_events"
CHAIN_TABLE = "lineage_chain"
PAGE = 5000


def file_identity(path: str | Path) -> tuple[int, int] | None:
    """The file at `path` as (device, inode); None where there is none."""
    try:
        found = os.stat(path)
    except OSError:
        return None
    return found.st_dev, found.st_ino


def read_only_uri(path: Path) -> str:
    """The URI a reader opens `path` with. A WAL-mode file can be opened read-only only with its
    `-shm` beside it, or with leave to create one; in a folder no one may write (a read-only mount
    or copy) whose last writer left no `-wal` to replay, the file holds the whole log, and SQLite is
    told it cannot change (`immutable`)."""
    uri = path.resolve().as_uri() + "?mode=ro"
    shm, wal = (path.with_name(path.name + suffix) for suffix in ("-shm", "-wal"))
    unwritten = not wal.exists() or wal.stat().st_size == 0
    if not shm.exists() and unwritten and not may_write(shm):
        uri += "&immutable=1"
    return uri


class SQLiteLog:
    """`ChainedLog` over the SQLite file at `path`, opened read-only on first use.

    It reads the file that is at `path` now: the connection notes the file it opened (device and
    inode, as the writer's do: `sqlite_connections`), and each read first compares it with the file
    at the path. A file replaced under a long-lived reader (a backup restored under `lineage
    serve`) is then read at the next query, not the old, unlinked one for as long as the process
    lives; whoever remembers a head from before (the server's chain walk, the read models'
    tracking row) finds out whether the log still holds it.

    It reads the evidence tables too (the read side of `store_port.EvidenceTables`: the Merkle tree
    as stored, for `Lineage.verify(extend_tree=False)`), and refuses every write."""

    #: Never set: nothing is appended through a reader.
    batch_evidence = None

    def __init__(self, path: Path) -> None:
        self.path = path
        self._connection: sqlite3.Connection | None = None
        self._opened: tuple[int, int] | None = None

    def _connect(self) -> sqlite3.Connection:
        return sqlite3.connect(read_only_uri(self.path), uri=True, check_same_thread=False)

    def _current_connection(self) -> sqlite3.Connection:
        """The connection, opened again when the file at the path is no longer the one it opened
        (the old one is dropped, not closed: another thread may be reading on it). With no file
        there, opening fails: nothing is read from the one that was removed."""
        found = file_identity(self.path)
        if self._connection is None or found != self._opened:
            self._connection = self._connect()
            self._opened = found
        return self._connection

    def _query(
        self, sql: str, parameters: Sequence[Any] = (), max_bytes: int | None = None
    ) -> list[Any]:
        """All rows, or with `max_bytes` the log rows up to that much state (`up_to_bytes`)."""
        with self._reading():
            cursor = self._current_connection().execute(sql, tuple(parameters))
            try:
                return up_to_bytes(cursor, max_bytes)
            finally:
                cursor.close()

    @contextmanager
    def _reading(self) -> Iterator[None]:
        try:
            yield
        except sqlite3.Error as exc:
            raise StoreUnavailable(
                f"could not read the event store {self.path}: "
                f"expected a lineage SQLite store, found {exc}",
                hint="check the path and that this file is a lineage store (`lineage verify`)",
            ) from None

    # --- EvidenceTables, read side: the tables as stored; a write is refused ---------------------

    def table(self, name: str) -> str:
        return name

    def holds_table(self, name: str) -> bool:
        """Whether the file has this table (a store written before the Merkle tree has none)."""
        return bool(
            self._query("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (name,))
        )

    @contextmanager
    def transaction(self, *, commit: bool) -> Iterator[sqlite3.Cursor]:
        """A read on a connection of its own, in one transaction (one snapshot of the file)."""
        if commit:
            _refuse_to_write(self.path)
        with self._reading():
            connection = self._connect()
            try:
                cursor = connection.cursor()
                cursor.execute("BEGIN")
                yield cursor
            finally:
                connection.close()

    def fetch(self, cursor: Any, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        with self._reading():
            cursor.execute(sql, tuple(params))
            return [tuple(row) for row in cursor.fetchall()]

    def read(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        return self._query(sql, params)

    def insert(
        self,
        cursor: Any,
        table: str,
        rows: Sequence[tuple[Any, ...]],
        *,
        keep_existing: bool = False,
    ) -> None:
        _refuse_to_write(self.path)

    def max_notification_id(self) -> int | None:
        return self._query(f"SELECT max(rowid) FROM {EVENTS_TABLE}")[0][0]

    def log_rows(
        self, after: int, stop: int | None, limit: int, max_bytes: int | None = None
    ) -> list[tuple[Any, ...]]:
        """(position, originator id hex, version, topic, state bytes, recorded_by): state that is
        not a BLOB was put there by hand, so it reads as NULL and the chain check names it; a SQLite
        file authenticates nobody, so recorded_by is NULL."""
        return self._query(
            "SELECT rowid, originator_id, originator_version, topic, "
            f"CASE typeof(state) WHEN 'blob' THEN state END, NULL FROM {EVENTS_TABLE} "
            f"WHERE rowid > ?{up_to(stop)} ORDER BY rowid LIMIT ?",
            (after, *until(stop), limit),
            max_bytes,
        )

    def chain_links(self, after: int, stop: int | None) -> list[tuple[int, int, str]]:
        return self._query(
            f"SELECT position, previous, chain_hash FROM {CHAIN_TABLE} "
            f"WHERE position > ?{up_to(stop, 'position')} ORDER BY position",
            (after, *until(stop)),
        )

    def existing_originators(self, ids: set[UUID]) -> set[UUID]:
        """Which of these streams have a first event (the port's question, asked read-only)."""
        found: set[UUID] = set()
        hexes = [i.hex for i in ids]
        for start in range(0, len(hexes), 500):
            chunk = hexes[start : start + 500]
            rows = self._query(
                f"SELECT DISTINCT originator_id FROM {EVENTS_TABLE} WHERE originator_version = 1 "
                f"AND originator_id IN ({','.join('?' * len(chunk))})",
                tuple(chunk),
            )
            found.update(UUID(str(row[0])) for row in rows)
        return found

    def chain_hash_at(self, position: int) -> str | None:
        found = self._query(f"SELECT chain_hash FROM {CHAIN_TABLE} WHERE position = ?", (position,))
        return found[0][0] if found else None

    def _paged(self, sql: str, stop: int) -> Iterator[tuple[Any, ...]]:
        # From below every position: a row someone inserted at a position <= 0 must reach the chain
        # walk too (eventsourcing's aggregate reads would see it; `verify` names it as an event with
        # no link).
        after: float | int = float("-inf")
        while rows := self._query(sql, (after, stop, PAGE)):
            yield from rows
            after = rows[-1][0]

    def chain_rows(self) -> Iterator[ChainRow]:
        """Every event and link up to the last position either held when the walk began
        (`chain_stop`): a writer appending meanwhile adds nothing to one side only."""
        [(stop,)] = self._query(chain_stop(EVENTS_TABLE, CHAIN_TABLE))
        if stop is None:
            return iter(())
        events = self._paged(
            "SELECT rowid, originator_id, originator_version, topic, state "
            f"FROM {EVENTS_TABLE} WHERE rowid > ? AND rowid <= ? ORDER BY rowid LIMIT ?",
            stop,
        )
        links = self._paged(
            f"SELECT position, previous, chain_hash FROM {CHAIN_TABLE} "
            "WHERE position > ? AND position <= ? ORDER BY position LIMIT ?",
            stop,
        )
        return merge_chain(events, links)

    def close(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None
            self._opened = None


def _refuse_to_write(path: Path) -> None:
    raise StoreUnavailable(
        f"expected a writer of the event store {path}, found its read-only reader: nothing is "
        "written through it",
        hint="open the store to write (`open_store`), where it can be written",
    )
