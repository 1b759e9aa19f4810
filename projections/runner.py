"""Catching read models up with the log: pages, one DuckDB transaction each, tracking written inside it.

Each page of notifications is copied into `events`, every projection appends its rows for that window of
positions with set-based SQL, and the tracking position moves to the page's last position, all in one
transaction: a crash anywhere leaves the previous page's state, and the next reader resumes from there
(exactly once, never skipping). `--as-of` answers are built the same way from the log prefix, into an
in-memory database, so they are what the log said at that position and nothing later.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..adapters.duckdb_store import ReadModelDB
from ..adapters.log_reader import raw_pages
from ..domain.events import TOPIC_PREFIX
from . import custody, evidence, forks, lineage, log_table, preservation, runs, stages
from .base import Projection, consumed_types
from .timeparse import parse_moment

if TYPE_CHECKING:
    from ..bootstrap import Lineage

PROJECTIONS: tuple[Projection, ...] = (
    log_table.PROJECTION, runs.PROJECTION, lineage.PROJECTION, stages.PROJECTION, forks.PROJECTION, custody.PROJECTION,
    evidence.PROJECTION, preservation.PROJECTION,
)
PAGE = 50_000
BOOKKEEPING = (
    "CREATE TABLE IF NOT EXISTS lineage_tracking (name VARCHAR PRIMARY KEY, position BIGINT NOT NULL, store VARCHAR NOT NULL)",
    "CREATE TABLE IF NOT EXISTS lineage_projection_versions (name VARCHAR PRIMARY KEY, version INTEGER NOT NULL)",
    "CREATE TABLE IF NOT EXISTS lineage_schema (fingerprint VARCHAR)",
    # JSON null inside a fact means "absent": read models show SQL NULL for it.
    "CREATE OR REPLACE MACRO json_or_null(j) AS CASE WHEN j IS NULL OR json_type(j) = 'NULL' THEN NULL ELSE j END",
    f"CREATE TABLE IF NOT EXISTS {log_table.PAGE_TABLE} (position BIGINT, originator_id VARCHAR, "
    "originator_version INTEGER, topic VARCHAR, state VARCHAR)",
)
TRACKING_NAME = "lineage"


def tracked_position(db: ReadModelDB) -> int:
    return db.scalar("SELECT position FROM lineage_tracking WHERE name = ?", [TRACKING_NAME]) or 0


def _fingerprint() -> str:
    """Changes whenever any DDL, view or macro text changes (views are cheap to recreate, so any edit does)."""
    text = "\n".join([*BOOKKEEPING, *(s for p in PROJECTIONS for s in (*p.create_statements(), *p.view_statements(),
                                                                       f"{p.name}={p.version}"))])
    return hashlib.sha256(text.encode()).hexdigest()


def _up_to_date(db: ReadModelDB, store: str, log_position: int | None) -> bool:
    """The fast path every read takes: one query says the schema is current and the log has not shrunk."""
    row = db.rows_if_tables_exist("SELECT t.store, t.position, s.fingerprint FROM lineage_tracking t, lineage_schema s "
                                  "WHERE t.name = ?", [TRACKING_NAME])
    return bool(row) and row[0]["store"] == store and row[0]["fingerprint"] == _fingerprint() and (
        log_position is None or row[0]["position"] <= log_position)


def ensure_schema(db: ReadModelDB, store: str, log_position: int | None = None) -> None:
    """Create what is missing; rebuild what is stale (another store, a shorter log, a projection's new version)."""
    if _up_to_date(db, store, log_position):
        return
    with db.transaction():
        for statement in BOOKKEEPING:
            db.execute(statement)
        tracked_store = db.scalar("SELECT store FROM lineage_tracking WHERE name = ?", [TRACKING_NAME])
        versions = {row["name"]: row["version"] for row in db.rows("SELECT * FROM lineage_projection_versions")}
        stale_log = (tracked_store not in (None, store) or versions.get("events", log_table.PROJECTION.version) != log_table.PROJECTION.version
                     or (log_position is not None and tracked_position(db) > log_position))
        for projection in PROJECTIONS:
            if stale_log or versions.get(projection.name) not in (None, projection.version):
                _drop(db, projection)
                versions.pop(projection.name, None)
        if stale_log:
            db.execute("DELETE FROM lineage_tracking")
        position = tracked_position(db)
        for projection in PROJECTIONS:
            for statement in projection.create_statements():
                db.execute(statement)
            if projection.name not in versions and projection is not log_table.PROJECTION and position:
                # A new or changed projection catches up from the events already copied, not from the store.
                for statement in projection.apply:
                    db.execute(statement, {"lo": 0, "hi": position})
            for statement in projection.view_statements():
                db.execute(statement)
            db.execute("INSERT OR REPLACE INTO lineage_projection_versions VALUES (?, ?)", [projection.name, projection.version])
        db.execute("INSERT INTO lineage_tracking VALUES (?, ?, ?) ON CONFLICT (name) DO NOTHING", [TRACKING_NAME, 0, store])
        db.execute("DELETE FROM lineage_schema")
        db.execute("INSERT INTO lineage_schema VALUES (?)", [_fingerprint()])


def _drop(db: ReadModelDB, projection: Projection) -> None:
    """Drop what a projection owns, whichever kind each name is now (a new version may turn a table into a view)."""
    for name in projection.owned_names():
        kind = db.scalar("SELECT table_type FROM information_schema.tables WHERE table_schema = 'main' AND table_name = ?", [name])
        if kind is not None:
            db.execute(f"DROP {'VIEW' if kind == 'VIEW' else 'TABLE'} {name}")


def catch_up(db: ReadModelDB, recorder: Any, *, stop: int | None = None, page: int = PAGE,
             inside_page: Callable[[int], None] | None = None) -> int:
    """Apply every event after the tracked position (up to `stop`); returns the new tracked position."""
    last = tracked_position(db)
    if stop is not None and last >= stop:
        return last
    for rows in _prefetched(_page_rows(recorder, last, stop, page)):
        high = rows[-1][0]
        page_types = {row[3].removeprefix(TOPIC_PREFIX) for row in rows}
        with db.transaction():
            db.append(log_table.PAGE_TABLE, rows)
            db.execute(log_table.STAGE_PAGE)
            db.execute(f"DELETE FROM {log_table.PAGE_TABLE}")
            for projection in PROJECTIONS[1:]:
                for statement in projection.apply:
                    if consumed_types(statement) & page_types:
                        db.execute(statement, {"lo": last, "hi": high})
            if inside_page is not None:
                inside_page(high)  # tests use this to die mid-page
            db.execute("UPDATE lineage_tracking SET position = ? WHERE name = ? AND position = ?", [high, TRACKING_NAME, last])
        last = high
    return last


def _page_rows(recorder: Any, after: int, stop: int | None, page: int) -> Iterator[list[tuple[Any, ...]]]:
    """Pages of (position, originator id, version, topic, state) rows, straight from the store when it can."""
    if hasattr(recorder, "log_rows"):
        while rows := recorder.log_rows(after, stop, page):
            yield rows
            after = rows[-1][0]
        return
    for notifications in raw_pages(recorder, after=after, stop=stop, page=page):
        yield [(n.id, n.originator_id.hex, n.originator_version, n.topic, n.state.decode()) for n in notifications]


def _prefetched(pages: Iterator[list[tuple[Any, ...]]]) -> Iterator[list[tuple[Any, ...]]]:
    """Read the next page from the store while DuckDB applies this one (DuckDB releases the GIL)."""
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="lineage-read") as reader:
        pending = reader.submit(next, pages, None)
        while (rows := pending.result()) is not None:
            pending = reader.submit(next, pages, None)
            yield rows


