"""All DuckDB access: opening the read-model file (waiting politely for a lock), transactions, bulk
appends, queries.

DuckDB lets one process hold a file read-write and locks out every other process, readers included.
Read commands here also catch projections up, so every command opens the file read-write for a short
session and, when another process holds it, retries until `timeout` and then names the holder
(DuckDB's own lock message carries the PID) instead of failing on the first attempt.
"""

from __future__ import annotations

import importlib
import logging
import re
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

from .interrupts import interrupts_held

# DuckDB's engine, the extension module its `duckdb` package re-exports (same wheel, own type stubs
# in `_duckdb-stubs`). Importing the package also loads its Python relation and expression layers
# and reads its version through importlib.metadata: about 60 ms more per process, and 30 ms more at
# interpreter exit, for an API nothing here calls but `fetch_whole` (which imports the package when
# it is asked for Arrow or pandas). The engine module's name is DuckDB's own layout, not its API: a
# release that moves it costs only the time saved.
# A command may load it while it runs, after the CLI's hold around its import: a Ctrl-C inside the
# engine's initialisation is nanobind's abort, so it is held here too (`interrupts`).
with interrupts_held():
    try:
        import _duckdb as duckdb
    except ImportError:  # pragma: no cover - depends on the installed DuckDB's layout
        import duckdb  # type: ignore[no-redef]

# DuckDB imports the modules its results need (decimal, uuid, zoneinfo) the first time a result
# holds one; a Ctrl-C landing inside that import comes back as DuckDB's "Required module 'zoneinfo'
# failed to import", a traceback instead of exit 130. Imported here, before any query (the CLI has
# loaded all but zoneinfo already: 2 ms more).
import decimal  # noqa: F401
import uuid  # noqa: F401
import zoneinfo  # noqa: F401

from ..domain.errors import InvalidInput, ReadLimitExceeded, StoreUnavailable
from .statement_limits import GRACE_S, Watchdog, headroom, memory_bounded

