"""Opening read models: the schema a file must have (rebuilt when it is stale or not this log's),
catching it up (`paging`), rebuilding it, comparing it with a rebuild, and `--as-of` answers, built
the same way from the log prefix into a new database, so they are what the log said at that position
and nothing later.
"""

from __future__ import annotations

import hashlib
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from ...adapters.chained_log import ChainedLog
from ...adapters.duckdb_store import MISSING_OBJECT, ReadModelDB, within_limits
from ...adapters.store.store_url import may_write
from ...domain.errors import InvalidInput, StoreUnavailable
from ..read_models import event_rows as events_table
from ..read_models.base import Projection
from ..read_models.registry import PROJECTIONS
from . import shadows
from .paging import REBUILD_PAGES_PER_COMMIT, TRACKING_NAME, catch_up, tracked_position
from .shadows import creating_in_file, shadow_on_demand
from .timeparse import parse_moment

if TYPE_CHECKING:
    from ...adapters.store.store_url import StoreURL
    from ...domain.application import LineageApp


class ReadSettings(Protocol):
    """What opening a read-model file needs to know (`rollout_lineage.settings.Settings` is one)."""

    @property
    def lock_timeout_s(self) -> float: ...

    @property
    def duckdb_memory(self) -> str: ...


class OpenedStore(Protocol):
    """What the readers here need of an opened store (`rollout_lineage.bootstrap.Lineage` is one):
    its settings (memory cap, lock timeout), its URL, the application (the write side), the chained
    log as readers see it, where its read models live, and the log's position. A port, so this layer
    does not import the composition root above it."""

    @property
    def settings(self) -> ReadSettings: ...

    @property
    def store_url(self) -> StoreURL: ...

    @property
    def app(self) -> LineageApp: ...

    @property
    def log(self) -> ChainedLog: ...

    @property
    def read_models_path(self) -> Path: ...

    def position(self) -> int: ...


BOOKKEEPING = (
    "CREATE TABLE IF NOT EXISTS lineage_tracking (name VARCHAR "
    "PRIMARY KEY, position BIGINT NOT NULL, store VARCHAR NOT NULL)",
    # The chain hash at the tracked position: a read-model file is a faithful prefix of a log only
    # while the log still holds that hash there (another store, a rewritten or truncated log all
    # differ).
    "ALTER TABLE lineage_tracking ADD COLUMN IF NOT EXISTS head_hash VARCHAR",
    "CREATE TABLE IF NOT EXISTS lineage_projection_versions "
    "(name VARCHAR PRIMARY KEY, version INTEGER NOT NULL)",
    "CREATE TABLE IF NOT EXISTS lineage_schema (fingerprint VARCHAR)",
    # The staging table of files before it became TEMP (below): nothing reads it any more.
    f"DROP TABLE IF EXISTS main.{events_table.PAGE_TABLE}",
)


def _fingerprint() -> str:
    """Changes whenever any DDL, view or macro text changes (views are cheap to recreate, so any
    edit does)."""
    text = "\n".join(
        [
            *BOOKKEEPING,
            *shadows.DEFINITIONS,
            *(
                s
                for p in PROJECTIONS
                for s in (*p.create_statements(), *p.view_statements(), f"{p.name}={p.version}")
            ),
        ]
    )
    return hashlib.sha256(text.encode()).hexdigest()


def _state(db: ReadModelDB) -> dict[str, Any] | None:
    """What the file says it holds: store, position, head hash, schema fingerprint (None for a new
    or old file)."""
    try:
        rows = db.connection.execute(
            "SELECT t.store, t.position, t.head_hash, s.fingerprint FROM lineage_tracking t, "
            "lineage_schema s WHERE t.name = ?",
            [TRACKING_NAME],
        ).fetchall()
    except MISSING_OBJECT:
        return None
    return (
        dict(zip(("store", "position", "head_hash", "fingerprint"), rows[0], strict=True))
        if rows
        else None
    )


