"""All DuckDB access: opening the read-model file (waiting politely for a lock), transactions, bulk appends, queries.

DuckDB lets one process hold a file read-write and locks out every other process, readers included. Read
commands here also catch projections up, so every command opens the file read-write for a short session
and, when another process holds it, retries until `timeout` and then names the holder (DuckDB's own lock
message carries the PID) instead of failing on the first attempt.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import duckdb

from ..domain.errors import InvalidInput, StoreUnavailable

_MEMORY = re.compile(r"^\d+(\.\d+)?\s*(B|KB|MB|GB|TB|KiB|MiB|GiB|TiB)$")
_LOCK_HINT = re.compile(r"Conflicting lock is held in (?P<holder>.+?) \(PID (?P<pid>\d+)\)")


class ReadModelDB:
    def __init__(self, connection: duckdb.DuckDBPyConnection, path: str) -> None:
        self.connection = connection
        self.path = path

    @classmethod
    def open(cls, path: Path | str, *, timeout: float = 30.0, memory_limit: str = "256MB") -> ReadModelDB:
        """Open (waiting for another process's lock); a file database gets a bounded buffer pool and rare checkpoints.

        The memory limit keeps a rebuild's footprint flat however long the log is (DuckDB spills to disk past
        it), and checkpointing every 256 MB of WAL instead of 16 MB keeps a rebuild from rewriting its tables
        over and over as they grow.
        """
        if not _MEMORY.match(memory_limit):
            raise InvalidInput(f"expected a DuckDB memory limit such as 256MB or 2GB, found {memory_limit!r}",
                               hint="check LINEAGE_DUCKDB_MEMORY")
        db = cls._connect(path, timeout)
        if db.path != ":memory:":
            db.execute(f"SET memory_limit = '{memory_limit}'")
            db.execute("SET checkpoint_threshold = '256MB'")
        return db

    @classmethod
    def _connect(cls, path: Path | str, timeout: float) -> ReadModelDB:
        target = str(path)
        if target != ":memory:":
            Path(target).parent.mkdir(parents=True, exist_ok=True)
        deadline = time.monotonic() + timeout
        delay = 0.05
        while True:
            try:
                return cls(duckdb.connect(target), target)
            except duckdb.IOException as exc:
                if "lock" not in str(exc).lower():
                    raise StoreUnavailable(f"cannot open the read models at {target}: {exc}",
                                           hint="remove the file and run `lineage rebuild`; it is derived from the log") from exc
                if time.monotonic() >= deadline:
                    raise StoreUnavailable(
                        f"the read models at {target} are locked by another process ({_holder(str(exc))}); "
                        f"waited {timeout:g} s", hint="wait for that command to finish, or raise LINEAGE_LOCK_TIMEOUT") from exc
                time.sleep(delay)
                delay = min(delay * 2, 0.5)

    def close(self) -> None:
        self.connection.close()

    @contextmanager
    def transaction(self) -> Iterator[duckdb.DuckDBPyConnection]:
        self.connection.execute("BEGIN TRANSACTION")
        try:
            yield self.connection
        except BaseException:
            self.connection.execute("ROLLBACK")
            raise
        self.connection.execute("COMMIT")

    def execute(self, sql: str, params: Sequence[Any] | dict[str, Any] | None = None) -> None:
        self.connection.execute(sql, params)

    def append(self, table: str, rows: Sequence[tuple[Any, ...]]) -> None:
        """Bulk insert through DuckDB's appender (two orders of magnitude faster than executemany)."""
        if rows:
            appender = self.connection.appender(table)
            appender.append_rows(rows)
            appender.flush()

    def scalar(self, sql: str, params: Sequence[Any] | None = None) -> Any:
        row = self.connection.execute(sql, params).fetchone()
        return row[0] if row else None

    def rows(self, sql: str, params: Sequence[Any] | dict[str, Any] | None = None) -> list[dict[str, Any]]:
        cursor = self.connection.execute(sql, params)
        names = [d[0] for d in cursor.description or ()]
        return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]

    def rows_if_tables_exist(self, sql: str, params: Sequence[Any] | None = None) -> list[dict[str, Any]]:
        """`rows`, or [] when a table in the query does not exist yet (a new file)."""
        try:
            return self.rows(sql, params)
        except duckdb.CatalogException:
            return []

    def query(self, sql: str) -> tuple[list[str], Iterator[tuple[Any, ...]]]:
        """Run a user's read-only statement; errors become InvalidInput with DuckDB's own words."""
        try:
            cursor = self.connection.execute(sql)
        except duckdb.Error as exc:
            raise InvalidInput(f"the SQL was refused: {exc}", hint="`lineage tables` lists the read models and their columns") from None
        names = [d[0] for d in cursor.description or ()]

        def batches() -> Iterator[tuple[Any, ...]]:
            while chunk := cursor.fetchmany(2048):
                yield from chunk

        return names, batches()

    def table_names(self) -> set[str]:
        return {row[0] for row in self.connection.execute("SELECT table_name FROM information_schema.tables WHERE table_schema = 'main'").fetchall()}


def _holder(message: str) -> str:
    match = _LOCK_HINT.search(message)
    return f"{match['holder']}, PID {match['pid']}" if match else message
