"""The chained recorder for PostgreSQL (many machines writing): eventsourcing's recorder with the
hash chain, the Merkle tree's tables and the batch evidence written in the insert's transaction, and
the `ChainedLog` reads.

A module of its own so that a SQLite writer (`lineage ingest`, a harness on the embedded store)
never imports psycopg: `store_url` names this class only for a PostgreSQL store.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager
from typing import Any

import psycopg
from eventsourcing.persistence import StoredEvent
from eventsourcing.postgres import PostgresApplicationRecorder
from psycopg.sql import SQL, Identifier, Literal

from ..domain.errors import IntegrityFailure
from ..domain.integrity import ChainRow
from . import batch_evidence, merkle_store
from .batch_evidence import BatchEvidence
from .chained_log import merge_chain, next_links, stored_rows, until, up_to
from .event_store import CHAIN_TABLE, PAGE, dense_tail
from .store_port import EvidenceTables

#: Batches of up to this many events (and decisions about up to this many streams) pass their values
#: one by one; larger ones as arrays (PostgreSQL takes at most 65,535 parameters a statement).
ROWS_AS_VALUES = 32
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


def _continued_from(row: Any) -> tuple[tuple[int, str], str]:
    """From the tail read under the lock: the (position, hash) the batch continues from and the role
    to chain, or the refusal of a log whose positions are broken."""
    if row["unplaced"]:
        raise _unplaced(
            row["unplaced"],
            "refusing to append",
            "run `lineage verify`; restore the store from a backup; nothing was appended",
        )
    last = (row["position"], row["previous"], row["chain_hash"]) if row["position"] else None
    position = dense_tail(last, None)[0]
    found = row["last_event"]
    return dense_tail(last, None if found in (None, position) else found + 1), row["role"]


def _append_parameters(
    stored_events: Sequence[StoredEvent], links: Sequence[tuple[int, int, str]], role: str
) -> list[Any]:
    """`_append_statement`'s parameters: row by row, or as arrays past `ROWS_AS_VALUES`."""
    if len(stored_events) <= ROWS_AS_VALUES:
        return [
            *(
                value
                for e in stored_events
                for value in (e.originator_id, e.originator_version, e.topic, e.state)
            ),
            *(
                value
                for made, e in zip(links, stored_events, strict=True)
                for value in (*made, role, e.originator_id, e.originator_version)
            ),
        ]
    return [
        [e.originator_id for e in stored_events],
        [e.originator_version for e in stored_events],
        [e.topic for e in stored_events],
        [e.state for e in stored_events],
        role,
        [made[0] for made in links],
        [made[1] for made in links],
        [made[2] for made in links],
        [e.originator_id for e in stored_events],
        [e.originator_version for e in stored_events],
    ]


def _refuse_other_positions(
    returned: Sequence[Any], stored_events: Sequence[StoredEvent], ids: range
) -> None:
    """Every event of the batch at the position its link was made for, and every link written; else
    the batch is refused before its commit."""
    given = {(r["originator_id"], r["originator_version"]): r for r in returned}
    wanted = [given.get((e.originator_id, e.originator_version)) for e in stored_events]
    if all(
        r is not None and r["notification_id"] == at and r["links"] == len(ids)
        for r, at in zip(wanted, ids, strict=True)
    ):
        return
    got = sorted(r["notification_id"] for r in returned)
    raise IntegrityFailure(
        f"refusing to append: expected the store to give this batch positions {ids[0]}..{ids[-1]}, "
        f"found {got[0] if got else None}..{got[-1] if got else None}; positions must rise by 1 "
        "from event to event",
        hint="another process inserts events without "
        "taking the writers' lock; run `lineage verify`",
    )