def _faithful(state: dict[str, Any], log: ChainedLog | None) -> bool:
    """The file was built from a prefix of this very log: the log still holds the recorded head at
    that position."""
    if not state["position"] or log is None:
        return True
    return (
        state["head_hash"] is not None
        and log.chain_hash_at(state["position"]) == state["head_hash"]
    )


def is_current(db: ReadModelDB, store: str, log: ChainedLog) -> bool:
    """The file holds the whole log, as this code builds it: nothing to catch up, rebuild or
    re-create."""
    with within_limits():  # the catalog queries too can pass a tiny cap
        state = _state(db)
        position = log.max_notification_id() or 0
        # The position first: a file behind the log needs none of the slower checks to say so.
        return (
            state is not None
            and state["position"] == position
            and _current(db, state, store, log, position)
        )


#: Every table this code keeps in a read-model file; the file holds nothing else (no views, no
#: macros).
OWN_TABLES = sorted(
    {name for projection in PROJECTIONS for name in projection.tables}
    | {"lineage_tracking", "lineage_projection_versions", "lineage_schema"}
)


def _foreign_objects(db: ReadModelDB) -> list[tuple[str, str]]:
    """(kind, name) of each schema but `main`, each view, and each table not ours, in the file: this
    code made none of them.

    The file keeps tables only; views and macros exist as TEMP objects of each connection
    (`shadows`). A statement can still reach the file's own catalog past them
    (`json_execute_serialized_sql` runs its query on a connection of its own, which sees the file
    and nothing else), so a view there, or a table named like one of our views, could answer in
    their place. Such a file was edited outside rollout-lineage: it is rebuilt.
    """
    rows = db.connection.execute(
        "SELECT 'SCHEMA', schema_name FROM duckdb_schemas() WHERE database_name = $1 AND "
        "NOT internal AND schema_name <> 'main' UNION ALL SELECT 'VIEW', view_name FROM "
        "duckdb_views() WHERE database_name = $1 AND schema_name = 'main' AND NOT internal "
        "UNION ALL SELECT 'TABLE', table_name FROM duckdb_tables() WHERE database_name = "
        "$1 AND schema_name = 'main' AND NOT list_contains($2, table_name) ORDER BY ALL",
        [db.catalog, OWN_TABLES],
    ).fetchall()
    return [(row[0], row[1]) for row in rows]


def _stored_definitions(db: ReadModelDB) -> list[tuple[str, str]]:
    """Macros and types stored in the file (this code stores none). Slower to list than
    `_foreign_objects` (DuckDB lists them among all its built-ins: ~15 ms), so asked only where the
    file is rebuilt or checked: a macro there reaches no query of ours, but a type named like a
    built-in (`json`) would be what the next `CREATE TABLE` used."""
    types = db.connection.execute(
        "SELECT 'TYPE', type_name FROM duckdb_types() WHERE database_name = ? AND NOT internal "
        "ORDER BY ALL",
        [db.catalog],
    ).fetchall()
    return [*shadows.macros_in_file(db), *((row[0], row[1]) for row in types)]


def _drop_foreign(db: ReadModelDB, found: list[tuple[str, str]]) -> None:
    """Drop what this code did not make (schemas and types with whatever depends on them)."""
    for kind, name in found:
        where = f'"{db.catalog}"."{name}"' if kind == "SCHEMA" else f'"{db.catalog}".main."{name}"'
        cascade = " CASCADE" if kind in ("SCHEMA", "TYPE") else ""
        try:
            db.execute(f"DROP {kind} {where}{cascade}")
        except MISSING_OBJECT as exc:
            raise StoreUnavailable(
                f"the read models at {db.path} hold a {kind.lower()} {name!r} this "
                f"code did not make and cannot remove: {str(exc).splitlines()[0]}",
                hint="remove the file; it is derived from the log and rebuilt on the next read",
            ) from None


