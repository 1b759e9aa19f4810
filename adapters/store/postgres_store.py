"""The chained recorder for PostgreSQL (many machines writing): eventsourcing's recorder with the
hash chain, the Merkle tree's tables and the batch evidence written in the insert's transaction, and
the `ChainedLog` reads.

A module of its own so that a SQLite writer (`lineage ingest`, a harness on the embedded store)
never imports psycopg: `store_url` names this class only for a PostgreSQL store.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager
from datetime import datetime
from typing import Any

import psycopg
from eventsourcing.persistence import ApplicationRecorder, StoredEvent
from eventsourcing.postgres import PostgresApplicationRecorder, PostgresFactory
from psycopg.rows import tuple_row
from psycopg.sql import SQL, Identifier

from ...domain.application import TailRecordedLater, recorded_time
from ...domain.errors import IntegrityFailure, InvalidInput
from ...domain.integrity import GENESIS, ChainRow
from ..chained_log import chain_stop, merge_chain, stored_rows, until, up_to
from ..evidence import batch_evidence, merkle_store
from ..evidence.batch_evidence import BatchEvidence
from ..store_port import EvidenceTables
from .event_store import CHAIN_TABLE, PAGE, dense_tail
from .writer_connection import WriterConnection

#: Decisions about up to this many streams pass their ids one by one; more as one array (psycopg
#: dumps an array slower than the server runs the statement).
ROWS_AS_VALUES = 32
#: The server-side append (its body: `APPEND_BODY`); a new body gets a new name, so a store keeps
#: the function of each version that wrote to it and every writer calls its own.
APPEND_FUNCTION = "lineage_append_v1"
#: The SQLSTATE the append function raises when the store put an event elsewhere than the position
#: its link was made for (a trigger, a rule): the whole transaction fails in the server.
POSITIONS_MOVED = "RL001"
APPEND_PARAMETERS = (
    "ids uuid[], versions bigint[], topics text[], states bytea[], lock_wait text, "
    "not_before timestamptz"
)
APPEND_RETURNS = (
    "first_position bigint, last_position bigint, last_previous bigint, last_hash text, "
    "last_event bigint, role text, unplaced bigint, recorded_later text"
)
APPEND_COLUMNS = tuple(column.split()[0] for column in APPEND_RETURNS.split(", "))
#: Under the writers' EXCLUSIVE lock on the events table: the tail (the last link, the last event,
#: events without a position), refused (nothing appended, the tail returned for the client to name
#: the break) unless positions are dense; else each event's link, made exactly as
#: `domain.integrity.link` makes it (the authenticated role hashed in), the events at the positions
#: after the last link and their links, and the position sequence moved past them (the sequence is
#: not the log: the positions are given, so a moved sequence cannot gap or hide an event). Returns
#: the first new position with the tail.
APPEND_BODY = r"""
DECLARE
  tail record;
  p0 bigint;
  n bigint := cardinality(ids);
  previous_hash text;
  hashes text[] := ARRAY[]::text[];
  placed bigint;
  lowest bigint;
  highest bigint;
  stamp text;
  later boolean;
