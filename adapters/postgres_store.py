"""The chained recorder for PostgreSQL (many machines writing): eventsourcing's recorder with the hash chain, the
Merkle tree's tables and the batch evidence written in the insert's transaction, and the `ChainedLog` reads.

A module of its own so that a SQLite writer (`lineage ingest`, a harness on the embedded store) never imports
psycopg: `store_url` names this class only for a PostgreSQL store.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from eventsourcing.persistence import StoredEvent
from eventsourcing.postgres import PostgresApplicationRecorder
from psycopg.sql import SQL, Identifier

from ..domain.integrity import GENESIS, ChainRow
from . import batch_evidence, merkle_store
from .chained_log import merge_chain, next_links, stored_rows
from .event_store import CHAIN_TABLE, PAGE


class ChainedPostgresRecorder(PostgresApplicationRecorder):
    batch_evidence: Any = None

    def __init__(self, datastore: Any, **kwargs: Any) -> None:
        super().__init__(datastore, **kwargs)
        self.chain_table = Identifier(self.datastore.schema), Identifier(CHAIN_TABLE)
        self.sql_create_statements.append(
            SQL(
                "CREATE TABLE IF NOT EXISTS {}.{} (position bigint PRIMARY KEY, previous bigint NOT NULL, chain_hash text NOT NULL)"
            ).format(*self.chain_table)
        )
        evidence = [
            *merkle_store.postgres_ddl(self.datastore.schema),
            *batch_evidence.postgres_ddl(self.datastore.schema),
        ]
        self.sql_create_statements.extend(SQL(s).format() for s in evidence)
        # Who appended each event, as the server authenticated them: the writer cannot choose it (unlike `actor`,
        # which it asserts). Rows from before this column are NULL: unknown, never the role that migrated them.
        self.sql_create_statements.append(
            SQL("ALTER TABLE {}.{} ADD COLUMN IF NOT EXISTS recorded_by text").format(
                *self.chain_table
            )
        )
        self.sql_create_statements.append(
            SQL("ALTER TABLE {}.{} ALTER COLUMN recorded_by SET DEFAULT session_user").format(
                *self.chain_table
            )
        )

    def _fetch_ids_after_insert_events(
        self, curs: Any, stored_events: Sequence[StoredEvent], **kwargs: Any
    ) -> Sequence[int] | None:
        ids = super()._fetch_ids_after_insert_events(curs, stored_events, **kwargs)
        if ids:
            # Still inside the transaction holding the EXCLUSIVE lock on the events table.
            curs.execute(
                SQL("SELECT position, chain_hash FROM {}.{} ORDER BY position DESC LIMIT 1").format(
                    *self.chain_table
                )
            )
            last = curs.fetchone()
            previous = (last["position"], last["chain_hash"]) if last else (0, GENESIS)
            rows = stored_rows(stored_events)
            curs.executemany(
                SQL(
                    "INSERT INTO {}.{} (position, previous, chain_hash) VALUES (%s, %s, %s)"
                ).format(*self.chain_table),
                next_links(previous, ids, rows),
            )
            if self.batch_evidence is not None:
                self.batch_evidence.write(curs, ids, rows, self.datastore.schema)
        return ids

    def _paged(self, statement: Any, columns: Sequence[str]) -> Iterator[tuple[Any, ...]]:
        # From below every position: a row someone inserted at a position <= 0 must reach the chain walk
        # too (eventsourcing's aggregate reads would see it; `verify` names it as an event with no link).
        after: float | int = float("-inf")
        while True:
            with self.datastore.transaction(commit=False) as curs:
                curs.execute(statement, (after, PAGE))
                rows = [tuple(row[c] for c in columns) for row in curs.fetchall()]
            yield from rows
            if len(rows) < PAGE:
                return
            after = rows[-1][0]

    def chain_rows(self) -> Iterator[ChainRow]:
        schema = Identifier(self.datastore.schema)
        events = self._paged(
            SQL(
                "SELECT notification_id, replace(originator_id::text, '-', '') AS originator_id, originator_version, topic, state "
                "FROM {}.{} WHERE notification_id > %s ORDER BY notification_id LIMIT %s"
            ).format(schema, Identifier(self.events_table_name)),
            ("notification_id", "originator_id", "originator_version", "topic", "state"),
        )
        links = self._paged(
            SQL(
                "SELECT position, previous, chain_hash FROM {}.{} WHERE position > %s ORDER BY position LIMIT %s"
            ).format(*self.chain_table),
            ("position", "previous", "chain_hash"),
        )
        return merge_chain(events, links)

    def existing_originators(self, ids: set[Any]) -> set[Any]:
        with self.datastore.transaction(commit=False) as curs:
            curs.execute(
                SQL(
                    "SELECT originator_id FROM {}.{} WHERE originator_version = 1 AND originator_id = ANY(%s)"
                ).format(Identifier(self.datastore.schema), Identifier(self.events_table_name)),
                (list(ids),),
            )
            return {row["originator_id"] for row in curs.fetchall()}

    def log_rows(
        self, after: int, stop: int | None, limit: int, max_bytes: int | None = None
    ) -> list[tuple[Any, ...]]:
        """`ChainedLog.log_rows`. The byte budget is applied by the server (a running sum of the states'
        sizes, which PostgreSQL reads without detoasting them): the client receives a whole result at once."""
        with self.datastore.transaction(commit=False) as curs:
            curs.execute(
                SQL(
                    "SELECT * FROM (SELECT *, sum(coalesce(octet_length(state), 0)) OVER (ORDER BY "
                    "notification_id) - coalesce(octet_length(state), 0) AS before FROM (SELECT notification_id, "
                    "replace(originator_id::text, '-', '') AS originator_id, originator_version, "
                    "topic, state, c.recorded_by FROM {}.{} LEFT JOIN {}.{} c "
                    "ON c.position = notification_id WHERE notification_id > %s AND notification_id <= %s "
                    "ORDER BY notification_id LIMIT %s) page) page WHERE before < %s "
                    "ORDER BY notification_id"
                ).format(
                    Identifier(self.datastore.schema),
                    Identifier(self.events_table_name),
                    *self.chain_table,
                ),
                (
                    after,
                    stop if stop is not None else 2**62,
                    limit,
                    # A budget of 0 still reads the first row, as every log does.
                    max(max_bytes, 1) if max_bytes is not None else 2**62,
                ),
            )
            return [
                (
                    r["notification_id"],
                    r["originator_id"],
                    r["originator_version"],
                    r["topic"],
                    r["state"],
                    r["recorded_by"],
                )
                for r in curs.fetchall()
            ]

    def chain_links(self, after: int, stop: int | None) -> list[tuple[int, int, str]]:
        """(position, previous, chain hash) of every link in (after, stop]: what catch-up checks a page against."""
        with self.datastore.transaction(commit=False) as curs:
            curs.execute(
                SQL(
                    "SELECT position, previous, chain_hash FROM {}.{} WHERE position > %s AND position <= %s "
                    "ORDER BY position"
                ).format(*self.chain_table),
                (after, stop if stop is not None else 2**62),
            )
            return [(r["position"], r["previous"], r["chain_hash"]) for r in curs.fetchall()]

    def chain_hash_at(self, position: int) -> str | None:
        with self.datastore.transaction(commit=False) as curs:
            curs.execute(
                SQL("SELECT chain_hash FROM {}.{} WHERE position = %s").format(*self.chain_table),
                (position,),
            )
            row = curs.fetchone()
        return row["chain_hash"] if row else None