def ensure_schema(db: ReadModelDB, store: str, log: ChainedLog | None = None) -> None:
    """Create what is missing; rebuild what is stale (another store or log, a shorter or rewritten
    log, a projection's new version); then every statement on `db` (the catch-up's own, which call
    macros too, and every query) runs against this code's macros and views, never the file's copies
    (`shadows`)."""
    with within_limits():  # the catalog queries too can pass a tiny cap
        state = _state(db)
        log_position = (log.max_notification_id() or 0) if log is not None else None
        if _current(db, state, store, log, log_position):
            shadow_on_demand(db)
            return
        with creating_in_file(db):
            _rebuild_what_is_stale(db, state, store, log, log_position)


def _rebuild_what_is_stale(
    db: ReadModelDB,
    state: dict[str, Any] | None,
    store: str,
    log: ChainedLog | None,
    log_position: int | None,
) -> None:
    foreign = _foreign_objects(db)
    # A new file holds nothing; any other is searched for macros too (a slow catalog query, so only
    # here).
    stored = _stored_definitions(db) if state is not None or foreign else []
    with db.transaction():
        # Edited outside rollout-lineage (or by a version that kept views and macros in the file):
        # nothing in it can be trusted, so it is rebuilt.
        _drop_foreign(db, [*foreign, *stored])
        for statement in BOOKKEEPING:
            db.execute(statement)
        versions = {
            row["name"]: row["version"]
            for row in db.rows("SELECT * FROM lineage_projection_versions")
        }
        tracked = db.rows(
            "SELECT store, position, head_hash FROM lineage_tracking WHERE name = ?",
            [TRACKING_NAME],
        )
        stale_log = bool(foreign or stored) or (
            bool(tracked) and _stale_tracking(tracked[0], versions, store, log, log_position)
        )
        for projection in PROJECTIONS:
            if stale_log or versions.get(projection.name) not in (None, projection.version):
                drop_owned(db, projection)
                versions.pop(projection.name, None)
        if stale_log:
            db.execute("DELETE FROM lineage_tracking")
        _create_projections(db, versions, tracked_position(db))
        db.execute(  # not ON CONFLICT DO NOTHING: an upsert costs DuckDB about 2 ms
            "INSERT INTO lineage_tracking SELECT ?, 0, ?, NULL "
            "WHERE NOT EXISTS (SELECT * FROM lineage_tracking WHERE name = ?)",
            [TRACKING_NAME, store, TRACKING_NAME],
        )
        db.execute("DELETE FROM lineage_schema")
        db.execute("INSERT INTO lineage_schema VALUES (?)", [_fingerprint()])


def _current(
    db: ReadModelDB,
    state: dict[str, Any] | None,
    store: str,
    log: ChainedLog | None,
    log_position: int | None,
) -> bool:
    """The file was built by this code from a prefix of this log, and nothing in it was replaced."""
    return (
        state is not None
        and state["store"] == store
        and state["fingerprint"] == _fingerprint()
        and (log_position is None or state["position"] <= log_position)
        and _faithful(state, log)
        and not _foreign_objects(db)
    )


def _stale_tracking(
    tracked: dict[str, Any],
    versions: dict[str, int],
    store: str,
    log: ChainedLog | None,
    log_position: int | None,
) -> bool:
    """The events the file copied are not this log's: another store, another `events` shape, a
    shorter or rewritten log."""
    return (
        tracked["store"] != store
        or versions.get("events", events_table.PROJECTION.version)
        != events_table.PROJECTION.version
        or (log_position is not None and tracked["position"] > log_position)
        or not _faithful(tracked, log)
    )


def _create_projections(db: ReadModelDB, versions: dict[str, int], position: int) -> None:
    for projection in PROJECTIONS:
        for statement in projection.create_statements():
            db.execute(statement)
        if (
            projection.name not in versions
            and projection is not events_table.PROJECTION
            and position
        ):
            # A new or changed projection catches up from the events already copied, not from the
            # store.
            for statement in projection.apply:
                db.execute(statement, {"lo": 0, "hi": position})
    # Every projection is now at this code's version. One plain insert: an upsert (INSERT OR
    # REPLACE, ON CONFLICT) costs DuckDB about 2 ms a statement, more than creating a table.
    db.execute("DELETE FROM lineage_projection_versions")
    db.execute(
        "INSERT INTO lineage_projection_versions SELECT unnest(?), unnest(?)",
        [[p.name for p in PROJECTIONS], [p.version for p in PROJECTIONS]],
    )


