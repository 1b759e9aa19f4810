"""Saved aggregate states (`domain/saved_state.py`) in the event store's database, one row per
aggregate.

A table of our own beside the log rather than eventsourcing's snapshot store, because that store
keeps every snapshot ever taken (a run saved every few hundred events would hold its whole state
again and again) and has no way to drop older ones; here a new state replaces the old one in a
single upsert. The table is a cache: readers never project it, the hash chain never covers it, and
dropping it only makes the next new process replay.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from uuid import UUID

from eventsourcing.persistence import PersistenceError

from ...domain.saved_state import Saved

TABLE = "lineage_saved_states"
_COLUMNS = (
    "originator_id {id_type} PRIMARY KEY, originator_version "
    "{int_type} NOT NULL, topic TEXT NOT NULL, state {blob_type} NOT NULL"
)
# A newer state replaces the kept one; so does any state of another topic (code that evolves state
# differently), so two tool versions writing one store each still find theirs often enough.
_UPSERT = (
    "INSERT INTO {table} (originator_id, originator_version, topic, state) VALUES ({marks}) "
    "ON CONFLICT (originator_id) DO UPDATE SET originator_version = "
    "excluded.originator_version, topic = excluded.topic, state = excluded.state WHERE "
    "excluded.originator_version > {kept}.originator_version OR excluded.topic <> {kept}.topic"
)


class SQLiteSavedStates:
    def __init__(self, datastore: Any) -> None:
        self.datastore = datastore
        self.created = False

    def newest(self, originator_id: UUID) -> Saved | None:
        try:
            with self.datastore.transaction(commit=False) as c:
                c.execute(
                    f"SELECT originator_version, topic, state FROM {TABLE} WHERE originator_id = ?",
                    (originator_id.hex,),
                )
                row = c.fetchone()
        except PersistenceError:
            return None  # no table yet (a store no one has saved a state in): replay
        return Saved(row[0], row[1], bytes(row[2])) if row else None

    def all(self) -> Iterator[tuple[UUID, Saved]]:
        try:
            with self.datastore.transaction(commit=False) as c:
                c.execute(f"SELECT originator_id, originator_version, topic, state FROM {TABLE}")
                rows = c.fetchall()
        except PersistenceError:
            return  # no table: nothing saved yet
        for row in rows:
            yield UUID(row[0]), Saved(row[1], row[2], bytes(row[3]))

    def keep(self, originator_id: UUID, saved: Saved) -> None:
        with self.datastore.transaction(commit=True) as c:
            if not self.created:
                columns = _COLUMNS.format(id_type="TEXT", int_type="INTEGER", blob_type="BLOB")
                c.execute(f"CREATE TABLE IF NOT EXISTS {TABLE} ({columns})")
                self.created = True
            c.execute(
                _UPSERT.format(table=TABLE, kept=TABLE, marks="?,?,?,?"),
                (originator_id.hex, saved.version, saved.topic, saved.state),
            )


class PostgresSavedStates:
    def __init__(self, datastore: Any) -> None:
        from psycopg.sql import SQL, Identifier

        self.datastore = datastore
        self.created = False
        table = SQL("{}.{}").format(Identifier(datastore.schema), Identifier(TABLE)).as_string()
        self.select = (
            f"SELECT originator_version, topic, state FROM {table} WHERE originator_id = %s"
        )
        self.select_all = f"SELECT originator_id, originator_version, topic, state FROM {table}"
        columns = _COLUMNS.format(id_type="uuid", int_type="bigint", blob_type="bytea")
        self.create = f"CREATE TABLE IF NOT EXISTS {table} ({columns})"
        self.upsert = _UPSERT.format(table=f"{table} AS kept", kept="kept", marks="%s,%s,%s,%s")

    def newest(self, originator_id: UUID) -> Saved | None:
        try:
            with self.datastore.transaction(commit=False) as curs:
                curs.execute(self.select, (originator_id,))
                row = curs.fetchone()
        except PersistenceError:
            return None  # no table yet: replay
        return Saved(row["originator_version"], row["topic"], bytes(row["state"])) if row else None

    def all(self) -> Iterator[tuple[UUID, Saved]]:
        try:
            with self.datastore.transaction(commit=False) as curs:
                curs.execute(self.select_all)
                rows = curs.fetchall()
        except PersistenceError:
            return  # no table: nothing saved yet
        for row in rows:
            saved = Saved(row["originator_version"], row["topic"], bytes(row["state"]))
            yield row["originator_id"], saved

    def keep(self, originator_id: UUID, saved: Saved) -> None:
        with self.datastore.transaction(commit=True) as curs:
            if not self.created:
                curs.execute(self.create)
                self.created = True
            curs.execute(self.upsert, (originator_id, saved.version, saved.topic, saved.state))


def saved_states_for(kind: str, app: Any) -> Any:
    """The saved-state table of the application's own store (kind: "sqlite" | "postgresql")."""
    datastore = app.recorder.datastore
    return SQLiteSavedStates(datastore) if kind == "sqlite" else PostgresSavedStates(datastore)