BEGIN
  PERFORM set_config('lock_timeout', lock_wait, true);
  LOCK TABLE {events} IN EXCLUSIVE MODE;
  SELECT l.position, l.previous, l.chain_hash, e.last_event, session_user::text AS role,
         (SELECT count(*) FROM {events} WHERE notification_id IS NULL) AS unplaced
    INTO tail
    FROM (SELECT max(notification_id) AS last_event FROM {events}) e
    LEFT JOIN LATERAL (SELECT c.position, c.previous, c.chain_hash FROM {chain} c
                       ORDER BY c.position DESC LIMIT 1) l ON true;
  p0 := coalesce(tail.position, 0);
  IF tail.unplaced > 0 OR (p0 <> 0 AND tail.position <> tail.previous + 1)
     OR coalesce(tail.last_event, p0) <> p0 THEN
    RETURN QUERY SELECT NULL::bigint, tail.position, tail.previous, tail.chain_hash,
                        tail.last_event, tail.role, tail.unplaced, NULL::text;
    RETURN;
  END IF;
  IF not_before IS NOT NULL AND tail.last_event IS NOT NULL THEN
    SELECT substring(encode(substring(state FROM 1 FOR 80), 'escape')
                     FROM '^\{"timestamp":"([^"]+)"') INTO stamp
      FROM {events} WHERE notification_id = tail.last_event;
    BEGIN
      later := stamp::timestamptz > not_before;
    EXCEPTION WHEN others THEN
      later := true;  -- a time this cannot read: the client reads it its own way
    END;
    IF later THEN
      RETURN QUERY SELECT NULL::bigint, tail.position, tail.previous, tail.chain_hash,
                          tail.last_event, tail.role, tail.unplaced, stamp;
      RETURN;
    END IF;
  END IF;
  previous_hash := CASE WHEN p0 = 0 THEN '{genesis}' ELSE tail.chain_hash END;
  FOR k IN 1..n LOOP
    previous_hash := 'sha256:' || encode(sha256(
      convert_to(previous_hash || '|' || (p0 + k) || '|' || replace(ids[k]::text, '-', '')
                 || '|' || versions[k] || '|' || topics[k] || '|', 'UTF8')
      || sha256(states[k]) || convert_to('|by:' || tail.role, 'UTF8')), 'hex');
    hashes[k] := previous_hash;
  END LOOP;
  WITH e AS (
    INSERT INTO {events} (notification_id, originator_id, originator_version, topic, state)
      SELECT p0 + u.k, u.i, u.v, u.t, u.s
      FROM unnest(ids, versions, topics, states) WITH ORDINALITY AS u(i, v, t, s, k)
      RETURNING notification_id, originator_id, originator_version)
  SELECT count(*), min(e.notification_id), max(e.notification_id) INTO placed, lowest, highest
    FROM e LEFT JOIN unnest(ids, versions) WITH ORDINALITY AS u(i, v, k)
      ON e.originator_id = u.i AND e.originator_version = u.v AND e.notification_id = p0 + u.k
    WHERE u.k IS NOT NULL;
  IF placed <> n THEN
    RAISE EXCEPTION USING ERRCODE = '{moved}', MESSAGE = format(
      'expected the store to give this batch positions %s..%s, found %s of them there (%s..%s)',
      p0 + 1, p0 + n, placed, lowest, highest);
  END IF;
  INSERT INTO {chain} (position, previous, chain_hash, {role_column})
    SELECT p0 + u.k, p0 + u.k - 1, u.h, tail.role
    FROM unnest(hashes) WITH ORDINALITY AS u(h, k);
  PERFORM setval(pg_get_serial_sequence('{sequence}', 'notification_id'), p0 + n);
  RETURN QUERY SELECT p0 + 1, tail.position, tail.previous, tail.chain_hash, tail.last_event,
                      tail.role, tail.unplaced, NULL::text;