class ChainedPostgresRecorder(PostgresApplicationRecorder, EvidenceTables):
    batch_evidence: BatchEvidence | None = None

    def __init__(self, datastore: Any, **kwargs: Any) -> None:
        super().__init__(datastore, **kwargs)
        self._tail: str | None = None
        self._appends: dict[int, Any] = {}  # by batch size, up to ROWS_AS_VALUES + 1 (arrays)
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

    def _tail_statements(self) -> str:
        """The first round trip of an append, sent as one simple query (no parameters, so never
        prepared: a lock wait that times out leaves no half-prepared statement behind): BEGIN, the
        lock timeout, the writers' EXCLUSIVE lock on the events table, and one read of what the
        links need.

        Holding the lock, the writer makes the batch's positions follow the last link (the dense
        rule): the position sequence is not the log (a lost race rolls back positions it drew, and
        anyone allowed to may `setval` it past 2**62), so it is set back to the last link, and a
        break (a link that jumps, an event without a link or without a position) is refused."""
        schema, events = Identifier(self.datastore.schema), Identifier(self.events_table_name)
        sequence = Literal(f'"{self.datastore.schema}"."{self.events_table_name}"')
        return (
            SQL(
                "BEGIN; SET LOCAL lock_timeout = '{}s'; LOCK TABLE {}.{} IN EXCLUSIVE "
                "MODE; SELECT l.position, l.previous, l.chain_hash, e.last_event, "
                "session_user AS role, setval(pg_get_serial_sequence({}, "
                "'notification_id'), greatest(coalesce(l.position, 0), 1), "
                "coalesce(l.position, 0) > 0), (SELECT count(*) FROM {}.{} WHERE "
                "notification_id IS NULL) AS unplaced FROM (SELECT max(notification_id) "
                "AS last_event FROM {}.{}) e LEFT JOIN LATERAL (SELECT position, "
                "previous, chain_hash FROM {}.{} ORDER BY position DESC LIMIT 1) l ON true"
            )
            .format(
                self.datastore.lock_timeout,
                schema,
                events,
                sequence,
                schema,
                events,
                schema,
                events,
                *self.chain_table,
            )
            .as_string(None)
        )

    def _append_statement(self, size: int) -> Any:
        """The second round trip: the events and their links in one statement, the positions given
        back.

        The server itself refuses a link made for a position its event did not get: each link's
        position is kept only where it equals the position the insert gave its event (matched by
        stream and version), else it is NULL, which the links' primary key refuses, and the whole
        transaction with it. So the COMMIT can travel with this statement. A batch of up to
        `ROWS_AS_VALUES` events passes its values one by one (psycopg dumps arrays slower than the
        server runs the statement); a larger one as arrays."""
        if size <= ROWS_AS_VALUES:
            events = SQL("VALUES " + ", ".join(["(%s::uuid, %s::bigint, %s, %s::bytea)"] * size))
            links = SQL(
                "(VALUES "
                + ", ".join(["(%s::bigint, %s::bigint, %s, %s, %s::uuid, %s::bigint)"] * size)
                + ")"
            )
        else:
            events = SQL("SELECT * FROM unnest(%s::uuid[], %s::bigint[], %s::text[], %s::bytea[])")
            links = SQL(
                "(SELECT p, r, h, %s, i, v FROM unnest(%s::bigint[], %s::bigint[], %s::text[], "
                "%s::uuid[], %s::bigint[]) AS u(p, r, h, i, v))"
            )
        return SQL(
            "WITH e AS (INSERT INTO {}.{} (originator_id, originator_version, topic, state) {} "
            "RETURNING notification_id, originator_id, originator_version), c AS (INSERT INTO "
            "{}.{} (position, previous, chain_hash, {}) SELECT CASE WHEN e.notification_id = "
            "w.position THEN w.position END, w.previous, w.chain_hash, w.role FROM {} AS "
            "w(position, previous, chain_hash, role, originator_id, originator_version) LEFT "
            "JOIN e ON e.originator_id = w.originator_id AND e.originator_version = "
            "w.originator_version RETURNING position) SELECT e.notification_id, "
            "e.originator_id, e.originator_version, (SELECT count(*) FROM c) AS links FROM e"
        ).format(
            Identifier(self.datastore.schema),
            Identifier(self.events_table_name),
            events,
            *self.chain_table,
            Identifier(CHAINED_ROLE),
            links,
        )

    def insert_events(
        self, stored_events: Sequence[StoredEvent], **kwargs: Any
    ) -> Sequence[int] | None:
        """One transaction in two round trips: BEGIN, the lock and the tail (`_tail_statements`);
        then the events with their links (`_append_statement`) and COMMIT, pipelined. The links are
        computed between the two from the last link and the positions the lock guarantees, and the
        server refuses any link whose event got another position. A failure anywhere rolls the whole
        batch back. A batch with evidence to write (a signature, provenance) commits on its own
        round trip, after that evidence."""
        if not stored_events:
            return []
        if self._tail is None:
            self._tail = self._tail_statements()
        size = min(len(stored_events), ROWS_AS_VALUES + 1)
        append = self._appends.get(size)
        if append is None:
            append = self._appends[size] = self._append_statement(size)
        with self.datastore.get_connection() as conn:
            try:
                with conn.cursor() as curs:
                    curs.execute(self._tail)
                    while curs.nextset():
                        pass
                    ids = self._append(conn, curs, append, stored_events, curs.fetchone())
            except psycopg.errors.NotNullViolation as exc:
                _rollback(conn)
                raise IntegrityFailure(
                    "refusing to append: expected the store to give this "
                    "batch's events the positions their links were made for, "
                    "found another position for at least one; positions "
                    f"must rise by 1 from event to event ({' '.join(str(exc).split())})",
                    hint="another process inserts events without taking the writers' lock; run "
                    "`lineage verify`; nothing of this batch was appended",
                ) from None
            except BaseException:
                _rollback(conn)
                raise
        return ids

    def _append(
        self, conn: Any, curs: Any, append: Any, stored_events: Sequence[StoredEvent], row: Any
    ) -> list[int]:
        previous, role = _continued_from(row)
        ids = range(previous[0] + 1, previous[0] + 1 + len(stored_events))
        rows = stored_rows(stored_events)
        links = next_links(previous, ids, rows, role)
        parameters = _append_parameters(stored_events, links, role)
        if self.batch_evidence is None:
            # Not prepared: a statement queued in a pipeline behind one that fails is never parsed.
            with conn.pipeline():
                curs.execute(append, parameters, prepare=False)
                # As a statement: `commit()` in a pipeline syncs once more, a round trip of its own.
                conn.execute("COMMIT", prepare=False)
            _refuse_other_positions(curs.fetchall(), stored_events, ids)  # the server did already
            return list(ids)
        curs.execute(append, parameters)
        _refuse_other_positions(curs.fetchall(), stored_events, ids)
        self.batch_evidence.write(curs, ids, rows, self, role)
        conn.commit()
        return list(ids)

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

    def _paged(self, statement: Any, columns: Sequence[str]) -> Iterator[tuple[Any, ...]]:
        # From below every position: a row someone inserted at a position <= 0 must reach the chain
        # walk too (eventsourcing's aggregate reads would see it; `verify` names it as an event with
        # no link).
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
        with self.datastore.transaction(commit=False) as curs:
            self._refuse_unplaced(curs, "the log is not intact")
        events = self._paged(
            SQL(
                "SELECT notification_id, replace(originator_id::text, '-', '') AS "
                "originator_id, originator_version, topic, state, c.{} AS recorded_by "
                "FROM {}.{} LEFT JOIN {}.{} c ON c.position = notification_id WHERE "
                "notification_id > %s ORDER BY notification_id LIMIT %s"
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
        )
        links = self._paged(
            SQL(
                "SELECT position, previous, chain_hash FROM {}.{} "
                "WHERE position > %s ORDER BY position LIMIT %s"
            ).format(*self.chain_table),
            ("position", "previous", "chain_hash"),
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