#: What DuckDB raises when a statement names a table or column the file does not hold (a new or
#: older file).
MISSING_OBJECT = (duckdb.CatalogException, duckdb.BinderException)
_MEMORY = re.compile(r"^(\d+(?:\.\d+)?)\s*(B|KB|MB|GB|TB|KiB|MiB|GiB|TiB)$")
_UNITS = {"B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12}
_UNITS.update({"KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40})
DEFAULT_MEMORY = "256MB"
_DERIVED_HINT = (
    "raise LINEAGE_DUCKDB_MEMORY (e.g. 2GB) and run the command again; the "
    "read models are derived from the log, so removing their file (and its "
    ".wal) and running `lineage rebuild` with the larger cap loses nothing"
)
#: A checkpoint with every this share of the memory cap in WAL. What the WAL holds DuckDB keeps in
#: its buffer pool until a checkpoint writes it out, and replays into it on the next open: at a
#: threshold near the cap, a long catch-up of large facts filled the pool, its checkpoint failed,
#: and the file could not be opened again at that cap. DuckDB's default is 16 MB; a rebuild
#: checkpointing that often rewrote its tables over and over.
CHECKPOINT_SHARE_OF_MEMORY = 4
#: Notices a person waiting should see at once (the CLI prints them on stderr; a harness's logging
#: gets them).
log = logging.getLogger("rollout_lineage.read_models")
_LOCK_HINT = re.compile(r"Conflicting lock is held in (?P<holder>.+?) \(PID (?P<pid>\d+)\)")
#: Every read-model connection, ours or a user's: no files, network or extensions beyond the
#: database itself, set when the connection opens (before any statement, so nothing stored in the
#: file can run with them on).
_SEALED = {
    "enable_external_access": False,
    "autoload_known_extensions": False,
    "autoinstall_known_extensions": False,
    "allow_community_extensions": False,
    "allow_unsigned_extensions": False,
}


class ReadModelDB:
    def __init__(self, connection: duckdb.DuckDBPyConnection, path: str) -> None:
        self.connection = connection
        self.path = path
        # The file's own catalog, read once: once the search path puts `system` first,
        # current_database() says so.
        row = connection.execute("SELECT current_database()").fetchone()
        assert row is not None  # a SELECT without FROM returns one row
        self.catalog: str = row[0]
        #: The memory cap it was opened with, in bytes (what `projections.paging` sizes its pages
        #: by).
        self.memory_limit_bytes = _bytes(DEFAULT_MEMORY)
        #: Called with every statement's text before DuckDB sees it: the read models' views and
        #: macros are made there, as TEMP objects of this connection, when a statement first names
        #: them (`projections.shadows`).
        self.before_statement: Callable[[str], None] | None = None

    @classmethod
    def open(
        cls,
        path: Path | str,
        *,
        timeout: float = 30.0,
        memory_limit: str = DEFAULT_MEMORY,
        read_only: bool = False,
        writable_directory: Path | None = None,
    ) -> ReadModelDB:
        """Open (waiting for another process's lock) with a bounded buffer pool and rare
        checkpoints.

        The memory limit keeps a rebuild's footprint flat however long the log is (DuckDB spills to
        disk past it). Checkpoints come with every quarter of the cap in WAL
        (`CHECKPOINT_SHARE_OF_MEMORY`). `read_only` is for users' SQL: DuckDB itself then refuses
        every write, however it is phrased (a writing CTE, `EXPLAIN ANALYZE` of DDL), and the
        configuration is locked as well, so a statement cannot lift the memory cap or turn file
        access back on.
        """
        if not _MEMORY.match(memory_limit):
            raise InvalidInput(
                f"expected a DuckDB memory limit such as 256MB or 2GB, found {memory_limit!r}",
                hint="check LINEAGE_DUCKDB_MEMORY",
            )
        config: dict[str, Any] = {
            **_SEALED,
            "memory_limit": memory_limit,
            "checkpoint_threshold": f"{_bytes(memory_limit) // CHECKPOINT_SHARE_OF_MEMORY}B",
        }
        if writable_directory is not None:
            # DuckDB takes the allowed list only while file access is still on: it goes off right
            # after, and then stays off for everything but that one directory (our own COPY ... TO,
            # `export parquet`).
            del config["enable_external_access"]
        if read_only:
            # Users' SQL past the memory cap fails (exit 4) rather than spilling to a temp folder
            # beside the file, which DuckDB would let grow to 90% of the free disk: a read writes
            # nothing anywhere.
            config["temp_directory"] = ""
            # One thread: under the process's memory bound (`statement_limits`), a DuckDB worker
            # thread that threw its first C++ exception (the bad_alloc itself) needed thread-local
            # memory glibc could not allocate, and glibc aborted the process (exit 127, "cannot
            # allocate memory for thread-local data", 2 runs in 6 of
            # list_distinct(range(20000000))). The one thread has thrown before (`_warm`). Parquet
            # exports run only our COPY, outside that bound: they keep every core.
            if writable_directory is None:
                config["threads"] = 1
        db = cls._connect(path, timeout, config, read_only)
        db.memory_limit_bytes = _bytes(memory_limit)
        if writable_directory is not None:
            db.connection.execute(
                "SET allowed_directories = ?", [[str(writable_directory).rstrip("/") + "/"]]
            )
            db.connection.execute("SET enable_external_access = false")
        # DuckDB draws it on stdout: data only there
        db.connection.execute("SET enable_progress_bar = false")
        if read_only:
            db.builtins_first()
            db.connection.execute("SET lock_configuration = true")
            _warm(db.connection)
        return db

    def cursor(self) -> ReadModelDB:
        """A connection of its own to this one's database (DuckDB's `cursor()`): it runs beside
        this one, from another thread, and sees what this one sees. What the database was opened
        as holds for it too (read-only, sealed, the memory cap, the locked configuration); this
        connection's TEMP objects and search path do not, so the caller makes its own
        (`shadows.shadow_on_demand`). Close it before the database is opened again: it keeps the
        database open."""
        db = type(self)(self.connection.cursor(), self.path)
        db.memory_limit_bytes = self.memory_limit_bytes
        return db

    def builtins_first(self) -> None:
        """Resolve names in DuckDB's own functions first, then this connection's TEMP definitions,
        then the file: a macro stored in the file can then shadow neither a built-in (`avg`) nor our
        views and macros. (New objects would go to the system catalog, so the schema code calls
        `file_first` before its DDL.)"""
        # pg_catalog holds about 45 built-ins of its own (pg_typeof, format_type, ...); DuckDB
        # searches it only after the path set here, so it is named too, or a macro in the file would
        # answer for them.
        self.connection.execute(
            "SET search_path = ?",
            [f'system.main,system.pg_catalog,temp.main,"{self.catalog}".main'],
        )

    def file_first(self) -> None:
        self.connection.execute("RESET search_path")

    @classmethod
    def _connect(
        cls, path: Path | str, timeout: float, config: dict[str, Any], read_only: bool
    ) -> ReadModelDB:
        target = str(path)
        if target != ":memory:":
            Path(target).parent.mkdir(parents=True, exist_ok=True)
        deadline = time.monotonic() + timeout
        delay = 0.05
        said = False
        while True:
            try:
                return cls(duckdb.connect(target, read_only=read_only, config=config), target)
            except (duckdb.OutOfMemoryException, duckdb.TransactionException) as exc:
                # Replaying the WAL under the cap fails as either, by how little room there is.
                if "WAL" not in str(exc):  # a cap too small for DuckDB to start at all
                    raise _refused_settings(exc) from None
                raise ReadLimitExceeded(
                    f"the read models at {target} cannot be opened within the memory cap: "
                    f"their write-ahead log does not fit in it ({str(exc).splitlines()[0]})",
                    hint=_DERIVED_HINT,
                ) from None
            except (duckdb.InvalidInputException, duckdb.ParserException) as exc:
                raise _refused_settings(exc) from None
            except duckdb.IOException as exc:
                if "lock" not in str(exc).lower():
                    raise StoreUnavailable(
                        f"cannot open the read models at {target}: {exc}",
                        hint="remove the file and run `lineage "
                        "rebuild`; it is derived from the log",
                    ) from exc
                if time.monotonic() >= deadline:
                    raise StoreUnavailable(
                        f"the read models at {target} are locked by another "
                        f"process ({_holder(str(exc))}); waited {timeout:g} s",
                        hint="wait for that command to finish, or raise LINEAGE_LOCK_TIMEOUT",
                    ) from exc
                if not said:  # at once, so a waiting command never looks hung
                    said = True
                    log.warning(
                        "waiting for the read models at %s: locked by %s (up to %g s)",
                        target,
                        _holder(str(exc)),
                        timeout,
                    )
                time.sleep(delay)
                delay = min(delay * 2, 0.5)

    def close(self) -> None:
        self.connection.close()

    @contextmanager
    def transaction(self) -> Iterator[duckdb.DuckDBPyConnection]:
        with within_limits():
            self.connection.execute("BEGIN TRANSACTION")
            try:
                yield self.connection
            except BaseException:
                # After a fatal error DuckDB refuses even the rollback: the first error is the one
                # to tell.
                with suppress(duckdb.Error):
                    self.connection.execute("ROLLBACK")
                raise
            self.connection.execute("COMMIT")

    def execute(self, sql: str, params: Sequence[Any] | dict[str, Any] | None = None) -> None:
        self._before(sql)
        with within_limits():
            self.connection.execute(sql, params)

    def append(self, table: str, rows: Sequence[tuple[Any, ...]]) -> None:
        """Bulk insert through DuckDB's appender (two orders of magnitude faster than
        executemany)."""
        if rows:
            with within_limits():
                appender = self.connection.appender(table)
                appender.append_rows(rows)
                appender.flush()

    def copy_to_parquet(self, relation: str, target: Path) -> None:
        """Write a table or view of ours (never a user's name) as a Parquet file; DuckDB takes no
        parameter here."""
        quoted = str(target).replace("'", "''")
        self._before(relation)
        with within_limits():
            self.connection.execute(
                f"COPY (SELECT * FROM {relation}) TO '{quoted}' (FORMAT parquet)"
            )

    def scalar(self, sql: str, params: Sequence[Any] | None = None) -> Any:
        self._before(sql)
        with within_limits():
            row = self.connection.execute(sql, params).fetchone()
        return row[0] if row else None

    def rows(
        self, sql: str, params: Sequence[Any] | dict[str, Any] | None = None
    ) -> list[dict[str, Any]]:
        self._before(sql)
        with within_limits():
            cursor = self.connection.execute(sql, params)
            names = [d[0] for d in cursor.description or ()]
            return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]

    def stream(
        self, sql: str, params: Sequence[Any] | dict[str, Any] | None = None
    ) -> Iterator[dict[str, Any]]:
        """`rows`, fetched a batch at a time: what a list command prints, in memory flat in the
        number of rows. The database must stay open until the iterator is spent."""
        self._before(sql)
        with within_limits():
            cursor = self.connection.execute(sql, params)
            names = [d[0] for d in cursor.description or ()]
            while batch := cursor.fetchmany(2048):
                yield from (dict(zip(names, row, strict=True)) for row in batch)

    def rows_if_tables_exist(
        self, sql: str, params: Sequence[Any] | None = None
    ) -> list[dict[str, Any]]:
        """`rows`, or [] when a table in the query does not exist yet (a new file)."""
        try:
            return self.rows(sql, params)
        except duckdb.CatalogException:
            return []

    def query(
        self,
        sql: str,
        *,
        timeout: float | None = None,
        params: dict[str, Any] | None = None,
        stated_timeout: float | None = None,
        batch_rows: int = 2048,
    ) -> tuple[list[str], Iterator[tuple[Any, ...]]]:
        """Run a user's statement; past `timeout` seconds (running and fetching) it is interrupted.

        Errors become InvalidInput with DuckDB's own words; the memory cap and the timeout become
        ReadLimitExceeded naming which (`stated_timeout`: the --timeout given, when `timeout` is
        what is left of it). Every call into DuckDB runs under `statement_limits.memory_bounded`;
        rows are fetched `batch_rows` at a time, so that many is what the process holds of them
        at once (a reader that keeps none: the server's answers).
        """
        cursor, watchdog = self._run_users(sql, params, timeout, stated_timeout=stated_timeout)
        names = [d[0] for d in cursor.description or ()]
        said = timeout if stated_timeout is None else stated_timeout

        def batches() -> Iterator[tuple[Any, ...]]:
            try:
                while True:
                    with self._users_limits(said, watchdog):
                        chunk = cursor.fetchmany(batch_rows)
                    if not chunk:
                        break
                    yield from chunk
            finally:
                if watchdog is not None:
                    watchdog.finish()

        return names, batches()

    def plan(
        self,
        sql: str,
        *,
        timeout: float | None = None,
        params: dict[str, Any] | None = None,
        stated_timeout: float | None = None,
    ) -> str:
        """The plan DuckDB would run for a user's statement, as text, under the same watchdog and
        limits as the statement itself (planning evaluates constant expressions, which can take as
        long as any query)."""
        explain = f"EXPLAIN {sql}"
        rows = self._run_users(
            explain,
            params,
            timeout,
            lambda: self.connection.execute(explain, params).fetchall(),
            stated_timeout=stated_timeout,
        )[0]
        return " ".join(str(cell) for row in rows for cell in row)

    def fetch_whole(
        self,
        sql: str,
        how: str,
        *,
        timeout: float | None = None,
        params: dict[str, Any] | None = None,
        stated_timeout: float | None = None,
    ) -> Any:
        """A user's SELECT fetched whole by DuckDB itself: `how` is `to_arrow_table` or `df` (a
        relation's, which copies nothing more)."""
        # The package adds `sql` and its relation API to the engine's connections (see the import
        # above).
        importlib.import_module("duckdb")
        return self._run_users(
            sql,
            params,
            timeout,
            lambda: getattr(self.connection.sql(sql, params=params), how)(),
            stated_timeout=stated_timeout,
        )[0]

    def _run_users(
        self,
        sql: str,
        params: dict[str, Any] | None,
        timeout: float | None,
        run: Callable[[], Any] | None = None,
        *,
        stated_timeout: float | None = None,
    ) -> tuple[Any, Watchdog | None]:
        """`run` (by default: execute `sql` with `params`) under the watchdog and the limits,
        DuckDB's refusals as InvalidInput. Returns its result and the watchdog still running (None
        once `run` fetched it all)."""
        self._before(sql)
        said = timeout if stated_timeout is None else stated_timeout
        watchdog = None
        if timeout:
            watchdog = Watchdog(
                timeout,
                self.connection.interrupt,
                f"{_past_timeout(said).message}: DuckDB did not stop at the interrupt within "
                f"{GRACE_S:g} s (one function call over one large value, or output nobody reads), "
                "so the process was ended",
            ).start()
        try:
            with self._users_limits(said, watchdog):
                try:
                    if run is None:
                        return self.connection.execute(sql, params), watchdog
                    result = run()
                except (duckdb.OutOfMemoryException, duckdb.InterruptException):
                    raise
                except duckdb.Error as exc:
                    if watchdog is not None and watchdog.fired:
                        raise  # whatever DuckDB raised while it stopped: the timeout is the reason
                    raise InvalidInput(
                        f"the SQL was refused: {exc}",
                        hint="`lineage tables` lists the read models and their columns",
                    ) from None
        except BaseException:
            if watchdog is not None:
                watchdog.finish()
            raise
        if watchdog is not None:
            watchdog.finish()
        return result, None

    @contextmanager
    def _users_limits(self, timeout: float | None, watchdog: Watchdog | None) -> Iterator[None]:
        """One call into DuckDB for a user's statement: the process's memory bound held around it,
        and what DuckDB raises told as the limit that was hit (the deadline, once the watchdog
        fired, whatever DuckDB raised while it stopped; else the memory, when an allocation
        failed)."""
        _warm_this_thread(self.connection)
        try:
            with memory_bounded(headroom(self.memory_limit_bytes)):
                yield
        except (duckdb.Error, MemoryError) as exc:
            if watchdog is not None and watchdog.fired:
                raise _past_timeout(timeout) from None
            if isinstance(exc, (duckdb.OutOfMemoryException, MemoryError)):
                raise _users_over_cap(exc, self.memory_limit_bytes) from None
            if isinstance(exc, duckdb.InterruptException):
                raise _past_timeout(timeout) from None
            raise

    def _before(self, sql: str) -> None:
        if self.before_statement is not None:
            with within_limits():
                self.before_statement(sql)

    def table_names(self) -> set[str]:
        return {
            row[0]
            for row in self.connection.execute(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = 'main'"
            ).fetchall()
        }


@contextmanager
def within_limits(timeout: float | None = None) -> Iterator[None]:
    """DuckDB's memory cap and an interrupted statement become one clear error (exit 4), never a
    traceback."""
    try:
        yield
    except duckdb.OutOfMemoryException as exc:
        raise _over_cap(exc) from None
    except duckdb.InterruptException:
        raise _past_timeout(timeout) from None
    except duckdb.FatalException as exc:
        if "checkpoint" not in str(exc):
            raise
        raise _checkpoint_over_cap(exc) from None
    except duckdb.TransactionException as exc:
        # A commit that found no room under the cap for a block it writes.
        if "failed to pin" in str(exc) or "could not allocate" in str(exc):
            raise _over_cap(exc) from None
        if "write" in str(exc).lower():
            raise _unwritable(exc) from None
        raise
    except duckdb.IOException as exc:
        raise _unwritable(exc) from None


def _warm(connection: duckdb.DuckDBPyConnection) -> None:
    """Throw and catch one error inside DuckDB on this thread before any statement runs under the
    memory bound, so the C++ runtime's thread-local state is allocated while there is room (see
    `threads` in `open`)."""
    with suppress(duckdb.Error):
        connection.execute("SELECT error('warming up the error path')")
    _THREADS.warm = True


#: Which threads have thrown inside DuckDB already (`_warm`).
_THREADS = threading.local()


def _warm_this_thread(connection: duckdb.DuckDBPyConnection) -> None:
    """`_warm`, once per thread: a server runs users' statements and fetches their rows from any of
    its worker threads, each with thread-local state of its own. On a connection of its own: a
    statement on `connection` would end the result a fetch is reading."""
    if not getattr(_THREADS, "warm", False):
        spare = connection.cursor()
        try:
            _warm(spare)
        finally:
            spare.close()


def _past_timeout(timeout: float | None) -> ReadLimitExceeded:
    return ReadLimitExceeded(
        f"the query ran past its {timeout or 0:g} s timeout (--timeout) and was stopped",
        hint="raise --timeout, or ask for less (filter, aggregate, LIMIT)",
    )


def _users_over_cap(exc: BaseException, cap: int) -> ReadLimitExceeded:
    """A user's statement past its memory: DuckDB's buffer cap, or the process bound around it (a
    value built inside one function call, which DuckDB's cap does not count)."""
    found = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return ReadLimitExceeded(
        f"the query needed more memory than its cap allows (LINEAGE_DUCKDB_MEMORY: "
        f"{cap / 1e6:g} MB for DuckDB's buffers; the process may map "
        f"{headroom(cap) / 1e6:.0f} MB more while it runs): {found}",
        hint="raise LINEAGE_DUCKDB_MEMORY (e.g. 2GB), or ask for less (filter, aggregate, LIMIT)",
    )


def _over_cap(exc: Exception) -> ReadLimitExceeded:
    return ReadLimitExceeded(
        f"the read models needed more memory than their cap allows: {str(exc).splitlines()[0]}",
        hint="raise LINEAGE_DUCKDB_MEMORY (e.g. 2GB), or ask for less (filter, aggregate, LIMIT)",
    )


def _checkpoint_over_cap(exc: Exception) -> ReadLimitExceeded:
    """DuckDB could not write its checkpoint within the cap (it pins a whole column segment of a row
    group: thousands of large facts in `events` need more than 256 MB). What was committed is in its
    WAL, which the next open replays into memory under the same cap."""
    return ReadLimitExceeded(
        f"the read models could not be checkpointed within "
        f"their memory cap: {str(exc).splitlines()[0]}",
        hint=_DERIVED_HINT,
    )


def _refused_settings(exc: Exception) -> InvalidInput:
    return InvalidInput(
        f"DuckDB refused the read models' settings: {str(exc).splitlines()[0]}",
        hint="check LINEAGE_DUCKDB_MEMORY (e.g. 256MB or 2GB)",
    )


def _unwritable(exc: Exception) -> StoreUnavailable:
    """A full disk or a read-only folder: the transaction was rolled back, so the file holds the
    last page."""
    return StoreUnavailable(
        f"the read models could not be written: {str(exc).splitlines()[0]}",
        hint="free space where the read models live (LINEAGE_HOME) and run the command again; "
        "they resume from the last page written",
    )


def _holder(message: str) -> str:
    match = _LOCK_HINT.search(message)
    return f"{match['holder']}, PID {match['pid']}" if match else message


def _bytes(memory_limit: str) -> int:
    """A memory limit as DuckDB reads it (`_MEMORY`: 256MB is 256,000,000 bytes, 256MiB
    268,435,456)."""
    found = _MEMORY.match(memory_limit)
    assert found is not None  # checked where the limit is taken
    return int(float(found[1]) * _UNITS[found[2]])