END
"""
#: The role that appended each event, as the server authenticated it, hashed into the event's link.
CHAINED_ROLE = "recorded_by_chained"


def _rollback(conn: Any) -> None:
    """Roll the batch back; a connection that broke mid-batch has nothing left to roll back (the
    server ends its transaction), and the pool discards it."""
    try:
        conn.rollback()
    except Exception:  # the batch's own error is the one to raise
        return


def _unplaced(count: int, what: str, hint: str) -> IntegrityFailure:
    """Events stored with no position (the column's NOT NULL dropped): every read of the log in
    position order misses them, while eventsourcing's reads of a stream by its id see them, so a
    writer would decide on a fact no reader and no `verify` shows. The unique index on positions
    holds NULLs: asking is cheap."""
    return IntegrityFailure(
        f"{what}: {count} stored event(s) have no position (notification_id is NULL): inserted "
        "outside rollout-lineage, they are missed by every reader of the log and seen by writers",
        hint=hint,
    )


def _refused(row: Any) -> IntegrityFailure:
    """Why the append function appended nothing, from the tail it read under the lock: events
    without a position, or a break of the dense rule (a link that jumps, an event with no link)."""
    if row["unplaced"]:
        return _unplaced(
            row["unplaced"],
            "refusing to append",
            "run `lineage verify`; restore the store from a backup; nothing was appended",
        )
    last = (row["last_position"], row["last_previous"], row["last_hash"])
    try:
        position = dense_tail(last if last[0] else None, None)[0]
        found = row["last_event"]
        dense_tail(last if last[0] else None, None if found in (None, position) else found + 1)
    except IntegrityFailure as exc:
        return exc
    return IntegrityFailure(
        f"refusing to append: the store's append function appended nothing, yet the tail it read "
        f"(last link {last}, last event {row['last_event']}) shows no break",
        hint=f"the function {APPEND_FUNCTION} in the store's schema is not this version's; run "
        "`lineage verify`; nothing of this batch was appended",
    )


def _append_row(row: tuple[Any, ...] | None) -> dict[str, Any] | None:
    """The append function's row by column name (read as a tuple: psycopg's dict rows take more
    CPU than the statement's own protocol work)."""
    return None if row is None else dict(zip(APPEND_COLUMNS, row, strict=True))


def _appended(row: Any, size: int) -> list[int]:
    """The batch's positions, or the refusal of a batch the function did not append."""
    if row is not None and row["recorded_later"] is not None:
        stamp = row["recorded_later"]
        raise TailRecordedLater(
            f"the log's last event was recorded at {stamp}",
            recorded_time(stamp),
        )
    if row is None or row["first_position"] is None:
        raise _refused(row)
    return list(range(row["first_position"], row["first_position"] + size))


def _append_parameters(stored_events: Sequence[StoredEvent]) -> list[Any]:
    """`_append_statement`'s parameters: value by value, or as four arrays past `ROWS_AS_VALUES`."""
    columns: list[list[Any]] = [
        [e.originator_id for e in stored_events],
        [e.originator_version for e in stored_events],
        [e.topic for e in stored_events],
        [e.state for e in stored_events],
    ]
    if len(stored_events) <= ROWS_AS_VALUES:
        return [value for column in columns for value in column]
    return columns


def _quoted(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


class ChainedPostgresRecorder(PostgresApplicationRecorder, EvidenceTables):
    batch_evidence: BatchEvidence | None = None

    def __init__(self, datastore: Any, **kwargs: Any) -> None:
        super().__init__(datastore, **kwargs)
        self._appends: dict[int, str] = {}  # by batch size, up to ROWS_AS_VALUES + 1 (arrays)
        self._lock_wait = f"{self.datastore.lock_timeout}s"
        self._writer = WriterConnection(self.datastore.pool)
        self._decisions: dict[int, Any] = {}  # by the number of streams asked about, likewise
        self.chain_table = Identifier(self.datastore.schema), Identifier(CHAIN_TABLE)
        self.sql_create_statements.append(
            SQL(
                "CREATE TABLE IF NOT EXISTS {}.{} (position bigint PRIMARY "
                "KEY, previous bigint NOT NULL, chain_hash text NOT NULL)"
            ).format(*self.chain_table)
        )
        evidence = [
            *merkle_store.postgres_ddl(self.datastore.schema),
            *batch_evidence.postgres_ddl(self.datastore.schema),
        ]
        self.sql_create_statements.extend(SQL(s).format() for s in evidence)
        # Who appended each event, as the server authenticated them: the writer cannot choose it
        # (unlike `actor`, which it asserts). Rows from before this column are NULL: unknown, never
        # the role that migrated them.
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
        # ... but that column sits outside the chain (anyone who may update the table could rewrite
        # it), so readers show only this one, which each link hashes (`integrity.link`): NULL
        # (unknown) for links made before it, whose `recorded_by` is never shown since nothing
        # vouches for it.
        self.sql_create_statements.append(
            SQL("ALTER TABLE {}.{} ADD COLUMN IF NOT EXISTS {} text").format(
                *self.chain_table, Identifier(CHAINED_ROLE)
            )
        )
        self.sql_create_statements.append(SQL(self._append_function()))  # type: ignore[arg-type]

    def _append_statement(self, size: int) -> str:
        """The call of `APPEND_FUNCTION` for a batch of `size` events, rendered once (psycopg
        renders a composed statement on every execution): up to `ROWS_AS_VALUES` events its arrays
        are built in the server from values passed one by one (psycopg dumps an array slower than
        the server runs the statement), past that as four arrays."""
        types = ("uuid", "bigint", "text", "bytea")
        if size <= ROWS_AS_VALUES:
            arrays = [f"ARRAY[{', '.join([f'%s::{t}'] * size)}]" for t in types]
        else:
            arrays = [f"%s::{t}[]" for t in types]
        function = SQL("{}.{}").format(
            Identifier(self.datastore.schema), Identifier(APPEND_FUNCTION)
        )
        return f"SELECT * FROM {function.as_string(None)}({', '.join(arrays)}, %s, %s)"

    def _append_function(self) -> str:
        """The DDL of `APPEND_FUNCTION` in the store's schema: made only where it is missing (every
        writer opening the store runs it; replacing a function takes a catalogue write and races).
        A new body gets a new name."""
        if "$" in self.datastore.schema + self.events_table_name:
            raise InvalidInput(
                f"expected a schema and table name without '$', found "
                f"{self.datastore.schema!r}.{self.events_table_name!r}",
                hint="choose a schema name of letters, digits and underscores (`?schema=` in the "
                "store URL)",
            )
        schema = self.datastore.schema.replace('"', '""')
        events = self.events_table_name.replace('"', '""')
        body = (
            APPEND_BODY.replace("{events}", f'"{schema}"."{events}"')
            .replace("{chain}", f'"{schema}".{CHAIN_TABLE}')
            .replace("{sequence}", f'"{schema}"."{events}"'.replace("'", "''"))
            .replace("{role_column}", CHAINED_ROLE)
            .replace("{genesis}", GENESIS)
            .replace("{moved}", POSITIONS_MOVED)
        )
        function = f'"{schema}".{APPEND_FUNCTION}'
        signature = f"{function}(uuid[], bigint[], text[], bytea[], text, timestamptz)"
        return (
            "DO $do$ BEGIN IF to_regprocedure(" + _quoted(signature) + ") IS NULL THEN "
            f"CREATE FUNCTION {function}({APPEND_PARAMETERS}) RETURNS TABLE ({APPEND_RETURNS}) "
            f"LANGUAGE plpgsql AS $body$ {body} $body$; END IF; END $do$"
        )

    def insert_events(
        self, stored_events: Sequence[StoredEvent], **kwargs: Any
    ) -> Sequence[int] | None:
        return self._append_batch(stored_events, None)

    def insert_events_not_behind(
        self, stored_events: Sequence[StoredEvent], recorded_at: datetime
    ) -> Sequence[int] | None:
        """`AppendsIfNotBehind`: the append, refused in the same statement (nothing appended,
        `TailRecordedLater`) where the log's last event was recorded after `recorded_at`."""
        return self._append_batch(stored_events, recorded_at)

    def _append_batch(
        self, stored_events: Sequence[StoredEvent], not_before: datetime | None
    ) -> Sequence[int] | None:
        """One statement, its own transaction (the library's connections are in autocommit), one
        round trip: the server's `APPEND_FUNCTION` takes the writers' lock, reads the tail, makes
        the links and inserts the events and their links. No client round trip happens while the
        lock is held, so a writer descheduled by the scheduler holds up nobody. A failure anywhere
        rolls the whole batch back. A batch with evidence to write (a signature, provenance) is a
        transaction of three round trips: the append, the evidence, the COMMIT."""
        if not stored_events:
            return []
        size = min(len(stored_events), ROWS_AS_VALUES + 1)
        append = self._appends.get(size)
        if append is None:
            append = self._appends[size] = self._append_statement(size)
        parameters = [*_append_parameters(stored_events), self._lock_wait, not_before]
        with self._writer.use() as conn:
            try:
                with conn.cursor(row_factory=tuple_row) as curs:
                    if self.batch_evidence is None:
                        # The connection is in autocommit: one statement, its own transaction.
                        curs.execute(append, parameters, prepare=True)
                        return _appended(_append_row(curs.fetchone()), len(stored_events))
                    curs.execute("BEGIN")
                    curs.execute(append, parameters, prepare=True)
                    row: Any = _append_row(curs.fetchone())
                ids = _appended(row, len(stored_events))
                with conn.cursor() as curs:  # the evidence code reads the library's dict rows
                    self.batch_evidence.write(
                        curs, ids, stored_rows(stored_events), self, row["role"]
                    )
                    curs.execute("COMMIT")
                return ids
            except psycopg.Error as exc:
                _rollback(conn)
                if exc.sqlstate != POSITIONS_MOVED:
                    raise
                raise IntegrityFailure(
                    f"refusing to append: {exc.diag.message_primary}; positions must rise by 1 "
                    "from event to event",
                    hint="something in the store (a trigger, a rule) moves events to other "
                    "positions; run `lineage verify`; nothing of this batch was appended",
                ) from None
            except BaseException:
                _rollback(conn)
                raise

    def close(self) -> None:
        """The writer's connection back to the library's pool, which closes with the datastore."""
        self._writer.close()

    def _decision_statement(self, size: int) -> Any:
        marks = ", ".join(["%s::uuid"] * size) if size <= ROWS_AS_VALUES else "%s::uuid[]"
        ask = f"ANY(ARRAY[{marks}])" if size <= ROWS_AS_VALUES else f"ANY({marks})"
        schema, events = Identifier(self.datastore.schema), Identifier(self.events_table_name)
        return SQL(
            "SELECT s.ids, s.tops, (SELECT substring(state FROM 1 FOR 80) FROM {}.{} WHERE "
            "notification_id IS NOT NULL ORDER BY notification_id DESC LIMIT 1) AS tail FROM "
            "(SELECT array_agg(originator_id) AS ids, array_agg(top) AS tops FROM (SELECT "
            "originator_id, max(originator_version) AS top FROM {}.{} WHERE originator_id = "
            + ask
            + " GROUP BY originator_id HAVING min(originator_version) = 1) g) s"
        ).format(schema, events, schema, events)

    def decision_reads(self, ids: set[Any]) -> tuple[dict[Any, int], bytes | None]:
        """`ReadsForDeciding`: which of these streams exist (a first event) with their last version,
        and how the last stored state begins, in one statement outside any transaction (one round
        trip; prepared: it is never part of a pipeline)."""
        size = len(ids) if 0 < len(ids) <= ROWS_AS_VALUES else ROWS_AS_VALUES + 1
        statement = self._decisions.get(size)
        if statement is None:
            statement = self._decisions[size] = self._decision_statement(size)
        asked = list(ids) if size <= ROWS_AS_VALUES else [list(ids)]
        with self.datastore.get_connection() as conn, conn.cursor() as curs:
            curs.execute(statement, asked, prepare=True)
            row: Any = curs.fetchone()  # one row, always (an aggregate and a scalar subquery)
        tail = row["tail"]
        existing = dict(zip(row["ids"] or (), row["tops"] or (), strict=True))
        return existing, bytes(tail) if tail is not None else None

    # --- EvidenceTables: our tables in the store's schema, psycopg's `%s` marks, dict rows --------

    def table(self, name: str) -> str:
        return f'"{self.datastore.schema}".{name}'

    def transaction(self, *, commit: bool) -> AbstractContextManager[Any]:
        return self.datastore.transaction(commit=commit)

    def fetch(self, cursor: Any, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        # The one place a `?` becomes psycopg's mark: the statements are ours and hold no `?` or
        # `%`.
        cursor.execute(sql.replace("?", "%s"), params)
        return [tuple(row.values()) for row in cursor.fetchall()]  # the library's rows are dicts

    def read(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        with self.transaction(commit=False) as curs:
            return self.fetch(curs, sql, params)

    def insert(
        self,
        cursor: Any,
        table: str,
        rows: Sequence[tuple[Any, ...]],
        *,
        keep_existing: bool = False,
    ) -> None:
        if rows:
            marks = ", ".join(["%s"] * len(rows[0]))
            keep = " ON CONFLICT DO NOTHING" if keep_existing else ""
            cursor.executemany(f"INSERT INTO {self.table(table)} VALUES ({marks}){keep}", rows)

    def _paged(
        self, statement: Any, columns: Sequence[str], stop: int
    ) -> Iterator[tuple[Any, ...]]:
        # From below every position: a row someone inserted at a position <= 0 must reach the chain
        # walk too (eventsourcing's aggregate reads would see it; `verify` names it as an event with
        # no link).
        after: float | int = float("-inf")
        while True:
            with self.datastore.transaction(commit=False) as curs:
                curs.execute(statement, (after, stop, PAGE))
                rows = [tuple(row[c] for c in columns) for row in curs.fetchall()]
            yield from rows
            if len(rows) < PAGE:
                return
            after = rows[-1][0]

    def chain_rows(self) -> Iterator[ChainRow]:
        """Every event and link up to the last position either held when the walk began (read in
        one statement): a writer appending meanwhile, between the events' pages and the links',
        adds nothing to one side only."""
        schema = Identifier(self.datastore.schema)
        with self.datastore.transaction(commit=False) as curs:
            self._refuse_unplaced(curs, "the log is not intact")
            curs.execute(
                SQL(chain_stop("{}.{}", "{}.{}", "notification_id")).format(
                    schema, Identifier(self.events_table_name), *self.chain_table
                )
            )
            row: Any = curs.fetchone()  # one row, always (an aggregate)
            stop = row["stop"]
        if stop is None:
            return iter(())
        events = self._paged(
            SQL(
                "SELECT notification_id, replace(originator_id::text, '-', '') AS "
                "originator_id, originator_version, topic, state, c.{} AS recorded_by "
                "FROM {}.{} LEFT JOIN {}.{} c ON c.position = notification_id WHERE "
                "notification_id > %s AND notification_id <= %s ORDER BY notification_id "
                "LIMIT %s"
            ).format(
                Identifier(CHAINED_ROLE),
                schema,
                Identifier(self.events_table_name),
                *self.chain_table,
            ),
            (
                "notification_id",
                "originator_id",
                "originator_version",
                "topic",
                "state",
                "recorded_by",
            ),
            stop,
        )
        links = self._paged(
            SQL(
                "SELECT position, previous, chain_hash FROM {}.{} "
                "WHERE position > %s AND position <= %s ORDER BY position LIMIT %s"
            ).format(*self.chain_table),
            ("position", "previous", "chain_hash"),
            stop,
        )
        return merge_chain(events, links)

    def _refuse_unplaced(self, curs: Any, what: str) -> None:
        curs.execute(
            SQL("SELECT count(*) AS n FROM {}.{} WHERE notification_id IS NULL").format(
                Identifier(self.datastore.schema), Identifier(self.events_table_name)
            )
        )
        unplaced = curs.fetchone()["n"]
        if unplaced:
            raise _unplaced(unplaced, what, "restore the store from a backup")

    def existing_originators(self, ids: set[Any]) -> set[Any]:
        with self.datastore.transaction(commit=False) as curs:
            curs.execute(
                SQL(
                    "SELECT originator_id FROM {}.{} WHERE "
                    "originator_version = 1 AND originator_id = ANY(%s)"
                ).format(Identifier(self.datastore.schema), Identifier(self.events_table_name)),
                (list(ids),),
            )
            return {row["originator_id"] for row in curs.fetchall()}

    def log_rows(
        self, after: int, stop: int | None, limit: int, max_bytes: int | None = None
    ) -> list[tuple[Any, ...]]:
        """`ChainedLog.log_rows`. The byte budget is applied by the server (a running sum of the
        states' sizes, which PostgreSQL reads without detoasting them): the client receives a whole
        result at once. Every page first asks for events without a position (one index probe), so no
        reader shows a log that writers see more of."""
        with self.datastore.transaction(commit=False) as curs:
            self._refuse_unplaced(curs, "the log cannot be read")
            curs.execute(
                SQL(
                    "SELECT * FROM (SELECT *, sum(coalesce(octet_length(state), 0)) OVER (ORDER BY "
                    "notification_id) - coalesce(octet_length(state), 0) AS before FROM (SELECT "
                    "notification_id, replace(originator_id::text, '-', '') AS originator_id, "
                    "originator_version, topic, state, c.{} AS recorded_by FROM {}.{} LEFT JOIN "
                    "{}.{} c ON c.position = notification_id WHERE notification_id > %s"
                    + up_to(stop, "notification_id", "%s")
                    + " ORDER BY notification_id LIMIT %s) page) page"
                    + ("" if max_bytes is None else " WHERE before < %s")
                    + " ORDER BY notification_id"
                ).format(
                    Identifier(CHAINED_ROLE),
                    Identifier(self.datastore.schema),
                    Identifier(self.events_table_name),
                    *self.chain_table,
                ),
                (
                    after,
                    *until(stop),
                    limit,
                    # A budget of 0 still reads the first row, as every log does.
                    *(() if max_bytes is None else (max(max_bytes, 1),)),
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
        """(position, previous, chain hash) of every link in (after, stop]: what catch-up checks a
        page against."""
        with self.datastore.transaction(commit=False) as curs:
            curs.execute(
                SQL(
                    "SELECT position, previous, chain_hash FROM {}.{} WHERE position > %s"
                    + up_to(stop, "position", "%s")
                    + " ORDER BY position"
                ).format(*self.chain_table),
                (after, *until(stop)),
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


class ChainedPostgresFactory(PostgresFactory):
    """The library's factory; when the store closes, each recorder it made gives back the pool
    connection it keeps for appends before the library closes the pool."""

    def __init__(self, env: Any) -> None:
        super().__init__(env)
        self._made: list[ChainedPostgresRecorder] = []

    def application_recorder(self) -> ApplicationRecorder:
        recorder = super().application_recorder()
        if isinstance(recorder, ChainedPostgresRecorder):
            self._made.append(recorder)
        return recorder

    def close(self) -> None:
        for recorder in self._made:
            recorder.close()
        super().close()
