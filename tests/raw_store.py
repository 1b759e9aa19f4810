"""What someone with write access to a store's database (but no key) can do to it, on SQLite and
PostgreSQL alike: run SQL, insert an event at any position, re-link the whole chain over an edit,
drop the Merkle tree.

Tests written as that attacker use it; the SQL is the store's own tables, never rollout-lineage's
code.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import parse_qs, urlsplit, urlunsplit

from rollout_lineage.domain.integrity import GENESIS, link

CHAINED_ROLE = "recorded_by_chained"


class RawStore:
    """One connection to the store's database, in autocommit, with `?` parameters on both
    backends."""

    def __init__(self, store_url: str) -> None:
        self.postgres = store_url.startswith("postgresql")
        if self.postgres:
            import psycopg

            parts = urlsplit(store_url)
            schema = parse_qs(parts.query)["schema"][0]
            self.connection: Any = psycopg.connect(
                urlunsplit(parts._replace(query="")), autocommit=True
            )
            self.connection.execute(f"SET search_path TO {schema}")
        else:
            self.connection = sqlite3.connect(store_url.removeprefix("sqlite:///"))
            self.connection.isolation_level = None
        self.position = "notification_id" if self.postgres else "rowid"
        #: The events table (eventsourcing names PostgreSQL's after the application).
        self.events_table = "lineage_events" if self.postgres else "stored_events"

    def execute(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        cursor = self.connection.execute(sql.replace("?", "%s") if self.postgres else sql, params)
        return [tuple(row) for row in cursor.fetchall()] if cursor.description else []

    def events(self) -> list[tuple[Any, ...]]:
        """(position, originator id hex, version, topic, state, role hashed into its link) in
        order."""
        oid = "replace(originator_id::text, '-', '')" if self.postgres else "originator_id"
        role = f"c.{CHAINED_ROLE}" if self.postgres else "NULL"
        return [
            (r[0], r[1], r[2], r[3], bytes(r[4]), r[5])
            for r in self.execute(
                f"SELECT e.{self.position}, {oid}, originator_version, topic, "
                f"state, {role} FROM {self.events_table} e LEFT JOIN lineage_chain "
                f"c ON c.position = e.{self.position} ORDER BY e.{self.position}"
            )
        ]

    def insert_copy(self, source: int, position: int, version_offset: int = 100) -> None:
        """A copy of the event at `source` (another version of its stream) stored at `position`."""
        self.execute(
            f"INSERT INTO {self.events_table} ({self.position}, originator_id, "
            f"originator_version, topic, state) SELECT ?, originator_id, originator_version "
            f"+ ?, topic, state FROM {self.events_table} WHERE {self.position} = ?",
            (position, version_offset, source),
        )

    def relink(self) -> None:
        """What a careful forger does after an edit: every link made again over the events as they
        now are (each pointing back at the event before it), and the Merkle tree dropped, so both
        are rebuilt."""
        previous_hash, previous = GENESIS, 0
        rows = self.events()
        self.execute("DELETE FROM lineage_chain")
        for position, originator, version, topic, state, role in rows:
            made = (previous_hash, position, originator, version, topic, state)
            previous_hash = link(*made) if role is None else link(*made, role)
            if self.postgres:
                self.execute(
                    f"INSERT INTO lineage_chain (position, previous, chain_hash, {CHAINED_ROLE}) "
                    "VALUES (?, ?, ?, ?)",
                    (position, previous, previous_hash, role),
                )
            else:
                self.execute(
                    "INSERT INTO lineage_chain VALUES (?, ?, ?)",
                    (position, previous, previous_hash),
                )
            previous = position
        self.execute("DELETE FROM lineage_merkle_leaves")
        self.execute("DELETE FROM lineage_merkle_nodes")

    def close(self) -> None:
        self.connection.close()


@contextmanager
def raw_store(store_url: str) -> Iterator[RawStore]:
    store = RawStore(store_url)
    try:
        yield store
    finally:
        store.close()
