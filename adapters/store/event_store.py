"""Event store configuration: which eventsourcing backend, and the hash chain written beside the
events.

The store is chosen by URL (`sqlite:///path` or `postgresql://user@host/db`), never by import. Both
backends get a recorder subclass that writes each event's chain link in the same transaction as the
event. That is safe because both backends already serialise writers at that point (SQLite's write
lock, the PostgreSQL recorder's EXCLUSIVE table lock), so "the previous link" is well defined.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

from eventsourcing.persistence import (
    IntegrityError,
    InterfaceError,
    OperationalError,
    PersistenceError,
    StoredEvent,
)
from eventsourcing.sqlite import SQLiteApplicationRecorder

from ...domain.application import TailRecordedLater, recorded_at
from ...domain.errors import StoreUnavailable
from ...domain.integrity import GENESIS, ChainRow, position_gap
from ..chained_log import (
    chain_stop,
    merge_chain,
    next_links,
    stored_rows,
    until,
    up_to,
    up_to_bytes,
)
from ..evidence import batch_evidence, merkle_store
from ..evidence.batch_evidence import BatchEvidence
from ..store_port import EvidenceTables
from .backoff import StoreBackoff
from .sqlite_log import file_identity
from .store_url import StoreURL

CHAIN_TABLE = "lineage_chain"
PAGE = 5000


class ChainedSQLiteRecorder(SQLiteApplicationRecorder, EvidenceTables):
    #: What each appended batch carries beside its chain links
    #: (`adapters/evidence/batch_evidence.py`), when
    #: set.
    batch_evidence: BatchEvidence | None = None

    def construct_create_table_statements(self) -> list[str]:
        return [
            *super().construct_create_table_statements(),
            f"CREATE TABLE IF NOT EXISTS {CHAIN_TABLE} (position INTEGER "
            f"PRIMARY KEY, previous INTEGER NOT NULL, chain_hash TEXT NOT NULL)",
            *merkle_store.sqlite_ddl(),
            *batch_evidence.sqlite_ddl(),
        ]

    def insert_events(
        self, stored_events: Sequence[StoredEvent], **kwargs: Any
    ) -> Sequence[int] | None:
        """One transaction holding the write lock from its first statement: BEGIN IMMEDIATE (waiting
        the busy timeout for another writer), one read of the log's tail, the events, their links,
        COMMIT. Five statements for a one-event batch; a reader of the log never sees events without
        their links."""
        return self._append(stored_events, None)

    def insert_events_not_behind(
        self, stored_events: Sequence[StoredEvent], recorded_at: datetime
    ) -> Sequence[int] | None:
        """`AppendsIfNotBehind`: the same transaction, whose tail read also reads how the last
        state begins; a later recording time there rolls it back (`TailRecordedLater`)."""
        return self._append(stored_events, recorded_at)

    def _append(
        self, stored_events: Sequence[StoredEvent], not_before: datetime | None
    ) -> Sequence[int] | None:
        if not stored_events:
            return []
        with self.datastore.get_connection(commit=True) as connection, _translated():
            c = connection.cursor()
            c.execute("BEGIN IMMEDIATE")
            try:
                self._refuse_a_replaced_file(connection)
                ids = self._insert_events(c, stored_events, not_before=not_before)
            except BaseException:
                connection.rollback()
                raise
            connection.commit()
            return ids

    def _refuse_a_replaced_file(self, connection: Any) -> None:
        """Under the write lock: the file at the store's path is still the one this connection
        opened (`sqlite_connections.opened_file`), or nothing is appended."""
        opened = getattr(connection, "opened_file", None)
        if opened is None:
            return
        path = self.datastore.pool.db_name
        found = file_identity(path)
        if found == opened:
            return
        now = "no file" if found is None else f"another file (inode {found[1]})"
        raise StoreUnavailable(
            f"expected to append to the store file this process opened ({path}, inode "
            f"{opened[1]}), found {now} there: it was replaced or removed while this process held "
            "it open (a backup restored over it?); nothing was recorded",
            hint="open the store again (a new process, or close() and open_store) and send the "
            "batch again; what was appended to the old file since the backup is not in the new one",
        )

    def _insert_events(
        self, c: Any, stored_events: Sequence[StoredEvent], **kwargs: Any
    ) -> Sequence[int] | None:
        if not stored_events:
            return []
        not_before: datetime | None = kwargs.get("not_before")
        # Holding the write lock, the tail cannot move: the last event's rowid and the last link
        # (and how the last state begins, when asked), in one read.
        c.execute(self._tail_statement(with_state=not_before is not None))
        last_id, *last_link = c.fetchone()
        if not_before is not None:
            *last_link, tail = last_link
            later = recorded_at(tail)
            if later is not None and later > not_before:
                raise TailRecordedLater(f"the log's last event was recorded at {later}", later)
        # First: past a break (a row at 2**63-1 makes SQLite pick random rowids) this is not a lost
        # race.
        previous = dense_tail(last_link if last_link[0] is not None else None, (last_id or 0) + 1)
        first = previous[0] + 1
        rows = stored_rows(stored_events)
        if len(rows) == 1:
            c.execute(self.insert_events_statement, rows[0])
            last = c.lastrowid
        else:
            c.executemany(self.insert_events_statement, rows)
            c.execute(f"SELECT max(rowid) FROM {self.events_table_name}")
            last = c.fetchone()[0]
        # Each new rowid is the maximum + 1 (the lock held, none at 2**63-1): anything else is
        # refused.
        if last != first + len(rows) - 1:
            raise IntegrityError(
                f"expected the batch at rowids "
                f"{first}..{first + len(rows) - 1}, found the last at {last}"
            )
        ids = range(first, first + len(rows))
        c.executemany(f"INSERT INTO {CHAIN_TABLE} VALUES (?,?,?)", next_links(previous, ids, rows))
        if self.batch_evidence is not None:
            self.batch_evidence.write(c, ids, rows, self)
        return list(ids)

    def _tail_statement(self, *, with_state: bool) -> str:
        """The last event's rowid and the last link (position, previous, hash), and with
        `with_state` how the last stored state begins, in one row."""
        state = (
            f", (SELECT substr(state, 1, 80) FROM {self.events_table_name} ORDER BY rowid DESC "
            "LIMIT 1)"
            if with_state
            else ""
        )
        return (
            f"SELECT (SELECT max(rowid) FROM {self.events_table_name}), l.*{state} "
            f"FROM (SELECT 1) LEFT JOIN (SELECT position, previous, "
            f"chain_hash FROM {CHAIN_TABLE} ORDER BY position DESC LIMIT 1) l"
        )

    def decision_reads(self, ids: set[Any]) -> tuple[dict[Any, int], bytes | None]:
        """`ReadsForDeciding`: which of these streams exist (a first event) with their last version,
        and how the last stored state begins, one statement (no transaction around it: one read is
        its own snapshot)."""
        hexes = [i.hex for i in ids]
        head, rest = hexes[:500], hexes[500:]
        with self.datastore.get_connection(commit=False) as connection, _translated():
            c = connection.cursor()
            c.execute(
                f"SELECT 0, originator_id, max(originator_version) FROM {self.events_table_name} "
                f"WHERE originator_id IN ({','.join('?' * len(head))}) GROUP BY originator_id "
                "HAVING min(originator_version) = 1 UNION ALL SELECT 1, *, NULL FROM "
                f"(SELECT substr(state, 1, 80) FROM "
                f"{self.events_table_name} ORDER BY rowid DESC LIMIT 1)",
                head,
            )
            found = c.fetchall()
        existing = {self.convert_originator_id(row[1]): row[2] for row in found if row[0] == 0}
        tail = next((bytes(row[1]) for row in found if row[0] == 1 and row[1] is not None), None)
        if rest:  # versions unknown: those streams are read as before
            existing.update(
                dict.fromkeys(
                    self.existing_originators({self.convert_originator_id(h) for h in rest})
                )
            )
        return existing, tail

    # --- EvidenceTables: our tables in the store's own file, `?` marks, sqlite3 rows --------------

    def table(self, name: str) -> str:
        return name

    def transaction(self, *, commit: bool) -> AbstractContextManager[Any]:
        return self.datastore.transaction(commit=commit)

    def fetch(self, cursor: Any, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        cursor.execute(sql, params)
        return [tuple(row) for row in cursor.fetchall()]

    def read(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        rows: list[tuple[Any, ...]] = self._plain_reader().execute(sql, params).fetchall()
        return rows

    def insert(
        self,
        cursor: Any,
        table: str,
        rows: Sequence[tuple[Any, ...]],
        *,
        keep_existing: bool = False,
    ) -> None:
        if rows:
            verb = "INSERT OR IGNORE" if keep_existing else "INSERT"
            marks = ", ".join("?" * len(rows[0]))
            cursor.executemany(f"{verb} INTO {self.table(table)} VALUES ({marks})", rows)

    def _paged(self, sql: str, stop: int) -> Iterator[tuple[Any, ...]]:
        # From below every position: a row someone inserted at a position <= 0 must reach the chain
        # walk too (eventsourcing's aggregate reads would see it; `verify` names it as an event with
        # no link).
        after: float | int = float("-inf")
        while True:
            with self.datastore.transaction(commit=False) as c:
                c.execute(sql, (after, stop, PAGE))
                rows = [tuple(row) for row in c.fetchall()]
            yield from rows
            if len(rows) < PAGE:
                return
            after = rows[-1][0]

    def chain_rows(self) -> Iterator[ChainRow]:
        """Every event and link up to the last position either held when the walk began
        (`chain_stop`): a writer appending meanwhile adds nothing to one side only."""
        with self.datastore.transaction(commit=False) as c:
            c.execute(chain_stop(self.events_table_name, CHAIN_TABLE))
            (stop,) = c.fetchone()
        if stop is None:
            return iter(())
        events = self._paged(
            f"SELECT rowid, originator_id, originator_version, "
            f"topic, state FROM {self.events_table_name} "
            "WHERE rowid > ? AND rowid <= ? ORDER BY rowid LIMIT ?",
            stop,
        )
        links = self._paged(
            f"SELECT position, previous, chain_hash FROM {CHAIN_TABLE} "
            f"WHERE position > ? AND position <= ? ORDER BY position LIMIT ?",
            stop,
        )
        return merge_chain(events, links)

    def _plain_reader(self) -> sqlite3.Connection:
        if getattr(self, "_reader", None) is None:
            self._reader = sqlite3.connect(
                Path(self.datastore.pool.db_name).resolve().as_uri() + "?mode=ro",
                uri=True,
                check_same_thread=False,
            )
        return self._reader

    def log_rows(
        self, after: int, stop: int | None, limit: int, max_bytes: int | None = None
    ) -> list[tuple[Any, ...]]:
        """(position, originator id hex, version, topic, state bytes, recorded_by) rows: the
        projection runner's input, read over a plain read-only connection (tuples, no row objects,
        no Notification or UUID per event), and no further than `max_bytes` of state
        (`ChainedLog.log_rows`)."""
        cursor = self._plain_reader().execute(
            # State that is not a BLOB was put there by hand: NULL here, so the chain check names
            # it.
            f"SELECT rowid, originator_id, originator_version, "
            f"topic, CASE typeof(state) WHEN 'blob' THEN state END "
            # recorded_by: a SQLite file authenticates nobody
            f", NULL FROM {self.events_table_name} "
            f"WHERE rowid > ?{up_to(stop)} ORDER BY rowid LIMIT ?",
            (after, *until(stop), limit),
        )
        try:
            return up_to_bytes(cursor, max_bytes)
        finally:
            cursor.close()

    def chain_links(self, after: int, stop: int | None) -> list[tuple[int, int, str]]:
        """(position, previous, chain hash) of every link in (after, stop]: what catch-up checks a
        page against."""
        cursor = self._plain_reader().execute(
            f"SELECT position, previous, chain_hash FROM {CHAIN_TABLE} WHERE position > ?"
            f"{up_to(stop, 'position')} ORDER BY position",
            (after, *until(stop)),
        )
        return cursor.fetchall()

    def chain_hash_at(self, position: int) -> str | None:
        with self.datastore.transaction(commit=False) as c:
            c.execute(f"SELECT chain_hash FROM {CHAIN_TABLE} WHERE position = ?", (position,))
            row = c.fetchone()
        return row[0] if row else None

    def existing_originators(self, ids: set[Any]) -> set[Any]:
        found: set[Any] = set()
        hexes = [i.hex for i in ids]
        with self.datastore.transaction(commit=False) as c:
            for start in range(0, len(hexes), 500):
                chunk = hexes[start : start + 500]
                c.execute(
                    f"SELECT DISTINCT originator_id FROM {self.events_table_name} WHERE "
                    f"originator_version = 1 AND originator_id IN ({','.join('?' * len(chunk))})",
                    chunk,
                )
                found.update(self.convert_originator_id(row[0]) for row in c.fetchall())
        return found


@contextmanager
def _translated() -> Iterator[None]:
    """sqlite3's errors as eventsourcing's, which the application tells apart (a lost race, a locked
    store)."""
    try:
        yield
    except sqlite3.IntegrityError as exc:
        raise IntegrityError(exc) from exc
    except sqlite3.OperationalError as exc:
        raise OperationalError(exc) from exc
    except sqlite3.InterfaceError as exc:
        raise InterfaceError(exc) from exc
    except sqlite3.Error as exc:
        raise PersistenceError(exc) from exc


def dense_tail(last: Any, first_new: int | None) -> tuple[int, str]:
    """The (position, hash) a batch continues from, given the last link (position, previous, hash;
    None in an empty log) and the position the store gives the batch's first event (None: not known
    yet).

    The writers' rule is that positions are dense (the first event at 1, each one at the previous
    one's + 1; `domain/integrity.py` checks it). A writer refuses to append past a break of it: a
    last link that jumps, or a first position that does not follow the last link (an event without a
    link, or a sequence moved).
    """
    from ...domain.errors import IntegrityFailure

    position, previous, chain_hash = (last[0], last[1], last[2]) if last else (0, 0, GENESIS)
    found = position_gap(previous, position) if last else None
    if found is None and first_new is not None and first_new != position + 1:
        found = (
            f"the next free position is {first_new}, not "
            f"{position + 1} after the last link (an event "
            "without a link, a deleted event, or a moved position sequence)"
        )
    if found is not None:
        raise IntegrityFailure(
            f"refusing to append: the log's positions must rise by 1 from event to event; {found}",
            hint="run `lineage verify`, which names the break; nothing of this batch was appended",
        )
    return position, chain_hash


_DDL_RACE = ("concurrently", "duplicate key", "already exists")
PROBE_TIMEOUT_S = 2


def _opening_race(url: StoreURL, exc: Exception) -> bool:
    """Whether opening lost a race with another process creating the same store: PostgreSQL's DDL
    races, or SQLite refusing `PRAGMA journal_mode=WAL` while another connection is switching a new
    file to WAL (that pragma does not wait on the busy timeout). Either way the loser tries again
    and finds everything in place."""
    if url.kind == "postgresql":
        return any(sign in str(exc) for sign in _DDL_RACE)
    return url.kind == "sqlite" and "database is locked" in str(exc)


def _probe_server(url: StoreURL) -> None:
    """One plain connection first, so a wrong password, a missing database or a refused connection
    is said at once and in the server's words (the library's pool would wait its full timeout and
    then only say it got none)."""
    import psycopg

    env = url.application_env()
    try:
        psycopg.connect(
            dbname=env["POSTGRES_DBNAME"],
            host=env["POSTGRES_HOST"],
            port=env["POSTGRES_PORT"],
            user=env["POSTGRES_USER"],
            password=env["POSTGRES_PASSWORD"],
            connect_timeout=PROBE_TIMEOUT_S,
        ).close()
    except psycopg.Error as exc:
        reason = " ".join(str(exc).split()).replace(env["POSTGRES_PASSWORD"] or "\0", "***")
        raise StoreUnavailable(
            f"could not connect to the event store {url.redacted()}: {reason}",
            hint="check the URL (user, password, host, port, database) and that the server is "
            "running",
        ) from None


def open_application(url: StoreURL, *, actor: str, tool_version: str) -> Any:
    """Build the application over the store, translating connection failures into our error family.

    Several machines starting at once may race on PostgreSQL's `CREATE TABLE IF NOT EXISTS`
    (PostgreSQL answers "tuple concurrently updated", a duplicate-key error from its catalogue, or
    "type ... already exists" for the table's row type); the loser simply tries again, and then
    finds everything in place.
    """
    from ...domain.application import LineageApp
    from ...domain.errors import LineageError

    if url.kind == "postgresql":
        _probe_server(url)
    for attempt in range(1, 6):
        try:
            app = LineageApp(
                env=url.application_env(),
                actor=actor,
                tool_version=tool_version,
                retry=StoreBackoff(),
            )
            from .saved_states import saved_states_for

            app.saved_states = saved_states_for(url.kind, app)
            return app
        except LineageError:  # already says what was expected and what to do
            raise
        except (
            Exception
        ) as exc:  # psycopg/sqlite/eventsourcing errors all mean the same thing to a user here
            racing = _opening_race(url, exc)
            if racing and attempt < 5:
                time.sleep(0.1 * attempt)
                continue
            if "could not create unique index" in str(exc) and "is duplicated" in str(exc):
                from ...domain.errors import IntegrityFailure

                # Someone dropped the index on positions and stored two events (or links) at one.
                raise IntegrityFailure(
                    f"the event store {url.redacted()} holds two rows at one position, so "
                    f"its unique index could not be made again: {' '.join(str(exc).split())}",
                    hint="positions are the log's order: restore the store from a backup",
                ) from exc
            raise StoreUnavailable(
                f"could not open the event store {url.redacted()}: {exc}",
                hint="check the URL, that the server is running and that you may write there",
            ) from exc
    raise AssertionError("unreachable")
