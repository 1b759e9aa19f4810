"""SQLite connections that keep their prepared statements.

eventsourcing 9.5 opens each connection with `cached_statements=True`, which `sqlite3` reads as a
cache of one statement. A live record runs five different statements, so each was parsed and
planned again every time: about 0.15 ms of a 0.55 ms record's CPU (bench/README.md, "Live
recording"). The store URL names this factory as the persistence module; its datastore's pool
opens connections exactly as the library's does, with `sqlite3`'s own default cache.

Each connection also notes which file it opened (`opened_file`): a store file replaced while a
writer holds it open (a backup restored over it) leaves the writer's connections on the old,
unlinked file, where an append would be acknowledged and never seen again. The append compares it
with the file at the path, under the write lock (`event_store.ChainedSQLiteRecorder`).
"""

from __future__ import annotations

import sqlite3

from eventsourcing.persistence import InterfaceError
from eventsourcing.sqlite import (
    SQLITE3_DEFAULT_LOCK_TIMEOUT,
    SQLiteConnection,
    SQLiteConnectionPool,
    SQLiteFactory,
)
from eventsourcing.utils import Environment, EnvType

from .sqlite_log import file_identity

#: Prepared statements each connection keeps (sqlite3's default when none is given).
CACHED_STATEMENTS = 128


class StatementCachingPool(SQLiteConnectionPool):
    def _create_connection(self) -> SQLiteConnection:
        try:
            connection = sqlite3.connect(
                database=self.db_name,
                uri=True,
                check_same_thread=False,
                isolation_level=None,
                cached_statements=CACHED_STATEMENTS,
                timeout=self.lock_timeout or SQLITE3_DEFAULT_LOCK_TIMEOUT,
            )
        except (sqlite3.Error, TypeError) as e:
            raise InterfaceError(e) from e
        if not self.is_sqlite_memory_mode and not self.is_journal_mode_wal:
            (mode,) = connection.execute("PRAGMA journal_mode").fetchone()
            if mode.lower() != "wal":
                connection.execute("PRAGMA journal_mode=WAL")
                self.journal_mode_was_changed_to_wal = True
            self.is_journal_mode_wal = True
        connection.row_factory = sqlite3.Row
        opened = SQLiteConnection(sqlite_conn=connection, max_age=self.max_age)
        plain_file = not self.is_sqlite_memory_mode and not self.db_name.startswith("file:")
        opened.opened_file = file_identity(self.db_name) if plain_file else None  # type: ignore[attr-defined]
        return opened


class StatementCachingSQLiteFactory(SQLiteFactory):
    def __init__(self, env: Environment | EnvType | None):
        super().__init__(env)
        made = self.datastore.pool  # no connection opened yet: the library opens them on first use
        self.datastore.pool = StatementCachingPool(
            db_name=made.db_name,
            lock_timeout=made.lock_timeout,
            pool_size=made.pool_size,
            max_overflow=made.max_overflow,
            pool_timeout=made.pool_timeout,
            max_age=made.max_age,
            pre_ping=made.pre_ping,
        )