def drop_owned(db: ReadModelDB, projection: Projection) -> None:
    """Drop what a projection owns, whichever kind each name is now (a new version may turn a table
    into a view)."""
    for name in projection.owned_names():
        found = db.connection.execute(
            "SELECT table_type FROM information_schema.tables WHERE table_catalog = ? "
            "AND table_schema = 'main' AND table_name = ?",
            [db.catalog, name],
        ).fetchone()
        if found is not None:
            kind = "VIEW" if found[0] == "VIEW" else "TABLE"
            db.execute(f'DROP {kind} "{db.catalog}".main.{name}')


def _require_writable(db: ReadModelDB, doing: str) -> None:
    """A file opened read-only because it cannot be written (`_current_in_place`) is refused in our
    words, not DuckDB's ("attached in read-only mode", a traceback)."""
    if db.path != ":memory:" and not may_write(Path(db.path)):
        raise StoreUnavailable(
            f"expected to {doing} the read models at {db.path}, found the file cannot be written",
            hint=READ_ONLY_HINT,
        )


def rebuild(db: ReadModelDB, recorder: ChainedLog, store: str) -> int:
    _require_writable(db, "rebuild")
    with creating_in_file(db), db.transaction():
        _drop_foreign(db, [*_foreign_objects(db), *_stored_definitions(db)])
        for projection in reversed(PROJECTIONS):
            drop_owned(db, projection)
        db.execute("DROP TABLE IF EXISTS lineage_projection_versions")
        db.execute("DROP TABLE IF EXISTS lineage_tracking")
    ensure_schema(db, store)
    return catch_up(db, recorder, pages_per_commit=REBUILD_PAGES_PER_COMMIT)


@dataclass
class ReadModels:
    """A caught-up DuckDB connection for read commands (persistent file, or in memory for
    --as-of)."""

    db: ReadModelDB
    position: int
    as_of: int | None = None

    def refresh(self, lineage: OpenedStore) -> int:
        """Catch up again (a long-lived reader, e.g. a harness or `project --follow`, skips
        reopening the file)."""
        if self.as_of is None:
            if (lineage.log.max_notification_id() or 0) > self.position:
                _require_writable(self.db, "catch up")
            self.position = catch_up(self.db, lineage.log)
        return self.position

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> ReadModels:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_read_models(
    lineage: OpenedStore,
    *,
    as_of: int | None = None,
    catch_up_now: bool = True,
    path: Path | str | None = None,
) -> ReadModels:
    """Caught-up read models: the store's own file, or for `as_of` a new database (in memory, or at
    `path`)."""
    recorder = lineage.log
    store = lineage.store_url.redacted()
    if as_of is not None:
        db = ReadModelDB.open(path or ":memory:", memory_limit=lineage.settings.duckdb_memory)
        try:
            ensure_schema(db, store)
            return ReadModels(db, catch_up(db, recorder, stop=as_of), as_of)
        except BaseException:
            db.close()
            raise
    if not may_write(Path(lineage.read_models_path)):
        return _current_in_place(lineage, store, recorder)
    db = ReadModelDB.open(
        lineage.read_models_path,
        timeout=lineage.settings.lock_timeout_s,
        memory_limit=lineage.settings.duckdb_memory,
    )
    try:
        ensure_schema(db, store, recorder)
        position = catch_up(db, recorder) if catch_up_now else tracked_position(db)
    except BaseException:
        db.close()
        raise
    return ReadModels(db, position)


#: What a reader of a read-only copy can do when its read models are not current.
READ_ONLY_HINT = (
    "catch them up where the store can be written (`lineage project`), or give them a folder "
    "you may write: --home DIR --store sqlite:///PATH/TO/events.sqlite builds them in DIR"
)