def rebuild(db: ReadModelDB, recorder: Any, store: str) -> int:
    with db.transaction():
        for projection in reversed(PROJECTIONS):
            _drop(db, projection)
        db.execute("DROP TABLE IF EXISTS lineage_projection_versions")
        db.execute("DROP TABLE IF EXISTS lineage_tracking")
    ensure_schema(db, store)
    return catch_up(db, recorder)


@dataclass
class ReadModels:
    """A caught-up DuckDB connection for read commands (persistent file, or in memory for --as-of)."""

    db: ReadModelDB
    position: int
    as_of: int | None = None

    def refresh(self, lineage: Lineage) -> int:
        """Catch up again (a long-lived reader, e.g. a harness or `project --follow`, skips reopening the file)."""
        if self.as_of is None:
            self.position = catch_up(self.db, lineage.app.recorder)
        return self.position

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> ReadModels:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_read_models(lineage: Lineage, *, as_of: int | None = None, catch_up_now: bool = True) -> ReadModels:
    recorder = lineage.app.recorder
    store = lineage.store_url.redacted()
    if as_of is not None:
        db = ReadModelDB.open(":memory:")
        ensure_schema(db, store)
        return ReadModels(db, catch_up(db, recorder, stop=as_of), as_of)
    db = ReadModelDB.open(lineage.settings.projections_path, timeout=lineage.settings.lock_timeout_s,
                          memory_limit=lineage.settings.duckdb_memory)
    try:
        ensure_schema(db, store, lineage.position())
        position = catch_up(db, recorder) if catch_up_now else tracked_position(db)
    except BaseException:
        db.close()
        raise
    return ReadModels(db, position)


def resolve_as_of(lineage: Lineage, text: str | None) -> int | None:
    """POSITION, or an ISO-8601 time: the last position recorded at or before it (what we knew then)."""
    if text is None:
        return None
    if text.isdigit():
        return int(text)
    moment = parse_moment(text, "--as-of", "a log position or an ISO-8601 time")
    with open_read_models(lineage) as models:
        return models.db.scalar("SELECT coalesce(max(position), 0) FROM events WHERE recorded_at <= ?", [moment])