def _current_in_place(lineage: OpenedStore, store: str, recorder: ChainedLog) -> ReadModels:
    """Read models that cannot be written (a read-only mount or copy): read as they are, read-only,
    when they hold the whole log as this code builds it; otherwise refused, saying what they lack
    and what would do."""
    path = Path(lineage.read_models_path)
    if not path.exists():
        raise StoreUnavailable(
            f"expected read models at {path} to read, found "
            f"none, and {path.parent} cannot be written "
            "to build them",
            hint=READ_ONLY_HINT,
        )
    db = ReadModelDB.open(
        path,
        timeout=lineage.settings.lock_timeout_s,
        memory_limit=lineage.settings.duckdb_memory,
        read_only=True,
    )
    try:
        if is_current(db, store, recorder):
            shadow_on_demand(db)
            return ReadModels(db, tracked_position(db))
        with within_limits():
            state = _state(db)
    except BaseException:
        db.close()
        raise
    db.close()
    position = recorder.max_notification_id() or 0
    found = (
        f"they hold the log up to position {state['position']} of {position}"
        if state is not None and state["position"] < position
        else "they were built by another version of rollout-lineage, or from another log"
    )
    raise StoreUnavailable(
        f"expected read models that hold the whole log at {path} (it cannot "
        f"be written, so they cannot be caught up here), found that {found}",
        hint=READ_ONLY_HINT,
    )


def differences_from_rebuild(lineage: OpenedStore) -> tuple[int, list[str]]:
    """Compare every projection table in the read-model file with a rebuild from the log up to the
    same position.

    The file is a cache anyone with write access to it could edit; this is how an auditor shows it
    was not. It holds tables only: a view, a macro or a table this code does not keep is named too,
    found before the file is opened for catch-up (which rebuilds such a file).
    """
    settings = lineage.settings
    foreign: list[str] = []
    if Path(lineage.read_models_path).exists():
        probe = ReadModelDB.open(
            lineage.read_models_path,
            timeout=settings.lock_timeout_s,
            memory_limit=settings.duckdb_memory,
            read_only=True,
        )
        try:
            found = [*_foreign_objects(probe), *_stored_definitions(probe)]
            foreign = [f"{kind.lower()} {name}" for kind, name in found]
        finally:
            probe.close()
    with tempfile.TemporaryDirectory(prefix="lineage-check-") as scratch:
        with open_read_models(lineage) as models:
            position = models.position
            kept = _table_digests(models.db)
        with open_read_models(
            lineage, as_of=position, path=Path(scratch) / "rebuild.duckdb"
        ) as fresh:
            rebuilt = _table_digests(fresh.db)
    return position, sorted(
        {name for name in rebuilt.keys() | kept.keys() if kept.get(name) != rebuilt.get(name)}
        | set(foreign)
    )


def _table_digests(db: ReadModelDB) -> dict[str, str]:
    """Each projection table's SHA-256 (`table_digest`: its columns and every row)."""
    from .table_digest import table_digest

    return {
        name: table_digest(db, name) for projection in PROJECTIONS for name in projection.tables
    }


def resolve_as_of(lineage: OpenedStore, text: str | None) -> int | None:
    """POSITION, or an ISO-8601 time: the last position before the first one recorded after it (what
    we knew then).

    "Before the first later one" rather than "the last one at or before": a writer whose clock ran
    behind may have left an early time after later ones, and what the log held at TIME is a prefix
    of it, never a selection.
    """
    if text is None:
        return None
    if text.isascii() and text.isdigit():
        if len(text) > 18:
            raise InvalidInput(
                f"expected a log position (at most 18 digits), found {len(text)} digits",
                hint="`lineage head` shows the log's last position",
            )
        return int(text)
    moment = parse_moment(text, "--as-of", "a log position or an ISO-8601 time")
    with open_read_models(lineage) as models:
        return models.db.scalar(
            "SELECT coalesce(max(position), 0) FROM events WHERE position < coalesce("
            "(SELECT min(position) FROM events WHERE recorded_at > ?), 9223372036854775807)",
            [moment],
        )
